"""The error model: the reference head with a few slots that a student's code may change (issue 10).

A mutation is one change in one slot (how scores are scaled, which entries the mask hides, what it fills them
with, which softmax, its compute dtype, leftover randomness, which projections are multiplied). :func:`forward`
is the reference head (Definition 2.2, Definition 4.1, Lemma 5.5) with any set of mutations, at most one per
slot, applied. It runs here in the grader on the probes' trusted inputs; student code never runs here.

Some mutations carry a constant that is fitted from the head's own weights (a hard-coded scale, a weak
mask constant, a dropout rate): :func:`forward` fits it on the first probe that shows it and then holds
it fixed, so a constant that changes from input to input does not match.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from grader.diagnosis import _causes

SLOTS = ("scale", "switch", "mask", "fill", "softmax", "dtype", "randomness", "projections", "values")

# slot -> its mutations, in the order the search tries them: each mutation's ``slot`` (and ``fitted``, the name of
# the constant it fits) in causes.toml, in that file's order (issue 51: one registry of mistake kinds). The
# "switch" composes with every mask; the "fill" (what the hidden entries get, fitted) is its own slot, so a finite
# constant composes with every pattern that hides entries before the softmax (issue 35: a -100 fill beside a
# diagonal masked too); "projections" is what is multiplied and which value is returned as the weights; "values"
# its own slot: values never projected compose with the keys' projection and the weights returned (issue 35)
MUTATIONS: dict[str, tuple[str, ...]] = _causes.slots(SLOTS)
SLOT_OF = {m: slot for slot, ms in MUTATIONS.items() for m in ms}
FITTED = _causes.fitted()  # scale_in_float32's "divides": 1, scores divided by a float32 1/scale; 0, multiplied

# A fitted mask constant of magnitude below this leaks at ordinary scores (float64's exp underflows only past
# -745): it gets the "leaky" id, priced as the broken mask it is; a larger one masks exactly at ordinary scores
# and fails only at huge scores or in low precision (the "weak" id of the search).
ORDINARY_SCORES = 1e3
Combo = tuple[str, ...]  # mutation ids, at most one per slot, in SLOTS order


@dataclass
class Fit:
    """Constants fitted from the head's weights while a combination is evaluated over the probes."""

    values: dict[str, float] = field(default_factory=dict)
    coincide: set[str] | None = None  # named scales a fitted constant scale equalled on every probe so far

    def get(self, key: str, estimates: Callable[[], torch.Tensor]) -> float | None:
        """The held value of ``key``, or the snapped median of ``estimates()`` the first time there are any."""
        if key not in self.values:
            found = estimates()
            finite = found[torch.isfinite(found)]
            if finite.numel() == 0:
                return None
            self.values[key] = snap(float(finite.median()))
        return self.values[key]


def snap(x: float, digits: int = 4) -> float:
    """``x`` rounded to ``digits`` significant digits when that changes it by less than 1e-7 relative:
    a student writes -1e4 or 0.125, not -9999.99999997."""
    if x == 0 or not math.isfinite(x):
        return x
    rounded = float(f"{x:.{digits - 1}e}")
    return rounded if abs(rounded - x) <= 1e-7 * abs(x) else x


def _pick(combo: Combo, slot: str) -> str | None:
    return next((m for m in combo if SLOT_OF[m] == slot), None)


def _fit_scale(raw: torch.Tensor, theirs: torch.Tensor | None, allowed: torch.Tensor, axis: int) -> torch.Tensor:
    """Slope c of log w = c s + b_row over the positive allowed weights of each softmax group."""
    if theirs is None:
        return torch.empty(0, dtype=raw.dtype)
    s, w = raw.movedim(axis, -1), theirs.movedim(axis, -1)
    ok = (w > 0) & torch.isfinite(w) & allowed.expand_as(raw).movedim(axis, -1)
    n = ok.sum(-1, keepdim=True)
    logw = torch.where(ok, w.clamp_min(1e-300).log(), 0.0)
    s0 = torch.where(ok, s, 0.0)
    mean_s, mean_l = s0.sum(-1, keepdim=True) / n.clamp_min(1), logw.sum(-1, keepdim=True) / n.clamp_min(1)
    ds, dl = torch.where(ok, s - mean_s, 0.0), torch.where(ok, logw - mean_l, 0.0)
    num, den = (ds * dl).sum(-1), (ds * ds).sum(-1)
    good = (n.squeeze(-1) >= 2) & (den > 1e-12)
    return (num[good] / den[good]).flatten()


def _fit_mask(
    s: torch.Tensor, theirs: torch.Tensor | None, hidden: torch.Tensor, additive: bool, logw: torch.Tensor | None = None
) -> torch.Tensor:
    """The mask constant m from pairs (hidden j, allowed k) of one row with both weights positive (``hidden``:
    the (B, T, T) entries the mask's pattern hides): additive: log w_j - log w_k = s_j + m - s_k; fill:
    log w_j - log w_k = m - s_k. ``logw``: the log-weights themselves, where the head returned its scores (the
    weights they make underflow to 0 where -1e4 is added; the scores still hold it)."""
    if logw is not None:
        pos = torch.isfinite(logw)
    elif theirs is None:
        return torch.empty(0, dtype=s.dtype)
    else:
        pos = (theirs > 0) & torch.isfinite(theirs)
        logw = theirs.clamp_min(1e-300).log()
    estimates = []
    for b, i in zip(*torch.nonzero((pos & ~hidden).any(-1) & (pos & hidden).any(-1), as_tuple=True), strict=True):
        k = int(torch.nonzero(pos[b, i] & ~hidden[b, i])[0])
        js = torch.nonzero(pos[b, i] & hidden[b, i]).flatten()
        base = logw[b, i, js] - logw[b, i, k] + s[b, i, k]
        estimates.append(base - s[b, i, js] if additive else base)
    return torch.cat(estimates) if estimates else torch.empty(0, dtype=s.dtype)


def named_scales(T: int, d: int, d_k: int, d_v: int) -> dict[str, float]:
    """The score scale of the right head ("right") and of every scale mutation but the fitted constant."""
    return {
        "right": d_k**-0.5,
        "no_scaling": 1.0,
        "scale_by_dk": 1 / d_k,
        "scale_by_sqrt_d_model": d**-0.5,
        "scale_by_sqrt_T": T**-0.5,
        "scale_by_sqrt_dv": d_v**-0.5,
        "scale_times_sqrt_dk": d_k**0.5,
    }


def forward(
    X: torch.Tensor,
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    causal: bool,
    combo: Combo,
    fit: Fit,
    theirs: torch.Tensor | None = None,
    stages: dict[str, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The reference head with ``combo`` applied; None when a fitted constant cannot be fitted.

    ``stages``, when given, is filled with the intermediate values (Q, K, V, scores, scaled, masked, weights,
    out) that a trace of a head's own computation is compared with (``_departure``).

    ``theirs`` (the head's own weights on the same input) is read only to fit constants and, for
    dropout, the pattern of dropped entries (the RNG is not replayed: the kept entries must be scaled
    by one common 1/(1 - p) and the rest must be exactly what the mutated head computes).
    """
    T, d, d_k = X.shape[1], X.shape[-1], W_Q.shape[1]
    proj, scale_m, mask_m = _pick(combo, "projections"), _pick(combo, "scale"), _pick(combo, "mask")
    fill_m = _pick(combo, "fill")
    smax = _pick(combo, "softmax")
    if theirs is not None and proj == "weights_transposed":
        theirs = theirs.transpose(-2, -1)
    returned = theirs  # what the head returned as its weights
    if theirs is not None and proj == "scores_returned":
        theirs = torch.softmax(theirs, dim=-1)  # the weights they make: what the constants are fitted from
    q = X @ W_Q  # (B, T, d_k)
    k = X @ (W_Q if proj == "keys_from_query_projection" else W_K)  # (B, T, d_k)
    v = X if _pick(combo, "values") == "no_value_projection" else X @ W_V  # (B, T, d_v) or (B, T, d)
    raw = k @ q.transpose(-2, -1) if proj == "scores_transposed" else q @ k.transpose(-2, -1)  # (B, T, T)
    seen = stages if stages is not None else {}
    seen.update(Q=q, K=k, V=v, scores=raw)
    future = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)  # (T, T), j > i
    masking = (causal or _pick(combo, "switch") is not None) and mask_m != "no_mask"
    axis = {"softmax_wrong_axis": -2, "softmax_over_batch": 0}.get(smax or "", -1)
    scales = named_scales(T, d, d_k, W_V.shape[1])
    if scale_m == "scale_constant":
        if theirs is None and "scale" not in fit.values:
            return None
        allowed = ~future if masking else torch.ones_like(future)
        c = fit.get("scale", lambda: _fit_scale(raw, theirs, allowed, axis))
        if c is None:
            return None
        # the right scale, or one the named mutations describe, where it equals one on every probe (see matches)
        equal = {name for name, x in scales.items() if math.isclose(c, x, rel_tol=1e-6)}
        fit.coincide = equal if fit.coincide is None else fit.coincide & equal
        scale = c
    else:
        scale = scales[scale_m or "right"]
    if _pick(combo, "dtype") == "scale_in_float32":
        rounded = _float32_scaled(raw, scale, fit)
        if rounded is None:
            return None
        s = rounded
    else:
        s = raw * scale  # (B, T, T)
    seen["scaled"] = s
    if masking:
        logw = None
        if proj == "scores_returned" and returned is not None and returned.shape == s.shape:
            logw = torch.log_softmax(returned.to(s.dtype), dim=-1)
        masked = _mask_scores(s, mask_m, fill_m, future, fit, theirs, logw)
        if masked is None:
            return None
        s = masked
        seen["masked"] = s
    before_softmax = s  # (B, T, T): what a head returning its scores as the weights returns
    if _pick(combo, "dtype") == "softmax_in_float32":
        s = s.float()
    if smax == "unstable_softmax":
        e = torch.exp(s)
        w = e / e.sum(-1, keepdim=True)
    else:
        w = torch.softmax(s, dim=axis)
    w = w.to(X.dtype)  # (B, T, T)
    if masking and mask_m in ("mask_after_softmax_no_renorm", "mask_after_softmax_renorm"):
        w = w.masked_fill(future, 0.0)
        if mask_m == "mask_after_softmax_renorm":
            w = w / w.sum(-1, keepdim=True)
    if _pick(combo, "randomness"):
        if theirs is None:
            return None  # the dropped entries are the head's own draw: no replay without them
        kept = (theirs != 0) & (w != 0) & torch.isfinite(theirs)
        p = fit.get("p", lambda: 1 - w[kept] / theirs[kept])
        if p is None or not 0 < p < 1:
            return None
        w = torch.where(theirs == 0, torch.zeros_like(w), w / (1 - p))
    out = w @ v  # (B, T, T) x (B, T, d_v) -> (B, T, d_v)
    seen.update(weights=w, out=out)
    if proj == "scores_returned":
        return out, _filled_as_returned(before_softmax.to(X.dtype), returned)
    return out, (w.transpose(-2, -1) if proj == "weights_transposed" else w)


def _filled_as_returned(scores: torch.Tensor, returned: torch.Tensor | None) -> torch.Tensor:
    """The masked scores a head returns as its weights, with the head's own fill where the mask hides with -inf,
    when that fill is one constant that masks as -inf does (-1e9: no mistake of its weights, only of the return)."""
    hidden = torch.isneginf(scores)
    if returned is None or returned.shape != scores.shape or not bool(hidden.any()):
        return scores
    there = returned[hidden]
    c = float(there.flatten()[0])
    if math.isfinite(c) and c <= -ORDINARY_SCORES and bool((there == c).all()):
        return scores.masked_fill(hidden, c)
    return scores


def _float32_scaled(raw: torch.Tensor, scale: float, fit: Fit) -> torch.Tensor | None:
    """``raw`` scaled by ``scale`` rounded to float32 (``torch.sqrt(torch.tensor(d_k))`` is a float32 number):
    divided by the rounded 1/scale, or multiplied by the rounded scale, as ``fit`` says (the search tries
    both). Where rounding changes nothing (sqrt(T) at T = 4) it is the plain scale: the other probes tell (issue
    30: a float32 sqrt(T) divisor was otherwise named a float32 softmax); where it changes nothing on any probe,
    the plain model, one change smaller, is found first."""
    if scale == 0 or not math.isfinite(scale):  # a fitted scale of 0 (every score alike): nothing to round
        return raw * scale  # (issue 35: 1 / 0 raised inside the search)
    divisor = float(torch.tensor(1 / scale, dtype=torch.float32))
    factor = float(torch.tensor(scale, dtype=torch.float32))
    if divisor == 1 / scale and factor == scale:
        return raw * scale
    return raw / divisor if fit.values.get("divides", 1.0) else raw * factor


def _hide(s: torch.Tensor, hidden: torch.Tensor, fit: Fit, theirs: torch.Tensor | None) -> torch.Tensor:
    """``s`` with ``hidden`` filled by the head's constant, read off a row with nothing left: -inf leaves it
    NaN, a finite fill (-1e9, the usual one, until such a row shows) leaves it uniform."""
    whole = hidden.expand_as(s).all(-1)  # (B, T)
    if "hide_fill" not in fit.values and theirs is not None and theirs.shape == s.shape:
        if bool(torch.isnan(theirs[hidden.expand_as(s)]).any()):  # NaN where it hides, along whatever axis the
            fit.values["hide_fill"] = -math.inf  # softmax takes (over the batch: a key hidden in every sequence)
        elif bool(whole.any()):
            fit.values["hide_fill"] = -math.inf if bool(torch.isnan(theirs[whole]).any()) else -1e9
    return s.masked_fill(hidden, fit.values.get("hide_fill", -1e9))


def _hidden(s: torch.Tensor, mask_m: str | None, future: torch.Tensor) -> torch.Tensor | None:
    """The entries the (possibly mutated) causal mask hides before the softmax; None for a mask that hides
    nothing there (none at all, or one applied after the softmax)."""
    ones = torch.ones_like(future)
    return {
        None: future,
        "mask_transposed": future.T,  # keeps j >= i
        "mask_excludes_diagonal": ones.triu(),  # j >= i: row 0 has no key left
        "mask_leaks_by_one": future.triu(2),
        "mask_inverted": ~future,  # keeps only j > i
        "mask_value_derived": s.tril() == 0,  # "masked" wherever the lower-triangular copy is 0
    }.get(mask_m)


def _mask_scores(
    s: torch.Tensor,
    mask_m: str | None,
    fill_m: str | None,
    future: torch.Tensor,
    fit: Fit,
    theirs: torch.Tensor | None,
    logw: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """The scores after the (possibly mutated) causal mask, before the softmax: the entries its pattern hides
    get -inf, or the finite constant of ``fill_m``, written into them or added to them (``logw``: see
    :func:`_fit_mask`)."""
    hidden = _hidden(s, mask_m, future)
    if hidden is None:
        return None if fill_m is not None else s  # no mask, or one after the softmax: nothing to fill
    if fill_m is None:
        if mask_m in ("mask_excludes_diagonal", "mask_value_derived"):
            return _hide(s, hidden, fit, theirs)  # rows with nothing left
        return s.masked_fill(hidden, float("-inf"))
    if theirs is None and "mask" not in fit.values:
        return None
    additive = fill_m == "weak_mask_constant"
    m = fit.get("mask", lambda: _fit_mask(s, theirs, hidden.expand_as(s), additive, logw))
    if m is None:  # not yet seen: only exact zeros so far
        if not additive and mask_m in ("mask_excludes_diagonal", "mask_value_derived"):
            return _hide(s, hidden, fit, theirs)  # a row with nothing left is uniform for any finite fill
        m = -1e300 if additive else float("-inf")
    elif additive and abs(m) < 1e-9:
        return None  # adding nothing: the plain "no mask" describes it
    if not additive:
        return s.masked_fill(hidden, m)
    if fit.values.get("mask_rounded"):  # the constant rounded to the scores' dtype first (NumPy's rule)
        return s + hidden.to(s.dtype) * torch.tensor(m, dtype=s.dtype)
    return s + m * hidden.to(s.dtype)
