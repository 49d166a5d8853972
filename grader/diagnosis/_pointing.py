"""Every cause says where (issue 28): the departures of the head's traced computation, attached to the causes
the diagnosis named, and those no named cause describes made causes of their own.

A mutation found by the search carries the line of the departure its model explains; a known bug or a
mutation without one carries the first departure left; a crash carries the line that raised in one traced
call; computing outside torch or its graph, the first ``.numpy()`` or ``.detach()``; a forbidden API, the line
its check found. When failing checks stay unexplained and a departure is left, the departure itself is the
cause ("departure:<stage>"): its description, its line, the checks it explains, priced by what it breaks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from functools import cache
from typing import Any

import torch

from grader.diagnosis._causes import cause, lined, table
from grader.diagnosis._departure import SUBSTITUTED, Departure, follow
from grader.diagnosis._finding import NAMES, TITLES, Finding, catalog
from grader.diagnosis._intervene import INTERVENE, Intervention, intervene, large
from grader.diagnosis._known import PROBES
from grader.diagnosis._mutations import FITTED, SLOT_OF, Combo
from grader.diagnosis._naming import LEAKY, SELF_CONTAINED, mutation_cause, violates
from grader.diagnosis._proof import Walked
from grader.diagnosis._relations import _dropout, _float32
from grader.diagnosis._sites import _operand_site
from grader.diagnosis._stages import stages_of
from grader.diagnosis._trace import FLOAT32_ATOL, FLOAT32_RTOL, PROBE_T, Record, Trace, _derived, _equal, probe, traced
from grader.diagnosis._where import ATTENTION, DTYPE_CRASH, SIZE_CRASH
from grader.head import CORE, Head, ImportFailure, StudentFailure, all_finite
from grader.models import CheckResult, Diagnosis, SourceLine
from grader.models import Departure as Shown

Traced = Callable[[], Trace | None]  # the head's traced call on the probe, made on first use

# the rules here that find a kind's line, as causes.toml's ``line`` names them (issue 51: a kind's line is a field of
# its entry; the tuples of ids below are derived from it)
LINE_RULES = frozenset(
    {"traced", "first_non_finite", "float32_departure", "float32_made", "leaving", "graph_cut", "returning",
     "returned_only", "made_by"}
)  # fmt: skip
LEFT = ("numpy", "tolist", "detach", "inplace")  # what the sandbox's trace records leaving (``Trace.left``'s keys)


def _lined(rule: str) -> tuple[str, ...]:
    return lined(rule, LINE_RULES)


# checks a departure of the head's values does not explain: the self-contained ones, and the calling contract
NOT_VALUES = (*SELF_CONTAINED, "interface", "input_mutation")


def point(
    head: Head,
    causes: list[Diagnosis],
    failing: list[CheckResult],
    combo: Combo,
    fitted: dict[str, float],
    flags: tuple[bool, ...] = (True, False),
    length: int | None = None,
    square: bool = False,
    passed: frozenset[str] = frozenset(),
    walked: Walked | None = None,
) -> list[Diagnosis]:
    """``causes`` each with its line, and a cause for a departure no named cause describes (traced where the head
    runs: at ``length``, with ``flags``, with d_k = d_v = d when ``square``); one whose words are a catalog
    cause's that no check in ``passed`` rules out is named as that cause. ``walked``, when given, receives the
    complete walk and the ids of the causes it made (for the proof, ``_proof``)."""
    shown = _SHOWN.set({})  # the findings of the departures this call attaches
    try:
        return _point(head, causes, failing, combo, fitted, flags, length, square, passed, walked)
    finally:
        _SHOWN.reset(shown)


def _point(
    head: Head,
    causes: list[Diagnosis],
    failing: list[CheckResult],
    combo: Combo,
    fitted: dict[str, float],
    flags: tuple[bool, ...],
    length: int | None,
    square: bool,
    passed: frozenset[str],
    walked: Walked | None,
) -> list[Diagnosis]:
    once = cache(lambda: traced(head, probe(length, square), True))  # one traced call on the probe serves all three
    out = _forbidden_lines(once, _left_torch(once, _crash_lines(head, causes, length)), failing)
    out = _return_lines(once, _cut_lines(once, out))
    valued = [c for c in failing if c.id not in NOT_VALUES]
    if not valued and not any(c.kind in ("mutation", "known") or c.id in TRACED for c in out):
        return out
    found = follow(head, combo, fitted, flags, length, square)
    left = list(found)
    for k, c in enumerate(out):
        if c.kind != "mutation":
            continue
        mine = next((d for d in left if c.id in d.explained_by or _leaky(c.id) in d.explained_by), None)
        if mine is not None:
            left = [d for d in left if d is not mine]  # by identity: a departure holds tensors, == is theirs
            out[k] = _with(c, mine)
    for k, c in enumerate(out):
        if c.id == NON_FINITE and c.where is None:
            # where a value first holds a non-finite entry, never the first departure whatever it is (a wrong scale
            # before a mask that hides a whole row: the scale is a mistake of its own)
            nan = next((d for d in left if d.record.value is not None and not all_finite(d.record.value)), None)
            if nan is not None:
                left = [d for d in left if d is not nan]
                out[k] = _with(c, nan)
        elif (c.kind in ("mutation", "known") or c.id in TRACED) and c.where is None and left:
            # a value off by float32 rounding alone is a float32 cause's (``X = X.float()``), not the next one's
            mine = next((d for d in left if _in_float32(d) == _float32_cause(c.id)), None)
            mine = mine if mine is not None or not _float32_cause(c.id) else left[0]
            if mine is not None:
                left = [d for d in left if d is not mine]
                out[k] = _with(c, mine)
    explained = {x for c in out for x in c.explains}
    unexplained = [c.id for c in valued if c.id not in explained]
    if unexplained and left:
        dep = left[0]
        stage = dep.stage
        named = _named(dep, unexplained, {c.id for c in failing}, passed)
        title, hint, cites = cause(f"departure:{stage}").words(
            stage=TITLES.get(stage, stage),
            stage_name=NAMES.get(stage, stage),
            description=dep.description,
            line=dep.record.line,
            file=dep.record.file,
        )
        made = named or Diagnosis(
            id=f"departure:{stage}", title=title[:300], hint=hint, cites=cites, kind="departure", explains=unexplained
        )
        same = next((k for k, c in enumerate(out) if c.id == made.id), None)
        if same is None:
            out.append(_with(made, dep))
        else:  # the cause the search named already: the checks left are its too, and so is the line
            c = out[same]
            c = c.model_copy(update={"explains": sorted({*c.explains, *made.explains})})
            out[same] = c if c.where is not None else _with(c, dep)
    if INTERVENE and valued:  # issue 35: every mistake, found by intervention
        out = _intervened(head, out, valued, flags, fitted, {c.id for c in failing}, passed, walked or Walked())
    out = _operand_lines(once, _made_lines(once, _returning_lines(once, out)), probe(length, square))
    return _one_dtype_choice(_refined(out))


def _refined(causes: list[Diagnosis]) -> list[Diagnosis]:
    """Each mutation the search named whose line's finding names a kind that refines it (``refines`` in
    causes.toml: the same values, told apart by what the walk sees, such as the scale applied twice where the
    search sees the scores divided by d_k), named as that kind: its words, at the same line, explaining the same."""
    out = []
    for c in causes:
        named = _names(_found(c)) if c.kind == "mutation" and c.departure is not None else None
        if named is not None and named != c.id and cause(named).refines == c.id:
            title, hint, cites = cause(named).words()
            c = c.model_copy(update={"id": named, "title": title, "hint": hint, "cites": cites})
        out.append(c)
    return out


FLOAT32_CAUSES = _lined("float32_departure")  # computed_in_float32, scale_tensor_in_float32


def _float32_cause(cid: str) -> bool:
    """A cause that is arithmetic in float32: the dtype slot's mutations and the decisions they are part of."""
    return SLOT_OF.get(cid) == "dtype" or cid in FLOAT32_CAUSES


def _in_float32(d: Departure) -> bool:
    """A departure whose value is the stage to float32 accuracy only (see ``_relations._float32``)."""
    return d.finding.float32


def _intervened(
    head: Head,
    causes: list[Diagnosis],
    valued: list[CheckResult],
    flags: tuple[bool, ...],
    fitted: dict[str, float],
    failed: set[str],
    passed: frozenset[str],
    walked: Walked,
) -> list[Diagnosis]:
    """``causes``, each named mistake at the line of the intervention its model explains, and a cause for each
    intervention at a line no cause points at, when the head with all the interventions returns the lecture's
    (out, weights) at every flag (the walk is complete: the changes together are proven on the probe): the
    catalog's cause its words describe (issue 35, item 4: the catalog names, the intervention finds), else a
    departure cause; the checks no cause explains go to the first one."""
    walk = intervene(head, None, flags)  # on the small probe: a head that runs at one length only crashes there, and
    # the walk goes past the crash (its own cause names it) to the mistakes behind it
    if not walk.complete:
        return causes
    walked.walk = walk
    causes = _placed(causes, walk.interventions, fitted)
    if any(c.kind == "known" for c in causes):
        return causes  # a known bug matched on every probe is the whole head: its interventions are its lines
    named = [c.id for c in causes if c.kind == "mutation"]
    explained = {x for c in causes for x in c.explains}
    unexplained = [c.id for c in valued if c.id not in explained]
    out = list(causes)
    fallback: int | None = None  # a departure named by an intervention's words: the checks left are its own again
    for i in walk.interventions:
        if i.record.op == "raise":
            continue  # a crash: the failing checks' own cause names it
        shown = replace(i.at, value=i.value)
        dep = Departure(shown, i.stage, i.finding, i.expected, (), i.causal, dict(i.context))
        same = next(
            (
                k
                for k, c in enumerate(out[: len(causes)])  # the causes named before the walk
                if c.departure and c.departure.causal == i.causal and _found(c).extends(i.finding)
            ),
            None,
        )
        if same is not None and out[same].kind == "departure":  # said as a departure, which the intervention's
            # words name (a float32 softmax): that cause, at the departure's line, explaining what it explained
            upgraded = _named(dep, [], failed, passed, intervened=True)
            if upgraded is not None and not any(c.id == upgraded.id for c in out):
                old = out[same]
                out[same] = upgraded.model_copy(update={"where": old.where, "departure": old.departure})
                walked.made.add(upgraded.id)
                # what it explained beyond the named cause's own checks goes to the mistakes found after it
                unexplained = sorted({*unexplained, *(x for x in old.explains if x not in upgraded.explains)})
                fallback = fallback if fallback is not None else same
            continue
        if same is not None:
            continue  # a cause says the same of the same stage
        made = _named(dep, unexplained, failed, passed, intervened=True)
        k = next((k for k, c in enumerate(out) if made is not None and c.id == made.id), None)
        if k is not None and not _said(out[k]):  # named already, with no line or at a line whose words do not
            out[k] = _with(out[k], dep)  # say it (the first departure its model left): this is its line
            continue
        modelled = [*named, *(c.id for c in out[len(causes) :] if c.id in SLOT_OF)]  # and those named here
        if (made is None or k is not None) and any(_made_by(i, m, _probed(i), fitted) for m in modelled):
            continue  # a named mutation's model makes this value: that mistake (unless its words name another)
        if k is not None and (w := out[k].where) is not None and (w.file, w.line) == (i.at.file, i.at.line):
            continue  # named already, at this very line, in these words: the same mistake
        if k is not None:
            made = None  # named already (at another line): this one stays a departure of its own
        if made is None and i.large:
            continue  # huge scores show what the catalog names there (a weak fill, exp without the max), no more
        there = [c for c in out if c.where is not None and (c.where.file, c.where.line) == (i.at.file, i.at.line)]
        kinds = {SLOT_OF.get(_leaky(c.id)) for c in there}
        if there and (SLOT_OF.get(made.id) in kinds if made is not None else None in kinds):
            continue  # a cause points there already: another there is a mistake of another kind than its mutations
        if made is None:
            cid = f"departure:{i.stage}"
            cid = cid if not any(c.id == cid for c in out) else f"{cid}:{i.at.line}"  # one id per cause
            title, hint, cites = cause(cid).words(
                stage=TITLES.get(i.stage, i.stage),
                stage_name=NAMES.get(i.stage, i.stage),
                description=i.description,
                line=i.at.line,
                file=i.at.file,
            )
            made = Diagnosis(id=cid, title=title[:300], hint=hint, cites=cites, kind="departure", explains=unexplained)
        unexplained = []
        out.append(_with(made, dep))
        walked.made.add(made.id)
    if unexplained and fallback is not None:
        c = out[fallback]
        out[fallback] = c.model_copy(update={"explains": sorted({*c.explains, *unexplained})})
    return out


def _said(c: Diagnosis) -> bool:
    """Whether ``c`` stands at a line whose departure's finding names it (the catalog's cause for its id)."""
    if c.where is None or c.departure is None:
        return False
    named = catalog(_found(c), never_used=True, transposed=True, float32=True)
    return named is not None and named[0] == c.id


def _named(
    dep: Departure, unexplained: list[str], failed: set[str], passed: frozenset[str], intervened: bool = False
) -> Diagnosis | None:
    """The cause of the catalog ``dep``'s finding names (issue 35, item 4: the catalog names, the trace finds),
    explaining the checks left and the failing ones it breaks; None when it names no cause, or a passing check
    rules that cause out (it stays a departure of its own). ``intervened``: the departure is an intervention's
    (it says more: a stage never used, the weights returned transposed, a float32 softmax)."""
    found = catalog(
        dep.finding,
        never_used=intervened,
        transposed=intervened and dep.stage == "weights",  # the weights' transpose, where it is their own value's
        float32=intervened and dep.stage in ("masked", "weights"),  # float32 from the softmax's input on
    )
    if found is None:
        return None
    cid, number = found
    if set(cause(cid).ruled_out_by) & passed:
        return None
    if cid in SLOT_OF:
        fitted = {FITTED[cid]: number} if number is not None and cid in FITTED else {}
        if cid in FITTED and not fitted:
            return None
        named = mutation_cause(cid, fitted, failed)
    else:
        title, hint, cites = cause(cid).words(code=dep.record.code, line=dep.record.line)
        explains = [c for c in violates(cid) if c in failed]
        named = Diagnosis(id=cid, title=title[:300], hint=hint, cites=cites, kind="departure", explains=explains)
    return named.model_copy(update={"explains": sorted({*named.explains, *unexplained})})


def _placed(causes: list[Diagnosis], interventions: list[Intervention], fitted: dict[str, float]) -> list[Diagnosis]:
    """Each named mutation at the line of the intervention whose departing value its model makes (the lecture's
    head with that mutation alone: the walk has replaced the mistakes before it), and a known bug named alone at
    the line of the one intervention, when the cause has no line, its line shows only the output (a symptom
    downstream: the stack of a per-sequence loop, the reshape of a head axis), or its line is the use of a value
    the walk found made on another line (the cause points there, the use in its words)."""
    values = [i for i in interventions if i.record.op != "raise"]
    alone = values[0] if len(values) == 1 and sum(c.kind in ("mutation", "known") for c in causes) == 1 else None
    out = []
    for c in causes:
        mine = next((i for i in values if c.kind == "mutation" and _made_by(i, c.id, _probed(i), fitted)), None)
        mine = alone if c.kind == "known" else mine  # one known bug and one intervention: the same mistake
        symptom = c.departure is not None and c.departure.stage == "out"
        used = mine is not None and mine.site is not None and c.where is not None and c.where.line == mine.record.line
        # a scale the first departure and the walk say the same of (their findings name it alike): where the walk
        # patched it is the line (unscaled scores seen at a mask on a branch, where the walk patched the product).
        # A projection keeps the first departure's line: the caller's that passed the wrong weight, not its use
        worded = (
            mine is not None
            and SLOT_OF.get(c.id) == "scale"
            and c.where is not None
            and c.departure is not None
            and mine.at.line != c.where.line
            and _names(mine.finding) == c.id == _names(_found(c))
        )
        if mine is not None and mine.stage != "out" and (c.where is None or symptom or used or worded):
            # at its use, the mistake is where the walk found it made: a mask's pattern, a stage never used
            shown = replace(mine.at, value=mine.value)
            c = _with(c, Departure(shown, mine.stage, mine.finding, mine.expected, (), mine.causal, mine.context))
        out.append(c)
    return out


def _probed(i: Intervention) -> dict[str, torch.Tensor]:
    """The probe ``i`` was found on."""
    return large() if i.large else probe()


def _made_by(i: Intervention, mutation: str, tensors: dict[str, torch.Tensor], fitted: dict[str, float]) -> bool:
    """Whether ``i``'s departing value is a stage of the lecture's head with ``mutation`` alone where that stage
    differs from the lecture's."""
    mutation = _leaky(mutation)
    if i.value is None or i.record.op == "raise" or mutation not in SLOT_OF:
        return False
    if SLOT_OF[mutation] == "dtype" and i.expected is not None and i.value.dtype == torch.float32:
        return _float32(i.value, i.expected) is not None  # float32 rounding: the dtype's mistake, at any stage
    if SLOT_OF[mutation] == "randomness" and i.expected is not None:
        return _dropout(i.value.double(), i.expected.double()) is not None  # its own draws: the relation is the proof
    lecture = stages_of(tensors, i.causal, (), fitted, None)
    model = stages_of(tensors, i.causal, (mutation,), fitted, None)
    if lecture is None or model is None:
        return False
    return any(_alike(i.value, v, s) and not (s in lecture and _alike(lecture[s], v, s)) for s, v in model.items())


def _alike(a: torch.Tensor, b: torch.Tensor, stage: str) -> bool:
    """Equal, or for scores (before the softmax) equal once softmaxed: a constant added to every score of a row
    (-1e9 everywhere where the model's scale of 0 makes 0 everywhere) changes nothing the head computes."""
    if a.shape != b.shape:
        return False
    # alike to float32 accuracy: a value that went through float32 on its way (a float32 softmax, cast back) is
    # another mistake's rounding (the dtype's mutations are told by their own relation, in _made_by)
    tol = {"rtol": FLOAT32_RTOL, "atol": FLOAT32_ATOL}
    if _equal(a, b, **tol):
        return True
    if stage not in ("scores", "premasked", "scaled", "masked") or a.dim() < 2:
        return False
    with torch.no_grad():
        return _equal(torch.softmax(a.double(), dim=-1), torch.softmax(b.double(), dim=-1), **tol)


def _leaky(cid: str) -> str:
    """The search's id of a mask constant named "leaky" once fitted."""
    return {leaky: weak for weak, leaky in LEAKY.items()}.get(cid, cid)


def _names(f: Finding) -> str | None:
    """The catalog's cause a finding names (as any departure's), or None."""
    named = catalog(f)
    return named[0] if named is not None else None


# the finding of each departure a cause shows, by the shown departure's identity (kept alive here while the
# pointing lasts): the report's Departure carries the words only
_SHOWN: ContextVar[dict[int, tuple[Shown, Finding]]] = ContextVar("shown")


def _found(c: Diagnosis) -> Finding:
    """The finding of the departure ``c`` shows (attached by :func:`_with` in this pointing)."""
    assert c.departure is not None
    return _shown()[id(c.departure)][1]


def _shown() -> dict[int, tuple[Shown, Finding]]:
    """This pointing's findings (a fresh table where a pass is called on its own, outside :func:`point`)."""
    try:
        return _SHOWN.get()
    except LookupError:
        _SHOWN.set({})
        return _SHOWN.get()


def _with(c: Diagnosis, dep: Departure) -> Diagnosis:
    r = dep.record
    where = SourceLine(file=r.file, line=r.line, code=r.code, context=dict(dep.context))
    shown = Shown(
        stage=dep.stage,
        description=dep.description,
        expected=_matrix(dep.expected),
        produced=_matrix(r.value),
        causal=dep.causal,
    )
    _shown()[id(shown)] = (shown, dep.finding)
    return c.model_copy(update={"where": where, "departure": shown})


MATRIX_MAX = 8  # rows and columns of a stage shown beside the line: its top-left corner


def _matrix(t: torch.Tensor | None) -> list[list[float | None]] | None:
    """Batch 0 of a (B, T, *) value as rows (at most MATRIX_MAX of each); None for non-finite entries."""
    if t is None or t.dim() != 3 or not t.dtype.is_floating_point:
        return None
    rows = t[0, :MATRIX_MAX, :MATRIX_MAX].double().tolist()
    return [[x if math.isfinite(x) else None for x in row] for row in rows]


# contract causes that are one decision about the values: a departure shows it (outputs with no finite number: the
# first value that lost them, e.g. the 0 * -inf of an additive mask)
[NON_FINITE] = _lined("first_non_finite")  # non_finite_outputs
TRACED = _lined("traced")  # computed_in_float32, scale_tensor_in_float32, non_finite_outputs


def _leaves() -> dict[str, tuple[str, ...]]:
    """Each kind found where the head leaves torch, its graph, or writes an input: the ops it looks for, in order."""
    out = {cid: table()[cid].leaves for cid in _lined("leaving")}
    unknown = {op for ops in out.values() for op in ops} - set(LEFT)
    assert not unknown, f"causes.toml: leaves the trace never records: {sorted(unknown)}"
    return out


LEAVING = _leaves()


def _leaving(c: Diagnosis) -> tuple[str, ...]:
    """Where a cause shows that no departure of the values does: leaving torch (``.numpy()``), its graph
    (``.detach()``, for a known bug that breaks only the gradients), or writing into an input."""
    if c.id in LEAVING:
        return LEAVING[c.id]
    if c.id in RETURNING and c.fact("undifferentiable") is True:  # a returned value cut from the graph: where
        return LEAVING["no_autograd_graph"]  # it left it (``self.last_attn = wei.detach()``), not its return
    if c.kind == "known" and c.explains and set(c.explains) <= {"gradient_blocks", "interface"}:
        return ("inplace", "detach") if "interface" in c.explains else ("detach",)
    return ()


def _left_torch(once: Traced, causes: list[Diagnosis]) -> list[Diagnosis]:
    """Computing outside torch, or without its graph, at the first line that leaves it (``.numpy()``,
    ``.detach()``) in one traced call."""
    if not any(_leaving(c) and c.where is None for c in causes):
        return causes
    return _sited(once, causes, lambda c, trace: next((trace.left[k] for k in _leaving(c) if k in trace.left), None))


def _sited(
    once: Traced, causes: list[Diagnosis], site_of: Callable[[Diagnosis, Trace], dict[str, Any] | None]
) -> list[Diagnosis]:
    """``causes``, each one without a line given the site (file, line, code) ``site_of`` finds for it on one
    traced call, with the lines around it."""
    trace = once()
    if trace is None:
        return causes
    out = []
    for c in causes:
        site = site_of(c, trace) if c.where is None else None
        if site is not None:
            context = trace.context.get(str(site["file"]), {})
            where = SourceLine(file=str(site["file"]), line=int(site["line"]), code=str(site["code"]), context=context)
            c = c.model_copy(update={"where": where})
        out.append(c)
    return out


[GRAPH_CUT] = _lined("graph_cut")  # inputs_cut_from_graph


def _cut_lines(once: Traced, causes: list[Diagnosis]) -> list[Diagnosis]:
    """Inputs cut from the autograd graph at the first line that reads one of them, where the copy is made
    (``nn.Parameter(w)``, ``torch.tensor(W_Q)``, ``W_Q.detach()``): every later op reads the copy."""
    if not any(c.id == GRAPH_CUT and c.where is None for c in causes):
        return causes

    def site_of(c: Diagnosis, trace: Trace) -> dict[str, Any] | None:
        inputs = c.fact("inputs") if c.id == GRAPH_CUT else ()
        cut = {f"in:{name}" for name in inputs} if isinstance(inputs, tuple) else set()
        r = next((r for r in trace.records if cut & set(r.reads)), None)
        return None if r is None else {"file": r.file, "line": r.line, "code": r.code}

    return _sited(once, causes, site_of)


RETURNING = _lined("returning")  # a returned value that breaks the contract (one_value_breach): the line returning it


def _return_lines(once: Traced, causes: list[Diagnosis]) -> list[Diagnosis]:
    """A breach of what the head returns at the line that returns it: the last value of one traced call that
    the head returned (``return att @ v, None`` or ``return softmax(...) @ v``)."""
    if not any(c.id in RETURNING and c.where is None for c in causes):
        return causes
    trace = once()
    last = [r for r in trace.records if f"v:{r.index}" in trace.returned] if trace is not None else []
    if trace is None or not last:
        return causes
    r = last[-1]
    where = SourceLine(file=r.file, line=r.line, code=r.code, context=trace.context.get(r.file, {}))
    return [c.model_copy(update={"where": where}) if c.id in RETURNING and c.where is None else c for c in causes]


# mutations of what the head returns alone: with no line after the walk (no op made the value: a NumPy head's
# ``torch.from_numpy(w.transpose(0, 2, 1))``), the line that returns it
RETURNED_ONLY = _lined("returned_only")  # weights_transposed, scores_returned


def _returning_lines(once: Traced, causes: list[Diagnosis]) -> list[Diagnosis]:
    """A mutation of the returned values alone that nothing else placed, at the line the call returned from."""
    if not any(c.id in RETURNED_ONLY and c.where is None for c in causes):
        return causes
    trace = once()
    at = (_first_return(trace) or trace.returned_at) if trace is not None else None
    if trace is None or at is None:
        return causes
    where = SourceLine(file=at["file"], line=at["line"], code=at["code"], context=trace.context.get(at["file"], {}))
    return [c.model_copy(update={"where": where}) if c.id in RETURNED_ONLY and c.where is None else c for c in causes]


# ops that hand a value on as it is: the weights a helper returned, taken by its caller (``probs[:, 0]``)
HANDED_ON = frozenset({"__getitem__", "select", "squeeze", "view", "reshape", "contiguous", "clone", "detach"})


def _first_return(trace: Trace) -> dict[str, Any] | None:
    """The first ``return`` that handed back the weights the call returned, or the value they were taken from as
    they are, as its weights (a helper's ``return out, scores``, taken as ``scores[:, 0]`` by the caller): the line
    to edit. A helper that returned them in another place (``return logits, probs``) returned its weights rightly:
    the caller that took the other one is the line."""
    got = trace.returns[1] if len(trace.returns) > 1 else None
    if got is None:
        return None
    by = {f"v:{r.index}": r for r in trace.records}
    made = [
        r
        for r in trace.records
        if f"v:{r.index}" in trace.returned
        and r.value is not None
        and r.value.shape == got.shape
        and bool(torch.equal(r.value.double(), got.double()))
    ]
    if not made:
        return None
    r, chain = made[-1], set()
    while True:
        chain.add(f"v:{r.index}")
        if r.op not in HANDED_ON or len(r.reads) != 1 or r.reads[0] not in by:
            break
        r = by[r.reads[0]]
    return next((e for e in trace.exits if _handed(e) in chain), None)


def _handed(e: dict[str, Any]) -> str:
    """The value a ``return`` handed back as its weights: its one value, or the second of several ("": none)."""
    names = e["names"]
    return str(names[0]) if e["one"] else str(names[1]) if len(names) > 1 else ""


COMPARISONS = frozenset(
    {"eq", "__eq__", "ne", "__ne__", "le", "__le__", "lt", "__lt__", "ge", "__ge__", "gt", "__gt__"}
)


def _made_lines(once: Traced, causes: list[Diagnosis]) -> list[Diagnosis]:
    """A mistake the traced probe does not show, which nothing else placed at a line that makes it (a per-row
    loop's stacked rows), at the line of the first op that makes it: a mask read off the scores' values
    (``masked_fill(wei == 0, ...)`` after ``tril``: it departs only where a score is exactly 0) at the comparison
    that reads a (T, T) value computed from the inputs; an exp without the row's max (it departs only at huge
    scores, and a per-row loop's rows are no stage) at the first exp of a value computed from the inputs."""
    if not any(c.id in MADE_BY for c in causes):
        return causes
    trace = once()
    if trace is None:
        return causes
    derived = _derived(trace)
    by_name = {f"v:{r.index}": r for r in trace.records}

    def computed(name: str, square: bool) -> bool:
        x = by_name.get(name)
        v = x.value if x is not None else None
        if name not in derived or v is None or not v.dtype.is_floating_point:
            return False
        return not square or (v.dim() >= 2 and v.shape[-1] == v.shape[-2] > 1)

    def makes(cid: str, r: Record) -> bool:
        if r.numpy or r.value is None:
            return False
        if cid == "mask_value_derived":
            return r.op in COMPARISONS and r.value.dtype == torch.bool and any(computed(n, True) for n in r.reads)
        return r.op in ("exp", "exp_") and any(computed(n, False) for n in r.reads)

    out = []
    for c in causes:
        made = next((r for r in trace.records if makes(c.id, r)), None) if c.id in MADE_BY else None
        w = c.where
        if (
            made is not None
            and w is not None
            and any(makes(c.id, r) for r in trace.records if (r.file, r.line) == (w.file, w.line))
        ):
            made = None  # it stands at a line that makes it already (one of a per-sequence loop's)
        if made is not None:
            at = SourceLine(file=made.file, line=made.line, code=made.code, context=trace.context.get(made.file, {}))
            c = c.model_copy(update={"where": at})
        out.append(c)
    return out


MADE_BY = _lined("made_by")  # the causes ``_made_lines`` places: mask_value_derived, unstable_softmax


def _operand_lines(once: Traced, causes: list[Diagnosis], tensors: dict[str, torch.Tensor]) -> list[Diagnosis]:
    """A projection left out or swapped that nothing else placed (the walk patched the scores it made as a whole,
    with another mistake on the same line: ``k = x @ W_Q`` behind a wrong scale), at the line where its operand
    took the wrong input, found on the traced call as the departure's own words would have found it."""
    if not any(c.id in SUBSTITUTED and c.where is None for c in causes):
        return causes

    def site_of(c: Diagnosis, trace: Trace) -> dict[str, Any] | None:
        return _operand_site(trace, tensors, *SUBSTITUTED[c.id].operand) if c.id in SUBSTITUTED else None

    return _sited(once, causes, site_of)


def _forbidden_lines(once: Traced, causes: list[Diagnosis], failing: list[CheckResult]) -> list[Diagnosis]:
    """The forbidden API's own cause at the line the check found it on in the source; the file is the one the
    head's traced call ran in (the check reads the module the grader imports)."""
    found = next((c.found_at for c in failing if c.id == "forbidden_api"), None)
    if found is None or not any(c.id == "own:forbidden_api" and c.where is None for c in causes):
        return causes
    trace = once()
    files = [r.file for r in trace.records] if trace is not None else []
    if not files:
        return causes
    context = trace.context.get(files[0], {}) if trace is not None else {}
    where = SourceLine(file=files[0], line=found.line, code=found.code.strip(), context=context)
    return [c.model_copy(update={"where": where}) if c.id == "own:forbidden_api" else c for c in causes]


def _raised_it(raised: dict[str, object] | None, c: Diagnosis) -> bool:
    """Whether the traced call raised the exception crash ``c`` names."""
    kind, named = str((raised or {}).get("type") or ""), c.fact("exception")
    return bool(kind) and isinstance(named, str) and kind in named


def _crash_lines(head: Head, causes: list[Diagnosis], length: int | None) -> list[Diagnosis]:
    """Each crash at the student's line that raised: the innermost frame in the submission of one traced call
    (of the function the crash names, on its first probe; else of the head on the probe, at the length that
    crashes for a head that runs at one length only), when it raised the exception the crash names. A module
    that does not import: the line its import raised at."""
    crashes = [c for c in causes if c.kind == "crash" and c.where is None]
    if not crashes:
        return causes
    sites: list[Trace] = []
    dtypes: dict[int, torch.dtype] = {}  # the dtype each site was traced in (by its id), the probe's own float64 else
    sized = any(c.id == SIZE_CRASH for c in crashes)  # it raises at other lengths: try some
    own = {fn: _raised_by(head, fn) for c in crashes if (fn := c.id.removeprefix("crash:")) in OWN_PROBES}
    if any(c.id.removeprefix("crash:") not in own for c in crashes):
        for T in dict.fromkeys([PROBE_T, *((length + 1,) if length else ()), *((1, 129, 257, 513) if sized else ())]):
            trace = traced(head, probe(T), True)
            if trace is not None and trace.raised and "line" in trace.raised:
                sites.append(trace)
                break
        if not sites and any(c.id == DTYPE_CRASH for c in crashes):  # it raises in a narrower dtype only
            for dtype in NARROW:
                trace = traced(head, {k: t.to(dtype) for k, t in probe(length).items()}, True)
                if trace is not None and trace.raised and "line" in trace.raised:
                    sites.append(trace)
                    dtypes[id(trace)] = dtype
                    break
    out = []
    for c in causes:
        fn = c.id.removeprefix("crash:")
        candidates = [t for t in ([own[fn]] if fn in own else sites) if t is not None]
        site = next((t for t in candidates if c in crashes and _raised_it(t.raised, c)), None)
        if site is not None and site.raised is not None:
            r = site.raised
            at = SourceLine(
                file=str(r["file"]), line=int(r["line"]), code=str(r.get("code", "")),
                context=site.context.get(str(r["file"]), {}),
            )  # fmt: skip
            made = _narrowed(site, dtypes.get(id(site), torch.float64)) if c.id == DTYPE_CRASH else None
            if made is not None:  # float32 values meeting float64 ones: the line that made them float32
                at = SourceLine(file=made.file, line=made.line, code=made.code, context=site.context.get(made.file, {}))
            c = c.model_copy(update={"where": at})
        elif c in crashes:
            c = _import_line(head, c)
        out.append(c)
    return out


FLOAT32_MADE = _lined("float32_made")  # softmax_in_float32, computed_in_float32


NARROW = (torch.float16, torch.bfloat16)  # the dtypes a dtype crash is traced in when float64 runs


def _narrowed(trace: Trace, given: torch.dtype) -> Record | None:
    """The value that first went to another dtype than the call's, ``given`` (``x.float()``, ``softmax(...,
    dtype=torch.float32)``, a float32 bias made by ``torch.full`` for float16 inputs) on the way to the operand of
    that dtype of the op that raised: where a value is made that then meets the call's own dtype."""
    by = {f"v:{x.index}": x for x in trace.records}

    def other(x: Record | None) -> bool:
        return x is not None and x.value is not None and x.value.dtype.is_floating_point and x.value.dtype != given

    reads = (trace.raised or {}).get("reads") or []
    r = next((x for n in reads if other(x := by.get(str(n)))), None)
    while r is not None:
        up = next((x for n in r.reads if other(x := by.get(n))), None)
        if up is None:
            return r
        r = up
    return None


def _one_dtype_choice(causes: list[Diagnosis]) -> list[Diagnosis]:
    """A float32 cause at the very line where the dtype crash's float32 values are made is that crash (one choice,
    one cause: the float32 softmax never cast back is what raises for float64 inputs): its checks are the crash's."""
    crash = next((c for c in causes if c.id == DTYPE_CRASH and c.where is not None), None)
    if crash is None or crash.where is None:
        return causes
    at = (crash.where.file, crash.where.line)
    same = [c for c in causes if c.id in FLOAT32_MADE and c.where is not None and (c.where.file, c.where.line) == at]
    if not same:
        return causes
    explains = sorted({*crash.explains, *(x for c in same for x in c.explains)})
    merged = crash.model_copy(update={"explains": explains})
    return [merged if c is crash else c for c in causes if not any(c is o for o in same)]


# the functions besides the head whose crash is traced on their own first probe (the key-value cache's probe
# is a decode, not one call)
OWN_PROBES = {fn: make for fn, make in PROBES.items() if fn != ATTENTION and fn in CORE + ("streaming_attention",)}


def _raised_by(head: Head, fn: str) -> Trace | None:
    """One traced call of contract function ``fn`` on its first probe, when it raised in the submission."""
    first = next((p for p in OWN_PROBES[fn]() if p.op == "seeded_call"), None)
    if first is None:
        return None
    trace = traced(head, first.tensors, True, fn, first.args, dict(first.options.get("kwargs", {})))
    return trace if trace is not None and trace.raised and "line" in trace.raised else None


_FRAME = re.compile(r'^  File "(?P<file>[^"\n]+)", line (?P<line>\d+), in [^\n]*\n(?:    (?P<code>[^\n]*)\n)?', re.M)


def _import_line(head: Head, c: Diagnosis) -> Diagnosis:
    """A crash of the whole module at the line its import raised at: the innermost frame of the student's part
    of the traceback the worker sent with the import error (paths relative to the submission)."""
    try:
        head.found()
        return c
    except ImportFailure as exc:
        told = exc.traceback
    except StudentFailure:
        return c
    frames = list(_FRAME.finditer(told))
    if not frames or not _raised_it({"type": _exception_of(told)}, c):
        return c
    last = frames[-1]
    code = (last["code"] or "").strip()[:300]
    where = SourceLine(file=last["file"][:200], line=int(last["line"]), code=code, context={})
    return c.model_copy(update={"where": where})


def _exception_of(traceback: str) -> str:
    """'NameError' from a traceback's last line 'NameError: name 'F' is not defined'."""
    last = next((ln for ln in reversed(traceback.strip().splitlines()) if ln and not ln.startswith(" ")), "")
    return last.split(":", 1)[0].strip()
