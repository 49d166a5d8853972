"""``check()``: grade what a running notebook has defined so far, from a cell of that notebook.

    from grader import check
    check()                          # every check: the report under the cell; returns the GradeResult
    check(only="causal_mask")        # one check; a list runs several
    check(only="future_perturbation", seed=20417)    # what a failure's Reproduce line says

    IPython's history (the cells the kernel ran, in the order it ran them: no file on disk is needed)
      -> a private .ipynb of those cells -> grade (grader/runner.py, as `grade FILE.ipynb`: the same
         reduction to definitions, rubric, seed, oracle and sandboxed worker) -> the report inline

The kernel only judges: nothing the notebook defined is called here. Its cells' source is reduced to the
contract's definitions exactly as a notebook file is (grader/_notebook.py, numbering cells In [n] as the
notebook shows them) and imported by the worker, so the verdicts and the score are those of ``grade`` on
the same definitions; only the Reproduce lines differ, naming ``check(...)`` instead of ``grade FILE``. The
notebook is named as the front end tells the kernel (VS Code's ``__vsc_ipynb_file__``, Jupyter's
``__session__``); where none does (Colab, a kernel started by a script), "this notebook".

Warm, as ``grade --watch`` is: the kernel keeps the watch's pool (two slots, a warm zygote each) and a
watch :class:`~grader.watch.Session`, which grades in a thread of its own and starts the second zygote
after the first grade (only that: torch work in the kernel's background could race the student's next
cell for torch's global generator). A later ``check()`` is a save of the watch: a fresh copy, a
fresh worker forked from the zygote, no ``import torch``. An interrupt (the notebook's stop button)
abandons the grade in flight as a save does, killing its workers at once. No process of the grader
outlives the kernel: at its exit the pool is closed, and a kernel killed outright closes the zygotes'
control sockets with it, on which each zygote kills its workers and exits (grader/sandbox/_zygote.py).

Nothing heavy is imported before ``check()`` is called; IPython only then, so Jupyter is no dependency.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import queue
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader._notebook import KERNEL_HISTORY

if TYPE_CHECKING:
    from grader.models import GradeResult
    from grader.rubric import Rubric
    from grader.watch import Outcome, Session

UNNAMED = "this notebook"  # what the report calls a notebook whose front end does not tell its file's name
PRIVATE_NAME = "notebook.ipynb"  # the private copy of such a notebook's cells
WAIT_S = 0.1  # how often the waiting cell lets an interrupt (KeyboardInterrupt) in


class CheckError(RuntimeError):
    """``check()`` could not grade: not in a notebook, an unknown check, cells the grader cannot read."""


def check(
    only: str | Sequence[str] | None = None,
    *,
    seed: int | None = None,
    rubric: str | Path | None = None,
    show: bool = True,
) -> GradeResult:
    """Grade the cells this kernel has run, in the order it ran them, and show the report under the cell.

    ``only``: one check id or several (default: every check of the rubric). ``seed``: the base seed
    (default: the rubric's; a failure's Reproduce line names the one to reuse). ``rubric``: a rubric TOML
    (default: the bundled one). ``show=False`` only returns the result.
    Returns the :class:`~grader.models.GradeResult`: ``.score``, ``.max_score``, ``.checks``.
    """
    shell = _shell()
    selected = [only] if isinstance(only, str) else list(only) if only is not None else None
    kernel = _kernel(_uid_base(rubric))
    grading_rubric = _rubric(rubric, selected)
    notebook = kernel_notebook(shell.history_manager.input_hist_raw)
    result = kernel.grade(notebook, grading_rubric, name=_notebook_name(shell), only=selected, seed=seed)
    if show:
        _show(shell, result)
        change = kernel.change_since_last(result, selected)
        if change is not None:
            print(change)
    return result


# ---- what the kernel ran ---------------------------------------------------------------------------


def kernel_notebook(history: Sequence[str]) -> str:
    """The cells a kernel ran as notebook JSON, each numbered by its execution count (``history[k]`` is
    In [k]; IPython's entry 0 is empty) and marked as a history (``KERNEL_HISTORY``) for the notes."""
    cells = [
        {"cell_type": "code", "execution_count": k, "metadata": {}, "outputs": [], "source": source}
        for k, source in enumerate(history)
        if k and source.strip()
    ]
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {KERNEL_HISTORY: True}, "cells": cells})


def _shell() -> Any:
    """The running IPython shell; a clear error anywhere else (IPython is imported only now)."""
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # noqa: N806
    shell = get_ipython() if get_ipython is not None else None
    if shell is None or not hasattr(shell, "history_manager"):
        raise CheckError(
            "check() grades the cells of a running notebook (Jupyter, VS Code, Colab); "
            "from a terminal, run `grade attention_head.py` (or `grade NOTEBOOK.ipynb`)"
        )
    return shell


def _notebook_name(shell: Any) -> str:
    """The notebook's file name where the front end tells the kernel (VS Code's ``__vsc_ipynb_file__``; Jupyter
    Server's session, which ipykernel puts in ``__session__`` from ``JPY_SESSION_NAME``); else "this notebook"
    (Colab, nbclient): never a file name the student did not choose."""
    ns = shell.user_ns
    for path in (ns.get("__vsc_ipynb_file__"), ns.get("__session__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(path, str) and path.endswith(".ipynb"):
            return Path(path).name
    return UNNAMED


def _show(shell: Any, result: GradeResult) -> None:
    """Show the report under the cell; from now on this kernel displays every GradeResult as its report
    (``r`` alone in a later cell shows it again), through IPython's own formatter registry."""
    from grader.models import GradeResult
    from grader.report.inline import show

    shell.display_formatter.ipython_display_formatter.for_type(GradeResult, show)
    show(result)


def reproduce_call(check_id: str, seed: int) -> str:
    """A failing check's rerun line in a notebook, in check()'s own terms (never a command-line flag)."""
    return f'check(only="{check_id}", seed={seed})'


def _as_named(result: GradeResult, private: str, name: str) -> GradeResult:
    """``result`` with its causes' lines at ``name`` (an unnamed notebook's, not its private copy's file name)."""
    if private == name:
        return result
    moved = [
        d.model_copy(update={"where": d.where.model_copy(update={"file": name})})
        if d.where is not None and d.where.file == private
        else d
        for d in result.diagnosis
    ]
    return result.model_copy(update={"diagnosis": moved})


# ---- the rubric ------------------------------------------------------------------------------------


def _uid_base(rubric: str | Path | None) -> int:
    """The rubric's sandbox uid base, read before pydantic so that the pool starts first (as the CLI does)."""
    from grader.cli import _uid_base as light_read

    return light_read(None if rubric is None else Path(rubric))


def _rubric(path: str | Path | None, only: list[str] | None) -> Rubric:
    from grader.rubric import RubricError
    from grader.runner import checked_rubric

    try:
        rubric = checked_rubric(None if path is None else Path(path))
    except RubricError as exc:
        raise CheckError(str(exc)) from None
    unknown = [c for c in only or [] if c not in rubric.checks]
    if unknown:
        from grader.cli import unknown_check

        raise CheckError(unknown_check(unknown[0], list(rubric.checks)))
    return rubric


# ---- the kernel's grader ---------------------------------------------------------------------------


class KernelGrader:
    """What the kernel keeps between calls: the watch's pool and session, and the last result shown.

    Each :meth:`grade` is one save of the watch: the session's thread grades, this (the cell's) thread
    waits, in short steps so that an interrupt reaches it, and an interrupt stops the session (its grade
    abandoned, its workers killed) before it propagates; the next call starts a new session on the same
    warm pool.
    """

    def __init__(self, uid_base: int) -> None:
        from grader.sandbox._pool import WorkerPool

        self.uid_base = uid_base
        self.pool = WorkerPool(2, uid_base=uid_base, lazy=True)
        self.pool.prestart(1)  # its torch import overlaps the grader's imports
        self._session: Session | None = None
        self._outcomes: queue.Queue[Outcome] = queue.Queue()
        self._errors = io.StringIO()  # what the session reports of a failure, for the error raised here
        self._job: Callable[[], GradeResult] | None = None
        self._last: tuple[frozenset[str] | None, GradeResult] | None = None
        self._lock = threading.Lock()

    def grade(
        self, notebook: str, rubric: Rubric, *, name: str, only: list[str] | None, seed: int | None
    ) -> GradeResult:
        """Grade ``notebook`` (JSON) as ``grade`` grades a .ipynb of that name; the result, or CheckError."""
        from grader.runner import grade, host_state_kept
        from grader.submission import MAX_FILE_BYTES

        data = notebook.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise CheckError(
                f"the cells this kernel ran hold {len(data)} bytes, more than the grader reads "
                f"({MAX_FILE_BYTES}); restart the kernel and run only the cells of your head"
            )
        with self._lock, tempfile.TemporaryDirectory(prefix="step4-check-") as tmp:
            path = Path(tmp) / (name if name.endswith(".ipynb") else PRIVATE_NAME)
            path.write_bytes(data)

            def job() -> GradeResult:
                return grade(
                    path,
                    rubric,
                    seed=seed,
                    only=only,
                    pool=self.pool,
                    tests_pool=self.pool,
                    label=name,
                    reproduce=reproduce_call,
                )

            with host_state_kept():
                return _as_named(self._through_session(job), path.name, name)

    def change_since_last(self, result: GradeResult, only: list[str] | None) -> str | None:
        """The watch's line on what changed since the last check() of the same checks (None for the first)."""
        from grader.watch import change_line

        selection = None if only is None else frozenset(only)
        before = self._last[1] if self._last is not None and self._last[0] == selection else None
        self._last = (selection, result)
        return None if before is None else change_line(before, result)

    def close(self) -> None:
        """Stop the session (abandoning a grade in flight) and the pool: no process of the grader is left."""
        self._stop_session()
        self.pool.close()

    # -- one save of the watch ---------------------------------------------------------------------

    def _through_session(self, job: Callable[[], GradeResult]) -> GradeResult:
        self._job = job
        self._errors.seek(0)
        self._errors.truncate()
        if self._session is None:
            self._session = self._new_session()
            self._session.start()
        else:
            self._session.saved()
        try:
            outcome = self._wait()
        except BaseException:  # an interrupt: abandon the grade, its workers killed, before it propagates
            self._stop_session()
            raise
        if outcome.result is not None:
            return outcome.result
        reported = self._errors.getvalue().strip()
        if "Traceback" in reported:  # a bug of ours, its traceback printed by the session
            raise CheckError(f"internal grader error (not your code; please report it):\n{reported}")
        raise CheckError(str(outcome.error))

    def _stop_session(self) -> None:
        """Stop the session, abandoning its grade, even through a second interrupt (a stop button pressed
        twice): a session left unwinding would share the pool with the next one."""
        session, self._session = self._session, None
        while session is not None:
            try:
                session.stop()
                return
            except KeyboardInterrupt:
                continue

    def _new_session(self) -> Session:
        from grader.watch import Session, warm_up

        self._outcomes = queue.Queue()
        return Session(
            lambda: self._job(),  # type: ignore[misc]
            lambda before, result: None,  # shown by check() itself, once the cell has it
            self.pool,
            warm_up=warm_up(self.pool, diagnosis=False),  # the student's next cell may run meanwhile
            err=self._errors,
            on_outcome=self._outcomes.put,
        )

    def _wait(self) -> Outcome:
        """The outcome of the grade asked for: the first one not abandoned."""
        while True:
            try:
                outcome = self._outcomes.get(timeout=WAIT_S)
            except queue.Empty:
                continue
            if not outcome.cancelled:
                return outcome


_grader: KernelGrader | None = None


def _kernel(uid_base: int) -> KernelGrader:
    """This kernel's grader, started on the first call (and again for a rubric with other sandbox uids)."""
    global _grader
    if _grader is not None and _grader.uid_base != uid_base:
        _grader.close()
        _grader = None
    if _grader is None:
        _grader = KernelGrader(uid_base)
        atexit.register(_grader.close)
    return _grader
