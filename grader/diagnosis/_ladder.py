"""Mask constants too large to show at ordinary scores, found on a ladder of score gaps (issue 16).

A head that masks with a finite constant m (``masked_fill(mask == 0, -1e9)``, an additive ``-1e10``)
computes the reference's values wherever the scores are far above m, so the search's probes cannot see
it; numerical_stability can (m overflows float16, or huge scores outweigh it). Each element of a ladder
probe is one three-token sequence whose first query sees one allowed key at score -G and two future keys at
scores 0 and -1: it masks while G is below |m| by more than exp's range (about 745) and leaks once G is
above |m| by as much; within that window both weights are positive, and they fix m exactly (and whether
it is written into the scores or added to them). The first rung spaces G by quarter decades from 1 to
1e300; each later one puts :data:`LEVELS` levels between the last that masked and the first that leaked,
until one lands in the window or float64 cannot tell the two apart. Dropout left on (the head's own draw,
the same on every call) only hides the levels where it dropped every weight that had one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from grader.compare import tolerance
from grader.diagnosis._known import MATCH, Probe, Seen
from grader.diagnosis._mutations import SLOT_OF, SLOTS, Combo, _pick, named_scales
from grader.diagnosis._search import matches
from grader.diagnosis._where import ARGS

LEVELS = 2048
RUNGS = 7
TOP = 1e300  # a constant beyond this (float64's finfo.min) is as good as -inf for every dtype the head may get
LADDER = tolerance("ladder")  # scores of 1e9 carry rounding of 1e-7: agree on the pattern, not bits
FORMS = ("weak_mask_fill", "weak_mask_constant")


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
    """The scale the model applies to the ladder's scores (T = 3, d = 2, d_k = 1, d_v = 2)."""
    which = _pick(combo, "scale")
    if which == "scale_constant":
        return fitted.get("scale")
    return named_scales(3, 2, 1, 2)[which or "right"]


@dataclass
class Climb:
    """The ladder's rungs as the head answered them; ``lo``, ``hi``: the last level of the last rung that
    masked and the next one (the bracket of the head's constant)."""

    rungs: list[tuple[Probe, Seen]] = field(default_factory=list)
    lo: float | None = None
    hi: float | None = None


def climb(ask: Callable[[Probe], Seen | None], combo: Combo, fitted: dict[str, float]) -> Climb:
    """The ladder's rungs, ending at the first rung that fixes the head's mask constant; no rungs when the
    head masks exactly up to :data:`TOP`, leaks at the lowest level, or is not monotone."""
    scale = _scale(combo, fitted)
    if scale is None or not math.isfinite(scale) or scale <= 0:
        return Climb()
    levels = 10 ** (torch.arange(0, 4 * round(math.log10(TOP)) + 1, dtype=torch.float64) / 4)  # 1 .. TOP
    found = Climb()
    for _ in range(RUNGS):
        probe = ladder_probe(levels, scale)
        seen = ask(probe)
        if seen is None or seen.error or "r1" not in seen.values or seen.values["r1"].shape != (len(levels), 3, 3):
            return Climb()
        found.rungs.append((probe, seen))
        first = seen.values["r1"][:, 0].double()  # (levels, 3): the first query's weights
        if not bool(torch.isfinite(first).all()):
            return Climb()
        # its only allowed key, and the future ones; a level where dropout dropped every weight that had one
        # (both are 0) says nothing, and the bracket is read off the others
        allowed, future = first[:, 0], first[:, 1:].sum(-1)
        seen_at = (allowed > 0) | (future > 0)
        if not bool(seen_at.any()):
            return Climb()
        levels, allowed, future = levels[seen_at], allowed[seen_at], future[seen_at]
        masked, leaked = future == 0, allowed == 0
        k = int((~masked).long().argmax()) if not bool(masked.all()) else len(levels)
        if bool((~masked & ~leaked).any()):  # a level in the window: it fixes the constant
            found.lo, found.hi = (float(levels[k - 1]), float(levels[k])) if k > 0 else (None, None)
            return found
        if k == len(levels) or k == 0 or not bool(leaked[k:].all()):
            # -inf-like, leaky everywhere, or not monotone; past the first rung, the bracket of the last one
            return found if len(found.rungs) > 1 else Climb()
        found.lo, found.hi = float(levels[k - 1]), float(levels[k])
        if found.hi - found.lo <= 1e-12 * found.hi:
            return found
        levels = torch.linspace(found.lo, found.hi, LEVELS + 2, dtype=torch.float64)[1:-1]
    return found


def _roundest(lo: float, hi: float) -> float:
    """The number of fewest significant digits in [lo, hi] (a student writes 1e9, not 1.0000003e9)."""
    for digits in range(1, 17):
        x = float(f"{(lo + hi) / 2:.{digits - 1}e}")
        if lo <= x <= hi:
            return x
    return (lo + hi) / 2


def with_mask_constant(
    ladder: Climb, probes: Sequence[Probe], theirs: Sequence[Seen], combo: Combo, fitted: dict[str, float]
) -> tuple[Combo, dict[str, float]] | None:
    """``combo`` with its mask replaced by a finite constant, filled or added, that reproduces the head on
    the ladder (within :data:`LADDER`) and on the search's probes (exactly); None when neither form does."""
    if not ladder.rungs or _pick(combo, "mask") is not None or _pick(combo, "fill") is not None:
        return None
    presets: list[dict[str, float]] = [{}]
    if ladder.lo is not None and ladder.hi is not None:
        presets.append({"mask": -_roundest(ladder.lo, ladder.hi)})
    rungs = ladder.rungs[::-1]  # the last rung first: it is the one that fixes the constant when it is not preset
    for form in FORMS:
        grown = tuple(sorted((*combo, form), key=lambda m: SLOTS.index(SLOT_OF[m])))
        for preset in presets:
            fit = matches(grown, [p for p, _ in rungs], [s for _, s in rungs], {**fitted, **preset}, LADDER)
            if fit is not None and (fit := matches(grown, probes, theirs, fit.values, MATCH)) is not None:
                return grown, fit.values
    return None
