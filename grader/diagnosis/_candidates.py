"""What may replace a departing value (issue 35): each stage at or above the rank reached, in the value's layout, the
queries or keys scaled where the head scales, or pass-through; and which of those that make progress is preferred."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from grader.diagnosis._departure import _dropped
from grader.diagnosis._matching import (
    PATTERN,
    PRESCALED,
    UNSCALED,
    Run,
    _Departing,
    _fits,
    _offered,
    _shaped,
    _wide,
    departing,
    layouts,
    match,
    repaired,
)
from grader.diagnosis._relations import (
    _factor,
    describe_fit,
)
from grader.diagnosis._stages import RANK
from grader.diagnosis._trace import (
    PROBE_B,
    Record,
    Trace,
    _ancestors,
)


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


def _hides_future(v: torch.Tensor | None) -> bool:
    """A (.., T, T) value whose future entries (j > i) all hold one negative fill that no past entry holds."""
    if v is None or v.dim() < 2 or v.shape[-1] != v.shape[-2] or v.shape[-1] < 2:
        return False
    T = v.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    ahead, past = v[..., future], v[..., ~future]
    fill = ahead.flatten()[0]
    return bool((ahead == fill).all()) and float(fill) < 0 and not bool((past == fill).any())


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
