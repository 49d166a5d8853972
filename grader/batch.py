"""Grade a whole class: every entry of a folder, in parallel on a warm worker pool, resumable.

    SUBMISSIONS_DIR -> entries (one per student) -> fingerprint (skip if unchanged)
        -> grade on a pool slot -> OUT/<id>/result.json + report.html -> grades.csv + summary.html

An entry is a folder, a ``.py``, a ``.zip`` or a ``.ipynb``; its name is the student id. A Gradescope
"Export Submissions" folder (``submission_<n>/`` folders beside ``submission_metadata.yml``) is read
too, with the submitter's SID (or email) as the id. The heavy work happens in the pool's workers; the
grader threads here only send inputs and compare, so one thread per slot keeps every slot busy, and a
hanging submission holds only its own slot, for at most its own time budget.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import html
import io
import json
import os
import re
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

import grader
from grader.exports import result_json, write_atomic
from grader.models import CheckResult, GradeResult, Status
from grader.rubric import Rubric
from grader.statuses import LEGACY_STATUSES, SUBMISSION_STATUSES, SubmissionStatus
from grader.statuses import SUBMISSION_STATUS_MEANING as SUBMISSION_STATUS_MEANING  # re-exported

# Checks that need causal_self_attention but can pass without an answer from it: forbidden_api judges the
# source alone when a traced call raises. The others stop with an error when the head raises.
ANSWER_OPTIONAL = frozenset({"forbidden_api"})
HEAD = "causal_self_attention"
KINDS = (".py", ".zip", ".ipynb")
GRADESCOPE_METADATA = "submission_metadata.yml"
RESERVED = {"grades.csv", "summary.html", "similarity.csv", "similarity.html"}
STATE_FILE = ".fingerprint"
BATCH_STATE = ".batch.json"  # OUT's record of the submissions folder (grader/similarity.py reads it)
_UNSAFE = re.compile(r"[^\w.@+-]")
_MAX_ID = 100


# -- entries -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One student's submission in SUBMISSIONS_DIR."""

    id: str  # safe as a single path component
    path: Path  # the folder, .py, .zip or .ipynb as found
    submitters: tuple[str, ...] = ()  # names, from Gradescope's metadata


def safe_id(name: str) -> str:
    """``name`` as one safe path component: separators and odd characters become ``_``, no leading dot."""
    cleaned = _UNSAFE.sub("_", name).strip(".")[:_MAX_ID].strip(".") or "submission"
    return f"_{cleaned}" if cleaned in RESERVED else cleaned


def discover(root: Path, *, exclude: Path | None = None) -> tuple[list[Entry], list[str]]:
    """The submissions under ``root`` in id order, and notes about entries that were left out.

    ``exclude``: a path never taken as a submission (the output folder, when it lies inside ``root``).
    """
    root = Path(root)
    skip = exclude.resolve() if exclude is not None else None
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a folder of submissions")
    nested = [p for p in root.iterdir() if p.is_dir() and (p / GRADESCOPE_METADATA).is_file()]
    if not (root / GRADESCOPE_METADATA).is_file() and len(nested) == 1:
        root = nested[0]  # the unpacked export zip holds one assignment_<n>_export/ folder
    metadata = _gradescope_submitters(root / GRADESCOPE_METADATA)
    notes: list[str] = []
    entries: list[Entry] = []
    taken: set[str] = set()
    for path in sorted(root.iterdir()):
        name = path.name
        if name.startswith(".") or name in ("__MACOSX", "__pycache__", GRADESCOPE_METADATA):
            continue
        if skip is not None and path.resolve() == skip:
            continue
        if not (path.is_dir() or path.suffix in KINDS):
            notes.append(f"skipped {name}: not a folder, .py, .zip or .ipynb")
            continue
        people = metadata.get(name, [])
        wanted = next((p[k] for p in people for k in ("sid", "email") if p.get(k)), None) if people else None
        base = safe_id(wanted or (name if path.is_dir() else path.stem))
        sid, k = base, 2
        while sid.lower() in taken:
            sid, k = f"{base}-{k}", k + 1
        if sid != base or base != (wanted or (name if path.is_dir() else path.stem)):
            notes.append(f"{name} is graded as {sid!r}")
        taken.add(sid.lower())
        entries.append(Entry(sid, path, tuple(p.get("name", "") for p in people if p.get("name"))))
    return sorted(entries, key=lambda e: e.id), notes


def _gradescope_submitters(path: Path) -> dict[str, list[dict[str, str]]]:
    """``submission_<n>`` -> submitters' name/sid/email, from Gradescope's export metadata.

    The file is YAML written by Ruby (keys like ``:submitters:``); only the submitters block of each
    top-level entry is read, line by line, so no YAML library is needed.
    """
    if not path.is_file():
        return {}
    found: dict[str, list[dict[str, str]]] = {}
    current: str | None = None
    block: int | None = None  # indentation of the ":submitters:" key while inside its list
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#") or raw.startswith("---"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0:
            current, block = (line[:-1].strip("'\""), None) if line.endswith(":") else (None, None)
            if current is not None:
                found[current] = []
            continue
        if current is None:
            continue
        if line == ":submitters:":
            block = indent
            continue
        if block is not None and (indent < block or (indent == block and not line.startswith("-"))):
            block = None
        if block is None:
            continue
        if line.startswith("- "):
            found[current].append({})
            line = line[2:].strip()
        m = re.fullmatch(r":(name|sid|email):\s*(.*)", line)
        if m and found[current]:
            found[current][-1][m.group(1)] = m.group(2).strip().strip("'\"")
    return found


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
    return hashlib.sha256(json.dumps(rubric.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


def fingerprint(entry: Entry, rubric: Rubric) -> str:
    """Changes when the submission, the rubric (points, limits, seed...) or the grader version changes."""
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
    broke. Each check is still listed, never silently dropped.
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
                status=status,
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


def grade_entry(
    entry: Entry, rubric: Rubric, pool: Any, tests_pool: Any = None
) -> tuple[SubmissionStatus, GradeResult]:
    """Grade one entry; every failure (the submission's or the grader's) becomes a result."""
    from grader.runner import grade
    from grader.submission import SubmissionError

    label = str(entry.path)
    started = time.perf_counter()
    try:
        result = grade(
            locate(entry.path, rubric.entry_points.module),
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

    @property
    def errors(self) -> int:
        return sum(o.status == "grader_error" for o in self.outcomes)


def _load_done(entry: Entry, out: Path, fp: str) -> Outcome | None:
    """The stored outcome of ``entry`` if it was graded with the same fingerprint."""
    try:
        state = json.loads((out / entry.id / STATE_FILE).read_text(encoding="utf-8"))
        status = state.get("status")
        if state.get("fingerprint") != fp or (status not in SUBMISSION_STATUSES and status not in LEGACY_STATUSES):
            return None
        result = GradeResult.model_validate_json((out / entry.id / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None
    if status in LEGACY_STATUSES:  # an older grader's word: classify the stored result again
        status = submission_status(result)
    return Outcome(entry.id, entry.path.name, status, result, entry.submitters, resumed=True)


def _store(outcome: Outcome, out: Path, fp: str) -> None:
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
        write_atomic(state, json.dumps({"fingerprint": fp, "status": outcome.status, "source": outcome.source}) + "\n")


def grades_csv(outcomes: list[Outcome], rubric: Rubric) -> str:
    """id, score, max_score, scoring, score_by_checks, one column of points per check (rubric order), status;
    ready for an LMS. ``score`` is the grade (``GradeResult.score``); when ``scoring`` is "mistakes" it is
    more than ``score_by_checks``, the sum of the check columns (each cause was charged once)."""
    check_ids = [cid for cid, rc in rubric.checks.items() if rc.enabled]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", "score", "max_score", "scoring", "score_by_checks", *check_ids, "status"])
    for o in sorted(outcomes, key=lambda o: o.id):
        r = o.result
        by_id = {c.id: c for c in r.checks}
        cells = [_num(by_id[cid].score) if cid in by_id else "" for cid in check_ids]
        by_checks = r.score if r.score_by_checks is None else r.score_by_checks
        writer.writerow([o.id, _num(r.score), _num(r.max_score), r.scoring, _num(by_checks), *cells, o.status])
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
) -> BatchReport:
    """Grade every entry of ``submissions`` into ``out``; returns once every file is written.

    ``pool``: a ``WorkerPool`` to reuse (tests); by default one with ``jobs`` slots is started here.
    ``on_start(total, todo)`` and ``on_done(outcome)`` report progress (called from worker threads).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got jobs={jobs}")
    started = time.perf_counter()
    out = Path(out)
    entries, notes = discover(submissions, exclude=out)
    out.mkdir(parents=True, exist_ok=True)
    done: list[Outcome] = []
    todo: list[tuple[Entry, str]] = []
    for entry in entries:
        fp = fingerprint(entry, rubric)
        previous = None if force else _load_done(entry, out, fp)
        if previous is not None:
            done.append(previous)
        else:
            todo.append((entry, fp))
    if on_start:
        on_start(len(entries), len(todo))
    for o in done:
        if on_done:
            on_done(o)
    if todo:
        # No worker may read the class's submissions or results (only its own private copy)
        private = (Path(submissions), out)
        with (
            _PoolScope(pool, jobs, rubric, private) as active,
            _TestsPool(pool, jobs, rubric, private) as tests_pool,
        ):
            done += _grade_all(todo, out, rubric, active, tests_pool, jobs, on_done)
    report = BatchReport(sorted(done, key=lambda o: o.id), notes, wall_s=time.perf_counter() - started)
    report.resumed = sum(o.resumed for o in report.outcomes)
    report.graded = len(report.outcomes) - report.resumed
    write_atomic(out / "grades.csv", grades_csv(report.outcomes, rubric))
    # where the submissions are, for `grade similarity OUT` (which reads their code, never the workers')
    write_atomic(out / BATCH_STATE, json.dumps({"submissions": str(Path(submissions).resolve())}) + "\n")
    from grader.report.summary import render_summary

    write_atomic(out / "summary.html", render_summary(report.outcomes, rubric, notes=notes))
    return report


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
) -> list[Outcome]:
    # The grader threads mostly wait on their workers; torch ops in them stay single-threaded so the
    # two kinds of work do not fight over the cores.
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    lock = threading.Lock()

    def one(entry: Entry, fp: str) -> Outcome:
        status, result = grade_entry(entry, rubric, pool, tests_pool)
        outcome = Outcome(entry.id, entry.path.name, status, result, entry.submitters)
        _store(outcome, out, fp)
        if on_done:
            with lock:
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
        "and result.json, OUT/grades.csv and OUT/summary.html. Rerunning skips unchanged submissions.",
    )
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR", help="folder of submissions")
    p.add_argument("--out", type=Path, required=True, metavar="OUT_DIR", help="where reports and grades go")
    p.add_argument(
        "--jobs", type=int, default=default_jobs(), metavar="N", help="parallel workers (default %(default)s)"
    )
    p.add_argument("--rubric", type=Path, help="rubric TOML (default: the bundled rubrics/step4.toml)")
    p.add_argument("--force", action="store_true", help="regrade submissions that are already graded")
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
    with _Progress(err, enabled=not args.quiet) as progress:
        report = run_batch(
            args.submissions,
            args.out,
            rubric,
            jobs=args.jobs,
            force=args.force,
            on_start=progress.start,
            on_done=progress.advance,
        )
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
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)
    if report.errors:
        console.print(f"  {report.errors} hit an internal grader error; rerun the same command to retry them.")
    console.print(f"  {out / 'summary.html'}\n  {out / 'grades.csv'}", markup=False)
