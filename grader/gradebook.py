"""One grade per student, as an LMS takes it (issue 54): the submission that counts, the instructor's overrides,
rounding, lateness, and the column shapes Canvas and Moodle import.

    outcomes (one per submission) -> pick (one per student; the others superseded) -> overrides -> rows -> CSV

A student who handed in twice has two graded submissions and one grade: the latest (by the export's
``created_at``, else the file's time, and the gradebook says which) or the best (``--pick best``). The overrides
file is the instructor's (``OUT/overrides.csv``: student, check or ``total``, points, reason); every export
applies it and the class overview lists each override with its reason. The views read what this module makes;
it reads only the result model and the rubric.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from grader.entries import Person
from grader.models import GradeResult
from grader.rubric import Rubric
from grader.statuses import SubmissionStatus

Pick = Literal["latest", "best"]
PICKS: tuple[Pick, ...] = ("latest", "best")
TOTAL = "total"  # an override of the whole grade, not of one check
OVERRIDE_COLUMNS = ("student", "check", "points", "reason")
FORMATS = ("plain", "canvas", "moodle")


class Submitted(Protocol):
    """One graded submission as the gradebook reads it (``grader.batch.Outcome`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def student(self) -> str: ...
    @property
    def status(self) -> SubmissionStatus: ...
    @property
    def result(self) -> GradeResult: ...
    @property
    def people(self) -> tuple[Person, ...]: ...
    @property
    def submitted_at(self) -> str: ...
    @property
    def dated_by(self) -> str: ...


class OverrideError(ValueError):
    """An overrides file that cannot be applied; the message names the file and the line."""


@dataclass(frozen=True)
class Override:
    """One line of the instructor's overrides file."""

    student: str
    check: str  # a check id, or TOTAL
    points: float
    reason: str
    line: int  # in the file, for the overview and error messages


@dataclass(frozen=True)
class Applied:
    """An override as it changed a grade: the check's (or the total's) points before and after."""

    override: Override
    before: float
    after: float


@dataclass(frozen=True)
class Grade:
    """One student's grade: the submission that counts, with the overrides applied."""

    student: str
    chosen: Submitted
    score: float  # the grade, overrides applied (not rounded)
    checks: dict[str, float]  # each check's points, overrides applied
    applied: tuple[Applied, ...] = ()
    superseded: tuple[Submitted, ...] = ()  # the student's other submissions, not counted
    due: datetime | None = None  # the rubric's deadline, when it has one

    @property
    def late(self) -> bool | None:
        """Whether the submission that counts was handed in after the deadline; None: no deadline or no date."""
        when = _parse_time(self.chosen.submitted_at)
        return None if self.due is None or when is None else when > self.due


@dataclass
class Gradebook:
    """The class's grades, one per student, and what was not counted."""

    pick: Pick
    grades: list[Grade]
    notes: list[str] = field(default_factory=list)  # overrides naming nobody, how submissions were dated

    @property
    def superseded(self) -> list[tuple[Submitted, Grade]]:
        return [(s, g) for g in self.grades for s in g.superseded]


def _when(s: Submitted) -> str:
    return s.submitted_at or ""


def pick(submissions: Sequence[Submitted], how: Pick) -> tuple[Submitted, list[Submitted]]:
    """The submission that counts among one student's, and the others (latest first). ``latest``: the last handed
    in (ties: the later id); ``best``: the highest score (ties: the later)."""
    if how == "best":
        ranked = sorted(submissions, key=lambda s: (s.result.score, _when(s), s.id), reverse=True)
    else:
        ranked = sorted(submissions, key=lambda s: (_when(s), s.id), reverse=True)
    return ranked[0], ranked[1:]


def build(
    submissions: Sequence[Submitted], rubric: Rubric, *, how: Pick = "latest", overrides: Sequence[Override] = ()
) -> Gradebook:
    """One grade per student of ``submissions``: the one ``how`` picks, with ``overrides`` applied."""
    by_student: dict[str, list[Submitted]] = {}
    for s in submissions:
        by_student.setdefault(s.student, []).append(s)
    due = _due(rubric)
    book = Gradebook(how, [])
    for student in sorted(by_student):
        chosen, others = pick(by_student[student], how)
        mine = [o for o in overrides if o.student.lower() == student]
        score, checks, applied = _apply(chosen.result, mine)
        book.grades.append(Grade(student, chosen, score, checks, tuple(applied), tuple(others), due))
    known = set(by_student)
    for o in overrides:
        if o.student.lower() not in known:
            book.notes.append(f"override on line {o.line} names no student of this class ({o.student!r}): not applied")
    dated = {s.dated_by for g in book.grades if g.superseded for s in (g.chosen, *g.superseded)}
    if how == "latest" and "file time" in dated:
        book.notes.append(
            "some students handed in more than once with no export date: the latest is the one whose files were "
            "written last (the file's time)"
        )
    return book


def _due(rubric: Rubric) -> datetime | None:
    due = rubric.gradebook.due
    if due is None:
        return None
    return due if due.tzinfo is not None else due.replace(tzinfo=UTC)


def _apply(result: GradeResult, overrides: Sequence[Override]) -> tuple[float, dict[str, float], list[Applied]]:
    """The grade and check points with ``overrides`` applied: a check's override sets its points and moves the
    grade by the difference; a total's sets the grade (after every check's)."""
    checks = {c.id: c.score for c in result.checks}
    score = result.score
    applied = []
    for o in sorted(overrides, key=lambda o: (o.check == TOTAL, o.line)):
        if o.check == TOTAL:
            applied.append(Applied(o, score, o.points))
            score = o.points
            continue
        before = checks.get(o.check, 0.0)
        checks[o.check] = o.points
        score += o.points - before
        applied.append(Applied(o, before, o.points))
    return score, checks, applied


# -- the overrides file ----------------------------------------------------------------------------------------


def read_overrides(path: Path, rubric: Rubric) -> list[Override]:
    """The overrides in ``path`` (CSV with a header: student, check, points, reason); none when it is absent."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise OverrideError(f"{path}: {exc}") from None
    rows = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(rows, [])]
    missing = [c for c in OVERRIDE_COLUMNS if c not in header]
    if missing:
        raise OverrideError(
            f"{path}: line 1 must name the columns {', '.join(OVERRIDE_COLUMNS)} (missing: {', '.join(missing)})"
        )
    checks = [cid for cid, rc in rubric.checks.items() if rc.enabled]
    found = []
    for number, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        cells = dict(zip(header, (c.strip() for c in row), strict=False))
        student, check, points, reason = (cells.get(c, "") for c in OVERRIDE_COLUMNS)
        where = f"{path}, line {number}"
        if not student:
            raise OverrideError(f"{where}: no student")
        if check != TOTAL and check not in checks:
            raise OverrideError(f"{where}: check {check!r} is neither {TOTAL!r} nor a check of the rubric")
        try:
            value = float(points)
        except ValueError:
            raise OverrideError(f"{where}: points must be a number, got {points!r}") from None
        if not reason:
            raise OverrideError(f"{where}: give the reason (it is shown in the class overview)")
        found.append(Override(student, check, value, reason, number))
    return found


# -- the exports -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of an export: one person (a group's submission gives each member the grade)."""

    student: str
    person: Person
    score: str  # rounded as the rubric says
    max_score: str
    late: str  # "yes", "no" or "" (no deadline, or no date)
    status: str
    submission: str  # the report folder that counts
    submitted_at: str
    note: str  # the overrides' reasons


def rows(book: Gradebook, rubric: Rubric) -> list[Row]:
    """Every person's export line, the score rounded (and capped) as the rubric's ``[gradebook]`` says."""
    settings = rubric.gradebook
    out = []
    for g in book.grades:
        top = g.chosen.result.max_score
        score = min(g.score, top) if settings.extra_credit == "cap" else g.score
        late = "" if g.late is None else ("yes" if g.late else "no")
        note = "; ".join(f"{a.override.check}: {a.override.reason}" for a in g.applied)
        for person in g.chosen.people or (Person(sid=""),):
            out.append(
                Row(
                    g.student,
                    person,
                    _rounded(score, settings.decimals),
                    _rounded(top, settings.decimals),
                    late,
                    g.chosen.status,
                    g.chosen.id,
                    g.chosen.submitted_at,
                    note,
                )
            )
    return out


def _rounded(x: float, decimals: int) -> str:
    text = f"{round(x + 0.0, decimals):.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def export(book: Gradebook, rubric: Rubric, how: str = "plain") -> str:
    """The gradebook as CSV: ``plain`` (every field), ``canvas`` or ``moodle`` (the columns each imports)."""
    lines = rows(book, rubric)
    title = rubric.gradebook.title or rubric.name
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if how == "canvas":
        # Canvas's gradebook import: it matches a student by SIS User ID or SIS Login ID (the export's SID and
        # e-mail); an unknown column would become a new assignment, so there is no other.
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", title])
        writer.writerow(["Points Possible", "", "", "", "", lines[0].max_score if lines else ""])
        for r in lines:
            writer.writerow([r.person.name or r.student, "", r.person.sid or r.student, r.person.email, "", r.score])
    elif how == "moodle":
        # Moodle's CSV grade import: map "ID number" (or "Email address") to the user, the title to the grade item;
        # "Feedback" is the grade's feedback.
        writer.writerow(["Full name", "ID number", "Email address", title, "Feedback"])
        for r in lines:
            feedback = "; ".join(x for x in (_status_words(r.status), "late" if r.late == "yes" else "") if x)
            writer.writerow([r.person.name, r.person.sid or r.student, r.person.email, r.score, feedback])
    elif how == "plain":
        writer.writerow(
            ["student", "name", "email", "sid", "score", "max_score", "late", "status", "submission", "submitted_at"]
            + ["override"]
        )
        for r in lines:
            p = r.person
            writer.writerow(
                [r.student, p.name, p.email, p.sid, r.score, r.max_score, r.late, r.status, r.submission]
                + [r.submitted_at, r.note]
            )
    else:
        raise ValueError(f"unknown gradebook format {how!r} (known: {', '.join(FORMATS)})")
    return buf.getvalue()


def _status_words(status: str) -> str:
    return "" if status == "graded" else status.replace("_", " ")


def superseded_csv(book: Gradebook) -> str:
    """The submissions not counted: each with the student, the one counted instead, and both dates."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["submission", "student", "score", "submitted_at", "dated_by", "counted_instead", "pick"])
    for s, g in book.superseded:
        writer.writerow(
            [s.id, g.student, f"{round(s.result.score, 4):g}", s.submitted_at, s.dated_by, g.chosen.id, book.pick]
        )
    return buf.getvalue()


def _parse_time(text: str) -> datetime | None:
    """An ISO 8601 time as :mod:`grader.entries` writes it, or None."""
    try:
        when = datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
    return when if when is None or when.tzinfo is not None else when.replace(tzinfo=UTC)
