"""Grade a whole class: every entry of a folder, in parallel on a warm worker pool, resumable.

    SUBMISSIONS_DIR -> entries (one per student) -> fingerprint (skip if unchanged)
        -> grade on a pool slot -> OUT/<id>/result.json + report.html -> grades.csv + summary.html

An entry is a folder, a ``.py``, a ``.zip`` or a ``.ipynb``; its name is the student id. A Gradescope
"Export Submissions" folder (``submission_<n>/`` folders beside ``submission_metadata.yml``) is read
too, with the submitter's SID (or email) as the id (:mod:`grader.entries`). Every entry of the folder is
graded or listed as not graded with its reason. A student who handed in twice is graded twice and counted
once (:mod:`grader.gradebook`: grades.csv has one row per student, superseded.csv the others). The class
files are written as the run goes, so an interrupted run leaves them too. The heavy work happens in the
pool's workers; the grader threads here only send inputs and compare, so one thread per slot keeps every
slot busy, and a hanging submission holds only its own slot, for at most its own time budget.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import html
import io
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

import grader
from grader import gradebook
from grader.entries import GRADESCOPE_METADATA as GRADESCOPE_METADATA  # re-exported
from grader.entries import KINDS as KINDS
from grader.entries import RESERVED as RESERVED
from grader.entries import Entry, LayoutError, Left, Person, Survey, survey
from grader.entries import discover as discover
from grader.entries import safe_id as safe_id
from grader.exports import result_json, write_atomic
from grader.gradebook import Gradebook, Override, OverrideError, Pick
from grader.models import CheckResult, GradeResult, Status
from grader.rubric import Rubric
from grader.statuses import LEGACY_STATUSES, SUBMISSION_STATUSES, SubmissionStatus
from grader.statuses import SUBMISSION_STATUS_MEANING as SUBMISSION_STATUS_MEANING  # re-exported

# Checks that need causal_self_attention but can pass without an answer from it: forbidden_api judges the
# source alone when a traced call raises. The others stop with an error when the head raises.
ANSWER_OPTIONAL = frozenset({"forbidden_api"})
HEAD = "causal_self_attention"
STATE_FILE = ".fingerprint"  # OUT/<id>/.fingerprint: what the stored grade was made of (README, "Regrading")
BATCH_STATE = ".batch.json"  # OUT's record of the submissions folder (grader/similarity.py reads it)
OVERRIDES = "overrides.csv"  # the instructor's, in OUT (grader/gradebook.py)
RETRY = {"timeouts": "timeout", "invalid": "invalid"}  # --retry WHAT: the stored status it regrades
# Parts of the rubric that change no grade, or change only some (packages: see _load_done): not fingerprinted.
_NOT_FINGERPRINTED = ("gradebook", "packages")


# -- entries (grader/entries.py) ----------------------------------------------------------------------


def locate(path: Path, module: str = "attention_head") -> Path:
    """What to grade inside a submission folder: the folder itself when it holds ``module.py``;
    otherwise its single notebook, zip or Python file, or the one folder it wraps."""
    path = Path(path)
    if not path.is_dir() or (path / f"{module}.py").is_file():
        return path
    items = [p for p in sorted(path.iterdir()) if not p.name.startswith((".", "__")) and not p.is_symlink()]
    files = [p for p in items if p.is_file()]
    dirs = [p for p in items if p.is_dir()]
    if not files and len(dirs) == 1:
        return locate(dirs[0], module)
    for suffix in (".ipynb", ".zip", ".py"):
        found = [p for p in files if p.suffix == suffix]
        if len(found) == 1:
            return found[0]
    return path  # prepare() explains what is missing


# -- fingerprints (resume) -------------------------------------------------------------------------


def content_hash(path: Path) -> str:
    """SHA-256 over a file's bytes, or over every regular file (path and bytes) under a folder,
    leaving out hidden and cache folders (``.git``, ``__pycache__``), which are never graded."""
    h = hashlib.sha256()
    path = Path(path)
    files = [path]
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and not p.is_symlink()
            and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(path).parts)
        )
    for f in files:
        h.update(f.relative_to(path).as_posix().encode() if f != path else b"")
        h.update(b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def rubric_hash(rubric: Rubric) -> str:
    """What of the rubric a grade is made of: everything but how it is exported and the course packages (a
    package added regrades only the submissions that lacked one, :func:`_load_done`)."""
    data = rubric.model_dump(mode="json", exclude=set(_NOT_FINGERPRINTED))
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def fingerprint(entry: Entry, rubric: Rubric) -> str:
    """Changes when the submission, the rubric (points, limits, seed...) or the grader version changes; not when
    only the rubric's ``[gradebook]`` or ``packages`` change (see :func:`_load_done`)."""
    parts = {
        "grader": grader.__version__,
        "rubric": rubric_hash(rubric),
        "submission": content_hash(entry.path),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


# -- outcomes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One submission's row in the class overview."""

    id: str
    source: str  # the entry's name in SUBMISSIONS_DIR
    status: SubmissionStatus
    result: GradeResult
    submitters: tuple[str, ...] = ()
    resumed: bool = False
    student: str = ""  # whose ("" -> the id): one grade per student (grader/gradebook.py)
    people: tuple[Person, ...] = ()
    submitted_at: str = ""
    dated_by: str = ""

    def __post_init__(self) -> None:
        if not self.student:
            object.__setattr__(self, "student", self.id.lower())

    @classmethod
    def of(cls, entry: Entry, status: SubmissionStatus, result: GradeResult, *, resumed: bool = False) -> Outcome:
        return cls(
            entry.id,
            entry.path.name,
            status,
            result,
            entry.submitters,
            resumed,
            entry.student,
            entry.people,
            entry.submitted_at,
            entry.dated_by,
        )


def submission_status(result: GradeResult) -> SubmissionStatus:
    """The class overview's word for a graded result (meanings in :data:`SUBMISSION_STATUS_MEANING`)."""
    if result.diagnosis_error is not None:  # the grader's own error (issue 35): provisional, regraded next run
        return "grader_error"
    ran = [c for c in result.checks if c.status != "skipped"]
    if any(c.status == "timeout" for c in ran):
        return "timeout"
    if not any(c.status == "error" for c in ran):
        return "graded"
    from grader.checks import CHECKS  # late: the registry imports the checks (and torch)

    if any(s.kind == "not_imported" for c in ran for s in c.stopped):
        return "did_not_import"
    calls = [c for c in ran if c.id in CHECKS and HEAD in CHECKS[c.id].needs and c.id not in ANSWER_OPTIONAL]
    if calls and all(c.status == "error" for c in calls):
        return "raised_every_call"
    return "raised_in_some_checks"


def unreadable_result(label: str, rubric: Rubric, message: str, *, status: Status = "failed") -> GradeResult:
    """A result for a submission no check could run on: every check gets ``status`` and ``message``.

    ``failed`` when the submission cannot be read (the student's to fix), ``error`` when the grader
    broke. Each check is still listed, never silently dropped; an extra-credit one, which costs nothing, is
    ``skipped`` (it was never failed, issue 54).
    """
    checks = []
    for cid, rc in rubric.checks.items():
        if not rc.enabled:
            continue
        checks.append(
            CheckResult(
                id=cid,
                title=cid.replace("_", " "),
                cites="",
                status="skipped" if rc.extra_credit else status,
                score=0.0,
                max_score=rc.points,
                extra_credit=rc.extra_credit,
                visibility=rc.visibility,
                message=message,
                seed=rubric.seed,
                duration_s=0.0,
            )
        )
    return GradeResult(
        submission=label,
        seed=rubric.seed,
        score=0.0,
        max_score=sum(c.max_score for c in checks if not c.extra_credit),
        checks=checks,
        rubric=rubric.name,
        duration_s=0.0,
        notes=[message.split("\n", 1)[0]],
    )


def student_label(entry: Path, target: Path, module: str) -> str:
    """The submission as its student names it, for the reports they read (issue 54): the file they wrote, never the
    instructor's path (``class/u1002``), so that ``Reproduce: grade attention_head.py --only ...`` is a command they
    can run. A folder or a ``.py`` entry holds ``attention_head.py`` (an LMS renames the file to the student's id);
    a notebook or a zip keeps the name it was handed in with."""
    if target.is_file() and (target != entry or target.suffix != ".py"):
        return target.name
    return f"{module}.py"


def grade_entry(
    entry: Entry, rubric: Rubric, pool: Any, tests_pool: Any = None
) -> tuple[SubmissionStatus, GradeResult]:
    """Grade one entry; every failure (the submission's or the grader's) becomes a result."""
    from grader.runner import grade
    from grader.submission import SubmissionError

    target = locate(entry.path, rubric.entry_points.module)
    label = student_label(entry.path, target, rubric.entry_points.module)
    started = time.perf_counter()
    try:
        result = grade(
            target,
            rubric,
            pool=pool,
            tests_pool=tests_pool,
            label=label,
            parallel=False,  # every slot grades a submission of its own already
            tests_beside=entry.path.is_dir(),  # a file in the class folder: its neighbours are classmates'
        )
    except SubmissionError as exc:
        return "invalid", unreadable_result(label, rubric, f"Your submission could not be read: {exc}")
    except Exception as exc:  # the grader's own failure: reported, never fatal to the batch
        detail = "".join(traceback.format_exception(exc)[-4:]).rstrip()
        message = f"Internal grader error (not your fault; it will be rerun): {type(exc).__name__}: {exc}"
        result = unreadable_result(label, rubric, f"{message}\n{detail}", status="error")
        return "grader_error", result.model_copy(update={"duration_s": round(time.perf_counter() - started, 3)})
    return submission_status(result), result


# -- the batch -----------------------------------------------------------------------------------


@dataclass
class BatchReport:
    outcomes: list[Outcome]
    notes: list[str] = field(default_factory=list)
    graded: int = 0
    resumed: int = 0
    wall_s: float = 0.0
    left: list[Left] = field(default_factory=list)  # entries of the folder not graded, each with its reason
    book: Gradebook | None = None  # one grade per student

    @property
    def errors(self) -> int:
        return sum(o.status == "grader_error" for o in self.outcomes)

    @property
    def provisional(self) -> list[Outcome]:
        """Grades the instructor should look at before trusting them: a timeout (a busy machine can cause one) or
        the grader's own error."""
        return [o for o in self.outcomes if o.status in ("timeout", "grader_error")]


class BatchUsageError(ValueError):
    """A batch asked for something its class folder does not hold (``--regrade`` of no one): a usage error."""


def _load_done(entry: Entry, out: Path, fp: str, rubric: Rubric, retry: frozenset[str] = frozenset()) -> Outcome | None:
    """The stored outcome of ``entry`` if it was graded with the same fingerprint, its status is not one
    ``retry`` regrades, and no course package it lacked has been added to the rubric since."""
    try:
        state = json.loads((out / entry.id / STATE_FILE).read_text(encoding="utf-8"))
        status = state.get("status")
        if state.get("fingerprint") != fp or (status not in SUBMISSION_STATUSES and status not in LEGACY_STATUSES):
            return None
        if status in retry or _packages_matter(state, rubric):
            return None
        result = GradeResult.model_validate_json((out / entry.id / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError, AttributeError):
        return None
    if status in LEGACY_STATUSES:  # an older grader's word: classify the stored result again
        status = submission_status(result)
    return Outcome.of(entry, status, result, resumed=True)


def _packages_matter(state: dict[str, Any], rubric: Rubric) -> bool:
    """Whether the rubric's course packages changed since the grade in a way that can change it: one was
    removed (any submission may have used it), or one was added and the submission lacked a package."""
    then, now = set(state.get("packages", [])), set(rubric.packages)
    if then == now:
        return False
    return bool(then - now) or bool(state.get("lacked_package"))


def _store(outcome: Outcome, out: Path, fp: str, rubric: Rubric) -> None:
    """result.json and report.html first, the fingerprint last: an interrupted write is regraded."""
    from grader.report.html import render_html

    folder = out / outcome.id
    state = folder / STATE_FILE
    state.unlink(missing_ok=True)
    write_atomic(folder / "result.json", result_json(outcome.result))
    try:
        page = render_html(outcome.result)
    except Exception as exc:  # a report bug must not lose the verdicts, which are already saved
        page = f"<!doctype html><title>{outcome.id}</title><pre>report failed: {html.escape(repr(exc))}</pre>"
    write_atomic(folder / "report.html", page)
    if outcome.status != "grader_error":  # a grader error is retried on the next run
        lacked = any(d.id.startswith("package:") for d in outcome.result.diagnosis)
        record: dict[str, object] = {"fingerprint": fp, "status": outcome.status, "source": outcome.source}
        record |= {"packages": sorted(rubric.packages), "lacked_package": lacked}
        write_atomic(state, json.dumps(record) + "\n")


def grades_csv(
    outcomes: list[Outcome],
    rubric: Rubric,
    *,
    book: Gradebook | None = None,
    left: list[Left] | None = None,
    pending: list[str] | None = None,
) -> str:
    """One row per student: id, score, max_score, scoring, score_by_checks, one column of points per check
    (rubric order), status, the submission counted, when it was handed in, and a note (an override's reason).
    ``score`` is the grade (``GradeResult.score``, the instructor's overrides applied); when ``scoring`` is
    "mistakes" it is more than ``score_by_checks``, the sum of the check columns (each cause was charged once).
    A student whose submissions are not graded yet is ``pending``; an entry of the folder that is no
    submission is ``not_graded``, its reason in the note."""
    book = book or gradebook.build(outcomes, rubric)
    check_ids = [cid for cid, rc in rubric.checks.items() if rc.enabled]
    lines: list[tuple[str, list[str]]] = []
    for g in book.grades:
        r = g.chosen.result
        cells = [_num(g.checks[cid]) if cid in g.checks else "" for cid in check_ids]
        moved = sum(a.after - a.before for a in g.applied if a.override.check != gradebook.TOTAL)
        by_checks = (r.score if r.score_by_checks is None else r.score_by_checks) + moved
        note = "; ".join(f"override of {a.override.check}: {a.override.reason}" for a in g.applied)
        if g.superseded:
            others = ", ".join(s.id for s in g.superseded)
            note = "; ".join(x for x in (note, f"{book.pick} of {len(g.superseded) + 1}; not counted: {others}") if x)
        row = [_num(g.score), _num(r.max_score), r.scoring, _num(by_checks), *cells, g.chosen.status]
        lines.append((g.student, row + [g.chosen.id, g.chosen.submitted_at, note]))
    blank = [""] * (4 + len(check_ids))
    lines += [(sid, [*blank, "pending", "", "", "not graded yet"]) for sid in pending or []]
    lines += [(x.name, [*blank, "not_graded", "", "", x.reason]) for x in left or []]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["id", "score", "max_score", "scoring", "score_by_checks", *check_ids, "status"]
    writer.writerow(header + ["submission", "submitted_at", "note"])  # status keeps its place for older readers
    for sid, row in sorted(lines, key=lambda x: x[0]):
        writer.writerow([sid, *row])
    return buf.getvalue()


def _num(x: float) -> str:
    return f"{round(x, 4):g}"


def run_batch(
    submissions: Path,
    out: Path,
    rubric: Rubric,
    *,
    jobs: int = 2,
    force: bool = False,
    pool: Any = None,
    on_start: Callable[[int, int], None] | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    regrade: Sequence[str] = (),
    retry: Sequence[str] = (),
    pick: Pick = "latest",
    overrides: Path | None = None,
) -> BatchReport:
    """Grade every entry of ``submissions`` into ``out``; returns once every file is written.

    ``pool``: a ``WorkerPool`` to reuse (tests); by default one with ``jobs`` slots is started here.
    ``on_start(total, todo)`` and ``on_done(outcome)`` report progress (called from worker threads).
    ``regrade``: submission or student ids graded again whatever is stored; ``retry``: stored statuses graded
    again (keys of :data:`RETRY`); ``pick``: which of a student's submissions counts; ``overrides``: the
    instructor's overrides file (default ``out/overrides.csv``, none if absent). Raises
    :class:`~grader.entries.LayoutError`, :class:`~grader.gradebook.OverrideError` or :class:`BatchUsageError`
    before grading anything.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got jobs={jobs}")
    started = time.perf_counter()
    out = Path(out)
    found = survey(submissions, exclude=out)
    entries = found.entries
    wanted = _regraded(entries, regrade)
    corrections = gradebook.read_overrides(out / OVERRIDES if overrides is None else overrides, rubric)
    out.mkdir(parents=True, exist_ok=True)
    _write_state(out, submissions, found, pick)
    statuses = frozenset(RETRY[r] for r in retry)
    done: list[Outcome] = []
    todo: list[tuple[Entry, str]] = []
    for entry in entries:
        fp = fingerprint(entry, rubric)
        previous = None if force or entry.id in wanted else _load_done(entry, out, fp, rubric, statuses)
        if previous is not None:
            done.append(previous)
        else:
            todo.append((entry, fp))
    files = _ClassFiles(out, rubric, found, pick, corrections)
    for o in done:
        files.add(o)
    if on_start:
        on_start(len(entries), len(todo))
    for o in done:
        if on_done:
            on_done(o)
    try:
        if todo:
            # No worker may read the class's submissions or results (only its own private copy)
            private = (Path(submissions), out)
            with (
                _PoolScope(pool, jobs, rubric, private) as active,
                _TestsPool(pool, jobs, rubric, private) as tests_pool,
            ):
                done += _grade_all(todo, out, rubric, active, tests_pool, jobs, on_done, files)
    finally:  # an interrupted run leaves the class files of what it graded, the rest pending
        book = files.write()
    report = BatchReport(sorted(done, key=lambda o: o.id), files.notes, wall_s=time.perf_counter() - started)
    report.resumed = sum(o.resumed for o in report.outcomes)
    report.graded = len(report.outcomes) - report.resumed
    report.left, report.book = found.left, book
    return report


def _regraded(entries: list[Entry], asked: Sequence[str]) -> set[str]:
    """The ids of the entries ``--regrade`` names (a submission's id, or a student's: all of theirs)."""
    wanted: set[str] = set()
    for name in asked:
        hits = {e.id for e in entries if name.lower() in (e.id.lower(), e.student)}
        if not hits:
            raise BatchUsageError(f"--regrade {name}: no submission or student of the class has that id")
        wanted |= hits
    return wanted


def _write_state(out: Path, submissions: Path, found: Survey, pick: Pick) -> None:
    """OUT/.batch.json: where the submissions are (``grade similarity OUT`` reads their code, never the workers'),
    and who handed each in when (``grade gradebook OUT``)."""
    people = {
        e.id: {
            "student": e.student,
            "people": [vars(p) for p in e.people],
            "submitted_at": e.submitted_at,
            "dated_by": e.dated_by,
            "source": e.path.name,
        }
        for e in found.entries
    }
    state = {
        "submissions": str(Path(submissions).resolve()),
        "pick": pick,
        "entries": people,
        "left": [[x.name, x.reason] for x in found.left],
    }
    write_atomic(out / BATCH_STATE, json.dumps(state, indent=1) + "\n")


class _ClassFiles:
    """grades.csv, gradebook.csv, superseded.csv and summary.html, written as the run goes (issue 54): after the
    first submission graded, then whenever the time since the last write is at least 20 times what that write took
    (so at most about 5% of the run), and at the end, an interrupted run's too. A student none of whose
    submissions is graded yet is pending."""

    def __init__(self, out: Path, rubric: Rubric, found: Survey, pick: Pick, overrides: list[Override]) -> None:
        self._out, self._rubric, self._found, self._pick, self._overrides = out, rubric, found, pick, overrides
        self._done: dict[str, Outcome] = {}
        self._cost = 0.0
        self._at: float | None = None
        self.notes = list(found.notes)

    def add(self, outcome: Outcome) -> None:
        self._done[outcome.id] = outcome

    def graded(self, outcome: Outcome) -> None:
        """One more submission graded: the files again, when it is time (see the class)."""
        self.add(outcome)
        if self._at is None or time.perf_counter() - self._at >= 20 * self._cost:
            self.write()

    def write(self) -> Gradebook:
        from grader.report.summary import render_summary

        t0 = time.perf_counter()
        outcomes = sorted(self._done.values(), key=lambda o: o.id)
        book = gradebook.build(outcomes, self._rubric, how=self._pick, overrides=self._overrides)
        counted = {g.student for g in book.grades}
        pending = sorted({e.student for e in self._found.entries} - counted)
        self.notes = list(dict.fromkeys(self._found.notes + book.notes))
        write_atomic(
            self._out / "grades.csv",
            grades_csv(outcomes, self._rubric, book=book, left=self._found.left, pending=pending),
        )
        write_atomic(self._out / "gradebook.csv", gradebook.export(book, self._rubric, "plain"))
        write_atomic(self._out / "superseded.csv", gradebook.superseded_csv(book))
        page = render_summary(
            outcomes, self._rubric, notes=self.notes, book=book, left=self._found.left, pending=pending
        )
        write_atomic(self._out / "summary.html", page)
        self._at = time.perf_counter()
        self._cost = self._at - t0
        return book


class _PoolScope:
    """The caller's pool, or a fresh one closed on exit."""

    def __init__(self, given: Any, jobs: int, rubric: Rubric, private: tuple[Path, ...] = ()) -> None:
        self._given, self._jobs, self._rubric = given, jobs, rubric
        self._private = private  # folders the pool's workers must never read
        self._own: Any = None

    def __enter__(self) -> Any:
        if self._given is not None:
            return self._given
        from grader.sandbox import WorkerPool

        self._own = WorkerPool(self._jobs, uid_base=self._rubric.limits.sandbox_uid_base, secret_paths=self._private)
        return self._own

    def __exit__(self, *exc: object) -> None:
        if self._own is not None:
            self._own.close()


class _TestsPool(_PoolScope):
    """Workers for students' own tests, apart from the heads' pool: with every head slot busy, a shared
    pool would deadlock. Zygotes start only when a submission brings tests. A caller's pool (tests)
    gets None, so each grade makes a private one."""

    def __enter__(self) -> Any:
        if self._given is not None:
            return None
        from grader.sandbox import WorkerPool

        self._own = WorkerPool(
            self._jobs, uid_base=self._rubric.limits.sandbox_uid_base, lazy=True, secret_paths=self._private
        )
        return self._own


def _grade_all(
    todo: list[tuple[Entry, str]],
    out: Path,
    rubric: Rubric,
    pool: Any,
    tests_pool: Any,
    jobs: int,
    on_done: Callable[[Outcome], None] | None,
    files: _ClassFiles,
) -> list[Outcome]:
    # The grader threads mostly wait on their workers; torch ops in them stay single-threaded so the
    # two kinds of work do not fight over the cores.
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    lock = threading.Lock()

    def one(entry: Entry, fp: str) -> Outcome:
        status, result = grade_entry(entry, rubric, pool, tests_pool)
        outcome = Outcome.of(entry, status, result)
        _store(outcome, out, fp, rubric)
        with lock:
            files.graded(outcome)
            if on_done:
                on_done(outcome)
        return outcome

    try:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="grade") as ex:
            futures = [ex.submit(one, entry, fp) for entry, fp in todo]
            return [f.result() for f in as_completed(futures)]
    finally:
        torch.set_num_threads(threads)


# -- the command ---------------------------------------------------------------------------------


def _parser(stage: Stage | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="grade batch",
        description="Grade every submission in a folder (one entry per student: a folder, .py, .zip or "
        ".ipynb, named by student id; a Gradescope export folder works too). Writes OUT/<id>/report.html "
        "and result.json, OUT/grades.csv (one row per student), gradebook.csv, superseded.csv and summary.html, "
        "as the run goes. Rerunning skips unchanged submissions (--regrade, --retry: grade some again).",
    )
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR", help="folder of submissions")
    p.add_argument("--out", type=Path, required=True, metavar="OUT_DIR", help="where reports and grades go")
    p.add_argument(
        "--jobs", type=int, default=default_jobs(), metavar="N", help="parallel workers (default %(default)s)"
    )
    p.add_argument("--rubric", type=Path, help="rubric TOML (default: the bundled rubrics/step4.toml)")
    p.add_argument("--force", action="store_true", help="regrade submissions that are already graded")
    p.add_argument(
        "--regrade",
        nargs="+",
        default=[],
        metavar="ID",
        help="grade these again whatever is stored: a submission's id (its folder in OUT_DIR) or a student's (all of "
        "theirs)",
    )
    p.add_argument(
        "--retry",
        nargs="+",
        default=[],
        choices=sorted(RETRY),
        help="grade again the stored submissions that timed out (a busy machine can cause it) or could not be read",
    )
    p.add_argument(
        "--pick",
        choices=gradebook.PICKS,
        default="latest",
        help="which of a student's submissions counts: the latest handed in (default) or the best",
    )
    p.add_argument(
        "--overrides",
        type=Path,
        metavar="FILE",
        help="the instructor's overrides (CSV: student, check, points, reason; check may be 'total'), applied to "
        "every export and listed in the overview (default: OUT_DIR/overrides.csv when it exists)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar; print only the summary line")
    if stage is not None:
        stage.add_options(p)
    return p


class Stage(Protocol):
    """A step ``grade batch`` runs after grading (the class similarity report), given by the command line
    (grader/cli.py), so the batch runner imports nothing above it."""

    def add_options(self, parser: argparse.ArgumentParser) -> None: ...
    def run(self, args: argparse.Namespace, rubric: Rubric) -> int | None: ...


def default_jobs() -> int:
    """One worker per core, at most 4 (each holds a warm torch process of ~250 MB)."""
    return max(1, min(4, os.cpu_count() or 1))


def batch_main(argv: list[str], stage: Stage | None = None) -> int:
    """``grade batch``: 0 when every submission got a verdict, 1 if the grader failed on some, 2 on misuse."""
    from rich.console import Console

    from grader.rubric import RubricError
    from grader.runner import checked_rubric

    args = _parser(stage).parse_args(argv)
    err = Console(stderr=True, highlight=False, soft_wrap=True)

    def usage(message: str) -> int:
        err.print("[bold red]grade batch: error:[/] ", end="")
        err.print(message, markup=False)
        return 2

    if args.jobs < 1:
        return usage(f"--jobs must be at least 1, got {args.jobs}")
    if not args.submissions.is_dir():
        return usage(f"{args.submissions} is not a folder of submissions")
    try:
        rubric = checked_rubric(args.rubric)
    except RubricError as exc:
        return usage(str(exc))
    try:
        with _Progress(err, enabled=not args.quiet) as progress:
            report = run_batch(
                args.submissions,
                args.out,
                rubric,
                jobs=args.jobs,
                force=args.force,
                on_start=progress.start,
                on_done=progress.advance,
                regrade=args.regrade,
                retry=args.retry,
                pick=args.pick,
                overrides=args.overrides,
            )
    except (LayoutError, OverrideError, BatchUsageError) as exc:
        return usage(str(exc))
    _print_report(report, args.out, Console(highlight=False))
    if stage is not None:
        code = stage.run(args, rubric)
        if code:
            return code
    return 1 if report.errors else 0


class _Progress:
    """A rich progress bar with an ETA over the submissions that are actually graded."""

    def __init__(self, console: Any, *, enabled: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._console = console
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[last]}"),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self._task: Any = None
        self._enabled = enabled

    def __enter__(self) -> _Progress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def start(self, total: int, todo: int) -> None:
        if self._enabled and total > todo:
            self._console.print(
                f"{total - todo} of {total} submissions are unchanged since the last run: "
                "skipped (--force regrades them)."
            )
        if todo:
            self._task = self._bar.add_task("grading", total=todo, last="")

    def advance(self, outcome: Outcome) -> None:
        if outcome.resumed or self._task is None:
            return
        last = f"{outcome.id}: {outcome.result.score:g}/{outcome.result.max_score:g} {outcome.status}"
        self._bar.update(self._task, advance=1, last=last)


def _print_report(report: BatchReport, out: Path, console: Any) -> None:
    counts = {s: sum(o.status == s for o in report.outcomes) for s in SUBMISSION_STATUSES}
    parts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items() if n)
    n = len(report.outcomes)
    console.print(
        f"{n} submissions ({report.graded} graded now, {report.resumed} unchanged) in {report.wall_s:.1f} s: "
        f"{parts or 'none found'}"
    )
    for x in report.left:
        console.print(f"  not graded: {x.name}: {x.reason}", markup=False)
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)
    book = report.book
    if book is not None and book.superseded:
        console.print(
            f"  {len(book.grades)} students: {len(book.superseded)} submission(s) superseded by the same student's "
            f"{book.pick} one, listed in {out / 'superseded.csv'}",
            markup=False,
        )
    if report.provisional:
        ids = " ".join(o.id for o in report.provisional)
        console.print(
            f"  {len(report.provisional)} provisional grade(s), to look at (a timeout or the grader's own error): "
            f"{ids}; grade them again with --regrade {ids}",
            markup=False,
        )
    if report.errors:
        console.print(f"  {report.errors} hit an internal grader error; rerun the same command to retry them.")
    console.print(f"  {out / 'summary.html'}\n  {out / 'grades.csv'}\n  {out / 'gradebook.csv'}", markup=False)


# -- grade gradebook -----------------------------------------------------------------------------


def stored_outcomes(out: Path) -> tuple[list[Outcome], list[str], Pick]:
    """The outcomes ``grade batch`` stored in ``out`` (result.json, with who handed each in when, from
    OUT/.batch.json), the students with no stored grade yet, and the batch's pick."""
    try:
        state = json.loads((out / BATCH_STATE).read_text(encoding="utf-8"))
        entries = dict(state["entries"])
    except (OSError, ValueError, KeyError, TypeError):
        raise BatchUsageError(
            f"{out} is not a folder graded by grade batch (no {BATCH_STATE} naming its entries)"
        ) from None
    outcomes: list[Outcome] = []
    for sid, e in sorted(entries.items()):
        try:
            result = GradeResult.model_validate_json((out / sid / "result.json").read_text(encoding="utf-8"))
            record = json.loads((out / sid / STATE_FILE).read_text(encoding="utf-8"))
            status = record["status"] if record.get("status") in SUBMISSION_STATUSES else submission_status(result)
        except (OSError, ValueError, ValidationError, KeyError, TypeError):
            continue
        people = tuple(Person(**p) for p in e.get("people", []))
        names = tuple(p.name for p in people if p.name)
        outcomes.append(
            Outcome(
                sid,
                e.get("source", sid),
                status,
                result,
                names,
                True,
                e.get("student", ""),
                people,
                e.get("submitted_at", ""),
                e.get("dated_by", ""),
            )
        )
    graded = {o.student for o in outcomes}
    pending = sorted({str(e.get("student") or sid.lower()) for sid, e in entries.items()} - graded)
    pick: Pick = "best" if state.get("pick") == "best" else "latest"
    return outcomes, pending, pick


def gradebook_main(argv: list[str]) -> int:
    """``grade gradebook OUT``: the gradebook of a graded class in an LMS's columns; 0, or 2 on misuse."""
    from grader.rubric import RubricError
    from grader.runner import checked_rubric

    p = argparse.ArgumentParser(
        prog="grade gradebook",
        description="Write the gradebook of a class graded by grade batch: one grade per student (the submission "
        "--pick chooses), the overrides applied, the score rounded as the rubric's [gradebook] says, in the columns "
        "Canvas or Moodle import, or every field (plain: name, e-mail, id, score, max, late, status).",
    )
    p.add_argument("out", type=Path, metavar="OUT_DIR", help="a folder graded by grade batch")
    p.add_argument("--format", choices=gradebook.FORMATS, default="plain", help="columns (default %(default)s)")
    p.add_argument("--output", "--out", dest="output", type=Path, metavar="FILE", help="default: standard output")
    p.add_argument("--rubric", type=Path, help="rubric TOML (default: the bundled rubrics/step4.toml)")
    p.add_argument("--pick", choices=gradebook.PICKS, help="which submission counts (default: the batch's)")
    p.add_argument("--overrides", type=Path, metavar="FILE", help="default: OUT_DIR/overrides.csv when it exists")
    args = p.parse_args(argv)
    try:
        rubric = checked_rubric(args.rubric)
        outcomes, pending, pick = stored_outcomes(args.out)
        corrections = gradebook.read_overrides(args.overrides or args.out / OVERRIDES, rubric)
    except (RubricError, BatchUsageError, OverrideError) as exc:
        print(f"grade gradebook: error: {exc}", file=sys.stderr)
        return 2
    book = gradebook.build(outcomes, rubric, how=args.pick or pick, overrides=corrections)
    text = gradebook.export(book, rubric, args.format)
    for note in book.notes + ([f"{len(pending)} student(s) not graded yet: {', '.join(pending)}"] if pending else []):
        print(f"note: {note}", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_atomic(args.output, text)
        print(f"wrote {args.output} ({len(book.grades)} students, {args.format})", file=sys.stderr)
    return 0
