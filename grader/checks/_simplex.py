"""Attention rows live in a simplex (Proposition 3.1), on the prefix face when masked (Definition 4.1)."""

from __future__ import annotations

from functools import partial

import torch

from grader.checks._base import Ctx, Verdict, check, every_group, failed, heatmaps_for, passed, weights_of
from grader.compare import dtype_name, tolerance
from grader.inputs import FAMILIES, Case, make_case, simple_cases

DTYPES = (torch.float64, torch.float32)  # the dtype groups of row_stochastic and causal_mask

# Relative slack of the hull bounds, by the precision the head computes in (a few units of rounding).


@check(
    "row_stochastic",
    title="every weight is nonnegative and every row sums to one",
    cites="Proposition 3.1",
)
def row_stochastic(ctx: Ctx) -> Verdict:
    """Proposition 3.1: each attention row is a probability vector (entries >= 0, sum 1), masked or not; every
    dtype group is judged (issue 30)."""
    groups = [(f"{dtype_name(dtype)} inputs", partial(_row_stochastic, ctx, dtype)) for dtype in DTYPES]
    verdict = every_group(groups)
    return verdict or passed("All weights are nonnegative and every row sums to one (float64 and float32).")


def _row_stochastic(ctx: Ctx, dtype: torch.dtype) -> Verdict | None:
    working = ctx.working_dtype(dtype)
    tol = tolerance("row_sum", working).atol
    for case in ctx.cases(FAMILIES, dtype=dtype):
        for causal in (True, False):
            w = ctx.head.attention(case, causal=causal).weights
            neg = w < 0
            if bool(neg.any()) or not bool(torch.isfinite(w).all()):
                idx = tuple(int(i) for i in (neg | ~torch.isfinite(w)).nonzero()[0])
                return failed(
                    f"Weight {idx} is {float(w[idx]):.4g}; softmax weights are positive and finite (Proposition 3.1).",
                    counterexample=case.counterexample(ctx.base_seed, causal=causal),
                    heatmaps=heatmaps_for(w, ctx.ref.attention(case, causal)[1], causal=causal, batch=idx[0]),
                )
            dev = (w.double().sum(-1) - 1).abs()
            if float(dev.max()) > tol:
                b, i = (int(v) for v in (dev == dev.max()).nonzero()[0])
                return failed(
                    f"Row {i} of batch element {b} sums to {float(w[b, i].double().sum()):.10g}, not 1 "
                    f"(up to {tol:g} allowed{_at(working, dtype)}); every attention row is a probability "
                    "vector (Proposition 3.1).",
                    counterexample=case.counterexample(ctx.base_seed, causal=causal),
                    heatmaps=heatmaps_for(w, ctx.ref.attention(case, causal)[1], causal=causal, batch=b),
                )
    return None


def _at(working: torch.dtype, dtype: torch.dtype) -> str:
    """Which precision a tolerance was taken at, and why when it is not the inputs' dtype."""
    if working == dtype:
        return f" in {dtype_name(dtype)}"
    return f" at {dtype_name(working)} precision, which your head computes in"


@check(
    "causal_mask",
    title="the strict upper triangle of the weights is exactly zero",
    cites="Definition 4.1",
)
def causal_mask(ctx: Ctx) -> Verdict:
    """Definition 4.1: with causal=True, weights[b, i, j] == 0 exactly for j > i (NaN is not 0), on simple
    inputs (zero, repeated and one-hot tokens, d_k = 1) and on random ones, float64 and float32 (each judged)."""
    groups = [(f"{dtype_name(dtype)} inputs", partial(_causal_mask, ctx, dtype)) for dtype in DTYPES]
    verdict = every_group(groups)
    return verdict or passed(
        "The strict upper triangle is exactly zero on simple and random inputs (float64 and float32)."
    )


def _causal_mask(ctx: Ctx, dtype: torch.dtype) -> Verdict | None:
    for case in [*simple_cases(seed=ctx.seed(50), dtype=dtype), *ctx.cases(FAMILIES[1:], dtype=dtype)]:
        w = ctx.head.attention(case).weights
        T = case.shape.T
        upper = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        leak = w[:, upper]
        if bool((leak != 0).any()) or not bool(torch.isfinite(leak).all()):
            b, i, j = _first_nonzero_above(w, upper)
            by_value = _masks_random_inputs(ctx, case)
            how = " (by position, never by value)" if by_value else ""
            return failed(
                f"weights[{b}, {i}, {j}] = {float(w[b, i, j]):.4g}, but query {i} may only attend to keys "
                f"0..{i}: the strict upper triangle must be exactly 0 (Definition 4.1).{_simple_hint(case, by_value)}",
                advice=f"Mask the scores where j > i{how} with -inf before the softmax.",
                counterexample=case.counterexample(ctx.base_seed),
                heatmaps=heatmaps_for(w, ctx.ref.attention(case)[1], batch=b),
            )
    return None


def _masks_random_inputs(ctx: Ctx, case: Case) -> bool:
    """Whether the head masks exactly on random inputs of a simple case's shape and dtype: only then does its
    leak on the simple case show a mask that depends on the score values (issue 30: a clamp after the
    softmax or a NaN fill leaks by position, on every input)."""
    if "simple" not in dict(case.params):
        return False
    w = ctx.head.attention(make_case(case.shape, seed=ctx.seed(51), dtype=case.X.dtype)).weights
    upper = torch.triu(torch.ones(case.shape.T, case.shape.T, dtype=torch.bool), diagonal=1)
    return bool((w[:, upper] == 0).all())


def _simple_hint(case: Case, by_value: bool) -> str:
    kind = dict(case.params).get("simple")
    if kind is None:
        return ""
    what = {
        "zero_first_token": "token 0 is all zeros, so every score in its row is 0",
        "zero_middle_token": f"token {case.shape.T // 2} is all zeros, so its scores are 0",
        "repeated_tokens": "all tokens are equal, so all scores in a row are equal",
        "one_hot_tokens": "the tokens are one-hot vectors",
        "d_k_one": "d_k = 1",
    }[str(kind)]
    if not by_value:
        return f" Here {what}."
    return (
        f" Here {what}, and on random inputs of this shape your head masks exactly: "
        "a mask must not depend on the score values."
    )


def _first_nonzero_above(w: torch.Tensor, upper: torch.Tensor) -> tuple[int, int, int]:
    mask = ((w != 0) | ~torch.isfinite(w)) & upper
    b, i, j = (int(v) for v in mask.nonzero()[0])
    return b, i, j


def _offset_values_case(case: Case) -> Case:
    """Give every value a common offset far from the origin, so weights that do not sum to one
    (which shrink or stretch the average towards 0) leave the convex hull."""
    X = case.X.clone()
    X[..., -1] = 3.0
    W_V = case.W_V.clone()
    W_V[-1, :] = 1.0
    return Case(X, case.W_Q, case.W_K, W_V, case.shape, case.seed, case.params + (("value_offset", 3.0),))


@check(
    "convex_hull",
    title="output row i lies in the convex hull of the values v_1..v_i",
    cites="Corollary of Proposition 3.1 (prefix form, Section 4)",
)
def convex_hull(ctx: Ctx) -> Verdict:
    """Corollary of Proposition 3.1, prefix form: out_i is a convex combination of v_1..v_i, so for every
    direction u, min_{j<=i} <u, v_j> <= <u, out_i> <= max_{j<=i} <u, v_j>."""
    g = torch.Generator().manual_seed(ctx.seed(99))
    slack_rel = tolerance("hull", ctx.working_dtype(torch.float64)).rtol
    for case in ctx.cases(FAMILIES[2:]):
        case = _offset_values_case(case)
        call = ctx.head.attention(case)
        V = case.X @ case.W_V  # (B, T, d) @ (d, d_v) -> (B, T, d_v)
        d_v = V.shape[-1]
        dirs = torch.cat([torch.eye(d_v, dtype=torch.float64), torch.randn(8, d_v, generator=g, dtype=torch.float64)])
        proj_v = V @ dirs.T  # (B, T, n_dirs): <u, v_j>
        proj_o = call.out.double() @ dirs.T  # (B, T, n_dirs): <u, out_i>
        T = case.shape.T
        for i in range(T):
            lo = proj_v[:, : i + 1].amin(dim=1)  # (B, n_dirs)
            hi = proj_v[:, : i + 1].amax(dim=1)
            slack = slack_rel * (1 + proj_v.abs().amax())
            below, above = proj_o[:, i] < lo - slack, proj_o[:, i] > hi + slack
            bad = below | above | ~torch.isfinite(proj_o[:, i])
            if bool(bad.any()):
                b, k = (int(v) for v in bad.nonzero()[0])
                return failed(
                    f"out[{b}, {i}] is outside the convex hull of the permitted values v_0..v_{i}: along "
                    f"direction #{k}, <u, out> = {float(proj_o[b, i, k]):.6g} but the values span "
                    f"[{float(lo[b, k]):.6g}, {float(hi[b, k]):.6g}]. Attention averages the permitted values "
                    "with weights that are >= 0 and sum to 1 (Corollary of Proposition 3.1).",
                    counterexample=case.counterexample(ctx.base_seed),
                    heatmaps=heatmaps_for(weights_of(call), ctx.ref.attention(case)[1], batch=b),
                )
    return passed("Every output row lies in the convex hull of its permitted values.")
