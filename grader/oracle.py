"""What the oracle checks compare with: the instructor's reference, or its stored outputs (the student kit).

Two editions of the grader are built from this one source (README, "Two kits"):

* the instructor's: the reference head is installed, and :class:`LiveOracle` runs it here, in the grader
  (trusted code, never in a worker);
* the student kit (``grade student-kit``): no reference code at all. :class:`SnapshotOracle` reads the
  reference's outputs on fixed public cases from a safetensors file written when the kit was built. It
  holds numbers, never code that computes them.

Only ``reference_match`` and the Gaussian checks compare with an oracle; every other check judges the
head against itself. Pictures (the "reference weights" beside a failing check's heatmap), the KV-cache
check's expected rows and the CUDA check's plain baseline need the head's formula on arbitrary inputs:
the instructor's edition runs the reference, the kit runs Definition 2.2 as the diagnosis' error model
states it (the lecture's formula, with no change applied).
"""

from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import torch

from grader._paths import bundled
from grader.inputs import FAMILIES, Case, Shape, family_cases

SNAPSHOT_FILE = "step4.safetensors"
MEASURED_FILE = "measured.json"  # beside the reference head: its Exercise 3 measurements made ahead
_OWN = ("reference_match", "gaussian")  # the snapshot's keys the oracle itself reads (see case_key, gaussian_key)
HeadFunction = Callable[..., tuple[torch.Tensor, torch.Tensor]]
_TENSORS = ("X", "W_Q", "W_K", "W_V")


class Oracle(ABC):
    """The reference as the checks see it."""

    edition: ClassVar[str]
    module: ModuleType | None = None  # the reference module itself; None in the kit (no bug library there)

    @abstractmethod
    def public_cases(self, check_id: str) -> tuple[int, list[Case]] | None:
        """The fixed cases an oracle check uses in this edition and the base seed they were drawn at, or None:
        the check draws seeded cases."""

    @abstractmethod
    def expected(self, case: Case, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference's (out, weights) in float64 on exactly the case's values (``reference_match``)."""

    @abstractmethod
    def gaussian_weights(self, T: int, bandwidth: float) -> torch.Tensor:
        """The reference's masked Gaussian positional kernel, (T, T) float64 (Exercise 7)."""

    @abstractmethod
    def statistics(self, d_k: int, *, T: int, n_samples: int, seed: int) -> dict[str, float]:
        """The reference's Exercise 3 measurement (the report's plot)."""

    @abstractmethod
    def head_function(self) -> HeadFunction:
        """A trusted ``f(X, W_Q, W_K, W_V, causal=True) -> (out, weights)``, differentiable, on any device."""

    def attention(self, case: Case, causal: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """The correct (out, weights) in float64 on any case: pictures and the KV-cache rows."""
        with torch.no_grad():
            return self.head_function()(*(t.double() for t in case.tensors().values()), causal=causal)

    def stored_meta(self, part: str) -> Any:
        """What the kit was built with for another part of the grader (the diagnosis's known bugs): its metadata,
        None where nothing is stored (the instructor's edition)."""
        return None

    def stored_tensors(self, part: str) -> dict[str, torch.Tensor]:
        """That part's tensors, keyed below ``part``."""
        return {}


class LiveOracle(Oracle):
    """The instructor's edition: the reference module, run in the grader."""

    edition = "instructor"

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def public_cases(self, check_id: str) -> tuple[int, list[Case]] | None:
        return None

    def expected(self, case: Case, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
        return self.attention(case, causal)

    def gaussian_weights(self, T: int, bandwidth: float) -> torch.Tensor:
        assert self.module is not None
        with torch.no_grad():
            return self.module.gaussian_positional_weights(T, bandwidth).double()

    def statistics(self, d_k: int, *, T: int, n_samples: int, seed: int) -> dict[str, float]:
        assert self.module is not None
        ahead = measured_ahead(self.module).get(measurement_key(d_k, T, n_samples, seed))
        if ahead is not None:
            return dict(ahead)
        return dict(self.module.score_scale_statistics(d_k, T=T, n_samples=n_samples, seed=seed))

    def head_function(self) -> HeadFunction:
        assert self.module is not None
        fn: HeadFunction = self.module.causal_self_attention
        return fn


def lecture_formula(
    X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor, causal: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Definition 2.2 (mask of Definition 4.1, scale of Lemma 5.5): the diagnosis' error model with no change
    applied, operation for operation (a test pins the two equal), written out here so that the oracle, which
    the checks use, does not import the diagnosis."""
    q, k, v = X @ W_Q, X @ W_K, X @ W_V  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
    s = (q @ k.transpose(-2, -1)) * W_Q.shape[1] ** -0.5  # (B, T, T)
    if causal:
        T = X.shape[1]
        future = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)  # (T, T), j > i
        s = s.masked_fill(future, float("-inf"))
    w = torch.softmax(s, dim=-1).to(X.dtype)  # (B, T, T)
    return w @ v, w  # (B, T, T) x (B, T, d_v) -> (B, T, d_v)


class SnapshotOracle(Oracle):
    """The student kit's edition: the reference's outputs on fixed public cases, read from safetensors."""

    edition = "student"

    def __init__(self, path: Path) -> None:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            self._meta: dict[str, Any] = {k: json.loads(v) for k, v in (f.metadata() or {}).items()}
            self._tensors = {k: f.get_tensor(k) for k in f.keys() if k.split("/", 1)[0] in _OWN}  # noqa: SIM118
        self.path = path
        self.seed: int = self._meta["seed"]
        self._parts: dict[str, dict[str, torch.Tensor]] = {}

    def public_cases(self, check_id: str) -> tuple[int, list[Case]] | None:
        if check_id != "reference_match":
            return None
        cases = []
        for k, (shape, seed) in enumerate(zip(self._meta["families"], self._meta["case_seeds"], strict=True)):
            X, W_Q, W_K, W_V = (self._tensors[case_key(k, n)] for n in _TENSORS)
            cases.append(Case(X, W_Q, W_K, W_V, Shape(**shape), seed))
        return self.seed, cases

    def expected(self, case: Case, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
        k = self._meta["case_seeds"].index(case.seed)
        stored = (self._tensors[case_key(k, n)] for n in _TENSORS)
        if not all(torch.equal(a.double(), b) for a, b in zip(case.tensors().values(), stored, strict=True)):
            raise LookupError(f"case {case.seed} is not one of the stored public cases")
        which = causal_name(causal)
        return self._tensors[case_key(k, f"out_{which}")], self._tensors[case_key(k, f"w_{which}")]

    def gaussian_weights(self, T: int, bandwidth: float) -> torch.Tensor:
        key = gaussian_key(T, bandwidth)
        if key not in self._tensors:
            raise LookupError(f"the kit stores no Gaussian kernel for T={T}, h={bandwidth:g}")
        return self._tensors[key]

    def statistics(self, d_k: int, *, T: int, n_samples: int, seed: int) -> dict[str, float]:
        """The reference's measurement stored at the kit's seed (the plot's reference side: a property of the
        distribution up to sampling noise, so another seed shows the same points)."""
        stats = self._meta["statistics"]
        if (T, n_samples) != (stats["T"], stats["n_samples"]) or str(d_k) not in stats["values"]:
            raise LookupError(f"the kit stores no Exercise 3 measurement for d_k={d_k}, T={T}, n={n_samples}")
        return {k: (v if v is not None else math.nan) for k, v in stats["values"][str(d_k)].items()}

    def head_function(self) -> HeadFunction:
        return lecture_formula

    def stored_meta(self, part: str) -> Any:
        return self._meta.get(part)

    def stored_tensors(self, part: str) -> dict[str, torch.Tensor]:
        """Read on first use: a head that fails nothing is never diagnosed."""
        if part not in self._parts:
            from safetensors import safe_open

            with safe_open(str(self.path), framework="pt") as f:
                below = [k for k in f.keys() if k.startswith(f"{part}/")]  # noqa: SIM118 (safe_open is not a dict)
                self._parts[part] = {k.removeprefix(f"{part}/"): f.get_tensor(k) for k in below}
        return self._parts[part]


def causal_name(causal: bool) -> str:
    return "causal" if causal else "unmasked"


def case_key(k: int, name: str) -> str:
    return f"reference_match/{k}/{name}"


def gaussian_key(T: int, bandwidth: float) -> str:
    return f"gaussian/{T}/{float(bandwidth)!r}"


def public_case_list(seed: int) -> list[Case]:
    """The cases ``reference_match`` draws at ``seed``: the kit stores those of the rubric's seed."""
    return list(family_cases(seed, "reference_match", FAMILIES))


def source_sha256(source: Path) -> str:
    """What measurements made ahead are tied to: the reference's source as it is on disk."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def measurement_key(d_k: int, T: int, n_samples: int, seed: int) -> str:
    return f"d_k={d_k} T={T} n_samples={n_samples} seed={seed}"


@cache
def measured_ahead(module: ModuleType) -> dict[str, dict[str, float]]:
    """The reference's Exercise 3 measurements made ahead (``python -m grader.visuals``), by key, while the reference
    is the very source they were made from; else none. The report's plot takes four of them in every grade at the
    rubric's seed, about 0.1 s of the grader's CPU while the worker answers (issue 37); any other is measured."""
    source = Path(str(module.__file__))
    try:
        stored = json.loads(source.with_name(MEASURED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if stored.get("source_sha256") != source_sha256(source):
        return {}
    return dict(stored.get("values", {}))


@cache
def load_oracle() -> Oracle:
    """The instructor's reference when it is installed, else the kit's stored outputs; one per process (the
    report's Exercise 3 points are cached per oracle)."""
    from grader import library

    if library.reference_available():
        return LiveOracle(library.load_reference())
    path = snapshot_path()
    if path.is_file():
        return SnapshotOracle(path)
    raise RuntimeError(
        "this installation of the grader holds neither the instructor's reference nor the student kit's "
        f"stored outputs ({path}); reinstall it from the course's wheel"
    )


def snapshot_path() -> Path:
    return bundled("snapshots") / SNAPSHOT_FILE
