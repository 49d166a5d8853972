"""Proven causes (issue 35, point 3): the walk's changes applied to the head as the checks call it.

The walk (``_intervene``) is complete when, with its patches, the head returns the lecture's (out, weights) on the
probe. Here the same patches are applied to every call a check makes (:class:`PatchedHead`, a
:class:`grader.head.Head` whose attention calls go through the worker's ``intervene`` op) and the checks are run
again on it, in the grader:

- each call's patches are rebuilt for that call's own inputs: a patch keeps its site (file, line, the nth value
  recorded there, a NumPy local) and its layout, and its value is the lecture's stage computed here
  (``stages_of``) on the call's X, W_Q, W_K, W_V at its flag, in float64, then cast by the worker to the dtype of
  the value it replaces (the lecture's values rounded once: the best a head computing in that dtype can hold). A
  pass-through stays a pass-through, a mask's pattern is rebuilt at the call's length, a stage due at causal=True
  only is taken at causal=False as the walk takes it (the masked scores are the scaled ones there). At causal=True
  only the changes found at that flag apply (a mask passed through at causal=False is no change at True).
- a per-sequence loop's patches (layout ``seq:b``, or every occurrence of one op at a line the probe's sequences
  each reach alike) are laid out for the call's own batch: the probe's values at that line repeat once per
  sequence, and so do the patches, each sequence's with its own slice.
- each call is made as the check makes it (seeded with the check's seed, autograd recording on unless it asks for
  ``no_grad``); a check's calls go in one request (``intervene_each``), and the worker sends back the results alone
  (it records each value's line to count it, nothing more).
- a call the worker cannot make with patches raises :class:`Unprovable`: gradients (``intervene`` records no
  graph), another device, the inputs after the call, traced calls, timings, another contract function. A check
  that makes one (gradient_blocks, interface, forbidden_api, performance, fused_kernel on CUDA; and every check of
  another function, or that is not the head's) is "not provable": never counted as passing or failing.

:func:`prove` runs each failing check once with every change applied (the claimed ones first), and narrows the
causes the walk made (``Walked.made``): a failing check one claims that still fails with every patch applied is
taken from what it explains, and a cause the walk made that is left explaining nothing (having explained something)
is dropped; the catalog's own causes are never narrowed nor dropped here. When every failing check passes with the
changes, or cannot be run so and is explained only by causes at the changes' lines (gradient_blocks beside a mask
the walk repaired), the diagnosis is proven complete: :class:`grader.models.DiagnosisProof`, with N = the walk's
interventions. The checks that passed are not run again: a change puts in the lecture's own value on the call's
inputs, and running them all again costs about 3 s a head (future_perturbation alone makes 133 calls), past the
issue's 2 s. A head that fails nothing is never proven (the diagnosis does not run); a walk that is not complete
proves nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import torch

from grader.checks import CHECKS, Ctx
from grader.checks._base import begin, judged
from grader.diagnosis._intervene import Intervention, Walk, large
from grader.diagnosis._matching import PATTERN, UNSCALED, _offered
from grader.diagnosis._stages import stages_of
from grader.diagnosis._trace import PROBE_B, traced
from grader.diagnosis._trace import probe as ordinary_probe
from grader.head import EACH_REPLY_BYTES, Head, HeadCall, StudentFailure
from grader.models import FAILING, CheckResult, Diagnosis, DiagnosisProof

if TYPE_CHECKING:
    from grader.inputs import Case
    from grader.oracle import Oracle
    from grader.rubric import Rubric

HEAD = "causal_self_attention"


class Unprovable(Exception):
    """A check asked the patched head for something a patched call cannot give (see the module's text)."""


@dataclass
class Walked:
    """What ``_pointing`` hands the proof: the complete walk, and the ids of the causes it made."""

    walk: Walk | None = None
    made: set[str] = field(default_factory=set)


# ---- a patch, for another call --------------------------------------------------------------------------------

# a layout of ``_intervene.layouts`` as a function of the stage (B, T, n); "seq:<b>" is one sequence's, in one of
# three forms (its rows, a batch of one, its rows transposed)
LAYOUTS = {
    "as is": lambda s: s,
    "transposed": lambda s: s.transpose(-2, -1),
    "head axis": lambda s: s.unsqueeze(1),
    "head axis 2": lambda s: s.unsqueeze(2),
    "head axis T": lambda s: s.transpose(-2, -1).unsqueeze(1),
    "flat": lambda s: s.reshape(-1, s.shape[-1]),
}
SEQ_FORMS = (lambda s, b: s[b], lambda s, b: s[b : b + 1], lambda s, b: s[b].transpose(-2, -1))


@dataclass(frozen=True)
class _Patch:
    """One patch of the walk, described so that it can be rebuilt for any call: its site, the stage (or None: a
    pass-through; PATTERN: a mask's pattern) and its layout (``seq``: the sequence, ``form``: which of SEQ_FORMS)."""

    file: str
    line: int
    nth: int
    var: str
    stage: str | None
    layout: str
    seq: int | None
    form: int
    pattern: tuple[float, float, tuple[int, ...], torch.dtype] | None  # a mask's (hidden, kept, leading dims, dtype)
    period: int  # the values its line records per sequence of the probe (0: not a per-sequence line)


def _described(i: Intervention, p: dict[str, Any], periods: dict[tuple[str, int, str], int]) -> _Patch:
    """``p`` (one of ``i``'s patches) as a :class:`_Patch`."""
    site = (str(p["file"]), int(p["line"]), str(p.get("var", "")))
    value, stage, layout = p.get("value"), p.get("stage"), str(p.get("layout", "as is"))
    seq, form, pattern = None, 0, None
    if value is not None and stage == PATTERN:
        T = value.shape[-1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1).expand(value.shape)
        pattern = (float(value[future][0]), float(value[~future][0]), tuple(value.shape[:-2]), value.dtype)
    elif value is not None and layout.startswith("seq:"):
        seq = int(layout.split(":", 1)[1])
        at = _probe_stages(i.large, i.causal).get(str(stage))
        if at is not None:
            form = next((k for k, f in enumerate(SEQ_FORMS) if f(at, seq).shape == value.shape), 0)
    return _Patch(
        *site[:2], int(p["nth"]), site[2], None if value is None else str(stage), layout, seq, form, pattern,
        periods.get(site, 0),
    )  # fmt: skip


@cache
def _probe_stages(huge: bool, causal: bool) -> dict[str, torch.Tensor]:
    """The stages a patch of the walk was made of: on the large probe or the ordinary one, at ``causal``."""
    found = stages_of(large() if huge else ordinary_probe(), causal, (), {}, None)
    return _offered(found) if found is not None else {}


def _periods(
    head: Head, interventions: Sequence[Intervention], causal: bool
) -> tuple[dict[tuple[str, int, str], int], bool]:
    """For each line the patches name, the values it records per sequence of the probe when the probe's
    sequences each record the same ops there (a per-sequence loop), else 0; and whether the head holds NumPy
    arrays: from one traced call of the probe with the patches found at ``causal``."""
    patches = [p for i in interventions for p in i.patches if not i.large]
    found = traced(head, ordinary_probe(), causal, patches=patches)
    if found is None:
        return {}, True
    B = int(ordinary_probe()["X"].shape[0])
    out: dict[tuple[str, int, str], int] = {}
    for p in (p for i in interventions for p in i.patches):
        site = (str(p["file"]), int(p["line"]), str(p.get("var", "")))
        there = [r for r in found.records if (r.file, r.line) == site[:2] and (not site[2] or r.var == site[2])]
        ops = [r.op for r in there]
        period = len(ops) // B
        repeats = period > 0 and len(ops) == period * B and all(ops[k] == ops[k % period] for k in range(len(ops)))
        # a batched value (B, ...) made twice on one line (``q, k = X @ W_Q, X @ W_K``) is no loop over sequences
        batched = any(r.value is not None and r.value.dim() >= 3 and r.value.shape[0] == B for r in there)
        out[site] = period if repeats and B > 1 and not batched else 0
    return out, any(r.numpy for r in found.records)


def _rebuilt(p: _Patch, stages: dict[str, torch.Tensor], B: int, T: int) -> list[dict[str, Any]]:
    """``p`` for a call of batch ``B`` and length ``T`` whose lecture's stages are ``stages`` ([] when its stage
    has no value there, or another patch of its line lays out every sequence's)."""
    site = {"file": p.file, "line": p.line, "var": p.var}
    if p.period and (p.seq is not None or p.stage is None):  # at a per-sequence line: one patch per sequence
        turn, offset = divmod(p.nth, p.period)
        if turn != 0:
            return []  # laid out from the first sequence's
        at = [(b, b * p.period + offset) for b in range(B)]
    elif p.seq is not None and p.seq >= B:
        return []  # the call has no such sequence
    else:
        at = [(p.seq or 0, p.nth)]
    out = []
    for b, nth in at:
        value = _value(p, stages, b, T, B)
        if p.stage is not None and value is None:
            return []
        out.append({**site, "nth": nth, "value": value})
    return out


def _value(p: _Patch, stages: dict[str, torch.Tensor], b: int, T: int, B: int) -> torch.Tensor | None:
    """The value ``p`` puts in for sequence ``b`` (a per-sequence layout) of a call of batch ``B`` and length ``T``."""
    if p.stage is None:
        return None
    if p.pattern is not None:
        hidden, kept, leading, dtype = p.pattern
        if leading and leading[0] == PROBE_B:  # one pattern per sequence (``broadcast_to(arange(T), x.shape)``)
            leading = (B, *leading[1:])
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        return torch.where(future, hidden, kept).to(dtype).expand(*leading, T, T).clone()  # a bool mask stays one
    offered = _offered(stages)
    stage = p.stage if p.stage in offered else {"masked": "scaled", UNSCALED: "scores"}.get(p.stage, "")
    if not stage:
        return None
    s = offered[stage]
    if p.seq is not None:
        return SEQ_FORMS[p.form](s, b).contiguous()
    how = LAYOUTS.get(p.layout)
    return how(s).contiguous() if how is not None else None


# ---- the head with the walk's changes -------------------------------------------------------------------------


class PatchedHead(Head):
    """The student's head with the walk's patches applied to each attention call, rebuilt for its inputs (the
    worker's ``intervene_each`` op: a check's batch of calls is one request); any other request raises
    :class:`Unprovable`. It shares the head's worker, its hangs and its time shares."""

    def __init__(self, head: Head, walk: Walk) -> None:
        self.__dict__.update(head.__dict__)  # the same module names; its requests go through the head's _send
        self._head = head
        self.calls = 0
        found = {flag: [i for i in walk.interventions if i.causal == flag] for flag in (True, False)}
        # at causal=True the changes found there; at causal=False those too (restaged), then its own
        self._patches: dict[bool, list[_Patch]] = {}
        self._arrays = False  # a NumPy head's locals are followed (and patched) by the worker's line tracer
        for causal, mine in ((True, found[True]), (False, found[True] + found[False])):
            periods, arrays = _periods(head, mine, causal)
            self._patches[causal] = [_described(i, p, periods) for i in mine for p in i.patches]
            self._arrays = self._arrays or arrays

    def found(self) -> dict[str, str]:
        return self._head.found()

    def attention(
        self,
        case: Case,
        *,
        causal: bool = True,
        device: str = "cpu",
        upstream: tuple[torch.Tensor | None, torch.Tensor | None] | None = None,
        jacobian_upstream: torch.Tensor | None = None,
        return_inputs: bool = False,
        trace: list[str] | None = None,
        repeat: int = 1,
        no_grad: bool = False,
        rng: int | None = None,
    ) -> HeadCall:
        if device != "cpu" or upstream is not None or jacobian_upstream is not None or return_inputs or trace:
            raise Unprovable("a call with gradients, on another device, or that returns more than its values")
        return self._patched([case], causal, self.rng_seed if rng is None else rng, no_grad)[0]

    def attention_each(self, cases: list[Case], *, causal: bool = True) -> list[HeadCall]:
        return self._patched(cases, causal, self.rng_seed, False)

    def _patched(self, cases: list[Case], causal: bool, seed: int | None, no_grad: bool) -> list[HeadCall]:
        """The calls on ``cases``, each with the patches rebuilt for its own inputs, in requests of at most
        EACH_REPLY_BYTES of reply (as ``attention_each``)."""
        out: list[HeadCall] = []
        for chunk in _chunks(cases):
            patches = []
            for case in chunk:
                stages = stages_of({k: t.double() for k, t in case.tensors().items()}, causal, (), {}, None)
                if stages is None:
                    raise Unprovable("the lecture's stages cannot be computed on this input")
                B, T = int(case.X.shape[0]), int(case.X.shape[1])
                patches.append([q for p in self._patches[causal] for q in _rebuilt(p, stages, B, T)])
            self.calls += len(chunk)
            out += self.intervened_calls(chunk, patches, causal=causal, seed=seed, no_grad=no_grad, arrays=self._arrays)
        return out

    def _send(self, op: str, params: dict[str, Any], tensors: dict[str, torch.Tensor], fn: str | None) -> Any:
        if op != "intervene_each":
            raise Unprovable("a request other than the head's attention calls")
        return self._head._send(op, params, tensors, fn)  # the head's own bookkeeping: a hang stops its worker


def _chunks(cases: list[Case]) -> list[list[Case]]:
    """``cases`` in runs whose replies stay under EACH_REPLY_BYTES (out and weights of each call)."""
    chunks: list[list[Case]] = [[]]
    size = 0
    for case in cases:
        s = case.shape
        bytes_ = 2 * s.B * s.T * (s.T + max(s.d, s.d_v)) * case.X.element_size()
        if chunks[-1] and size + bytes_ > EACH_REPLY_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(case)
        size += bytes_
    return chunks


# ---- the proof ------------------------------------------------------------------------------------------------


def of_head(cid: str) -> bool:
    """A property check of the head: it calls ``causal_self_attention`` alone and judges no time."""
    spec = CHECKS.get(cid)
    return spec is not None and spec.needs == (HEAD,) and not spec.timed


def status(cid: str, head: PatchedHead, ref: Oracle, rubric: Rubric, seed: int) -> str | None:
    """``cid``'s status on ``head`` ("passed", "failed", "error", "timeout"), as the runner would judge it; None
    when it is not provable (a call the patched head cannot make)."""
    ctx = Ctx(head, ref, rubric, seed, cid, source="")
    begin(cid, ctx)
    try:
        return judged(cid, CHECKS[cid].fn(ctx), ctx).status
    except Unprovable:
        return None
    except StudentFailure as exc:
        return exc.status
    finally:
        head.current_check = None


def prove(
    head: Head,
    causes: list[Diagnosis],
    walked: Walked,
    checks: Iterable[CheckResult],
    ref: Oracle,
    rubric: Rubric | None,
    seed: int | None,
) -> tuple[list[Diagnosis], DiagnosisProof | None]:
    """``causes`` with the claims of those the walk made narrowed to what its changes make pass, and the proof
    that the diagnosis is complete when they make every property check of the head pass (see the module's
    text); ``causes`` as they are and None when there is no complete walk with a change, or nothing to run."""
    walk = walked.walk
    if walk is None or not walk.complete or not walk.interventions or rubric is None or seed is None:
        return causes, None
    checks = [c for c in checks if c.id in rubric.checks]
    failing = [c.id for c in checks if c.status in FAILING]
    if not failing:
        return causes, None
    claimed = {x for c in causes if c.id in walked.made for x in c.explains} & set(failing)
    stands = _standing_for(causes, walked)
    patched = PatchedHead(head, walk)
    # a failing check that cannot be re-run stands proven only when the causes the changes stand for explain it
    complete = all(of_head(cid) or stands(cid) for cid in failing)
    # claimed checks first (to narrow); then the others, only while the proof may still be complete: first those
    # the changes' causes do not explain alone (one that cannot be run then ends the proof: gradient_blocks)
    order = sorted(failing, key=lambda cid: (cid not in claimed, stands(cid), failing.index(cid)))
    still: set[str] = set()
    proven: list[str] = []
    unprovable: list[str] = []
    for cid in order:
        if cid not in claimed and not complete:
            continue
        got = status(cid, patched, ref, rubric, seed) if of_head(cid) else None
        if got is None:
            unprovable.append(cid)
            complete = complete and stands(cid)
        elif got != "passed":
            complete = False
            still.add(cid)
        else:
            proven.append(cid)
    causes = _narrowed(causes, walked.made, still)
    if not complete:
        return causes, None
    proof = DiagnosisProof(changes=len(walk.interventions), checks=sorted(proven), not_provable=sorted(unprovable))
    return causes, proof


def _standing_for(causes: list[Diagnosis], walked: Walked) -> Callable[[str], bool]:
    """Whether a failing check is explained, and only by causes the walk's changes stand for: those it made, and
    those at the line of one of its interventions (a catalog cause placed there)."""
    assert walked.walk is not None
    lines = {(i.at.file, i.at.line) for i in walked.walk.interventions}

    def tied(c: Diagnosis) -> bool:
        return c.id in walked.made or (c.where is not None and (c.where.file, c.where.line) in lines)

    def stands(cid: str) -> bool:
        mine = [c for c in causes if cid in c.explains]
        return bool(mine) and all(tied(c) for c in mine)

    return stands


def _narrowed(causes: list[Diagnosis], made: set[str], still: set[str]) -> list[Diagnosis]:
    """The causes the walk made without the checks that still fail with every change; one left explaining nothing
    (it explained something) is dropped."""
    out = []
    for c in causes:
        if c.id in made and set(c.explains) & still:
            keep = [x for x in c.explains if x not in still]
            if not keep:
                continue
            c = c.model_copy(update={"explains": keep})
        out.append(c)
    return out
