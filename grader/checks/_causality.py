"""Output row i depends only on input rows 1..i (Proposition 4.3), and batch elements never mix."""

from __future__ import annotations

import torch

from grader.checks._base import Ctx, Verdict, check, failed, fmt, heatmaps_for, passed, ref_attention
from grader.compare import TOLERANCES, mismatch
from grader.inputs import FAMILIES, Case, Shape

MAGNITUDES = (1.0, 1e3)


def _perturb_future(case: Case, t: int, magnitude: float, seed: int) -> Case:
    """Replace X[:, t:] by finite noise (never NaN: 0 * NaN leaks even through correct code)."""
    g = torch.Generator().manual_seed(seed)
    X = case.X.clone()
    noise = torch.randn(X[:, t:].shape, generator=g, dtype=torch.float64) * magnitude
    X[:, t:] = noise.to(X.dtype)
    return case.with_X(X)


@check(
    "future_perturbation",
    title="changing only future tokens leaves every earlier output bit for bit unchanged",
    cites="Proposition 4.3",
)
def future_perturbation(ctx: Ctx) -> Verdict:
    """Proposition 4.3: output row i depends only on X_1..X_i, so perturbing X[:, t:] leaves out[:, :t]
    (and the weights of rows < t) bitwise identical, at magnitudes 1 and 1e3."""
    for dtype in (torch.float64, torch.float32):
        for case in ctx.cases(FAMILIES[1:], dtype=dtype):
            base = ctx.head.attention(case)
            for t in range(1, case.shape.T):
                for magnitude in MAGNITUDES:
                    moved = _perturb_future(case, t, magnitude, ctx.seed(t))
                    call = ctx.head.attention(moved)
                    for what in ("out", "weights"):
                        a, b = getattr(base, what)[:, :t], getattr(call, what)[:, :t]
                        if torch.equal(a, b):
                            continue
                        diff = (a.double() - b.double()).abs().nan_to_num(float("inf"))
                        bb, i = (int(v) for v in (diff.amax(-1) == diff.max()).nonzero()[0])
                        lines = [
                            "Changing only future tokens changed an earlier output (Proposition 4.3).",
                            f"Perturbed X[:, {t}:] (magnitude {magnitude:g}); {what}[{bb}, {i}] changed by "
                            f"{fmt(float(diff.max()))} (0 allowed): row {i} may depend only on X[:, :{i + 1}].",
                        ]
                        leak = call.weights[bb, i, i + 1 :]
                        if leak.numel() and bool((leak != 0).any()):
                            j = i + 1 + int((leak != 0).nonzero()[0])
                            lines.append(
                                f"Your weights[{bb}, {i}, {j}] = {fmt(float(call.weights[bb, i, j]))}, but row {i} "
                                f"may only attend to columns 0..{i}."
                            )
                        else:
                            lines.append(
                                "The weights above the diagonal are zero, so the leak is elsewhere: check "
                                "anything computed across positions (means, cumulative sums, normalisation "
                                "over the whole sequence, or renormalising after the softmax)."
                            )
                        return failed(
                            "\n".join(lines),
                            counterexample=case.counterexample(ctx.base_seed, perturbed_from=t, magnitude=magnitude),
                            heatmaps=heatmaps_for(call.weights, ref_attention(ctx.ref, moved)[1], batch=bb),
                        )
    return passed("Earlier outputs are bitwise unchanged by future perturbations (magnitudes 1 and 1e3).")


@check(
    "gradient_blocks",
    title="future Jacobian blocks are zero and permitted gradients equal the reference's",
    cites="Proposition 4.3",
)
def gradient_blocks(ctx: Ctx) -> Verdict:
    """Proposition 4.3: d out_i / d X_j = 0 for j > i (exactly, in float64); the permitted blocks and the
    gradients with respect to W_Q, W_K, W_V equal the reference's (autograd through the head)."""
    tol = TOLERANCES[torch.float64]
    for case in ctx.cases(FAMILIES[1:5]):
        s = case.shape
        g = torch.Generator().manual_seed(case.seed)
        u = torch.randn(s.B, s.T, s.d_v, generator=g, dtype=torch.float64)
        u_w = torch.randn(s.B, s.T, s.T, generator=g, dtype=torch.float64)
        call = ctx.head.attention(case, jacobian_upstream=u, upstream=(u, u_w))
        J = call.jacobian  # (B, T, B, T, d): grad of <out[b, i], u[b, i]> w.r.t. X
        assert J is not None
        ref_J, ref_grads = _reference_derivatives(ctx, case, u, u_w)
        for b in range(s.B):
            for i in range(s.T):
                future = J[b, i, b, i + 1 :]
                if bool((future != 0).any()):
                    j = i + 1 + int((future != 0).any(-1).nonzero()[0])
                    return failed(
                        "A future input-gradient block is not zero (Proposition 4.3).\n"
                        f"d <out[{b}, {i}], u> / d X[{b}, {j}] has entries up to "
                        f"{fmt(float(J[b, i, b, j].abs().max()))} (0 allowed): output row {i} must not "
                        f"depend on input row {j} > {i}.",
                        counterexample=case.counterexample(ctx.base_seed),
                        heatmaps=heatmaps_for(call.weights, ref_attention(ctx.ref, case)[1], batch=b),
                    )
        bad = mismatch(J, ref_J, tol, "input-gradient blocks d<out[b, i], u>/dX")
        if bad is not None:
            return failed(
                "Your permitted gradient blocks differ from the reference's (Proposition 4.3 describes them; "
                "gradients must flow through the scores, the softmax and the values).\n" + bad.text(),
                counterexample=case.counterexample(ctx.base_seed),
            )
        for name, ref_g in ref_grads.items():
            bad = mismatch(call.grads[name], ref_g, tol, f"gradient w.r.t. {name}")
            if bad is not None:
                return failed(
                    f"The gradient with respect to {name} differs from the reference's: something cuts or "
                    "alters the autograd graph (e.g. .detach(), .item(), numpy, or in-place edits).\n" + bad.text(),
                    counterexample=case.counterexample(ctx.base_seed),
                )
    return passed("Future Jacobian blocks are exactly zero; permitted blocks and weight gradients match.")


def _reference_derivatives(
    ctx: Ctx, case: Case, u: torch.Tensor, u_w: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    inputs = {k: v.double().clone().requires_grad_(True) for k, v in case.tensors().items()}
    out, w = ctx.ref.causal_self_attention(*inputs.values(), causal=True)
    s = case.shape
    rows = []
    for b in range(s.B):
        for i in range(s.T):
            (g,) = torch.autograd.grad((out[b, i] * u[b, i]).sum(), inputs["X"], retain_graph=True)
            rows.append(g)
    J = torch.stack(rows).reshape(s.B, s.T, *case.X.shape)
    grads = torch.autograd.grad((out * u).sum() + (w * u_w).sum(), list(inputs.values()))
    return J.detach(), {k: g.detach() for k, g in zip(inputs, grads, strict=True)}


@check(
    "batch_independence",
    title="each batch element is computed on its own",
    cites="Section 9.1 (the batch coordinate is preserved)",
)
def batch_independence(ctx: Ctx) -> Verdict:
    """Section 9.1: matrix products act on the last two coordinates only, so out(X)[b] equals
    out(X[b:b+1])[0], and changing one batch element never changes another."""
    tol = TOLERANCES[torch.float64]
    for case in ctx.cases(FAMILIES[2:]):
        full = ctx.head.attention(case)
        X = case.X.clone()
        X[1:] = _perturb_future(case, 0, 1.0, ctx.seed(7)).X[1:]
        other = ctx.head.attention(case.with_X(X))
        for what in ("out", "weights"):
            if not torch.equal(getattr(full, what)[0], getattr(other, what)[0]):
                return failed(
                    f"Changing batch elements 1.. changed {what}[0]: batch elements must not interact "
                    "(scores, softmax and averages are taken within one sequence).",
                    counterexample=case.counterexample(ctx.base_seed),
                    heatmaps=heatmaps_for(full.weights, other.weights),
                )
        for b in range(case.shape.B):
            s = case.shape
            single = Case(
                case.X[b : b + 1].clone(),
                case.W_Q,
                case.W_K,
                case.W_V,
                Shape(1, s.T, s.d, s.d_k, s.d_v),
                case.seed,
            )
            alone = ctx.head.attention(single)
            bad = mismatch(alone.out[0], full.out[b], tol, f"out of batch element {b} computed alone")
            if bad is not None:
                return failed(
                    f"Batch element {b} gives a different output when it is passed on its own (B=1).\n" + bad.text(),
                    counterexample=case.counterexample(ctx.base_seed),
                )
    return passed("Batch elements are independent (perturbation and slicing).")
