"""The changes to the reference that reproduce a head's values: the error model's search on the probes, the
mask constant the ladder or the head's own trace finds beside it, the checks replayed on the model, and the known
bugs a head matches (``_known``, ``_bugs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.diagnosis._bugs import Bug, Bugs
from grader.diagnosis._departure import fill_constants
from grader.diagnosis._known import (
    Probe,
    Seen,
    same,
    student_side,
)
from grader.diagnosis._ladder import climb, with_mask_constant
from grader.diagnosis._mutations import ORDINARY_SCORES, SLOT_OF, SLOTS, Combo, _pick
from grader.diagnosis._naming import (
    LEAKY,
    violates,
)
from grader.diagnosis._replay import REPLAYABLE, responsible
from grader.diagnosis._search import Tried, comparable, matches, reference_matches, search, searched
from grader.diagnosis._where import (
    ATTENTION,
    Where,
)
from grader.head import Head
from grader.models import (
    CheckResult,
    Diagnosis,
)

if TYPE_CHECKING:
    from grader.oracle import Oracle
    from grader.rubric import Rubric


def _changes(
    head: Head, probes: list[Probe], runs: list[Seen] | None, passed: set[str], failed: set[str], where: Where
) -> tuple[Combo, dict[str, float]] | None:
    """The mutations of the reference that reproduce the head's values (gradient probes left out: the
    error model is about values, and a head of the wrong output width cannot take the upstream); () when
    the reference itself does, None when nothing does. When numerical_stability or a check of the future keys
    failed and the model found fills the hidden entries with -inf, the ladder looks for a finite mask constant
    (``_ladder``; where the model masks the right entries), then the head's own traced scores do
    (:func:`_traced_fill`); the model grown is the one found on every probe or, when none was, on the ordinary
    ones (huge scores outweigh an additive -1e4: only the ladder then tells the constant)."""
    if runs is None:
        return None
    pairs = [(p, s) for p, s in zip(probes, runs, strict=True) if "grad" not in p.options]
    probes, theirs = [p for p, _ in pairs], comparable([s for _, s in pairs], [p for p, _ in pairs])
    if theirs is None:
        return None
    found, tried = (((), {}), None) if reference_matches(probes, theirs) else searched(probes, theirs, passed)
    if not _fill_unseen(failed) or (found is not None and _pick(found[0], "fill") is not None):
        return found
    base = found or _ordinary(probes, theirs, passed, tried)
    if base is None or _pick(base[0], "fill") is not None:
        return found
    if _pick(base[0], "mask") is None:
        ladder = climb(lambda probe: _ask(head, probe), *base)
        grown = with_mask_constant(ladder, probes, theirs, *base)
        if grown is not None:
            return grown if _seen_fill(grown[1]["mask"], failed, ()) else found  # its rungs show it
    return _traced_fill(head, probes, theirs, base, failed, where) or found


def _seen_fill(c: float, failed: set[str], combo: Combo) -> bool:
    """Whether a failing check shows mask constant ``c`` beside the mutations ``combo``: one below 1000 in magnitude
    leaks at ordinary scores; one that masks exactly there (-1e4) breaks only numerical_stability, and is named
    only when that failed and no mutation of ``combo`` breaks it too (a head with no other mistake gets no cause
    for it either; a diagonal hidden with -1e9 is the diagonal's mistake)."""
    if abs(c) < ORDINARY_SCORES:
        return True
    return "numerical_stability" in failed and not any("numerical_stability" in violates(m) for m in combo)


# the checks a finite mask constant fails by itself: numerical_stability (huge scores, half precision) and, for one
# below 1000 in magnitude, those of the exact zeros of the future keys (-100 leaves them exp(-100), which the
# search's probes cannot tell from 0)
FILL_FAILS = ("numerical_stability", "causal_mask", "future_perturbation")


def _fill_unseen(failed: set[str]) -> bool:
    """Whether a finite mask constant the search cannot see may be behind some failing check."""
    return any(c in failed for c in FILL_FAILS)


def _traced_fill(
    head: Head,
    probes: list[Probe],
    theirs: list[Seen],
    base: tuple[Combo, dict[str, float]],
    failed: set[str],
    where: Where,
) -> tuple[Combo, dict[str, float]] | None:
    """``base`` with the finite constant the head's own traced call writes into (or adds to) the entries its mask
    hides, when that model reproduces the head on every probe (issue 35: -100 hides the future keys at ordinary
    scores as well as -inf, and beside another mask mistake or a transpose the ladder cannot tell it; the head's
    masked scores do), and a failing check shows it (:func:`_seen_fill`)."""
    combo, fitted = base
    for form, c in fill_constants(head, combo, fitted, where.length, where.square):
        if not _seen_fill(c, failed, combo):
            continue
        grown = tuple(sorted((*combo, form), key=lambda m: SLOTS.index(SLOT_OF[m])))
        fit = matches(grown, probes, theirs, {**fitted, "mask": c})
        if fit is not None:
            return grown, fit.values
    return None


def _ordinary(
    probes: list[Probe], theirs: list[Seen], passed: set[str], tried: Tried | None = None
) -> tuple[Combo, dict[str, float]] | None:
    """The model found on the probes at ordinary scores alone (``tried``: the search on every probe, whose failures
    on the ordinary probes before the first huge one need not be evaluated again)."""
    kept = [(p, s) for p, s in zip(probes, theirs, strict=True) if not p.huge]
    some, answers = [p for p, _ in kept], [s for _, s in kept]
    return ((), {}) if reference_matches(some, answers) else search(some, answers, passed, tried)


def _ask(head: Head, probe: Probe) -> Seen | None:
    """The head on one extra probe of the diagnosis, in float64; None when it did not answer."""
    runs = comparable(student_side(head, ATTENTION, [probe]), [probe])
    return runs[0] if runs else None


def _replayed(
    mutations: list[Diagnosis],
    combo: Combo,
    fitted: dict[str, float],
    failing: list[CheckResult],
    ref: Oracle,
    rubric: Rubric,
    seed: int,
) -> list[Diagnosis]:
    """The mutations with the checks they explain completed by replaying those checks on the error model:
    numerical_stability always (its verdict turns on dtypes and fitted constants), another failing check when
    no mutation's static entry (the library's catalog, pinned on the real checks) explains it."""
    for check in failing:
        static = any(check.id in d.explains for d in mutations)
        if check.id not in REPLAYABLE or (static and check.id != "numerical_stability"):
            continue
        who = responsible(check.id, check.status, combo, fitted, ref, rubric, seed)
        if who is None:
            continue
        for k, d in enumerate(mutations):
            explains = {*d.explains} - {check.id}
            if d.id in who or _named(d.id, who):
                explains.add(check.id)
            mutations[k] = d.model_copy(update={"explains": sorted(explains)})
    return mutations


def _named(cid: str, mutations: list[str]) -> bool:
    """Whether ``cid`` is the name one of ``mutations`` took (a fitted mask constant's "leaky" name)."""
    return any(LEAKY.get(m) == cid for m in mutations)


def _known(theirs: list[Seen] | None, function: str, bugs: Bugs) -> list[Bug]:
    """The known bugs of ``function`` that the head matches on every probe (none when it matches the
    reference)."""
    candidates, correct = bugs.of(function), bugs.reference(function)
    if theirs is None or not candidates or correct is None or same(theirs, correct):
        return []
    return [b for b in candidates if not all(s.error for s in bugs.answers(b)) and same(theirs, bugs.answers(b))]
