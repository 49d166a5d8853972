"""Where a head's computation leaves the lecture's, and how (issue 28).

Every head computes the same few intermediate tensors: Q, K, V, the scores Q K^T, the scaled scores, the
masked scores, the weights and the output. One traced call of the head on a small float64 probe (the worker's
``trace`` op, through :meth:`grader.head.Head.probe`) records each tensor the submission's own code computes,
at its line; the error model (``_mutations.forward``) computes the lecture's stages on the same probe, and
those of every prefix of the mutations found, so no reference code is needed and the student kit does
exactly the same.

The *departure* is the first recorded value that matches no stage of the model followed so far where one is
due: it has the shape of a stage, it is computed from the inputs, and no later value comes back to the model
(a manual softmax's ``exp(s - max)`` matches no stage, but the weights after it do). When a mutation's stage
explains it, the walk follows that mutation's model on; the first departure nothing explains ends the walk.
A value that matches the stage that was due but that nothing reads (``s.masked_fill(...)`` without ``s =``)
is the line to edit, not the one after it.

Everything here is judged in the grader process: the worker only records.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import torch

from grader.compare import tolerance
from grader.diagnosis._finding import Finding, Note, Pattern
from grader.diagnosis._known import PROBE_SEED
from grader.diagnosis._mutations import SLOT_OF, Combo, Fit, forward, snap
from grader.diagnosis._where import ARGS, ATTENTION
from grader.head import Head, StudentFailure

# the probe: X (B, T, d) = (2, 7, 5), W_Q and W_K (5, 6), W_V (5, 3). Its sizes keep the quantities a head may
# scale by apart (1/sqrt(d_k), 1/d_k, 1/sqrt(d), 1/sqrt(T), 1/sqrt(d_v), the number of axes 3, 1/2), so a wrong
# one shows (d_v = 3 is also the number of axes: a scale of 1/sqrt(3) is read as d_v's).
PROBE_T, PROBE_B, PROBE_D, PROBE_DK, PROBE_DV = 7, 2, 5, 6, 3
# A fill this far below every score hides its entries at every scale the probes take (torch.finfo(dtype).min, as
# Hugging Face writes it): never the number that had to change, even where the pattern it fills is wrong.
HIDES = 1e30
HUGE = 300.0  # X scaled so that the scores are of order 1e5, far past exp's range (as _known's large probes)
RANK = {"Q": 0, "K": 0, "V": 0, "K^T": 0, "scores": 1, "premasked": 1, "scaled": 2, "masked": 3, "weights": 4, "out": 5}
# the order a head computes its slots in: a departure is explained by the first mutations in this order
ORDER = ("projections", "values", "scale", "dtype", "switch", "mask", "fill", "softmax", "randomness")
RTOL, ATOL = tolerance("trace").rtol, tolerance("trace").atol  # float64 agreement (float32 rounding departs)


@dataclass(frozen=True)
class Record:
    """One value the head computed: the op, where, what it read, and its value (None: over the size cap)."""

    index: int
    op: str
    file: str
    line: int
    code: str
    reads: tuple[str, ...]
    value: torch.Tensor | None
    var: str = ""
    defs: tuple[Bound, ...] = ()  # the numbers the line reads by name, each where it got its value
    flag: bool = False  # the function that computed it has the causal flag in reach (``causal`` a local of it)

    @property
    def numpy(self) -> bool:
        return self.op == "="


@dataclass(frozen=True)
class Bound:
    """A Python number a recorded line reads by name (no op records it), and the line that gave it its value:
    the local's last binding, a parameter's call in the submission, or a module-level assignment."""

    var: str
    file: str
    line: int
    code: str
    value: float


@dataclass
class Departure:
    """The first value that leaves the model followed so far: its record, the stage it should have been, the
    finding that compares them, and the mutations (of those found) whose model it matches (() when none does)."""

    record: Record
    stage: str
    finding: Finding
    expected: torch.Tensor | None
    explained_by: tuple[str, ...] = ()
    causal: bool = True
    context: dict[int, str] = field(default_factory=dict)  # the lines around it, by number

    @property
    def description(self) -> str:
        return self.finding.words


@dataclass
class Trace:
    records: list[Record]
    returned: set[str] = field(default_factory=set)
    context: dict[str, dict[int, str]] = field(default_factory=dict)  # file -> line -> text, near the records
    raised: dict[str, Any] | None = None  # the exception the call raised: its type, file, line and code
    left: dict[str, Any] = field(default_factory=dict)  # "numpy", "detach": the first line leaving torch, its graph
    aliases: list[dict[str, Any]] = field(default_factory=list)  # locals bound to an input itself (q = X)
    returns: list[torch.Tensor | None] = field(default_factory=list)  # the call's returned values, in order
    patched: frozenset[int] = frozenset()  # the records an intervention replaced (their indices)
    returned_at: dict[str, Any] | None = None  # the call's own ``return`` line: its file, line and code
    # each return of the head's own frames that handed back recorded values: its file, line, code and their names
    exits: list[dict[str, Any]] = field(default_factory=list)


def probe(T: int | None = None, square: bool = False) -> dict[str, torch.Tensor]:
    """The traced probe; ``square``: every head width equal to d (where a head that reshapes to d runs)."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    d_k, d_v = (PROBE_D, PROBE_D) if square else (PROBE_DK, PROBE_DV)
    shapes = {"X": (PROBE_B, T or PROBE_T, PROBE_D), "W_Q": (PROBE_D, d_k), "W_K": (PROBE_D, d_k)}
    shapes["W_V"] = (PROBE_D, d_v)
    return {n: torch.randn(*shape, generator=g, dtype=torch.float64) for n, shape in shapes.items()}


def traced(
    head: Head,
    tensors: dict[str, torch.Tensor],
    causal: bool,
    function: str = ATTENTION,
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    patches: Sequence[dict[str, Any]] | None = None,
) -> Trace | None:
    """The head's own computation on ``tensors``, op by op (None when it could not be called: it hung, is not
    defined, or the module did not import; a raise is in :attr:`Trace.raised`). ``function``, ``args`` and
    ``kwargs``: another contract function's call (a crash of that function at its own line). ``patches`` (the
    worker's ``intervene`` op, ``_intervene``): values of the head's replaced on the way. What the worker says is
    read defensively: student code ran beside it, so a malformed entry is left out."""
    kwargs = {"causal": {"v": causal}} if kwargs is None else kwargs
    try:
        if patches is None:
            header, values = head.probe(
                function, ARGS if args is None else args, tensors, seed=PROBE_SEED, op="trace", kwargs=kwargs
            )
        else:
            header, values = head.intervene(ATTENTION, ARGS, tensors, patches, seed=PROBE_SEED, causal=causal)
    except StudentFailure:
        return None
    if header.get("status") not in (None, "ok") or not isinstance(header.get("records"), list):
        return None
    records = []
    for k, r in enumerate(header["records"]):
        at = _site(r)
        if at is None:
            continue
        value = values.get(str(r.get("value", "")))
        reads = r.get("reads")
        records.append(
            Record(
                k,
                str(r.get("op", ""))[:80],
                at["file"],
                at["line"],
                at["code"],
                tuple(str(x) for x in reads if isinstance(x, str)) if isinstance(reads, list) else (),
                value if isinstance(value, torch.Tensor) else None,
                str(r.get("var", ""))[:80],
                _bounds(r.get("defs")),
                r.get("flag") is True,
            )
        )
    returned = {f"v:{k}" for k, r in enumerate(header["records"]) if _is_returned(r, values, header)}
    context: dict[str, dict[int, str]] = {}
    raw = header.get("context")
    if isinstance(raw, dict):
        for name, lines in raw.items():
            if isinstance(lines, dict):
                context[str(name)] = {int(n): str(t)[:300] for n, t in lines.items() if str(n).isdigit()}
    raised = _raised(header.get("raised"))
    left_raw = header.get("left")
    left = {str(k): at for k, v in left_raw.items() if (at := _site(v))} if isinstance(left_raw, dict) else {}
    aliases_raw = header.get("aliases")
    aliases = [
        {
            **at,
            "var": str(a.get("var", ""))[:80],
            "input": str(a.get("input", ""))[:80],
            "param": a.get("param") is True,
        }
        for a in (aliases_raw if isinstance(aliases_raw, list) else [])
        if (at := _site(a))
    ]
    result = header.get("result")
    items = result.get("items", []) if isinstance(result, dict) else []
    returns = [values.get(str(i.get("name", ""))) if isinstance(i, dict) else None for i in items or []]
    returns = [t if isinstance(t, torch.Tensor) else None for t in returns] if isinstance(items, list) else []
    returned_at = _site(header["returned_at"]) if isinstance(header.get("returned_at"), dict) else None
    patched = _patched(records, patches or ())
    exits_raw = header.get("exits")
    exits = [
        {
            **at,
            "names": tuple(str(n)[:20] if isinstance(n, str) else "" for n in e["names"]),
            "one": e.get("one") is True,
        }
        for e in (exits_raw if isinstance(exits_raw, list) else [])
        if isinstance(e, dict) and isinstance(e.get("names"), list) and (at := _site(e))
    ]
    return Trace(records, returned, context, raised, left, aliases, returns, patched, returned_at, exits)


def _patched(records: list[Record], patches: Sequence[dict[str, Any]]) -> frozenset[int]:
    """The indices of the records the ``patches`` name: the nth value recorded at a line (of a NumPy local, the
    nth that local took there), counted as the worker counts them."""
    sites = {(str(p.get("file")), int(p.get("line", 0)), int(p.get("nth", -1)), str(p.get("var", ""))) for p in patches}
    if not sites:
        return frozenset()
    at_line: dict[tuple[str, int], int] = {}  # a torch op's count: every value recorded at its line before it
    of_var: dict[tuple[str, int, str], int] = {}  # a NumPy local's: those that local took there
    out = set()
    for r in records:
        var = r.var if r.numpy else ""
        nth = of_var.get((r.file, r.line, var), 0) if var else at_line.get((r.file, r.line), 0)
        at_line[(r.file, r.line)] = at_line.get((r.file, r.line), 0) + 1
        of_var[(r.file, r.line, var)] = of_var.get((r.file, r.line, var), 0) + 1
        if (r.file, r.line, nth, var) in sites:
            out.add(r.index)
    return frozenset(out)


def _bounds(raw: Any) -> tuple[Bound, ...]:
    """The worker's ``defs`` of one record, well-formed entries only (a finite number, a line)."""
    out = []
    for d in raw if isinstance(raw, list) else []:
        at = _site(d)
        value = d.get("value") if at is not None else None
        if at is None or not isinstance(value, float) or not math.isfinite(value):
            continue
        out.append(Bound(str(d.get("var", ""))[:80], at["file"], at["line"], at["code"], value))
    return tuple(out)


def _raised(entry: Any) -> dict[str, Any] | None:
    """Where a worker's call raised (its type and site) and, when the worker saw it, the op that raised there: its
    name, the sources it read (``in:X``, ``v:3``) and the shape a reshape was asked for; None: it did not raise."""
    if not isinstance(entry, dict):
        return None
    raised: dict[str, Any] = {"type": str(entry.get("type", ""))[:200], **(_site(entry) or {})}
    if "line" in raised and isinstance(op := entry.get("op"), str):
        raised["op"] = op[:80]
        reads = entry.get("reads")
        raised["reads"] = [str(x)[:40] for x in reads[:8]] if isinstance(reads, list) else []
        shape = entry.get("shape")
        if isinstance(shape, list) and all(type(n) is int and -1 <= n < 10**6 for n in shape[:8]):
            raised["shape"] = shape[:8]
    return raised


def _site(entry: Any) -> dict[str, Any] | None:
    """``{file, line, code}`` of a worker's entry when it is well formed (a line a positive int), else None."""
    if not isinstance(entry, dict):
        return None
    line = entry.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or not 0 < line < 10**7:
        return None
    return {"file": str(entry.get("file", ""))[:200], "line": line, "code": str(entry.get("code", ""))[:300]}


def _is_returned(r: Any, values: dict[str, torch.Tensor], header: dict[str, Any]) -> bool:
    """Whether record ``r``'s value is what the call returned (compared by value: the worker ships copies)."""
    name = r.get("value") if isinstance(r, dict) else None
    if name not in values:
        return False
    result = header.get("result")
    items = result.get("items", []) if isinstance(result, dict) else []
    if not isinstance(items, list):
        return False
    for item in items:
        got = values.get(str(item.get("name", ""))) if isinstance(item, dict) else None
        if got is not None and got.shape == values[name].shape and _equal(values[name], got, 0.0, 0.0):
            return True
    return False


# ---- the model's stages ----------------------------------------------------------------------------


def _stages_with(
    tensors: dict[str, torch.Tensor], causal: bool, fitted: dict[str, float], theirs: Any, combo: Combo
) -> dict[str, torch.Tensor] | None:
    """:func:`stages_of` with ``combo`` last, for a ``partial`` of the rest."""
    return stages_of(tensors, causal, combo, fitted, theirs)


def stages_of(
    tensors: dict[str, torch.Tensor], causal: bool, combo: Combo, fitted: dict[str, float], theirs: Any
) -> dict[str, torch.Tensor] | None:
    """The error model's intermediate values on the probe, with ``combo`` applied (None: not computable)."""
    seen: dict[str, torch.Tensor] = {}
    X, W_Q, W_K, W_V = (tensors[n] for n in ("X", "W_Q", "W_K", "W_V"))
    done = forward(X, W_Q, W_K, W_V, causal, combo, Fit(values=dict(fitted)), theirs, stages=seen)
    if done is None:
        return None
    seen["K^T"] = seen["K"].transpose(-2, -1)
    if "masked" in seen:  # a mask applied before the scale (-inf / sqrt(d_k) is -inf): a layout, not a stage due
        hidden = torch.isneginf(seen["masked"]) & torch.isfinite(seen["scaled"])
        seen["premasked"] = seen["scores"].masked_fill(hidden, float("-inf"))
    return seen


def models(
    tensors: dict[str, torch.Tensor], causal: bool, combo: Combo, fitted: dict[str, float], theirs: Any
) -> list[tuple[Combo, dict[str, torch.Tensor]]]:
    """The lecture's stages, then those of each prefix of ``combo`` in the order a head computes them."""
    ordered = sorted(combo, key=lambda m: ORDER.index(SLOT_OF[m]))
    out: list[tuple[Combo, dict[str, torch.Tensor]]] = []
    for n in range(len(ordered) + 1):
        stages = stages_of(tensors, causal, tuple(ordered[:n]), fitted, theirs)
        if stages is None:
            continue
        if out and stages.keys() == out[-1][1].keys() and all(_equal(stages[s], out[-1][1][s]) for s in stages):
            continue  # this mutation changes nothing on this probe (the flag, at causal=True)
        out.append((tuple(ordered[n - 1 : n]), stages))
    return out


# ---- comparing values ------------------------------------------------------------------------------


FLOAT32_RTOL, FLOAT32_ATOL = tolerance("trace", torch.float32).rtol, tolerance("trace", torch.float32).atol
# the agreement ``_equal`` asks by default: float64's, or float32's while a float32 value is described
_ACCURACY: ContextVar[tuple[float, float]] = ContextVar("accuracy", default=(RTOL, ATOL))


@contextmanager
def float32_accuracy() -> Iterator[None]:
    """Within it, values are equal to float32 accuracy (a value the head computed in float32, described by the
    walk: its float32 rounding is named elsewhere, what else departs is described here)."""
    token = _ACCURACY.set((FLOAT32_RTOL, FLOAT32_ATOL))
    try:
        yield
    finally:
        _ACCURACY.reset(token)


def _ratio_rtol() -> float:
    """How far the ratios of a value to a stage may differ and still be one constant factor."""
    return max(1e-7, _ACCURACY.get()[0])


def _equal(a: torch.Tensor, b: torch.Tensor, rtol: float | None = None, atol: float | None = None) -> bool:
    """Equal within ``rtol`` of the largest finite entry, with NaN where the other has NaN and the same
    infinities (allclose: inf equals only inf of its sign, NaN only NaN with equal_nan). By default to float64
    accuracy (float32's within :func:`float32_accuracy`)."""
    if rtol is None or atol is None:
        rtol, atol = _ACCURACY.get()
    if a.shape != b.shape:
        return False
    a, b = a.double(), b.double()
    scale = float(b.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).abs().max()) if b.numel() else 0.0
    return bool(torch.allclose(a, b, rtol=rtol, atol=atol + rtol * scale, equal_nan=True))


def _floating(r: Record) -> bool:
    return r.value is not None and r.value.dtype.is_floating_point


def matched(r: Record, stages: dict[str, torch.Tensor]) -> str | None:
    """The latest stage ``r``'s value equals, if any."""
    if not _floating(r):
        return None
    assert r.value is not None
    hits = [s for s, v in stages.items() if _equal(r.value, v)]
    return max(hits, key=lambda s: RANK[s]) if hits else None


def _stage_shaped(r: Record, T: int) -> bool:
    """A value of a stage's shape: (B, T, *) or K^T's (B, *, T); a (T, T) mask or a row is not one."""
    if not _floating(r):
        return False
    assert r.value is not None
    shape = tuple(r.value.shape)
    return len(shape) == 3 and shape[0] == PROBE_B and T in (shape[1], shape[2])


def _neutral(r: Record, tensors: dict[str, torch.Tensor]) -> bool:
    """An input, or a transpose of one or of Q, V: handled on the way to a stage, never a stage itself; an input
    cast to another floating dtype too (``X = X.float()``: what the cast costs shows at the first stage made of it)."""
    assert r.value is not None
    v = r.value
    X, W_Q, W_K, W_V = (tensors[n] for n in ("X", "W_Q", "W_K", "W_V"))
    for t in (*tensors.values(), X @ W_Q, X @ W_K, X @ W_V):
        if _equal(v, t) or (t.dim() >= 2 and _equal(v, t.transpose(-2, -1))):
            return True
    return any(cast_of(v, t) or (t.dim() >= 2 and cast_of(v, t.transpose(-2, -1))) for t in tensors.values())


def cast_of(v: torch.Tensor, t: torch.Tensor) -> bool:
    """Whether ``v`` is ``t`` cast to another floating dtype, exactly (``X.float()`` of a float64 X)."""
    return v.dtype != t.dtype and v.dtype.is_floating_point and v.shape == t.shape and torch.equal(v, t.to(v.dtype))


def _derived(trace: Trace) -> set[str]:
    """The records computed from the inputs (a NumPy head's arrays all count: their reads are not seen)."""
    out: set[str] = set()
    for r in trace.records:
        if r.numpy or any(x.startswith("in:") or x in out for x in r.reads):
            out.add(f"v:{r.index}")
    return out


def _ancestors(trace: Trace, r: Record) -> set[str]:
    by = {f"v:{x.index}": x for x in trace.records}
    if r.numpy:
        return {f"v:{x.index}" for x in trace.records if x.index < r.index}
    seen: set[str] = set()
    todo = list(r.reads)
    while todo:
        name = todo.pop()
        if name in seen or name not in by:
            continue
        seen.add(name)
        todo.extend(by[name].reads)
    return seen


# ---- the walk ------------------------------------------------------------------------------------------


def departures(
    trace: Trace,
    chain: list[tuple[Combo, dict[str, torch.Tensor]]],
    tensors: dict[str, torch.Tensor],
    causal: bool,
    without: Callable[[Combo], dict[str, torch.Tensor] | None] | None = None,
) -> list[Departure]:
    """Every departure of ``trace`` from the model followed (``chain[0]``, the lecture's, then each mutation's
    as it explains one), in order; the first that no model explains is the last. ``without``: the stages of a
    combination of mutations, for one passed over on the way to a later model (a mask applied before the scale
    is matched with the mask's model, past the scale's): it departs at the first value that tells it."""
    T = int(tensors["X"].shape[1])  # the probe's length (a head that runs at one length only: that one)
    trace = _laid_out(trace, T, tensors)
    derived = _derived(trace)
    level, reached = 0, -1
    good: dict[int, str] = {}
    found: list[Departure] = []
    pending: list[str] = []  # mutations passed over on the way to a later model, no departure of their own yet
    records = trace.records
    memo: dict[tuple[int, int], str | None] = {}

    def match(x: Record, stages: dict[str, torch.Tensor]) -> str | None:
        key = (x.index, id(stages))
        if key not in memo:
            memo[key] = matched(x, stages)
        return memo[key]

    for k, r in enumerate(records):
        stages = chain[level][1]
        if not _stage_shaped(r, T):
            continue
        hit = match(r, stages)
        if hit == "premasked" and (
            any(match(r, chain[j][1]) in ("scaled", "masked") for j in range(level + 1, len(chain)))
            or not any(
                _on_the_way(trace, r, records[k + 1 :], chain[j][1], RANK[hit], T, match)
                for j in range(level, len(chain))
            )
        ):
            hit = None  # masked and never scaled after (a model's masked scores): the scale left out departs here
        if hit is not None:
            reached = max(reached, RANK[hit])
            good[r.index] = hit
            if pending and without is not None:
                followed = tuple(m for j in range(1, level + 1) for m in chain[j][0])
                found += _passed_over(trace, r, hit, pending, followed, without, tensors, causal)
            continue
        if f"v:{r.index}" not in derived or _neutral(r, tensors) or _softmax_part(r, stages):
            continue
        filled = _fill_step(trace, r, chain, level, tensors, causal)
        if filled is not None:  # a finite constant where -inf belongs, and the pattern it was written to
            found.extend(filled[1])
            said = {m for d in found for m in d.explained_by}
            pending += [m for j in range(level + 1, filled[0] + 1) for m in chain[j][0] if m not in said]
            level = filled[0]
            continue
        explained: tuple[str, ...] = ()
        nxt: tuple[int, str] | None = None
        # a mutation's stage, exactly: a departure even where the probe's values come back to the lecture's
        # (a finite mask constant hides the future keys at ordinary scores)
        direct = [
            (j, h)
            for j in range(level + 1, len(chain))
            if (h := match(r, chain[j][1])) is not None
            and (h != "premasked" or h not in stages or not _equal(chain[j][1][h], stages[h]))  # a layout tells
            # no mutation apart; the lecture's stages have no such layout where the model's mask is its own (a
            # mask applied whatever the flag, at causal=False)
        ]
        if direct:
            nxt = direct[0]
        elif any(
            _stage_shaped(x, T) and (h := match(x, stages)) is not None and RANK[h] > reached for x in records[k + 1 :]
        ):
            continue  # a value on the way to a stage (a manual softmax's exp(s - max))
        else:
            for j in range(level + 1, len(chain)):
                h = _on_the_way(trace, r, records[k + 1 :], chain[j][1], reached, T, match)
                if h is not None:
                    nxt = (j, h)
                    break
        if nxt is not None:
            explained = _changing(chain, level, *nxt)
            if len(explained) > 1 and nxt[1] == "masked":  # the scale and the mask at once: each at its own line
                split = _scale_passed(trace, r, chain, level, nxt[0], tensors, causal)
                found += split
                explained = tuple(m for m in explained if m not in {m for d in split for m in d.explained_by})
        due = nxt[1] if nxt and nxt[1] in stages and match(r, chain[nxt[0]][1]) else _due(r, stages, reached)
        if (
            due in ("scores", "scaled")
            and "masked" in stages
            and r.value is not None
            and _masking_of(r.value, stages) is not None
        ):
            due = "masked"  # the scores with a mask applied (before the scale or after it)
        site = _dropped(trace, r, good, reached) or r
        viewed = _viewed(trace, r, T)
        nan, met = _nan_source(trace, r, derived), r
        if nan is None:  # r meets a constant holding NaN next (s * keep + (1 - keep) * -inf): that sum departs
            met = next((x for x in records[k + 1 :] if f"v:{r.index}" in x.reads and _nan_source(trace, x, derived)), r)
            nan = _nan_source(trace, met, derived) if met is not r else None
        if nan is not None:
            words = Finding("nan_constant", stage=due, inner=describe(met, due, stages, tensors, causal))
            found.append(Departure(replace(nan, value=met.value), due, words, stages.get(due), explained, causal))
        elif site is r and (source := _mask_source(trace, r, stages) if causal else _flag_site(trace, r)) is not None:
            # the line that made the mask: its pattern at causal=True; at causal=False a mask that hides anything is
            # applied where none belongs, so the line that applies it, unless only the line that made it has the
            # flag in reach (_flag_site)
            at = replace(r, file=source.file, line=source.line, code=source.code)
            found.append(
                Departure(at, due, describe(r, due, stages, tensors, causal), stages.get(due), explained, causal)
            )
        elif site is not r:
            unassigned = site.op.endswith("masked_fill") or site.op == "masked_fill"
            words = Finding("never_used", stage=good[site.index], masked_fill=unassigned)
            found.append(Departure(site, good[site.index], words, stages.get(good[site.index]), explained, causal))
        else:
            at = replace(r, file=viewed.file, line=viewed.line, code=viewed.code) if viewed is not None else r
            words = describe(r, due, stages, tensors, causal)
            swap = (
                words if words.kind == "substituted" else SUBSTITUTED.get(explained[0]) if len(explained) == 1 else None
            )
            operand = _operand_site(trace, tensors, *swap.operand) if swap is not None else None
            made = _made_elsewhere(trace, viewed or r, _wrong_numbers(r, due, stages, tensors, causal))
            unscaled = _scores_line(trace, r, good) if words.kind == "unscaled" else None
            if operand is not None:  # the input (or the wrong projection) taken where a projection belongs
                at = replace(r, file=str(operand["file"]), line=int(operand["line"]), code=str(operand["code"]))
                if operand.get("param"):  # a helper's parameter, bound to the wrong input by its caller
                    words = words.noted(Note("passed", r.line, r.code, var=str(operand["var"])))
            elif unscaled is not None:  # no scale at all: it belongs where the scores are computed
                at = replace(r, file=unscaled.file, line=unscaled.line, code=unscaled.code)
            elif made is not None:  # the number that had to change was made on another line: that line
                use = viewed or r
                words = words.noted(Note("set", use.line, use.code, var=made.var, value=made.value))
                at = replace(r, file=made.file, line=made.line, code=made.code)
            elif (thrown := _thrown_away(trace, r)) is not None:  # the line meant to change an array binds nothing
                words = words.noted(Note("thrown", r.line, r.code, var=thrown.var))
                at = replace(r, file=thrown.file, line=thrown.line, code=thrown.code)
            found.append(Departure(at, due, words, stages.get(due), explained, causal))
        if nxt is None:
            break
        said = {m for d in found for m in d.explained_by}
        pending += [m for j in range(level + 1, nxt[0] + 1) for m in chain[j][0] if m not in said]
        level = nxt[0]
        reached = RANK[nxt[1]] if match(r, chain[level][1]) else reached
    for d in found:  # masked before the scale or after it: the masked scores, as the report names the stages
        d.stage = "masked" if d.stage == "premasked" else d.stage
    return found


def _passed_over(
    trace: Trace,
    r: Record,
    hit: str,
    pending: list[str],
    followed: Combo,
    without: Callable[[Combo], dict[str, torch.Tensor] | None],
    tensors: dict[str, torch.Tensor],
    causal: bool,
) -> list[Departure]:
    """A departure at ``r`` (which matches stage ``hit`` of the model followed) for each mutation of ``pending``
    whose model ``r`` tells from the one without it, at ``r``'s line (a projection left out or swapped: where its
    operand took the wrong input); each such mutation leaves ``pending``."""
    out = []
    for m in list(pending):
        stages = without(tuple(x for x in followed if x != m))
        if stages is None or hit not in stages or _equal(r.value, stages[hit]):  # type: ignore[arg-type]
            continue
        pending.remove(m)
        words, at = describe(r, hit, stages, tensors, causal), r
        operand = _operand_site(trace, tensors, *SUBSTITUTED[m].operand) if m in SUBSTITUTED else None
        if operand is not None:
            words = SUBSTITUTED[m]
            at = replace(r, file=str(operand["file"]), line=int(operand["line"]), code=str(operand["code"]))
        out.append(Departure(at, hit, words, stages[hit], (m,), causal))
    return out


def _scores_line(trace: Trace, r: Record, good: dict[int, str]) -> Record | None:
    """The record ``r`` was computed from that first holds the scores Q K^T (a scale forgotten altogether belongs
    where they are computed, ``q @ k.T / sqrt(d_k)``, not at a padding mask that left them as they were)."""
    found = [int(a[2:]) for a in _ancestors(trace, r) if good.get(int(a[2:])) == "scores"]
    if not found:
        return None
    by = {x.index: x for x in trace.records}
    return by.get(min(found))


SUBSTITUTED = {  # the error model's projections swapped: what they found
    "no_value_projection": Finding("substituted", role="V", source="X"),
    "keys_from_query_projection": Finding("substituted", role="K", source="W_Q"),
}


def _operand_site(trace: Trace, tensors: dict[str, torch.Tensor], role: str, source: str) -> dict[str, Any] | None:
    """Where the operand ``role`` (Q, K or V) of the head's product took ``source`` (the input X, or the other
    projection) in place of its own projection: the first line of its chain that reads that input (``v =
    x.view(...)``, ``"k_proj.weight": W_Q.T``), the line binding a name to the input itself (``q = X``), or the
    product's own line when it reads the input there (``w @ X``)."""
    trace = _numpy_reads(trace)
    found = _product(trace, tensors, role, source)
    if found is None:
        return _named_array(trace, tensors, source, role)
    p, name = found
    wanted = "in:X" if source == "X" else f"in:{source}"
    if name.startswith("in:"):
        return _bound(trace, p, name, role == "Q") or where_of(p)
    by = {f"v:{x.index}": x for x in trace.records}
    if by[name].reads == (wanted,) and (bound := _bound(trace, p, wanted, role == "Q")) is not None:
        return bound  # one sequence of the input, bound to the operand's name (``v = x`` of ``x = X[b]``)
    if by[name].numpy:  # an array named for the operand (``v = x``), or the input's own array read there
        own = by[name]  # the input's own array is X converted on its line; ``k = x @ W_Q.numpy()`` converts W_Q
        converted = source == "X" and any(
            x.line == own.line and x.file == own.file and wanted in x.reads for x in trace.records
        )
        return where_of(p if converted else own)
    chain = [by[a] for a in (_ancestors(trace, by[name]) | {name}) if a in by]
    reading = sorted((x for x in chain if wanted in x.reads), key=lambda x: x.index)
    if not reading:
        return where_of(by[name])
    return _bound(trace, reading[0], wanted, role == "Q") or where_of(reading[0])


def _named_array(trace: Trace, tensors: dict[str, torch.Tensor], source: str, role: str = "V") -> dict[str, Any] | None:
    """A NumPy head's array bound to ``source``'s value (X, or X W_Q) under another name than the one its
    conversion from torch gave it (``v = x``), when no recorded product says which operand it became (``return
    torch.from_numpy(weights @ v)`` binds no array): the last such line. A projection's array (``k = x @
    W_Q.numpy()``, its product scaled wrongly besides) is its own line; of two such arrays read on one line (``q
    @ k.T``), the first in its code is the queries', the last the keys'."""
    X = tensors["X"]
    wrong = X if source == "X" else X @ tensors[source]
    wanted = "in:X" if source == "X" else f"in:{source}"
    named = [
        r
        for r in trace.records
        if r.numpy
        and r.value is not None
        and r.value.shape == wrong.shape
        and _equal(r.value, wrong)
        and (
            source != "X" or not any(x.line == r.line and x.file == r.file and wanted in x.reads for x in trace.records)
        )
    ]
    if len(named) > 1 and source != "X":
        ids = {f"v:{r.index}": r for r in named}
        for x in trace.records:
            both = [ids[n] for n in x.reads if n in ids]
            if len(both) > 1 and all(r.var for r in both):
                words = re.findall(r"\w+", x.code)
                ranked = sorted(both, key=lambda r: words.index(r.var) if r.var in words else len(words))
                return where_of(ranked[0] if role == "Q" else ranked[-1])
    return where_of(named[-1]) if named else None


def _numpy_reads(trace: Trace) -> Trace:
    """The trace with what each array of a NumPy head read, as its line names it (the tracer sees arrays only as
    the locals they are bound to): the latest array bound to each name its right-hand side reads, and the torch
    values its line made before it (``x = X.detach().cpu().numpy()``). Lines of the same function only are
    meant; a helper's parameter named like a caller's array reads that array."""
    if not any(r.numpy and not r.reads for r in trace.records):
        return trace
    latest: dict[str, str] = {}
    records, since = [], 0
    for pos, r in enumerate(trace.records):
        if not r.numpy or r.reads:
            records.append(r)
            continue
        code = r.code.split("#", 1)[0]
        right = code.split("=", 1)[1] if re.match(r"^\s*[\w.\[\], ]+=[^=]", code) else code
        names = re.findall(r"([A-Za-z_]\w*)(?!\w)(?!\s*=[^=])", right)  # not a keyword argument's name
        reads = [latest[n] for n in names if n in latest]
        reads += [f"v:{x.index}" for x in trace.records[since:pos] if not x.numpy and x.line == r.line]
        records.append(replace(r, reads=tuple(dict.fromkeys(reads))))
        if r.var:
            latest[r.var] = f"v:{r.index}"
        since = pos + 1
    return replace(trace, records=records)


def _thrown_away(trace: Trace, r: Record) -> Record | None:
    """In a NumPy head (the tracer sees arrays only as the locals they are bound to): a statement on a line of its
    own that calls something with an array ``r`` reads and binds nothing (``np.where(future, -np.inf, s)``),
    between the line that bound that array and ``r``'s: the line whose result was meant to change it. Its
    ``var`` is the array's name."""
    if not r.numpy:
        return None
    full = _numpy_reads(trace)
    by = {f"v:{x.index}": x for x in full.records}
    mine = next((x for x in full.records if x.index == r.index), r)
    lines = trace.context.get(r.file, {})
    for name in mine.reads:
        src = by.get(name)
        if src is None or not src.numpy or src.file != r.file or not src.var or src.line >= r.line:
            continue
        for n in range(src.line + 1, r.line):
            text = lines.get(n, "").split("#", 1)[0].strip()
            try:
                body = ast.parse(text).body if text else []
            except SyntaxError:  # a line of a statement written over several
                continue
            call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and not (isinstance(call.func, ast.Name) and call.func.id in ("print", "breakpoint"))
                and src.var in {x.id for x in ast.walk(call) if isinstance(x, ast.Name)}
            ):
                return replace(r, line=n, code=lines[n].strip(), var=src.var)
    return None


def _bound(trace: Trace, r: Record, name: str, first: bool) -> dict[str, Any] | None:
    """The line that bound a name ``r``'s line reads to input ``name`` itself (``k = X`` for ``q @ k.T``): of
    those it reads, the first in its code (the queries' operand) when ``first``, else the last."""
    words = re.findall(r"\w+", r.code)
    named = [
        a
        for a in trace.aliases
        if a.get("input") == name and str(a.get("var", "")) in words and (not a.get("param") or _sole(trace, r, a))
    ]
    if not named:
        return None
    at = sorted(named, key=lambda a: words.index(str(a.get("var", ""))))
    return at[0] if first else at[-1]


def _sole(trace: Trace, r: Record, alias: dict[str, Any]) -> bool:
    """Whether the parameter ``alias`` names (bound to an input where a caller passed it) is read at ``r``'s line
    alone among the recorded lines of its file: then the argument passed is what has to change, at the caller's
    line (``attention_2d(x, W_Q, W_Q, W_V)`` for ``k = x @ w_k``); a parameter read elsewhere too holds the right
    input, and the line that reads it is the one to edit (``out = wei @ x`` beside ``k = self.key(x)``)."""
    var = str(alias.get("var", ""))
    return not any(
        x.file == r.file and x.line != r.line and var in re.findall(r"\w+", x.code.split("#", 1)[0])
        for x in trace.records
    )


def _product(trace: Trace, tensors: dict[str, torch.Tensor], role: str, source: str) -> tuple[Record, str] | None:
    """The product that multiplies in operand ``role`` (the scores Q K^T for Q and K, A V for V) where that operand
    is ``source``'s (X, or X W_Q / X W_K), and the read that holds it."""
    X = tensors["X"]
    wrong = X if source == "X" else X @ tensors[source]
    by = {f"v:{x.index}": x for x in trace.records}
    T = X.shape[1]

    def value(name: str) -> torch.Tensor | None:
        v = tensors.get(name[3:]) if name.startswith("in:") else by[name].value if name in by else None
        return v.squeeze(1) if v is not None and v.dim() == 4 and v.shape[1] == 1 else v

    for p in trace.records:
        out = value(f"v:{p.index}")
        if len(p.reads) < 2 or out is None or out.dim() != 3 or out.shape[1] != T:
            continue
        first, last = value(p.reads[0]), value(p.reads[-1])
        if first is None or last is None:
            continue
        if role == "V":
            if tuple(first.shape[-2:]) != (T, T) or out.shape[-1] == T:
                continue
            got, name = last, p.reads[-1]
        else:
            if tuple(out.shape[-2:]) != (T, T):
                continue
            got, name = (first, p.reads[0]) if role == "Q" else (last, p.reads[-1])
        for form in (wrong, wrong.transpose(-2, -1)):
            if got.shape == form.shape and _equal(got, form):
                return p, name
    return None


def _laid_out(trace: Trace, T: int, tensors: dict[str, torch.Tensor]) -> Trace:
    """The trace with its values in the lecture's (B, T, *) layout: a head axis of size one dropped, and the
    calls of a function on one sequence (T, d) of the batch stacked into the batch's values."""
    return _per_sequence(_one_head(trace, T), tensors)


def _per_sequence(trace: Trace, tensors: dict[str, torch.Tensor]) -> Trace:
    """The trace of a head that computes one sequence of the batch at a time (a function on X[b], (T, d), called
    in a loop or a comprehension, the results stacked) as the batched head would have recorded it (issue 35, item
    2): the k-th value computed from sequence b, for every b, stacked into one (B, *) value at the first
    sequence's record, read wherever any sequence's was. The loop over the batch is a layout, never a departure;
    a trace whose sequences do not each make the same values at the same lines is left as it is."""
    X = tensors["X"]
    B = int(X.shape[0])
    slices: dict[int, str] = {}
    for r in trace.records:
        if r.value is None or "in:X" not in r.reads or tuple(r.value.shape) != tuple(X.shape[1:]):
            continue
        b = next((b for b in range(B) if _equal(r.value, X[b], 0.0, 0.0)), None)
        if b is not None and b not in slices:
            slices[b] = f"v:{r.index}"
    if len(slices) != B or B < 2:
        return trace
    of: dict[str, set[int]] = {}  # record -> the sequences it was computed from
    for r in trace.records:
        name = f"v:{r.index}"
        of[name] = {b for b, n in slices.items() if n == name}.union(*(of.get(x, set()) for x in r.reads))
    seqs = [[r for r in trace.records if of[f"v:{r.index}"] == {b}] for b in range(B)]
    if any(len(q) != len(seqs[0]) for q in seqs) or any(
        (x.op, x.file, x.line) != (y.op, y.file, y.line) for q in seqs[1:] for x, y in zip(seqs[0], q, strict=True)
    ):
        return trace
    first = {f"v:{y.index}": f"v:{x.index}" for q in seqs[1:] for x, y in zip(seqs[0], q, strict=True)}
    stacked: dict[int, torch.Tensor | None] = {}
    for k, x in enumerate(seqs[0]):
        values = [q[k].value for q in seqs]
        same = all(v is not None and x.value is not None and v.shape == x.value.shape for v in values)
        stacked[x.index] = torch.stack(values) if same else None  # type: ignore[arg-type]
    records = []
    for r in trace.records:
        if f"v:{r.index}" in first:
            continue
        reads = tuple(dict.fromkeys(first.get(x, x) for x in r.reads))
        records.append(replace(r, value=stacked.get(r.index, r.value), reads=reads))
    return replace(trace, records=records)


def _one_head(trace: Trace, T: int) -> Trace:
    """The trace with each value that carries a head axis of size 1 after the batch, (B, 1, T, n) or K^T's
    (B, 1, n, T), read as the (B, T, n) it holds: a multi-head skeleton used with one head (issue 35, item 1)
    computes the lecture's stages in that layout, and the axis itself is never a departure."""
    if not any(_head_axis(r, T) for r in trace.records):
        return trace
    records = [
        replace(r, value=r.value.squeeze(1)) if _head_axis(r, T) and r.value is not None else r for r in trace.records
    ]
    return replace(trace, records=records)


def _head_axis(r: Record, T: int) -> bool:
    v = r.value
    return v is not None and v.dim() == 4 and v.shape[0] == PROBE_B and v.shape[1] == 1 and T in v.shape[2:]


def _changing(chain: list[tuple[Combo, dict[str, torch.Tensor]]], level: int, to: int, stage: str) -> Combo:
    """The mutations of the steps from ``level`` to ``to`` that change ``stage`` (a step that leaves it as it was,
    such as values never projected before a wrong scale, is not what departs there); all of them when none
    does."""
    steps = range(level + 1, to + 1)
    changing = [
        m
        for j in steps
        if stage not in chain[j - 1][1]
        or stage not in chain[j][1]
        or not _equal(chain[j][1][stage], chain[j - 1][1][stage])
        for m in chain[j][0]
    ]
    return tuple(changing) or tuple(m for j in steps for m in chain[j][0])


def _fill_step(
    trace: Trace,
    r: Record,
    chain: list[tuple[Combo, dict[str, torch.Tensor]]],
    level: int,
    tensors: dict[str, torch.Tensor],
    causal: bool,
) -> tuple[int, list[Departure]] | None:
    """When ``r`` is the scores (scaled or not yet: a mask applied before the scale) with a finite constant written
    into, or added to, the entries a mask hides, and a later model of the chain fills them so: the level of that
    model, and the departures ``r`` shows: the mask's pattern where it is not the future keys (at the line that
    built it), then the constant (at ``r``'s line, or where the number was bound). At ordinary scores -100 hides
    the future as well as -inf, so the weights after it come back to the lecture's: without this step no value
    departs (issue 35, item 1)."""
    to = next((j for j in range(level + 1, len(chain)) if any(SLOT_OF[m] == "fill" for m in chain[j][0])), None)
    if to is None or r.value is None:
        return None
    stages = chain[level][1]
    v = r.value.double()
    for base in ("scaled", "scores"):
        s = stages.get(base)
        if s is None or s.shape != v.shape or v.dim() != 3:
            continue
        s = s.double()
        hidden = ~torch.isclose(v, s, rtol=RTOL, atol=ATOL)
        if not bool(hidden.any()) or bool(hidden.all()) or not bool((hidden == hidden[:1]).all()):
            continue
        for additive, x in ((False, v[hidden]), (True, (v - s)[hidden])):
            c = float(x[0])
            if c == 0 or not bool(torch.isfinite(x).all()) or not bool(torch.allclose(x, torch.full_like(x, c))):
                continue
            return to, _filled(trace, r, chain, level, to, hidden, s, c, additive, tensors, causal)
    return None


def _filled(
    trace: Trace,
    r: Record,
    chain: list[tuple[Combo, dict[str, torch.Tensor]]],
    level: int,
    to: int,
    hidden: torch.Tensor,
    s: torch.Tensor,
    c: float,
    additive: bool,
    tensors: dict[str, torch.Tensor],
    causal: bool,
) -> list[Departure]:
    """The departures of a finite mask constant ``c`` written into (added to) the ``hidden`` entries of ``r``
    (:func:`_fill_step`), and of a scale passed over on the way there (scores never scaled: where they are
    computed)."""
    assert r.value is not None
    steps = [m for j in range(level + 1, to + 1) for m in chain[j][0]]
    fill = next(m for m in steps if SLOT_OF[m] == "fill")
    expected = chain[to][1].get("masked")
    T = hidden.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    out = []
    out += _scale_passed(trace, r, chain, level, to, tensors, causal)
    pattern = next((m for m in steps if SLOT_OF[m] == "mask"), None)
    if pattern is not None and not torch.equal(hidden[0], future):
        words = _masking(s.masked_fill(hidden, float("-inf")), s) or Finding("hides_other")
        site = _pattern_origin(trace, _mask_pattern(trace, r, hidden[0]), T) or r
        out.append(Departure(site, "masked", words, expected, (pattern,), causal))
    switch = next((m for m in steps if SLOT_OF[m] == "switch"), None)
    if switch is not None and not causal:
        words = Finding("masked_uncausal", fill=c)
        out.append(Departure(r, "masked", words, expected, (switch,), causal))
    words = Finding("fill", fill=c, added=additive, future=torch.equal(hidden[0], future))
    viewed = _viewed(trace, r, T)  # written into a reshaped copy (``X[~mask] = value`` on (B * T, T)): that line
    use = viewed or r
    added = _mask_source(trace, r, chain[level][1]) if additive else None  # the additive mask's own line
    made = _made_elsewhere(trace, use, [(c, ())])
    at = replace(r, file=use.file, line=use.line, code=use.code)
    if made is not None:
        words = words.noted(Note("set", use.line, use.code, var=made.var, value=made.value))
        at = replace(r, file=made.file, line=made.line, code=made.code)
    elif added is not None:
        at = replace(r, file=added.file, line=added.line, code=added.code)
    out.append(Departure(at, "masked", words, expected, (fill,), causal))
    return out


def _scale_passed(
    trace: Trace,
    r: Record,
    chain: list[tuple[Combo, dict[str, torch.Tensor]]],
    level: int,
    to: int,
    tensors: dict[str, torch.Tensor],
    causal: bool,
) -> list[Departure]:
    """The departure of a scale mutation among the steps from ``level`` to ``to`` that ``r`` (the masked scores)
    passed over, at the value before ``r`` that holds that model's scaled scores (the scores never divided, or
    scaled wrongly on a line that matched no stage of the lecture's): [] when there is none."""
    scale = next((m for j in range(level + 1, to + 1) for m in chain[j][0] if SLOT_OF[m] == "scale"), None)
    scaled = chain[to][1].get("scaled")
    if scale is None or scaled is None:
        return []
    made = next(
        (x for x in trace.records if x.index < r.index and x.value is not None and x.value.shape == scaled.shape
         and _equal(x.value, scaled)),
        None,
    )  # fmt: skip
    if made is None:
        return []
    lecture = chain[level][1]
    words = describe(made, "scaled", lecture, tensors, causal)
    return [Departure(made, "scaled", words, lecture.get("scaled"), (scale,), causal)]


def _mask_pattern(trace: Trace, r: Record, hidden: torch.Tensor) -> Record | None:
    """The (T, T) mask ``r`` read whose entries (or their complement) are the ``hidden`` pattern."""
    by = {f"v:{x.index}": x for x in trace.records}
    earlier = [x for x in trace.records if x.index < r.index] if r.numpy else [by[n] for n in r.reads if n in by]
    for x in reversed(earlier):
        if _same_pattern(x, hidden):
            return x
    return None


def _same_pattern(x: Record, hidden: torch.Tensor) -> bool:
    """Whether ``x``'s value, cut to (T, T) where it is larger (a buffer of the block size), is nonzero exactly on
    ``hidden`` or exactly off it."""
    v, T = _one_matrix(x.value), hidden.shape[-1]
    if v is None or v.shape[0] < T or v.shape[1] < T or v.dtype.is_complex:
        return False
    nz = v[:T, :T] != 0
    return bool(torch.equal(nz, hidden) or torch.equal(nz, ~hidden))


def _one_matrix(v: torch.Tensor | None) -> torch.Tensor | None:
    """``v`` as one matrix: a matrix itself, or a stack of equal ones (a mask of shape (B, 1, T, T) that Hugging Face
    and Flax code broadcast over the batch and the heads); None for anything else."""
    if v is None or v.dim() < 2:
        return None
    if v.dim() == 2:
        return v
    stack = v.reshape(-1, *v.shape[-2:])
    return stack[0] if bool((stack == stack[:1]).all()) else None


def _pattern_origin(trace: Trace, x: Record | None, T: int) -> Record | None:
    """The line that made the pattern of mask ``x``: back through the values it was computed from that hold the
    same pattern (``self.tril[:T, :T] == 0`` to ``torch.tril(torch.ones(block, block))``), the first."""
    if x is None or x.value is None:
        return x
    matrix = _one_matrix(x.value)
    if matrix is None:
        return x
    hidden = matrix[:T, :T] != 0
    by = {f"v:{y.index}": y for y in trace.records}
    while True:
        sources = [by[n] for n in x.reads if n in by and _same_pattern(by[n], hidden)]
        if len(sources) != 1 or len(x.reads) != 1:
            return x
        x = sources[0]


def _mask_source(trace: Trace, r: Record, stages: dict[str, torch.Tensor]) -> Record | None:
    """The line that built the mask a departing masked value was made with, when the mask is what is wrong: a
    constant added to the scores (``r`` = scaled + it), or the pattern a masked_fill or where applied."""
    if r.value is None or "scaled" not in stages or r.value.shape != stages["scaled"].shape:
        return None
    T = r.value.shape[-1]
    by = {f"v:{x.index}": x for x in trace.records}
    earlier = [x for x in trace.records if x.index < r.index] if r.numpy else [by[n] for n in r.reads if n in by]
    masks = [x for x in earlier if _square_mask(x, T) or _broadcast_mask(x, T)]
    s = stages["scaled"].double()
    for x in reversed(masks):
        assert x.value is not None
        m = x.value if x.value.dim() < 4 else _one_matrix(x.value)
        if m is not None and m.dtype.is_floating_point and _equal(r.value, s + m.double()):
            return x
    masking = _masking_of(r.value, stages)
    if masking is None or masking.kind != "hides":
        return None
    if r.numpy:  # the arrays the line reads by name (``np.where(future, -np.inf, scores)``), its only dataflow
        named = _numpy_reads(trace)
        reads = next((x.reads for x in named.records if x.index == r.index), ())
        masks = [x for x in masks if f"v:{x.index}" in reads]
    pattern = [x for x in masks if x.value is not None and x.value.dtype == torch.bool]
    return _pattern_origin(trace, pattern[-1], T) if pattern else None


def _square_mask(x: Record, T: int) -> bool:
    """A (T, T) value, or a stack of them that is not one per sequence (a (B, T, T) value is the scores' shape)."""
    v = x.value
    if v is None or tuple(v.shape[-2:]) != (T, T):
        return False
    return v.dim() == 2 or (v.dim() == 3 and v.shape[0] != PROBE_B)


def _broadcast_mask(x: Record, T: int) -> bool:
    """A (B, 1, T, T) mask, the same for every sequence (Hugging Face's, Flax's ``make_causal_mask``; a BERT-style
    additive ``(1.0 - mask) * -10000.0``)."""
    v = x.value
    return (
        v is not None and v.dim() == 4 and v.shape[-3] == 1 and v.shape[-2:] == (T, T) and (_one_matrix(v) is not None)
    )


def _applied_mask(trace: Trace, r: Record) -> Record | None:
    """Where the boolean (T, T) pattern ``r``'s line applies (a masked_fill's, a where's) was made (a torch head's;
    ``_pattern_origin``)."""
    if r.value is None or r.value.dim() < 2 or r.numpy:
        return None
    T = r.value.shape[-1]
    by = {f"v:{x.index}": x for x in trace.records}
    masks = [
        x
        for n in r.reads
        if (x := by.get(n)) is not None
        and x.value is not None
        and x.value.dtype == torch.bool
        and x.value.dim() >= 2
        and tuple(x.value.shape[-2:]) == (T, T)
    ]
    return _pattern_origin(trace, masks[-1], T) if masks else None


def _flag_site(trace: Trace, r: Record) -> Record | None:
    """Where the mask ``r``'s line applies whatever the flag was made, when the flag belongs there (``_flagged``)."""
    source = _applied_mask(trace, r)
    return source if source is not None and _flagged(source, r) else None


def _flagged(source: Record, use: Record) -> bool:
    """Whether the line that made a mask (``source``), not the line that applies it (``use``), is in a function
    with the causal flag in reach: a mask applied whatever the flag is then made where the flag belongs (``mask =
    tril(...)`` passed to a helper that has no flag), else it is applied where the flag belongs (a buffer made in
    ``__init__``, applied in ``forward(x, causal)``)."""
    return source.flag and not use.flag


def _masking_of(v: torch.Tensor, stages: dict[str, torch.Tensor]) -> Finding | None:
    """:func:`_masking` of ``v`` against the scaled scores, or against the scores not yet scaled (a mask applied
    before the scale: ``-inf / sqrt(d_k)`` is -inf)."""
    for base in ("scaled", "scores"):
        if base in stages and (words := _masking(v, stages[base])) is not None:
            return words
    return None


Wrong = list[tuple[float, tuple[float, ...]]]  # a number a value was made with, and the numbers right for its role


def _wrong_numbers(
    r: Record, due: str, stages: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor], causal: bool
) -> Wrong:
    """The constants ``r`` was made with where the lecture has others, each with the numbers a name that made it
    holds rightly: the factor the scores were scaled by, where 1/sqrt(d_k) belongs (a name holding d_k, sqrt(d_k),
    1/d_k or 1/sqrt(d_k) is right, its use is not); the finite number the future keys were filled with or had
    added, where -inf belongs."""
    assert r.value is not None
    v, d_k = r.value.double(), tensors["W_Q"].shape[1]
    out: Wrong = []
    if due == "masked" and "masked" not in stages:
        due = "scaled"
    expected = stages.get(due)
    if due in ("scaled", "masked") and expected is not None and v.shape == expected.shape:
        said = describe_fit(v, expected)
        if said is not None and said.kind == "factor" and said.factor is not None:
            out.append((said.factor * d_k**-0.5, (d_k, d_k**0.5, 1 / d_k, d_k**-0.5)))
    if due in ("Q", "K") and expected is not None and v.shape == expected.shape:  # ``q = q * self.scale``: the
        said = describe_fit(v, expected)  # factor the queries (or keys) were scaled by, where 1/sqrt(d_k) belongs
        if said is not None and said.kind == "factor" and said.factor is not None:
            out.append((said.factor, (d_k, d_k**0.5, 1 / d_k, d_k**-0.5)))
    if due == "masked" and "scaled" in stages and v.shape == stages["scaled"].shape and v.dim() == 3:
        T = v.shape[-1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1).expand_as(v)
        for x in (v[future], (v - stages["scaled"].double())[future]):
            if x.numel() and bool(torch.isfinite(x).all()) and bool((x == x[0]).all()) and abs(x[0]) < HIDES:
                out.append((float(x[0]), ()))
    return out


def _made_elsewhere(trace: Trace, r: Record, numbers: Wrong) -> Bound | None:
    """The line that made the number ``r``'s line used where another belongs, when that is another line, it
    binds that name alone (``d_k = X.shape[-1]``, ``NEG = -1e6``, a helper's parameter from the call that passed
    it; not ``B, T, C = x.shape``, which names each axis rightly), and no other recorded line reads that value
    (a ``T`` that the mask reads too is right where it is made: the use is what is wrong), and it does not hold
    a number right for the role (``d_k = W_K.shape[-1]`` times ``math.sqrt(d_k)``: the use is wrong). A
    parameter is where the caller made the value it passed (the worker follows ``fill(s, NEG)`` to ``NEG = -1e6``)."""
    if not numbers:
        return None

    def fits(b: Bound) -> bool:  # 0 and ±1 are axes and identities more often than constants that were chosen,
        x = b.value  # but for a float written as one (``scale = 1.0``: a scale chosen there)
        forms: tuple[float, ...] = (x, 1 / x, math.sqrt(abs(x)), 1 / math.sqrt(abs(x)))
        forms = forms if abs(x) not in (0.0, 1.0) else (x,) if abs(x) == 1.0 and _float_literal(b) else ()
        return any(
            any(math.isclose(n, f, rel_tol=1e-9) for f in forms)
            and (not any(math.isclose(x, y) for y in right) or _scaled(b))
            for n, right in numbers
        )

    return next(
        (b for b in r.defs if fits(b) and _alone(b) and not _passed_on(b) and not _read_elsewhere(trace, b, r)), None
    )


def _passed_on(b: Bound) -> bool:
    """Whether ``b``'s line only passes a value on under its own name (``self.d_out = d_out``, ``d_k =
    self.d_k``): no number is chosen there, so a wrong use of it is the use's (a width named rightly, used as
    the scale's) (issue 35: a book's ``attn_scores / self.d_out**0.5`` was pointed at ``self.d_out = d_out``)."""
    try:
        tree = ast.parse(b.code.split("#", 1)[0].strip())
    except (SyntaxError, ValueError):
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return False
    return _last_name(node.targets[0]) is not None and _last_name(node.targets[0]) == _last_name(node.value)


def _last_name(x: ast.expr) -> str | None:
    """``d_out`` of ``d_out`` and of ``self.d_out``; None for anything else."""
    return x.id if isinstance(x, ast.Name) else x.attr if isinstance(x, ast.Attribute) else None


def _float_literal(b: Bound) -> bool:
    """Whether ``b``'s line binds its name to a float written out (``scale = 1.0``)."""
    try:
        tree = ast.parse(b.code.split("#", 1)[0].strip())
    except (SyntaxError, ValueError):
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    value = node.value if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    return isinstance(value, ast.Constant) and isinstance(value.value, float)


def _scaled(b: Bound) -> bool:
    """Whether ``b``'s line computes its number with a power, a true division or a square root (``scale =
    d_k ** -1``: a factor chosen there, the line to edit when it is the wrong one), not a width read as it is
    (``d_k = q.shape[-1]``, right where it is made: its use is what is wrong)."""
    try:
        tree = ast.parse(b.code)
    except (SyntaxError, ValueError):
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or node.value is None:
        return False
    for x in ast.walk(node.value):
        if isinstance(x, ast.BinOp) and isinstance(x.op, (ast.Pow, ast.Div)):
            return True
        func = x.func if isinstance(x, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("sqrt", "rsqrt", "pow"):
            return True
    return False


def _alone(b: Bound) -> bool:
    """Whether ``b``'s line binds its name alone: ``name = ...``, ``name: T = ...``, ``name += ...``, or is a
    call that passes the parameter (any line that is no assignment to the name)."""
    try:
        tree = ast.parse(b.code)
    except (SyntaxError, ValueError):  # part of a statement over several lines; a null byte
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        return names == [b.var] * len(node.targets) or b.var not in _targets(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(node.target, ast.Name) and node.target.id == b.var
    return node is not None


def _targets(targets: list[ast.expr]) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _read_elsewhere(trace: Trace, b: Bound, r: Record) -> bool:
    """Whether a recorded line other than ``r``'s reads the value ``b`` bound (the same binding)."""
    key = (b.var, b.file, b.line)
    return any(
        (x.file, x.line) != (r.file, r.line) and any((d.var, d.file, d.line) == key for d in x.defs)
        for x in trace.records
    )


VIEWS = ("reshape", "view", "contiguous", "clone", "__getitem__", "to", "type_as", "float", "double", "squeeze")


def _viewed(trace: Trace, r: Record, T: int) -> Record | None:
    """For a reshape (a view, a copy) of a value of another shape, the line that computed that value."""
    if r.op not in VIEWS or len(r.reads) != 1:
        return None
    by = {f"v:{x.index}": x for x in trace.records}
    x = by.get(r.reads[0])
    if x is None or _stage_shaped(x, T) or not _floating(x):
        return None
    return x


def _softmax_part(r: Record, stages: dict[str, torch.Tensor]) -> bool:
    """Whether ``r`` is a hand-written softmax's own step: the masked scores less each row's max, or their exp
    (Proposition 5.1): on the way to the weights, never a departure itself, whatever the weights become."""
    assert r.value is not None
    for stage in ("masked", "scaled"):
        s = stages.get(stage)
        if s is None or s.shape != r.value.shape:
            continue
        shifted = s - s.amax(-1, keepdim=True)
        if _equal(r.value, shifted) or _equal(r.value, torch.exp(shifted)):
            return True
    return False


def _nan_source(trace: Trace, r: Record, derived: set[str]) -> Record | None:
    """The constant (computed from no input) that brought NaN into ``r``, when ``r`` holds NaN."""
    if r.value is None or not r.value.dtype.is_floating_point or not bool(torch.isnan(r.value).any()):
        return None
    by = {f"v:{x.index}": x for x in trace.records}
    for name in r.reads:
        x = by.get(name)
        if x is not None and name not in derived and _floating(x) and bool(torch.isnan(x.value).any()):  # type: ignore[arg-type]
            return x
    return None


def _on_the_way(
    trace: Trace,
    r: Record,
    later: list[Record],
    stages: dict[str, torch.Tensor],
    reached: int,
    T: int,
    match: Callable[[Record, dict[str, torch.Tensor]], str | None] = matched,
) -> str | None:
    """The stage (past those reached) that a later value computed from ``r`` matches, if any: ``r`` is on the
    way to it (``.float()`` before a float32 softmax; the softmax before a mask applied after it)."""
    name = f"v:{r.index}"
    for x in later:
        if not _stage_shaped(x, T) or name not in _ancestors(trace, x):
            continue
        h = match(x, stages)
        if h is not None and RANK[h] > reached:
            return h
    return None


def _due(r: Record, stages: dict[str, torch.Tensor], reached: int) -> str:
    """The stage ``r`` stands in for: of its shape, the first one after those reached (the last one when none
    is later)."""
    assert r.value is not None
    same = [s for s, v in stages.items() if v.shape == r.value.shape and s not in ("K^T", "premasked")]
    later = sorted((s for s in same if RANK[s] > reached), key=lambda s: RANK[s])
    earlier = sorted((s for s in same if RANK[s] <= reached), key=lambda s: -RANK[s])
    best = [s for s in later + earlier if describe_fit(r.value, stages[s]) is not None]
    return (best or later or earlier or ["out"])[0]


def _dropped(trace: Trace, r: Record, good: dict[int, str], reached: int) -> Record | None:
    """A value matching a stage later than any ``r`` was computed from, that nothing reads (nor returns)."""
    if r.numpy:
        return None
    ancestors = _ancestors(trace, r)
    before = max((_rank(good[int(a[2:])]) for a in ancestors if int(a[2:]) in good), default=-1)
    read = {x for q in trace.records for x in q.reads}
    for q in trace.records:
        if q.index >= r.index or q.index not in good or q.numpy:
            continue
        name = f"v:{q.index}"
        if _rank(good[q.index]) > before and name not in read and name not in trace.returned:
            return q
    return None


def _rank(stage: str) -> int:
    """A stage's rank, the scores masked before the scale as far as the masked stage (they hold the mask)."""
    return RANK["masked"] if stage == "premasked" else RANK[stage]


# ---- the words -------------------------------------------------------------------------------------


def _quantity(c: float, d: int, d_k: int, T: int, d_v: int) -> tuple[str, bool]:
    """What a constant factor equals: '1/sqrt(d_k)', 'sqrt(d_k)', '1/d_k', ..., or a fixed number's square root
    ('1/sqrt(16)', True); ('', False) when nothing."""
    names = {
        "1/sqrt(d_k)": d_k**-0.5,
        "sqrt(d_k)": d_k**0.5,
        "1/d_k": 1 / d_k,
        "d_k": float(d_k),
        "1/sqrt(d)": d**-0.5,
        "sqrt(d)": d**0.5,
        "1/sqrt(T)": T**-0.5,
        "sqrt(T)": T**0.5,
        "1/sqrt(d_v)": d_v**-0.5,
        "1": 1.0,
        "-1": -1.0,
    }
    for name, x in names.items():
        if math.isclose(c, x, rel_tol=1e-6):
            return name, False
    if c > 0 and math.isclose(c**-2, round(c**-2), rel_tol=1e-6):
        return f"1/sqrt({round(c**-2)})", True
    return "", False


def describe_fit(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    """A short comparison of ``v`` with ``e`` when one of the simple relations holds (used to pick the stage)."""
    v, e = v.double(), e.double()
    for how in _RELATIONS:
        said = how(v, e)
        if said is not None:
            return said
    return None


def _float32(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.shape != e.shape or not _equal(v, e, FLOAT32_RTOL, FLOAT32_ATOL):
        return None
    return Finding("float32")


def _factor(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.shape != e.shape:
        return None
    v, e = v.double(), e.double()
    ok = torch.isfinite(v) & torch.isfinite(e) & (e.abs() > 1e-9)
    if not bool(ok.any()) or not torch.equal(torch.isfinite(v), torch.isfinite(e)):
        return None
    ratios = v[ok] / e[ok]
    c = float(ratios.median())
    if math.isclose(c, 1.0, rel_tol=1e-6) or not bool(
        torch.allclose(ratios, torch.full_like(ratios, c), rtol=_ratio_rtol())
    ):
        return None
    return Finding("factor", factor=c)


def _transpose(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.dim() < 2 or v.shape != e.transpose(-2, -1).shape or not _equal(v, e.transpose(-2, -1)):
        return None
    return Finding("transpose")


def _future(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.shape != e.shape or v.dim() != 3 or v.shape[-1] != v.shape[-2]:
        return None
    T = v.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1).expand_as(v)
    if not _equal(v[~future], e[~future]) or _equal(v[future], e[future]):
        return None
    seen = v[future]
    if bool(torch.isneginf(seen).all()) and bool(torch.isfinite(e[future]).all()):
        return Finding("causal_ignored")
    if bool(torch.isnan(seen).any()):
        return Finding("future_nan", instead=_what(e[future]))
    if bool(torch.isfinite(seen).all()) and bool((seen == seen.flatten()[0]).all()):
        return Finding("future_constant", fill=float(seen.flatten()[0]), instead=_what(e[future]))
    return Finding("future_kept", instead=_what(e[future]))


def _what(x: torch.Tensor) -> str:
    if bool(torch.isneginf(x).all()):
        return "-inf"
    if bool((x == 0).all()):
        return "0"
    return "other values"


def _nan(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.shape != e.shape:
        return None
    bad = torch.isnan(v) & ~torch.isnan(e)
    if not bool(bad.any()):
        return None
    return Finding("nan", count=int(bad.sum()), total=bad.numel())


def _rows(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.shape != e.shape or v.dim() != 3 or not bool(torch.isfinite(v).all()) or bool((v < 0).any()):
        return None
    if not bool(torch.allclose(e.sum(-1), torch.ones_like(e.sum(-1)))):
        return None  # only weights are rows in the simplex
    rows = v.sum(-1)
    if bool(torch.allclose(rows, torch.ones_like(rows), atol=1e-9)):
        return None
    for axis, which in ((-2, "queries"), (0, "batch")):
        s = v.sum(axis)
        if bool(torch.allclose(s, torch.ones_like(s), atol=1e-9)):
            return Finding("rows", axis=which)
    return Finding("rows", low=float(rows.min()), high=float(rows.max()))


def _dropout(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.shape != e.shape or e.numel() == 0:
        return None
    seen = e.abs() > 1e-12 * float(e.abs().max())  # a weight of exp(-100) is 0 to dropout's eye (a finite fill)
    zeroed = (v == 0) & seen
    kept = (v != 0) & seen
    if not bool(zeroed.any()) or not bool(kept.any()):
        return None
    k = v[kept] / e[kept]
    c = float(k.median())
    if not math.isfinite(c) or c <= 1 or not bool(torch.allclose(k, torch.full_like(k, c), rtol=_ratio_rtol())):
        return None
    return Finding("dropout", count=int(zeroed.sum()), factor=c, p=1 - 1 / c)


def _clamp(v: torch.Tensor, e: torch.Tensor) -> Finding | None:
    if v.shape != e.shape or not bool(torch.isfinite(v).all()):
        return None
    differ = ~torch.isclose(v, e, rtol=RTOL, atol=ATOL)
    if not bool(differ.any()):
        return None
    lo, hi = float(v.min()), float(v.max())
    floor = differ & torch.isclose(v, torch.full_like(v, lo)) & (e < lo)
    ceil = differ & torch.isclose(v, torch.full_like(v, hi)) & (e > hi)
    if not bool((floor | ceil)[differ].all()):
        return None
    return Finding("clamp", low=lo if bool(floor.any()) else None, high=hi if bool(ceil.any()) else None)


# a clamp before float32 accuracy: a floor of 1e-6 moves entries by less than float32's tolerance, but only
# a clamp leaves every changed entry at one bound
_RELATIONS: tuple[Callable[[torch.Tensor, torch.Tensor], Finding | None], ...] = (
    _clamp,
    _float32,
    _factor,
    _transpose,
    _future,
    _dropout,
    _rows,
    _nan,
)


def describe(
    r: Record, due: str, stages: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor], causal: bool
) -> Finding:
    """``r``'s value compared with the stage ``due`` it should have been (its words are the lecture's)."""
    assert r.value is not None
    v = r.value
    T, d, d_k = tensors["X"].shape[1], tensors["X"].shape[-1], tensors["W_Q"].shape[1]
    d_v = tensors["W_V"].shape[1]
    if due == "masked" and "masked" not in stages:
        due = "scaled"  # causal=False: the scaled scores go into the softmax unmasked
    # a value that is one of the lecture's stages (the scores where the scaled ones are due) is no substitution,
    # though a swap that leaves that stage alone (X for V) makes it too
    lecture = any(s.shape == v.shape and _equal(v, s) for s in stages.values())
    substituted = _substituted(v, stages, tensors, causal) if not lecture else None
    if substituted is not None:
        return substituted
    expected = stages.get(due)
    if expected is None:
        return Finding("value_due", stage=due)
    for stage in ("masked", "scaled"):
        if stage in stages and v.shape == stages[stage].shape and _equal(v, torch.exp(stages[stage])):
            return Finding("exp_without_max")
    if due == "weights" and (by_scores := _over_scores(v, stages)) is not None:
        return by_scores
    if due in ("scores", "premasked", "scaled", "masked") and "masked" in stages:
        masking = _masking_of(v, stages)
        if masking is not None:
            return masking
    said = describe_fit(v, expected)
    if said is not None and said.kind == "factor" and said.factor is not None:
        c = said.factor
        if due in ("scores", "scaled", "masked") and "scores" in stages:
            scale = c if due == "scores" else c * d_k**-0.5  # Q K^T times a factor is the scores, scaled
            if math.isclose(scale, 1.0, rel_tol=1e-9):
                return Finding("unscaled")
            quantity, fixed = _quantity(scale, d, d_k, T, d_v)
            return Finding("scaled_by", factor=scale, quantity=quantity, fixed=fixed, d_k=d_k)
        return Finding("times", stage=due, factor=c)
    if said is not None:
        return said
    if due in ("masked", "weights") and causal and not _has_future_mask(v):
        return Finding("not_masked")
    diff = (v.double() - expected.double()).abs() if v.shape == expected.shape else None
    if diff is not None and bool(torch.isfinite(diff).any()):
        return Finding("differs", stage=due, largest=float(diff[torch.isfinite(diff)].max()))
    return Finding("differs", stage=due)


def _over_scores(v: torch.Tensor, stages: dict[str, torch.Tensor]) -> Finding | None:
    """A softmax written by hand that divides exp(s) by the sum of the scores s (each row's max subtracted or not)
    instead of by the sum of exp(s)."""
    for stage in ("masked", "scaled"):
        s = stages.get(stage)
        if s is None or s.shape != v.shape:
            continue
        s = s.double()
        for x in (s, s - s.amax(-1, keepdim=True)):
            with torch.no_grad():
                guess = torch.exp(x) / x.sum(-1, keepdim=True)
            if _equal(v, guess) and not _equal(v, torch.softmax(s, -1)):
                return Finding("sum_of_scores")
    return None


def _masking(v: torch.Tensor, s: torch.Tensor) -> Finding | None:
    """How the entries ``v`` hides (those it changed from the scaled scores ``s``) differ from the future keys."""
    if v.shape != s.shape or v.dim() != 3:
        return None
    T = v.shape[-1]
    v, s = v.double(), s.double()
    hidden = ~torch.isclose(v, s, rtol=RTOL, atol=ATOL)  # (B, T, T)
    if not bool((hidden == hidden[:1]).all()) or bool(hidden.all()):
        return None
    h = hidden[0]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    fill = v[hidden]
    if torch.equal(h, future):
        if bool(torch.isneginf(fill).all()):
            return None
        added = (v - s)[hidden]
        if bool(torch.isfinite(fill).all()) and bool((fill == fill[0]).all()):
            return Finding("fill", fill=float(fill[0]))
        if bool(torch.isfinite(added).all()) and bool(torch.allclose(added, added[0].expand_as(added), rtol=1e-6)):
            return Finding("fill", fill=float(added[0]), added=True)
        if bool(torch.isnan(fill).any()):
            return Finding("fill_nan")
        return None
    which: dict[Pattern, torch.Tensor] = {
        "diagonal": torch.ones(T, T, dtype=torch.bool).triu(),
        "late": future.triu(2),
        "past": future.T,
        "inverted": ~future,
    }
    for name, pattern in which.items():
        if torch.equal(h, pattern):
            return Finding("hides", pattern=name)
    if not bool(h.any()):
        return None
    return Finding("hides", count=int(h.sum()), total=T * T, future_count=int(future.sum()))


def _has_future_mask(v: torch.Tensor) -> bool:
    if v.dim() != 3 or v.shape[-1] != v.shape[-2]:
        return True
    future = torch.ones(v.shape[-1], v.shape[-1], dtype=torch.bool).triu(1).expand_as(v)
    return bool(torch.isneginf(v[future]).all() or (v[future] == 0).all())


def _substituted(
    v: torch.Tensor, stages: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor], causal: bool
) -> Finding | None:
    """'X used where Q = X W_Q belongs': ``v`` is a stage computed with an input, or the wrong projection, in
    place of Q, K or V."""
    for words, stage in _swapped(tensors, causal):
        if stage.shape == v.shape and _equal(v, stage):
            return words
    return None


_SWAPPED: dict[tuple[int, bool], tuple[torch.Tensor, list[tuple[Finding, torch.Tensor]]]] = {}  # the last probes'


def _swapped(tensors: dict[str, torch.Tensor], causal: bool) -> list[tuple[Finding, torch.Tensor]]:
    """The stages of the head with an input or the wrong projection in place of Q, K or V, on this probe (kept
    for the probe being followed: every departure of one trace compares with the same ones)."""
    X, W_Q, W_K, W_V = (tensors[n] for n in ("X", "W_Q", "W_K", "W_V"))
    kept = _SWAPPED.get((id(X), causal))
    if kept is not None and kept[0] is X:
        return kept[1]
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    d_k = W_Q.shape[1]
    swaps: list[tuple[Finding, torch.Tensor, torch.Tensor, torch.Tensor]] = [
        (Finding("substituted", role="QK", source="X"), X, X, V),
        (Finding("substituted", role="Q", source="X"), X, K, V),
        (Finding("substituted", role="K", source="X"), Q, X, V),
        (Finding("substituted", role="K", source="W_Q"), Q, Q, V),
        (Finding("substituted", role="Q", source="W_K"), K, K, V),
        (Finding("substituted", role="V", source="X"), Q, K, X),
    ]
    T = X.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    out: list[tuple[Finding, torch.Tensor]] = []
    for words, q, k, val in swaps:
        if q.shape[-1] != k.shape[-1]:
            continue
        raw = q @ k.transpose(-2, -1)
        for scale in dict.fromkeys((d_k**-0.5, q.shape[-1] ** -0.5)):
            s = raw * scale
            m = s.masked_fill(future, float("-inf")) if causal else s
            w = torch.softmax(m, dim=-1)
            # values in place of V change the output alone: its scores are the lecture's
            out += [(words, stage) for stage in ((raw, s, m, w) if val is V else ()) + (w @ val,)]
    if len(_SWAPPED) > 4:
        _SWAPPED.clear()
    _SWAPPED[(id(X), causal)] = (X, out)
    return out


def where_of(r: Record) -> dict[str, Any]:
    return {"file": r.file, "line": r.line, "code": r.code}


def follow(
    head: Head,
    combo: Combo,
    fitted: dict[str, float],
    flags: Sequence[bool] = (True, False),
    length: int | None = None,
    square: bool = False,
) -> list[Departure]:
    """The departures of the head's own computation on the probe, at causal=True and, when that shows none
    or the causal flag is in question, at causal=False too (a head that ignores the flag departs only there)."""
    found: list[Departure] = []
    for causal, scale in [(f, 1.0) for f in flags] + [(True, HUGE)]:
        if scale == HUGE and found:
            break  # only when nothing departs at ordinary scores: a finite mask constant shows at huge ones
        if not causal and found and "causal_flag_ignored" not in combo:
            break
        tensors = probe(length, square)
        tensors = {**tensors, "X": tensors["X"] * scale}
        trace = traced(head, tensors, causal)
        if trace is None:
            continue
        theirs = _returned_weights(trace)
        chain = models(tensors, causal, combo, fitted, theirs)
        if not chain:
            continue
        deps = departures(trace, chain, tensors, causal, partial(_stages_with, tensors, causal, fitted, theirs))
        laid = _laid_out(trace, int(tensors["X"].shape[1]), tensors)
        for dep in deps + _swapped_sites(laid, combo, found + deps, tensors, causal):
            dep.context = trace.context.get(dep.record.file, {})
            same = (dep.record.file, dep.record.line, dep.explained_by)
            if not any((f.record.file, f.record.line, f.explained_by) == same for f in found):
                found.append(dep)
    return found


def fill_constants(
    head: Head, combo: Combo, fitted: dict[str, float], length: int | None = None, square: bool = False
) -> list[tuple[str, float]]:
    """The finite constants the head's traced call (on the probe, at causal=True) writes into the entries its mask
    hides ("weak_mask_fill") or adds to them ("weak_mask_constant"), where the model ``combo`` has the scaled
    scores: each value of the scores' shape that differs from them on some entries only, by one number there. At
    ordinary scores -100 hides the future keys as well as -inf, so no output tells it: the masked scores do."""
    tensors = probe(length, square)
    trace = traced(head, tensors, True)
    if trace is None:
        return []
    stages = stages_of(tensors, True, combo, fitted, _returned_weights(trace))
    if stages is None or "scaled" not in stages:
        return []
    T = int(tensors["X"].shape[1])
    s = stages["scaled"].double()
    found: dict[tuple[str, float], None] = {}
    for r in _laid_out(trace, T, tensors).records:
        if not _stage_shaped(r, T) or r.value is None or r.value.shape != s.shape:
            continue
        v = r.value.double()
        hidden = ~torch.isclose(v, s, rtol=RTOL, atol=ATOL)
        if not bool(hidden.any()) or bool(hidden.all()):
            continue
        for form, x in (("weak_mask_fill", v[hidden]), ("weak_mask_constant", (v - s)[hidden])):
            c = float(x[0])
            if c != 0 and bool(torch.isfinite(x).all()) and bool(torch.allclose(x, torch.full_like(x, c), rtol=1e-9)):
                found[(form, snap(c))] = None
    return list(found)


def _swapped_sites(
    trace: Trace, combo: Combo, found: list[Departure], tensors: dict[str, torch.Tensor], causal: bool
) -> list[Departure]:
    """A departure for each projection of the error model found that no departure shows: the values X W_V
    averaged as X, or the keys taken from W_Q, leave no stage of their own when a later mutation's model is
    followed (issue 35, item 5); their line is where the operand took the wrong input."""
    out = []
    shown = {m for d in found for m in d.explained_by}
    for m in combo:
        if m not in SUBSTITUTED or m in shown or not causal:
            continue
        words = SUBSTITUTED[m]
        site = _operand_site(trace, tensors, *words.operand)
        if site is None:
            continue
        role = words.operand[0]
        at = Record(-1, "", str(site["file"]), int(site["line"]), str(site["code"]), (), None)
        out.append(Departure(at, role, words, None, (m,), causal))
    return out


def _returned_weights(trace: Trace) -> torch.Tensor | None:
    """The weights the traced call returned, which a dropout model reads its dropped entries off."""
    for r in reversed(trace.records):
        name = f"v:{r.index}"
        if (
            name in trace.returned
            and r.value is not None
            and r.value.dim() == 3
            and r.value.shape[-1] == r.value.shape[-2]
        ):
            return r.value.double()
    return None
