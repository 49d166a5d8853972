"""Replay a check on the error model: does the correct head with these changes fail it too? (issue 16)

A cause explains a failing check when the reference, changed as the diagnosis found, fails that check the
same way (the same status). :class:`ModelHead` is that changed reference behind the :class:`Head` interface
the checks use, computed here in the grader from trusted code (no student code runs); it answers plain
attention calls only, so only checks made of those can be replayed (numerical_stability, whose verdict
depends on dtypes and constants a static table cannot know). Anything else is "cannot replay" (None), and
the caller keeps its static answer.
"""

from __future__ import annotations

from typing import Any

from grader.checks import CHECKS, Ctx
from grader.diagnosis._mutations import Combo, Fit, forward
from grader.head import Head, HeadCall, StudentFailure
from grader.oracle import Oracle
from grader.rubric import Rubric

REPLAYABLE = frozenset(
    {
        "reference_match",
        "row_stochastic",
        "causal_mask",
        "convex_hull",
        "score_scaling",
        "permutation_equivariance",
        "batch_independence",
        "numerical_stability",
        "future_perturbation",
    }
)


class Unreplayable(Exception):
    """The model cannot answer this request (gradients, timings, other functions, dropout's own draw)."""


class ModelHead(Head):
    """The reference with ``combo`` applied and ``fitted`` constants held, as a head the checks can call."""

    def __init__(self, combo: Combo, fitted: dict[str, float]) -> None:  # no sandbox: nothing is sent anywhere
        self.combo, self.fitted = combo, dict(fitted)

    def attention(self, case: Any, *, causal: bool = True, **options: Any) -> HeadCall:
        if any(options.get(k) for k in ("upstream", "jacobian_upstream", "return_inputs", "trace")):
            raise Unreplayable
        X, W_Q, W_K, W_V = case.tensors().values()
        try:
            got = forward(X, W_Q, W_K, W_V, causal, self.combo, Fit(dict(self.fitted)))
        except Exception as exc:  # what the mutated head raises (a fill that overflows float16) is its verdict
            raise StudentFailure("error", f"{type(exc).__name__}: {exc}") from None
        if got is None:
            raise Unreplayable
        out, weights = got
        return HeadCall(out.to(X.dtype), weights.to(X.dtype))

    def attention_each(self, cases: list[Any], *, causal: bool = True) -> list[HeadCall]:
        return [self.attention(case, causal=causal) for case in cases]

    def _send(self, *args: Any, **kwargs: Any) -> Any:
        raise Unreplayable


def replay(check_id: str, model: ModelHead, ref: Oracle, rubric: Rubric, seed: int) -> str | None:
    """The status of ``check_id`` on ``model`` ("passed", "failed", "error"); None when it cannot be replayed."""
    if check_id not in REPLAYABLE:
        return None
    ctx = Ctx(model, ref, rubric, seed, check_id, source="")
    try:
        return CHECKS[check_id].fn(ctx).status
    except StudentFailure as exc:
        return exc.status
    except Exception:  # Unreplayable, or a request the model does not serve
        return None


def responsible(
    check_id: str, status: str, combo: Combo, fitted: dict[str, float], ref: Oracle, rubric: Rubric, seed: int
) -> list[str] | None:
    """The mutations of ``combo`` that make the model fail ``check_id`` as the head did (``status``): those
    without which it passes, or all of them when none alone is needed; [] when the model does not fail it
    that way; None when it cannot be replayed. An additive constant is tried both as torch adds it and
    rounded to the dtype first (as NumPy does, where 0 * -inf gives NaN)."""
    variants = [fitted] + ([{**fitted, "mask_rounded": 1.0}] if "weak_mask_constant" in combo else [])
    for constants in variants:
        full = replay(check_id, ModelHead(combo, constants), ref, rubric, seed)
        if full is None:
            return None
        if full != status:
            continue
        if len(combo) == 1:
            return list(combo)
        needed = [
            m
            for m in combo
            if replay(check_id, ModelHead(tuple(x for x in combo if x != m), constants), ref, rubric, seed) == "passed"
        ]
        return needed or list(combo)
    return []
