"""The class overview of a batch: one self-contained HTML page for the instructor.

The students to look at first (the lowest grades, provisional ones, hostile attempts; a table that sorts by any
column, each row linked to the report), score histogram, pass rate per check, the most common root causes (a
crash, a change to the correct head, a known bug: counted once per submission under each student's own words,
not as exact sets of failed checks), provisional grades, the slowest submissions and those that timed out,
raised or could not be read, what was not graded or not counted (superseded submissions), the instructor's
overrides, and a link to every report. It reads outcomes through :class:`Graded` and the gradebook
(:mod:`grader.gradebook`), so it never imports the batch runner (which imports it); the status words come from
:mod:`grader.statuses`. Python computes every number and bar; the template (``summary.html.j2``, sharing the
report's stylesheet) only lays them out, with autoescaping on. Its one script (sorting) is pinned by its hash in
the page's Content-Security-Policy, which allows nothing else. A pure function of the outcomes: no timestamp,
so the same grades give the same page.
"""

from __future__ import annotations

import base64
import hashlib
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote

import jinja2

from grader.entries import Left
from grader.gradebook import TOTAL, Gradebook
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
PROVISIONAL = ("timeout", "grader_error")  # a grade to look at before trusting it (a busy machine, the grader's bug)
TOP_PATTERNS = 10
TOP_SLOWEST = 10
LOWEST = 10  # the lowest grades always listed among the students to look at first
EXAMPLES = 6
# Sorts the students-to-look-at-first table by the column the address names (#sort=score, #sort=-student): the
# headers are links to those addresses, so a sort can be bookmarked, and the page works without it (lowest first).
SORT_SCRIPT = """(function () {
  function sortBy(spec) {
    var table = document.getElementById("help-table");
    if (!table) return;
    var down = spec.charAt(0) === "-", key = down ? spec.slice(1) : spec;
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var numeric = key === "score" || key === "flags";
    rows.sort(function (a, b) {
      var x = a.getAttribute("data-" + key) || "", y = b.getAttribute("data-" + key) || "";
      var c = numeric ? parseFloat(x) - parseFloat(y) : (x < y ? -1 : x > y ? 1 : 0);
      if (c === 0) c = a.getAttribute("data-student") < b.getAttribute("data-student") ? -1 : 1;
      return down ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    table.setAttribute("data-sorted", spec);
  }
  function fromAddress() {
    var m = /^#sort=(-?[a-z]+)$/.exec(window.location.hash);
    if (m) sortBy(m[1]);
  }
  window.addEventListener("hashchange", fromAddress);
  fromAddress();
})();"""
SORT_SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SORT_SCRIPT.encode()).digest()).decode()


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
    """Root causes, most common first, each counted once per readable submission it was found in, under the
    words its own report says: one cause id whose words differ between students (a crash: what raised, and how
    many checks it stopped) is one row per wording, kept together, never one student's words for all.

    A submission that failed checks with no cause named is counted under 'no cause named', so the
    table accounts for every failing submission.
    """
    readable = [o for o in outcomes if o.status not in UNREADABLE]
    seen: dict[tuple[str, str], tuple[str, str, set[str]]] = {}
    for o in readable:
        for d in o.result.diagnosis:
            seen.setdefault((d.id, d.title), (d.hint, d.kind, set()))[2].add(o.id)
        if not o.result.diagnosis and any(wording.is_problem(c) for c in o.result.checks):
            key = ("", "No cause named")
            seen.setdefault(key, ("Read the failing checks of these reports.", "", set()))[2].add(o.id)
    total = len(readable) or 1
    by_id = Counter[str]()
    for (cid, _), (_, _, ids) in seen.items():
        by_id[cid] += len(ids)
    ranked = sorted(seen.items(), key=lambda kv: (-by_id[kv[0][0]], kv[0][0] == "", kv[0][0], -len(kv[1][2]), kv[0][1]))
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
        for (cid, title), (hint, kind, ids) in ranked
    ]


@dataclass(frozen=True)
class Help:
    """A student to look at first: why, and what to sort by."""

    student: str
    href: str
    who: str
    score: str  # "13 / 100"
    percent: float
    status: str
    reasons: list[str]  # "lowest 10", "provisional: timeout", "hostile: 20 reads outside its folder"
    flags: int  # how many reasons besides being among the lowest (sort key)


@dataclass(frozen=True)
class Overridden:
    student: str
    href: str
    what: str  # a check id, or "total"
    before: str
    after: str
    reason: str


@dataclass(frozen=True)
class Superseded:
    id: str
    href: str
    student: str
    score: str
    submitted_at: str
    dated_by: str
    counted: str
    counted_href: str


@dataclass(frozen=True)
class Attempted:
    id: str
    href: str
    words: str
    total: int


@dataclass
class Counted:
    """What the gradebook made of the outcomes, as the page shows it."""

    students: int
    pick: str
    help: list[Help] = field(default_factory=list)
    superseded: list[Superseded] = field(default_factory=list)
    overrides: list[Overridden] = field(default_factory=list)


def _graded_outcomes(outcomes: Sequence[Graded], book: Gradebook | None) -> list[tuple[str, Graded, float]]:
    """(student, the submission that counts, the grade) for every student: the gradebook's, or one per outcome."""
    if book is None:
        return [(o.id, o, o.result.score) for o in outcomes]
    return [(g.student, g.chosen, g.score) for g in book.grades]  # type: ignore[misc]


def help_rows(outcomes: Sequence[Graded], book: Gradebook | None) -> list[Help]:
    """The students to look at first, lowest grade first: the ``LOWEST`` lowest, and every one whose grade is
    provisional, whose code made hostile attempts, whose submission did not run to a verdict or was overridden."""
    graded = _graded_outcomes(outcomes, book)
    overridden = {g.student for g in book.grades if g.applied} if book else set()
    order = sorted(graded, key=lambda x: (x[2] / x[1].result.max_score if x[1].result.max_score else 0.0, x[0]))
    lowest = {student for student, _, _ in order[:LOWEST]}
    rows = []
    for student, o, score in order:
        reasons = []
        if o.status in PROVISIONAL:
            reasons.append(f"provisional: {o.status.replace('_', ' ')}")
        elif o.status != "graded":
            reasons.append(o.status.replace("_", " "))
        if o.result.attempts.total:
            reasons.append(f"hostile attempts: {o.result.attempts.words()}")
        if student in overridden:
            reasons.append("overridden")
        flags = len(reasons)
        if student in lowest:
            reasons.insert(0, f"among the {LOWEST} lowest")
        if not reasons:
            continue
        top = o.result.max_score
        rows.append(
            Help(
                student,
                _href(o.id),
                ", ".join(o.submitters),
                f"{wording.fmt_points(score)} / {wording.fmt_points(top)}",
                round(100 * score / top, 1) if top else 0.0,
                o.status,
                reasons,
                flags,
            )
        )
    return rows


def counted(outcomes: Sequence[Graded], book: Gradebook | None) -> Counted:
    """The gradebook's side of the page: students, superseded submissions, overrides."""
    if book is None:
        return Counted(len(outcomes), "latest", help_rows(outcomes, None))
    superseded = [
        Superseded(
            s.id,
            _href(s.id),
            g.student,
            f"{wording.fmt_points(s.result.score)} / {wording.fmt_points(s.result.max_score)}",
            s.submitted_at[:19].replace("T", " "),
            s.dated_by,
            g.chosen.id,
            _href(g.chosen.id),
        )
        for s, g in book.superseded
    ]
    overrides = [
        Overridden(
            g.student,
            _href(g.chosen.id),
            a.override.check if a.override.check != TOTAL else "total",
            wording.fmt_points(a.before),
            wording.fmt_points(a.after),
            a.override.reason,
        )
        for g in book.grades
        for a in g.applied
    ]
    return Counted(len(book.grades), book.pick, help_rows(outcomes, book), superseded, overrides)


def attempted(outcomes: Sequence[Graded]) -> list[Attempted]:
    """The submissions whose code tried what it does not own, most attempts first (instructor only)."""
    found = [o for o in outcomes if o.result.attempts.total]
    return [
        Attempted(o.id, _href(o.id), o.result.attempts.words(), o.result.attempts.total)
        for o in sorted(found, key=lambda o: (-o.result.attempts.total, o.id))
    ]


def _template() -> jinja2.Template:
    return jinja_environment().get_template("summary.html.j2")


def render_summary(
    outcomes: Sequence[Graded],
    rubric: Rubric,
    *,
    notes: Sequence[str] = (),
    book: Gradebook | None = None,
    left: Sequence[Left] = (),
    pending: Sequence[str] = (),
) -> str:
    """The class overview page for ``outcomes`` graded with ``rubric``; ``book``: the gradebook made of them (one
    grade per student, overrides applied; default: every outcome its own student's), ``left``: the entries of the
    folder not graded, ``pending``: the students not graded yet (a run under way or interrupted)."""
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
        provisional=[_row(o) for o in outcomes if o.status in PROVISIONAL],
        rows=[_row(o) for o in outcomes],
        notes=list(notes) + _absent_note(readable),
        counted=counted(outcomes, book),
        attempted=attempted(outcomes),
        left=list(left),
        pending=list(pending),
        lowest=LOWEST,
        script=SORT_SCRIPT,
        script_hash=SORT_SCRIPT_HASH,
    )


def _absent_note(readable: Sequence[Graded]) -> list[str]:
    """The Linux protections that were absent where the class was graded (a batch run on Windows)."""
    absent = list(dict.fromkeys(p for o in readable for p in o.result.absent_protections))
    if not absent:
        return []
    return ["These submissions ran without protections the Linux sandbox has: " + "; ".join(absent) + "."]
