"""Every mistake, each at its line: find departures by intervention (issue 35).

The walk of ``_departure`` stops at the first value nothing in the catalog explains. Here the head is run again
(the worker's ``intervene`` op) with that value replaced by the lecture's stage it should have been, or by the
op's own input (pass-through: dropout, a cast, a clamp), and the next departure is looked for; this repeats
until the head returns the lecture's (out, weights) or nothing helps. Each replacement is one mistake, at its
line. The candidates for one departure are each stage at or above the rank its own ancestors reached, in the
recorded value's layout (as is, K^T, a head axis of size 1, one sequence of the batch: every sequence's
occurrence patched at once, each with its own slice, flattened; a (T, T) stage is never transposed: K Q^T is a
mistake), the masked scores before the scale (a head that masks, then scales: an equivalent form, never a
departure itself), and pass-through (of an op that keeps the shape; never a causal mask taken out at
causal=True); among those that make progress the one preferred repairs the output, else lets the head go on
furthest, else moves past the stages reached, else changes the value least; a stage a lower candidate fits (a
factor, a clamp, dropout: a simple relation of the value to it) is never skipped, and a stage that a value
computed from it undoes (Q Q^T as the scaled scores, then times sqrt(d_k)) is refused, so two mistakes with no op
between them stay two. A value read only to make a boolean mask (``tril(s) == 0``) is never a stage.

The line to edit is the value's, but where the operand that had to change was made on another line: a stage
computed and never used (that line), unscaled scores with no op that scales them (the line that made the scores),
a mask that hides the wrong entries (the line that made its pattern, e.g. a buffer in ``__init__``), a NaN
brought in by a constant (its line), a number the scale or the fill was made with, bound alone on another line
that computes it (``scale = d_k ** -1``; not a width read as it is, ``d_k = q.shape[-1]``, whose use is wrong), a
projection used where another belongs (the line that made it, kept only when patching it there makes the use
right; when it was made of a helper's parameter that no other line reads, the caller's line that passed the wrong
weight: ``attend(x, W_Q, W_Q, W_V)``) and the input bound where a projection belongs (``v = X``, or passed as
the values to a helper: ``attention(q, k, X)``).

A walk whose patches together make the head return the lecture's (out, weights) at causal=True and False is
*complete*: with those changes the head computes the lecture's head on the probe. That is the proof the causes
made of it stand on (``_pointing``): they join the diagnosis only when the walk is complete. A complete walk goes
on at causal=True on a probe of huge scores (:func:`large`, every score about -1e6, as numerical_stability's mask
constant case), from the patches found there: what only such scores show (a -1e4 or -100 fill, exp without the
row's max) is one more mistake when that walk repairs the head too. A value a patch put in says nothing of the
values before it (``Trace.patched``: never "on the way" to a stage). That each check a cause claims passes with
the patches (float16, a zero row, T = 1 are not walked) is proven by running the checks again on the head with
them (``_proof``), which narrows the claims that do not hold. Crashes are walked past when the raising op is a
torch op (its result is the patch).

Everything is judged here, in the grader: the worker only runs the head with the patches (``intervene`` op).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from grader.diagnosis._departure import _dropped
from grader.diagnosis._finding import SUBSTITUTIONS, Finding, Note
from grader.diagnosis._known import PROBE_SEED
from grader.diagnosis._relations import (
    _clamp,
    _dropout,
    _factor,
    _float32,
    _future,
    _masking,
    _transpose,
    describe,
    describe_fit,
)
from grader.diagnosis._sites import (
    _bound,
    _flag_site,
    _made_elsewhere,
    _mask_source,
    _named_array,
    _nan_source,
    _wrong_numbers,
)
from grader.diagnosis._stages import RANK, _rank, _softmax_part, cast_of, stages_of
from grader.diagnosis._trace import (
    FLOAT32_ATOL,
    FLOAT32_RTOL,
    PROBE_B,
    PROBE_D,
    PROBE_DK,
    PROBE_DV,
    PROBE_T,
    Bound,
    Record,
    Trace,
    _ancestors,
    _derived,
    _equal,
    float32_accuracy,
    probe,
    traced,
)
from grader.head import Head

# the relations that make a stage fit a value (a factor, float32 rounding, a transpose, a clamp, the future keys
# filled, dropout); rows that do not sum to 1 or NaN say too little to fit by
FITS = (_float32, _factor, _transpose, _clamp, _future, _dropout)
# The engine's causes join the diagnosis unless STEP4_INTERVENE=0 turns it off (to measure the diagnosis without
# it); the kit and the platform read the same code.
INTERVENE = os.environ.get("STEP4_INTERVENE", "1") != "0"
RUNS_MAX = 48  # re-runs of the head per flag: each candidate of each departure is one
STEPS_MAX = 6  # interventions per flag (real heads carry two or three mistakes)

Run = Callable[[Sequence[dict[str, Any]]], Trace | None]  # the head traced with some patches


@dataclass(frozen=True)
class Intervention:
    """One mistake: the value that departed (as first seen), the stage it was replaced by (or pass-through),
    the patches that did it (one per occurrence of the line), and the finding comparing value and stage."""

    record: Record
    stage: str
    passthrough: bool
    patches: tuple[dict[str, Any], ...]
    finding: Finding
    expected: torch.Tensor | None
    causal: bool
    value: torch.Tensor | None = None  # the departing value in the stage's own layout (B, T, n)
    context: dict[int, str] = field(default_factory=dict)  # the lines around it, by number
    site: Record | None = None  # the line to edit when it is not the patched value's: a result never used
    reads: frozenset[tuple[str, int, str]] = frozenset()  # the (file, line, op) of the values it was computed from
    large: bool = False  # found on the large probe (:func:`large`), not the ordinary one

    @property
    def at(self) -> Record:
        return self.site or self.record

    @property
    def description(self) -> str:
        return self.finding.words


@dataclass
class Walk:
    """The interventions found at both flags, whether with all of them the head returns the lecture's
    (out, weights) on the probe at each flag, and what it cost."""

    interventions: list[Intervention] = field(default_factory=list)
    repaired: dict[bool, bool] = field(default_factory=dict)  # causal flag -> the output equals the lecture's
    runs: int = 0
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return bool(self.repaired) and all(self.repaired.values())


# ---- layouts: a stage as a head may hold it ---------------------------------------------------------------


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


# ---- the departure ------------------------------------------------------------------------------------------


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


# ---- the walk ---------------------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    stage: str
    passthrough: bool
    patches: list[dict[str, Any]]
    trace: Trace | None = None
    fixed: bool = False
    further: int = -1  # the index of the value that departs next (a crash: of the last value made); the most: none
    change: float = math.inf
    fits: bool = False
    layout: str = "as is"


def _site(r: Record) -> dict[str, Any]:
    return {"file": r.file, "line": r.line, "var": r.var if r.numpy else ""}


def _nth(trace: Trace, r: Record) -> int:
    """How many values the worker recorded at ``r``'s line before ``r`` (its count for a patch)."""
    same = [x for x in trace.records if x.file == r.file and x.line == r.line and (not r.numpy or x.var == r.var)]
    return next(k for k, x in enumerate(same) if x.index == r.index)


def _siblings(trace: Trace, r: Record, shaped: bool = True) -> list[Record]:
    """The values the same op on the same line made (one per sequence of a per-sequence loop; with ``shaped``
    False, of any shape: ``q, k, v = a.float(), b.float(), c.float()``). Of a shaped op made several times a
    sequence (``q, k = x @ wq, x @ wk``), those at ``r``'s place in each sequence's turn."""
    same = [
        x
        for x in trace.records
        if (x.file, x.line, x.op, x.var) == (r.file, r.line, r.op, r.var)
        and x.value is not None
        and r.value is not None
        and (x.value.shape == r.value.shape or not shaped)
    ]
    turns = len(same) // PROBE_B
    if not shaped or turns < 2 or len(same) % PROBE_B:
        return same
    place = next(k for k, x in enumerate(same) if x.index == r.index)
    return same[place % turns :: turns]


def candidates(trace: Trace, dep: _Departing, stages: dict[str, torch.Tensor], only: str = "") -> list[_Candidate]:
    """Pass-through (a torch op with an input), then each stage at or above the rank ``dep``'s ancestors
    reached (``only`` that one), in each layout of the departing value; a per-sequence value patches each
    sequence's occurrence."""
    r = dep.record
    assert r.value is not None
    out: list[_Candidate] = []
    siblings = _siblings(trace, r)
    by = {f"v:{x.index}": x for x in trace.records}
    given = by.get(r.reads[0]) if r.reads else None
    if (
        not r.numpy
        and not only
        and given is not None
        and given.value is not None
        and given.value.shape == r.value.shape
    ):
        # every call of the op on that line returns its input; only an op that keeps the shape can be one that
        # should not be there (dropout, a cast, a clamp), never a product
        at = _siblings(trace, r, shaped=False)
        out.append(_Candidate("", True, [{**_site(x), "nth": _nth(trace, x), "value": None} for x in at]))
    offered = _offered(stages)
    for stage in sorted(offered, key=lambda s: RANK.get(s, RANK["masked"])):
        if RANK.get(stage, RANK["masked"]) < dep.reached or stage in ("K^T", *PRESCALED.values()):
            continue
        if only not in ("", stage):
            continue
        if stage == UNSCALED and (dep.reached != RANK["scores"] or not _fits(r, offered[stage])):
            continue  # only a mask applied to the unscaled scores (its pattern or fill wrong) takes them
        forms = list(layouts(offered[stage], r.value.shape))
        if not forms and stage == "out" and _wide(r, trace, stages):
            forms = [("as is", stages["out"])]  # the output of the lecture's width in place of a wider one
        if not forms:
            continue
        name, form = forms[0]  # as is before transposed: a square value takes the stage as is
        if name.startswith("seq:") and len(siblings) == PROBE_B:  # one occurrence per sequence: each its slice
            per: dict[str, torch.Tensor] = {}
            for n, f in forms:
                per.setdefault(n, f)
            if not all(f"seq:{b}" in per for b in range(PROBE_B)):
                continue
            patches = [
                {**_site(x), "nth": _nth(trace, x), "value": per[f"seq:{b}"], "stage": stage, "layout": f"seq:{b}"}
                for b, x in enumerate(siblings)
            ]
        else:
            patches = [{**_site(r), "nth": _nth(trace, r), "value": form, "stage": stage, "layout": name}]
        out.append(_Candidate(stage, False, patches, layout=name))
    return out + _prescaled(trace, r, dep, stages, only)


def _prescaled(
    trace: Trace, r: Record, dep: _Departing, stages: dict[str, torch.Tensor], only: str
) -> list[_Candidate]:
    """The queries (or keys) scaled by 1/sqrt(d_k), in place of a departing value that is them times another
    constant (``q = q * self.scale``): the equivalent form of the lecture's scale, put where the head scales, so
    that a wrong scale is one change (dropping the multiply would leave the scores unscaled, a second one)."""
    assert r.value is not None
    out: list[_Candidate] = []
    offered = _offered(stages)
    for stage, scaled in PRESCALED.items():
        if stage not in stages or only not in ("", scaled) or RANK[stage] < dep.reached:
            continue
        for (name, plain), (_, value) in zip(
            layouts(stages[stage], r.value.shape), layouts(offered[scaled], r.value.shape), strict=True
        ):
            fit = describe_fit(r.value, plain) if not name.startswith("seq:") else None
            if fit is not None and fit.kind == "factor":
                patch = {**_site(r), "nth": _nth(trace, r), "value": value, "stage": scaled, "layout": name}
                out.append(_Candidate(scaled, False, [patch], layout=name))
                break
    return out


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


def _change(a: torch.Tensor | None, b: torch.Tensor | None) -> float:
    """Relative L2 change from ``a`` to ``b`` plus the share of entries whose inf/NaN pattern changes."""
    if a is None or b is None or a.shape != b.shape:
        return math.inf
    a, b = a.double(), b.double()
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    both = fa & fb
    moved = float((a[both] - b[both]).norm() / (b[both].norm() + 1e-300)) if bool(both.any()) else 0.0
    flipped = float((fa != fb).double().mean() + ((~fa) & (~fb) & (a != b)).double().mean())
    return moved + flipped


def walk(
    run: Run,
    tensors: dict[str, torch.Tensor],
    causal: bool,
    budget: list[int],
    start: Sequence[dict[str, Any]] = (),
) -> tuple[list[Intervention], bool]:
    """The interventions that bring the head (``run``) to the lecture's (out, weights) at ``causal``, and
    whether they do; ``budget`` holds the re-runs left (shared by both flags) and is spent here. ``start``:
    patches found at the other flag, applied first (their stages recomputed at this one)."""
    stages = stages_of(tensors, causal, (), {}, None)
    if stages is None:
        return [], False
    patches: list[dict[str, Any]] = [p for p in (_restaged(p, stages) for p in start) if p is not None]
    found: list[Intervention] = []
    passed: frozenset[int] = frozenset()  # values on the way to the one that departs: no stage fits them
    trace = run(patches)
    budget[0] -= 1
    for _ in range(STEPS_MAX):
        if trace is None:
            return found, False
        if repaired(trace, stages):
            return found, True
        dep = departing(trace, stages, tensors, passed)
        best: _Candidate | None = None
        while dep is not None and best is None and budget[0] > 0:
            best = _best(run, patches, trace, dep, stages, tensors, budget, passed)
            if best is None:  # nothing fits it: it is on the way to the value that is wrong (a softmax's exp)
                passed |= {dep.record.index}
                dep = departing(trace, stages, tensors, passed)
        if dep is not None and best is not None and not (best.fits or best.fixed) and _exp_like(dep.record):
            # an exp (or a NumPy value: no dataflow is seen) that no stage fits, yet replacing it helps: when the
            # next value alone repairs the head, this one was on the way to it (a softmax whose sum is wrong)
            ahead = departing(trace, stages, tensors, passed | {dep.record.index})
            alt = _best(run, patches, trace, ahead, stages, tensors, budget, passed) if ahead is not None else None
            if ahead is not None and alt is not None and alt.fixed:
                passed |= {dep.record.index}
                dep, best = ahead, alt
        if dep is not None and best is not None and (gap := _skipped(trace, dep, best, stages)) is not None:
            before = _best(run, patches, trace, gap, stages, tensors, budget, passed, _next_stage(gap.reached))
            if before is not None:  # the stage skipped is missing after the operand's line: the line to edit
                dep, best = gap, before
        swap = _swapped(run, patches, trace, dep, stages, tensors, budget, passed) if dep and best else None
        if dep is None and trace.raised is not None and "line" in trace.raised and budget[0] > 0:
            crash = _past_crash(run, patches, trace, stages, tensors, budget, causal)  # a crash is a departure too
            if crash is None:
                return found, False
            found.append(crash[0])
            patches += crash[0].patches
            trace = crash[1]
            continue
        if dep is None or best is None or best.trace is None:
            return found, False
        r = dep.record
        due = best.stage or _due(r, stages)
        due = next((plain for plain, scaled in PRESCALED.items() if scaled == due), due)  # said of Q (or K)
        value = _canonical(trace, r, best.layout)
        seen = replace(r, value=value)
        view = stages  # the stages the value is described against: before the scale, the scores are the scaled
        if due == UNSCALED:
            due, view = "masked", {**stages, "scaled": stages["scores"], "masked": _offered(stages)[UNSCALED]}
        with float32_accuracy() if value is not None and value.dtype == torch.float32 else nullcontext():
            words = (
                describe(seen, due, view, tensors, causal) if value is not None else Finding("value_due", due, raw=True)
            )
        context = trace.context.get(r.file, {})
        good = {k: h[0] for k, h in dep.good.items()}
        alike = _masked_alike(trace, good)
        good.update(alike)
        dropped = _dropped(trace, r, good, dep.reached) if not r.numpy else None
        if dropped is not None and any(i.site is not None and i.site.index == dropped.index for i in found):
            dropped = None  # said already: this departure is another mistake of the op that should have read it
        if dropped is not None:  # the stage was computed, then never used: that line is the one to edit
            # another pattern than the lecture's (alike): said as it is
            words = Finding("never_used", good[dropped.index], alike=dropped.index in alike)
            context = trace.context.get(dropped.file, {})
            # patched as the edit would: the value read in its place becomes it, so a mistake of the op that reads
            # it (a softmax over the wrong axis, a wrong scale after a mask thrown away) is one more
            # (not a value masked with another pattern: read in the scores' place, it is no stage the walk can
            # go on from, and what its mask hides shows only once the line keeps its result)
            if dropped.index not in alike:
                best = _used_instead(run, patches, trace, r, dropped, good, budget) or best
        elif not causal and (made := _flag_site(trace, r)) is not None:
            # a mask applied whatever the flag, made where the flag is in reach (a helper that has none applies it)
            dropped = made
            words = words.noted(Note("applied", r.line, r.code))
            context = trace.context.get(made.file, {})
        elif (
            causal
            and due in ("masked", "premasked")
            and value is not None
            and (made := _pattern(trace, r, value, _unscaled(view) if due == "premasked" else view)) is not None
        ):
            # (at causal=False a mask that hides anything is applied where no mask belongs: its use is the line)
            elsewhere = (made.file, made.line) != (r.file, r.line)
            if elsewhere:
                dropped = made  # the mask hides the wrong entries: the line that made its pattern
                words = words.noted(Note("applied", r.line, r.code))
                context = trace.context.get(made.file, {})
            # patched where the pattern is made, when that alone moves past the use: the use keeps its own fill, a
            # mistake of its own that huge scores show (a diagonal hidden with -1e4: two mistakes, two lines). On the
            # use's own line only where its fill is finite (masked_fill(j > i + 1, -1e4)): with -inf, the line
            # patched whole is the same change, and the proof re-applies it on every call
            finite = not bool(torch.isinf(value).any())
            if elsewhere or finite:
                best = _repatterned(run, patches, trace, r, made, stages, tensors, budget, passed) or best
        elif (nan := _nan_source(trace, r, _derived(trace))) is not None:  # a constant brought NaN in: its line
            dropped = nan
            context = trace.context.get(nan.file, {})
        elif swap is not None:  # another projection was made where this one belongs: that line, and its patch
            dropped, best = swap
            passed_in = _passed_in(trace, dropped)  # made of a parameter bound to the wrong input: the caller's line
            if passed_in is not None:
                words = words.noted(Note("argument", r.line, r.code, made_line=dropped.line, made_code=dropped.code))
                dropped = passed_in
            else:
                words = words.noted(Note("made", r.line, r.code))
            context = trace.context.get(dropped.file, {})
        elif (
            due in ("scaled", "masked")
            and value is not None
            and (number := _number_made(trace, seen, due, view, tensors, causal)) is not None
        ):
            # the number that had to change (a scale, a fill) was made on another line: ``scale = d_k ** -1``
            words = words.noted(Note("set", r.line, r.code, var=number.var, value=number.value))
            dropped = replace(r, file=number.file, line=number.line, code=number.code)
            context = trace.context.get(number.file, {})
        elif (
            words.kind == "substituted"
            and words.source == "X"
            and (alias := _alias(trace, r, words, tensors)) is not None
        ):
            # the input bound where a projection belongs (``v = X``, or passed as the values: ``f(q, k, X)``)
            dropped = replace(r, file=str(alias["file"]), line=int(alias["line"]), code=str(alias.get("code", "")))
            context = trace.context.get(dropped.file, {})
        by = {f"v:{x.index}": x for x in trace.records}
        reads = frozenset((x.file, x.line, x.op) for n in r.reads if (x := by.get(n)) is not None)
        found.append(
            Intervention(
                r,
                due,
                best.passthrough,
                tuple(best.patches),
                words,
                view.get(due),
                causal,
                value,
                context,
                dropped,
                reads,
            )
        )
        patches += best.patches
        passed |= {r.index} if best.stage == UNSCALED else set()
        trace = best.trace
    return found, trace is not None and repaired(trace, stages)


def _number_made(
    trace: Trace, r: Record, due: str, stages: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor], causal: bool
) -> Bound | None:
    """The line that made the number ``r``'s line used where another belongs (the scale's factor, the fill), when
    it is another line that binds it alone and no other line reads it (``_sites._made_elsewhere``)."""
    return _made_elsewhere(trace, r, _wrong_numbers(r, due, stages, tensors, causal))


def _alias(trace: Trace, r: Record, words: Finding, tensors: dict[str, torch.Tensor]) -> dict[str, Any] | None:
    """The binding of a name ``r``'s line reads to the input X itself (the queries' operand first), else the
    first local bound to an input in the call's own body; in a NumPy head, an array bound to X's values under
    another name (``v = x``)."""
    bound = _bound(trace, r, "in:X", words.operand[0] == "Q")
    bound = bound or next((a for a in trace.aliases if not a.get("param")), None)
    return bound or (_named_array(trace, tensors, "X") if any(x.numpy for x in trace.records) else None)


def _passed_in(trace: Trace, r: Record) -> Record | None:
    """The caller's line where a parameter ``r``'s line reads (and no other line does) was bound to the weight
    input ``r`` reads, as a record at that line (``attention_2d(X[b], W_Q, W_Q, W_V)`` for ``k = x @ w_k``)."""
    for name in r.reads:
        if not name.startswith("in:W_"):
            continue
        alias = _bound(trace, r, name, False)
        if alias is not None and alias.get("param"):
            return replace(r, file=str(alias["file"]), line=int(alias["line"]), code=str(alias.get("code", "")))
    return None


def _past_crash(
    run: Run,
    patches: list[dict[str, Any]],
    trace: Trace,
    stages: dict[str, torch.Tensor],
    tensors: dict[str, torch.Tensor],
    budget: list[int],
    causal: bool,
) -> tuple[Intervention, Trace] | None:
    """The call raised before any value departed: the raising op's result replaced by each stage from the
    highest one reached on (as is); preferred: the head repaired, then the most values after it that equal a
    stage, then the stage of the op's input (a reshape), one not made yet, the lowest; with the trace it
    gives. None when none lets it past the crash."""
    raised = trace.raised or {}
    file, line = str(raised.get("file", "")), int(raised.get("line", 0))
    nth = sum(1 for x in trace.records if x.file == file and x.line == line)
    reached = [RANK[h[0]] for x in trace.records if _shaped(x, stages) and (h := match(x, stages)) is not None]
    top = max(reached, default=-1)
    made = {h[0] for x in trace.records if _shaped(x, stages) and (h := match(x, stages)) is not None}
    last = trace.records[-1] if trace.records else None  # the raising op's input, most often
    given = (match(last, stages) or ("", ""))[0] if last is not None and _shaped(last, stages) else ""
    forms = _crash_forms(stages, raised.get("shape"))
    best: tuple[tuple[bool, int, bool, bool, int], str, dict[str, Any], Trace] | None = None
    for stage in sorted(stages, key=lambda s: RANK[s]):
        if RANK[stage] < top:
            continue
        for layout, value in forms[stage]:
            if budget[0] <= 0:
                break
            budget[0] -= 1
            patch = {"file": file, "line": line, "nth": nth, "value": value, "stage": stage, "layout": layout}
            got = run([*patches, patch])
            if got is None:
                continue
            again = got.raised or {}
            there = bool(again) and (again.get("file"), again.get("line")) == (file, line)
            if there and len(got.records) <= len(trace.records):
                continue  # it still raises there
            fixed = repaired(got, stages)
            after = sum(1 for x in got.records[len(trace.records) :] if _shaped(x, stages) and match(x, stages))
            key = (fixed, after, stage == given, stage not in made, -RANK[stage])
            if best is None or key > best[0]:
                best = (key, stage, patch, got)
    if best is None:
        return None
    _, stage, patch, got = best
    context = trace.context.get(file, {})
    reads = raised.get("reads")
    if stage in UNPROJECTED and reads and set(reads) == {"in:X"}:  # ``x.view(B, T, h, d_v)``: the projection is
        # what it left out, and the crash where d_v ≠ d the width that gives (the crash's cause folds into it)
        op, code = str(raised.get("op", "raise")), str(raised.get("code", ""))
        record = Record(len(trace.records), op, file, line, code, (), None)
        words = UNPROJECTED[stage]
        return Intervention(record, stage, False, (patch,), words, stages[stage], causal, tensors["X"], context), got
    record = Record(len(trace.records), "raise", file, line, str(raised.get("code", "")), (), None)
    words = Finding("raises", stage, exception=str(raised.get("type") or ""))
    return Intervention(record, stage, False, (patch,), words, stages[stage], causal, None, context), got


# a crash at an op that read the input X alone, where the walk put a projection's stage: that projection left out,
# in the words a departure says it in (one projection each)
UNPROJECTED = {
    role: Finding("substituted", role=role, source=x) for role, x in SUBSTITUTIONS if x == "X" and role != "QK"
}


def _crash_forms(stages: dict[str, torch.Tensor], shape: Any) -> dict[str, list[tuple[str, torch.Tensor]]]:
    """Each stage in the layouts that fit the shape the raising op was asked for (a reshape's ``(B, T, h, d_v)``,
    one ``-1`` resolved by the stage's size), else as it is; every stage as it is when none fits that shape."""
    plain = {stage: [("as is", value)] for stage, value in stages.items()}
    if not isinstance(shape, list) or not shape or shape.count(-1) > 1:
        return plain
    fitted: dict[str, list[tuple[str, torch.Tensor]]] = {}
    for stage, value in stages.items():
        want = list(shape)
        if -1 in want:
            rest = math.prod(n for n in want if n != -1)
            if rest <= 0 or value.numel() % rest:
                fitted[stage] = []
                continue
            want[want.index(-1)] = value.numel() // rest
        fitted[stage] = list(layouts(value, torch.Size(want)))
    return fitted if any(fitted.values()) else plain


def _exp_like(r: Record) -> bool:
    """A value a hand-written softmax makes on its way to the weights: an exp, or any NumPy value."""
    return r.numpy or r.op in ("exp", "exp_")


def _restaged(patch: dict[str, Any], stages: dict[str, torch.Tensor]) -> dict[str, Any] | None:
    """``patch`` with its stage's value taken from ``stages`` (the other flag's): the masked scores are the
    scaled ones at causal=False, and the scores before the scale."""
    if patch.get("value") is None or patch.get("stage") == PATTERN:  # a pass-through; a mask's pattern (any flag)
        return patch
    stage = str(patch.get("stage", ""))
    offered = _offered(stages)
    stage = stage if stage in offered else {"masked": "scaled", UNSCALED: "scores"}.get(stage, "")
    if not stage:
        return None
    want = patch["value"].shape
    layout = str(patch.get("layout", ""))
    form = next((f for n, f in layouts(offered[stage], want) if n == layout), None)
    return {**patch, "value": form, "stage": stage} if form is not None else None


def _canonical(trace: Trace, r: Record, layout: str) -> torch.Tensor | None:
    """``r``'s value in the stages' layout (B, T, n): the inverse of ``layouts``; a per-sequence value is
    stacked with its siblings (None when they are not one per sequence)."""
    v = r.value
    if v is None:
        return None
    if layout.startswith("seq:"):
        siblings = _siblings(trace, r)
        if len(siblings) != PROBE_B:
            return None
        rows = [x.value for x in siblings if x.value is not None]
        rows = [x.squeeze(0) if x.dim() == 3 else x for x in rows]
        return torch.stack(rows)
    undo: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "as is": lambda t: t,
        "transposed": lambda t: t.transpose(-2, -1),
        "head axis": lambda t: t.squeeze(1),
        "head axis 2": lambda t: t.squeeze(2),
        "head axis T": lambda t: t.squeeze(1).transpose(-2, -1),
        "flat": lambda t: t.reshape(PROBE_B, -1, t.shape[-1]),
    }
    return undo.get(layout, lambda t: t)(v)


def _best(
    run: Run,
    patches: list[dict[str, Any]],
    trace: Trace,
    dep: _Departing,
    stages: dict[str, torch.Tensor],
    tensors: dict[str, torch.Tensor],
    budget: list[int],
    passed: frozenset[int],
    only: str = "",
) -> _Candidate | None:
    """The candidate for ``dep`` preferred (see the module's text; ``only``: that stage alone), None when none
    makes progress."""
    r = dep.record
    fitting: list[_Candidate] = []
    tried: list[_Candidate] = []
    for cand in candidates(trace, dep, stages, only):
        if budget[0] <= 0:
            break
        budget[0] -= 1
        cand.trace = run(patches + cand.patches)
        if cand.trace is None:
            continue
        now = next((x for x in cand.trace.records if x.index == r.index), None)
        if cand.passthrough:
            got = match(now, stages) if now is not None else None
            cand.stage, cand.layout = got if got is not None else ("", "as is")
        if "masked" in stages and RANK.get(cand.stage, 9) < RANK["masked"] and _hides_future(r.value):
            continue  # a causal head's mask taken out: the mistake is what it hides or its fill, not that it is there
        expected = _offered(stages).get(cand.stage)
        cand.change = _change(r.value, now.value if now is not None else None)
        cand.fits = bool(cand.stage) and expected is not None and _fits(r, expected)
        cand.fixed = repaired(cand.trace, stages)
        own = {r.index} if cand.stage == UNSCALED else set()  # no stage the values are matched against: it is one
        nxt = departing(cand.trace, stages, tensors, passed | own) if not cand.fixed else None
        if nxt is not None and nxt.record.index <= r.index:
            continue  # no progress: the patched value itself (or one before it) still departs
        if not cand.fixed and _back(cand.trace, r, cand.stage, stages):
            continue  # a mistake after it undid the stage put in (Q Q^T as the scaled scores, then times sqrt(d_k))
        if nxt is None and cand.trace.raised is not None:  # it goes on, to a crash further on
            cand.further = len(cand.trace.records)
        else:
            cand.further = 10**9 if nxt is None else nxt.record.index
        tried.append(cand)
        if cand.fits:
            fitting.append(cand)
            if cand.fixed:
                break  # none can do better

    # the stage the next departure reached is no measure: a later stage put in too early reaches further, and
    # the value after it departs as soon (Q Q^T patched to the weights instead of the scores). As far, a stage
    # past those reached beats staying put: dropping a wrong scale's multiply leaves the scale to the mask's patch
    def key(c: _Candidate) -> tuple[bool, int, bool, float, bool]:
        return (
            c.fixed,
            c.further,
            RANK.get(c.stage, RANK["masked"] if c.stage else -1) > dep.reached,
            -c.change,
            c.passthrough,
        )

    if fitting:  # a stage a lower candidate fits is never skipped
        return max(fitting, key=key)
    return max(tried, key=key) if tried else None


def _pattern(trace: Trace, r: Record, value: torch.Tensor, stages: dict[str, torch.Tensor]) -> Record | None:
    """The line that made the pattern of the mask a departing masked value (``value``, in the stages' layout) was
    made with, when the mask is what is wrong (on that line or another): from the mask applied, back through the
    square constants it was computed from (a buffer's slice, ``== 0``, ``.bool()``) to the first one that holds the
    pattern (``torch.tril(torch.ones(T, T))`` in ``__init__``, not its ``ones``)."""
    said = _masking(value, stages["scaled"]) if "scaled" in stages and value.shape == stages["scaled"].shape else None
    source = _mask_source(trace, replace(r, value=value), stages) if said and said.kind == "hides" else None
    if source is None:
        return None  # what the mask hides is right: its fill (or a NaN it brings) is what is wrong
    by = {f"v:{x.index}": x for x in trace.records}
    derived = _derived(trace)
    while True:
        made = [
            x for n in source.reads if (x := by.get(n)) is not None and n not in derived and _square_pattern(x.value)
        ]
        if len(made) != 1:
            break
        source = made[0]
    return source


def _used_instead(
    run: Run,
    patches: list[dict[str, Any]],
    trace: Trace,
    r: Record,
    dropped: Record,
    good: dict[int, str],
    budget: list[int],
) -> _Candidate | None:
    """The candidate that puts the value ``dropped`` made (a stage computed and never used) in place of the value
    read instead (an earlier stage of its shape: the scores a ``masked_fill`` left unassigned), on every sequence:
    the very value ``dropped`` was made of, where ``r`` comes from it (the scale after a mask thrown away then
    scales what the mask made), else one ``r`` reads; None when there is none or the head then raises."""
    by = {f"v:{x.index}": x for x in trace.records}
    mine = _ancestors(trace, r)
    made_of = [n for n in dropped.reads if n in mine]
    read = [
        x
        for n in (made_of or r.reads)
        if (x := by.get(n)) is not None
        and x.index in good
        and _rank(good[x.index]) < _rank(good[dropped.index])
        and x.value is not None
        and dropped.value is not None
        and x.value.shape == dropped.value.shape
    ]
    if not read or budget[0] <= 0:
        return None
    ours, theirs = _siblings(trace, read[-1]), _siblings(trace, dropped)
    if len(ours) != len(theirs):
        return None
    budget[0] -= 1
    at = [
        {**_site(x), "nth": _nth(trace, x), "value": d.value, "stage": good[dropped.index], "layout": "as is"}
        for x, d in zip(ours, theirs, strict=True)
    ]
    cand = _Candidate(good[dropped.index], False, at)
    cand.trace = run(patches + at)
    if cand.trace is None or cand.trace.raised is not None:
        return None
    return cand


def _masked_alike(trace: Trace, good: dict[int, str]) -> dict[int, str]:
    """The values a mask made of the scores (before the scale) or the scaled scores with another pattern than the
    lecture's: equal to them but where they hold one fill of -1e4 or below, each with the stage its mask makes. A
    masked_fill thrown away with the wrong pattern too (the triangle transposed) is a stage never used, at its
    line."""
    by = {f"v:{x.index}": x for x in trace.records}
    out: dict[int, str] = {}
    for q in trace.records:
        v = q.value
        if q.index in good or q.numpy or v is None or not v.dtype.is_floating_point or v.dim() < 2:
            continue
        read = [x for n in q.reads if (x := by.get(n)) is not None and good.get(x.index) in ("scores", "scaled")]
        if len(read) != 1 or read[0].value is None or read[0].value.shape != v.shape:
            continue
        moved = v != read[0].value
        if not bool(moved.any()) or bool(moved.all()):
            continue  # nothing hidden, or everything: no causal mask's work
        fills = torch.unique(v[moved])
        if fills.numel() == 1 and float(fills[0]) <= -1e4:
            out[q.index] = "premasked" if good[read[0].index] == "scores" else "masked"
    return out


def _unscaled(stages: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``stages`` as a mask applied before the scale sees them: the scores stand where the scaled scores do."""
    return {**stages, "scaled": stages["scores"]} if "scores" in stages else stages


def _square_pattern(v: torch.Tensor | None) -> bool:
    """A square matrix (or a stack of them) whose entries are not all equal: a mask's pattern, not its ``ones``."""
    return v is not None and v.dim() >= 2 and v.shape[-1] == v.shape[-2] > 1 and not bool((v == v.flatten()[0]).all())


PATTERN = "pattern"  # a patch of the values a mask is made of (j > i hidden), not of a stage


def _repatterned(
    run: Run,
    patches: list[dict[str, Any]],
    trace: Trace,
    r: Record,
    made: Record,
    stages: dict[str, torch.Tensor],
    tensors: dict[str, torch.Tensor],
    budget: list[int],
    passed: frozenset[int],
) -> _Candidate | None:
    """The candidate that replaces the pattern ``made`` holds (two values: kept and hidden) by the causal one
    (j > i hidden), either way round, when the head then goes on past ``r`` (the masked value it made departs no
    more); None when neither does, or the pattern is not a square of two values."""
    v = made.value
    if v is None or v.dim() < 2 or v.shape[-1] != v.shape[-2] or made.numpy:
        return None
    values = torch.unique(v)
    if values.numel() != 2:
        return None
    T = v.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1).expand(v.shape)
    for hidden, kept in ((values[0], values[1]), (values[1], values[0])):
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        form = torch.where(future, hidden, kept).to(v.dtype)
        at = [{**_site(x), "nth": _nth(trace, x), "value": form, "stage": PATTERN} for x in _siblings(trace, made)]
        cand = _Candidate("", False, at)  # every occurrence (a pattern made once per sequence)
        cand.trace = run(patches + cand.patches)
        if cand.trace is None or cand.trace.raised is not None:
            continue
        cand.fixed = repaired(cand.trace, stages)
        nxt = departing(cand.trace, stages, tensors, passed) if not cand.fixed else None
        if cand.fixed or (nxt is not None and nxt.record.index > r.index and nxt.record.line != r.line):
            cand.further = 10**9 if nxt is None else nxt.record.index
            return cand
    return None


def _hides_future(v: torch.Tensor | None) -> bool:
    """A (.., T, T) value whose future entries (j > i) all hold one negative fill that no past entry holds."""
    if v is None or v.dim() < 2 or v.shape[-1] != v.shape[-2] or v.shape[-1] < 2:
        return False
    T = v.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    ahead, past = v[..., future], v[..., ~future]
    fill = ahead.flatten()[0]
    return bool((ahead == fill).all()) and float(fill) < 0 and not bool((past == fill).any())


PROJECTIONS = ("Q", "K", "V")


def _swapped(
    run: Run,
    patches: list[dict[str, Any]],
    trace: Trace,
    dep: _Departing,
    stages: dict[str, torch.Tensor],
    tensors: dict[str, torch.Tensor],
    budget: list[int],
    passed: frozenset[int],
) -> tuple[Record, _Candidate] | None:
    """A projection ``dep``'s value read that is another projection (the keys made with W_Q), where it was made
    (back through its transposes and views): the first other projection of its shape that, put there, leaves
    ``dep``'s value departing no more, with that candidate. Tried only for a product of projections."""
    r = dep.record
    assert r.value is not None
    if r.numpy or not any(True for s in ("scores", "out") for _ in layouts(stages[s], r.value.shape)):
        return None
    by = {f"v:{x.index}": x for x in trace.records}

    def projection(n: str) -> Record | None:
        x = by.get(n)
        return x if x is not None and x.index in dep.good and dep.good[x.index][0] in PROJECTIONS else None

    for n in r.reads:
        x = projection(n)
        while x is not None and len(x.reads) == 1 and (up := projection(x.reads[0])) is not None:
            x = up
        if x is None:
            continue
        sub = _Departing(x, -1, {k: h for k, h in dep.good.items() if k < x.index})
        for stage in PROJECTIONS:
            if stage == dep.good[x.index][0] or budget[0] <= 0:
                continue
            alt = _best(run, patches, trace, sub, stages, tensors, budget, passed, stage)
            if alt is not None and alt.further > r.index:
                return x, alt
    return None


def _next_stage(rank: int) -> str:
    return next(s for s, k in RANK.items() if k == rank + 1)


def _skipped(trace: Trace, dep: _Departing, best: _Candidate, stages: dict[str, torch.Tensor]) -> _Departing | None:
    """The scores ``dep``'s value was computed from, as a departure of their own, when the stage ``best`` puts in
    skips the scaled scores (unscaled scores masked: the scale is missing after the line that made the scores,
    not at the mask's). A missing mask stays at the softmax that should have had masked scores."""
    r = dep.record
    if r.numpy or dep.reached != RANK["scores"] or RANK.get(best.stage, -1) <= RANK["scaled"]:
        return None
    if _dropped(trace, r, {k: h[0] for k, h in dep.good.items()}, dep.reached) is not None:
        return None  # the stage was made and never used: that line is the one to edit
    by = {f"v:{x.index}": x for x in trace.records}
    assert r.value is not None
    if any((x := by.get(n)) is not None and x.value is not None and _factor(r.value, x.value) for n in r.reads):
        return None  # it scales its operand: the scale is there (after the mask), only wrong
    made = [int(a[2:]) for a in _ancestors(trace, r)]  # the scores may come through a value in an equivalent form
    scores = [k for k in made if k in dep.good and RANK[dep.good[k][0]] == dep.reached]
    if not scores:
        return None
    # the line that made them: the first value that is the scores themselves, not one the mask went through (the
    # scores masked before the scale share their rank) nor a later copy (a padding mask that hides nothing, on a
    # branch a head may not take)
    made_here = [k for k in scores if dep.good[k][0] == "scores"]
    x = next(q for q in trace.records if q.index == (min(made_here) if made_here else max(scores)))
    return _Departing(x, dep.reached, {k: h for k, h in dep.good.items() if k < x.index})


def _back(trace: Trace, r: Record, stage: str, stages: dict[str, torch.Tensor]) -> bool:
    """Whether a value computed from ``r`` (replaced by ``stage``) equals an earlier stage past the projections:
    the head went back, so the stage came too early and hides the mistake of the op after it."""
    if stage not in RANK:
        return False
    name = f"v:{r.index}"
    for x in trace.records:
        if x.index <= r.index or not (r.numpy or name in _ancestors(trace, x)) or not _shaped(x, stages):
            continue
        got = match(x, stages)
        if got is not None and 0 < RANK[got[0]] < RANK[stage]:
            return True
    return False


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


def large(length: int | None = None) -> dict[str, torch.Tensor]:
    """The probe with every score negative, about -1e6 to -1e7 (as numerical_stability's mask-constant case, at the
    probe's widths: X and W_Q positive, W_K = -W_Q): a finite fill above them (-1e4, -100) outweighs every score a
    row keeps, and exp without the row's max underflows to 0/0, where the ordinary probe cannot tell either from
    the lecture's (Implementation aside 4.4)."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    X = 1 + torch.rand(PROBE_B, length or PROBE_T, PROBE_D, generator=g, dtype=torch.float64)
    a = math.sqrt(5e5 / (PROBE_D**2 * math.sqrt(PROBE_DK)))
    W = a * (1 + torch.rand(PROBE_D, PROBE_DK, generator=g, dtype=torch.float64))
    W_V = torch.randn(PROBE_D, PROBE_DV, generator=g, dtype=torch.float64)
    return {"X": X, "W_Q": W, "W_K": -W, "W_V": W_V}


LARGE_RUNS = 16  # re-runs of the head on the large probe, once the ordinary one is repaired


def intervene(head: Head, length: int | None = None, flags: Sequence[bool] = (True, False)) -> Walk:
    """Every mistake of ``head`` on the probe, found by intervention at each flag (see the module's text), then,
    with those patches, at causal=True on the large probe (:func:`large`): a mistake only huge scores show (a
    weak fill, exp without the max) is one more, and a walk that does not repair the head there adds nothing."""
    start = time.perf_counter()
    out = Walk()
    budget = [RUNS_MAX * len(flags)]
    tensors = probe(length)
    for causal in flags:
        found, fixed = _walked(head, tensors, causal, budget, out)
        _add(out, found)
        out.repaired[causal] = fixed
    if out.complete and True in flags:
        found, fixed = _walked(head, large(length), True, [LARGE_RUNS], out, large=True)
        if fixed:
            _add(out, [replace(i, large=True) for i in found], large=True)
    out.seconds = time.perf_counter() - start
    return out


def _walked(
    head: Head, tensors: dict[str, torch.Tensor], causal: bool, budget: list[int], out: Walk, large: bool = False
) -> tuple[list[Intervention], bool]:
    """One walk of ``head`` on ``tensors`` at ``causal``, from the patches ``out`` holds (on the ``large`` probe,
    those found at ``causal`` alone: a mask taken out at causal=False is no patch at True); its runs counted
    there."""

    def run(patches: Sequence[dict[str, Any]]) -> Trace | None:
        return traced(head, tensors, causal, patches=list(patches))

    before = budget[0]
    flags = (causal,) if large else (True, False)  # the large probe's walk: with the patches found at that flag
    start = [p for i in out.interventions if i.causal in flags for p in i.patches]
    found = walk(run, tensors, causal, budget, start)
    out.runs += before - budget[0]
    return found


def _add(out: Walk, found: list[Intervention], large: bool = False) -> None:
    """``found`` added to ``out``: one mistake seen at each flag where its value is first used (no scaling: the
    mask at True, the softmax at False) is one, so an intervention at a line known, or that reads what an earlier
    one read, is not another. The ``large`` probe's walk is at causal=True, with the patches found there: what it
    finds departs with all of them in place, so it is another mistake unless its value is one they patch (a fill
    at the line of a mask applied whatever the flag, or of a mask whose pattern was patched where it is made)."""
    if large:  # a value the patches found at that flag leave departing is another mistake, unless patched there
        # (that value itself: a fill applied on the line whose pattern was patched, masked_fill(j > i + 1, -1e4), is
        # another value of that line)
        def sites(i: Intervention) -> set[tuple[str, int, int]]:
            return {(str(p["file"]), int(p["line"]), int(p.get("nth") or 0)) for p in i.patches}

        patched = {site for i in out.interventions if i.causal for site in sites(i)}
        out.interventions += [i for i in found if not sites(i) & patched]
        return
    known = {(str(p["file"]), int(p["line"])) for i in out.interventions for p in i.patches}
    # a value departing at a line whose earlier intervention was patched elsewhere (a mask's pattern, where it is
    # made) departs again for another reason: the mask is applied there whatever the flag
    again = {(i.record.file, i.record.line) for i in out.interventions} - known
    used = {site for i in out.interventions for site in i.reads}
    out.interventions += [
        i
        for i in found
        if (i.record.file, i.record.line) in again
        or ((i.record.file, i.record.line) not in known and not i.reads & used)
    ]
