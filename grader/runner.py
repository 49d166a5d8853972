"""Grading, top to bottom: submission -> isolated worker -> checks -> verdicts -> score.

The only place where student failures are caught: each check runs inside :func:`run_check`, which
turns a crash, timeout, missing function or internal error into that check's verdict, so one broken
function never hides the other checks.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
import time
import traceback
from pathlib import Path
from types import ModuleType

from grader.checks import CHECKS, CheckSpec, Ctx, Verdict
from grader.checks._exercises import reference_statistics, stats_seed
from grader.diagnosis import attach_causes, diagnose
from grader.head import Head, MissingFunction, StudentFailure
from grader.library import load_reference
from grader.models import CheckResult, Diagnosis, GradeResult, StudentOutput
from grader.rubric import CheckRubric, Rubric
from grader.sandbox import Sandbox, WorkerPool
from grader.submission import contract_names, prepare
from grader.visuals import collect_visuals, reference_scale

RNG_SALT = 0x5EED  # salt of the per-check seed the worker seeds torch, numpy and random with


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
) -> GradeResult:
    """Grade one submission and return every verdict; writes nothing.

    ``pool`` lends the worker for the head; ``tests_pool`` the workers for the student's own tests. It
    must never be a pool whose every slot may be busy with heads (a batch): that would deadlock. With
    neither given, one private pool of two slots serves both, one slot each. ``visuals=False`` skips
    the report's visualisation data (about a second) when no report will be written.
    ``definitions_only``: grade a module on its definitions only, as a notebook is (no top-level code runs).
    """
    started = time.perf_counter()
    seed = rubric.seed if seed is None else seed
    label = label or str(submission)
    selected = [cid for cid, rc in rubric.checks.items() if rc.enabled and (not only or cid in only)]
    ref = load_reference()
    plot = visuals and not only  # the report's pictures; --only runs are about one check
    reference_side = _prefetch_reference(ref, seed, exercise_3="score_scale_experiment" in selected, plot=plot)
    with contextlib.ExitStack() as stack:
        if pool is None:
            pool = stack.enter_context(WorkerPool(2, uid_base=rubric.limits.sandbox_uid_base, lazy=True))
            tests_pool = tests_pool or pool
        sub = stack.enter_context(
            prepare(
                submission,
                rubric.entry_points.module,
                contract=contract_names(rubric.entry_points),
                packages=rubric.packages,
                definitions_only=definitions_only,
            )
        )
        with Sandbox(sub.dir, rubric.limits, pool=pool) as sandbox:
            head = Head(sandbox, rubric.entry_points, sub.unavailable)
            results = []
            memo: dict[str, object] = {}  # what several checks (and the plot) use: precision, Exercise 3
            for cid in selected:
                ctx = Ctx(
                    head, ref, rubric, seed, cid, sub.source, device, submission_dir=sub.dir, pool=tests_pool, memo=memo
                )
                results.append(run_check(CHECKS[cid], ctx, rubric.checks[cid], label))
            diagnosis = _diagnose(results, head, ref)
            reference_side.join()
            pictures = collect_visuals(head, ref, seed, memo) if plot else None
            protections = list(sandbox.protections)
            out = sandbox.output
        # Leaving the sandbox killed every process the submission started; only now do we conclude.
    output = StudentOutput(text=out.text, truncated=out.truncated, bytes_dropped=out.bytes_dropped)
    return GradeResult(
        submission=label,
        seed=seed,
        score=round(sum(r.score for r in results), 6),
        max_score=sum(r.max_score for r in results if not r.extra_credit),
        checks=attach_causes(results, diagnosis),
        diagnosis=diagnosis,
        protections=protections,
        devices=[device],
        output=output,
        rubric=rubric.name,
        duration_s=round(time.perf_counter() - started, 3),
        notes=sub.notes,
        visuals=pictures,
    )


def _prefetch_reference(ref: ModuleType, seed: int, *, exercise_3: bool, plot: bool) -> threading.Thread:
    """Compute the reference side of Exercise 3 (trusted code, cached per process) in a thread, while the
    worker starts and answers: the grader would otherwise wait for it after the worker is done."""

    def work() -> None:
        if exercise_3:
            reference_statistics(ref, stats_seed(seed))
        if plot:
            reference_scale(ref, stats_seed(seed))

    thread = threading.Thread(target=work, name="reference-prefetch", daemon=True)
    thread.start()
    return thread


def _diagnose(results: list[CheckResult], head: Head, ref: ModuleType) -> list[Diagnosis]:
    """The root causes of the failing checks; a grader bug here costs the hint, never the grade."""
    try:
        return diagnose(results, head, ref)
    except Exception:  # pragma: no cover - defensive: diagnosis is advice, not a verdict
        traceback.print_exc()
        return []


def run_check(spec: CheckSpec, ctx: Ctx, rc: CheckRubric, label: str) -> CheckResult:
    """Run one check; whatever happens, return its verdict."""
    t0 = time.perf_counter()
    ctx.head.rng_seed = ctx.seed(RNG_SALT)  # every call of this check draws from the same seeded state
    ctx.head.current_check = spec.id  # a timeout is recorded against this check (grader/_hangs.py)
    try:
        for name in spec.needs:
            ctx.head.require(name, optional=spec.optional)
        verdict = spec.fn(ctx)
    except MissingFunction as exc:
        if exc.package is not None:  # defined, but left out: it needs a package the grader does not install
            text = exc.message[:1].upper() + exc.message[1:] + "."
            verdict = Verdict("skipped" if exc.optional else "failed", ("Optional: " if exc.optional else "") + text)
        elif exc.optional:
            verdict = Verdict("skipped", f"Optional: your submission does not define `{exc.name}`; not graded.")
        else:
            verdict = Verdict("failed", f"Your submission does not define `{exc.name}`, which this check needs.")
    except StudentFailure as exc:
        if exc.status == "failed":  # it ran, but what came back breaks the contract
            text = f"What your code returned breaks the contract: {exc.message}."
        else:
            text = f"Your code did not complete this check: {exc.message}"
        verdict = Verdict(exc.status, text)
    except Exception as exc:  # a bug in the grader: still a verdict, never a crash of the run
        tb = traceback.format_exception(exc)[-3:]
        verdict = Verdict(
            "error",  # type: ignore[arg-type]
            "Internal grader error (not your fault; please report it): "
            f"{type(exc).__name__}: {exc}\n{''.join(tb).rstrip()}",
        )
    ctx.head.current_check = None  # calls after the checks (diagnosis, pictures) belong to none
    return _result(spec, ctx, rc, verdict, label, time.perf_counter() - t0)


def _result(spec: CheckSpec, ctx: Ctx, rc: CheckRubric, v: Verdict, label: str, duration: float) -> CheckResult:
    if v.status == "passed":
        fraction = 1.0 if v.fraction is None else v.fraction
    else:
        fraction = 0.0 if v.fraction is None else v.fraction
    message = v.message
    reproduce = None
    if v.status in ("failed", "error", "timeout"):
        if v.counterexample is not None:
            message += f"\nSmallest failing input: {v.counterexample.describe()}"
        reproduce = reproduce_command(label, spec.id, ctx.base_seed)
        message += f"\nReproduce: {reproduce}"
    return CheckResult(
        id=spec.id,
        title=spec.title,
        cites=spec.cites,
        status=v.status,
        score=round(rc.points * fraction, 6),
        max_score=rc.points,
        extra_credit=rc.extra_credit,
        visibility=rc.visibility,
        message=message,
        counterexample=v.counterexample,
        reproduce=reproduce,
        seed=ctx.base_seed,
        duration_s=round(duration, 3),
        heatmaps=v.heatmaps,
        notes=v.notes,
    )
