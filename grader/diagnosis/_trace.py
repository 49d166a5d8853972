"""The head's traced call (issue 28): the probe, the records of every tensor the submission computes at its
line, its layout (one sequence, a head axis), and the agreement of two values (float64, or float32 accuracy where
a walk asks for it)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from grader.compare import tolerance
from grader.diagnosis._known import PROBE_SEED
from grader.diagnosis._where import ARGS, ATTENTION
from grader.head import Head, StudentFailure

# the probe: X (B, T, d) = (2, 7, 5), W_Q and W_K (5, 6), W_V (5, 3). Its sizes keep the quantities a head may
# scale by apart (1/sqrt(d_k), 1/d_k, 1/sqrt(d), 1/sqrt(T), 1/sqrt(d_v), the number of axes 3, 1/2), so a wrong
# one shows (d_v = 3 is also the number of axes: a scale of 1/sqrt(3) is read as d_v's).
PROBE_T, PROBE_B, PROBE_D, PROBE_DK, PROBE_DV = 7, 2, 5, 6, 3


RTOL, ATOL = tolerance("trace").rtol, tolerance("trace").atol  # float64 agreement (float32 rounding departs)


@dataclass(frozen=True)
class Record:
    """One value the head computed: the op, where, what it read, and its value (None: over the size cap)."""

    index: int
    op: str
    file: str
    line: int
    code: str
    reads: tuple[str, ...]
    value: torch.Tensor | None
    var: str = ""
    defs: tuple[Bound, ...] = ()  # the numbers the line reads by name, each where it got its value
    flag: bool = False  # the function that computed it has the causal flag in reach (``causal`` a local of it)

    @property
    def numpy(self) -> bool:
        return self.op == "="


@dataclass(frozen=True)
class Bound:
    """A Python number a recorded line reads by name (no op records it), and the line that gave it its value:
    the local's last binding, a parameter's call in the submission, or a module-level assignment."""

    var: str
    file: str
    line: int
    code: str
    value: float


@dataclass
class Trace:
    records: list[Record]
    returned: set[str] = field(default_factory=set)
    context: dict[str, dict[int, str]] = field(default_factory=dict)  # file -> line -> text, near the records
    raised: dict[str, Any] | None = None  # the exception the call raised: its type, file, line and code
    left: dict[str, Any] = field(default_factory=dict)  # "numpy", "detach": the first line leaving torch, its graph
    aliases: list[dict[str, Any]] = field(default_factory=list)  # locals bound to an input itself (q = X)
    returns: list[torch.Tensor | None] = field(default_factory=list)  # the call's returned values, in order
    patched: frozenset[int] = frozenset()  # the records an intervention replaced (their indices)
    returned_at: dict[str, Any] | None = None  # the call's own ``return`` line: its file, line and code
    # each return of the head's own frames that handed back recorded values: its file, line, code and their names
    exits: list[dict[str, Any]] = field(default_factory=list)


def probe(T: int | None = None, square: bool = False) -> dict[str, torch.Tensor]:
    """The traced probe; ``square``: every head width equal to d (where a head that reshapes to d runs)."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    d_k, d_v = (PROBE_D, PROBE_D) if square else (PROBE_DK, PROBE_DV)
    shapes = {"X": (PROBE_B, T or PROBE_T, PROBE_D), "W_Q": (PROBE_D, d_k), "W_K": (PROBE_D, d_k)}
    shapes["W_V"] = (PROBE_D, d_v)
    return {n: torch.randn(*shape, generator=g, dtype=torch.float64) for n, shape in shapes.items()}


def traced(
    head: Head,
    tensors: dict[str, torch.Tensor],
    causal: bool,
    function: str = ATTENTION,
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    patches: Sequence[dict[str, Any]] | None = None,
) -> Trace | None:
    """The head's own computation on ``tensors``, op by op (None when it could not be called: it hung, is not
    defined, or the module did not import; a raise is in :attr:`Trace.raised`). ``function``, ``args`` and
    ``kwargs``: another contract function's call (a crash of that function at its own line). ``patches`` (the
    worker's ``intervene`` op, ``_intervene``): values of the head's replaced on the way. What the worker says is
    read defensively: student code ran beside it, so a malformed entry is left out."""
    kwargs = {"causal": {"v": causal}} if kwargs is None else kwargs
    try:
        if patches is None:
            header, values = head.probe(
                function, ARGS if args is None else args, tensors, seed=PROBE_SEED, op="trace", kwargs=kwargs
            )
        else:
            header, values = head.intervene(ATTENTION, ARGS, tensors, patches, seed=PROBE_SEED, causal=causal)
    except StudentFailure:
        return None
    if header.get("status") not in (None, "ok") or not isinstance(header.get("records"), list):
        return None
    records = []
    for k, r in enumerate(header["records"]):
        at = _site(r)
        if at is None:
            continue
        value = values.get(str(r.get("value", "")))
        reads = r.get("reads")
        records.append(
            Record(
                k,
                str(r.get("op", ""))[:80],
                at["file"],
                at["line"],
                at["code"],
                tuple(str(x) for x in reads if isinstance(x, str)) if isinstance(reads, list) else (),
                value if isinstance(value, torch.Tensor) else None,
                str(r.get("var", ""))[:80],
                _bounds(r.get("defs")),
                r.get("flag") is True,
            )
        )
    returned = {f"v:{k}" for k, r in enumerate(header["records"]) if _is_returned(r, values, header)}
    context: dict[str, dict[int, str]] = {}
    raw = header.get("context")
    if isinstance(raw, dict):
        for name, lines in raw.items():
            if isinstance(lines, dict):
                context[str(name)] = {int(n): str(t)[:300] for n, t in lines.items() if str(n).isdigit()}
    raised = _raised(header.get("raised"))
    left_raw = header.get("left")
    left = {str(k): at for k, v in left_raw.items() if (at := _site(v))} if isinstance(left_raw, dict) else {}
    aliases_raw = header.get("aliases")
    aliases = [
        {
            **at,
            "var": str(a.get("var", ""))[:80],
            "input": str(a.get("input", ""))[:80],
            "param": a.get("param") is True,
        }
        for a in (aliases_raw if isinstance(aliases_raw, list) else [])
        if (at := _site(a))
    ]
    result = header.get("result")
    items = result.get("items", []) if isinstance(result, dict) else []
    returns = [values.get(str(i.get("name", ""))) if isinstance(i, dict) else None for i in items or []]
    returns = [t if isinstance(t, torch.Tensor) else None for t in returns] if isinstance(items, list) else []
    returned_at = _site(header["returned_at"]) if isinstance(header.get("returned_at"), dict) else None
    patched = _patched(records, patches or ())
    exits_raw = header.get("exits")
    exits = [
        {
            **at,
            "names": tuple(str(n)[:20] if isinstance(n, str) else "" for n in e["names"]),
            "one": e.get("one") is True,
        }
        for e in (exits_raw if isinstance(exits_raw, list) else [])
        if isinstance(e, dict) and isinstance(e.get("names"), list) and (at := _site(e))
    ]
    return Trace(records, returned, context, raised, left, aliases, returns, patched, returned_at, exits)


def _patched(records: list[Record], patches: Sequence[dict[str, Any]]) -> frozenset[int]:
    """The indices of the records the ``patches`` name: the nth value recorded at a line (of a NumPy local, the
    nth that local took there), counted as the worker counts them."""
    sites = {(str(p.get("file")), int(p.get("line", 0)), int(p.get("nth", -1)), str(p.get("var", ""))) for p in patches}
    if not sites:
        return frozenset()
    at_line: dict[tuple[str, int], int] = {}  # a torch op's count: every value recorded at its line before it
    of_var: dict[tuple[str, int, str], int] = {}  # a NumPy local's: those that local took there
    out = set()
    for r in records:
        var = r.var if r.numpy else ""
        nth = of_var.get((r.file, r.line, var), 0) if var else at_line.get((r.file, r.line), 0)
        at_line[(r.file, r.line)] = at_line.get((r.file, r.line), 0) + 1
        of_var[(r.file, r.line, var)] = of_var.get((r.file, r.line, var), 0) + 1
        if (r.file, r.line, nth, var) in sites:
            out.add(r.index)
    return frozenset(out)


def _bounds(raw: Any) -> tuple[Bound, ...]:
    """The worker's ``defs`` of one record, well-formed entries only (a finite number, a line)."""
    out = []
    for d in raw if isinstance(raw, list) else []:
        at = _site(d)
        value = d.get("value") if at is not None else None
        if at is None or not isinstance(value, float) or not math.isfinite(value):
            continue
        out.append(Bound(str(d.get("var", ""))[:80], at["file"], at["line"], at["code"], value))
    return tuple(out)


def _raised(entry: Any) -> dict[str, Any] | None:
    """Where a worker's call raised (its type and site) and, when the worker saw it, the op that raised there: its
    name, the sources it read (``in:X``, ``v:3``) and the shape a reshape was asked for; None: it did not raise."""
    if not isinstance(entry, dict):
        return None
    raised: dict[str, Any] = {"type": str(entry.get("type", ""))[:200], **(_site(entry) or {})}
    if "line" in raised and isinstance(op := entry.get("op"), str):
        raised["op"] = op[:80]
        reads = entry.get("reads")
        raised["reads"] = [str(x)[:40] for x in reads[:8]] if isinstance(reads, list) else []
        shape = entry.get("shape")
        if isinstance(shape, list) and all(type(n) is int and -1 <= n < 10**6 for n in shape[:8]):
            raised["shape"] = shape[:8]
    return raised


def _site(entry: Any) -> dict[str, Any] | None:
    """``{file, line, code}`` of a worker's entry when it is well formed (a line a positive int), else None."""
    if not isinstance(entry, dict):
        return None
    line = entry.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or not 0 < line < 10**7:
        return None
    return {"file": str(entry.get("file", ""))[:200], "line": line, "code": str(entry.get("code", ""))[:300]}


def _is_returned(r: Any, values: dict[str, torch.Tensor], header: dict[str, Any]) -> bool:
    """Whether record ``r``'s value is what the call returned (compared by value: the worker ships copies)."""
    name = r.get("value") if isinstance(r, dict) else None
    if name not in values:
        return False
    result = header.get("result")
    items = result.get("items", []) if isinstance(result, dict) else []
    if not isinstance(items, list):
        return False
    for item in items:
        got = values.get(str(item.get("name", ""))) if isinstance(item, dict) else None
        if got is not None and got.shape == values[name].shape and _equal(values[name], got, 0.0, 0.0):
            return True
    return False


FLOAT32_RTOL, FLOAT32_ATOL = tolerance("trace", torch.float32).rtol, tolerance("trace", torch.float32).atol


# the agreement ``_equal`` asks by default: float64's, or float32's while a float32 value is described
_ACCURACY: ContextVar[tuple[float, float]] = ContextVar("accuracy", default=(RTOL, ATOL))


@contextmanager
def float32_accuracy() -> Iterator[None]:
    """Within it, values are equal to float32 accuracy (a value the head computed in float32, described by the
    walk: its float32 rounding is named elsewhere, what else departs is described here)."""
    token = _ACCURACY.set((FLOAT32_RTOL, FLOAT32_ATOL))
    try:
        yield
    finally:
        _ACCURACY.reset(token)


def _ratio_rtol() -> float:
    """How far the ratios of a value to a stage may differ and still be one constant factor."""
    return max(1e-7, _ACCURACY.get()[0])


def _equal(a: torch.Tensor, b: torch.Tensor, rtol: float | None = None, atol: float | None = None) -> bool:
    """Equal within ``rtol`` of the largest finite entry, with NaN where the other has NaN and the same
    infinities (allclose: inf equals only inf of its sign, NaN only NaN with equal_nan). By default to float64
    accuracy (float32's within :func:`float32_accuracy`)."""
    if rtol is None or atol is None:
        rtol, atol = _ACCURACY.get()
    if a.shape != b.shape:
        return False
    a, b = a.double(), b.double()
    scale = float(b.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).abs().max()) if b.numel() else 0.0
    return bool(torch.allclose(a, b, rtol=rtol, atol=atol + rtol * scale, equal_nan=True))


def _floating(r: Record) -> bool:
    return r.value is not None and r.value.dtype.is_floating_point


def _derived(trace: Trace) -> set[str]:
    """The records computed from the inputs (a NumPy head's arrays all count: their reads are not seen)."""
    out: set[str] = set()
    for r in trace.records:
        if r.numpy or any(x.startswith("in:") or x in out for x in r.reads):
            out.add(f"v:{r.index}")
    return out


def _ancestors(trace: Trace, r: Record) -> set[str]:
    by = {f"v:{x.index}": x for x in trace.records}
    if r.numpy:
        return {f"v:{x.index}" for x in trace.records if x.index < r.index}
    seen: set[str] = set()
    todo = list(r.reads)
    while todo:
        name = todo.pop()
        if name in seen or name not in by:
            continue
        seen.add(name)
        todo.extend(by[name].reads)
    return seen


def _numpy_reads(trace: Trace) -> Trace:
    """The trace with what each array of a NumPy head read, as its line names it (the tracer sees arrays only as
    the locals they are bound to): the latest array bound to each name its right-hand side reads, and the torch
    values its line made before it (``x = X.detach().cpu().numpy()``). Lines of the same function only are
    meant; a helper's parameter named like a caller's array reads that array."""
    if not any(r.numpy and not r.reads for r in trace.records):
        return trace
    latest: dict[str, str] = {}
    records, since = [], 0
    for pos, r in enumerate(trace.records):
        if not r.numpy or r.reads:
            records.append(r)
            continue
        code = r.code.split("#", 1)[0]
        right = code.split("=", 1)[1] if re.match(r"^\s*[\w.\[\], ]+=[^=]", code) else code
        names = re.findall(r"([A-Za-z_]\w*)(?!\w)(?!\s*=[^=])", right)  # not a keyword argument's name
        reads = [latest[n] for n in names if n in latest]
        reads += [f"v:{x.index}" for x in trace.records[since:pos] if not x.numpy and x.line == r.line]
        records.append(replace(r, reads=tuple(dict.fromkeys(reads))))
        if r.var:
            latest[r.var] = f"v:{r.index}"
        since = pos + 1
    return replace(trace, records=records)


def _laid_out(trace: Trace, T: int, tensors: dict[str, torch.Tensor]) -> Trace:
    """The trace with its values in the lecture's (B, T, *) layout: a head axis of size one dropped, and the
    calls of a function on one sequence (T, d) of the batch stacked into the batch's values."""
    return _per_sequence(_one_head(trace, T), tensors)


def _per_sequence(trace: Trace, tensors: dict[str, torch.Tensor]) -> Trace:
    """The trace of a head that computes one sequence of the batch at a time (a function on X[b], (T, d), called
    in a loop or a comprehension, the results stacked) as the batched head would have recorded it (issue 35, item
    2): the k-th value computed from sequence b, for every b, stacked into one (B, *) value at the first
    sequence's record, read wherever any sequence's was. The loop over the batch is a layout, never a departure;
    a trace whose sequences do not each make the same values at the same lines is left as it is."""
    X = tensors["X"]
    B = int(X.shape[0])
    slices: dict[int, str] = {}
    for r in trace.records:
        if r.value is None or "in:X" not in r.reads or tuple(r.value.shape) != tuple(X.shape[1:]):
            continue
        b = next((b for b in range(B) if _equal(r.value, X[b], 0.0, 0.0)), None)
        if b is not None and b not in slices:
            slices[b] = f"v:{r.index}"
    if len(slices) != B or B < 2:
        return trace
    of: dict[str, set[int]] = {}  # record -> the sequences it was computed from
    for r in trace.records:
        name = f"v:{r.index}"
        of[name] = {b for b, n in slices.items() if n == name}.union(*(of.get(x, set()) for x in r.reads))
    seqs = [[r for r in trace.records if of[f"v:{r.index}"] == {b}] for b in range(B)]
    if any(len(q) != len(seqs[0]) for q in seqs) or any(
        (x.op, x.file, x.line) != (y.op, y.file, y.line) for q in seqs[1:] for x, y in zip(seqs[0], q, strict=True)
    ):
        return trace
    first = {f"v:{y.index}": f"v:{x.index}" for q in seqs[1:] for x, y in zip(seqs[0], q, strict=True)}
    stacked: dict[int, torch.Tensor | None] = {}
    for k, x in enumerate(seqs[0]):
        values = [q[k].value for q in seqs]
        same = all(v is not None and x.value is not None and v.shape == x.value.shape for v in values)
        stacked[x.index] = torch.stack(values) if same else None  # type: ignore[arg-type]
    records = []
    for r in trace.records:
        if f"v:{r.index}" in first:
            continue
        reads = tuple(dict.fromkeys(first.get(x, x) for x in r.reads))
        records.append(replace(r, value=stacked.get(r.index, r.value), reads=reads))
    return replace(trace, records=records)


def _one_head(trace: Trace, T: int) -> Trace:
    """The trace with each value that carries a head axis of size 1 after the batch, (B, 1, T, n) or K^T's
    (B, 1, n, T), read as the (B, T, n) it holds: a multi-head skeleton used with one head (issue 35, item 1)
    computes the lecture's stages in that layout, and the axis itself is never a departure."""
    if not any(_head_axis(r, T) for r in trace.records):
        return trace
    records = [
        replace(r, value=r.value.squeeze(1)) if _head_axis(r, T) and r.value is not None else r for r in trace.records
    ]
    return replace(trace, records=records)


def _head_axis(r: Record, T: int) -> bool:
    v = r.value
    return v is not None and v.dim() == 4 and v.shape[0] == PROBE_B and v.shape[1] == 1 and T in v.shape[2:]


def where_of(r: Record) -> dict[str, Any]:
    return {"file": r.file, "line": r.line, "code": r.code}
