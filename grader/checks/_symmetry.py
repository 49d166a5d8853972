"""Unmasked attention is permutation-equivariant (Theorem 6.1); the causal mask breaks it (Remark 6.3)."""

from __future__ import annotations

import torch

from grader.checks._base import Ctx, Verdict, check, every_group, failed, passed
from grader.compare import mismatch, tolerance
from grader.inputs import FAMILIES

# Not bitwise: permuted GEMMs round differently. Keyed by the precision the head computes in.


@check(
    "permutation_equivariance",
    title="row-permuted unmasked inputs give row-permuted outputs; the causal head is not equivariant",
    cites="Theorem 6.1 and Remark 6.3",
)
def permutation_equivariance(ctx: Ctx) -> Verdict:
    """Theorem 6.1: with causal=False, Attn(P X) = P Attn(X) and A(P X) = P A P^T. Remark 6.3: with the
    causal mask, a swap of the first two rows changes the result beyond permutation."""
    g = torch.Generator().manual_seed(ctx.seed(1))
    tol = tolerance("equivariance", ctx.working_dtype(torch.float64))

    def unmasked() -> Verdict | None:
        for case in ctx.cases(FAMILIES[2:]):
            T = case.shape.T
            perm = torch.randperm(T, generator=g)
            if T > 1 and bool((perm == torch.arange(T)).all()):
                perm = torch.roll(perm, 1)
            base = ctx.head.attention(case, causal=False)
            moved = ctx.head.attention(case.with_X(case.X[:, perm]), causal=False)
            for what in base.sound():
                if what == "out":
                    got, exp = moved.out, base.out[:, perm]
                else:
                    got, exp = moved.weights, base.weights[:, perm][:, :, perm]
                bad = mismatch(got, exp, tol, f"{what}(P X) vs P {what}(X)")
                if bad is not None:
                    return failed(
                        f"Unmasked attention (causal=False) is not permutation-equivariant: permuting the input "
                        f"rows by {perm.tolist()} did not permute the {what} the same way (Theorem 6.1). Check "
                        "that causal=False really removes the mask and that nothing depends on absolute "
                        f"positions.\n{bad.text()}",
                        counterexample=case.counterexample(ctx.base_seed, causal=False),
                        mismatch=bad,
                    )
        return None

    def masked() -> Verdict | None:
        case = next(ctx.cases(FAMILIES[3:4]))
        swap = torch.tensor([1, 0, *range(2, case.shape.T)])
        first = ctx.head.attention(case)
        swapped = ctx.head.attention(case.with_X(case.X[:, swap]))
        what = first.sound()[0]  # out, or the weights (swapped rows and columns) when out broke the contract
        a = getattr(swapped, what)
        b = getattr(first, what)[:, swap] if what == "out" else getattr(first, what)[:, swap][:, :, swap]
        gap = float((a.double() - b.double()).abs().max())
        if gap < tolerance("symmetry_gap").atol:
            return failed(
                "With causal=True your head is permutation-equivariant (swapping rows 0 and 1 only swapped the "
                f"{'outputs' if what == 'out' else 'weights'}; difference {gap:.3g}). The causal mask must break "
                "this symmetry: row 0 can read only itself (Remark 6.3). Is the mask applied when causal=True?",
                counterexample=case.counterexample(ctx.base_seed, causal=True),
            )
        return None

    # Every group runs (issue 30): an unmasked head that is not equivariant and a causal one that is are two
    # failures (a positional bias with the mask off, no mask at all).
    verdict = every_group([("causal=False", unmasked), ("causal=True", masked)])
    if verdict is not None:
        return verdict
    return passed("Unmasked attention is equivariant; the causal head is not (as it must not be).")
