"""The diagnosis's orchestration: from a head's check results to its root causes (see the package's face,
``grader.diagnosis``, for the kinds of cause and where their words live).

``examine`` probes the head through :class:`grader.head.Head` once per contract function, asks the error model's
search, the ladder and the known bugs which causes match, adds the crashes and contract breaches seen directly,
and points every cause at its line (``_pointing``).
"""

from __future__ import annotations

import math
import textwrap
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar, cast

import torch

from grader.diagnosis._bugs import Bug, Bugs, bugs_of, stored_ids
from grader.diagnosis._causes import cause, model_cause_ids
from grader.diagnosis._departure import fill_constants
from grader.diagnosis._known import (
    PROBE_SEED,
    PROBES,
    Probe,
    Seen,
    attention_probes,
    same,
    student_side,
)
from grader.diagnosis._ladder import climb, with_mask_constant
from grader.diagnosis._mutations import ORDINARY_SCORES, SLOT_OF, SLOTS, Combo, Fit, _pick, forward
from grader.diagnosis._naming import (
    LEAKY,
    SELF_CONTAINED,
    contract_cause,
    known_cause,
    mutation_cause,
    n_checks,
    violates,
)
from grader.diagnosis._pointing import GRAPH_CUT, point
from grader.diagnosis._proof import Walked, prove
from grader.diagnosis._replay import REPLAYABLE, responsible
from grader.diagnosis._search import comparable, matches, reference_matches, search
from grader.diagnosis._where import (
    ARGS,
    ATTENTION,
    DTYPE_CRASH,
    Where,
    absorbed,
    by_dtype,
    by_flag,
    by_size,
    by_width,
    dtype_name,
    exception,
    first_line,
    inputs,
)
from grader.head import Head, StudentFailure
from grader.inputs import Shape, make_case
from grader.library import KnownHead, load_reference
from grader.models import (
    FAILING,
    CheckResult,
    Diagnosis,
    DiagnosisError,
    DiagnosisProof,
    DiagnosisStep,
    GradeResult,
    Stop,
)
from grader.scoring import listed

if TYPE_CHECKING:
    from grader.oracle import Oracle
    from grader.rubric import Rubric


@dataclass(frozen=True)
class Examination:
    """What a diagnosis found: the causes, and where the head runs (its checks stopped by a length it cannot
    take, ``stopped``, can be run again at ``where.length``)."""

    causes: list[Diagnosis]
    where: Where = Where()
    stopped: tuple[str, ...] = ()
    error: DiagnosisError | None = None  # the grader's own exception in a pass (issue 35): the causes may be partial
    proof: DiagnosisProof | None = None  # the walk's changes make every property check pass (``_proof``)
    steps: list[DiagnosisStep] = field(default_factory=list)  # what each pass did and cost


def diagnose(
    checks: Iterable[CheckResult], head: Head, ref: Oracle, rubric: Rubric | None = None, seed: int | None = None
) -> list[Diagnosis]:
    """Every root cause of the failing checks, each with the checks it explains; [] when none failed.
    ``rubric`` and ``seed`` let a check be replayed on the error model (see ``_replay``)."""
    return examine(checks, head, ref, rubric, seed).causes


def examine(
    checks: Iterable[CheckResult], head: Head, ref: Oracle, rubric: Rubric | None = None, seed: int | None = None
) -> Examination:
    """:func:`diagnose`, and where the head runs. Never raises for the grader's own error (issue 35): each pass
    runs on its own, one that raises leaves its part out and the others keep theirs, and the exception is
    recorded in ``Examination.error``."""
    passes = Passes()
    try:
        return _examine(list(checks), head, ref, rubric, seed, passes)
    except Exception as exc:  # outside every pass (the glue between them): nothing found is kept
        passes.record("examine", exc)
        return Examination([], error=passes.error(), steps=list(passes.steps.values()))


def _examine(
    checks: list[CheckResult], head: Head, ref: Oracle, rubric: Rubric | None, seed: int | None, passes: Passes
) -> Examination:
    run = passes.run
    failing = [c for c in checks if c.status in FAILING]
    if not failing:
        return Examination([])
    failed = {c.id for c in failing}
    passed = {c.id for c in checks if c.status == "passed"}
    seen = {fn: run("probe", None, student_side, head, fn, make()) for fn, make in PROBES.items()}
    causes = run("crashes", [], _crashes, failing, seen)
    size, where = run("by_size", (None, Where()), by_size, head, failing)
    causes = absorbed(causes, size) if size else causes
    flag, where = run(
        "by_flag", (None, where), by_flag, head, [c for c in failing if not size or c.id not in size.explains], where
    )
    causes = absorbed(causes, flag) if flag else causes
    width, where = run(
        "by_width", (None, where), by_width, head, _left(failing, [c for c in (size, flag) if c]), where
    )  # issue 30
    causes = absorbed(causes, width) if width else causes
    # a head that raises in float64 wherever it runs, and runs in another dtype: one crash, found before the others
    # (a float32 softmax meeting float64 values raises in every float64 check; its crashes are one mistake)
    everywhere = bool(seen[ATTENTION]) and all(s.error for s in seen[ATTENTION] or [])
    dtype, bad = (None, "")
    if everywhere and not where.moved:
        dtype, bad = run("by_dtype", (None, ""), by_dtype, head, _left(failing, []), where)
        causes = absorbed(causes, dtype) if dtype else causes
    # the head's other mistakes, sought where it runs (at the length it takes, in the branch that works)
    probes = attention_probes(where.length, where.flags, where.square) if where.moved else PROBES[ATTENTION]()
    runs = run("probe", None, student_side, head, ATTENTION, probes) if where.moved else seen[ATTENTION]
    contract, slips = run("contract", ([], {"r0": [], "r1": []}), _contract, head, probes, runs, failed, where)
    causes += contract
    found = run("search", None, _changes, head, probes, runs, passed, failed, where)
    makers: list[str] = []  # the named causes that make the head's non-finite outputs (issue 30)
    if found is not None:
        combo, fitted = found
        mutations = run("naming", [], lambda: [mutation_cause(m, fitted, failed) for m in combo])
        if where.moved:
            seen_there = f"Seen where your head runs ({where.said()}): it raises on the other inputs."
            mutations = [d.model_copy(update={"detail": seen_there}) for d in mutations]
        if rubric is not None and seed is not None:
            mutations = run("replay", mutations, _replayed, list(mutations), combo, fitted, failing, ref, rubric, seed)
        causes += mutations
        makers = run(
            "non_finite",
            [],
            lambda: [d.id for m, d in zip(combo, mutations, strict=True) if _makes_non_finite(m, fitted)],
        )
    bugs = run("known", None, bugs_of, ref)
    for fn in PROBES:
        if bugs is None or (fn == ATTENTION and found is not None and found[0]):
            continue
        known = [known_cause(bug, failed) for bug in run("known", [], _known, seen[fn], fn, bugs)]
        makers += [d.id for d in known if fn == ATTENTION and _non_finite_runs(runs)]  # it matched them, NaN too
        causes += known
    if dtype is None:
        dtype, bad = run(
            "by_dtype", (None, ""), by_dtype, head, _left(failing, causes) + _crashed_too(failing, causes), where
        )
        causes += [dtype] if dtype else []
    causes += run("missing", [], _missing, failing) + run("uninstalled", [], _uninstalled, failing)
    causes += run("breaches", [], _breaches, _left(failing, causes), passed)
    causes += run("graph_cut", [], _graph_cut, head, probes, runs, _left(failing, causes), where)
    causes = run("by_maker", causes, _by_maker, causes, _left(failing, causes), makers)
    causes += run("non_finite", [], _non_finite, _left(failing, causes))
    causes += run("own", [], _own, _left(failing, causes))
    stopped = tuple(size.explains if size else ()) + tuple(width.explains if width and where.square else ())
    combo, fitted = found if found is not None else ((), {})
    causes = run("one_choice", causes, _one_choice, causes, slips, bad)
    walked = Walked()
    causes = run(
        "point", causes, point, head, causes, failing, combo, fitted, where.flags, where.length, where.square,
        frozenset(passed), walked,
    )  # fmt: skip
    causes = run("one_choice", causes, _projection_widths, causes)
    causes = run("non_finite", causes, _made_non_finite, causes, fitted)
    causes, proof = run("prove", (causes, None), prove, head, causes, walked, checks, ref, rubric, seed)
    # a part the walk named (a float32 softmax whose weights are returned so): the same one decision, at its line
    causes = run("one_choice", causes, _one_choice, causes, slips, bad)
    return Examination(_explained(causes, failing), where, stopped, passes.error(), proof, list(passes.steps.values()))


T = TypeVar("T")


@dataclass
class Passes:
    """The passes of one examination, each run on its own: the grader's own exception in one is recorded, and
    that pass answers ``default`` (what it answers when it finds nothing), so that the others keep their causes
    (issue 35: a grader bug costs the advice it would have given, never silently the grade)."""

    raised: list[tuple[str, BaseException]] = field(default_factory=list)
    steps: dict[str, DiagnosisStep] = field(default_factory=dict)

    def run(self, name: str, default: object, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)``, or ``default`` (of ``fn``'s type: what the pass answers when it finds nothing) when it
        raised, the exception recorded; each run is counted in :attr:`steps` with its time and whether it answered
        something else than ``default``."""
        started, raised = time.perf_counter(), False
        before = list(default) if isinstance(default, list) else default  # a pass may rewrite the list it was given
        try:
            answer = fn(*args)
        except Exception as exc:
            self.record(name, exc)
            answer, raised = cast(T, default), True
        changed = not raised and not _same(answer, before)
        this = DiagnosisStep(
            name=name, runs=1, changed=changed, raised=raised, seconds=round(time.perf_counter() - started, 4)
        )
        self.steps[name] = self.steps[name].plus(this) if name in self.steps else this
        return answer

    def record(self, name: str, exc: BaseException) -> None:
        """One pass's exception (the single place every one of them goes through: tests/conftest.py watches it)."""
        self.raised.append((name, exc))

    def error(self) -> DiagnosisError | None:
        """The result model's account of what raised: the first exception, and every pass that raised."""
        if not self.raised:
            return None
        exc = self.raised[0][1]
        frames = [ln.rstrip() for ln in traceback.format_exception(exc)[-6:]]
        return DiagnosisError(
            type=type(exc).__name__,
            message=str(exc)[:500],
            passes=list(dict.fromkeys(name for name, _ in self.raised)),
            traceback=frames,
        )


def _same(answer: object, default: object) -> bool:
    """Whether a pass answered what it answers when it finds nothing (a value holding tensors is something)."""
    if answer is default:
        return True
    try:
        return bool(answer == default)
    except (RuntimeError, TypeError, ValueError):  # tensors compared elementwise: an answer of its own
        return False


def _left(failing: list[CheckResult], causes: list[Diagnosis]) -> list[CheckResult]:
    """The failing checks no cause explains yet (the direct causes below are sought only for those)."""
    explained = {cid for c in causes for cid in c.explains}
    return [c for c in failing if c.id not in explained]


def _crashed_too(failing: list[CheckResult], causes: list[Diagnosis]) -> list[CheckResult]:
    """Explained checks that also crashed in a later group of their cases (numerical_stability runs every group,
    issue 30): that crash is a failure of its own, which its own cause may explain, unless a finite mask
    constant explains the check and the crash is an overflow (the constant's words name the dtypes it does not
    fit in: that crash is the constant's)."""
    explained = {cid for c in causes for cid in c.explains}
    constants = set(LEAKY) | set(LEAKY.values())
    by_constant = {cid for c in causes if c.id in constants for cid in c.explains}
    return [
        c
        for c in failing
        if c.id in explained and any(s.scope == "also" and not (c.id in by_constant and s.overflow) for s in c.stopped)
    ]


def warm_diagnosis(ref: Oracle, stop: Callable[[], bool] = lambda: False) -> None:
    """Compute now what the first diagnosis of a process computes and keeps (the reference's and every
    known bug's answers on the probes: about 0.2 s), unless ``stop`` says to leave the rest for later."""
    bugs_of(ref).warm(stop)


def _changes(
    head: Head, probes: list[Probe], runs: list[Seen] | None, passed: set[str], failed: set[str], where: Where
) -> tuple[Combo, dict[str, float]] | None:
    """The mutations of the reference that reproduce the head's values (gradient probes left out: the
    error model is about values, and a head of the wrong output width cannot take the upstream); () when
    the reference itself does, None when nothing does. When numerical_stability or a check of the future keys
    failed and the model found fills the hidden entries with -inf, the ladder looks for a finite mask constant
    (``_ladder``; where the model masks the right entries), then the head's own traced scores do
    (:func:`_traced_fill`); the model grown is the one found on every probe or, when none was, on the ordinary
    ones (huge scores outweigh an additive -1e4: only the ladder then tells the constant)."""
    if runs is None:
        return None
    pairs = [(p, s) for p, s in zip(probes, runs, strict=True) if "grad" not in p.options]
    probes, theirs = [p for p, _ in pairs], comparable([s for _, s in pairs], [p for p, _ in pairs])
    if theirs is None:
        return None
    found = ((), {}) if reference_matches(probes, theirs) else search(probes, theirs, passed)
    if not _fill_unseen(failed) or (found is not None and _pick(found[0], "fill") is not None):
        return found
    base = found or _ordinary(probes, theirs, passed)
    if base is None or _pick(base[0], "fill") is not None:
        return found
    if _pick(base[0], "mask") is None:
        ladder = climb(lambda probe: _ask(head, probe), *base)
        grown = with_mask_constant(ladder, probes, theirs, *base)
        if grown is not None:
            return grown if _seen_fill(grown[1]["mask"], failed, ()) else found  # its rungs show it
    return _traced_fill(head, probes, theirs, base, failed, where) or found


def _seen_fill(c: float, failed: set[str], combo: Combo) -> bool:
    """Whether a failing check shows mask constant ``c`` beside the mutations ``combo``: one below 1000 in magnitude
    leaks at ordinary scores; one that masks exactly there (-1e4) breaks only numerical_stability, and is named
    only when that failed and no mutation of ``combo`` breaks it too (a head with no other mistake gets no cause
    for it either; a diagonal hidden with -1e9 is the diagonal's mistake)."""
    if abs(c) < ORDINARY_SCORES:
        return True
    return "numerical_stability" in failed and not any("numerical_stability" in violates(m) for m in combo)


# the checks a finite mask constant fails by itself: numerical_stability (huge scores, half precision) and, for one
# below 1000 in magnitude, those of the exact zeros of the future keys (-100 leaves them exp(-100), which the
# search's probes cannot tell from 0)
FILL_FAILS = ("numerical_stability", "causal_mask", "future_perturbation")


def _fill_unseen(failed: set[str]) -> bool:
    """Whether a finite mask constant the search cannot see may be behind some failing check."""
    return any(c in failed for c in FILL_FAILS)


def _traced_fill(
    head: Head,
    probes: list[Probe],
    theirs: list[Seen],
    base: tuple[Combo, dict[str, float]],
    failed: set[str],
    where: Where,
) -> tuple[Combo, dict[str, float]] | None:
    """``base`` with the finite constant the head's own traced call writes into (or adds to) the entries its mask
    hides, when that model reproduces the head on every probe (issue 35: -100 hides the future keys at ordinary
    scores as well as -inf, and beside another mask mistake or a transpose the ladder cannot tell it; the head's
    masked scores do), and a failing check shows it (:func:`_seen_fill`)."""
    combo, fitted = base
    for form, c in fill_constants(head, combo, fitted, where.length, where.square):
        if not _seen_fill(c, failed, combo):
            continue
        grown = tuple(sorted((*combo, form), key=lambda m: SLOTS.index(SLOT_OF[m])))
        fit = matches(grown, probes, theirs, {**fitted, "mask": c})
        if fit is not None:
            return grown, fit.values
    return None


def _ordinary(probes: list[Probe], theirs: list[Seen], passed: set[str]) -> tuple[Combo, dict[str, float]] | None:
    """The model found on the probes at ordinary scores alone."""
    kept = [(p, s) for p, s in zip(probes, theirs, strict=True) if not p.huge]
    some, answers = [p for p, _ in kept], [s for _, s in kept]
    return ((), {}) if reference_matches(some, answers) else search(some, answers, passed)


def _ask(head: Head, probe: Probe) -> Seen | None:
    """The head on one extra probe of the diagnosis, in float64; None when it did not answer."""
    runs = comparable(student_side(head, ATTENTION, [probe]), [probe])
    return runs[0] if runs else None


def _replayed(
    mutations: list[Diagnosis],
    combo: Combo,
    fitted: dict[str, float],
    failing: list[CheckResult],
    ref: Oracle,
    rubric: Rubric,
    seed: int,
) -> list[Diagnosis]:
    """The mutations with the checks they explain completed by replaying those checks on the error model:
    numerical_stability always (its verdict turns on dtypes and fitted constants), another failing check when
    no mutation's static entry (the library's catalog, pinned on the real checks) explains it."""
    for check in failing:
        static = any(check.id in d.explains for d in mutations)
        if check.id not in REPLAYABLE or (static and check.id != "numerical_stability"):
            continue
        who = responsible(check.id, check.status, combo, fitted, ref, rubric, seed)
        if who is None:
            continue
        for k, d in enumerate(mutations):
            explains = {*d.explains} - {check.id}
            if d.id in who or _named(d.id, who):
                explains.add(check.id)
            mutations[k] = d.model_copy(update={"explains": sorted(explains)})
    return mutations


def _named(cid: str, mutations: list[str]) -> bool:
    """Whether ``cid`` is the name one of ``mutations`` took (a fitted mask constant's "leaky" name)."""
    return any(LEAKY.get(m) == cid for m in mutations)


Slips = dict[str, list[tuple[torch.dtype, torch.dtype]]]  # "r0" (out), "r1" (weights) -> (returned, given)


def _contract(
    head: Head, probes: list[Probe], runs: list[Seen] | None, failed: set[str], where: Where
) -> tuple[list[Diagnosis], Slips]:
    """Contract breaches behind a failing interface or gradient_blocks check: the dtype the head returns
    for float32 and float64 inputs, out and weights each, and whether its outputs carry an autograd graph
    (asked where the head runs)."""
    slips: Slips = {"r0": [], "r1": []}
    if runs is None:
        return [], slips
    causes = []
    if "interface" in failed:
        written: list[str] = []  # the inputs a call changed in place
        for dtype in (torch.float32, torch.float64):
            given = inputs(where.length or 5, dtype, torch.Generator().manual_seed(PROBE_SEED), B=2)
            try:
                _, tensors = head.probe(
                    ATTENTION, ARGS, given, seed=PROBE_SEED, kwargs=where.kwargs(), return_inputs=True
                )  # the worker's copies of the inputs come back as they are after the call
            except StudentFailure:
                continue
            for k, t in tensors.items():
                if k in slips and t.dtype.is_floating_point and t.dtype != dtype:
                    slips[k].append((t.dtype, dtype))
            after = {k.removeprefix("in:"): t for k, t in tensors.items() if k.startswith("in:")}
            written += [k for k, t in given.items() if k in after and not torch.equal(after[k], t) and k not in written]
        for k, cid in (("r0", "output_dtype"), ("r1", "weights_dtype")):
            if slips[k]:
                causes.append(contract_cause(cid, _slipped(slips[k]), ["interface"]))
        if written:  # a leaf that requires grad refuses it: the gradients' check stops there too
            explains = sorted({"interface", *({"gradient_blocks"} & failed)})
            causes.append(contract_cause(INPLACE, " and ".join(written), explains))
    graph = _graph_runs(probes, runs)
    problems = [str((s.shape.get("grads") or {}).get("problem", "")) for s in graph]
    # out itself carries no graph (NumPy, .detach() of the result); detached weights alone leave out
    # differentiable through the values, a gradient cut that the known bugs name
    if "gradient_blocks" in failed and any(p.startswith("output 0 is not differentiable") for p in problems):
        causes.append(contract_cause("no_autograd_graph", "", ["gradient_blocks"]))
    return causes, slips


WEIGHTS = ("W_Q", "W_K", "W_V")


def _graph_runs(probes: list[Probe], runs: list[Seen]) -> list[Seen]:
    """The head's answers to the probes that differentiate it (those that ran)."""
    return [s for p, s in zip(probes, runs, strict=True) if "grad" in p.options and not s.error]


def _graph_cut(
    head: Head, probes: list[Probe], runs: list[Seen] | None, unexplained: list[CheckResult], where: Where
) -> list[Diagnosis]:
    """Inputs the outputs depend on that no gradient reaches, behind a gradients' check nothing else explains: the
    head computes with copies cut from the graph (``nn.Parameter(W_Q)``, ``torch.tensor(W_Q)``, ``W_Q.detach()``).
    The dependence is seen directly: out changes when that input alone changes (an input a head ignores has no
    gradient either, rightly)."""
    if runs is None or "gradient_blocks" not in {c.id for c in unexplained}:
        return []
    graph = _graph_runs(probes, runs)
    unreached = {str(n) for s in graph for n in (s.shape.get("grads") or {}).get("missing", [])}
    missing = [n for n in WEIGHTS if n in unreached]
    if not missing:
        return []
    given = inputs(where.length or 5, torch.float64, torch.Generator().manual_seed(PROBE_SEED), B=2)

    def out(tensors: dict[str, torch.Tensor]) -> torch.Tensor | None:
        try:
            _, got = head.probe(ATTENTION, ARGS, tensors, seed=PROBE_SEED, kwargs=where.kwargs())
        except StudentFailure:
            return None
        return got.get("r0")

    base = out(given)
    if base is None:
        return []
    cut = []
    for name in missing:
        moved = out({**given, name: given[name] * 1.5 + 0.25})
        if moved is not None and (moved.shape != base.shape or not torch.equal(moved, base)):
            cut.append(name)
    return [contract_cause(GRAPH_CUT, listed(cut), ["gradient_blocks"]).with_facts(inputs=tuple(cut))] if cut else []


def _slipped(slips: list[tuple[torch.dtype, torch.dtype]]) -> str:
    """'float64 for float32 inputs and float32 for float64 inputs'."""
    return " and ".join(f"{dtype_name(returned)} for {dtype_name(given)} inputs" for returned, given in slips)


INPLACE = "inplace_input_mutation"
OUTSIDE_TORCH = "computed_outside_torch"
IN_FLOAT32 = "computed_in_float32"


def _one_choice(causes: list[Diagnosis], slips: Slips, bad: str) -> list[Diagnosis]:
    """One decision that shows in several ways, named once (issue 24, family 5): computing outside torch (no
    autograd graph beside NumPy's float64 results for float32 inputs or a dtype it cannot take), a scale held in
    a float32 tensor (its rounding in float64 beside the float16 it cannot take, issue 35), or computing in
    float32 (a float32 softmax beside float32 results for float64 inputs). ``bad``: the dtypes the head raised
    for. Run again once the causes have their lines (the walk may name a part)."""
    ids = {c.id for c in causes}
    returned = {k: [r for r, _ in s] for k, s in slips.items()}
    if "no_autograd_graph" in ids and (torch.float64 in returned["r0"] + returned["r1"] or DTYPE_CRASH in ids):
        parts = ["no_autograd_graph", "output_dtype", "weights_dtype", DTYPE_CRASH]
        said = ["no autograd graph"] + _dtype_slips(slips) + ([f"no {bad} inputs"] if DTYPE_CRASH in ids else [])
        return _merged(causes, OUTSIDE_TORCH, parts, said)
    causes = _width_of_values(causes)
    crash = next((c for c in causes if c.id == DTYPE_CRASH), None)
    if "scale_in_float32" in ids and crash is not None and _float32_met(crash, bad):
        said = ["float32 rounding in float64 results", f"no {bad} inputs ({first_line(crash.detail or '')})"]
        return _merged(causes, SCALE_TENSOR, ["scale_in_float32", DTYPE_CRASH], said)
    if "softmax_in_float32" in ids and torch.float32 in returned["r0"] + returned["r1"]:
        said = ["float32 accuracy in float64 results", *_dtype_slips(slips)]
        return _merged(causes, IN_FLOAT32, ["softmax_in_float32", "output_dtype", "weights_dtype"], said)
    return causes


BREACHES = ("one_value_breach", "breach:causal_self_attention")


def _width_of_values(causes: list[Diagnosis]) -> list[Diagnosis]:
    """Values never projected and the breach of out's width they make, one cause (issue 35, item 11): the checks
    that stopped on out's shape are the projection's, charged once at its price."""
    values = next((c for c in causes if c.id == "no_value_projection"), None)
    breach = next((c for c in causes if c.id in BREACHES and c.fact("shape_of") == "out"), None)
    if values is None or breach is None:
        return causes
    explains = sorted({*values.explains, *breach.explains})
    return [c.model_copy(update={"explains": explains}) if c is values else c for c in causes if c is not breach]


# a projection left out (named from the trace, after the crashes and breaches): the width it leaves, per id
WIDTHS = {
    "no_query_projection": "d_k",
    "no_key_projection": "d_k",
    "no_query_key_projection": "d_k",
    "no_value_projection": "d_v",
}


def _projection_widths(causes: list[Diagnosis]) -> list[Diagnosis]:
    """A projection left out and what its width does, one cause (issue 35, item 5): the crash of a head that runs
    only where that width equals d (Q K^T of X and X W_K), and the breach of out's width (values never
    projected), are the projection's: their checks are its, charged once at its price, at its line."""
    causes = _width_of_values(causes)
    for cid, width in WIDTHS.items():
        own = next((c for c in causes if c.id == cid), None)
        crash = next((c for c in causes if c.id == "width_crash" and width in _widths(c)), None)
        if own is None or crash is None:
            continue
        explains = sorted({*own.explains, *crash.explains})
        causes = [c.model_copy(update={"explains": explains}) if c is own else c for c in causes if c is not crash]
    return causes


SCALE_TENSOR = "scale_tensor_in_float32"


def _widths(crash: Diagnosis) -> tuple[str, ...]:
    """The widths a width crash says must equal d for the head to run (``_where.by_width``)."""
    widths = crash.fact("equal_d")
    return tuple(str(w) for w in widths) if isinstance(widths, tuple) else ()


def _float32_met(crash: Diagnosis, bad: str) -> bool:
    """Whether a crash for narrower dtypes only (float16, bfloat16) is float32 meeting them: what a scale held in
    a float32 tensor with an axis does there (it takes part in type promotion, and the float32 scores meet the
    float16 values), beside the float32 rounding it leaves in a float64 head (issue 35, item 11)."""
    narrow = bool(bad) and all(d.strip() in ("float16", "bfloat16") for d in bad.split(" and "))
    return narrow and crash.fact("float32_met") is True


def _dtype_slips(slips: Slips) -> list[str]:
    """'out and the weights returned as float64 for float32 inputs', or each on its own."""
    if slips["r0"] and slips["r0"] == slips["r1"]:
        return [f"out and the weights returned as {_slipped(slips['r0'])}"]
    what = {"r0": "out", "r1": "the weights"}
    return [f"{what[k]} returned as {_slipped(s)}" for k, s in slips.items() if s]


def _merged(causes: list[Diagnosis], cid: str, parts: list[str], said: list[str]) -> list[Diagnosis]:
    """``causes`` with ``parts`` replaced by the one cause ``cid`` where the first of them stood, at the line of the
    first part that has one (none has before the causes are pointed)."""
    mine = [c for c in causes if c.id in parts]
    explains = sorted({x for c in mine for x in c.explains})
    detail = next((c.detail for c in mine if c.detail), None)
    title, hint, cites = cause(cid).words(consequences=", ".join(said))
    where = next((c.where for c in mine if c.where is not None), None)
    one = Diagnosis(
        id=cid, title=title, hint=hint, cites=cites, kind="contract", explains=explains, detail=detail, where=where
    )
    at = causes.index(mine[0])
    return [c for c in causes[:at] if c.id not in parts] + [one] + [c for c in causes[at:] if c.id not in parts]


def _known(theirs: list[Seen] | None, function: str, bugs: Bugs) -> list[Bug]:
    """The known bugs of ``function`` that the head matches on every probe (none when it matches the
    reference)."""
    candidates, correct = bugs.of(function), bugs.reference(function)
    if theirs is None or not candidates or correct is None or same(theirs, correct):
        return []
    return [b for b in candidates if not all(s.error for s in bugs.answers(b)) and same(theirs, bugs.answers(b))]


def _crashes(failing: list[CheckResult], seen: dict[str, list[Seen] | None]) -> list[Diagnosis]:
    """One cause per distinct student failure that stopped checks: a function that fails on every probe,
    or one message shared by several stopped checks."""
    stops = {c.id: s for c in failing if (s := _stopped(c)) is not None and s.kind in CRASHED}
    stopped = [c for c in failing if c.id in stops]
    importing = any(s.kind == NOT_IMPORTED for s in stops.values())
    by_error: dict[str, list[str]] = {}
    details: dict[str, str] = {}
    for fn, runs in seen.items():
        if runs and all(s.error for s in runs) and first_line(runs[0].message):
            line = first_line(runs[0].message)
            by_error.setdefault(line, []).append(fn)
            details.setdefault(line, runs[0].message)
    for c in stopped:
        line = first_line(stops[c.id].text)
        if line not in by_error and sum(first_line(stops[o.id].text) == line for o in stopped) > 1:
            by_error[line] = []
            details[line] = stops[c.id].text
    causes = []
    for line, fns in by_error.items():
        explains = [c.id for c in stopped if line in stops[c.id].text]
        if not explains:
            continue
        who = f"`{fns[0]}`" if len(fns) == 1 else "Importing your module" if importing else "Your code"
        stub = line.startswith("NotImplementedError") and len(fns) == 1  # the template's
        cid = f"crash:{fns[0] if len(fns) == 1 else 'module' if fns else explains[0]}"
        free = all(c.extra_credit or c.max_score == 0 for c in stopped if c.id in explains)  # issue 53: no "first"
        hang = all(c.status == "timeout" for c in stopped if c.id in explains)  # issue 53: a slow head, no "raises"
        title, hint, cites = cause(cid).words(
            "stub" if stub else "hang" if hang else "free" if free else None,
            who=who,
            exception=exception(line),
            checks=n_checks(len(explains)),
        )
        causes.append(
            Diagnosis(
                id=cid, title=title, hint=hint, cites=cites, kind="crash", explains=explains, detail=details[line]
            ).with_facts(exception=exception(line))
        )
    return causes


NOT_IMPORTED = "not_imported"
CRASHED = ("raised", "timeout", NOT_IMPORTED)  # the ways the student's code stops a whole check that are a crash


def _stopped(c: CheckResult) -> Stop | None:
    """What stopped the whole check ``c`` (its evidence, ``CheckResult.stopped``), if anything did."""
    return next((s for s in c.stopped if s.scope == "check"), None)


def _missing(failing: list[CheckResult]) -> list[Diagnosis]:
    """One cause per contract function the submission does not define, explaining the checks that needed it
    (and interface, which lists it)."""
    by_name: dict[str, list[str]] = {}
    for c in failing:
        for s in (*c.stopped, *c.absent):
            if s.kind == "not_defined" and s.function is not None:
                by_name.setdefault(s.function, []).append(c.id)
    return [
        contract_cause(f"missing:{name}", name, sorted(set(ids)))
        for name, ids in by_name.items()
        if name.isidentifier()
    ]


def _uninstalled(failing: list[CheckResult]) -> list[Diagnosis]:
    """One cause per package the grader lacks that a contract function needs (it was left out, so the checks
    that needed it could not run): named with the functions it costs and what to use instead."""
    names: dict[str, dict[str, None]] = {}  # package -> the functions that need it, in order
    stopped: dict[str, dict[str, None]] = {}  # package -> the checks it stopped
    advice: dict[str, str] = {}
    for c in failing:
        for s in (*c.stopped, *c.absent):
            if s.kind != "uninstalled" or s.package is None or s.function is None:
                continue
            names.setdefault(s.package, {})[s.function] = None
            stopped.setdefault(s.package, {})[c.id] = None
            advice.setdefault(s.package, s.advice or "")
    causes = []
    for package, explains in ((p, list(ids)) for p, ids in stopped.items()):
        title, hint, cites = cause(f"package:{package}").words(
            names=", ".join(f"`{n}`" for n in names[package]),
            package=package,
            checks=n_checks(len(explains)),
            advice=advice[package],
        )
        causes.append(
            Diagnosis(id=f"package:{package}", title=title, hint=hint, cites=cites, kind="contract", explains=explains)
        )
    return causes


# Checks that judge the sound value alone when the other breaks the contract (grader.head.HeadCall.sound): one
# of them passing shows that one returned value was sound and judged (issue 30).
ONE_VALUE = ("convex_hull", "future_perturbation", "batch_independence", "determinism", "permutation_equivariance")


def _breaches(failing: list[CheckResult], passed: set[str]) -> list[Diagnosis]:
    """One cause for the checks that stopped on what the head returns (a single tensor instead of (out,
    weights), a wrong shape or type), named by the most common of their messages; ``one_value_breach`` when
    the other value was judged and passed (``passed``: the passing checks)."""
    lines = {c.id: first_line(s.text) for c in failing if (s := _stopped(c)) is not None and s.kind == "breach"}
    if not lines:
        return []
    line = Counter(lines.values()).most_common(1)[0][0]
    cid = "one_value_breach" if passed & set(ONE_VALUE) else "breach:causal_self_attention"
    stop = next(
        s for c in failing if (s := _stopped(c)) is not None and s.kind == "breach" and first_line(s.text) == line
    )
    cause = contract_cause(cid, line.rstrip("."), list(lines))
    return [cause.with_facts(shape_of=stop.shape_of, undifferentiable=stop.undifferentiable)]


def _makes_non_finite(mutation: str, fitted: dict[str, float]) -> bool:
    """Whether the reference with ``mutation`` alone answers finite inputs with some non-finite entry (an
    inverted mask's last row, a masked diagonal's row 0 filled with -inf)."""
    case = make_case(Shape(2, 5, 4, 3, 4), seed=0)
    for causal in (True, False):
        try:
            got = forward(case.X, case.W_Q, case.W_K, case.W_V, causal, (mutation,), Fit(dict(fitted)))
        except Exception:  # a mutation the model cannot evaluate alone makes nothing
            return False
        if got is not None and not all(bool(torch.isfinite(t).all()) for t in got):
            return True
    return False


def _made_non_finite(causes: list[Diagnosis], fitted: dict[str, float]) -> list[Diagnosis]:
    """The non-finite outputs, one cause with the mistake that makes them: where the search named no maker before
    the walk (a clamp of the weights it cannot model beside a masked diagonal), the first cause the walk named
    whose model alone answers finite inputs with a non-finite entry takes the checks their NaN left unobserved,
    as ``_by_maker`` gives them (one mistake, one deduction)."""
    nan = next((c for c in causes if c.id == "non_finite_outputs"), None)
    if nan is None:
        return causes
    # a row left with no key is NaN when it is filled with -inf: what the head's non-finite outputs say it was
    seen = {"hide_fill": -math.inf, **fitted}
    maker = next((c for c in causes if c.kind == "mutation" and _makes_non_finite(c.id, seen)), None)
    if maker is None:
        return causes
    explains = sorted({*maker.explains, *nan.explains})
    return [c.model_copy(update={"explains": explains}) if c is maker else c for c in causes if c is not nan]


def _non_finite_runs(runs: list[Seen] | None) -> bool:
    """Whether the head's own probe runs (finite inputs) hold a non-finite value."""
    return any(
        not s.error and any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in s.values.values())
        for s in runs or []
    )


def _by_maker(causes: list[Diagnosis], failing: list[CheckResult], makers: list[str]) -> list[Diagnosis]:
    """The checks left unobserved by the head's non-finite outputs (issue 30), explained by the named cause that
    makes them (the first of ``makers``): one mistake, one deduction, never a second cause for its NaN."""
    unobserved = [c.id for c in failing if _unobserved(c) is not None]
    if not makers or not unobserved:
        return causes
    return [
        d.model_copy(update={"explains": sorted({*d.explains, *unobserved})}) if d.id == makers[0] else d
        for d in causes
    ]


def _unobserved(c: CheckResult) -> str | None:
    """What a check saw of non-finite outputs on finite inputs: its not-observed verdict or its note."""
    return c.unobserved.said if c.unobserved is not None else None


def _non_finite(failing: list[CheckResult]) -> list[Diagnosis]:
    """One cause for the checks during which the head answered finite inputs with no finite number (issue 30):
    those it left unobserved, and those that failed on such values, named by the smallest input seen."""
    found = {c.id: said for c in failing if (said := _unobserved(c)) is not None}
    if not found:
        return []
    detail = Counter(found.values()).most_common(1)[0][0]
    return [contract_cause("non_finite_outputs", detail, list(found))]


def _own(unexplained: list[CheckResult]) -> list[Diagnosis]:
    """The failures of self-contained checks that no other cause explains, each its own cause."""
    out = []
    for c in unexplained:
        if c.id in SELF_CONTAINED:
            title, hint, cites = cause(f"own:{c.id}").words(check=c.id, observed=first_line(c.message), cites=c.cites)
            out.append(
                Diagnosis(id=f"own:{c.id}", title=_short(title), hint=hint, cites=cites, kind="own", explains=[c.id])
            )
    return out


def _short(title: str, limit: int = 160) -> str:
    """``title`` within ``limit`` characters, cut between two words and said to be cut (issue 53: never mid-word)."""
    return textwrap.shorten(title, limit, placeholder=" …")


def _explained(causes: list[Diagnosis], failing: list[CheckResult]) -> list[Diagnosis]:
    """A check stopped by a crash belongs to the crash, and to a mutation or a contract breach found where the
    head runs that breaks its property (the grade charges it to the crash: it was never observed); to no other
    cause. Causes that
    explain nothing left stay listed (a mutation can be real even when no failing check of its own is in this
    rubric)."""
    crashed = {cid for c in causes if c.kind == "crash" for cid in c.explains}
    out, ids = [], set()
    for c in causes:
        if c.id in ids:
            continue
        ids.add(c.id)
        found_where_it_runs = c.kind in ("crash", "mutation", "contract")
        keep = c.explains if found_where_it_runs else [x for x in c.explains if x not in crashed]
        out.append(c.model_copy(update={"explains": keep}))
    return out


def kit_cause_ids() -> frozenset[str]:
    """The ids the student kit built from this grader names: the error model's and the known bugs it stores."""
    return model_cause_ids() | stored_ids(load_reference())


def caught_by(chaff: KnownHead) -> tuple[str, ...]:
    """The checks a chaff of the library breaks: its mutation's (causes.toml), or its catalog's own."""
    return violates(chaff.mutation) if chaff.mutation else chaff.caught_by


def attach_causes(checks: list[CheckResult], diagnosis: list[Diagnosis]) -> list[CheckResult]:
    """Each failing check with the ids of the causes that explain it."""
    out = []
    for c in checks:
        ids = [d.id for d in diagnosis if c.id in d.explains] if c.status in FAILING else []
        out.append(c.model_copy(update={"causes": ids}) if ids else c)
    return out


def count_causes(results: Iterable[GradeResult]) -> Counter[str]:
    """How many submissions each root cause was found in (for a class summary)."""
    return Counter(d.id for r in results for d in {d.id: d for d in r.diagnosis}.values())


count_diagnoses = count_causes
