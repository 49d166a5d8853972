"""Patches at the line to edit when it is not the departing value's (issue 35): a stage computed and never used, the
line that made a mask's pattern, another projection made where this one belongs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from grader.diagnosis._candidates import _best, _Candidate, _nth, _siblings, _site
from grader.diagnosis._matching import PATTERN, Run, _Departing, departing, layouts, repaired
from grader.diagnosis._relations import (
    _masking,
)
from grader.diagnosis._sites import (
    _mask_source,
)
from grader.diagnosis._stages import _rank
from grader.diagnosis._trace import (
    Record,
    Trace,
    _ancestors,
    _derived,
)


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
