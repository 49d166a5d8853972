"""Issue 18: ``grade PATH --watch`` re-grades on every save, with a cold grade's verdicts and output.

The fast tests cover the pieces (what is watched, the change line, cancelling a pool's request). The slow
ones run the watch as a student does: the real ``grade --watch`` process saved into and interrupted
(its blocks against cold ``grade`` processes on the same files), a save that abandons a hanging grade,
and hundreds of grades in one process with nothing left behind. Every wait is bounded and generous;
nothing asserts how fast anything is.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from processes import survivors

from grader.checks import CHECKS
from grader.head import Head
from grader.library import known_heads, materialize, reference_path
from grader.models import CheckResult, GradeResult
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import Sandbox, WorkerPool, fork_supported
from grader.sandbox._pool import Cancelled
from grader.watch import Outcome, Session, change_line, watched

REPO = Path(__file__).resolve().parent.parent
HANGS = Path(__file__).resolve().parent / "hostile" / "hangs"
CHAFFS = {h.id: h for h in known_heads("chaff")}
REFERENCE = reference_path().read_text(encoding="utf-8")
SYNTAX_ERROR = REFERENCE.replace("def causal_self_attention(", "def causal_self_attention(:", 1)
HANG = materialize((HANGS / "hang_everything.py").read_text(encoding="utf-8"))
forking = pytest.mark.skipif(not fork_supported(), reason="cancelling a request in flight needs a zygote")


# -- the pieces --------------------------------------------------------------------------------------


def _check(cid: str, status: str, score: float, max_score: float = 8) -> CheckResult:
    return CheckResult(
        id=cid, title=cid, cites="", status=status, score=score, max_score=max_score, message="", seed=1, duration_s=0
    )  # type: ignore[arg-type]


def _result(*checks: CheckResult) -> GradeResult:
    return GradeResult(
        submission="s",
        seed=1,
        score=sum(c.score for c in checks),
        max_score=sum(c.max_score for c in checks),
        checks=list(checks),
        rubric="r",
        duration_s=0,
    )


def test_change_line_names_each_changed_verdict_and_the_score() -> None:
    same = _check("x", "passed", 8)
    before = _result(
        _check("causal_mask", "failed", 0), _check("reference_match", "failed", 3), same, _check("hull", "failed", 0)
    )
    after = _result(
        _check("causal_mask", "passed", 8), _check("reference_match", "failed", 5), same, _check("hull", "passed", 8)
    )
    assert change_line(before, after) == (
        "Since the last run: causal_mask, hull: failed -> passed, reference_match: 3 -> 5 / 8; score 11 -> 29"
    )
    assert change_line(after, after) == "Since the last run: no change (score 29 / 32)"
    assert change_line(None, after) == "Since the last run: nothing yet (first grade of this watch; score 29 / 32)"


def test_a_newly_failing_test_of_the_students_is_a_change() -> None:
    """Issue 53.6: the kit's student_tests stays pending at the same score when a second test of the student's fails
    on the head; the change line names it, never 'no change'."""
    from grader.models import OwnTests

    def tests(*failing: str) -> CheckResult:
        own = OwnTests(passed=3 - len(failing), failed=len(failing), skipped=0, failing=list(failing))
        check = _check("student_tests", "failed" if failing else "passed", 0, 9)
        return check.model_copy(update={"pending": "graded on submission", "own_tests": own})

    same = _check("x", "passed", 8)
    one, two = _result(same, tests("t.py::test_a")), _result(same, tests("t.py::test_a", "tests/t2.py::test_b"))
    assert change_line(one, two) == ("Since the last run: student_tests: tests/t2.py::test_b now fails; score 8 -> 8")
    assert change_line(two, one) == "Since the last run: student_tests: tests/t2.py::test_b now passes; score 8 -> 8"
    assert change_line(_result(same, tests()), one) == (
        "Since the last run: student_tests: passed -> failed (t.py::test_a now fails); score 8 -> 8"
    )


def test_a_file_is_watched_with_the_tests_folder_beside_it(tmp_path: Path) -> None:
    """Issue 53.6: a save in the tests/ folder beside a graded file is seen (the watch takes that folder too)."""
    (tmp_path / "tests").mkdir()
    head = tmp_path / "attention_head.py"
    folders, recursive, relevant = watched(head)
    root = tmp_path.resolve()
    assert folders == (root, root / "tests") and not recursive
    assert relevant(root / "tests" / "test_more.py") and relevant(root / "test_mine.py")
    assert not relevant(root / "tests" / "data" / "x.py")


def test_what_is_watched(tmp_path: Path) -> None:
    (tmp_path / "attention_head.py").write_text("")
    folders, recursive, relevant = watched(tmp_path, ignore=(tmp_path / "out.py",))
    assert folders == (tmp_path.resolve(),) and recursive
    root = tmp_path.resolve()
    for name in ("attention_head.py", "test_mine.py", "tests/test_more.py", "Step 4/attention_head.py", "nb.ipynb"):
        assert relevant(root / name), name  # the module, helpers, the student's tests, a notebook
    for name in ("report.html", "r.json", "__pycache__/x.py", ".ipynb_checkpoints/nb.ipynb", ".x.py", "out.py"):
        assert not relevant(root / name), name  # outputs, caches, editors' and Jupyter's hidden files
    assert not relevant(tmp_path.parent / "elsewhere.py")

    single = tmp_path / "mine.ipynb"
    folders, recursive, relevant = watched(single)
    assert folders == (root,) and not recursive  # a file is watched through its folder: editors replace it
    assert relevant(single.resolve()) and not relevant(root / "attention_head.py")


@forking
def test_cancel_cuts_a_hanging_request_short(write_head: Callable[..., Path], rubric: Rubric, pool: WorkerPool) -> None:
    """WorkerPool.cancel, from another thread, kills the worker of a request in flight; that request and
    every later one raise Cancelled until resume(), and then the pool lends working sandboxes again."""
    folder = write_head(HANG)
    outcome: dict[str, Any] = {}
    try:
        with Sandbox(folder, rubric.limits, pool=pool) as sandbox:
            assert sandbox.start().status == "ok"
            worker = psutil.Process(sandbox._live.worker.pid)  # type: ignore[union-attr]

            def call() -> None:
                try:
                    params = {"fn": "causal_self_attention", "args": []}
                    outcome["reply"] = sandbox.request("call", params, {}, timeout_s=600)
                except Cancelled:
                    outcome["cancelled"] = True

            thread = threading.Thread(target=call)
            thread.start()
            time.sleep(0.5)  # most likely in the call by now; if not, the request is refused at its start
            pool.cancel()
            thread.join(120)
            assert outcome == {"cancelled": True}
            assert not _running(worker)
            with pytest.raises(Cancelled):
                sandbox.request("attrs", {"names": ["causal_self_attention"]}, {})
    finally:
        pool.resume()
    with Sandbox(folder, rubric.limits, pool=pool) as sandbox:
        assert sandbox.request("attrs", {"names": ["causal_self_attention"]}, {}).status == "ok"


# -- a session in this process ---------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One outcome as a test keeps it (not the result itself: keeping every result would be a leak)."""

    cancelled: bool
    error: str | None
    score: float | None
    problems: int | None  # checks failed, in error or timed out


class Outcomes:
    """What a session reports, with bounded waits."""

    def __init__(self) -> None:
        self.items: list[Seen] = []
        self._changed = threading.Condition()

    def add(self, outcome: Outcome) -> None:
        r = outcome.result
        problems = None if r is None else sum(c.status in ("failed", "error", "timeout") for c in r.checks)
        seen = Seen(outcome.cancelled, outcome.error, None if r is None else r.score, problems)
        with self._changed:
            self.items.append(seen)
            self._changed.notify_all()

    def settled(self) -> int:
        return sum(not o.cancelled for o in self.items)

    def wait_settled(self, n: int, timeout: float = 240) -> list[Seen]:
        """Until ``n`` grades have ended other than abandoned (each save's last grade)."""
        with self._changed:
            assert self._changed.wait_for(lambda: self.settled() >= n, timeout), f"{self.items}"
            return list(self.items)


def _session(
    folder: Path, rubric: Rubric, pool: WorkerPool, outcomes: Outcomes, shown: list[GradeResult], **options: Any
) -> Session:
    def grade_once() -> GradeResult:
        return grade(folder, rubric, pool=pool, visuals=False, **options)

    def show(before: GradeResult | None, result: GradeResult) -> None:
        shown.append(result)
        del shown[:-1]  # only the last: a test that kept them all would leak them

    return Session(grade_once, show, pool, on_outcome=outcomes.add)


@forking
@pytest.mark.slow
def test_a_save_during_a_grade_abandons_it(tmp_path: Path, rubric: Rubric) -> None:
    """A head that hangs in every function (its grade would take minutes at these limits): the save of a
    correct head abandons that grade at once, no worker of it survives, and only the new grade is shown."""
    slow = rubric.model_copy(
        update={"limits": rubric.limits.model_copy(update={"per_call_timeout_s": 200, "per_submission_timeout_s": 600})}
    )
    (tmp_path / "attention_head.py").write_text(HANG, encoding="utf-8")
    outcomes = Outcomes()
    with WorkerPool(1, uid_base=rubric.limits.sandbox_uid_base) as pool:
        shown: list[GradeResult] = []
        session = _session(tmp_path, slow, pool, outcomes, shown)
        session.start()
        hung = _hung_worker(pool)  # the grade is inside a call that would take 200 s
        (tmp_path / "attention_head.py").write_text(REFERENCE, encoding="utf-8")
        session.saved()
        first, second = outcomes.wait_settled(1, timeout=150)
        assert first.cancelled and not _running(hung)
        assert second.problems == 0  # the correct head's grade
        assert len(shown) == 1 and shown[0].score == second.score
        assert session.stop()
        assert _zygote_children(pool) == []


def _hung_worker(pool: WorkerPool, timeout: float = 120) -> psutil.Process:
    """The worker of the pool's zygote once it has spent a second of CPU time or more (the hang spins
    or sleeps: then a second of its life), whichever comes first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in _zygote_children(pool):
            try:
                if time.time() - proc.create_time() > 1.0:
                    return proc
            except psutil.Error:
                continue
        time.sleep(0.05)
    raise AssertionError("no worker ran the hanging head")


def _zygote_children(pool: WorkerPool) -> list[psutil.Process]:
    found = []
    for slot in pool._slots:
        pid = getattr(slot, "_info", {}).get("pid")
        if pid is not None:
            found += [p for p in psutil.Process(pid).children(recursive=True) if _running(p)]
    return found


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@forking
@pytest.mark.slow
def test_hundreds_of_grades_leave_nothing_behind(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    """Memory stays flat: after hundreds of saves (a third of them abandoned mid-grade) the process holds no
    more results, heads, sandboxes, threads or open files than after the first few, its memory has not
    grown by more than noise, and the zygote has no child left."""
    heads = [REFERENCE, CHAFFS["no_mask"].source(), SYNTAX_ERROR, CHAFFS["no_scaling"].source()]
    only = ["interface", "reference_match", "causal_mask"]  # small grades; diagnosis runs on the chaffs
    outcomes = Outcomes()
    shown: list[GradeResult] = []
    session = _session(tmp_path, rubric, pool, outcomes, shown, only=only)
    path = tmp_path / "attention_head.py"
    path.write_text(heads[0], encoding="utf-8")
    session.start()
    outcomes.wait_settled(1)

    def saves(count: int) -> None:
        for k in range(count):
            n = outcomes.settled()
            path.write_text(heads[k % len(heads)], encoding="utf-8")
            session.saved()
            if k % 3 == 2:  # and a second save in a moment: the grade of the first is abandoned
                time.sleep(0.05)
                session.saved()
            outcomes.wait_settled(n + 1)

    try:
        saves(20)
        before = _footprint()
        saves(200)
        after = _footprint()
    finally:
        assert session.stop()
    assert sum(o.cancelled for o in outcomes.items) > 0
    assert outcomes.settled() == 221 and all(o.score is not None for o in outcomes.items if not o.cancelled)
    assert after["objects"] == before["objects"], (before, after)
    assert after["threads"] == before["threads"] and after["fds"] == before["fds"], (before, after)
    assert after["rss"] - before["rss"] < 64 << 20, (before, after)  # a leak of 1 MiB a grade would show
    assert _zygote_children(pool) == []


def _footprint() -> dict[str, Any]:
    """What a leak would grow: live results, heads and sandboxes, threads, open files, resident memory."""
    time.sleep(0.5)  # the last grade's helper threads end
    gc.collect()
    kinds = (GradeResult, Head, Sandbox)
    counts = Counter(type(o) for o in gc.get_objects())  # (isinstance would wake deprecated torch proxies)
    objects = {k.__name__: counts[k] for k in kinds}
    me = psutil.Process()
    return {"objects": objects, "threads": threading.active_count(), "fds": me.num_fds(), "rss": me.memory_info().rss}


# -- the real command ----------------------------------------------------------------------------------


# A terminal's foreground command, whose Ctrl-C :meth:`WatchProcess.interrupt` plays: SIGINT at its default
# disposition, whatever this test run's own is. A job started with ``&`` by a shell without job control (a CI
# script's background step) ignores SIGINT, its children inherit that through exec, and the watch then rightly
# ignores Ctrl-C as a background job does (grader/watch.py, _signals_stop): it ran until the test's timeout.
FOREGROUND = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"
)


class WatchProcess:
    """``grade FOLDER --watch --json FILE`` in a process of its own; its stdout cut into blocks (a cold
    grade's lines, then the change line) as they arrive, and every process under it remembered."""

    def __init__(
        self,
        folder: Path,
        json_path: Path,
        grade: Sequence[str | Path] = (sys.executable, "-m", "grader"),
        *,
        cwd: Path = REPO,
        env: dict[str, str] | None = None,
    ) -> None:
        """``grade`` is the command (the installed kit's ``grade`` in tests/test_first_hour.py), run in ``cwd``."""
        cmd = [*map(str, grade), str(folder), "--watch", "--json", str(json_path)]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FOREGROUND, *cmd],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env() if env is None else env,
        )
        self.lines: list[str] = []
        self.err: list[str] = []
        self.seen: dict[int, float] = {}  # pid -> create time of every process under it
        self._lock = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.err))
        ]
        for thread in self._readers:
            thread.start()
        threading.Thread(target=self._survey, daemon=True).start()

    def close(self) -> None:
        """Kill it if it still runs; close its pipes once everything it wrote was read."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(60)
        for thread in self._readers:
            thread.join(60)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _read(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            with self._lock:
                into.append(line.rstrip("\n"))
                self._lock.notify_all()

    def _survey(self) -> None:
        while self.proc.poll() is None:
            with self._lock:
                for p in _descendants(self.proc.pid):
                    self.seen.setdefault(p.pid, p.create_time())
            time.sleep(0.05)

    def blocks(self) -> list[list[str]]:
        with self._lock:
            out, block = [], []
            for line in self.lines:
                block.append(line)
                if line.startswith("Since the last run:"):
                    out.append(block)
                    block = []
            return out

    def wait_blocks(self, n: int, timeout: float = 240) -> list[list[str]]:
        deadline = time.monotonic() + timeout
        while len(self.blocks()) < n:
            assert self.proc.poll() is None, "\n".join(self.err)
            assert time.monotonic() < deadline, f"{len(self.blocks())} blocks of {n}; stderr: {self.err}"
            time.sleep(0.05)
        return self.blocks()

    def interrupt(self, timeout: float = 120) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout)

    def survivors(self, timeout: float = 30) -> list[int]:
        """Processes it started that still run (waiting a little: the kernel reaps asynchronously)."""
        return survivors(self.seen, timeout)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _cold(folder: Path, json_path: Path) -> tuple[list[str], dict[str, Any]]:
    """A cold ``grade FOLDER --json FILE``: its stdout lines and its JSON."""
    cmd = [sys.executable, "-m", "grader", str(folder), "--json", str(json_path)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), _comparable(json_path)


def _comparable(json_path: Path) -> dict[str, Any]:
    """The JSON results less what differs between two cold grades too: durations, the measured times of a
    timed check, and which sandbox uid was free to lease."""
    data = json.loads(json_path.read_text(encoding="utf-8"))
    data.pop("duration_s")
    data["protections"] = [p for p in data["protections"] if not p.startswith("uid ")]
    for check in data["checks"]:
        check.pop("duration_s")
        if CHECKS[check["id"]].timed:
            check.pop("message")
    for step in data["diagnosis_steps"]:  # the diagnosis's passes' times, as the durations
        step.pop("seconds")
    return data


@pytest.fixture
def session_folder(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "attention_head.py").write_text(REFERENCE, encoding="utf-8")
    yield folder, tmp_path / "watch.json"


@forking
@pytest.mark.slow
def test_watch_prints_and_writes_what_cold_grades_do(session_folder: tuple[Path, Path], tmp_path: Path) -> None:
    """A sequence of edits (a correct head, two known bugs in different functions, a SyntaxError), then a
    burst of saves: each block is exactly a cold grade's output on the same files, plus the change line,
    and the JSON file is rewritten each time with a cold grade's results. Ctrl-C ends it with status 0
    and no process left, even in the middle of a grade."""
    folder, json_path = session_folder
    module = folder / "attention_head.py"
    edits = [REFERENCE, CHAFFS["no_mask"].source(), SYNTAX_ERROR, CHAFFS["stats_global_rng"].source()]
    watch = WatchProcess(folder, json_path)
    try:
        outputs = []
        for k, source in enumerate(edits):
            if k:
                module.write_text(source, encoding="utf-8")
            block = watch.wait_blocks(k + 1)[k]
            outputs.append((block, _comparable(json_path)))
        for source in (SYNTAX_ERROR, CHAFFS["no_scaling"].source(), REFERENCE):  # one burst: the last is graded
            module.write_text(source, encoding="utf-8")
        burst = watch.wait_blocks(len(edits) + 1)[len(edits)]  # (a burst split by a slow moment: the same block)
        module.write_text(CHAFFS["no_scaling"].source(), encoding="utf-8")  # Ctrl-C while this one grades
        time.sleep(0.3)
        assert watch.interrupt() == 0, "\n".join(watch.err)
        assert watch.survivors() == []
    finally:
        watch.close()
    assert len(watch.seen) >= 2  # the zygote and workers were seen, so "no survivor" means something
    time.sleep(1.0)  # a save's watcher and the last grade are gone: nothing may still write the file
    for (block, data), source in zip(outputs, edits, strict=True):
        module.write_text(source, encoding="utf-8")
        cold_lines, cold_data = _cold(folder, tmp_path / "cold.json")
        assert block[:-1] == cold_lines
        assert data == cold_data
    assert block[-1].startswith("Since the last run: ")
    assert burst[:-1] == outputs[0][0][:-1]  # the burst ended on the correct head: graded as the first was
    changes = [b[-1] for b, _ in outputs]
    assert changes[0].startswith("Since the last run: nothing yet")
    assert re.search(r"\bcausal_mask\b[\w, ]*: passed -> failed", changes[1]), changes[1]  # no_mask
