"""Grading by mistakes (issue 16): one mistake, one deduction.

The per-check score charges a mistake once per check it breaks: dropout left on fails six checks, a
forgotten ``causal=False`` branch three. When the diagnosis names causes that explain every failing check,
the grade counts the causes instead: each costs its price from the rubric's ``[mistakes]`` once (a cause
without a price costs the points of the checks it explains, each check charged once). The score is the
larger of the two counts, so counting mistakes never costs a student points; the per-check table stays the
evidence. Whichever count stands, each named cause carries its price (``Diagnosis.deduction``) and the note
says how the two counts compare. A failing check that no cause explains keeps the per-check score, and the
note says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from grader.models import FAILING, CheckResult, Diagnosis, DiagnosisError, Scoring


@dataclass(frozen=True)
class Tally:
    score: float
    scoring: Scoring
    score_by_checks: float
    note: str | None
    diagnosis: list[Diagnosis]  # with each cause's deduction when scoring is "mistakes"


def tally(
    checks: list[CheckResult],
    diagnosis: list[Diagnosis],
    prices: Mapping[str, float],
    caps: Mapping[str, float] | None = None,
) -> Tally:
    """The score of ``checks`` counted by checks and, when every failing graded check is explained, by mistakes."""
    by_checks = round(sum(c.score for c in checks), 6)
    graded = [c for c in checks if c.status in FAILING and not c.extra_credit and c.pending is None]
    lost = {c.id: c.max_score - c.score for c in graded if c.score < c.max_score}
    if not lost:
        return Tally(by_checks, "checks", by_checks, None, diagnosis)
    unexplained = [cid for cid in lost if not any(cid in d.explains for d in diagnosis)]
    if unexplained:
        note = (
            f"Counted by checks: no named cause explains {listed(unexplained)}, so each failing check costs its "
            "own points."
        )
        return Tally(by_checks, "checks", by_checks, note, diagnosis)
    deductions = _deductions(diagnosis, lost, prices, caps or {})
    # the points of the failing checks come back and each mistake's price goes instead; points not earned
    # elsewhere (a skipped check, extra credit not attempted) stay unearned
    charged, failing = round(sum(deductions.values()), 6), round(sum(lost.values()), 6)
    by_mistakes = round(max(0.0, by_checks + failing - charged), 6)
    # each cause carries its price whichever count stands, so every view can show what it costs by mistakes
    priced = [d.model_copy(update={"deduction": deductions.get(d.id, 0.0)}) for d in diagnosis]
    if by_mistakes == by_checks:
        note = (
            f"Counted by checks: the named causes explain every failing check, and counting each once at its "
            f"price gives the same score ({points(by_checks)})."
        )
        return Tally(by_checks, "checks", by_checks, note, priced)
    if by_mistakes < by_checks:
        note = (
            f"Counted by checks: the named causes explain every failing check, but their prices add up to "
            f"{points(charged)}, more than the {_pts(failing)} the failing checks cost, so counting by mistakes "
            f"would give {_pts(by_mistakes)}; the per-check sum ({_pts(by_checks)}) is higher and stands."
        )
        return Tally(by_checks, "checks", by_checks, note, priced)
    causes = [d for d in diagnosis if deductions.get(d.id)]
    note = (
        f"Counted by mistakes: {len(causes)} named cause{'s explain' if len(causes) != 1 else ' explains'} every "
        f"failing check, each charged once: {_sum(checks, diagnosis, deductions, by_mistakes)}; the per-check sum "
        f"would be {_pts(by_checks)}."
    )
    return Tally(by_mistakes, "mistakes", by_checks, note, priced)


def _sum(checks: list[CheckResult], diagnosis: list[Diagnosis], deductions: dict[str, float], total: float) -> str:
    """The score counted by mistakes as the sum a student can check against the rows (issue 53): the points
    available, less what was not earned on checks no cause charges (a skipped check, partial credit), less each
    cause's price (numbered as the views number the causes), plus the extra credit earned: '27 points, − 9 not
    earned (student_tests skipped), − 4 for cause (1), + 3 extra credit = 17 points'."""
    graded = [c for c in checks if not c.extra_credit]
    terms = [points(round(sum(c.max_score for c in graded), 6))]
    kept = [c for c in graded if c.status not in FAILING and c.score < c.max_score]
    if kept:
        why = ", ".join(f"{c.id} {c.status}" for c in kept)
        terms.append(f"− {_pts(round(sum(c.max_score - c.score for c in kept), 6))} not earned ({why})")
    terms += [f"− {_pts(deductions[d.id])} for cause ({k})" for k, d in enumerate(diagnosis, 1) if deductions.get(d.id)]
    extra = round(sum(c.score for c in checks if c.extra_credit), 6)
    if extra:
        terms.append(f"+ {_pts(extra)} extra credit")
    return f"{', '.join(terms)} = {points(total)}"


def provisional(note: str | None, error: DiagnosisError | None) -> str | None:
    """The scoring note of a grade whose diagnosis could not finish (issue 35): the score counts the causes that
    were found, by mistakes where they explain every failing check and by checks otherwise, and never less than
    the per-check sum; what the failed passes would have named is missing, so it is provisional."""
    if error is None:
        return note
    said = (
        f"Provisional: the diagnosis could not finish (the grader's own {error.type}, not a mistake of yours), so "
        "this score counts only the causes it found, and never less than the per-check sum; it may rise when the "
        "grader is fixed and the submission is graded again."
    )
    return f"{said} {note}" if note else said


def _deductions(
    diagnosis: list[Diagnosis], lost: dict[str, float], prices: Mapping[str, float], caps: Mapping[str, float]
) -> dict[str, float]:
    """Each cause's price; a cause that breaks no graded check costs nothing, and an unpriced one the points
    lost on the checks it explains that no priced cause explains (each check once). A check a crash stopped
    is the crash's alone: another cause that breaks its property (a mutation found where the head runs) is
    not charged for it, and never buys back points the crash left unobserved. An unpriced cause with a cap
    (a crash where the head runs elsewhere, issue 30) costs at most its cap."""
    crashed = {cid for d in diagnosis if d.kind == "crash" for cid in d.explains}

    def charged_to(d: Diagnosis) -> list[str]:
        return [cid for cid in d.explains if cid in lost and (d.kind == "crash" or cid not in crashed)]

    priced = {cid for d in diagnosis if d.id in prices for cid in charged_to(d)}
    charged: set[str] = set()
    out: dict[str, float] = {}
    for d in diagnosis:
        mine = charged_to(d)
        if not mine:
            out[d.id] = 0.0
        elif d.id in prices:
            out[d.id] = float(prices[d.id])
        else:
            own = [cid for cid in mine if cid not in priced and cid not in charged]
            charged.update(own)
            out[d.id] = round(min(sum(lost[cid] for cid in own), caps.get(d.id, float("inf"))), 6)
    return out


def _pts(x: float) -> str:
    return f"{x:g}"


def points(x: float) -> str:
    """'1 point', '2.5 points'."""
    return f"{x:g} point{'' if x == 1 else 's'}"


def listed(ids: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return ", ".join(ids[:-1]) + (" and " if len(ids) > 1 else "") + ids[-1]
