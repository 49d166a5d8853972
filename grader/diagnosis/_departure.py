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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import torch

from grader.diagnosis._finding import Finding, Note, _seen
from grader.diagnosis._mutations import SLOT_OF, Combo, snap
from grader.diagnosis._relations import _masking, _masking_of, describe, describe_fit, rescaled
from grader.diagnosis._sites import (
    _flag_site,
    _made_elsewhere,
    _mask_pattern,
    _mask_source,
    _nan_source,
    _operand_site,
    _pattern_origin,
    _scores_line,
    _thrown_away,
    _viewed,
    _wrong_numbers,
)
from grader.diagnosis._stages import (
    RANK,
    _neutral,
    _rank,
    _returned_weights,
    _softmax_part,
    _stage_shaped,
    _stages_with,
    matched,
    models,
    stages_of,
)
from grader.diagnosis._trace import ATOL, RTOL, Record, Trace, _ancestors, _derived, _equal, _laid_out, probe, traced
from grader.head import Head

HUGE = 300.0  # X scaled so that the scores are of order 1e5, far past exp's range (as _known's large probes)


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
            words = rescaled(describe(r, due, stages, tensors, causal), r, records, stages)
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


SUBSTITUTED = {  # the error model's projections swapped: what they found (their seen in causes.toml)
    cid: Finding("substituted", role=seen.role or "", source=seen.source or "")
    for cid, seen in _seen()
    if seen.kind == "substituted" and cid in SLOT_OF
}


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
