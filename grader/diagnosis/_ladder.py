"""Mask constants too large to show at ordinary scores, found on a ladder of score gaps (issue 16).

A head that masks with a finite constant m (``masked_fill(mask == 0, -1e9)``, an additive ``-1e10``)
computes the reference's values wherever the scores are far above m, so the search's probes cannot see
it; numerical_stability can (m overflows float16, or huge scores outweigh it). Each element of a ladder
probe is one three-token sequence whose first query sees one allowed key at score -G and two future keys at
scores 0 and -1: it masks while G is below |m| by more than exp's range (about 745) and leaks once G is
above |m| by as much; within that window both weights are positive, and they fix m exactly (and whether
it is written into the scores or added to them). The first rung spaces G by quarter decades from 1 to
1e300; each later one puts :data:`LEVELS` levels between the last that masked and the first that leaked,
until one lands in the window or float64 cannot tell the two apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from grader.compare import Tolerance
from grader.diagnosis._known import MATCH, Probe, Seen, _close
from grader.diagnosis._mutations import SLOT_OF, SLOTS, Combo, Fit, _pick, forward, named_scales

LEVELS = 2048
RUNGS = 7
TOP = 1e300  # a constant beyond this (float64's finfo.min) is as good as -inf for every dtype the head may get
LADDER = Tolerance(rtol=1e-4, atol=1e-12)  # scores of 1e9 carry rounding of 1e-7: agree on the pattern, not bits
FORMS = ("weak_mask_fill", "weak_mask_constant")
ARGS = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]


def ladder_probe(levels: torch.Tensor, scale: float) -> Probe:
    """One sequence per level G: tokens (1, -G/c), (1, 0), (1, -1/c) with W_Q = e_1 and W_K = e_2, so the
    head's scaled scores (scale c) of the first query are -G, 0 and -1."""
    B = len(levels)
    X = torch.zeros(B, 3, 2, dtype=torch.float64)  # (B, T = 3, d = 2)
    X[:, :, 0] = 1.0
    X[:, 0, 1] = -levels / scale
    X[:, 2, 1] = -1.0 / scale
    W_Q = torch.tensor([[1.0], [0.0]], dtype=torch.float64)  # (2, 1): every query is 1
    W_K = torch.tensor([[0.0], [1.0]], dtype=torch.float64)  # (2, 1): key j is X[j, 1]
    W_V = torch.tensor([[1.0, 2.0], [0.0, 0.0]], dtype=torch.float64)  # (2, 2): finite values at every level
    return Probe(ARGS, {"X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V}, {"kwargs": {"causal": {"v": True}}})


def _scale(combo: Combo, fitted: dict[str, float]) -> float | None:
    """The scale the model applies to the ladder's scores (T = 3, d = 2, d_k = 1)."""
    which = _pick(combo, "scale")
    if which == "scale_constant":
        return fitted.get("scale")
    return named_scales(3, 2, 1)[which or "right"]


def climb(ask: Callable[[Probe], Seen | None], combo: Combo, fitted: dict[str, float]) -> list[tuple[Probe, Seen]]:
    """The ladder's rungs as the head answered them, ending at the first rung that fixes its mask constant;
    [] when the head masks exactly up to :data:`TOP`, leaks at the lowest level, or is not monotone."""
    scale = _scale(combo, fitted)
    if scale is None or not math.isfinite(scale) or scale <= 0:
        return []
    levels = 10 ** (torch.arange(0, 4 * 300 + 1, dtype=torch.float64) / 4)  # 1 .. 1e300
    rungs: list[tuple[Probe, Seen]] = []
    for _ in range(RUNGS):
        probe = ladder_probe(levels, scale)
        seen = ask(probe)
        if seen is None or seen.error or "r1" not in seen.values or seen.values["r1"].shape != (len(levels), 3, 3):
            return []
        rungs.append((probe, seen))
        allowed = seen.values["r1"][:, 0, 0].double()  # the first query's weight on its only allowed key
        if not bool(torch.isfinite(allowed).all()):
            return []
        masked, leaked = allowed == 1, allowed == 0
        if bool((~masked & ~leaked).any()):
            return rungs  # a level in the window
        k = int((~masked).long().argmax()) if not bool(masked.all()) else len(levels)
        if k == len(levels) or k == 0 or not bool(leaked[k:].all()):
            return [] if len(rungs) == 1 else rungs  # -inf-like, leaky everywhere, or not monotone
        lo, hi = float(levels[k - 1]), float(levels[k])
        if hi - lo <= 1e-12 * hi:
            return rungs
        levels = torch.linspace(lo, hi, LEVELS + 2, dtype=torch.float64)[1:-1]
    return rungs


def _bracket(rungs: Sequence[tuple[Probe, Seen]]) -> float | None:
    """The roundest |m| between the last masking and the first leaking level of the last rung."""
    probe, seen = rungs[-1]
    allowed = seen.values["r1"][:, 0, 0].double()
    scale = -1.0 / float(probe.tensors["X"][0, 2, 1])  # the third token holds -1/c
    levels = -probe.tensors["X"][:, 0, 1] * scale
    k = int((allowed != 1).long().argmax())
    if k == 0:
        return None
    lo, hi = float(levels[k - 1]), float(levels[k])
    for digits in range(1, 17):
        x = float(f"{(lo + hi) / 2:.{digits - 1}e}")
        if lo <= x <= hi:
            return x
    return (lo + hi) / 2


def with_mask_constant(
    rungs: Sequence[tuple[Probe, Seen]],
    probes: Sequence[Probe],
    theirs: Sequence[Seen],
    combo: Combo,
    fitted: dict[str, float],
) -> tuple[Combo, dict[str, float]] | None:
    """``combo`` with its mask replaced by a finite constant, filled or added, that reproduces the head on
    the ladder (within :data:`LADDER`) and on the search's probes (exactly); None when neither form does."""
    if not rungs or _pick(combo, "mask") is not None or _pick(combo, "randomness") is not None:
        return None
    guess = _bracket(rungs)
    for form in FORMS:
        grown = tuple(sorted((*combo, form), key=_slot_order))
        for preset in ({}, {"mask": -guess} if guess is not None else None):
            if preset is None:
                continue
            fit = Fit({**fitted, **preset})
            # the last rung first: it is the one that fixes the constant when it is not preset
            if (
                _reproduces(grown, fit, rungs[::-1], LADDER)
                and "mask" in fit.values
                and _reproduces(grown, fit, list(zip(probes, theirs, strict=True)), MATCH)
            ):
                return grown, fit.values
    return None


def _reproduces(combo: Combo, fit: Fit, pairs: Sequence[tuple[Probe, Seen]], tol: Tolerance) -> bool:
    for probe, seen in pairs:
        t = probe.tensors
        causal = bool(probe.options["kwargs"]["causal"]["v"])
        theirs = seen.values["r1"].double()
        got = forward(t["X"], t["W_Q"], t["W_K"], t["W_V"], causal, combo, fit, theirs)
        if got is None:
            return False
        if not all(_close(ours, seen.values[k].double(), tol) for ours, k in zip(got, ("r0", "r1"), strict=True)):
            return False
    return True


def _slot_order(mutation: str) -> int:
    return SLOTS.index(SLOT_OF[mutation])
