"""What a generated head does, observed in float64 and beyond: the ground for proving its truth mechanically.

``observe(source)`` runs a module that defines ``causal_self_attention`` on a fixed set of cases and returns
everything a caller could see of it, as data:

- its outputs in float64 at ordinary, large and huge scores, with a zero input row, at two sets of widths (d_k != d_v
  and d = d_k = d_v), causal and not; in float32, float16 and bfloat16; the gradients of a fixed functional of them;
- the exception a case raised instead (its class), when it raised;
- whether the call changed its inputs, what it printed, where it left the global random state (torch's, NumPy's and
  Python's: every call starts from the same seeded state), the default dtype it left, the files it wrote; the same of
  the import.

Two observations of two heads are compared exactly (NaN equals NaN, dtypes and shapes count): a mutation is proven
to change a head when some entry differs. Every call starts from the same seeded global random state, so a head with
dropout is observed the same way twice. The heads run in this process (they are the generator's own programs): each
observation runs in a fresh temporary folder, with stdout captured and the default dtype and the random states put
back afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import os
import random
import sys
import tempfile
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

HEAD = "causal_self_attention"
SEED = 5200


@dataclass(frozen=True)
class Case:
    name: str
    dtype: torch.dtype = torch.float64
    causal: bool = True
    B: int = 2
    T: int = 7
    d: int = 5
    d_k: int = 6
    d_v: int = 3
    scale: float = 1.0  # X is multiplied by it: the scores grow with its square
    zero_row: int | None = None  # this input row of every sequence is zero (its scores are exactly 0)
    grad: bool = False


CASES = (
    Case("float64"),
    Case("float64 causal=False", causal=False),
    Case("float64 d=d_k=d_v", T=4, d=4, d_k=4, d_v=4),
    Case("float64 d=d_k=d_v causal=False", T=4, d=4, d_k=4, d_v=4, causal=False),
    Case("float64 scores ~1e5", scale=1e2),
    Case("float64 scores ~1e7", scale=1e3),
    Case("float64 scores ~1e11", scale=1e5),
    Case("float64 zero row", zero_row=2),
    Case("float32", dtype=torch.float32),
    Case("float16", dtype=torch.float16),
    Case("bfloat16", dtype=torch.bfloat16),
    Case("float64 gradients", grad=True),
)


def inputs(case: Case) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The case's X, W_Q, W_K, W_V (seeded by the case's name; made in float64, then cast)."""
    g = torch.Generator().manual_seed(SEED + int(hashlib.sha256(case.name.encode()).hexdigest()[:6], 16))
    X = torch.randn(case.B, case.T, case.d, generator=g, dtype=torch.float64) * case.scale
    if case.zero_row is not None:
        X[:, case.zero_row] = 0.0
    W = [torch.randn(case.d, n, generator=g, dtype=torch.float64) for n in (case.d_k, case.d_k, case.d_v)]
    return tuple(t.to(case.dtype) for t in (X, *W))  # type: ignore[return-value]


def lecture_head(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor, causal: bool = True):
    """Definition 2.2 with the mask of Definition 4.1, written here once to prove the programs right."""
    scores = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(W_Q.shape[1])
    if causal:
        T = X.shape[1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    weights = scores.softmax(dim=-1)
    return weights @ (X @ W_V), weights


# -- running a head ------------------------------------------------------------------------------------


def _rng_state() -> str:
    """A digest of the global random states (torch's, NumPy's, Python's)."""
    np_state = np.random.get_state()
    digest = hashlib.sha256(torch.get_rng_state().numpy().tobytes())
    digest.update(np_state[1].tobytes() + str(np_state[2:]).encode())  # type: ignore[index]
    digest.update(repr(random.getstate()).encode())
    return digest.hexdigest()[:16]


def _seed_everything() -> None:
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    random.seed(SEED)


@contextlib.contextmanager
def _quarantine() -> Iterator[tuple[io.StringIO, str]]:
    """A fresh folder as the working directory, stdout captured, warnings silenced, one thread; the default dtype,
    the random states, the thread count and the working directory put back afterwards."""
    dtype, cwd, threads = torch.get_default_dtype(), os.getcwd(), torch.get_num_threads()
    states = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    torch.set_num_threads(1)  # these heads are tiny: threads only wait on each other
    out = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="generated_probe_") as tmp:
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(out), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield out, tmp
        finally:
            os.chdir(cwd)
            torch.set_num_threads(threads)
            torch.set_default_dtype(dtype)
            torch.set_rng_state(states[0])
            np.random.set_state(states[1])
            random.setstate(states[2])


def load(source: str, name: str = "generated_head") -> types.ModuleType:
    """Execute ``source`` as a module (registered while it runs: a dataclass looks its module up)."""
    module = types.ModuleType(name)
    module.__file__ = f"{name}.py"
    sys.modules[name] = module
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def _effects(out: io.StringIO, tmp: str) -> dict[str, Any]:
    printed = out.getvalue()
    out.seek(0)
    out.truncate()
    return {
        "printed": printed,
        "random state": _rng_state(),  # where the call left it (each call starts from the same seeded state)
        "default dtype": str(torch.get_default_dtype()),
        "files": tuple(sorted(os.listdir(tmp))),
    }


def _call(head: Any, case: Case) -> dict[str, Any]:
    X, W_Q, W_K, W_V = inputs(case)
    given = [t.clone() for t in (X, W_Q, W_K, W_V)]
    if case.grad:
        for t in given:
            t.requires_grad_(True)
    args = [t.clone() if not case.grad else t for t in given]
    seen: dict[str, Any] = {}
    try:
        out, weights = head(*args, causal=case.causal)
        seen["out"], seen["weights"] = out, weights
        if case.grad:
            g = torch.Generator().manual_seed(SEED)
            loss = (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum()
            loss = loss + (weights * torch.randn(weights.shape, generator=g, dtype=weights.dtype)).sum()
            grads = torch.autograd.grad(loss, given, allow_unused=True) if loss.requires_grad else (None,) * 4
            seen["gradients"] = tuple(grads)
    except Exception as exc:  # a head that raises is observed raising
        seen["raised"] = type(exc).__name__
    seen["inputs changed"] = tuple(not _same(a.detach(), b) for a, b in zip(args, (X, W_Q, W_K, W_V), strict=True))
    return seen


def observe(source: str) -> dict[str, Any]:
    """Everything a caller sees of the head in ``source`` (see the module's docstring), keyed by what it is."""
    seen: dict[str, Any] = {}
    with _quarantine() as (out, tmp):
        _seed_everything()
        try:
            head = getattr(load(source), HEAD)
        except Exception as exc:
            seen["import raised"] = type(exc).__name__
            return seen
        seen |= {f"import: {k}": v for k, v in _effects(out, tmp).items()}
        for case in CASES:
            _seed_everything()
            seen |= {f"{case.name}: {k}": v for k, v in _call(head, case).items()}
            seen |= {f"{case.name}: {k}": v for k, v in _effects(out, tmp).items()}
    return seen


# -- comparing -----------------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """Exactly the same: tensors of one dtype and shape, equal where finite, NaN where NaN, the same infinities."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        a, b = a.detach(), b.detach()
        if a.is_floating_point():
            return bool(((a == b) | (a.isnan() & b.isnan())).all())
        return bool(torch.equal(a, b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The entries in which two observations differ (one that only one of them has differs)."""
    return [k for k in sorted(a.keys() | b.keys()) if k not in a or k not in b or not _same(a[k], b[k])]


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype != torch.float64:  # low precision: another rounding of the same computation
            return bool(torch.allclose(a.double(), b.double(), rtol=5e-2, atol=5e-2, equal_nan=True))
        return bool(torch.allclose(a, b, rtol=tol, atol=tol, equal_nan=True))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b, strict=True))
    return _same(a, b)


def unlike(a: dict[str, Any], b: dict[str, Any], tol: float = 1e-9) -> list[str]:
    """The entries in which two observations differ beyond rounding (float64 to ``tol``; the low-precision dtypes
    loosely; everything else exactly): how a head fixed another way than by undoing the mutation is compared."""
    return [k for k in sorted(a.keys() | b.keys()) if k not in a or k not in b or not _close(a[k], b[k], tol)]


def lecture_mismatches(source: str, tol: float = 1e-10) -> list[str]:
    """Where a correct program's float64 results leave the lecture's head (outputs, weights, gradients), or where it
    has an effect beyond its results (it prints, writes, changes the default dtype or its inputs, or raises)."""
    seen = observe(source)
    problems = [k for k in seen if k.endswith("raised")]
    problems += [k for k, v in seen.items() if k.endswith(("printed", "files")) and v]
    problems += [k for k, v in seen.items() if k.endswith("default dtype") and v != str(torch.get_default_dtype())]
    problems += [k for k, v in seen.items() if k.endswith("inputs changed") and any(v)]
    for case in CASES:
        if case.dtype != torch.float64 or case.scale > 1e2:
            continue
        X, W_Q, W_K, W_V = inputs(case)
        given = [t.clone().requires_grad_(case.grad) for t in (X, W_Q, W_K, W_V)]
        out, weights = lecture_head(*given, causal=case.causal)
        want: dict[str, Any] = {"out": out.detach(), "weights": weights.detach()}
        if case.grad:
            g = torch.Generator().manual_seed(SEED)
            loss = (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum()
            loss = loss + (weights * torch.randn(weights.shape, generator=g, dtype=weights.dtype)).sum()
            want["gradients"] = tuple(torch.autograd.grad(loss, given))
        for k, v in want.items():
            key = f"{case.name}: {k}"
            if key not in seen or not _close(seen[key], v, tol):
                problems.append(key)
    for case in CASES:
        low = case.dtype != torch.float64 and f"{case.name}: out" in seen
        if low and {seen[f"{case.name}: out"].dtype, seen[f"{case.name}: weights"].dtype} != {case.dtype}:
            problems.append(f"{case.name}: dtype")
    return problems
