"""Huge scores and half-precision inputs: mask before softmax, subtract the row max (Implementation aside 4.4)."""

from __future__ import annotations

import math

import torch

from grader.checks._base import Ctx, Verdict, check, failed, heatmaps_for, passed, ref_attention
from grader.compare import ROW_SUM_TOLERANCE, Tolerance, dtype_name, mismatch
from grader.inputs import Case, Shape, make_case

LARGE_TOL = Tolerance(rtol=1e-8, atol=1e-9)


def kernel_case(T: int, alpha: float, dtype: torch.dtype) -> Case:
    """Features X_i = [i, 1, i^2] with W_Q = alpha [[1,0],[0,1],[0,0]], W_K = [[1,0],[0,0],[0,-1/2]]:
    the causal weights are softmax_{j<=i}(-c (i-j)^2 / 2) with c = alpha / sqrt(2), so huge alpha
    must give the identity exactly, while raw scores reach alpha * T^2."""
    i = torch.arange(T, dtype=torch.float64)
    X = torch.stack([i, torch.ones(T, dtype=torch.float64), i * i], dim=-1)[None].repeat(2, 1, 1)  # (2, T, 3)
    W_Q = alpha * torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)  # (3, 2)
    W_K = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, -0.5]], dtype=torch.float64)  # (3, 2)
    W_V = torch.eye(3, dtype=torch.float64)  # (3, 3)
    t = (X.to(dtype), W_Q.to(dtype), W_K.to(dtype), W_V.to(dtype))
    return Case(*t, Shape(2, T, 3, 2, 3), seed=0, params=(("kernel_alpha", alpha),))


def _structure_problem(w: torch.Tensor, out: torch.Tensor, dtype: torch.dtype) -> str | None:
    if not (bool(torch.isfinite(w).all()) and bool(torch.isfinite(out).all())):
        return "produced non-finite values (inf or NaN): exp overflowed — subtract each row's max before exp"
    T = w.shape[-1]
    upper = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    if bool((w[:, upper] != 0).any()):
        return "put weight above the diagonal: the mask constant is too weak for these scores — use -inf"
    dev = float((w.double().sum(-1) - 1).abs().max())
    if dev > ROW_SUM_TOLERANCE[dtype]:
        return f"has a row summing to 1 {'+-'} {dev:.3g} (up to {ROW_SUM_TOLERANCE[dtype]:g} allowed)"
    return None


def _fa_atol(golden: torch.Tensor, dtype: torch.dtype) -> float:
    """FlashAttention's floor: twice the rounding noise of one add/sub at the output's magnitude."""
    g = golden.to(dtype)
    return 2 * float(((g + 0.3) - 0.3 - g).abs().max())


@check(
    "numerical_stability",
    title="huge scores and float16/bfloat16 inputs stay finite, masked and accurate",
    cites="Implementation aside 4.4",
)
def numerical_stability(ctx: Ctx) -> Verdict:
    """Implementation aside 4.4: mask to -inf before the softmax and subtract the row max; then scores of
    magnitude 1e4 and more (float64 and float32) and float16/bfloat16 inputs give finite, exactly masked,
    row-stochastic weights close to the reference."""
    for dtype, x_scale in ((torch.float64, 100.0), (torch.float32, 100.0)):
        case = make_case(Shape(2, 12, 16, 6, 5), seed=ctx.seed(0), dtype=dtype, x_scale=x_scale)
        verdict = _large(ctx, case, dtype, f"inputs scaled by {x_scale:g} (scaled scores up to ~1e4)")
        if verdict:
            return verdict
    for dtype in (torch.float64, torch.float32):
        case = kernel_case(8, 1e4, dtype)
        verdict = _large(ctx, case, dtype, "positional-kernel inputs with raw scores up to ~3e5")
        if verdict:
            return verdict
    for k, dtype in enumerate((torch.float16, torch.bfloat16)):
        verdict = _low_precision(ctx, make_case(Shape(2, 64, 48, 24, 16), seed=ctx.seed(10 + k), x_scale=2.0), dtype)
        if verdict:
            return verdict
    return passed(
        "Finite, exactly masked and accurate at score magnitudes ~1e4 (float64, float32) and in float16/bfloat16."
    )


def _large(ctx: Ctx, case: Case, dtype: torch.dtype, what: str) -> Verdict | None:
    call = ctx.head.attention(case)
    ref_out, ref_w = ref_attention(ctx.ref, case)
    problem = _structure_problem(call.weights, call.out, dtype)
    tol = LARGE_TOL if dtype == torch.float64 else Tolerance(rtol=1e-4, atol=1e-4)
    bad = mismatch(call.weights, ref_w, tol, "weights")
    if problem is None and bad is not None:
        problem = "differs from the reference:\n" + bad.text()
    if problem is None:
        return None
    return failed(
        f"With {what} in {dtype_name(dtype)}, your head {problem} (Implementation aside 4.4).",
        counterexample=case.counterexample(ctx.base_seed),
        heatmaps=heatmaps_for(call.weights, ref_w),
    )


def _low_precision(ctx: Ctx, case64: Case, dtype: torch.dtype) -> Verdict | None:
    """FlashAttention-style rule: your low-precision error against a float64 golden may be at most 3x the
    error of the plain formula evaluated in that dtype (inputs rounded first), plus one rounding step."""
    case = case64.to(dtype)  # rounded inputs; the golden uses exactly these values
    call = ctx.head.attention(case)
    gold_out, gold_w = ref_attention(ctx.ref, case)
    with torch.no_grad():
        lp_out, lp_w = ctx.ref.causal_self_attention(*case.tensors().values())
    problem = _structure_problem(call.weights, call.out, dtype)
    if problem is None:
        for what, got, gold, lp in (
            ("out", call.out, gold_out, lp_out),
            ("weights", call.weights, gold_w, lp_w),
        ):
            err = float((got.double() - gold).abs().max())
            allowed = 3 * float((lp.double() - gold).abs().max()) + _fa_atol(gold, dtype)
            if not err <= allowed:
                problem = (
                    f"is too inaccurate: largest {what} error against a float64 golden is {err:.3g}, but at most "
                    f"{allowed:.3g} is allowed (3x the plain formula's own {dtype_name(dtype)} error plus one "
                    "rounding step). Compute in the input dtype with a stable softmax"
                )
                break
    if problem is None:
        return None
    return failed(
        f"With {dtype_name(dtype)} inputs (d_k = {case.shape.d_k}, scale 1/sqrt({case.shape.d_k}) = "
        f"{1 / math.sqrt(case.shape.d_k):.4g}), your head {problem} (Implementation aside 4.4).",
        counterexample=case.counterexample(ctx.base_seed),
        heatmaps=heatmaps_for(call.weights[:, :12, :12], gold_w[:, :12, :12]),
    )
