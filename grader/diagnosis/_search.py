"""Search for the smallest set of mutations that turns the reference into the head (issue 10, item 7).

This is the error-model idea of Singh, Gulwani and Solar-Lezama (PLDI 2013), run on behaviour instead
of syntax: combinations of one, two, then three mutations (at most one per slot) are evaluated on the
probes' inputs and compared with the head's own outputs. The first size with a match wins; several
matches of that size that disagree on a slot give no guess there. A head that matches the reference
gets no cause, and a head that matches nothing gets no guess.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from grader.compare import Tolerance, tolerance
from grader.diagnosis._causes import ruled_out_by
from grader.diagnosis._known import MATCH, Probe, Seen, _close
from grader.diagnosis._mutations import FITTED, MUTATIONS, SLOTS, Combo, Fit, forward

FLOAT32 = tolerance("match", torch.float32)  # a float32 softmax replayed here: the same rounding, up to order
MAX_CHANGES = 3
# Past this many evaluated combinations the search gives up (no guess): a safety net that counts work, not
# seconds, so that a slower machine (a Windows laptop, a loaded runner) names the same causes. The whole
# space of today's table is 1596 combinations (about 1 s on Linux); a head's passing checks prune most of it.
MAX_EVALUATIONS = 4000


def candidates(passed: set[str]) -> dict[str, list[str]]:
    """Mutations per slot that no passing check rules out."""
    ruled_out = ruled_out_by()
    return {slot: [m for m in ms if not set(ruled_out.get(m, ())) & passed] for slot, ms in MUTATIONS.items()}


def combos(allowed: dict[str, list[str]], size: int) -> Iterator[Combo]:
    for slots in itertools.combinations(SLOTS, size):
        yield from itertools.product(*(allowed[s] for s in slots))


def matches(
    combo: Combo,
    probes: Sequence[Probe],
    theirs: Sequence[Seen],
    fitted: dict[str, float] | None = None,
    tol: Tolerance | None = None,
) -> Fit | None:
    """The fitted constants when the mutated reference reproduces the head on every probe, else None
    (``fitted``: constants already known, held fixed; ``tol``: the search's own by default). A scale rounded
    to float32 is tried in both forms (divided by the rounded 1/scale, multiplied by the rounded scale)."""
    return _matched(combo, probes, theirs, fitted, tol)[0]


def _matched(
    combo: Combo,
    probes: Sequence[Probe],
    theirs: Sequence[Seen],
    fitted: dict[str, float] | None = None,
    tol: Tolerance | None = None,
) -> tuple[Fit | None, int]:
    """:func:`matches`, and how many probes it got past: the index of the probe it first failed (the same on
    any list of probes that begins with those), or ``len(probes)`` when it failed after them or matched."""
    fitted = fitted or {}
    if "scale_in_float32" in combo and "divides" not in fitted:
        reached = 0
        for k in (1.0, 0.0):
            fit, got = _matched(combo, probes, theirs, {**fitted, "divides": k}, tol)
            if fit is not None:
                return fit, got
            reached = max(reached, got)
        return None, reached
    fit = Fit(dict(fitted))
    tol = tol or (FLOAT32 if "softmax_in_float32" in combo else MATCH)
    for n, (probe, seen) in enumerate(zip(probes, theirs, strict=True)):
        t = probe.tensors
        causal = bool(probe.options["kwargs"]["causal"]["v"])
        out_w = forward(t["X"], t["W_Q"], t["W_K"], t["W_V"], causal, combo, fit, seen.values["r1"])
        if out_w is None:
            return None, n
        if not all(_close(ours, seen.values[k], tol) for ours, k in zip(out_w, ("r0", "r1"), strict=True)):
            return None, n
    if any(FITTED[m] not in fit.values for m in combo if m in FITTED):
        return None, len(probes)  # a constant never showed itself: the plain reference explains these probes
    if "scale_constant" in combo and fit.coincide:
        return None, len(probes)  # the constant is the right scale, or a named one, on every probe: not a constant
    return fit, len(probes)


def comparable(theirs: Sequence[Seen] | None, probes: Sequence[Probe] | None = None) -> list[Seen] | None:
    """The head's (out, weights) per probe in float64, or None when some probe gave no such pair (or, given the
    ``probes``, weights of another shape than (B, T, T) or an out not (B, T, width): issue 30, nothing of ours
    raises on it)."""
    if theirs is None:
        return None
    out = []
    for k, seen in enumerate(theirs):
        values = {k: seen.values.get(k) for k in ("r0", "r1")}
        if seen.error or any(v is None or not v.dtype.is_floating_point for v in values.values()):
            return None
        if probes is not None and not _shaped(probes[k], values["r0"], values["r1"]):  # type: ignore[arg-type]
            return None
        out.append(Seen(values={k: v.double() for k, v in values.items() if v is not None}))
    return out


def _shaped(probe: Probe, out: torch.Tensor, weights: torch.Tensor) -> bool:
    X, W_V = probe.tensors.get("X"), probe.tensors.get("W_V")
    if X is None or W_V is None or X.dim() != 3:
        return True  # not a head probe of the usual inputs: nothing to hold it to
    B, T = X.shape[:2]  # out may be of another width (no_value_projection averages X itself)
    return out.dim() == 3 and tuple(out.shape[:2]) == (B, T) and tuple(weights.shape) == (B, T, T)


@dataclass
class Tried:
    """A search's probes, the head's answers, and the probe each combination it evaluated first failed at: a later
    search whose probes begin as these do skips the combinations that failed within that beginning (they fail
    there too, the fitted constants being made from the same probes): the same answer, the work done once."""

    probes: Sequence[Probe]
    theirs: Sequence[Seen]
    failed_at: dict[Combo, int] = field(default_factory=dict)

    def shared(self, probes: Sequence[Probe], theirs: Sequence[Seen]) -> int:
        """How many probes (and answers) ``probes`` begin with that these began with: the same objects."""
        n = 0
        for pa, pb, sa, sb in zip(self.probes, probes, self.theirs, theirs, strict=False):
            if pa is not pb or sa is not sb:
                break
            n += 1
        return n


def search(
    probes: Sequence[Probe], theirs: Sequence[Seen], passed: set[str], earlier: Tried | None = None
) -> tuple[Combo, dict[str, float]] | None:
    """The smallest combination of mutations that reproduces the head exactly, with its constants. ``earlier``: an
    earlier search of the same head (:class:`Tried`, from :func:`searched`), whose failures on the probes both
    begin with are not evaluated again."""
    return searched(probes, theirs, passed, earlier)[0]


def searched(
    probes: Sequence[Probe], theirs: Sequence[Seen], passed: set[str], earlier: Tried | None = None
) -> tuple[tuple[Combo, dict[str, float]] | None, Tried]:
    """:func:`search`, and what it tried (for a later search on probes that begin as these do)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is ten times faster than several contending
    try:
        return _search(probes, theirs, candidates(passed), MAX_EVALUATIONS, earlier)
    finally:
        torch.set_num_threads(threads)


def _search(
    probes: Sequence[Probe],
    theirs: Sequence[Seen],
    allowed: dict[str, list[str]],
    budget: int,
    earlier: Tried | None = None,
) -> tuple[tuple[Combo, dict[str, float]] | None, Tried]:
    now = Tried(probes, theirs)
    shared = earlier.shared(probes, theirs) if earlier is not None else 0
    before = earlier.failed_at if earlier is not None else {}
    evaluated = 0
    for size in range(1, MAX_CHANGES + 1):
        found = []
        for combo in combos(allowed, size):
            evaluated += 1
            if evaluated > budget:
                return None, now
            if before.get(combo, shared) < shared:
                now.failed_at[combo] = before[combo]
                continue  # it failed on a probe both searches begin with: it fails here too
            fit, reached = _matched(combo, probes, theirs)
            if fit is None:
                now.failed_at[combo] = reached
            else:
                found.append((combo, fit.values))
        exact = [(c, v) for c, v in found if "softmax_in_float32" not in c]
        found = _one_function(exact or found)  # a match at float64 accuracy beats one within float32's tolerance
        if len(found) == 1:
            return found[0], now
        if found:  # ties: keep only what every match agrees on (never a guess between them)
            common = set.intersection(*(set(c) for c, _ in found))
            combo = tuple(m for m in found[0][0] if m in common)
            return ((combo, found[0][1]) if combo else None), now
    return None, now


# With every score alike before the mask (a fitted scale of 0), adding a constant to the future scores and writing
# it there are one function on every input, not two readings of the probes: the additive form names it.
TWINS = {"weak_mask_fill": "weak_mask_constant"}


def _one_function(found: list[tuple[Combo, dict[str, float]]]) -> list[tuple[Combo, dict[str, float]]]:
    """``found`` without a match whose twin (:data:`TWINS`), with the same constants, matched too and is the
    same function (issue 35: a padding mask that fills every score, then +1 on the future scores, lost its
    mask to the tie between the two forms)."""
    combos = {(c, tuple(sorted(v.items()))) for c, v in found}
    return [
        (c, v)
        for c, v in found
        if v.get("scale") != 0
        or (twin := tuple(TWINS.get(m, m) for m in c)) == c
        or (twin, tuple(sorted(v.items()))) not in combos
    ]


def reference_matches(probes: Sequence[Probe], theirs: Sequence[Seen]) -> bool:
    return matches((), probes, theirs) is not None
