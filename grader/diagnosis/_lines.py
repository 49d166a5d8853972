"""The lines of the causes one traced call of the head shows directly (issue 28; ``_pointing`` calls them): where it
leaves torch or its graph, where an input is cut from the graph, what it returns, the value a cause makes and the
operand it reads, a forbidden API's line, the line that raised (a crash, an import), and one dtype decision.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

from grader.diagnosis._causes import lined, table
from grader.diagnosis._departure import SUBSTITUTED
from grader.diagnosis._known import PROBES
from grader.diagnosis._sites import _operand_site
from grader.diagnosis._trace import PROBE_T, Record, Trace, _derived, probe, traced
from grader.diagnosis._where import ATTENTION, DTYPE_CRASH, SIZE_CRASH
from grader.head import CORE, Head, ImportFailure, StudentFailure
from grader.models import CheckResult, Diagnosis, SourceLine

Traced = Callable[[], Trace | None]  # the head's traced call on the probe, made on first use


# the rules here (and in _pointing) that find a kind's line, as causes.toml's ``line`` names them (issue 51: a kind's
# line is a field of its entry; the tuples of ids below are derived from it)
LINE_RULES = frozenset(
    {"traced", "first_non_finite", "float32_departure", "float32_made", "leaving", "graph_cut", "returning",
     "returned_only", "made_by"}
)  # fmt: skip
LEFT = ("numpy", "tolist", "detach", "inplace")  # what the sandbox's trace records leaving (``Trace.left``'s keys)


def _lined(rule: str) -> tuple[str, ...]:
    return lined(rule, LINE_RULES)


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
