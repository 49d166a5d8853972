"""Output row i depends only on input rows 1..i (Proposition 4.3), and batch elements never mix."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import torch

from grader.checks._base import Ctx, Group, Verdict, check, every_group, failed, fmt, heatmaps_for, passed, weights_of
from grader.compare import FD_STEP, dtype_name, mismatch, tolerance
from grader.head import HeadCall
from grader.inputs import FAMILIES, Case, Shape, simple_cases

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
    simple = simple_cases(seed=ctx.seed(50))  # float64, magnitude 1: enough for a value-derived mask
    calls: dict[torch.dtype, list[tuple[Case, list[tuple[int, float, Case]], list[HeadCall]]]] = {}

    def of(dtype: torch.dtype) -> list[tuple[Case, list[tuple[int, float, Case]], list[HeadCall]]]:
        """Every case of ``dtype`` with its perturbations and the head's calls (one request per case, made
        once for both magnitudes' groups)."""
        if dtype not in calls:
            found = []
            cases = [*(simple if dtype == torch.float64 else []), *ctx.cases(FAMILIES[1:], dtype=dtype)]
            for case in cases:
                magnitudes = MAGNITUDES[: 1 if "simple" in dict(case.params) else None]
                moves = [(t, m) for t in range(1, case.shape.T) for m in magnitudes]
                moved = [_perturb_future(case, t, m, ctx.seed(t)) for t, m in moves]
                perturbed = [(t, m, c) for (t, m), c in zip(moves, moved, strict=True)]
                found.append((case, perturbed, ctx.head.attention_each([case, *moved])))
            calls[dtype] = found
        return calls[dtype]

    def judge(dtype: torch.dtype, magnitude: float) -> Verdict | None:
        for case, moved, (base, *after_calls) in of(dtype):
            for (t, m, after), call in zip(moved, after_calls, strict=True):
                if m != magnitude:
                    continue
                for what in base.sound():  # a value that broke the contract is charged by interface alone
                    a, b = getattr(base, what)[:, :t], getattr(call, what)[:, :t]
                    if not ctx.same(a, b, case, what=f"{what}[:, :{t}]"):
                        text, bb = _future_leak(a, b, call, what, t, magnitude)
                        return failed(
                            text,
                            counterexample=case.counterexample(ctx.base_seed, perturbed_from=t, magnitude=magnitude),
                            heatmaps=heatmaps_for(weights_of(call), ctx.ref.attention(after)[1], batch=bb),
                        )
        return None

    # Every group runs (issue 30): a leak at magnitude 1e3 only, or in float32 only, is a failure of its own.
    groups: list[Group] = [
        (f"{dtype_name(dtype)} inputs, perturbation magnitude {m:g}", partial(judge, dtype, m))
        for dtype in (torch.float64, torch.float32)
        for m in MAGNITUDES
    ]
    verdict = every_group(groups)
    if verdict is not None:
        return verdict
    return passed(
        "Earlier outputs are bitwise unchanged by future perturbations "
        "(simple and random inputs, magnitudes 1 and 1e3)."
    )


def _future_leak(
    a: torch.Tensor, b: torch.Tensor, call: HeadCall, what: str, t: int, magnitude: float
) -> tuple[str, int]:
    """Where changing X[:, t:] moved an earlier row (``a`` before, ``b`` after), the likely reason, and
    the batch element to draw."""
    diff = (a.double() - b.double()).abs().nan_to_num(float("inf"))
    bb, i = (int(v) for v in (diff.amax(-1) == diff.max()).nonzero()[0])
    lines = [
        "Changing only future tokens changed an earlier output (Proposition 4.3).",
        f"Perturbed X[:, {t}:] (magnitude {magnitude:g}); {what}[{bb}, {i}] changed by "
        f"{fmt(float(diff.max()))} (0 allowed): row {i} may depend only on X[:, :{i + 1}].",
    ]
    w = weights_of(call)
    leak = w[bb, i, i + 1 :] if w is not None else torch.zeros(0)
    if w is None:
        pass
    elif leak.numel() and bool((leak != 0).any()):
        j = i + 1 + int((leak != 0).nonzero()[0])
        lines.append(
            f"Your weights[{bb}, {i}, {j}] = {fmt(float(call.weights[bb, i, j]))}, but row {i} "
            f"may only attend to columns 0..{i}."
        )
    else:
        lines.append(
            "The weights above the diagonal are zero, so the leak is elsewhere: check anything computed "
            "across positions (means, cumulative sums, normalisation over the whole sequence, or "
            "renormalising after the softmax)."
        )
    return "\n".join(lines), bb


@check(
    "gradient_blocks",
    title="future Jacobian blocks are zero and autograd agrees with your own forward pass",
    cites="Proposition 4.3",
)
def gradient_blocks(ctx: Ctx) -> Verdict:
    """Proposition 4.3: d out_i / d X_j = 0 for j > i (exactly, in float64, through the head's autograd);
    and the head's gradients — every permitted block and the gradients with respect to W_Q, W_K, W_V —
    are the derivatives of its own forward pass (central finite differences along random directions)."""
    precision = ctx.precision()
    eps, rtol = FD_STEP[precision], tolerance("finite_difference", precision).rtol
    made: dict[int, tuple[Case, HeadCall, tuple[torch.Tensor | None, torch.Tensor | None], torch.Generator]] = {}

    def calls() -> Iterator[tuple[Case, HeadCall, tuple[torch.Tensor | None, torch.Tensor | None], torch.Generator]]:
        """Each case with the head's differentiated call (made once for both groups)."""
        for k, case in enumerate(ctx.cases(FAMILIES[1:4])):
            if k not in made:
                s = case.shape
                g = torch.Generator().manual_seed(case.seed)
                u = torch.randn(s.B, s.T, s.d_v, generator=g, dtype=torch.float64)
                u_w = torch.randn(s.B, s.T, s.T, generator=g, dtype=torch.float64)
                # issue 30: a value that broke the contract is not differentiated; the sound one is still judged
                sound = ctx.head.attention(case).sound()
                ups = (u if "out" in sound else None, u_w if "weights" in sound else None)
                call = ctx.head.attention(case, jacobian_upstream=ups[0], upstream=ups)
                made[k] = (case, call, ups, g)
            yield made[k]

    def blocks() -> Verdict | None:
        for case, call, _, _ in calls():
            J = call.jacobian  # (B, T, B, T, d): grad of <out[b, i], u[b, i]> w.r.t. X; None without a sound out
            if J is None:
                continue
            for b in range(case.shape.B):
                for i in range(case.shape.T):
                    future = J[b, i, b, i + 1 :]
                    if bool((future != 0).any()):
                        j = i + 1 + int((future != 0).any(-1).nonzero()[0])
                        block = J[b, i, b, j]
                        if not bool(torch.isfinite(block).all()):  # NaN is no dependence: it was not observed
                            return failed(
                                "A future input-gradient block is not finite, so it is not 0 (Proposition 4.3).\n"
                                f"d <out[{b}, {i}], u> / d X[{b}, {j}] holds {_non_finite(block)} on this finite "
                                f"input: the gradient of output row {i} is not finite, so whether it depends on "
                                f"input row {j} > {i} could not be observed.",
                                counterexample=case.counterexample(ctx.base_seed),
                                heatmaps=heatmaps_for(weights_of(call), ctx.ref.attention(case)[1], batch=b),
                            )
                        return failed(
                            "A future input-gradient block is not zero (Proposition 4.3).\n"
                            f"d <out[{b}, {i}], u> / d X[{b}, {j}] has entries up to "
                            f"{fmt(float(block.abs().max()))} (0 allowed): output row {i} must not "
                            f"depend on input row {j} > {i}.",
                            counterexample=case.counterexample(ctx.base_seed),
                            heatmaps=heatmaps_for(weights_of(call), ctx.ref.attention(case)[1], batch=b),
                        )
        return None

    def differences() -> Verdict | None:
        for case, call, ups, g in calls():
            for name in ("X", "W_Q", "W_K", "W_V"):
                problem = _finite_difference(ctx, case, call, name, ups, g, eps, rtol)
                if isinstance(problem, NotFinite):  # nothing to compare with: no graph was seen to be cut
                    return failed(
                        f"The gradient with respect to {name} could not be compared with your forward pass: "
                        f"finite differences of your outputs are not finite ({problem.what} "
                        f"{'holds' if problem.what == 'out' else 'hold'} {problem.kind} on this finite input), so "
                        "autograd was not observed against them.",
                        counterexample=case.counterexample(ctx.base_seed),
                    )
                if problem is not None:
                    return failed(
                        f"The gradient with respect to {name} is not the derivative of your own forward pass, so "
                        f"backpropagation does not see what the forward pass computed.\n{problem}",
                        counterexample=case.counterexample(ctx.base_seed),
                        advice="Something cuts or alters the autograd graph: .detach(), .data, .item(), numpy, or "
                        "an in-place edit of a value autograd needs.",
                    )
        return None

    # Every group runs (issue 30): a future dependence and a cut graph are two failures.
    verdict = every_group([("the Jacobian blocks", blocks), ("autograd against finite differences", differences)])
    if verdict is not None:
        return verdict
    return passed(
        "Future Jacobian blocks are exactly zero; every gradient agrees with finite differences of your forward "
        f"pass ({_fd_text(precision)})."
    )


@dataclass(frozen=True)
class NotFinite:
    """Finite differences that hold no number: the head's outputs on the shifted inputs are not finite."""

    what: str  # "out", "the weights", "out and the weights"
    kind: str  # "NaN", "infinite values", "NaN and infinite values"


def _non_finite(t: torch.Tensor) -> str:
    """'NaN', 'infinite values' or 'NaN and infinite values': what the non-finite entries of ``t`` are."""
    bad = t[~torch.isfinite(t)]
    nan, inf = bool(torch.isnan(bad).any()), bool(torch.isinf(bad).any())
    return "NaN and infinite values" if nan and inf else "NaN" if nan else "infinite values"


def _fd_text(precision: torch.dtype) -> str:
    eps, rtol = FD_STEP[precision], tolerance("finite_difference", precision).rtol
    return f"step {eps:g}, relative tolerance {rtol:g}"


def _finite_difference(
    ctx: Ctx,
    case: Case,
    call: HeadCall,
    name: str,
    upstream: tuple[torch.Tensor | None, torch.Tensor | None],
    g: torch.Generator,
    eps: float,
    rtol: float,
) -> str | NotFinite | None:
    """Compare autograd with central differences of L = <out, u> + <weights, u_w> along one random
    direction of input ``name`` (a term whose upstream is None is left out: that value broke the contract);
    for X also row by row (<out[b, i], u[b, i]>, the Jacobian blocks)."""
    u, u_w = upstream
    tensors = case.tensors()
    delta = torch.randn(tensors[name].shape, generator=g, dtype=torch.float64)
    delta /= delta.norm()

    def shifted(sign: float) -> HeadCall:
        moved = {**tensors, name: tensors[name] + sign * eps * delta}
        return ctx.head.attention(Case(**moved, shape=case.shape, seed=case.seed, params=case.params))

    plus, minus = shifted(1.0), shifted(-1.0)
    bad = [
        (what, (getattr(plus, attr), getattr(minus, attr)))
        for what, attr, up in (("out", "out", u), ("the weights", "weights", u_w))
        if up is not None and not all(bool(torch.isfinite(getattr(c, attr)).all()) for c in (plus, minus))
    ]  # a value that broke the contract has no upstream: never read
    if bad:
        values = torch.cat([x.flatten() for _, pair in bad for x in pair])
        return NotFinite(" and ".join(what for what, _ in bad), _non_finite(values))
    fd = 0.0
    if u is not None:
        d_out = (plus.out.double() - minus.out.double()) / (2 * eps)  # (B, T, d_v)
        fd += float((d_out * u).sum())
    if u_w is not None:
        d_w = (plus.weights.double() - minus.weights.double()) / (2 * eps)  # (B, T, T)
        fd += float((d_w * u_w).sum())
    ad = float((call.grads[name].double() * delta).sum())
    scale = max(1.0, abs(ad), abs(fd))
    if not abs(fd - ad) <= rtol * scale:
        return (
            f"Along a random unit direction of {name}: autograd gives {ad:.8g}, finite differences of your "
            f"outputs give {fd:.8g} ({_fd_text(ctx.precision())})."
        )
    if name == "X" and call.jacobian is not None and u is not None:
        J = call.jacobian  # (B, T, B, T, d)
        ad_rows = (J * delta).flatten(2).sum(-1)  # (B, T): <J[b, i], delta>
        fd_rows = (d_out * u).sum(-1)  # (B, T)
        gap = (ad_rows - fd_rows).abs()
        if not bool((gap <= rtol * ad_rows.abs().clamp(min=1.0)).all()):
            b, i = (int(v) for v in (gap == gap.max()).nonzero()[0])
            return (
                f"Jacobian block row ({b}, {i}): along a random direction of X, autograd gives "
                f"{float(ad_rows[b, i]):.8g} for d <out[{b}, {i}], u> but finite differences give "
                f"{float(fd_rows[b, i]):.8g} ({_fd_text(ctx.precision())})."
            )
    return None


@check(
    "batch_independence",
    title="each batch element is computed on its own",
    cites="Section 9.1 (the batch coordinate is preserved)",
)
def batch_independence(ctx: Ctx) -> Verdict:
    """Section 9.1: matrix products act on the last two coordinates only, so out(X)[b] equals
    out(X[b:b+1])[0], and changing one batch element never changes another."""
    tol = tolerance("reference", ctx.working_dtype(torch.float64))
    fulls: dict[int, HeadCall] = {}

    def full_of(k: int, case: Case) -> HeadCall:
        if k not in fulls:
            fulls[k] = ctx.head.attention(case)
        return fulls[k]

    def perturbation() -> Verdict | None:
        for k, case in enumerate(ctx.cases(FAMILIES[2:])):
            full = full_of(k, case)
            noise = _perturb_future(case, 0, 1.0, ctx.seed(7)).X
            for b in range(case.shape.B):
                # Change every other element; element b must not move (same seed: dropout draws alike).
                X = noise.clone()
                X[b] = case.X[b]
                other = ctx.head.attention(case.with_X(X))
                for what in full.sound():
                    if not ctx.same(getattr(full, what)[b], getattr(other, what)[b], case, what=f"{what}[{b}]"):
                        return failed(
                            f"Changing the other batch elements changed {what}[{b}]: batch elements must not "
                            "interact (scores, softmax and averages are taken within one sequence).",
                            counterexample=case.counterexample(ctx.base_seed),
                            heatmaps=heatmaps_for(
                                weights_of(full), weights_of(other), batch=b, label="after the change,"
                            ),
                        )
        return None

    def slicing() -> Verdict | None:
        for k, case in enumerate(ctx.cases(FAMILIES[2:])):
            full, s = full_of(k, case), case.shape
            for b in range(s.B):
                # Element b alone equals element b first in a batch: both draw the first random numbers after
                # the same seed, so a head with dropout is judged on its batch handling alone.
                order = [b, *(i for i in range(s.B) if i != b)]
                front = ctx.head.attention(case.with_X(case.X[order].clone())) if b else full
                one = Shape(1, s.T, s.d, s.d_k, s.d_v)
                single = Case(case.X[b : b + 1].clone(), case.W_Q, case.W_K, case.W_V, one, case.seed)
                alone = ctx.head.attention(single)
                for what in front.sound():
                    got, exp = getattr(alone, what)[0], getattr(front, what)[0]
                    bad = mismatch(got, exp, tol, f"{what} of batch element {b} computed alone")
                    if bad is not None:
                        return failed(
                            f"Batch element {b} gives "
                            f"{'a different output' if what == 'out' else 'different weights'} when it "
                            "is passed on its own (B=1).\n" + bad.text(),
                            counterexample=case.counterexample(ctx.base_seed),
                            mismatch=bad,
                        )
        return None

    # Every group runs (issue 30): elements that interact, and an element that differs alone, are two failures.
    verdict = every_group([("other batch elements changed", perturbation), ("an element passed alone", slicing)])
    if verdict is not None:
        return verdict
    return passed("Batch elements are independent (perturbation and slicing).")
