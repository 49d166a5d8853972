"""The diagnosis's rules (issue 51), run by ``_engine`` to a fixpoint: each reads the slots it names and proposes the
slots it writes, and every slot has one writer. The causes found so far are one slot per stage (``causes_absorbed``
-> ``causes_found`` -> ... -> ``causes``): a stage reads the one before it and writes its own, so the order the
causes are named in is data, not the order of a list of calls.

The given slots (:data:`GIVEN`): ``head``, ``ref``, ``rubric``, ``seed``, ``checks``, the ``failing`` checks, the
ids of those that ``failed`` and of those that ``passed``. :data:`RULES` lists the rules in the order the
diagnosis was once written in; the engine runs them in the order their slots allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grader.diagnosis._bugs import bugs_of
from grader.diagnosis._changes import _changes, _known, _replayed
from grader.diagnosis._choice import _one_choice, _projection_widths
from grader.diagnosis._direct import (
    _breaches,
    _by_maker,
    _contract,
    _crashed_too,
    _crashes,
    _graph_cut,
    _left,
    _made_non_finite,
    _makes_non_finite,
    _missing,
    _non_finite,
    _non_finite_runs,
    _own,
    _uninstalled,
)
from grader.diagnosis._engine import Rule, Slot
from grader.diagnosis._known import PROBES, attention_probes, student_side
from grader.diagnosis._naming import known_cause, mutation_cause
from grader.diagnosis._pointing import point
from grader.diagnosis._proof import Walked, prove
from grader.diagnosis._where import ATTENTION, Where, absorbed, by_dtype, by_flag, by_size, by_width

GIVEN = ("head", "ref", "rubric", "seed", "checks", "failing", "failed", "passed")

Proposal = Mapping[str, object]
# a rule's view of the state (``_engine.View``), typed loosely: each rule reads the slots it declares
S = Any


def probe(s: S) -> Proposal:
    """Every contract function probed once (each on its own: one the grader fails to probe is None)."""
    return {"seen": {fn: s.part(None, student_side, s.head, fn, make()) for fn, make in PROBES.items()}}


def crashes(s: S) -> Proposal:
    return {"causes_crashed": _crashes(s.failing, s.seen)}


def size(s: S) -> Proposal:
    found, where = by_size(s.head, s.failing)
    return {"size": found, "where_size": where}


def flag(s: S) -> Proposal:
    unexplained = [c for c in s.failing if not s.size or c.id not in s.size.explains]
    found, where = by_flag(s.head, unexplained, s.where_size)
    return {"flag": found, "where_flag": where}


def width(s: S) -> Proposal:  # issue 30
    found, where = by_width(s.head, _left(s.failing, [c for c in (s.size, s.flag) if c]), s.where_flag)
    return {"width": found, "where": where}


def dtype_everywhere(s: S) -> Proposal:
    """A head that raises in float64 wherever it runs, and runs in another dtype: one crash, found before the
    others (a float32 softmax meeting float64 values raises in every float64 check; its crashes are one mistake)."""
    runs = s.seen[ATTENTION]
    if not (runs and all(r.error for r in runs)) or s.where.moved:
        return {"dtype_first": None, "bad_first": ""}
    found, bad = by_dtype(s.head, s.failing, s.where)
    return {"dtype_first": found, "bad_first": bad}


def absorb(s: S) -> Proposal:
    """The crashes grouped by message, less what a crash that depends on the size, flag, width or dtype explains."""
    causes = s.causes_crashed
    for crash in (s.size, s.flag, s.width, s.dtype_first):
        causes = absorbed(causes, crash) if crash else causes
    return {"causes_absorbed": causes}


def probe_where(s: S) -> Proposal:
    """The probes where the head runs (at the length it takes, in the branch that works), and its answers."""
    where = s.where
    if not where.moved:
        return {"probes": PROBES[ATTENTION](), "runs": s.seen[ATTENTION]}
    probes = attention_probes(where.length, where.flags, where.square)
    return {"probes": probes, "runs": s.part(None, student_side, s.head, ATTENTION, probes)}


def contract(s: S) -> Proposal:
    found, slips = _contract(s.head, s.probes, s.runs, s.failed, s.where)
    return {"contract": found, "slips": slips}


def search(s: S) -> Proposal:
    return {"found": _changes(s.head, s.probes, s.runs, s.passed, s.failed, s.where)}


def naming(s: S) -> Proposal:
    if s.found is None:
        return {"named": []}
    combo, fitted = s.found
    named = [mutation_cause(m, fitted, s.failed) for m in combo]
    if s.where.moved:
        seen_there = f"Seen where your head runs ({s.where.said()}): it raises on the other inputs."
        named = [d.model_copy(update={"detail": seen_there}) for d in named]
    return {"named": named}


def replay(s: S) -> Proposal:
    if s.found is None or s.rubric is None or s.seed is None:
        return {"mutations": s.named}
    combo, fitted = s.found
    return {"mutations": _replayed(list(s.named), combo, fitted, s.failing, s.ref, s.rubric, s.seed)}


def makers(s: S) -> Proposal:
    """The named mutations that make the head's non-finite outputs (issue 30)."""
    if s.found is None:
        return {"makers_mutation": []}
    combo, fitted = s.found
    return {"makers_mutation": [d.id for m, d in zip(combo, s.mutations, strict=True) if _makes_non_finite(m, fitted)]}


def known(s: S) -> Proposal:
    """The known bugs each contract function matches (attention's only when the search found no change), and those
    the head's non-finite answers make it match."""
    bugs = s.part(None, bugs_of, s.ref)
    found, makers = [], []
    for fn in PROBES:
        if bugs is None or (fn == ATTENTION and s.found is not None and s.found[0]):
            continue
        matched = [known_cause(bug, s.failed) for bug in s.part([], _known, s.seen[fn], fn, bugs)]
        makers += [d.id for d in matched if fn == ATTENTION and _non_finite_runs(s.runs)]  # it matched them, NaN too
        found += matched
    return {"known": found, "makers_known": makers}


def gather(s: S) -> Proposal:
    return {"causes_found": [*s.causes_absorbed, *s.contract, *s.mutations, *s.known]}


def dtype(s: S) -> Proposal:
    """The crash that depends on the dtype alone, sought among the checks left and those that crashed too."""
    if s.dtype_first is not None:
        return {"causes_dtype": s.causes_found, "bad": s.bad_first}
    causes = s.causes_found
    found, bad = by_dtype(s.head, _left(s.failing, causes) + _crashed_too(s.failing, causes), s.where)
    return {"causes_dtype": [*causes, found] if found else causes, "bad": bad}


def missing(s: S) -> Proposal:
    return {"causes_missing": [*s.causes_dtype, *_missing(s.failing)]}


def uninstalled(s: S) -> Proposal:
    return {"causes_uninstalled": [*s.causes_missing, *_uninstalled(s.failing)]}


def breaches(s: S) -> Proposal:
    causes = s.causes_uninstalled
    return {"causes_breached": [*causes, *_breaches(_left(s.failing, causes), s.passed)]}


def graph_cut(s: S) -> Proposal:
    causes = s.causes_breached
    return {"causes_cut": [*causes, *_graph_cut(s.head, s.probes, s.runs, _left(s.failing, causes), s.where)]}


def by_maker(s: S) -> Proposal:
    causes = s.causes_cut
    return {"causes_made": _by_maker(causes, _left(s.failing, causes), [*s.makers_mutation, *s.makers_known])}


def non_finite(s: S) -> Proposal:
    causes = s.causes_made
    return {"causes_nan": [*causes, *_non_finite(_left(s.failing, causes))]}


def own(s: S) -> Proposal:
    causes = s.causes_nan
    return {"causes_own": [*causes, *_own(_left(s.failing, causes))]}


def one_choice(s: S) -> Proposal:
    return {"causes_chosen": _one_choice(s.causes_own, s.slips, s.bad)}


def pointed(s: S) -> Proposal:
    """Every cause at its line (the trace, the walk by intervention); the walk kept for the proof."""
    combo, fitted = s.found if s.found is not None else ((), {})
    where, walked = s.where, Walked()
    causes = point(
        s.head, s.causes_chosen, s.failing, combo, fitted, where.flags, where.length, where.square,
        frozenset(s.passed), walked,
    )  # fmt: skip
    return {"causes_pointed": causes, "walked": walked}


def widths(s: S) -> Proposal:
    return {"causes_widths": _projection_widths(s.causes_pointed)}


def made_non_finite(s: S) -> Proposal:
    fitted = s.found[1] if s.found is not None else {}
    return {"causes_folded": _made_non_finite(s.causes_widths, fitted)}


def proved(s: S) -> Proposal:
    causes, proof = prove(s.head, s.causes_folded, s.walked, s.checks, s.ref, s.rubric, s.seed)
    return {"causes_proved": causes, "proof": proof}


def one_choice_named(s: S) -> Proposal:
    """A part the walk named (a float32 softmax whose weights are returned so): the same one decision, at its line."""
    return {"causes": _one_choice(s.causes_proved, s.slips, s.bad)}


def _rule(name: str, reads: str, fn: Any, **default: object) -> Rule:
    """A rule from its slots as words: the slots it reads, those it writes (``default``'s keys); what it does in
    words is its :data:`SAYS`."""
    return Rule(name, tuple(reads.split()), tuple(default), fn, default, SAYS[name])


# what each rule does, in words: the report's "how these causes were found" lists them (issue 51)
SAYS = {
    "probe": "ran each function of the contract once on small fixed inputs",
    "crashes": "grouped the failures that stopped several checks by the exception raised",
    "by_size": "tried sequence lengths from 1 to 512 to see which ones the head takes",
    "by_flag": "ran the head with causal on and off to see whether one branch alone fails",
    "by_width": "tried other widths and batch sizes to see which ones the head takes",
    "dtype_everywhere": "where every float64 call raised, tried float32, float16 and bfloat16",
    "absorb": "folded the crashes that one length, branch, width or dtype explains into that one cause",
    "probe_where": "probed the head again where it runs (the length, branch and widths it takes)",
    "contract": "checked the dtypes and the autograd graph of what the head returns",
    "search": "searched the error model for the changes of the lecture's head that reproduce the head's values",
    "naming": "named each change the search found, with the failing checks it explains",
    "replay": "ran the failing checks on the lecture's head with those changes, to see which checks each explains",
    "makers": "noted the changes that make the head's outputs non-finite",
    "known": "compared each function with the library's known bugs on the same inputs",
    "gather": "gathered the causes found so far",
    "by_dtype": "tried the input dtypes one by one, for a crash in some dtypes only",
    "missing": "named the required functions that are missing",
    "uninstalled": "named the packages the head imports that are not installed",
    "breaches": "named the breaches of the calling contract the checks saw",
    "graph_cut": "looked for inputs cut from the autograd graph",
    "by_maker": "credited the non-finite failures to the cause that makes them",
    "non_finite": "named the outputs that hold no finite number",
    "own": "gave each failing check that no cause explains a cause of its own",
    "one_choice": "merged causes that are one decision named twice",
    "point": (
        "followed the head's own computation stage by stage, replacing each value that departs from the lecture's, "
        "to the line of each cause"
    ),
    "widths": "merged the projections' width crashes into one",
    "made_non_finite": "folded the non-finite failures into the cause that makes them",
    "prove": "ran the checks again with every replacement made, to prove the causes explain the failures",
    "one_choice_named": "merged a part the walk named with the decision it belongs to",
}

NO_SLIPS: dict[str, list[object]] = {"r0": [], "r1": []}  # no dtype returned for another, out ("r0") or weights

RULES: list[Rule] = [
    _rule("probe", "head", probe, seen=dict.fromkeys(PROBES)),
    _rule("crashes", "failing seen", crashes, causes_crashed=[]),
    _rule("by_size", "head failing", size, size=None, where_size=Where()),
    _rule("by_flag", "head failing size where_size", flag, flag=None, where_flag=Slot("where_size")),
    _rule("by_width", "head failing size flag where_flag", width, width=None, where=Slot("where_flag")),
    _rule("dtype_everywhere", "head failing seen where", dtype_everywhere, dtype_first=None, bad_first=""),
    _rule("absorb", "causes_crashed size flag width dtype_first", absorb, causes_absorbed=Slot("causes_crashed")),
    _rule("probe_where", "head seen where", probe_where, probes=[], runs=None),
    _rule("contract", "head probes runs failed where", contract, contract=[], slips=NO_SLIPS),
    _rule("search", "head probes runs passed failed where", search, found=None),
    _rule("naming", "found failed where", naming, named=[]),
    _rule("replay", "named found failing ref rubric seed", replay, mutations=Slot("named")),
    _rule("makers", "found mutations", makers, makers_mutation=[]),
    _rule("known", "ref seen found runs failed", known, known=[], makers_known=[]),
    _rule("gather", "causes_absorbed contract mutations known", gather, causes_found=Slot("causes_absorbed")),
    _rule(
        "by_dtype",
        "head failing causes_found where dtype_first bad_first",
        dtype,
        causes_dtype=Slot("causes_found"),
        bad=Slot("bad_first"),
    ),
    _rule("missing", "failing causes_dtype", missing, causes_missing=Slot("causes_dtype")),
    _rule("uninstalled", "failing causes_missing", uninstalled, causes_uninstalled=Slot("causes_missing")),
    _rule("breaches", "failing passed causes_uninstalled", breaches, causes_breached=Slot("causes_uninstalled")),
    _rule("graph_cut", "head probes runs failing where causes_breached", graph_cut, causes_cut=Slot("causes_breached")),
    _rule("by_maker", "failing causes_cut makers_mutation makers_known", by_maker, causes_made=Slot("causes_cut")),
    _rule("non_finite", "failing causes_made", non_finite, causes_nan=Slot("causes_made")),
    _rule("own", "failing causes_nan", own, causes_own=Slot("causes_nan")),
    _rule("one_choice", "causes_own slips bad", one_choice, causes_chosen=Slot("causes_own")),
    _rule(
        "point",
        "head causes_chosen failing found where passed",
        pointed,
        causes_pointed=Slot("causes_chosen"),
        walked=Walked(),
    ),
    _rule("widths", "causes_pointed", widths, causes_widths=Slot("causes_pointed")),
    _rule("made_non_finite", "causes_widths found", made_non_finite, causes_folded=Slot("causes_widths")),
    _rule(
        "prove",
        "head causes_folded walked checks ref rubric seed",
        proved,
        causes_proved=Slot("causes_folded"),
        proof=None,
    ),
    _rule("one_choice_named", "causes_proved slips bad", one_choice_named, causes=Slot("causes_proved")),
]
