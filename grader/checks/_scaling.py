"""Which scale did the head apply to its scores? Read it off its own weights (Lemma 5.5)."""

from __future__ import annotations

import math

import torch

from grader.checks._base import Ctx, Verdict, check, failed, passed
from grader.inputs import Shape, make_case

D_KS = (16, 64, 256)
SLOPE_TOL = 1e-6
RESIDUAL_TOL = 1e-6


def fitted_scale(weights: torch.Tensor, raw_scores: torch.Tensor) -> tuple[float, float]:
    """Least-squares c with log w_ij - log w_i0 = c (s_ij - s_i0) over visible pairs j < i, and the
    largest residual. Within a causal row, log-weight differences are score differences."""
    T = weights.shape[-1]
    ii, jj = torch.tril_indices(T, T, offset=-1)
    logw = weights.double().log()
    dl = (logw[:, ii, jj] - logw[:, ii, 0]).flatten()
    ds = (raw_scores[:, ii, jj] - raw_scores[:, ii, 0]).flatten()
    ok = torch.isfinite(dl)
    if int(ok.sum()) == 0:
        return float("nan"), float("inf")
    c = float(dl[ok] @ ds[ok]) / float(ds[ok] @ ds[ok])
    resid = float((dl[ok] - c * ds[ok]).abs().max())
    if int(ok.sum()) < ok.numel():
        resid = float("inf")  # some permitted weight is 0 or negative: not a softmax of rescaled scores
    return c, resid


@check(
    "score_scaling",
    title="scores are divided by sqrt(d_k) (scale inferred from your weights)",
    cites="Lemma 5.5",
)
def score_scaling(ctx: Ctx) -> Verdict:
    """Lemma 5.5 and Remark 5.6: the head applies exactly 1/sqrt(d_k) to the raw scores q_i . k_j. The
    applied scale is recovered from the returned weights for d_k in {16, 64, 256}."""
    for k, d_k in enumerate(D_KS):
        case = make_case(Shape(2, 12, 48, d_k, 5), seed=ctx.seed(k))
        w = ctx.head.attention(case).weights
        S = (case.X @ case.W_Q) @ (case.X @ case.W_K).transpose(-1, -2)  # (B, T, T) raw scores
        c, resid = fitted_scale(w, S)
        applied = c * math.sqrt(d_k)
        if not (resid <= RESIDUAL_TOL * max(1.0, abs(c) * float(S.abs().max()))):
            return failed(
                f"With d_k = {d_k}, your weights are not a softmax of rescaled scores q_i . k_j over the "
                f"permitted keys: the fit log w_ij - log w_i0 = c (s_ij - s_i0) leaves a residual of "
                f"{resid:.3g}. The bug is not (only) the scale: check which scores you compute (queries on "
                "rows, keys on columns), the softmax axis and the mask (Lemma 5.5, Definition 2.2).",
                counterexample=case.counterexample(ctx.base_seed),
            )
        if abs(applied - 1) > SLOPE_TOL:
            guess = _name_scale(applied, d_k, case.shape.d)
            return failed(
                f"With d_k = {d_k}, your head multiplies the raw scores by {c:.6g} = {applied:.6g} / sqrt(d_k)"
                f"{guess}; Lemma 5.5 divides by sqrt(d_k) = {math.sqrt(d_k):g} so that the score variance "
                "does not grow with d_k (Remark 5.6).",
                counterexample=case.counterexample(ctx.base_seed),
            )
    return passed("The scale recovered from your weights is 1/sqrt(d_k) for d_k = 16, 64 and 256.")


def _name_scale(applied: float, d_k: int, d: int) -> str:
    candidates = {
        "no scaling at all": math.sqrt(d_k),
        "1/d_k": 1 / math.sqrt(d_k),
        "1/sqrt(d) (the model width)": math.sqrt(d_k / d),
        "1/d": math.sqrt(d_k) / d,
    }
    for name, value in candidates.items():
        if abs(applied - value) < 1e-6 * max(1.0, value):
            return f", i.e. {name}"
    return ""
