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
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from grader.diagnosis._candidates import _best, _Candidate, _canonical, _exp_like, _next_stage, _restaged, _skipped
from grader.diagnosis._departure import _dropped
from grader.diagnosis._finding import SUBSTITUTIONS, Finding, Note
from grader.diagnosis._known import PROBE_SEED
from grader.diagnosis._matching import (
    PRESCALED,
    UNSCALED,
    Run,
    _due,
    _offered,
    _shaped,
    departing,
    layouts,
    match,
    repaired,
)
from grader.diagnosis._relations import describe, rescaled
from grader.diagnosis._repatch import _masked_alike, _pattern, _repatterned, _swapped, _unscaled, _used_instead
from grader.diagnosis._sites import (
    _bound,
    _flag_site,
    _made_elsewhere,
    _named_array,
    _nan_source,
    _wrong_numbers,
)
from grader.diagnosis._stages import RANK, stages_of
from grader.diagnosis._trace import (
    PROBE_B,
    PROBE_D,
    PROBE_DK,
    PROBE_DV,
    PROBE_T,
    Bound,
    Record,
    Trace,
    _derived,
    float32_accuracy,
    probe,
    traced,
)
from grader.head import Head

# The engine's causes join the diagnosis unless STEP4_INTERVENE=0 turns it off (to measure the diagnosis without
# it); the kit and the platform read the same code.
INTERVENE = os.environ.get("STEP4_INTERVENE", "1") != "0"


RUNS_MAX = 48  # re-runs of the head per flag: each candidate of each departure is one


STEPS_MAX = 6  # interventions per flag (real heads carry two or three mistakes)


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
                rescaled(describe(seen, due, view, tensors, causal), seen, trace.records, stages)
                if value is not None
                else Finding("value_due", due, raw=True)
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
