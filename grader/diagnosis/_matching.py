"""What departs in a walked trace (issue 35): a recorded value matched against the lecture's stages in every layout it
may hold them in (as is, K^T, a head axis, one sequence), to float32 accuracy where a cast the walk can take away made
it; the first value that matches none and is on the way to none; and whether the head is repaired."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from grader.diagnosis._relations import (
    _clamp,
    _dropout,
    _factor,
    _float32,
    _future,
    _transpose,
)
from grader.diagnosis._stages import RANK, _softmax_part, cast_of
from grader.diagnosis._trace import (
    FLOAT32_ATOL,
    FLOAT32_RTOL,
    PROBE_B,
    Record,
    Trace,
    _ancestors,
    _derived,
    _equal,
)

# the relations that make a stage fit a value (a factor, float32 rounding, a transpose, a clamp, the future keys
# filled, dropout); rows that do not sum to 1 or NaN say too little to fit by
FITS = (_float32, _factor, _transpose, _clamp, _future, _dropout)


Run = Callable[[Sequence[dict[str, Any]]], Trace | None]  # the head traced with some patches


def layouts(stage: torch.Tensor, shape: torch.Size) -> Iterator[tuple[str, torch.Tensor]]:
    """``stage`` (B, T, n) in each layout of shape ``shape``: as is, transposed (K^T), with a head axis of size 1,
    one batch element (a per-sequence loop's (T, n) or (1, T, n), named ``seq:<b>``), flattened (B*T, n)."""
    B = stage.shape[0]
    square = stage.shape[-1] == stage.shape[-2]  # a (T, T) stage transposed is another value (K Q^T), no layout
    forms: list[tuple[str, torch.Tensor]] = [("as is", stage), ("transposed", stage.transpose(-2, -1))]
    forms += [("head axis", stage.unsqueeze(1)), ("head axis 2", stage.unsqueeze(2))]
    forms += [("head axis T", stage.transpose(-2, -1).unsqueeze(1)), ("flat", stage.reshape(-1, stage.shape[-1]))]
    for name, form in forms:
        if form.shape == shape and not (square and name in ("transposed", "head axis T")):
            yield name, form
    for b in range(B):
        for form in (stage[b], stage[b : b + 1], *(() if square else (stage[b].transpose(-2, -1),))):
            if form.shape == shape:
                yield f"seq:{b}", form


def _shaped(r: Record, stages: dict[str, torch.Tensor]) -> bool:
    """A floating value with the shape of some stage in some layout (not a (T, T) mask of a batched head)."""
    v = r.value
    if v is None or not v.dtype.is_floating_point or v.dim() < 2:
        return False
    if r.numpy and (v.dim() != 3 or v.shape[0] != PROBE_B):
        return False  # a NumPy head's arrays have no dataflow: only batched values are judged
    return any(True for s in stages.values() for _ in layouts(s, v.shape))


# the ops that cast a value to another dtype: a cast can be walked away (its pass-through is its input)
CASTS = frozenset({"float", "half", "bfloat16", "double", "to", "type", "type_as"})


def _agrees(v: torch.Tensor, stage: torch.Tensor, exact: bool = False) -> bool:
    """Whether ``v`` is ``stage``: to float64 accuracy, or to float32's where ``v`` is float32 and not ``exact``
    (a cast, or made by one: ``_exact``). A patch takes the dtype of the value it replaces, so a value computed in
    float32 (after ``X = X.float()``, a softmax with ``dtype=torch.float32``) cannot be repaired to float64 accuracy:
    the walk goes past it to the mistakes behind it, and the float32 arithmetic is named by the first departure
    (its cause's line, ``_pointing``). A cast to float32 stays a departure: its pass-through repairs it (and what
    it made is matched exactly, ``_castable``)."""
    if _equal(v, stage):
        return True
    return v.dtype == torch.float32 and not exact and _equal(v, stage, FLOAT32_RTOL, FLOAT32_ATOL)


def _exact(r: Record, castable: frozenset[int] = frozenset()) -> bool:
    """Whether ``r`` is matched to float64 accuracy whatever its dtype: a cast, a value a cast the walk can take
    away made (``castable``), a NumPy array (its ``astype`` is no op the trace sees)."""
    return r.numpy or r.op in CASTS or r.index in castable


def _castable(trace: Trace) -> frozenset[int]:
    """The float32 values whose float32 comes from a cast of a computed float64 value (``s.float()``, not an input's
    ``X.float()``): the walk can repair them (the cast's pass-through), so they are matched to float64 accuracy. A
    NumPy array's too (its ``astype`` is no op the trace sees)."""
    made: set[str] = set()
    wider = {f"v:{x.index}" for x in trace.records if x.value is not None and x.value.dtype == torch.float64}
    for x in trace.records:
        if x.value is None or x.value.dtype != torch.float32:
            continue
        if x.numpy or (x.op in CASTS and any(n in wider for n in x.reads)) or any(n in made for n in x.reads):
            made.add(f"v:{x.index}")
    return frozenset(int(n[2:]) for n in made)


def match(r: Record, stages: dict[str, torch.Tensor], exact: bool = False) -> tuple[str, str] | None:
    """(stage, layout) of the latest stage ``r``'s value equals in some layout, if any (``exact``: to float64
    accuracy, whatever its dtype, as a NumPy array always is: its ``astype`` is no op the trace sees)."""
    v = r.value
    if v is None or not v.dtype.is_floating_point:
        return None
    for stage in sorted(stages, key=lambda s: -RANK[s]):
        for name, form in layouts(stages[stage], v.shape):
            if _agrees(v, form, exact or _exact(r)):
                return stage, name
    return None


def _neutral(r: Record, tensors: dict[str, torch.Tensor]) -> bool:
    """An input (or one sequence of it, or its transpose): handled on the way to a stage, never a stage."""
    assert r.value is not None
    for t in tensors.values():
        t3 = t if t.dim() == 3 else t.unsqueeze(0)
        if any(_equal(r.value, form) or cast_of(r.value, form) for _, form in layouts(t3, r.value.shape)):
            return True
    return False


@dataclass(frozen=True)
class _Departing:
    record: Record
    reached: int  # the rank the record's own ancestors reached (-1: none)
    good: dict[int, tuple[str, str]]  # record index -> (stage, layout) of the values before it that matched


def departing(
    trace: Trace,
    stages: dict[str, torch.Tensor],
    tensors: dict[str, torch.Tensor],
    passed: frozenset[int] = frozenset(),
) -> _Departing | None:
    """The first value (but the records ``passed``) of ``trace`` that leaves the lecture's ``stages``: a stage-shaped
    floating value computed from the inputs, read by something (or returned), that matches no stage in any layout
    and is not on the way to one (no value computed from it matches a stage above the rank its own ancestors
    reached)."""
    derived = _derived(trace)
    read = {x for q in trace.records for x in q.reads}
    read |= set((trace.raised or {}).get("reads") or ())  # what the raising op read: a wrong dtype meets it there
    readers = _readers(trace)
    masking = _masking_only(trace, readers)
    rewritten = _rewritten(trace, readers)
    castable = _castable(trace)  # float32 from a cast the walk can take away: matched exactly
    unscaled = _offered(stages).get(UNSCALED)
    good: dict[int, tuple[str, str]] = {}
    memo: dict[int, tuple[str, str] | None] = {}

    def hit(x: Record) -> tuple[str, str] | None:
        if x.index not in memo:
            memo[x.index] = match(x, stages, x.index in castable) if _shaped(x, stages) else None
        return memo[x.index]

    lines: dict[int, set[str]] = {}

    def lineage(x: Record) -> set[str]:
        if x.index not in lines:
            lines[x.index] = _ancestors(trace, x)
        return lines[x.index]

    records = trace.records
    for k, r in enumerate(records):
        if not _shaped(r, stages) and not _wide(r, trace, stages):
            continue
        h = hit(r)
        if h is not None:
            good[r.index] = h
            continue
        v = r.value
        assert v is not None
        name = f"v:{r.index}"
        if r.index in passed or name not in derived or _neutral(r, tensors):
            continue
        if _softmax_part(r, stages) or (unscaled is not None and _softmax_part(r, {"masked": unscaled})):
            continue  # a hand-written softmax's own step (less the row's max, its exp): on the way to the weights
            # (of the scores never scaled too: that mistake is the scores', not the softmax's)
        if not r.numpy and name not in read and name not in trace.returned:
            continue  # a dead value: nothing it computes reaches the output
        if not r.numpy and name in masking:
            continue  # read only to make a mask (tril(s) == 0): a mask's pattern, never a stage
        if name in rewritten:
            continue  # written into again by the same line (a mask set entry by entry): the last write is judged
        mine = lineage(r)
        reached = max((RANK[good[int(a[2:])][0]] for a in mine if int(a[2:]) in good), default=-1)
        before = unscaled is not None and reached == RANK["scores"]
        exact = _exact(r, castable)
        if before and any(_agrees(v, form, exact) for _, form in layouts(unscaled, v.shape)):  # type: ignore[arg-type]
            continue  # the scores masked before the scale: an equivalent form, whatever comes after it
        # a value an intervention put in says nothing of what led to it (the output patched where X is used as V)
        later = [x for x in records[k + 1 :] if (x.numpy or name in lineage(x)) and x.index not in trace.patched]
        if any((h := hit(x)) is not None and RANK[h[0]] > reached for x in later):
            continue  # on the way to a stage (a hand-written softmax's exp, a -1e9 fill at ordinary scores)
        return _Departing(r, reached, dict(good))
    return None


def _wide(r: Record, trace: Trace, stages: dict[str, torch.Tensor]) -> bool:
    """A returned (B, T, n) value where the output has another width (A X where A V belongs)."""
    v, out = r.value, stages["out"]
    return (
        v is not None
        and v.dtype.is_floating_point
        and f"v:{r.index}" in trace.returned
        and v.shape[:-1] == out.shape[:-1]
        and v.shape != out.shape
    )


def _readers(trace: Trace) -> dict[str, list[Record]]:
    """Each recorded value's name -> the records that read it."""
    readers: dict[str, list[Record]] = {}
    for q in trace.records:
        for n in q.reads:
            readers.setdefault(n, []).append(q)
    return readers


def _rewritten(trace: Trace, readers: dict[str, list[Record]]) -> set[str]:
    """The values an in-place write of a loop writes into again before anything else reads them (``S[i, j] =
    -inf`` for each future entry, one at a time): the entries written so far are no stage, the last write's is."""
    return {
        name
        for r in trace.records
        if _in_place(r.op)
        and (qs := readers.get(name := f"v:{r.index}", []))
        and all((q.file, q.line, q.op) == (r.file, r.line, r.op) for q in qs)
    }


def _in_place(op: str) -> bool:
    return op == "__setitem__" or (op.endswith("_") and not op.startswith("_"))


def _masking_only(trace: Trace, readers: dict[str, list[Record]]) -> set[str]:
    """The values every reader of which makes a boolean (a comparison: ``tril(s) == 0``), and not returned."""
    return {
        n
        for n, qs in readers.items()
        if n not in trace.returned and all(q.value is not None and q.value.dtype == torch.bool for q in qs)
    }


def repaired(trace: Trace, stages: dict[str, torch.Tensor]) -> bool:
    """Whether the call returned the lecture's (out, weights) (a head axis of size 1 allowed)."""
    got = [t for t in trace.returns if t is not None]
    if trace.raised is not None or len(got) < 2:
        return False
    exact = any(f"v:{i}" in trace.returned for i in _castable(trace))
    for t, stage in zip(got[:2], ("out", "weights"), strict=True):
        t = t.squeeze(1) if t.dim() == 4 and t.shape[1] == 1 else t
        if t.shape != stages[stage].shape or not _agrees(t, stages[stage], exact):
            return False
    return True


# the queries or the keys scaled by 1/sqrt(d_k) before the product (an equivalent form): offered only in place of
# them times another constant (``_prescaled``), never for another departure
PRESCALED = {"Q": "Q / sqrt(d_k)", "K": "K / sqrt(d_k)"}


UNSCALED = "masked before the scale"  # masked Q K^T: a head that masks, then scales, holds them (an equivalent form)


def _offered(stages: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The stages a value may be replaced by: the lecture's, and at causal=True the masked scores before the
    scale (a head that masks, then scales, is patched in its own order, not to the scaled stage a line early)."""
    prescaled = {name: stages[s] * stages["Q"].shape[-1] ** -0.5 for s, name in PRESCALED.items() if s in stages}
    if "masked" not in stages:
        return {**stages, **prescaled}
    return {**stages, **prescaled, UNSCALED: stages["masked"] * math.sqrt(stages["Q"].shape[-1])}


PATTERN = "pattern"  # a patch of the values a mask is made of (j > i hidden), not of a stage


def _fits(r: Record, expected: torch.Tensor) -> bool:
    """A simple relation holds between ``r``'s value and the stage (in the value's layout): a factor, float32
    rounding, a clamp, a transpose, the future filled, dropout, rows that do not sum to 1."""
    assert r.value is not None
    return any(
        how(r.value.double(), form.double()) is not None for _, form in layouts(expected, r.value.shape) for how in FITS
    )


def _due(r: Record, stages: dict[str, torch.Tensor]) -> str:
    assert r.value is not None
    same = [s for s, v in stages.items() if s != "K^T" and any(True for _ in layouts(v, r.value.shape))]
    return max(same, key=lambda s: RANK[s]) if same else "out"
