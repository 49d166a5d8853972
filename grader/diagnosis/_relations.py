"""How a value differs from the stage due (issue 51, item 1): each relation returns a :class:`Finding`, data whose
words ``_finding`` makes; :func:`describe` picks the one that says it best."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from grader.diagnosis._finding import Finding, Pattern
from grader.diagnosis._trace import ATOL, FLOAT32_ATOL, FLOAT32_RTOL, RTOL, Record, _equal, _ratio_rtol


def _masking_of(v: torch.Tensor, stages: dict[str, torch.Tensor]) -> Finding | None:
    """:func:`_masking` of ``v`` against the scaled scores, or against the scores not yet scaled (a mask applied
    before the scale: ``-inf / sqrt(d_k)`` is -inf)."""
    for base in ("scaled", "scores"):
        if base in stages and (words := _masking(v, stages[base])) is not None:
            return words
    return None


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


def rescaled(finding: Finding, r: Record, records: Sequence[Record], stages: dict[str, torch.Tensor]) -> Finding:
    """``finding`` of ``r``, marked ``rescaled`` where it is a wrong scale and ``r`` computes it from a value that
    is already the lecture's scaled stage (the scores divided by sqrt(d_k), masked or not): the scale applied a
    second time at this line, not a wrong scale where the scores are made."""
    if finding.kind != "scaled_by":
        return finding
    read = {f"v:{x.index}": x for x in records}
    operands = [read[k].value for k in r.reads if k in read and read[k].value is not None]
    already = [stages[s] for s in ("scaled", "masked") if s in stages]
    if any(v.shape == s.shape and _equal(v.double(), s.double()) for v in operands for s in already if v is not None):
        return replace(finding, rescaled=True)
    return finding


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
