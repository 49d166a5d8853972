"""The contract itself: names, shapes, dtypes, purity, and agreement with the reference (Definition 2.2)."""

from __future__ import annotations

import torch

from grader.checks._base import Ctx, Verdict, check, failed, heatmaps_for, passed, ref_attention
from grader.compare import TOLERANCES, mismatch
from grader.head import CORE, StudentFailure
from grader.inputs import FAMILIES, Shape, make_case


@check(
    "interface",
    title="the module provides the contract with the right shapes and dtypes and without side effects",
    cites="Section 9.1 (batched shapes)",
    needs=(),
)
def interface(ctx: Ctx) -> Verdict:
    """Section 9.1: every contract function exists, returns the documented shapes and dtypes, leaves
    its inputs untouched, and answers new inputs anew (no memoised replies)."""
    problems: list[str] = []
    for name in CORE:
        try:
            ctx.head.require(name)
        except StudentFailure as exc:
            problems.append(exc.message)
    if problems:
        return failed("The submission does not provide the whole contract:\n" + "\n".join(problems))
    shape = Shape(2, 3, 4, 2, 3)
    for dtype in (torch.float64, torch.float32):
        a = make_case(shape, seed=ctx.seed(0), dtype=dtype)
        call = ctx.head.attention(a, return_inputs=True)
        for name, sent in a.tensors().items():
            if not torch.equal(call.inputs_after[name], sent):
                return failed(
                    f"causal_self_attention modified its input {name} in place; a head must not change its "
                    "arguments (the grader and any caller may reuse them).",
                    counterexample=a.counterexample(ctx.base_seed),
                )
    first = make_case(shape, seed=ctx.seed(1))
    second = make_case(shape, seed=ctx.seed(2))
    out_first = ctx.head.attention(first).out
    out_second = ctx.head.attention(second).out
    if torch.equal(out_first, out_second):
        return failed(
            "Two calls with different inputs of the same shape returned identical outputs. Compute every "
            "output from the arguments of the call; never cache results across calls.",
            counterexample=second.counterexample(ctx.base_seed),
        )
    w = ctx.head.gaussian_weights(4, 1.0)
    q, k = ctx.head.gaussian_qk(4, 1.0)
    stats = ctx.head.statistics(16, T=16, n_samples=4, seed=0)
    missing = [k for k in ("raw_std", "scaled_std", "raw_max_weight", "scaled_max_weight") if k not in stats]
    if missing:
        return failed(
            "score_scale_statistics must return a dict with float values for raw_std, scaled_std, "
            f"raw_max_weight and scaled_max_weight; missing or not a number: {', '.join(missing)}."
        )
    del w, q, k
    return passed("All contract functions exist; shapes, dtypes and purity are as documented.")


@check(
    "reference_match",
    title="outputs and weights equal the instructor reference in float64",
    cites="Definition 2.2 and Definition 4.1",
)
def reference_match(ctx: Ctx) -> Verdict:
    """Definition 2.2 (with the causal mask of Definition 4.1): on float64 inputs of several shape
    families, including T = 1 and d_k != d_v != d, both outputs equal the reference, causal or not."""
    tol = TOLERANCES[torch.float64]
    for case in ctx.cases(FAMILIES):
        for causal in (True, False):
            call = ctx.head.attention(case, causal=causal)
            out, w = ref_attention(ctx.ref, case, causal)
            for what, got, exp in (("weights", call.weights, w), ("out", call.out, out)):
                bad = mismatch(got, exp, tol, f"{what} (causal={causal})")
                if bad is not None:
                    return failed(
                        f"Your `{what}` differs from the reference head's (Definition 2.2"
                        f"{', masked as in Definition 4.1' if causal else ', unmasked'}).\n{bad.text()}",
                        counterexample=case.counterexample(ctx.base_seed, causal=causal),
                        heatmaps=heatmaps_for(call.weights, w, causal=causal, batch=bad.abs_index[0]),
                    )
    return passed(f"Matches the reference on {len(FAMILIES)} shape families, causal and unmasked ({tol}).")


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality that also accepts NaN where both have NaN (a NaN is not randomness)."""
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return torch.equal(nan_a, nan_b) and torch.equal(a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0))


@check(
    "determinism",
    title="two calls on the same input give bitwise identical results",
    cites="Section 9.1 (executable assertions need deterministic arithmetic)",
)
def determinism(ctx: Ctx) -> Verdict:
    """Section 9.1: the head is a function — the same input gives the same bits, with or without autograd
    recording (dropout or other randomness left on breaks this)."""
    for case in ctx.cases(FAMILIES[2:4]):
        first = ctx.head.attention(case)
        second = ctx.head.attention(case)
        third = ctx.head.attention(case, no_grad=True)
        for label, other in (("a second call", second), ("a call under torch.no_grad()", third)):
            for what in ("out", "weights"):
                a, b = getattr(first, what), getattr(other, what)
                if not same_bits(a, b):
                    diff = (a.double() - b.double()).abs().nan_to_num(float("inf")).max()
                    return failed(
                        f"The same input gave different {what} on {label} (largest difference {diff:.4g}; 0 "
                        "allowed). A head has no randomness: remove dropout or any random sampling.",
                        counterexample=case.counterexample(ctx.base_seed),
                        heatmaps=heatmaps_for(first.weights, second.weights),
                    )
    return passed("Repeated calls (with and without autograd) give bitwise identical results.")
