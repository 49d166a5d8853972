"""Which scale did the head apply to its scores? Read it off its own weights (Lemma 5.5)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from grader.checks._base import Ctx, Verdict, check, failed, passed
from grader.compare import tolerance
from grader.inputs import Shape, make_case

D_KS = (16, 64, 256)


@dataclass(frozen=True)
class Fit:
    """log w = c * s + (an intercept per row, or per column), over the entries used."""

    c: float
    residual: float
    layout: str  # which reading of the weights fitted: how the softmax was laid out


def fitted_scale(weights: torch.Tensor, raw_scores: torch.Tensor) -> Fit:
    """The best of four readings of the weights as a softmax of c * scores: normalised over keys (rows)
    or over queries (columns), with the scores as given or transposed. The intercept absorbs each
    normaliser, so dropout (kept weights rescaled by 1/(1-p)) and a missing renormalisation leave the
    scale readable. Entries used: positive finite weights at permitted positions j <= i; where no row has
    two of those (a mask that hides the past), every positive finite weight."""
    w = weights.double()
    T = w.shape[-1]
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    fits = []
    for layout, scores, dim in (
        ("softmax over keys", raw_scores, -1),
        ("softmax over queries", raw_scores, -2),
        ("softmax over keys of transposed scores", raw_scores.transpose(-1, -2), -1),
        ("softmax over queries of transposed scores", raw_scores.transpose(-1, -2), -2),
    ):
        usable = (w > 0) & torch.isfinite(w)
        use = usable & allowed
        if int((use.sum(dim) >= 2).sum()) == 0:
            use = usable
        c, resid = _fit(w, scores, use, dim)
        fits.append(Fit(c, resid, layout))
    return min(fits, key=lambda f: f.residual)


def _fit(w: torch.Tensor, s: torch.Tensor, use: torch.Tensor, dim: int) -> tuple[float, float]:
    """Least squares for log w = c s + b (b constant along ``dim``) over ``use``; (c, largest residual)."""
    n = use.sum(dim, keepdim=True)  # entries per group
    use = use & (n >= 2)
    if int(use.sum()) == 0:
        return float("nan"), float("inf")
    logw = torch.where(use, w.clamp_min(1e-300).log(), 0.0)
    s = torch.where(use, s, 0.0)
    count = use.sum(dim, keepdim=True).clamp_min(1)
    dl = torch.where(use, logw - logw.sum(dim, keepdim=True) / count, 0.0)
    ds = torch.where(use, s - s.sum(dim, keepdim=True) / count, 0.0)
    denom = float((ds * ds).sum())
    if denom == 0:
        return float("nan"), float("inf")
    c = float((dl * ds).sum()) / denom
    return c, float((dl - c * ds).abs().max())


@check(
    "score_scaling",
    title="scores are divided by sqrt(d_k) (scale inferred from your weights)",
    cites="Lemma 5.5",
)
def score_scaling(ctx: Ctx) -> Verdict:
    """Lemma 5.5 and Remark 5.6: the head applies exactly 1/sqrt(d_k) to the raw scores q_i . k_j. The
    applied scale is recovered from the returned weights for d_k in {16, 64, 256}."""
    fit_tol = tolerance("scale_fit", ctx.working_dtype(torch.float64))
    slope_tol, resid_tol = fit_tol.rtol, fit_tol.atol
    for k, d_k in enumerate(D_KS):
        case = make_case(Shape(2, 12, 48, d_k, 5), seed=ctx.seed(k))
        w = ctx.head.attention(case).weights
        S = (case.X @ case.W_Q) @ (case.X @ case.W_K).transpose(-1, -2)  # (B, T, T) raw scores
        fit = fitted_scale(w, S)
        applied = fit.c * math.sqrt(d_k)
        if not (fit.residual <= resid_tol * max(1.0, abs(fit.c) * float(S.abs().max()))):
            return failed(
                f"With d_k = {d_k}, your weights are not a softmax of rescaled scores q_i . k_j in any layout: the "
                f"best fit log w_ij = c s_ij + b ({fit.layout}) leaves a residual of {fit.residual:.3g}, so "
                "the scale cannot be read off. Check which scores you compute (X W_Q against X W_K) and that "
                "the weights are exp of the scaled scores, normalised (Lemma 5.5, Definition 2.2).",
                counterexample=case.counterexample(ctx.base_seed),
            )
        if abs(applied - 1) > slope_tol:
            guess = _name_scale(applied, d_k, case.shape)
            return failed(
                f"With d_k = {d_k}, your head multiplies the raw scores by {fit.c:.6g} = {applied:.6g} / sqrt(d_k)"
                f"{guess}; Lemma 5.5 divides by sqrt(d_k) = {math.sqrt(d_k):g} so that the score variance "
                "does not grow with d_k (Remark 5.6).",
                counterexample=case.counterexample(ctx.base_seed),
            )
    return passed("The scale recovered from your weights is 1/sqrt(d_k) for d_k = 16, 64 and 256.")


def _name_scale(applied: float, d_k: int, shape: Shape) -> str:
    """Name the slip when the applied scale is a familiar one."""
    d, T = shape.d, shape.T
    if applied == 0 or not math.isfinite(applied):  # the fit's slope: weights that do not follow the scores
        return ", i.e. weights that do not change with the scores" if applied == 0 else ""
    candidates = {
        "no scaling at all": math.sqrt(d_k),
        "1/d_k": 1 / math.sqrt(d_k),
        "1/sqrt(d) (the model width)": math.sqrt(d_k / d),
        "1/d": math.sqrt(d_k) / d,
        f"1/sqrt(T) (the sequence length, T = {T})": math.sqrt(d_k / T),
    }
    for name, value in candidates.items():
        if abs(applied - value) < 1e-4 * max(1.0, value):
            return f", i.e. {name}"
    constant = (math.sqrt(d_k) / applied) ** 2  # the scale is 1/sqrt(constant)
    if abs(constant - round(constant)) < 1e-3 * constant and round(constant) > 0:
        return f", i.e. 1/sqrt({round(constant)}): a hard-coded width instead of d_k"
    return ""
