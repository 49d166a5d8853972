"""Every cause says where (issue 28): the departures of the head's traced computation, attached to the causes
the diagnosis named, and those no named cause describes made causes of their own.

A mutation found by the search carries the line of the departure its model explains; a known bug or a
mutation without one carries the first departure left; a crash carries the line that raised in one traced
call; computing outside torch or its graph, the first ``.numpy()`` or ``.detach()``; a forbidden API, the line
its check found. When failing checks stay unexplained and a departure is left, the departure itself is the
cause ("departure:<stage>"): its description, its line, the checks it explains, priced by what it breaks.
The lines one traced call shows directly (a crash's, a return's, where the head leaves torch) are ``_lines``'s.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import replace
from functools import cache

import torch

from grader.diagnosis._causes import cause
from grader.diagnosis._departure import Departure, follow
from grader.diagnosis._finding import NAMES, TITLES, Finding, catalog
from grader.diagnosis._intervene import INTERVENE, Intervention, intervene, large
from grader.diagnosis._lines import (
    NON_FINITE,
    TRACED,
    _crash_lines,
    _cut_lines,
    _forbidden_lines,
    _left_torch,
    _lined,
    _made_lines,
    _one_dtype_choice,
    _operand_lines,
    _return_lines,
    _returning_lines,
)
from grader.diagnosis._mutations import FITTED, SLOT_OF, Combo
from grader.diagnosis._naming import LEAKY, SELF_CONTAINED, mutation_cause, violates
from grader.diagnosis._proof import Walked
from grader.diagnosis._relations import _dropout, _float32
from grader.diagnosis._stages import stages_of
from grader.diagnosis._trace import FLOAT32_ATOL, FLOAT32_RTOL, _equal, probe, traced
from grader.head import Head, all_finite
from grader.models import CheckResult, Diagnosis, SourceLine
from grader.models import Departure as Shown

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
