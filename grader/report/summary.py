"""The class overview of a batch: one self-contained HTML page for the instructor.

Score histogram, pass rate per check, the most common root causes (a crash, a change to the correct
head, a known bug: counted once per submission, not as exact sets of failed checks), the slowest
submissions and those that timed out, raised or could not be read, and a link to every report. It reads
outcomes through :class:`Graded`, so it never imports the batch runner (which imports it); the status
words come from :mod:`grader.statuses`. Python computes every number and bar; the template
(``summary.html.j2``, sharing the report's stylesheet) only lays them out, with autoescaping on. A pure
function of the outcomes: no timestamp, so the same grades give the same page.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

import jinja2

from grader.models import CheckResult, GradeResult
from grader.report import wording
from grader.report.html import jinja_environment
from grader.rubric import Rubric
from grader.statuses import RAISED, SUBMISSION_STATUS_MEANING, SUBMISSION_STATUSES, SubmissionStatus


class Graded(Protocol):
    """One submission's row as the overview reads it (``grader.batch.Outcome`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> SubmissionStatus: ...
    @property
    def result(self) -> GradeResult: ...
    @property
    def submitters(self) -> tuple[str, ...]: ...


UNREADABLE = ("invalid", "grader_error")  # no check could run: left out of per-check statistics
PROBLEMS = ("timeout", *RAISED, "invalid", "grader_error")
TOP_PATTERNS = 10
TOP_SLOWEST = 10
EXAMPLES = 6


@dataclass(frozen=True)
class Bin:
    label: str
    count: int
    x: int
    y: int
    height: int


@dataclass(frozen=True)
class CheckRow:
    id: str
    title: str
    points: str
    passed: int
    ran: int
    rate: float  # percent of readable submissions that passed
    others: str  # "3 failed, 1 timeout"


@dataclass(frozen=True)
class Cause:
    id: str
    title: str
    hint: str
    kind: str
    count: int
    share: float
    examples: list[tuple[str, str]]  # (id, href)


@dataclass(frozen=True)
class Row:
    id: str
    href: str
    who: str
    score: str
    percent: float
    scoring: str  # "mistakes" or "checks": how the score was counted
    scoring_note: str  # the result's note, shown on hover
    status: str
    duration: str
    headline: str


def _href(sid: str) -> str:
    return quote(sid, safe="@+-._") + "/report.html"


def _first_problem(o: Graded) -> str:
    problem = next((c for c in o.result.checks if wording.is_problem(c)), None)
    if problem is None:
        return ""
    lines = [ln.strip() for ln in problem.message.split("\n") if ln.strip()]
    text = " ".join(lines[:2]) if lines and lines[0].endswith(":") else wording.headline(problem)
    return f"{problem.id}: {text[:300]}"


def _row(o: Graded) -> Row:
    r = o.result
    return Row(
        id=o.id,
        href=_href(o.id),
        who=", ".join(o.submitters),
        score=f"{wording.fmt_points(r.score)} / {wording.fmt_points(r.max_score)}",
        percent=round(r.percent, 1),
        scoring=r.scoring,
        scoring_note=wording.scoring_line(r) or "",
        status=o.status,
        duration=f"{r.duration_s:.1f} s",
        headline=_first_problem(o),
    )


def histogram(percents: Sequence[float], *, width: int = 520, height: int = 150) -> list[Bin]:
    """Ten bins of 10 percentage points (the last one holds 90% and up), as SVG bar geometry."""
    counts = [0] * 10
    for p in percents:
        counts[min(int(p // 10), 9) if p >= 0 else 0] += 1
    top = max(counts) or 1
    slot = width // 10
    bins = []
    for k, n in enumerate(counts):
        h = round((height - 20) * n / top)
        label = f"{10 * k}–{10 * k + 10}%" if k < 9 else "90%+"  # extra credit can pass 100
        bins.append(Bin(label, n, k * slot, height - 20 - h, h))
    return bins


def _check_rows(outcomes: Sequence[Graded], rubric: Rubric) -> list[CheckRow]:
    readable = [o for o in outcomes if o.status not in UNREADABLE]
    rows = []
    for cid, rc in rubric.checks.items():
        if not rc.enabled:
            continue
        found: list[CheckResult] = [c for o in readable for c in o.result.checks if c.id == cid]
        tally = Counter(c.status for c in found)
        passed = tally.pop("passed", 0)
        others = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        title = found[0].title if found else cid.replace("_", " ")
        points = f"{wording.fmt_points(rc.points)}{' extra' if rc.extra_credit else ''}"
        rate = round(100 * passed / len(found), 1) if found else 0.0
        rows.append(CheckRow(cid, title, points, passed, len(found), rate, others))
    return rows


def causes(outcomes: Sequence[Graded]) -> list[Cause]:
    """Root causes, most common first, each counted once per readable submission it was found in.

    A submission that failed checks with no cause named is counted under 'no cause named', so the
    table accounts for every failing submission.
    """
    readable = [o for o in outcomes if o.status not in UNREADABLE]
    seen: dict[str, tuple[str, str, str, set[str]]] = {}
    for o in readable:
        for d in o.result.diagnosis:
            seen.setdefault(d.id, (d.title, d.hint, d.kind, set()))[3].add(o.id)
        if not o.result.diagnosis and any(wording.is_problem(c) for c in o.result.checks):
            seen.setdefault("", ("No cause named", "Read the failing checks of these reports.", "", set()))[3].add(o.id)
    total = len(readable) or 1
    ranked = sorted(seen.items(), key=lambda kv: (-len(kv[1][3]), kv[0] == "", kv[1][0]))
    return [
        Cause(
            cid,
            title,
            hint,
            kind,
            len(ids),
            round(100 * len(ids) / total, 1),
            [(i, _href(i)) for i in sorted(ids)[:EXAMPLES]],
        )
        for cid, (title, hint, kind, ids) in ranked
    ]


def _template() -> jinja2.Template:
    return jinja_environment().get_template("summary.html.j2")


def render_summary(outcomes: Sequence[Graded], rubric: Rubric, *, notes: Sequence[str] = ()) -> str:
    """The class overview page for ``outcomes`` graded with ``rubric``."""
    outcomes = sorted(outcomes, key=lambda o: o.id)
    readable = [o for o in outcomes if o.status not in UNREADABLE]
    percents = [o.result.percent for o in readable]
    stats = {
        "submissions": len(outcomes),
        "readable": len(readable),
        "mean": round(statistics.fmean(percents), 1) if percents else None,
        "median": round(statistics.median(percents), 1) if percents else None,
        "full": sum(o.result.score >= o.result.max_score > 0 for o in readable),
        "by_mistakes": sum(o.result.scoring == "mistakes" for o in readable),
    }
    by_status = [(s, sum(o.status == s for o in outcomes), SUBMISSION_STATUS_MEANING[s]) for s in SUBMISSION_STATUSES]
    slowest = sorted(outcomes, key=lambda o: (-o.result.duration_s, o.id))[:TOP_SLOWEST]
    return _template().render(
        rubric=rubric.name,
        stats=stats,
        by_status=by_status,
        bins=histogram(percents),
        checks=_check_rows(outcomes, rubric),
        causes=causes(outcomes),
        slowest=[_row(o) for o in slowest],
        problems=[_row(o) for o in outcomes if o.status in PROBLEMS],
        rows=[_row(o) for o in outcomes],
        notes=list(notes) + _absent_note(readable),
    )


def _absent_note(readable: Sequence[Graded]) -> list[str]:
    """The Linux protections that were absent where the class was graded (a batch run on Windows)."""
    absent = list(dict.fromkeys(p for o in readable for p in o.result.absent_protections))
    if not absent:
        return []
    return ["These submissions ran without protections the Linux sandbox has: " + "; ".join(absent) + "."]
