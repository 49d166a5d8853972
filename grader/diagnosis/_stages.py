"""The lecture's stages of a head (Q, K, V, the scores, scaled, masked, the weights, the output) on a probe, as the
error model computes them with some mutations, and which stage a recorded value matches."""

from __future__ import annotations

from typing import Any

import torch

from grader.diagnosis._mutations import SLOT_OF, Combo, Fit, forward
from grader.diagnosis._trace import PROBE_B, Record, Trace, _equal, _floating

RANK = {"Q": 0, "K": 0, "V": 0, "K^T": 0, "scores": 1, "premasked": 1, "scaled": 2, "masked": 3, "weights": 4, "out": 5}


# the order a head computes its slots in: a departure is explained by the first mutations in this order
ORDER = ("projections", "values", "scale", "dtype", "switch", "mask", "fill", "softmax", "randomness")


def _stages_with(
    tensors: dict[str, torch.Tensor], causal: bool, fitted: dict[str, float], theirs: Any, combo: Combo
) -> dict[str, torch.Tensor] | None:
    """:func:`stages_of` with ``combo`` last, for a ``partial`` of the rest."""
    return stages_of(tensors, causal, combo, fitted, theirs)


def stages_of(
    tensors: dict[str, torch.Tensor], causal: bool, combo: Combo, fitted: dict[str, float], theirs: Any
) -> dict[str, torch.Tensor] | None:
    """The error model's intermediate values on the probe, with ``combo`` applied (None: not computable)."""
    seen: dict[str, torch.Tensor] = {}
    X, W_Q, W_K, W_V = (tensors[n] for n in ("X", "W_Q", "W_K", "W_V"))
    done = forward(X, W_Q, W_K, W_V, causal, combo, Fit(values=dict(fitted)), theirs, stages=seen)
    if done is None:
        return None
    seen["K^T"] = seen["K"].transpose(-2, -1)
    if "masked" in seen:  # a mask applied before the scale (-inf / sqrt(d_k) is -inf): a layout, not a stage due
        hidden = torch.isneginf(seen["masked"]) & torch.isfinite(seen["scaled"])
        seen["premasked"] = seen["scores"].masked_fill(hidden, float("-inf"))
    return seen


def models(
    tensors: dict[str, torch.Tensor], causal: bool, combo: Combo, fitted: dict[str, float], theirs: Any
) -> list[tuple[Combo, dict[str, torch.Tensor]]]:
    """The lecture's stages, then those of each prefix of ``combo`` in the order a head computes them."""
    ordered = sorted(combo, key=lambda m: ORDER.index(SLOT_OF[m]))
    out: list[tuple[Combo, dict[str, torch.Tensor]]] = []
    for n in range(len(ordered) + 1):
        stages = stages_of(tensors, causal, tuple(ordered[:n]), fitted, theirs)
        if stages is None:
            continue
        if out and stages.keys() == out[-1][1].keys() and all(_equal(stages[s], out[-1][1][s]) for s in stages):
            continue  # this mutation changes nothing on this probe (the flag, at causal=True)
        out.append((tuple(ordered[n - 1 : n]), stages))
    return out


def matched(r: Record, stages: dict[str, torch.Tensor]) -> str | None:
    """The latest stage ``r``'s value equals, if any."""
    if not _floating(r):
        return None
    assert r.value is not None
    hits = [s for s, v in stages.items() if _equal(r.value, v)]
    return max(hits, key=lambda s: RANK[s]) if hits else None


def _stage_shaped(r: Record, T: int) -> bool:
    """A value of a stage's shape: (B, T, *) or K^T's (B, *, T); a (T, T) mask or a row is not one."""
    if not _floating(r):
        return False
    assert r.value is not None
    shape = tuple(r.value.shape)
    return len(shape) == 3 and shape[0] == PROBE_B and T in (shape[1], shape[2])


def _neutral(r: Record, tensors: dict[str, torch.Tensor]) -> bool:
    """An input, or a transpose of one or of Q, V: handled on the way to a stage, never a stage itself; an input
    cast to another floating dtype too (``X = X.float()``: what the cast costs shows at the first stage made of it)."""
    assert r.value is not None
    v = r.value
    X, W_Q, W_K, W_V = (tensors[n] for n in ("X", "W_Q", "W_K", "W_V"))
    for t in (*tensors.values(), X @ W_Q, X @ W_K, X @ W_V):
        if _equal(v, t) or (t.dim() >= 2 and _equal(v, t.transpose(-2, -1))):
            return True
    return any(cast_of(v, t) or (t.dim() >= 2 and cast_of(v, t.transpose(-2, -1))) for t in tensors.values())


def cast_of(v: torch.Tensor, t: torch.Tensor) -> bool:
    """Whether ``v`` is ``t`` cast to another floating dtype, exactly (``X.float()`` of a float64 X)."""
    return v.dtype != t.dtype and v.dtype.is_floating_point and v.shape == t.shape and torch.equal(v, t.to(v.dtype))


def _softmax_part(r: Record, stages: dict[str, torch.Tensor]) -> bool:
    """Whether ``r`` is a hand-written softmax's own step: the masked scores less each row's max, or their exp
    (Proposition 5.1): on the way to the weights, never a departure itself, whatever the weights become."""
    assert r.value is not None
    for stage in ("masked", "scaled"):
        s = stages.get(stage)
        if s is None or s.shape != r.value.shape:
            continue
        shifted = s - s.amax(-1, keepdim=True)
        if _equal(r.value, shifted) or _equal(r.value, torch.exp(shifted)):
            return True
    return False


def _rank(stage: str) -> int:
    """A stage's rank, the scores masked before the scale as far as the masked stage (they hold the mask)."""
    return RANK["masked"] if stage == "premasked" else RANK[stage]


def _returned_weights(trace: Trace) -> torch.Tensor | None:
    """The weights the traced call returned, which a dropout model reads its dropped entries off."""
    for r in reversed(trace.records):
        name = f"v:{r.index}"
        if (
            name in trace.returned
            and r.value is not None
            and r.value.dim() == 3
            and r.value.shape[-1] == r.value.shape[-2]
        ):
            return r.value.double()
    return None
