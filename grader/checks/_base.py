"""The check registry and the small vocabulary every check uses.

A check is a plain function ``fn(ctx) -> Verdict`` registered under its id with the lecture result it
tests. It never catches student failures itself: the proxy raises :class:`StudentFailure` and the
runner turns that into the verdict, so every check always yields exactly one verdict.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from grader.compare import Mismatch
from grader.head import Head, HeadCall, MissingFunction, NonFinite, StudentFailure, compared_non_finite
from grader.inputs import FAMILIES, Case, Shape, check_seed, family_cases, make_case
from grader.models import Counterexample, Heatmap, OwnTests, SourceSpot, Stop, StopKind, Unobserved
from grader.models import Mismatch as MismatchRecord
from grader.oracle import Oracle
from grader.rubric import Rubric
from grader.sandbox import WorkerPool

RNG_SALT = 0x5EED  # salt of the per-check seed the worker seeds torch, numpy and random with
# Checks whose property is observed on outputs with no finite number (shapes, dtypes, purity): not judged
# unobserved on them (observed).
ON_ANY_VALUES = frozenset({"interface"})

# How a verdict says the student's code stopped it (the runner and by_case write these; the diagnosis reads
# them to group checks by cause).
STOPPED = "Your code did not complete this check: "
CASE_STOPPED = "Your code did not complete this case: "
BREACH = "What your code returned breaks the contract: "
NOT_DEFINED = "Your submission does not define `"
# A check whose head calls returned no finite number (issue 30): its property was not observed. A passing
# verdict becomes this failure; a failing one keeps its words and gets the note (the diagnosis reads both).
UNOBSERVED = "Not observed: on finite inputs "
ALSO_FAILING = "Also failing, "  # a later group of a check that runs every group (numerical_stability)
NON_FINITE_NOTE = "During this check, on finite inputs "
VACUOUS = "the values this check compared hold no finite number"

PRECISION_SHAPE = Shape(2, 4, 5, 3, 4)  # T = 4: small, so a head that hangs on long inputs answers it
_NARROW_FIRST = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def effective_dtype(t: torch.Tensor) -> torch.dtype:
    """The narrowest floating dtype through which every finite value of ``t`` round-trips exactly.

    A head that computes its softmax in float32 and casts back returns float64 weights that are all
    float32 numbers: then it has float32 precision, whatever dtype it returns.
    """
    finite = t.detach()[torch.isfinite(t.detach())].double()
    for dtype in _NARROW_FIRST[:-1]:
        if torch.equal(finite.to(dtype).double(), finite):
            return dtype
    return torch.float64


def narrower(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The less precise of two floating dtypes (float16 and bfloat16 count as equally coarse)."""
    return a if _NARROW_FIRST.index(a) <= _NARROW_FIRST.index(b) else b


@dataclass
class Verdict:
    status: Literal["passed", "failed", "skipped", "error", "timeout"]
    message: str
    counterexample: Counterexample | None = None
    heatmaps: list[Heatmap] = field(default_factory=list)
    fraction: float | None = None  # partial credit in [0, 1]; None means all or nothing
    notes: list[str] = field(default_factory=list)
    counted: bool = True  # False: not graded in this edition (the student kit's own-head test run): 0 of 0 points
    advice: str | None = None  # the check's own advice: said only where no named cause explains it (CheckResult)
    pending: str | None = None  # why its points are not graded in this edition (the student kit's student_tests)
    own_tests: OwnTests | None = None  # the student's tests on their own head and its mutations (the student kit)
    reproduce: str | None = None  # the line that reruns what failed, when it is not `grade --only` (a pytest command)
    # the evidence as data (issue 51): what the views and the diagnosis read instead of the message's words
    mismatch: Mismatch | None = None
    stopped: list[Stop] = field(default_factory=list)  # what stopped the check (group None), its cases, its groups
    absent: list[Stop] = field(default_factory=list)  # contract functions found missing or left out
    unobserved: Unobserved | None = None
    found_at: SourceSpot | None = None

    def mismatch_record(self) -> MismatchRecord | None:
        m = self.mismatch
        if m is None:
            return None
        return MismatchRecord(
            what=m.what, n_bad=m.n_bad, n_total=m.n_total, max_abs=_finite(m.max_abs), abs_index=list(m.abs_index),
            max_rel=_finite(m.max_rel), rel_index=list(m.rel_index), got=_finite(m.got),
            expected=_finite(m.expected), rtol=m.tolerance.rtol, atol=m.tolerance.atol,
        )  # fmt: skip


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def stop_of(exc: StudentFailure, scope: Literal["check", "case", "also"] = "check", group: str | None = None) -> Stop:
    """What stopped a check, as data: the head's failure (a raise, a hang, a breach of what it returns, a missing
    function), and what it stopped (the check, the case it reports, or a later group of its cases)."""
    if isinstance(exc, MissingFunction):
        missing: StopKind = "not_defined" if exc.package is None else "uninstalled"
        return Stop(
            kind=missing, text=exc.message, function=exc.name, package=exc.package, advice=exc.advice, scope=scope,
            group=group,
        )  # fmt: skip
    kind: StopKind = "breach" if exc.status == "failed" else "timeout" if exc.status == "timeout" else "raised"
    return Stop(
        kind=kind, text=exc.message, scope=scope, group=group, overflow=exc.overflow, shape_of=exc.shape_of,
        undifferentiable=exc.undifferentiable,
    )  # fmt: skip


def passed(message: str, **kw: object) -> Verdict:
    return Verdict("passed", message, **kw)  # type: ignore[arg-type]


def failed(message: str, **kw: object) -> Verdict:
    return Verdict("failed", message, **kw)  # type: ignore[arg-type]


def skipped(message: str) -> Verdict:
    return Verdict("skipped", message)


@dataclass
class Ctx:
    """What a check may use: the student's head (through the proxy), the reference as an oracle, seeds."""

    head: Head
    ref: Oracle  # the instructor's reference, or its stored outputs in the student kit (grader/oracle.py)
    rubric: Rubric
    base_seed: int
    check_id: str
    source: str  # text of the submission's module (read by the grader, never executed here)
    device: str = "cpu"
    submission_dir: Path | None = None  # the prepared submission folder (its test files), never imported
    pool: WorkerPool | None = None  # workers for checks that need sandboxes of their own (student tests)
    memo: dict[str, object] = field(default_factory=dict)  # shared by the checks of one grading (measurements)
    own_run: object | None = None  # the student's tests as a pytest session ran them (pytest --step4), or None
    # bitwise comparisons made by :meth:`same`: how many, how many compared a finite number, and the first case
    # where one compared none (issue 30: an invariance seen only on NaN was not observed)
    compared: int = 0
    observed_finite: int = 0
    vacuous: tuple[Case, bool] | None = None
    # the smallest comparison of :meth:`same` in which some entry compared was not finite (issue 30: a property is
    # observed per entry; a check that compares slices judges only what it compared)
    unseen: NonFinite | None = None

    def seed(self, salt: int = 0) -> int:
        return check_seed(self.base_seed, self.check_id, salt)

    def precision(self) -> torch.dtype:
        """The dtype the head really computes in, measured once per grading on float64 inputs (see
        :func:`effective_dtype`); float64 when the measuring call fails (its own check reports that)."""
        if "precision" not in self.memo:
            seed = check_seed(self.base_seed, "precision")
            probe = make_case(PRECISION_SHAPE, seed=seed)
            try:
                call = self.head.attention(probe, rng=seed)  # the same in a full run and in an --only run
                self.memo["precision"] = narrower(effective_dtype(call.weights), effective_dtype(call.out))
            except StudentFailure:
                self.memo["precision"] = torch.float64
        found = self.memo["precision"]
        assert isinstance(found, torch.dtype)
        return found

    def working_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The coarser of ``dtype`` (the inputs) and the precision the head computes in: property checks
        judge a head at the precision it really has (reference_match alone charges float32 arithmetic)."""
        return narrower(dtype, self.precision())

    def same(self, a: torch.Tensor, b: torch.Tensor, case: Case, causal: bool = True, what: str = "the values") -> bool:
        """:func:`same_bits`, tallied: a comparison in which ``a`` holds no finite number observes nothing, one in
        which ``a`` or ``b`` holds some non-finite entry observes nothing there (``what``: the values' name)."""
        self.compared += 1
        found = compared_non_finite(case, causal, what, a, b)
        if found is not None and (self.unseen is None or found.size < self.unseen.size):
            self.unseen = found
        if a.numel() and bool(torch.isfinite(a).any()):
            self.observed_finite += 1
        elif self.vacuous is None:
            self.vacuous = (case, causal)
        return same_bits(a, b)

    def cases(
        self, families: tuple[Shape, ...] = FAMILIES, *, dtype: torch.dtype = torch.float64, **kw: float
    ) -> Iterator[Case]:
        """One seeded case per shape family, smallest first."""
        return family_cases(self.base_seed, self.check_id, families, dtype=dtype, **kw)


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    cites: str
    needs: tuple[str, ...]
    optional: bool
    fn: Callable[[Ctx], Verdict]
    timed: bool = False  # its verdict rests on timing: nothing else may run meanwhile


CHECKS: dict[str, CheckSpec] = {}


def check(
    id: str,
    *,
    title: str,
    cites: str,
    needs: tuple[str, ...] = ("causal_self_attention",),
    optional: bool = False,
    timed: bool = False,
) -> Callable[[Callable[[Ctx], Verdict]], Callable[[Ctx], Verdict]]:
    """Register ``fn`` as check ``id``. ``optional`` checks are skipped when their function is absent;
    ``timed`` checks judge timings, so no other check runs meanwhile."""

    def register(fn: Callable[[Ctx], Verdict]) -> Callable[[Ctx], Verdict]:
        assert id not in CHECKS, f"duplicate check id {id}"
        CHECKS[id] = CheckSpec(id, title, cites, needs, optional, fn, timed)
        return fn

    return register


# ---- helpers shared by several checks ------------------------------------------------------------


def heatmaps_for(
    student: torch.Tensor | None,
    reference: torch.Tensor | None,
    *,
    causal: bool = True,
    batch: int = 0,
    label: str = "reference",
) -> list[Heatmap]:
    """Heatmaps of the student's weights, the ``label`` ones and their difference for one batch element (none
    when the student's weights broke the contract: :func:`weights_of`)."""
    if student is None:
        return []

    def rows(t: torch.Tensor) -> list[list[float | None]]:
        # tolist, not a torch call per element: ~10 us each, a T x T map three times per failing case
        return [[v if math.isfinite(v) else None for v in row] for row in t.detach().double().tolist()]

    maps = [Heatmap(title="your weights", kind="weights", data=rows(student[batch]), causal=causal)]
    if reference is not None:
        maps.append(Heatmap(title=f"{label} weights", kind="weights", data=rows(reference[batch]), causal=causal))
        diff = student[batch].double() - reference[batch].double()
        maps.append(Heatmap(title=f"yours − {label}", kind="difference", data=rows(diff), causal=causal))
    return maps


def weights_of(call: HeadCall) -> torch.Tensor | None:
    """The call's weights, or None when they broke the contract while out kept it (only out is judged)."""
    return None if "weights" in call.broken else call.weights


@dataclass
class CaseOutcome:
    """One case of a check with separable case families: ``problem`` is None when it passed."""

    label: str
    problem: str | None = None
    counterexample: Counterexample | None = None
    heatmaps: list[Heatmap] = field(default_factory=list)
    failure: StudentFailure | None = None  # the head did not answer this case
    mismatch: Mismatch | None = None  # the comparison that failed, when one did


def case_call(
    ctx: Ctx, case: Case, causal: bool, label: str, *, base_seed: int | None = None
) -> tuple[CaseOutcome, HeadCall | None]:
    """The head on one case of a check with partial credit: the case's outcome record, and the call
    (None when the head did not answer; the failure is then recorded in the outcome)."""
    seed = ctx.base_seed if base_seed is None else base_seed  # the seed the case was drawn at
    outcome = CaseOutcome(label, counterexample=case.counterexample(seed, causal=causal))
    try:
        return outcome, ctx.head.attention(case, causal=causal)
    except StudentFailure as exc:
        outcome.failure = exc
        return outcome, None


def by_case(outcomes: list[CaseOutcome], what: str, *, detail: str = "") -> Verdict:
    """Partial credit over separable case families: the fraction of cases passed. The first failing
    case (smallest first) is reported in full; a head that answers no case at all fails as it failed."""
    bad = [o for o in outcomes if o.problem is not None or o.failure is not None]
    if not bad:
        return passed(f"{what}: all {len(outcomes)} cases agree{detail}.")
    failures = [o.failure for o in outcomes if o.failure is not None]
    if len(failures) == len(outcomes):
        raise failures[0]
    n_ok = len(outcomes) - len(bad)
    first = bad[0]
    text = first.problem if first.failure is None else f"{CASE_STOPPED}{first.failure.message}"
    failing = ", ".join(o.label for o in bad[:6]) + (", ..." if len(bad) > 6 else "")
    credit = " (partial credit)" if n_ok else ""
    return failed(
        f"{what}: {n_ok} of {len(outcomes)} cases agree{credit}; failing: {failing}.\n"
        f"First failing case, {first.label}: {text}",
        counterexample=first.counterexample,
        heatmaps=first.heatmaps,
        fraction=n_ok / len(outcomes),
        mismatch=first.mismatch,
        stopped=[stop_of(first.failure, "case", first.label)] if first.failure is not None else [],
    )


def begin(cid: str, ctx: Ctx) -> None:
    """The head made ready for check ``cid``: every call of it draws from the same seeded state (RNG_SALT), a
    timeout is recorded against it (grader/_hangs.py), and the calls that returned non-finite values are its own
    (grader/head.py). The runner's checks and the diagnosis's proof (whose calls draw what the check's drew)."""
    ctx.head.rng_seed = ctx.seed(RNG_SALT)
    ctx.head.current_check = cid
    ctx.head.non_finite = None  # the smallest of its calls that returned no finite number
    ctx.head.part_finite = None  # the smallest of its calls that returned some non-finite entries


def judged(cid: str, verdict: Verdict, ctx: Ctx) -> Verdict:
    """Check ``cid``'s ``verdict`` as it stands (:func:`observed`): a check that compares bitwise judges the
    entries it compared (it may compare slices), another the whole of every call it made; the ON_ANY_VALUES
    checks judge any values."""
    if cid in ON_ANY_VALUES:
        return verdict
    part = ctx.unseen if ctx.compared else ctx.head.part_finite
    return observed(verdict, ctx.head.non_finite, ctx, part)


def observed(verdict: Verdict, seen: NonFinite | None, ctx: Ctx, part: NonFinite | None = None) -> Verdict:
    """``verdict``, unless the head answered one of the check's calls with no finite number (``seen``, the
    smallest such input), or every bitwise comparison of the check compared no finite number (:meth:`Ctx.same`):
    then a pass was not observed (NaN is bit-equal to NaN, a comparison with NaN is false, so invariances and
    bounds hold of it vacuously) and fails, and a failure says so in a note. ``part``, the smallest call with
    some non-finite entries: the property was observed on its finite rows alone, so a pass is not observed
    either (it fails, naming those rows); a failure keeps its words."""
    base_seed = ctx.base_seed
    if seen is None and part is not None and verdict.status == "failed":
        example = part.case.counterexample(base_seed, causal=part.causal)
        verdict.notes.append(f"{NON_FINITE_NOTE}{part.said()} (causal={part.causal}; input {example.describe()})")
        verdict.unobserved = Unobserved(
            said=part.said(), causal=part.causal, counterexample=example, failed_for_it=False
        )
        return verdict
    if seen is None and part is not None and verdict.status == "passed":
        example = part.case.counterexample(base_seed, causal=part.causal)
        return failed(
            f"{UNOBSERVED}{part.said()} (causal={part.causal}; the smallest such input is below).",
            counterexample=example,
            notes=verdict.notes,
            unobserved=_seen(part, example, failed_for_it=True),
            advice=f"This check observed its property only on the finite entries: {_vacuous(part.kind)}, so it cannot "
            "credit the rows it could not see.",
        )
    if seen is None and ctx.compared and not ctx.observed_finite and ctx.vacuous is not None:
        case, causal = ctx.vacuous
        if verdict.status == "passed":
            example = case.counterexample(base_seed, causal=causal)
            return failed(
                f"{UNOBSERVED}{VACUOUS} (causal={causal}; the smallest such input is below).",
                counterexample=example,
                notes=verdict.notes,
                unobserved=Unobserved(said=VACUOUS, causal=causal, counterexample=example, failed_for_it=True),
                advice="A value with no finite number equals itself bit for bit, so the invariance was not observed.",
            )
        return verdict
    if seen is None or verdict.status not in ("passed", "failed"):
        return verdict
    example = seen.case.counterexample(base_seed, causal=seen.causal)
    if verdict.status == "failed":
        verdict.notes.append(f"{NON_FINITE_NOTE}{seen.said()} (causal={seen.causal}; input {example.describe()})")
        verdict.unobserved = Unobserved(
            said=seen.said(), causal=seen.causal, counterexample=example, failed_for_it=False
        )
        return verdict
    text = f"{seen.said()} (causal={seen.causal}; the smallest such input is below)"
    return failed(
        f"{UNOBSERVED}{text}.",
        counterexample=example,
        notes=verdict.notes,
        unobserved=_seen(seen, example, failed_for_it=True),
        advice=f"A property judged on values with no finite number is not observed: {_vacuous(seen.kind)}, so this "
        "check cannot credit it.",
    )


def _seen(nf: NonFinite, example: Counterexample, *, failed_for_it: bool) -> Unobserved:
    return Unobserved(said=nf.said(), causal=nf.causal, counterexample=example, failed_for_it=failed_for_it)


def _vacuous(kind: str) -> str:
    """Why a property seen on non-finite values was not observed, in the words of what they are (issue 53: no NaN
    where the values are -inf)."""
    if kind == "NaN":
        return "NaN compares bit-equal with NaN, and every bound is false of it"
    if kind == "infinite":
        return "an infinite value equals itself bit for bit and is no weight nor average, and -inf - -inf is NaN"
    return "NaN and infinities compare bit-equal with themselves, and no bound holds of them"


Group = tuple[str, Callable[[], "Verdict | None"]]  # a label ("float32 inputs") and its judge (None: it holds)


def every_group(groups: Sequence[Group]) -> Verdict | None:
    """Run every group of a check's cases through (issue 30: a head that fails in float64 may also raise in
    float16, a mistake of its own) and report each failing one: None when all hold. The first failure is
    reported in full, the others after it, a raise in one group as the head's error (the diagnosis can name
    it on its own). A group the head did not answer is a failure of that group; when it answered none, the
    check fails as the head failed. What breaks the contract, a hang or a missing function stops the check."""
    found: list[tuple[str, Verdict | StudentFailure]] = []
    for label, judge in groups:
        try:
            verdict = judge()
        except StudentFailure as exc:
            if exc.status != "error" or type(exc) is not StudentFailure:
                raise
            found.append((label, exc))
            continue
        if verdict is not None:
            found.append((label, verdict))
    if not found:
        return None
    if len(found) == len(groups) and all(isinstance(v, StudentFailure) for _, v in found):
        raise found[0][1]  # type: ignore[misc]  # the head answered no group: it failed as it failed
    first_label, first = found[0]
    verdict = (
        failed(f"With {first_label}: {CASE_STOPPED}{first.message}", stopped=[stop_of(first, "case", first_label)])
        if isinstance(first, StudentFailure)
        else first
    )
    others, said = [], {_gist(verdict.message)}
    for label, v in found[1:]:
        text = f"{CASE_STOPPED}{v.message}" if isinstance(v, StudentFailure) else v.message
        if _gist(text) not in said:  # each distinct failure once: the same one in float32 adds nothing
            said.add(_gist(text))
            others.append(f"{ALSO_FAILING}{label}: {text.splitlines()[0]}")
            if isinstance(v, StudentFailure):  # a group the head did not answer: a failure of its own
                verdict.stopped.append(stop_of(v, "also", label))
    if others:
        verdict.message = "\n".join([verdict.message, *others])
    return verdict


def _gist(message: str) -> str:
    """A failure's first line without its numbers and dtype names: what kind of failure it is."""
    line = message.splitlines()[0] if message else ""
    return re.sub(r"(b?float|int)\d+|[-+]?\d[\d.e+-]*", "#", line)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality that also accepts NaN where both have NaN (a NaN is not randomness)."""
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return torch.equal(nan_a, nan_b) and torch.equal(a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0))


def fmt(x: float) -> str:
    return f"{x:.4g}"
