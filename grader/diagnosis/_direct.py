"""The causes seen directly in the check results and the head's answers: crashes, missing functions and packages,
contract breaches (dtypes, in-place writes, no autograd graph, a graph cut), non-finite outputs and what makes
them, a self-contained check's own failure; and which failing checks a cause explains.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from typing import TYPE_CHECKING

import torch

from grader.diagnosis._causes import cause
from grader.diagnosis._known import (
    PROBE_SEED,
    Probe,
    Seen,
)
from grader.diagnosis._lines import GRAPH_CUT
from grader.diagnosis._mutations import Fit, forward
from grader.diagnosis._naming import (
    LEAKY,
    SELF_CONTAINED,
    contract_cause,
    n_checks,
)
from grader.diagnosis._where import (
    ARGS,
    ATTENTION,
    Where,
    dtype_name,
    exception,
    first_line,
    inputs,
)
from grader.head import Head, StudentFailure
from grader.inputs import Shape, make_case
from grader.models import (
    CheckResult,
    Diagnosis,
    Stop,
)
from grader.scoring import listed

if TYPE_CHECKING:
    pass


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
