"""Known bugs by behaviour: run the instructor's chaffs beside the head on fixed probes.

Every contract function of the head is called on a few fixed small probes (float64, causal and not,
large scores; one call per probe through ``Head.probe``, reused for every chaff). Each chaff of that
function runs on the same probes here in the grader: chaffs are trusted instructor code, materialised
from the library, and :func:`grader_side` calls them directly (the worker's op code is not imported).
A chaff whose results match the head's on every probe (:func:`same`: equal structure, equal
non-finite patterns, finite values within :data:`MATCH`) names the bug. A head that matches the
reference on a function's probes gets nothing for it, and a head that matches no chaff gets no guess.

Calls are made after seeding torch's global generator identically on both sides, so a chaff that draws
random numbers replays exactly. Chaffs that compute the reference's values (a slow loop, the built-in
kernel) cannot be told apart by their results; the performance and forbidden-API checks name those.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any

import torch

from grader.compare import Tolerance, tolerance
from grader.head import Head, MissingFunction, StudentFailure
from grader.library import KnownHead, indistinguishable  # noqa: F401  (re-exported by the package)

MATCH = tolerance("match")  # float64: another way to write the same arithmetic, not float32
PROBE_SEED = 20417
NOISE = ("times", "traced")  # how long a call took, which APIs it used: not what it computed


@dataclass(frozen=True)
class Probe:
    """One request: argument specs and tensors as the ``call`` op takes them, plus its options."""

    args: list[Any]
    tensors: dict[str, torch.Tensor]
    options: dict[str, Any] = field(default_factory=dict)
    op: str = "seeded_call"
    huge: bool = False  # scores far past exp's range: a finite mask constant may show only here


@dataclass
class Seen:
    """What one probe produced, in comparable form: an error, or named values and structure."""

    error: bool = False
    values: dict[str, torch.Tensor] = field(default_factory=dict)
    shape: dict[str, Any] = field(default_factory=dict)  # kinds, types and problems, compared exactly
    message: str = ""  # the error's text, when ``error``


# ---- probes --------------------------------------------------------------------------------------


def attention_probes(
    length: int | None = None, flags: tuple[bool, ...] = (True, False), square: bool = False
) -> list[Probe]:
    """The head's probes; ``length``: every sequence that long instead (where a head with a buffer of fixed
    length runs), ``flags``: only the calls with these values of causal (where one branch raises), ``square``:
    every head width equal to d (where a head that reshapes to the model width runs, issue 35)."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    T, T_other = (length, length) if length else (5, 4)
    widths = {"d_k": 4, "d_v": 4} if square else {}

    def inputs(scale: float, B: int = 2, T: int = 5, d: int = 4, d_k: int = 3, d_v: int = 2) -> dict[str, torch.Tensor]:
        # d, d_k and d_v distinct; B = 2 couples nothing in a right head
        X = scale * torch.randn(B, T, d, generator=g, dtype=torch.float64)
        W = {
            n: torch.randn(d, w, generator=g, dtype=torch.float64)
            for n, w in (("W_Q", d_k), ("W_K", d_k), ("W_V", d_v))
        }
        return {"X": X, **W}

    base, large = inputs(1.0, T=T, **widths), inputs(300.0, T=T, **widths)  # large: scores of order 1e5
    # other widths: a constant is not a formula
    other = inputs(1.0, B=1, T=T_other, d=6, d_k=6, d_v=6) if square else inputs(1.0, B=1, T=T_other, d=6, d_k=2, d_v=3)
    if T_other > 1:  # a head that runs at T = 1 only has no second token
        other["X"][0, 1] = 0.0  # a zero token: its scores are exactly 0, which a mask read off the values mistakes
    upstream = {"u_out": torch.randn(2, T, widths.get("d_v", 2), generator=g, dtype=torch.float64),
                "u_w": torch.randn(2, T, T, generator=g, dtype=torch.float64)}  # fmt: skip
    args = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]
    grad = {"wrt": ["X", "W_Q", "W_K", "W_V"], "upstream": {"0": "u_out", "1": "u_w"}}

    def kw(causal: bool) -> dict[str, Any]:
        return {"kwargs": {"causal": {"v": causal}}}

    probes = [
        Probe(args, base, {**kw(True), "return_inputs": True}),
        Probe(args, base, kw(False)),
        Probe(args, {**base, **upstream}, {**kw(flags[0]), "grad": grad}),
        Probe(args, large, kw(True), huge=True),
        Probe(args, large, kw(False), huge=True),
        Probe(args, other, kw(True)),
    ]
    return [p for p in probes if p.options["kwargs"]["causal"]["v"] in flags]


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
    "causal_self_attention": attention_probes,
    "gaussian_positional_weights": _kernel_probes,
    "gaussian_positional_qk": _kernel_probes,
    "score_scale_statistics": _statistics_probes,
    "streaming_attention": _streaming_probes,
    "cached_attention_step": _kv_cache_probes,
}
DERIVED: dict[str, Callable[[Seen], Seen]] = {"gaussian_positional_qk": _qk_kernel}


# ---- the head's side -------------------------------------------------------------------------


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
            seen = Seen(error=True, message=exc.message)
        out.append(DERIVED.get(function, lambda s: s)(seen))
    return out


# ---- the trusted side: instructor modules called directly, in this process -----------------------


def _describe(value: Any, name: str, out: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One returned value as the worker describes it (same names, so both sides compare key by key)."""
    if type(value) is torch.Tensor:
        out[name] = value.detach()
        return {"type": "tensor", "name": name}
    if isinstance(value, bool):
        return {"type": "bool"}
    if isinstance(value, (int, float)):
        return {"type": "number", "value": float(value)}
    return {"type": type(value).__name__}


def _flatten(result: Any, out: dict[str, torch.Tensor]) -> dict[str, Any]:
    if isinstance(result, (tuple, list)):
        return {"kind": type(result).__name__, "items": [_describe(v, f"r{i}", out) for i, v in enumerate(result)]}
    if isinstance(result, dict):
        return {"kind": "dict", "entries": {str(k): _describe(v, f"k:{k}", out) for k, v in result.items()}}
    return {"kind": "single", "items": [_describe(result, "r0", out)]}


def _grads(result: Any, inputs: dict[str, torch.Tensor], spec: dict[str, Any], out: dict[str, torch.Tensor]) -> Any:
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    loss = None
    for idx, up in spec["upstream"].items():
        y = outputs[int(idx)]
        if not isinstance(y, torch.Tensor) or not y.requires_grad:
            return {"problem": f"output {idx} is not differentiable (no autograd graph)"}
        term = (y * inputs[up].to(y.dtype)).sum()
        loss = term if loss is None else loss + term
    assert loss is not None
    grads = torch.autograd.grad(loss, [inputs[n] for n in spec["wrt"]], allow_unused=True)
    for n, g in zip(spec["wrt"], grads, strict=True):
        if g is not None:
            out[f"g:{n}"] = g.detach()
    return {"missing": [n for n, g in zip(spec["wrt"], grads, strict=True) if g is None]}


def _kv_cache(module: ModuleType, t: dict[str, torch.Tensor], out: dict[str, torch.Tensor]) -> dict[str, Any]:
    cache_, steps, lengths = module.KVCache(), [], []
    with torch.no_grad():
        for i in range(t["X"].shape[1]):
            y = module.cached_attention_step(t["X"][:, i].clone(), cache_, t["W_Q"], t["W_K"], t["W_V"])
            steps.append(_describe(y, f"step:{i}", out))
            lengths.append(len(cache_))
    kv = {}
    for which in ("keys", "values"):
        x = getattr(cache_, which)
        kv[which] = _describe(torch.stack(list(x), dim=1) if isinstance(x, (list, tuple)) else x, which, out)
    return {"steps": steps, "lengths": lengths, **kv}


def run_trusted(module: ModuleType, function: str, probe: Probe) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """What the worker would answer for ``probe`` if ``module`` were the submission."""
    opts = probe.options
    grad = opts.get("grad")
    wrt = set(grad["wrt"]) if grad else set()
    inputs = {k: t.clone().requires_grad_(k in wrt) for k, t in probe.tensors.items()}
    out: dict[str, torch.Tensor] = {}
    torch.manual_seed(PROBE_SEED)
    if probe.op == "kv_cache":
        return _kv_cache(module, inputs, out), out
    args = [inputs[a["t"]] if "t" in a else a["v"] for a in probe.args]
    kwargs = {k: inputs[a["t"]] if "t" in a else a["v"] for k, a in opts.get("kwargs", {}).items()}
    with torch.no_grad() if opts.get("no_grad") else contextlib.nullcontext():
        result = getattr(module, function)(*args, **kwargs)
    header: dict[str, Any] = {"result": _flatten(result, out)}
    if grad:
        header["grads"] = _grads(result, inputs, grad, out)
    if opts.get("return_inputs"):
        out.update({f"in:{k}": t.detach() for k, t in inputs.items()})
    return header, out


@cache
def grader_side(module: ModuleType, function: str) -> tuple[Seen, ...]:
    """A trusted module on every probe of ``function``; the probes are fixed, so each module's answers
    are computed once per grading process."""
    out = []
    for probe in PROBES[function]():
        with torch.random.fork_rng(devices=[]):  # a chaff's manual_seed must not touch the grader's RNG
            try:
                seen = _seen(*run_trusted(module, function, probe))
            except Exception as exc:
                seen = Seen(error=True, message=f"{type(exc).__name__}: {exc}")
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
