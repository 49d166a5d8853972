"""Grading, top to bottom: submission -> isolated worker -> checks -> verdicts -> score.

The only place where student failures are caught: each check runs inside :func:`run_check`, which
turns a crash, timeout, missing function or internal error into that check's verdict, so one broken
function never hides the other checks.
"""

from __future__ import annotations

import collections
import contextlib
import shlex
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from grader._notebook import cell_label
from grader._paths import bundled
from grader._timeline import mark
from grader.checks import CHECKS, CheckSpec, Ctx, Verdict
from grader.checks._base import BREACH, NOT_DEFINED, STOPPED, begin, judged, stop_of
from grader.checks._exercises import stats_seed
from grader.checks._student_tests import suite_files, uncovered
from grader.diagnosis._causes import caps
from grader.diagnosis._naming import cause_ids, prices
from grader.head import Head, MissingFunction, StudentFailure
from grader.inputs import at_length, at_model_width
from grader.models import (
    FAILING,
    Attempts,
    CheckResult,
    Diagnosis,
    DiagnosisStep,
    GradeResult,
    LimitHit,
    SourceLine,
    StudentOutput,
)
from grader.oracle import Oracle, load_oracle
from grader.rubric import CheckRubric, Rubric, RubricError, load_rubric
from grader.sandbox import Sandbox, WorkerPool
from grader.sandbox._pool import Cancelled
from grader.sandbox._slots import SlotError
from grader.scoring import provisional, tally
from grader.submission import Prepared, contract_names, is_test_file, prepare
from grader.visuals import collect_visuals, reference_scale

if TYPE_CHECKING:
    from grader.diagnosis import Examination
    from grader.diagnosis._where import Where

KIT_NOTE = (
    "Graded with the student kit: reference_match and the Gaussian checks compare with the reference's stored "
    "outputs on fixed public cases, and your own tests are graded on submission."
)


Reproduce = Callable[[str, int], str]  # (check id, seed) -> the line that reruns that check alone


def validate_ids(rubric: Rubric, path: Path | None = None, oracle: Oracle | None = None) -> None:
    """Every check the rubric names must exist, and every cause it prices (``oracle``'s edition's causes)."""
    where = path or bundled("rubrics") / "step4.toml"
    unknown = [cid for cid in [*rubric.checks, *rubric.pending] if cid not in CHECKS]
    if unknown:
        raise RubricError(f"{where}: checks.{unknown[0]}: no such check (known: {', '.join(CHECKS)})")
    causes = cause_ids(oracle)
    unpriced = [m for m in rubric.mistakes if m not in causes]
    if unpriced:
        raise RubricError(f"{where}: mistakes.{unpriced[0]}: no such cause (known: {', '.join(sorted(causes))})")


def checked_rubric(path: Path | None = None) -> Rubric:
    """:func:`grader.rubric.load_rubric`, then :func:`validate_ids`: a rubric that every command can grade with."""
    rubric = load_rubric(path)
    validate_ids(rubric, path)
    return rubric


def reproduce_command(submission: str, check_id: str, seed: int) -> str:
    return f"grade {shlex.quote(submission)} --only {check_id} --seed {seed}"


def grade(
    submission: Path,
    rubric: Rubric,
    *,
    seed: int | None = None,
    only: list[str] | None = None,
    device: str = "cpu",
    pool: WorkerPool | None = None,
    tests_pool: WorkerPool | None = None,
    label: str | None = None,
    visuals: bool = True,
    definitions_only: bool = False,
    parallel: bool = True,
    oracle: Oracle | None = None,
    reproduce: Reproduce | None = None,
    tests_beside: bool = True,
    prepared: Prepared | None = None,
    sandbox: Sandbox | None = None,
    own_run: object | None = None,
) -> GradeResult:
    """Grade one submission and return every verdict; writes nothing.

    ``pool`` lends the worker for the head; ``tests_pool`` the workers for the student's own tests. It
    must never be a pool whose every slot may be busy with heads (a batch): that would deadlock. With
    neither given, one private pool of two slots serves both, one slot each. ``visuals=False`` skips
    the report's visualisation data (about a second) when no report will be written.
    ``definitions_only``: grade a module on its definitions only, as a notebook is (no top-level code runs).
    ``parallel``: run the checks of the other contract functions on a second worker meanwhile (see
    :func:`_run_checks`); a batch, whose slots are all busy with other submissions, passes False.
    ``oracle``: what reference_match and the Gaussian checks compare with (default: the installed edition's,
    :func:`grader.oracle.load_oracle`).
    ``reproduce``: the line that reruns one failing check, from its id and seed (default: the ``grade``
    command on ``label``; a notebook's ``check()`` says ``check("causal_mask", seed=20417)``).
    ``tests_beside``: a ``.py`` submission brings the test files beside it (:mod:`grader.submission`); a batch
    passes False for a file that sits among other students' files.
    ``prepared`` and ``sandbox``: the submission already prepared (:func:`grader.submission.prepare`, as here)
    and a sandbox on it, its worker perhaps launched (a cold grade starts them before it imports torch); the
    grade closes that sandbox as its own, and the caller removes the prepared copy.
    ``own_run``: the student's tests as a pytest session already ran them on the head (``pytest --step4``): the kit's
    student_tests takes it instead of running them again (:func:`grader.checks._student_tests.session_run`).
    """
    started = time.perf_counter()
    seed = rubric.seed if seed is None else seed
    label = label or str(submission)
    rerun = reproduce or partial(reproduce_command, label)
    selected = [cid for cid, rc in rubric.checks.items() if rc.enabled and (not only or cid in only)]
    ref = oracle or load_oracle()
    validate_ids(rubric, oracle=ref)  # a rubric built in code, too, names only checks and causes that exist
    plot = visuals and not only  # the report's pictures; --only runs are about one check
    reference_side = _reference_side(ref, seed, plot=plot)
    with contextlib.ExitStack() as stack:
        if pool is None:
            pool = stack.enter_context(  # one grade: no standby kept behind its worker (Windows, see _winslot)
                WorkerPool(2, uid_base=rubric.limits.sandbox_uid_base, lazy=True, spares=False)
            )
            tests_pool = tests_pool or pool
        sub = prepared or stack.enter_context(
            prepare(
                submission,
                rubric.entry_points.module,
                contract=contract_names(rubric.entry_points),
                packages=rubric.packages,
                definitions_only=definitions_only,
                tests_beside=tests_beside,
            )
        )
        mark("submission prepared")
        if tests_pool is not None and "student_tests" in selected and _brings_tests(sub.dir, rubric):
            tests_pool.prestart_spare(tests=True)  # its torch import overlaps the checks, not the tests' start
        with sandbox or Sandbox(sub.dir, rubric.limits, pool=pool) as sandbox:
            head = Head(sandbox, rubric.entry_points, sub.unavailable, sub.provided)
            head.syntax_error = sub.syntax_error
            memo: dict[str, object] = {}  # what several checks (and the plot) use: precision, Exercise 3

            def run(cid: str, on: Head) -> CheckResult:
                ctx = Ctx(
                    on, ref, rubric, seed, cid, sub.source, device, submission_dir=sub.dir, pool=tests_pool, memo=memo
                )
                ctx.own_run = own_run
                return run_check(CHECKS[cid], ctx, rubric.checks[cid], rerun)

            results = _run_checks(selected, run, sandbox, head, parallel=parallel, meanwhile=reference_side)
            results = [uncovered(r, results) if r.id == "student_tests" else r for r in results]
            results += [hidden_pending(cid, points, seed) for cid, points in rubric.pending.items() if not only]
            mark("checks done")
            # where the head runs first (the diagnosis's rules of lengths, flag and widths alone): the checks a length
            # stopped run again there, then the diagnosis goes on from that state (issue 51: its rules run once, but
            # those that read what the checks run again changed)
            exam = _examine(results, head, ref, rubric, seed, where_only=True)
            again = _stopped_by_length(exam) if exam else []
            if exam and again and (exam.where.runs_at is not None or exam.where.square):  # where the head runs
                results = _run_at_length(again, exam.where, lambda cid: run(cid, head), results, memo)
            if exam:
                first, exam = exam, _examine(results, head, ref, rubric, seed, previous=exam)
                if first.error and not (exam and exam.error):  # the first diagnosis's exception is still said
                    exam = replace(exam, error=first.error) if exam else replace(first, causes=[], stopped=())
                exam = replace(exam, steps=_both(first.steps, exam.steps)) if exam else exam  # both cost
            mark("diagnosis done")
            diagnosis = [_as_written(d, sub) for d in _slow_lines(exam.causes, results, head, sub)] if exam else []
            error = exam.error if exam else None
            proof = exam.proof if exam and diagnosis else None  # the diagnosis proven complete (issue 35)
            pictures = collect_visuals(head, ref, seed, memo) if plot else None
            mark("pictures done")
            protections = list(sandbox.protections)
            absent = sandbox.absent_protections
            limits_hit = _limits_hit(head, rubric)
            attempts = Attempts(**getattr(sandbox, "attempts", {}))
        # Leaving the sandbox killed every process the submission started; only now do we conclude, and
        # only now is its output complete (the pipe is drained to EOF once every writer is dead).
        out = sandbox.output
    mark("sandbox closed")
    output = StudentOutput(text=out.text, truncated=out.truncated, bytes_dropped=out.bytes_dropped)
    diagnosis = required_first(diagnosis, results)
    checks = with_advice(_attached(results, diagnosis))
    counted = tally(checks, diagnosis, prices(rubric.mistakes, ref), caps())
    return GradeResult(
        submission=label,
        seed=seed,
        score=counted.score,
        max_score=sum(r.max_score for r in results if not r.extra_credit),
        scoring=counted.scoring,
        score_by_checks=counted.score_by_checks,
        scoring_note=provisional(counted.note, error),
        diagnosis_error=error,
        diagnosis_complete=proof,
        diagnosis_steps=exam.steps if exam else [],
        checks=checks,
        diagnosis=counted.diagnosis,
        protections=protections,
        absent_protections=absent,
        devices=[device],
        output=output,
        limits_hit=limits_hit,
        attempts=attempts,
        rubric=rubric.name,
        duration_s=round(time.perf_counter() - started, 3),
        notes=sub.notes + ([KIT_NOTE] if ref.edition == "student" else []),
        visuals=pictures,
    )


HIDDEN_PENDING = (
    "{cid} is one of the instructor's hidden checks: it is graded when you submit, and only its outcome is shown then."
)


def hidden_pending(cid: str, points: float, seed: int) -> CheckResult:
    """A check this edition does not run (the kit's rubric's ``pending``: a hidden check), as a pending result."""
    spec = CHECKS[cid]
    return CheckResult(
        id=cid,
        title=spec.title,
        cites=spec.cites,
        status="skipped",
        score=0.0,
        max_score=points,
        message="Not run here: graded on submission.",
        seed=seed,
        duration_s=0.0,
        pending=HIDDEN_PENDING.format(cid=cid),
    )


def _limits_hit(head: Head, rubric: Rubric) -> list[LimitHit]:
    """The sandbox's limits the head ran into (issue 53.7): the memory cap, with the largest allocation refused."""
    if not head.memory_hit:
        return []
    tried = [b for b in head.memory_hit if b is not None]
    return [LimitHit(limit="memory", cap_mb=rubric.limits.memory_mb, tried_bytes=max(tried) if tried else None)]


RunOne = Callable[[str, Head], CheckResult]


def _brings_tests(folder: Path, rubric: Rubric) -> bool:
    """Whether the submission's folder holds a test file, found as the student_tests check finds its suite."""
    return any(is_test_file(name) for name in suite_files(folder, rubric.entry_points.module)[0])


def _beside_the_head(spec: CheckSpec) -> bool:
    """A check of other contract functions than the head (the Gaussian kernel, Exercise 3, the extensions)."""
    return bool(spec.needs) and "causal_self_attention" not in spec.needs


def _run_checks(
    selected: list[str],
    run: RunOne,
    sandbox: Sandbox,
    head: Head,
    *,
    parallel: bool,
    meanwhile: Callable[[], None] = lambda: None,
) -> list[CheckResult]:
    """Every selected check's result, in rubric order; ``meanwhile`` (trusted work, the reference side)
    runs in a thread beside the checks, or after the sidecar's checks in its thread.

    With ``parallel``, the checks of the other contract functions run on a second worker
    (``Sandbox.sidecar``, importing the submission while the first worker does) in a thread while the
    head's checks run here: one core each on a two-core laptop. Once the head's checks are done (or before
    a timed check, which runs alone), this thread takes the sidecar's checks it has not started yet, from
    the last. The verdicts are the serial ones: each check makes the same seeded calls of the same
    functions, the two Heads share what a hang taught, and a check that met an interruption while both ran
    (a crash, budget or import failure: a sweep after a hang here kills the sidecar's worker too) is run
    again here at the end, alone.
    """
    beside = [cid for cid in selected if parallel and _beside_the_head(CHECKS[cid])]
    here = [cid for cid in selected if cid not in beside]
    if not beside or not here or not sandbox.sidecar_possible:
        with _thread(meanwhile):
            return [run(cid, head) for cid in selected]
    # The head's worker is forked first: the zygote forks one worker at a time, and the head's checks are the
    # longer lane (its import then overlaps the sidecar's fork). Our failure to fork one: the first request says so.
    with contextlib.suppress(SlotError):
        sandbox.launch()
    side = _Sidecar.begin(sandbox, head, beside, run, then=meanwhile)
    if side is None:  # no second worker possible: every check here, in rubric order
        with _thread(meanwhile):
            return [run(cid, head) for cid in selected]
    done: dict[str, CheckResult] = {}
    again: list[str] = []

    def run_here(cid: str) -> None:
        before, started = sandbox.interruptions, time.monotonic()
        done[cid] = run(cid, head)
        if sandbox.interruptions != before and side.ran_since(started):
            again.append(cid)

    def help_the_sidecar() -> None:
        while (cid := side.take_last()) is not None:
            run_here(cid)

    try:
        for cid in here:
            if CHECKS[cid].timed:
                help_the_sidecar()
                side.wait_for_checks()
            run_here(cid)
        help_the_sidecar()
    finally:  # a cancelled grade (grade --watch) too: the sidecar's thread has closed its worker
        side.join()
    done.update(side.done)
    for cid in sorted(again + side.again, key=selected.index):
        done[cid] = run(cid, head)
    return [done[cid] for cid in selected]


class _Sidecar:
    """Checks run on a sidecar worker in a thread, from a queue the grading thread may take the last ones
    of (:meth:`take_last`); ``done`` holds the results to keep, ``again`` the checks to run again serially
    (an interruption, or an error of ours on this side)."""

    def __init__(self, sandbox: Sandbox, head: Head, ids: list[str], run: RunOne, then: Callable[[], None]) -> None:
        self._sandbox, self._head, self._run, self._then = sandbox, head, run, then
        self._queue = collections.deque(ids)
        self._lock = threading.Lock()
        self._taken: list[str] = []  # the checks this side started
        self.done: dict[str, CheckResult] = {}
        self.again: list[str] = []
        self._cancelled = False
        self._finished: float | None = None
        self._checks_done = threading.Event()
        self._thread = threading.Thread(target=self._work, name="sidecar-checks", daemon=True)

    @classmethod
    def begin(
        cls, sandbox: Sandbox, head: Head, ids: list[str], run: RunOne, then: Callable[[], None]
    ) -> _Sidecar | None:
        side = sandbox.sidecar()
        if side is None:
            return None
        sidecar = cls(side, head.beside(side), ids, run, then)
        sidecar._thread.start()
        return sidecar

    def _next(self) -> str | None:
        with self._lock:
            if not self._queue:
                return None
            cid = self._queue.popleft()
            self._taken.append(cid)
            return cid

    def take_last(self) -> str | None:
        """The last check this side has not started, now the caller's to run; None when there is none."""
        with self._lock:
            return self._queue.pop() if self._queue else None

    def _work(self) -> None:
        try:
            while (cid := self._next()) is not None:
                before = self._sandbox.interruptions
                result = self._run(cid, self._head)
                if self._sandbox.interruptions != before or result.status == "error":
                    self.again.append(cid)
                else:
                    self.done[cid] = result
        except Cancelled:  # the grade is abandoned: join() says so in the grading thread
            self._cancelled = True
        except BaseException:  # pragma: no cover - run_check never raises; then run them all here again
            while self._next() is not None:
                pass
            self.again = [cid for cid in self._taken if cid not in self.done]
            traceback.print_exc()
        finally:
            self._finished = time.monotonic()
            # Its worker computes nothing more: a timed check waiting for that may start while it is
            # stopped (~15 ms to kill and reap), as it already runs beside ``then``.
            self._checks_done.set()
            with contextlib.suppress(Exception):
                self._sandbox.close()  # its worker only
            self._then()

    def wait_for_checks(self) -> None:
        """Until the sidecar's checks are done (its worker may still be stopping, ``then`` still run)."""
        self._checks_done.wait()

    def join(self) -> None:
        """Wait for the thread; raises Cancelled when the pool was cancelled under it."""
        self._thread.join()
        if self._cancelled:
            raise Cancelled

    def ran_since(self, moment: float) -> bool:
        finished = self._finished
        return finished is None or finished > moment


@contextlib.contextmanager
def host_state_kept() -> Iterator[None]:
    """Around a grade made inside someone else's process (a notebook's kernel, a pytest session): the
    grader's own tensors run on one thread, as ``grade`` does (leaving the cores to the worker), and what
    they draw from torch's global generator (a watch's session reseeds it before each grade, as a fresh
    process would have it) leaves the host's torch state as it was: its next cell or test sees neither."""
    import torch

    rng, threads = torch.random.get_rng_state(), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng)


def _reference_side(ref: Oracle, seed: int, *, plot: bool) -> Callable[[], None]:
    """The reference's points of the Exercise 3 plot (trusted code, cached per process), to compute while
    the worker answers: the grader would otherwise compute them after the worker is done."""

    def work() -> None:
        if plot:
            reference_scale(ref, stats_seed(seed))
            mark("reference's Exercise 3 points done")

    return work


@contextlib.contextmanager
def _thread(work: Callable[[], None]) -> Iterator[None]:
    """Run ``work`` in a thread for the duration of the block."""
    thread = threading.Thread(target=work, name="reference-side", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _slow_lines(causes: list[Diagnosis], results: list[CheckResult], head: Head, sub: Prepared) -> list[Diagnosis]:
    """A crash whose every check timed out, at the line where the worker saw the function's code as its call
    neared the limit (issue 53: the line where the time went), when the diagnosis gave it none."""
    timed_out = {c.id for c in results if c.status == "timeout"}
    sites = head.hangs.sites()  # keyed by contract name; a crash named after a check: the one function that hung
    only = next(iter(sites.values())) if len(sites) == 1 else None
    out = []
    for d in causes:
        fn = d.id.removeprefix("crash:")
        site = sites.get(fn, only) if d.kind == "crash" and d.where is None else None
        if site is None or not d.explains or not set(d.explains) <= timed_out:
            out.append(d)
            continue
        file, line, code = site
        text = sub.source.splitlines() if file == sub.module_path.name else []
        context = {n: text[n - 1] for n in range(max(1, line - 3), min(len(text), line + 3) + 1)}
        out.append(d.model_copy(update={"where": SourceLine(file=file, line=line, code=code, context=context)}))
    return out


def required_first(diagnosis: list[Diagnosis], results: list[CheckResult]) -> list[Diagnosis]:
    """The causes of the graded checks first, then those that explain only checks that cost nothing (an optional
    extension, extra credit): the diagnosis's order otherwise kept (issue 53: a crash of the optional KV cache was
    cause (1), above the head's own mistakes)."""
    graded = {c.id for c in results if not c.extra_credit and c.max_score > 0}
    return sorted(diagnosis, key=lambda d: not set(d.explains) & graded)


def _as_written(d: Diagnosis, sub: Prepared) -> Diagnosis:
    """A cause's line in the file the student wrote: a notebook's cell and the line in it, or the line of the
    .py the grader reduced to its definitions (issue 28)."""
    w = d.where
    if w is None or not sub.origin or w.file != sub.module_path.name:
        return d
    cell, line = sub.lines.get(w.line, (None, None))
    if line is None:
        return d.model_copy(update={"where": w.model_copy(update={"file": sub.origin, "context": {}})})
    context = {n: t for n, t in w.context.items() if sub.lines.get(n, (None,))[0] == cell}
    shifted = {sub.lines[n][1]: t for n, t in context.items()}
    moved = {"file": sub.origin, "line": line, "cell": cell if sub.notebook else None, "context": shifted}
    if sub.notebook and cell is not None:
        moved["cell_label"] = cell_label(cell, sub.cells_counted)
    return d.model_copy(update={"where": w.model_copy(update=moved)})


def _examine(
    results: list[CheckResult],
    head: Head,
    ref: Oracle,
    rubric: Rubric,
    seed: int,
    previous: Examination | None = None,
    *,
    where_only: bool = False,
) -> Examination | None:
    """The root causes of the failing checks; None when no check failed: the diagnosis is imported only for a head
    that fails something (about 50 ms of the grader's CPU that a passing head never needs, issue 37). ``examine``
    never raises: the grader's own exception in one of its passes is recorded in ``Examination.error`` (then
    ``GradeResult.diagnosis_error``, shown on every surface) and the other passes keep their causes (issue 35)."""
    graded = [r for r in results if r.pending is None]  # a check this edition does not grade has no cause here
    if not any(r.status in FAILING for r in graded):
        return None
    from grader.diagnosis import examine

    return examine(graded, head, ref, rubric, seed, previous, where_only=where_only)


def _both(first: list[DiagnosisStep], then: list[DiagnosisStep]) -> list[DiagnosisStep]:
    """The passes of two diagnoses of one head (the second where it runs), each counted once with both runs."""
    steps = {s.name: s for s in first}
    for s in then:
        steps[s.name] = steps[s.name].plus(s) if s.name in steps else s
    return list(steps.values())


def _attached(results: list[CheckResult], diagnosis: list[Diagnosis]) -> list[CheckResult]:
    """Each failing check with the ids of the causes that explain it (no cause: the results as they are)."""
    if not diagnosis:
        return list(results)
    from grader.diagnosis import attach_causes

    return attach_causes(results, diagnosis)


def with_advice(checks: list[CheckResult]) -> list[CheckResult]:
    """Each failing check's own advice in its message, after what it observed, where no named cause explains it;
    where one does, the cause's hint is the advice and the check's stays a field (issue 53: "mask j > i before the
    softmax" under a head that does, with a cause that names what it does instead)."""
    return [
        c.model_copy(update={"message": f"{c.message}\n{c.advice}"})
        if c.advice is not None and not c.causes and c.status in FAILING
        else c
        for c in checks
    ]


# Checks whose property is tied to their own inputs: reference_match compares on its cases (in the student
# kit, the stored public ones), a timed check's length is its point.
# interface judges the contract as written, which takes any length (issue 30).
NOT_AT_LENGTH = frozenset({"interface", "reference_match", "student_tests"})
# score_scaling's property is how the scale follows d_k != d: not observed where d_k = d.
NOT_AT_WIDTH = frozenset({"score_scaling"})


def _stopped_by_length(exam: Examination) -> list[str]:
    """The head's checks that a length it cannot take stopped, to run again at the length where it runs."""
    head_only = ((), ("causal_self_attention",))
    return [
        cid
        for cid in exam.stopped
        if cid in CHECKS and CHECKS[cid].needs in head_only and not CHECKS[cid].timed and cid not in NOT_AT_LENGTH
    ]


def _run_at_length(
    again: list[str],
    where: Where,
    run: Callable[[str], CheckResult],
    results: list[CheckResult],
    memo: dict[str, object],
) -> list[CheckResult]:
    """``results`` with the checks ``again`` run once more, every case they make of length ``T``: a head that
    takes only that length is judged there on every property that does not rest on the length (issue 24). A
    check that still cannot complete there (a case of its own length, a reply too large at T) keeps its first
    verdict: its property was not observed, and the length limit is charged for it."""
    memo.pop("precision", None)  # measured again at T too (it could not be measured at its own length)
    T = where.runs_at
    if T is not None:
        note = (
            f"Run at T = {T}, a length your head takes: it raises at the lengths this check uses (its cases are "
            "otherwise the check's own)."
        )
    else:  # issue 30: a head that runs only with d_k = d_v = d
        note = (
            "Run with d_k = d_v = d, widths your head takes: it raises at the widths this check uses (its cases are "
            "otherwise the check's own)."
        )
        again = [cid for cid in again if cid not in NOT_AT_WIDTH]
    with (
        at_length(T) if T is not None else contextlib.nullcontext(),
        at_model_width() if where.square else contextlib.nullcontext(),
    ):
        ran = [run(cid) for cid in again]
    # a check that errs or times out there was still not observed: its first verdict stays
    observed = [r for r in ran if r.status not in ("error", "timeout")]
    redone = {r.id: r.model_copy(update={"notes": [*r.notes, note]}) for r in observed}
    return [redone.get(c.id, c) for c in results]


def run_check(spec: CheckSpec, ctx: Ctx, rc: CheckRubric, reproduce: Reproduce) -> CheckResult:
    """Run one check; whatever happens, return its verdict (``reproduce``: its rerun line, for a failure)."""
    t0 = time.perf_counter()
    mark(f"check {spec.id} begins")
    begin(spec.id, ctx)
    try:
        for name in spec.needs:
            ctx.head.require(name, optional=spec.optional)
        verdict = judged(spec.id, spec.fn(ctx), ctx)
    except MissingFunction as exc:
        stop = [stop_of(exc)]
        if exc.package is not None:  # defined, but left out: it needs a package the grader does not install
            text = exc.message[:1].upper() + exc.message[1:] + "."
            status: Literal["skipped", "failed"] = "skipped" if exc.optional else "failed"
            verdict = Verdict(status, ("Optional: " if exc.optional else "") + text, stopped=stop)
        elif exc.optional:
            verdict = Verdict("skipped", f"Optional: your submission does not define `{exc.name}`; not graded.")
        else:
            verdict = Verdict("failed", f"{NOT_DEFINED}{exc.name}`, which this check needs.", stopped=stop)
    except StudentFailure as exc:
        # "failed": it ran, but what came back breaks the contract
        text = f"{BREACH}{exc.message}." if exc.status == "failed" else f"{STOPPED}{exc.message}"
        verdict = Verdict(exc.status, text, stopped=[stop_of(exc)])
    except Exception as exc:  # a bug in the grader: still a verdict, never a crash of the run
        tb = traceback.format_exception(exc)[-3:]
        verdict = Verdict(
            "error",  # type: ignore[arg-type]
            "Internal grader error (not your fault; please report it): "
            f"{type(exc).__name__}: {exc}\n{''.join(tb).rstrip()}",
        )
    ctx.head.current_check = None  # calls after the checks (diagnosis, pictures) belong to none
    mark(f"check {spec.id} ends ({verdict.status})")
    return _result(spec, ctx, rc, verdict, reproduce, time.perf_counter() - t0)


def _result(spec: CheckSpec, ctx: Ctx, rc: CheckRubric, v: Verdict, rerun: Reproduce, duration: float) -> CheckResult:
    if v.status == "passed":
        fraction = 1.0 if v.fraction is None else v.fraction
    else:
        fraction = 0.0 if v.fraction is None else v.fraction
    reproduce = (v.reproduce or rerun(spec.id, ctx.base_seed)) if v.status in FAILING else None
    return CheckResult(
        id=spec.id,
        title=spec.title,
        cites=spec.cites,
        status=v.status,
        score=round(rc.points * fraction, 6) if v.pending is None else 0.0,
        max_score=rc.points,
        extra_credit=rc.extra_credit,
        visibility=rc.visibility,
        message=v.message,
        counterexample=v.counterexample,
        reproduce=reproduce,
        mismatch=v.mismatch_record(),
        stopped=v.stopped,
        absent=v.absent,
        unobserved=v.unobserved,
        found_at=v.found_at,
        seed=ctx.base_seed,
        duration_s=round(duration, 3),
        heatmaps=v.heatmaps,
        notes=v.notes,
        advice=v.advice if v.status in FAILING else None,
        pending=v.pending,
        own_tests=v.own_tests,
    )
