"""Name the known bug a failing head most likely has, by running the instructor's chaffs beside it.

When some check failed, every core contract function of the head is called on a few fixed small
probes (float64, causal and not, large scores; one call per probe through the proxy, reused for every
chaff). Each chaff of that function runs on the same probes here in the grader: chaffs are trusted
instructor code, materialised from the library. A chaff whose results match the head's on every probe
(:func:`same`: equal shapes, equal non-finite patterns, finite values within :data:`MATCH`) names the
bug, with the catalog's hint. Two rules keep the guess honest: a head that matches the reference on a
function's probes gets no diagnosis for it (so a correct head is never diagnosed), and a head that
matches no chaff gets no guess.

Calls are made after seeding torch's global generator identically on both sides, so a chaff that
draws random numbers (dropout left on, the global RNG) replays exactly. Chaffs that compute the
reference's values (a slow loop, the built-in kernel) cannot be told apart by their results; the
performance and forbidden-API checks name those directly.
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any

import torch

from grader.compare import Tolerance
from grader.head import Head, MissingFunction, StudentFailure
from grader.library import KnownHead, known_heads
from grader.models import CheckResult, Diagnosis, GradeResult
from grader.sandbox import _ops

MATCH = Tolerance(rtol=1e-9, atol=1e-12)  # float64: another way to write the same arithmetic, not float32
PROBE_SEED = 20417
FAILING = ("failed", "error", "timeout")
VALUE_IDENTICAL = frozenset({"performance", "forbidden_api"})
NOISE = ("times", "traced")  # how long a call took, which APIs it used: not what it computed


@dataclass(frozen=True)
class Probe:
    """One request: argument specs and tensors as the ``call`` op takes them, plus its options."""

    args: list[Any]
    tensors: dict[str, torch.Tensor]
    options: dict[str, Any] = field(default_factory=dict)
    op: str = "seeded_call"


@dataclass
class Seen:
    """What one probe produced, in comparable form: an error, or named values and structure."""

    error: bool = False
    values: dict[str, torch.Tensor] = field(default_factory=dict)
    shape: dict[str, Any] = field(default_factory=dict)  # kinds, types and problems, compared exactly


def indistinguishable(chaff: KnownHead) -> bool:
    """A chaff that only the performance or forbidden-API checks catch computes the reference's values:
    neither a probe nor a student's property test can tell it from a correct head."""
    return set(chaff.caught_by) <= VALUE_IDENTICAL


# ---- probes --------------------------------------------------------------------------------------


def _attention_probes() -> list[Probe]:
    g = torch.Generator().manual_seed(PROBE_SEED)

    def inputs(scale: float) -> dict[str, torch.Tensor]:
        B, T, d, d_k, d_v = 2, 5, 4, 3, 2  # d, d_k and d_v distinct; B = 2 couples nothing in a right head
        X = scale * torch.randn(B, T, d, generator=g, dtype=torch.float64)
        W = {
            n: torch.randn(d, w, generator=g, dtype=torch.float64)
            for n, w in (("W_Q", d_k), ("W_K", d_k), ("W_V", d_v))
        }
        return {"X": X, **W}

    base, large = inputs(1.0), inputs(300.0)  # large: scores of order 1e5, far past exp's range
    upstream = {"u_out": torch.randn(2, 5, 2, generator=g, dtype=torch.float64),
                "u_w": torch.randn(2, 5, 5, generator=g, dtype=torch.float64)}  # fmt: skip
    args = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]
    grad = {"wrt": ["X", "W_Q", "W_K", "W_V"], "upstream": {"0": "u_out", "1": "u_w"}}

    def kw(causal: bool) -> dict[str, Any]:
        return {"kwargs": {"causal": {"v": causal}}}

    return [
        Probe(args, base, {**kw(True), "return_inputs": True}),
        Probe(args, base, kw(False)),
        Probe(args, {**base, **upstream}, {**kw(True), "grad": grad}),
        Probe(args, large, kw(True)),
        Probe(args, large, kw(False)),
    ]


def _kernel_probes() -> list[Probe]:
    return [Probe([{"v": T}, {"v": h}], {}) for T, h in ((5, 1.0), (6, 2.5), (4, 0.5))]


def _statistics_probes() -> list[Probe]:
    return [
        Probe([{"v": d_k}], {}, {"kwargs": {"T": {"v": T}, "n_samples": {"v": n}, "seed": {"v": s}}})
        for d_k, T, n, s in ((4, 8, 20, 3), (16, 6, 10, 5))
    ]


def _streaming_probes() -> list[Probe]:
    g = torch.Generator().manual_seed(PROBE_SEED + 1)
    Q, K, V = (torch.randn(2, 7, n, generator=g, dtype=torch.float64) for n in (3, 3, 2))
    tensors = {"Q": Q, "K": K, "V": V}

    def call(block: int, causal: bool, scale: float = 1.0) -> Probe:
        args = [{"t": "Q"}, {"t": "K"}, {"t": "V"}, {"v": block}]
        scaled = {**tensors, "Q": scale * Q}
        return Probe(args, scaled, {"kwargs": {"causal": {"v": causal}}, "no_grad": True})

    return [call(3, True), call(2, False), call(3, True, scale=30.0)]


def _kv_cache_probes() -> list[Probe]:
    g = torch.Generator().manual_seed(PROBE_SEED + 2)
    X = torch.randn(2, 4, 4, generator=g, dtype=torch.float64)
    W = {n: torch.randn(4, w, generator=g, dtype=torch.float64) for n, w in (("W_Q", 3), ("W_K", 3), ("W_V", 2))}
    return [Probe([], {"X": X, **W}, op="kv_cache")]


def _qk_kernel(seen: Seen) -> Seen:
    """Queries and keys are judged by the weights they give (Example 7.4): many (Q, K) are right."""
    if seen.error or sorted(seen.values) != ["r0", "r1"]:
        return seen
    Q, K = seen.values["r0"].double(), seen.values["r1"].double()
    if Q.dim() != 2 or Q.shape != K.shape:
        return seen
    T = Q.shape[0]
    scores = (Q @ K.T / math.sqrt(Q.shape[1])).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return Seen(values={"kernel": torch.softmax(scores, dim=-1)}, shape=seen.shape)


PROBES: dict[str, Callable[[], list[Probe]]] = {
    "causal_self_attention": _attention_probes,
    "gaussian_positional_weights": _kernel_probes,
    "gaussian_positional_qk": _kernel_probes,
    "score_scale_statistics": _statistics_probes,
    "streaming_attention": _streaming_probes,
    "cached_attention_step": _kv_cache_probes,
}
DERIVED: dict[str, Callable[[Seen], Seen]] = {"gaussian_positional_qk": _qk_kernel}


# ---- running the probes --------------------------------------------------------------------------


def _seen(header: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Seen:
    """The comparable part of a reply: its tensors, its numbers, and the rest of its structure."""
    seen = Seen(values=dict(tensors))
    seen.shape = {k: _structure(v, k, seen.values) for k, v in header.items() if k not in NOISE}
    return seen


def _structure(x: Any, path: str, numbers: dict[str, torch.Tensor]) -> Any:
    """``x`` with every float moved into ``numbers`` (compared within tolerance, not exactly)."""
    if isinstance(x, dict):
        return {k: _structure(v, f"{path}.{k}", numbers) for k, v in x.items()}
    if isinstance(x, list):
        return [_structure(v, f"{path}[{i}]", numbers) for i, v in enumerate(x)]
    if isinstance(x, float):
        numbers[f"#{path}"] = torch.tensor(x, dtype=torch.float64)
        return "number"
    return x


def student_side(head: Head, function: str, probes: list[Probe]) -> list[Seen] | None:
    """The head on every probe; None when it lacks the function or hangs (then no guess is made)."""
    out = []
    for probe in probes:
        try:
            reply = head.probe(function, probe.args, probe.tensors, seed=PROBE_SEED, op=probe.op, **probe.options)
            seen = _seen(*reply)
        except MissingFunction:
            return None
        except StudentFailure as exc:
            if exc.status == "timeout":
                return None
            seen = Seen(error=True)
        out.append(DERIVED.get(function, lambda s: s)(seen))
    return out


@cache
def grader_side(module: ModuleType, function: str) -> tuple[Seen, ...]:
    """A trusted module on every probe of ``function``, through the worker's own op code, in this
    process; the probes are fixed, so each module's answers are computed once per grading process."""
    out = []
    for probe in PROBES[function]():
        params = {"fn": function, "args": probe.args, "seed": PROBE_SEED, **probe.options}
        tensors = {k: t.clone() for k, t in probe.tensors.items()}
        with torch.random.fork_rng(devices=[]):  # a chaff's manual_seed must not touch the grader's RNG
            try:
                seen = _seen(*_ops.dispatch(module, probe.op, params, tensors))
            except Exception:
                seen = Seen(error=True)
        out.append(DERIVED.get(function, lambda s: s)(seen))
    return tuple(out)


@cache
def chaff_module(head: KnownHead) -> ModuleType:
    """A chaff materialised (reference + override) and imported under a private name."""
    spec = importlib.util.spec_from_loader(f"_step4_{head.kind}_{head.id}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(head.source(), f"<{head.kind} {head.id}>", "exec"), module.__dict__)
    return module


# ---- matching ------------------------------------------------------------------------------------


def same(a: Sequence[Seen], b: Sequence[Seen], tol: Tolerance = MATCH) -> bool:
    """Whether two runs over the same probes agree on every probe."""
    return len(a) == len(b) and all(_same_one(x, y, tol) for x, y in zip(a, b, strict=True))


def _same_one(a: Seen, b: Seen, tol: Tolerance) -> bool:
    if a.error or b.error:
        return a.error and b.error
    if a.shape != b.shape or a.values.keys() != b.values.keys():
        return False
    return all(_close(a.values[k], b.values[k], tol) for k in a.values)


def _close(x: torch.Tensor, y: torch.Tensor, tol: Tolerance) -> bool:
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    x, y = x.double(), y.double()
    fx, fy = torch.isfinite(x), torch.isfinite(y)
    if not torch.equal(fx, fy) or not torch.equal(x[~fx].nan_to_num(), y[~fy].nan_to_num()):
        return False  # NaN where NaN, +inf where +inf, -inf where -inf
    return bool(torch.isclose(x[fx], y[fy], rtol=tol.rtol, atol=tol.atol).all())


# ---- the diagnosis -------------------------------------------------------------------------------


def diagnose(checks: Iterable[CheckResult], head: Head, ref: ModuleType) -> list[Diagnosis]:
    """Known bugs the head behaves like, when some check failed; [] for a passing or unknown head."""
    if not any(c.status in FAILING for c in checks):
        return []
    found = []
    for function, make in PROBES.items():
        chaffs = [c for c in known_heads("chaff") if c.function == function]
        theirs = student_side(head, function, make()) if chaffs else None
        if theirs is None or same(theirs, grader_side(ref, function)):
            continue
        for chaff in chaffs:
            ours = grader_side(chaff_module(chaff), function)
            if not all(s.error for s in ours) and same(theirs, ours):
                found.append(Diagnosis(id=chaff.id, title=chaff.title, hint=chaff.hint, cites=chaff.cites))
    return found


def count_diagnoses(results: Iterable[GradeResult]) -> Counter[str]:
    """How many submissions each known bug was recognised in (for a class summary)."""
    return Counter(d.id for r in results for d in r.diagnosis)
