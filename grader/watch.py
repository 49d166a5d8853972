"""``grade PATH --watch``: a cold grade's verdicts on every save, without a cold start each time.

    save -> watcher (watchfiles) -> cancel the grade in flight -> grade (fresh worker) -> files -> terminal

The grader process stays alive with torch imported, and so does the pool's warm zygote. Each save is
graded by :func:`grader.runner.grade` exactly as a cold grade is: a fresh copy of the submission, a fresh
worker forked from the zygote, a fresh hang registry, time shares and memo, the same seeds. Nothing but
the process's caches of trusted results (the reference's answers) carries over from one grade to the next.

A save that arrives during a grade abandons it (:meth:`WorkerPool.cancel` kills its workers; the grade
unwinds with :class:`~grader.sandbox._pool.Cancelled`) and the newest files are graded instead. Bursts
of saves are grouped by the watcher (an editor writes, renames and touches a file within milliseconds).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import torch

from grader.models import CheckResult, GradeResult
from grader.report.wording import fmt_points
from grader.sandbox import WorkerPool
from grader.sandbox._pool import Cancelled
from grader.submission import JUNK_DIRS, SubmissionError, brought_beside

STEP_MS = 10  # a burst of changes ends after this long without another (an editor's save takes about 1 ms)
MAX_BURST_MS = 500  # a burst longer than this is graded anyway (a formatter rewriting on save cancels it)
RESWEEP_S = 0.2  # while an abandoned grade unwinds, sweep its workers again this often
UNWIND_S = 10.0  # at Ctrl-C, wait this long at most for the grade in flight to unwind (closing the pool ends the rest)
SOURCE_SUFFIXES = (".py", ".ipynb")


def watched(submission: Path, ignore: tuple[Path, ...] = ()) -> tuple[tuple[Path, ...], bool, Callable[[Path], bool]]:
    """What to watch for ``submission``: (folders, recursively, is this changed path one to grade on).

    A file (.py, .ipynb, .zip) is watched through its folder, as editors replace it by a rename, with the
    test files a .py brings beside it (:func:`grader.submission.brought_beside`), the tests/ folder there
    too when there is one (not recursively: a crowded Downloads folder is never walked); a folder,
    recursively, for its Python files and notebooks (the module, helpers, the student's tests), not its
    caches, hidden files or the grader's own outputs (``ignore``)."""
    root = submission.resolve()
    skip = {p.resolve() for p in ignore}
    if not root.is_dir():
        tests = root.parent / "tests"
        folders = (root.parent, tests) if root.suffix == ".py" and tests.is_dir() and not tests.is_symlink() else ()
        return (
            folders or (root.parent,),
            False,
            lambda path: (path == root or brought_beside(root, path)) and path not in skip,
        )

    def relevant(path: Path) -> bool:
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            return False
        hidden = any(p.startswith(".") or p in JUNK_DIRS for p in parts)
        return path.suffix in SOURCE_SUFFIXES and not hidden and path not in skip

    return (root,), True, relevant


def change_line(before: GradeResult | None, after: GradeResult) -> str:
    """One line on what changed since the last grade, checks that changed alike named together:
    'causal_mask, convex_hull: failed -> passed, reference_match: 3 -> 12 / 12; score 61 -> 80'."""
    score = f"{fmt_points(after.score)} / {fmt_points(after.max_score)}"
    if before is None:
        return f"Since the last run: nothing yet (first grade of this watch; score {score})"
    old = {c.id: c for c in before.checks}
    changes: dict[str, list[str]] = {}  # "failed -> passed" -> the checks, in rubric order
    for c in after.checks:
        was = old.get(c.id)
        if was is None:
            continue
        tests = _own_tests_change(was, c)  # the student's tests, which a pending check does not score (issue 53.6)
        if was.status != c.status:
            changes.setdefault(f"{was.status} -> {c.status}" + (f" ({tests})" if tests else ""), []).append(c.id)
        elif was.score != c.score:
            points = f"{fmt_points(was.score)} -> {fmt_points(c.score)} / {fmt_points(c.max_score)}"
            changes.setdefault(points, []).append(c.id)
        elif tests:
            changes.setdefault(tests, []).append(c.id)
    if not changes:
        return f"Since the last run: no change (score {score})"
    listed = ", ".join(f"{', '.join(ids)}: {change}" for change, ids in changes.items())
    return f"Since the last run: {listed}; score {fmt_points(before.score)} -> {fmt_points(after.score)}"


def _own_tests_change(was: CheckResult, now: CheckResult) -> str:
    """'tests/test_x.py::test_y now fails' for the student's tests that began or ceased to fail, or ''."""
    if was.own_tests is None or now.own_tests is None:
        return ""
    before, after = was.own_tests.failing, now.own_tests.failing
    said = [f"{t} now fails" for t in after if t not in before] + [f"{t} now passes" for t in before if t not in after]
    return ", ".join(said)


def warm_up(pool: WorkerPool, *, diagnosis: bool = True) -> Callable[[Callable[[], bool]], None]:
    """A session's warm-up (see :class:`Session`) for grades on ``pool``: its second zygote (grades take
    the pool's two slots in turn) and, with ``diagnosis``, the first diagnosis's trusted answers, unless a
    save is waiting. A process that is someone else's (a notebook's kernel) warms no diagnosis: it would
    run torch in this process while the host's own code may already run again (and save and restore
    torch's global generator under it)."""

    def warm(save_waiting: Callable[[], bool]) -> None:
        pool.prestart(2)
        if diagnosis:
            from grader.diagnosis import warm_diagnosis
            from grader.oracle import load_oracle

            warm_diagnosis(load_oracle(), save_waiting)  # the oracle every grade of this process uses

    return warm


@dataclass
class Outcome:
    """How one grade of the watch ended: a result, a submission error, or abandoned for a newer save."""

    result: GradeResult | None = None
    error: str | None = None
    cancelled: bool = False


class Session:
    """The grading thread and its bookkeeping; the watcher calls :meth:`saved`, Ctrl-C :meth:`stop`.

    ``grade_once`` grades the files as they are now; ``show`` writes and prints a result (given the one
    shown before). ``warm_up`` runs once, after the first grade, while the student edits: what a later
    grade would otherwise pay for the first time (it is asked whether a save is waiting, and stops then).
    ``on_outcome`` (tests) hears of every grade, shown or abandoned.
    """

    def __init__(
        self,
        grade_once: Callable[[], GradeResult],
        show: Callable[[GradeResult | None, GradeResult], None],
        pool: WorkerPool,
        *,
        warm_up: Callable[[Callable[[], bool]], None] = lambda save_waiting: None,
        err: TextIO | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
    ) -> None:
        self._grade_once, self._show, self._pool = grade_once, show, pool
        self._warm_up: Callable[[Callable[[], bool]], None] | None = warm_up
        self._err = err or sys.stderr
        self._on_outcome = on_outcome or (lambda outcome: None)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._saves = 0  # saves seen; a grade of an older count is stale
        self._grading: int | None = None  # the save count the grade in flight was started for
        self._stopping = False
        self._last: GradeResult | None = None
        self._torch_seed = torch.initial_seed()
        self._thread = threading.Thread(target=self._run, name="watch-grader", daemon=True)

    def start(self) -> None:
        """Grade now, and on every save from now on."""
        self._wake.set()
        self._thread.start()

    def saved(self) -> None:
        """A relevant file changed: grade again, abandoning a grade in flight."""
        with self._lock:
            self._saves += 1
            self._wake.set()
            if self._grading is not None:
                self._abandon()

    def stop(self, timeout: float = UNWIND_S) -> bool:
        """Abandon the grade in flight and end the thread; whether it ended within ``timeout``."""
        with self._lock:
            self._stopping = True
            self._wake.set()
            if self._grading is not None:
                self._abandon()
        if self._thread.ident is None:  # never started (the watcher failed to start)
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the grading thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._wake.wait()
            with self._lock:
                if self._stopping:
                    return
                self._wake.clear()
                generation = self._grading = self._saves
                self._pool.resume()
            outcome = self._grade()
            with self._lock:
                self._grading = None
                stale = self._saves != generation or self._stopping
            if stale:  # a newer save (or Ctrl-C) came during this grade: never show it
                outcome = Outcome(cancelled=True)
            elif outcome.cancelled:  # cancelled by no save of ours (cannot happen; be safe): grade again
                self._wake.set()
            elif outcome.result is not None:
                try:
                    self._show(self._last, outcome.result)
                except Exception:  # a report that cannot be written: say so, and keep watching
                    traceback.print_exc(file=self._err)
                self._last = outcome.result
            elif outcome.error is not None:
                print(f"grade: error: {outcome.error}", file=self._err, flush=True)
            self._on_outcome(outcome)
            if self._warm_up is not None and not self._wake.is_set():
                warm_up, self._warm_up = self._warm_up, None
                try:
                    warm_up(self._wake.is_set)
                except Exception:  # advice on speed only: never the end of the watch
                    traceback.print_exc(file=self._err)

    def _grade(self) -> Outcome:
        # as in a fresh process: grader-side code that draws from torch's global generator draws the same
        torch.default_generator.manual_seed(self._torch_seed)
        try:
            return Outcome(result=self._grade_once())
        except Cancelled:
            return Outcome(cancelled=True)
        except SubmissionError as exc:
            return Outcome(error=str(exc))
        except Exception:  # a bug of ours: say so, and keep watching
            traceback.print_exc(file=self._err)
            return Outcome(error="internal grader error (traceback above); save again to retry")

    def _abandon(self) -> None:
        """Kill the workers of the grade in flight (called under the lock, so only a grade of an older
        save is abandoned), and sweep again while it unwinds: a worker launched just after a sweep
        escapes it."""
        generation = self._grading
        self._pool.cancel()

        def resweep() -> None:
            while True:
                time.sleep(RESWEEP_S)
                with self._lock:
                    if self._grading != generation:
                        return
                    self._pool.cancel()

        threading.Thread(target=resweep, name="watch-resweep", daemon=True).start()


class _StopFlag:
    """The watcher's stop event. watchfiles asks it at every step of its wait, the first time once it
    watches: that first question starts the session, so that no save is missed before it."""

    def __init__(self, stop: threading.Event, ready: Callable[[], None]) -> None:
        self._stop = stop
        self._ready: Callable[[], None] | None = ready

    def is_set(self) -> bool:
        stopping = self._stop.is_set()
        if self._ready is not None and not stopping:
            ready, self._ready = self._ready, None
            ready()
        return stopping


def watch(
    submission: Path, session: Session, *, ignore: tuple[Path, ...] = (), stop_event: threading.Event | None = None
) -> int:
    """Grade ``submission`` now and on every save until Ctrl-C, SIGTERM or ``stop_event``; returns 0 (and
    every worker is gone: the session abandons the grade in flight before it returns)."""
    import watchfiles

    folders, recursive, relevant = watched(submission, ignore)
    stop = stop_event or threading.Event()
    with _signals_stop(stop):  # also while the session stops: a second Ctrl-C cuts nothing short
        try:
            for _changes in watchfiles.watch(
                *folders,
                watch_filter=lambda _change, path: relevant(Path(path)),
                debounce=MAX_BURST_MS,
                step=STEP_MS,
                stop_event=_StopFlag(stop, session.start),
                recursive=recursive,
            ):
                session.saved()
        except KeyboardInterrupt:  # a SIGINT handler of someone else's raised it: a normal end all the same
            pass
        finally:
            session.stop()
    return 0


@contextlib.contextmanager
def _signals_stop(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM set ``stop`` (the watcher sees it within a step) instead of raising where they
    land: an exception raised in a finalizer or a library's cleanup would be swallowed. Only in the main
    thread, and only for signals left at Python's defaults (a background job ignores SIGINT: so does this)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    previous = {}
    for signum, default in defaults.items():
        if signal.getsignal(signum) is default:
            previous[signum] = signal.signal(signum, lambda _signum, _frame: stop.set())
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
