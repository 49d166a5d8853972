"""``pytest --step4``: the grader's checks as test items beside the student's own tests.

    pytest --step4                        # your tests, and attention_head.py::causal_mask, ::interface, ...
    pytest --step4 -k causal_mask         # one check (grades only the checks selected)
    [pytest]                              # pytest.ini (or [tool.pytest.ini_options] in pyproject.toml):
    addopts = --step4                     # on for every run, so VS Code's and PyCharm's test panels list them

    the module pytest meets (attention_head.py) -> one item per check of the rubric, id = the check's id
    the first item run -> one grade of the module's folder (grader/runner.py, as `grade FOLDER`)
    each item -> passed / failed (the check's message, with its Reproduce line) / skipped (the reason)

Installed with the grader as a ``pytest11`` entry point, and off until asked: without ``--step4`` it only
adds its options; importing it imports nothing but pytest. Collecting (an editor's discovery runs
``pytest --collect-only``) reads the rubric and never grades. The grade is the one ``grade`` makes of
the folder holding the module, its tests included (the ``student_tests`` check), in the same sandboxed
worker: student code never runs in the pytest process on the grader's behalf, and the verdicts are
``grade``'s. The student's own tests are collected and run by pytest as usual, untouched.
"""

from __future__ import annotations

import os
import shlex
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from grader.models import CheckResult, GradeResult
    from grader.rubric import Rubric
    from grader.sandbox._pool import WorkerPool

OPTION = "--step4"
PLUGIN_NAME = "step4-grader"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("step4", "Project Step 4 grader (off unless --step4)")
    group.addoption(OPTION, action="store_true", default=False, help="run the grader's checks as test items")
    group.addoption(
        "--step4-submission",
        metavar="PATH",
        help="the head to grade: a .py, a .ipynb or a folder (default: the rubric's module file, attention_head.py, "
        "wherever pytest collects it)",
    )
    group.addoption("--step4-seed", type=int, metavar="N", help="base seed (default: the rubric's)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption(OPTION):
        config.pluginmanager.register(Step4(config), PLUGIN_NAME)


class Step4:
    """The plugin once ``--step4`` turned it on: collects the checks, grades once, reports each verdict."""

    def __init__(self, config: pytest.Config) -> None:
        from grader._console import printable_streams
        from grader.rubric import load_rubric

        printable_streams()  # a Windows pipe's code page (a CI log, an IDE panel): the summary never raises
        self.config = config
        self.rubric: Rubric = load_rubric()  # pydantic only: collecting imports no torch
        chosen = config.getoption("--step4-submission")
        self.submission = None if chosen is None else Path(chosen).resolve()
        self.target: Path | None = None  # what is graded: the module's folder, or the file named
        self.selected: list[str] = []  # the checks whose items are to run, in rubric order
        self.pool: WorkerPool | None = None
        self.result: GradeResult | None = None
        self.error: str | None = None
        self.own: dict[str, tuple[str, str]] = {}  # the student's tests as this session ran them: id -> outcome, text
        self.deselected = False  # some item was deselected: the session did not run the whole suite
        self.check_nodes: set[str] = set()

    # -- collecting ------------------------------------------------------------------------------

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if not self._is_the_head(file_path) or self.target is not None:
            return None  # one head per session: the first one pytest meets
        # The module's folder, as `grade FOLDER` (its tests come along); another file (a notebook, a .py of
        # another name) as `grade FILE` grades it
        module = file_path.name == f"{self.rubric.entry_points.module}.py"
        self.target = file_path.parent if module else file_path
        return HeadFile.from_parent(parent, path=file_path)

    def _is_the_head(self, path: Path) -> bool:
        module = f"{self.rubric.entry_points.module}.py"
        if self.submission is None:
            return path.name == module
        if self.submission.is_dir():
            return path.resolve() == self.submission / module
        return path.resolve() == self.submission

    def check_ids(self) -> list[str]:
        return [cid for cid, rc in self.rubric.checks.items() if rc.enabled]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """The student's tests first, the checks after them: the grade then takes what this session saw of the
        student's tests instead of running them again (issue 53.9)."""
        checks: list[pytest.Item] = [i for i in items if isinstance(i, CheckItem)]
        self.check_nodes = {i.nodeid for i in checks}
        items[:] = [i for i in items if not isinstance(i, CheckItem)] + checks

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected = self.deselected or any(not isinstance(i, CheckItem) for i in items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A student's test as pytest reported it: its outcome (a failure in any phase counts) and its text."""
        if report.nodeid in self.check_nodes:
            return
        if report.when == "call" or report.outcome != "passed":
            outcome = "error" if report.when != "call" and report.failed else report.outcome
            if self.own.get(report.nodeid, ("passed", ""))[0] == "passed" or outcome != "passed":
                self.own[report.nodeid] = (outcome, report.longreprtext if report.failed else "")

    def session_run(self) -> object | None:
        """What this session saw of the student's tests, as the kit's student_tests reads a run (None: it did
        not run them all, so the grade runs them itself)."""
        if self.deselected or not self.own:
            return None
        from grader.checks._student_tests import session_run

        return session_run(self.own)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Note the checks left to run (after -k, node ids, deselection) and start the head's zygote, so
        its torch import overlaps the student's tests that run first."""
        chosen = {item.name for item in session.items if isinstance(item, CheckItem)}
        self.selected = [cid for cid in self.check_ids() if cid in chosen]
        if self.selected and not self.config.option.collectonly:
            from grader.sandbox._pool import WorkerPool

            # one grade per session: no standby kept behind its worker (Windows, see grader/sandbox/_winslot.py)
            self.pool = WorkerPool(2, uid_base=self.rubric.limits.sandbox_uid_base, lazy=True, spares=False)
            self.pool.prestart(1, tests=False)  # the student's tests take the other slot, started lazily

    # -- grading, once ---------------------------------------------------------------------------

    def verdict(self, check_id: str) -> CheckResult | str:
        """The check's result in this session's grade (made on the first call), or why there is none."""
        if self.result is None and self.error is None:
            self._grade()
        if self.error is not None:
            return self.error
        assert self.result is not None
        found = next((c for c in self.result.checks if c.id == check_id), None)
        return found if found is not None else f"{check_id} was not graded"

    def _grade(self) -> None:
        from grader.runner import grade, host_state_kept
        from grader.submission import SubmissionError

        assert self.target is not None and self.pool is not None
        selected = self.selected if set(self.selected) != set(self.check_ids()) else None
        label = os.path.relpath(self.target, self.config.invocation_params.dir)
        head = Path(label if self.target.is_file() else os.path.join(label, f"{self.rubric.entry_points.module}.py"))

        def reproduce(check_id: str, seed: int) -> str:  # a pytest command, as the student ran (issue 53.9)
            return f"pytest --step4 {shlex.quote(f'{head.as_posix()}::{check_id}')} --step4-seed {seed}"

        try:
            with host_state_kept():
                self.result = grade(
                    self.target,
                    self.rubric,
                    seed=self.config.getoption("--step4-seed"),
                    only=selected,
                    pool=self.pool,
                    tests_pool=self.pool,
                    label=label,
                    visuals=False,
                    reproduce=reproduce,
                    own_run=self.session_run(),
                )
        except SubmissionError as exc:
            self.error = f"grade: error: {exc}"
        except Exception:  # a bug of ours: every check item says so, with the traceback
            self.error = f"Internal grader error (not your code; please report it):\n{traceback.format_exc()}"
        finally:
            self.pool.begin_close()  # the workers are gone; the zygotes exit while the tests go on

    # -- the end -----------------------------------------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from grader.report import wording

        if self.result is None:
            if self.target is None:
                module = f"{self.rubric.entry_points.module}.py"
                terminalreporter.write_line(f"step4: no {module} was collected (run pytest --step4 in its folder)")
            return
        terminalreporter.write_sep("-", "step4 grade")
        sentence = wording.causes_sentence(self.result)
        failed = wording.diagnosis_error_line(self.result)  # the grader's own error is never silent (issue 35)
        proven = wording.diagnosis_complete_line(self.result)  # the diagnosis's proof (issue 35)
        pending = wording.pending_line(self.result)  # points the kit cannot grade (issue 53.1)
        lines = (sentence, proven, failed, pending, wording.scoring_line(self.result), wording.score_line(self.result))
        for line in lines:
            if line:
                terminalreporter.write_line(line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.pool is not None:
            self.pool.close()


def _plugin(config: pytest.Config) -> Step4:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    assert isinstance(plugin, Step4)  # its items exist only once it is registered
    return plugin


class CheckFailed(Exception):
    """A check's failure as pytest shows it: its message, which ends with its Reproduce line."""


class HeadFile(pytest.File):
    """The student's head, as pytest sees it: one item per check of the rubric, in rubric order."""

    def collect(self) -> list[pytest.Item]:
        return [CheckItem.from_parent(self, name=cid) for cid in _plugin(self.config).check_ids()]


class CheckItem(pytest.Item):
    """One check: the session's grade judged it; this item only says what the grade said."""

    def runtest(self) -> None:
        from grader.report import wording

        plugin = _plugin(self.config)
        found = plugin.verdict(self.name)
        if isinstance(found, str):
            raise CheckFailed(found)
        if wording.is_withheld(found):
            text = wording.WITHHELD.get(found.visibility, "")
        else:
            pointer = wording.pointer(plugin.result, found) if plugin.result is not None else None
            text = wording.text(found) + (f"\n{pointer}" if pointer else "")
            cause = wording.check_where(plugin.result, found) if plugin.result is not None else None
            if cause is not None and cause.where is not None:
                text = f"{wording.where_line(cause)}\n{text}"
                self._at(cause.where.line, cause.where.cell)
        if found.status == "skipped":  # located at the head, never in the grader's site-packages (issue 53.9)
            raise pytest.skip.Exception(text, _use_item_location=True)
        if found.status == "failed":
            raise CheckFailed(text)
        if found.status != "passed":  # a crash, a timeout, an error of ours: failed, saying which
            raise CheckFailed(f"{wording.STATUS_LABEL[found.status]}: {text}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def _at(self, line: int, cell: int | None) -> None:
        """This item's location becomes the student's line (issue 28): the report pytest makes next reads it, so
        an editor jumps there. A notebook's line is in a cell, not the file: the location stays at its top."""
        if cell is None and self.path.suffix == ".py":
            path, _, name = self.location
            self.__dict__["location"] = (path, line - 1, name)  # pytest's location is 0-based and cached here

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"step4 check {self.name}"  # line 0: an editor opens the head at its top
