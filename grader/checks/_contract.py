"""The contract itself: names, shapes, dtypes, purity, and agreement with the reference (Definition 2.2)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import torch

from grader.checks._base import (
    CaseOutcome,
    Ctx,
    Verdict,
    by_case,
    case_call,
    check,
    every_group,
    failed,
    heatmaps_for,
    passed,
    stop_of,
    weights_of,
)
from grader.compare import Tolerance, dtype_name, mismatch, tolerance
from grader.head import CORE, HeadCall, ImportFailure, MissingFunction, StudentFailure
from grader.inputs import FAMILIES, Case, Shape, make_case
from grader.models import Stop

# The interface check's headline when the module did not import (grader.batch reads it: "did_not_import").
NOT_IMPORTED = "Your module could not be imported, so none of its functions could be called:"
R = TypeVar("R")


@check(
    "interface",
    title="the module provides the contract with the right shapes and dtypes and without side effects",
    cites="Section 9.1 (batched shapes)",
    needs=(),
)
def interface(ctx: Ctx) -> Verdict:
    """Section 9.1: every contract function exists, returns the documented shapes and dtypes, leaves
    its inputs untouched, and answers new inputs anew (no memoised replies)."""
    # A function besides the head that is not there (not defined, a package missing) is judged as one that
    # raises (issue 53: a .py whose stubs raise and a notebook that leaves them out get the same grade): its own
    # check stops on it and the diagnosis charges it there, once. The head itself is what this check judges.
    raised: list[str] = []
    absent: set[str] = set()
    for name in CORE:
        try:
            ctx.head.require(name)
        except ImportFailure as exc:  # every other check stops on the same error
            return failed(f"{NOT_IMPORTED} {exc.message}", stopped=[Stop(kind="not_imported", text=exc.message)])
        except StudentFailure as exc:
            if exc.status == "timeout":  # the import hung: a hang, not a missing function
                raise
            if name == "causal_self_attention":
                gone = [stop_of(exc)] if isinstance(exc, MissingFunction) else []
                return failed(f"The submission does not provide the whole contract:\n{exc.message}", absent=gone)
            raised.append(f"`{name}` ({exc.message})")
            absent.add(name)
    shape = Shape(2, 3, 4, 2, 3)
    for dtype in (torch.float64, torch.float32):
        a = make_case(shape, seed=ctx.seed(0), dtype=dtype)
        call = ctx.head.attention(a, return_inputs=True)
        for breach in call.broken.values():  # the contract's verdict; the other checks judge the sound value
            raise breach
        wrong = [
            f"{what} as {dtype_name(got)}"
            for what, got in zip(("out", "weights"), call.returned_dtypes or (dtype, dtype), strict=True)
            if got != dtype
        ]
        if wrong:
            return failed(
                f"For {dtype_name(dtype)} inputs, causal_self_attention returned {' and '.join(wrong)}; return "
                "tensors in the dtype of the inputs (Section 9.1). The other checks judged your values cast to "
                f"{dtype_name(dtype)}, so this slip costs points here only.",
                counterexample=a.counterexample(ctx.base_seed),
            )
        for name, sent in a.tensors().items():
            if not torch.equal(call.inputs_after[name], sent):
                return failed(
                    f"causal_self_attention modified its input {name} in place; a head must not change its "
                    "arguments (the grader and any caller may reuse them).",
                    counterexample=a.counterexample(ctx.base_seed),
                )
    _any_length(ctx)
    first = make_case(shape, seed=ctx.seed(1))
    second = make_case(shape, seed=ctx.seed(2))
    out_first = ctx.head.attention(first).out
    out_second = ctx.head.attention(second).out
    if torch.equal(out_first, out_second):
        return failed(
            "Two calls with different inputs of the same shape returned identical outputs. Compute every "
            "output from the arguments of the call; never cache results across calls.",
            counterexample=second.counterexample(ctx.base_seed),
        )
    _returned("gaussian_positional_weights", lambda: ctx.head.gaussian_weights(4, 1.0), raised, absent)
    _returned("gaussian_positional_qk", lambda: ctx.head.gaussian_qk(4, 1.0), raised, absent)
    stats = _returned(
        "score_scale_statistics", lambda: ctx.head.statistics(16, T=16, n_samples=4, seed=0), raised, absent
    )
    missing = [k for k in ("raw_std", "scaled_std", "raw_max_weight", "scaled_max_weight") if k not in (stats or {})]
    if stats is not None and missing:
        return failed(
            "score_scale_statistics must return a dict with float values for raw_std, scaled_std, "
            f"raw_max_weight and scaled_max_weight; missing or not a number: {', '.join(missing)}."
        )
    said = "All contract functions exist; shapes, dtypes and purity are as documented."
    if absent:
        said = "The contract holds where it could be judged: shapes, dtypes and purity are as documented."
    if raised:
        said += (
            "\nNot judged here (each raised or is not there: its own check reports it, and it is charged there "
            "once): " + "; ".join(raised) + "."
        )
    return passed(said)


def _returned(name: str, call: Callable[[], R], raised: list[str], absent: set[str]) -> R | None:
    """What ``call`` returned, judged for its shapes by the head (a wrong one fails this check); None when the
    student's function raised instead (a template stub, a crash of one exercise). A raise is no breach of what
    the function returns: the check of that function stops on the same error, and the diagnosis charges it
    there, once. A hang is not caught (grader/_hangs.py prices it). A function in ``absent`` is not there (said in
    ``raised`` already): not called."""
    if name in absent:
        return None
    try:
        return call()
    except StudentFailure as exc:
        if exc.status != "error":
            raise
        raised.append(f"`{name}` ({next(iter(exc.message.strip().splitlines()), exc.message)[:200]})")
        return None


# The lengths the contract is judged at: any T means short and long ones, a power of two and the lengths just
# past the buffers public code fixes (8, 128), so that a head that takes only some lengths breaches it here.
CONTRACT_LENGTHS = (1, 2, 5, 8, 9, 16, 64, 129)


def _any_length(ctx: Ctx) -> None:
    """Section 9.1: causal_self_attention takes every length T. The first length it raises at stops this
    check with the head's own error (the diagnosis names the lengths; the property checks are judged again
    where the head runs, grader/runner.py); the length is said on the lines after the error. A hang is not
    judged here: the longer lengths are left, and the hang costs the checks that need them (grader/_hangs.py)."""
    for T in CONTRACT_LENGTHS:
        case = make_case(Shape(2, T, 4, 2, 3), seed=ctx.seed(10 + T))
        try:
            call = ctx.head.attention(case)
        except StudentFailure as exc:
            if exc.status == "timeout":
                return
            if exc.status != "error":
                raise
            raise StudentFailure(
                "error", f"{exc.message}\n(raised at T = {T}: the contract takes inputs of any length, Section 9.1)"
            ) from None
        for breach in call.broken.values():  # one value breaks the contract at this length
            raise breach


PUBLIC_CASES_NOTE = (
    "Student kit: compared with the reference's stored outputs on fixed public cases (the inputs of the "
    "rubric's seed, the inputs the instructor's grader draws by default); another seed moves only the property "
    "checks."
)


@check(
    "reference_match",
    title="outputs and weights equal the instructor reference in float64",
    cites="Definition 2.2 and Definition 4.1",
)
def reference_match(ctx: Ctx) -> Verdict:
    """Definition 2.2 (with the causal mask of Definition 4.1): on float64 inputs of several shape
    families, including T = 1 and d_k != d_v != d, both outputs equal the reference, causal or not.
    Partial credit: the fraction of (shape family, causal) cases that match."""
    tol = tolerance("reference")
    public = ctx.ref.public_cases("reference_match")  # the student kit: the fixed cases it stores outputs of
    base, cases = (ctx.base_seed, list(ctx.cases(FAMILIES))) if public is None else public
    outcomes = [_reference_case(ctx, case, causal, tol, base) for case in cases for causal in (True, False)]
    precision = ctx.precision()
    detail = ""
    if precision != torch.float64 and any(o.problem for o in outcomes):
        detail = (
            f"\nYour head computes in {dtype_name(precision)}: its float64 results are all {dtype_name(precision)} "
            "numbers (they round-trip exactly), so they cannot match to float64 accuracy. Compute in the dtype "
            "of the inputs (no .float() or .half() inside the head)."
        )
    verdict = by_case(outcomes, "Agreement with the reference head (float64)", detail=f" ({tol})")
    verdict.message += detail
    if public is not None:
        verdict.notes.append(PUBLIC_CASES_NOTE)
    return verdict


def _reference_case(ctx: Ctx, case: Case, causal: bool, tol: Tolerance, base_seed: int) -> CaseOutcome:
    label = f"{'causal' if causal else 'unmasked'} T={case.shape.T}"
    outcome, call = case_call(ctx, case, causal, label, base_seed=base_seed)
    if call is None:
        return outcome
    out, w = ctx.ref.expected(case, causal)
    for what, got, exp in (("weights", call.weights, w), ("out", call.out, out)):
        bad = mismatch(got, exp, tol, f"{what} (causal={causal})")
        if bad is not None:
            outcome.problem = (
                f"your `{what}` differs from the reference head's (Definition 2.2"
                f"{', masked as in Definition 4.1' if causal else ', unmasked'}).\n{bad.text()}"
            )
            outcome.heatmaps = heatmaps_for(call.weights, w, causal=causal, batch=bad.abs_index[0])
            outcome.mismatch = bad
            break
    return outcome


@check(
    "determinism",
    title="the same input gives bitwise identical results, whatever the random state",
    cites="Section 9.1 (executable assertions need deterministic arithmetic)",
)
def determinism(ctx: Ctx) -> Verdict:
    """Section 9.1: the head is a function — the same input gives the same bits whatever the state of the
    random generators, with or without autograd recording (dropout or other randomness left on breaks
    this). This check alone varies the random state; every other check seeds its paired calls alike."""
    firsts: dict[int, HeadCall] = {}
    others = (
        ("a call with another random state", {"rng": ctx.seed(2)}),
        ("a call under torch.no_grad()", {"rng": ctx.seed(1), "no_grad": True}),
    )

    def judge(label: str, options: dict[str, Any]) -> Verdict | None:
        for k, case in enumerate(ctx.cases(FAMILIES[2:4])):
            if k not in firsts:
                firsts[k] = ctx.head.attention(case, rng=ctx.seed(1))
            first, other = firsts[k], ctx.head.attention(case, **options)
            for what in first.sound():
                a, b = getattr(first, what), getattr(other, what)
                if not ctx.same(a, b, case, what=what):
                    diff = (a.double() - b.double()).abs().nan_to_num(float("inf")).max()
                    return failed(
                        f"The same input gave different {what} on {label} (largest difference {diff:.4g}; 0 "
                        "allowed). A head has no randomness: remove dropout or any random sampling (in "
                        "train mode, nn.Dropout is active: call .eval() or drop it).",
                        counterexample=case.counterexample(ctx.base_seed),
                        heatmaps=heatmaps_for(weights_of(first), weights_of(other), label="the other call's"),
                    )
        return None

    # Every group runs (issue 30): randomness and a no_grad-dependent result are two failures.
    verdict = every_group([(label, partial(judge, label, options)) for label, options in others])
    if verdict is not None:
        return verdict
    return passed("Repeated calls (other random states, with and without autograd) give bitwise identical results.")
