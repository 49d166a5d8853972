"""Huge scores and half-precision inputs: mask before softmax, subtract the row max (Implementation aside 4.4)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch

from grader.checks._base import Ctx, Group, Verdict, check, every_group, failed, heatmaps_for, passed
from grader.checks._scaling import fitted_scale
from grader.compare import Tolerance, dtype_name, mismatch, tolerance
from grader.inputs import Case, Shape, make_case


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


@dataclass(frozen=True)
class Habits:
    """What the head does at ordinary scores; huge scores and half precision must not change it (a fault
    it has at every scale is charged by the check of that property, not again here)."""

    finite: bool  # no inf or NaN
    masks: bool  # the strict upper triangle is exactly 0
    normalises: bool  # rows sum to 1


def mask_constant_case(T: int, dtype: torch.dtype, seed: int) -> Case:
    """d = d_k = 1, tokens x_i in [1, 2], W_Q = a, W_K = -a: every score is -a^2 x_i x_j, between
    about -2e6 and -5e5. A finite mask constant above those (BERT's -1e4) then outweighs every
    permitted score, and the masked keys take the weight; -inf or finfo.min never do."""
    g = torch.Generator().manual_seed(seed)
    X = 1 + torch.rand(2, T, 1, generator=g, dtype=torch.float64)  # (2, T, 1)
    a = math.sqrt(5e5)
    W_Q, W_K = torch.tensor([[a]], dtype=torch.float64), torch.tensor([[-a]], dtype=torch.float64)  # (1, 1)
    W_V = torch.randn(1, 3, generator=g, dtype=torch.float64)  # (1, 3)
    t = (X.to(dtype), W_Q.to(dtype), W_K.to(dtype), W_V.to(dtype))
    return Case(*t, Shape(2, T, 1, 1, 3), seed=seed, params=(("scores", "about -1e6"),))


@check(
    "numerical_stability",
    title="huge scores and float16/bfloat16 inputs stay finite, masked and accurate",
    cites="Implementation aside 4.4",
)
def numerical_stability(ctx: Ctx) -> Verdict:
    """Implementation aside 4.4: mask to -inf before the softmax and subtract the row max; then scores of
    magnitude 1e4 to 1e6 (float64 and float32) and float16/bfloat16 inputs give finite results that are
    as masked and as normalised as the head's results at ordinary scores, and as accurate as the head's
    own float64 result on the same inputs allows. The head is compared with itself, never the reference."""
    habits = _habits(ctx)
    # Every group runs (issue 30): a head that fails in float64 may also raise in float16, a mistake of its own.
    groups: list[Group] = []
    for dtype in (torch.float64, torch.float32):
        large = (
            (make_case(Shape(2, 12, 16, 6, 5), seed=ctx.seed(0), dtype=dtype, x_scale=100.0), "scaled scores ~1e4"),
            (kernel_case(8, 1e4, dtype), "positional-kernel inputs with raw scores up to ~3e5"),
            (mask_constant_case(6, dtype, ctx.seed(3)), "every score negative, about -1e6"),
        )
        judged = [partial(_large, ctx, case, dtype, what, habits) for case, what in large]
        groups.append((f"huge scores in {dtype_name(dtype)}", partial(_first, judged)))
    for k, dtype in enumerate((torch.float16, torch.bfloat16)):
        case64 = make_case(Shape(2, 64, 48, 24, 16), seed=ctx.seed(10 + k), x_scale=2.0)
        groups.append((f"{dtype_name(dtype)} inputs", partial(_low_precision, ctx, case64, dtype, habits)))
    verdict = every_group(groups)
    if verdict is not None:
        return verdict
    return passed(
        "Finite, as masked and normalised as at ordinary scores, and accurate, at score magnitudes 1e4 to 1e6 "
        "(float64, float32) and in float16/bfloat16."
    )


def _first(judged: Sequence[Callable[[], Verdict | None]]) -> Verdict | None:
    """The first failing verdict of one group's cases (they probe the same behaviour at rising scores)."""
    for judge in judged:
        if (verdict := judge()) is not None:
            return verdict
    return None


def _habits(ctx: Ctx) -> Habits:
    case = make_case(Shape(2, 12, 16, 6, 5), seed=ctx.seed(20))
    call = ctx.head.attention(case)
    w = call.weights
    T = w.shape[-1]
    upper = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    dev = (w.double().sum(-1) - 1).abs().nan_to_num(0.0)
    return Habits(
        finite=bool(torch.isfinite(w).all()) and bool(torch.isfinite(call.out).all()),
        masks=bool((w[:, upper].nan_to_num(0.0) == 0).all()),
        normalises=float(dev.max()) <= tolerance("row_sum", ctx.working_dtype(torch.float64)).atol,
    )


def _structure_problem(w: torch.Tensor, out: torch.Tensor, habits: Habits, row_sum_tol: float) -> str | None:
    finite = torch.isfinite(w)
    if habits.finite and not (bool(finite.all()) and bool(torch.isfinite(out).all())):
        return "produced non-finite values (inf or NaN), though its results at ordinary scores are finite"
    T = w.shape[-1]
    upper = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    if habits.masks and bool(((w != 0) & finite)[:, upper].any()):
        return "put weight above the diagonal, though it masks exactly at ordinary scores"
    dev = float((w.double().sum(-1) - 1).abs().nan_to_num(0.0).max())  # rows without NaN (charged above)
    if habits.normalises and dev > row_sum_tol:
        return (
            f"has a row summing to 1 {'+-'} {dev:.3g} (up to {row_sum_tol:.3g} allowed), though its rows sum to 1 at "
            "ordinary scores"
        )
    return None


def plain_attention(case: Case, scale: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain masked formula with score scale ``scale``, evaluated in ``dtype`` on the case's values."""
    X, W_Q, W_K, W_V = (t.to(dtype) for t in case.tensors().values())
    T = X.shape[1]
    s = (X @ W_Q) @ (X @ W_K).transpose(-1, -2) * scale  # (B, T, d_k) x (B, d_k, T) -> (B, T, T)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))  # (B, T, T)
    w = torch.softmax(s, dim=-1)  # (B, T, T)
    return w @ (X @ W_V), w  # (B, T, d_v), (B, T, T)


def _own_scale(case: Case, weights64: torch.Tensor) -> float:
    """The scale the head applies (read off its float64 weights, Lemma 5.5), so that the low-precision
    baseline has the head's own conditioning: a wrong scale is charged by score_scaling, not here."""
    X, W_Q, W_K = (t.double() for t in (case.X, case.W_Q, case.W_K))
    fit = fitted_scale(weights64, (X @ W_Q) @ (X @ W_K).transpose(-1, -2))
    if math.isfinite(fit.c) and fit.c > 0 and fit.residual < 1e-3:
        return fit.c
    return 1 / math.sqrt(case.shape.d_k)


def _fa_atol(golden: torch.Tensor, dtype: torch.dtype) -> float:
    """FlashAttention's floor: twice the rounding noise of one add/sub at the output's magnitude."""
    g = golden[torch.isfinite(golden)].to(dtype)
    return 2 * float(((g + 0.3) - 0.3 - g).abs().max()) if g.numel() else 0.0


def score_slack(case: Case, dtype: torch.dtype) -> float:
    """Rounding at huge scores: a score of magnitude M computed in ``dtype`` is itself known only to about
    eps * M, and so is the log of every weight made from it. A head whose numerators and normaliser come from
    separately rounded scores (a tiled or online softmax, scores computed twice) is right only to that, so
    row sums and the comparison with its own float64 result allow a relative 4 eps M (the lecture's scaled
    scores' largest permitted magnitude)."""
    X, W_Q, W_K = (t.double() for t in (case.X, case.W_Q, case.W_K))
    T = X.shape[1]
    s = (X @ W_Q) @ (X @ W_K).transpose(-1, -2) / math.sqrt(case.shape.d_k)  # (B, T, T)
    magnitude = float(s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), 0.0).abs().max())
    return 4 * torch.finfo(dtype).eps * magnitude


def _large(ctx: Ctx, case: Case, dtype: torch.dtype, what: str, habits: Habits) -> Verdict | None:
    call = ctx.head.attention(case)
    working = ctx.working_dtype(dtype)
    slack = score_slack(case, working)
    problem = _structure_problem(call.weights, call.out, habits, max(tolerance("row_sum", working).atol, slack))
    bad = None
    if problem is None and dtype != torch.float64:
        own = ctx.head.attention(case.to(torch.float64))  # the same rounded inputs, computed in float64
        base = tolerance("large_scores", working)
        bad = mismatch(call.weights, own.weights, Tolerance(rtol=max(base.rtol, slack), atol=base.atol), "weights")
        if bad is not None:
            problem = "differs from its own float64 result on the same inputs:\n" + bad.text()
    if problem is None:
        return None
    return failed(
        f"With {what} in {dtype_name(dtype)}, your head {problem} (Implementation aside 4.4).",
        counterexample=case.counterexample(ctx.base_seed),
        heatmaps=heatmaps_for(call.weights, ctx.ref.attention(case)[1]),
        mismatch=bad,
    )


def _low_precision(ctx: Ctx, case64: Case, dtype: torch.dtype, habits: Habits) -> Verdict | None:
    """FlashAttention-style rule: the low-precision error against the head's own float64 result on the
    same rounded inputs may be at most 3x the error of the plain formula evaluated in that dtype, plus
    one rounding step."""
    case = case64.to(dtype)  # rounded inputs; the float64 results use exactly these values
    call = ctx.head.attention(case)
    own = ctx.head.attention(case.to(torch.float64))
    scale = _own_scale(case, own.weights)
    gold_out, gold_w = plain_attention(case, scale, torch.float64)
    lp_out, lp_w = plain_attention(case, scale, dtype)
    problem = _structure_problem(call.weights, call.out, habits, tolerance("row_sum", ctx.working_dtype(dtype)).atol)
    if problem is None:
        for what, got, mine, gold, lp in (
            ("out", call.out, own.out, gold_out, lp_out),
            ("weights", call.weights, own.weights, gold_w, lp_w),
        ):
            both_bad = ~torch.isfinite(got) & ~torch.isfinite(mine)  # non-finite at every scale: charged elsewhere
            err = float((got.double() - mine.double()).abs().masked_fill(both_bad, 0).nan_to_num(float("inf")).max())
            allowed = 3 * float((lp.double() - gold).abs().max()) + _fa_atol(mine.double(), dtype)
            if not err <= allowed:
                problem = (
                    f"is too inaccurate: its largest {what} error against its own float64 result on the same "
                    f"inputs is {err:.3g}, but at most {allowed:.3g} is allowed (3x the plain formula's own "
                    f"{dtype_name(dtype)} error plus one rounding step)"
                )
                break
    if problem is None:
        return None
    return failed(
        f"With {dtype_name(dtype)} inputs (d_k = {case.shape.d_k}, scale 1/sqrt({case.shape.d_k}) = "
        f"{1 / math.sqrt(case.shape.d_k):.4g}), your head {problem} (Implementation aside 4.4).",
        counterexample=case.counterexample(ctx.base_seed),
        heatmaps=heatmaps_for(call.weights[:, :12, :12], own.weights[:, :12, :12], label="your float64"),
    )
