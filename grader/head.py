"""The one boundary between checks and student code: a proxy over the isolated worker.

Each method asks the worker to run one contract function and returns plain, validated tensors.
Anything else — an exception in student code, a crash, a timeout, a value of the wrong type, shape
or dtype — raises :class:`StudentFailure`, which the runner turns into the check's verdict. Checks
therefore read like mathematics and never see the sandbox.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch

from grader._hangs import NO_INPUT, Hang, HangRegistry, TimeShares, call_size, past_the_limit
from grader._notebook import advice
from grader.compare import dtype_name
from grader.inputs import Case
from grader.rubric import EntryPoints
from grader.sandbox import Reply, Sandbox, SandboxLimits

CORE = (
    "causal_self_attention",
    "gaussian_positional_weights",
    "gaussian_positional_qk",
    "score_scale_statistics",
)
EXTENSIONS = ("streaming_attention", "KVCache", "cached_attention_step")


UNDEFINED = "the submission defines no `"  # MissingFunction's message, before the name
UNINSTALLED = ", which the grader does not install; "  # its message for a name left out for want of a package


class StudentFailure(Exception):
    """Student code did not produce a usable answer; carries the verdict status and message."""

    def __init__(
        self,
        status: Literal["failed", "error", "timeout"],
        message: str,
        shape_of: str | None = None,
        undifferentiable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.shape_of = shape_of  # a returned value of the wrong shape: which one ("out", "weights")
        self.undifferentiable = undifferentiable  # a returned value carries no autograd graph

    @property
    def stub(self) -> bool:
        """Whether the student's code raised NotImplementedError (a template stub, not yet a head)."""
        return "NotImplementedError" in self.message

    @property
    def overflow(self) -> bool:
        """Whether torch's exception says a value overflowed the dtype ("... to type at::Half without overflow"):
        read here, where the foreign text becomes data (``grader.models.Stop.overflow``)."""
        return "overflow" in self.message


class ImportFailure(StudentFailure):
    """The module raised, or its worker died, while being imported: every request answers with that error.
    ``traceback``: the student's part of its traceback as the worker sent it (untrusted text; "" if none)."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__("error", message)
        self.traceback = traceback


class MissingFunction(StudentFailure):
    """``name`` is absent; ``package``: it was left out because it needs that package, which the grader lacks."""

    def __init__(self, name: str, optional: bool, package: str | None = None, provided: Sequence[str] = ()) -> None:
        message = f"{UNDEFINED}{name}`"
        self.advice = advice(package, provided) if package is not None else None
        if package is not None:
            message = f"`{name}` uses {package}{UNINSTALLED}{self.advice}"
        super().__init__("error", message)
        self.name = name
        self.optional = optional
        self.package = package


def _undifferentiable(problem: object) -> StudentFailure:
    """The worker's report that the head cannot be differentiated, as a breach; whether a returned value has no
    autograd graph at all is read here, where the worker's words are received."""
    said = str(problem)
    return StudentFailure(
        "failed", f"cannot differentiate your head: {said}", undifferentiable="not differentiable" in said
    )


@dataclass
class HeadCall:
    """What one call of ``causal_self_attention`` produced, already validated."""

    out: torch.Tensor
    weights: torch.Tensor
    times: list[float] = field(default_factory=list)
    traced: list[str] = field(default_factory=list)
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    jacobian: torch.Tensor | None = None
    inputs_after: dict[str, torch.Tensor] = field(default_factory=dict)
    returned_dtypes: tuple[torch.dtype, torch.dtype] | None = None  # (out, weights) as returned, before the cast
    # a returned value that breaks the contract while the other is sound (issue 30): reading it raises its breach,
    # so a check that needs only the sound one still judges it
    broken: dict[str, StudentFailure] = field(default_factory=dict)

    def __getattribute__(self, name: str) -> Any:
        if name in ("out", "weights"):
            broken = object.__getattribute__(self, "broken")
            if name in broken:
                raise broken[name]
        return object.__getattribute__(self, name)

    def sound(self, names: tuple[str, ...] = ("out", "weights")) -> tuple[str, ...]:
        """Those of ``names`` that keep the contract (at least one: else the first breach is raised)."""
        kept = tuple(n for n in names if n not in self.broken)
        if not kept:
            raise self.broken[names[0]]
        return kept


@dataclass(frozen=True)
class NonFinite:
    """A call whose out or weights hold non-finite entries although its inputs are finite: a property judged
    on those entries was not observed there (NaN compares bit-equal with NaN, and every bound is false of it).
    ``partial``: only some entries are non-finite (``rows`` says which), so a check saw its property on the
    finite rows alone."""

    case: Case
    causal: bool
    what: str  # "out and weights", "weights", ...
    kind: str  # "NaN", "infinite", "NaN or infinite"
    partial: bool = False
    rows: str = ""  # where the non-finite entries are, for a partial record

    @property
    def size(self) -> int:
        return self.case.X.numel()

    def said(self) -> str:
        if self.partial:
            many = " and " in self.rows or self.rows.startswith("rows ")
            return f"{self.rows} {'are' if many else 'is'} {self.kind}"
        return f"every entry of {self.what} is {self.kind}"


def _kind(ts: list[torch.Tensor]) -> str:
    bad = [t[~torch.isfinite(t)] for t in ts]
    if all(bool(torch.isnan(b).all()) for b in bad):
        return "NaN"
    return "infinite" if not any(bool(torch.isnan(b).any()) for b in bad) else "NaN or infinite"


def _rows(what: str, t: torch.Tensor) -> str:
    """Which rows of ``t`` (B, T, n) hold a non-finite entry: "rows 0-6 of out (of T = 8, every batch element)"."""
    one = t.dim() < 3  # (T, n): one batch element's rows
    bad = (~torch.isfinite(t[None] if one else t)).flatten(2).any(-1)  # (B, T)
    first = int(bad.any(-1).nonzero()[0])
    rows = [int(i) for i in bad[first].nonzero().flatten()]
    spans, start = [], rows[0]
    for a, b in zip(rows, [*rows[1:], None], strict=True):
        if b != a + 1:
            spans.append(f"{start}" if start == a else f"{start}-{a}")
            start = b if b is not None else start
    where = "" if one else ", every batch element" if bool((bad == bad[first]).all()) else f", batch element {first}"
    n = "row" if len(rows) == 1 else "rows"
    return f"{n} {', '.join(spans[:6])}{', ...' if len(spans) > 6 else ''} of {what} (of T = {bad.shape[-1]}{where})"


def _row_words(said: str) -> str:
    return said.split(" of ", 1)[0]


def _same_rows(some: list[tuple[str, torch.Tensor]]) -> bool:
    """Whether out and weights hold their non-finite entries in the same rows."""
    a, b = ((~torch.isfinite(t)).flatten(2).any(-1) for _, t in some)
    return a.shape == b.shape and bool((a == b).all())


def all_finite(t: torch.Tensor) -> bool:
    """Whether every entry of ``t`` (floating) is finite. First its sum: a NaN or an infinity anywhere leaves no
    sum finite, so a finite sum settles it in one reduction (a quarter of the cost of ``isfinite().all()``, on
    every call of the head); a sum that overflowed is settled entry by entry."""
    return math.isfinite(float(t.sum())) or bool(torch.isfinite(t).all())


def _finite_inputs(case: Case) -> bool:
    return all(all_finite(t) for t in case.tensors().values())


def compared_non_finite(case: Case, causal: bool, what: str, a: torch.Tensor, b: torch.Tensor) -> NonFinite | None:
    """The record of a comparison of ``a`` with ``b`` (values of the head on finite inputs) in which either holds
    a non-finite entry: the property was not observed there (None: every entry compared is finite)."""
    t = next((t for t in (a, b) if not all_finite(t)), None)
    if t is None or not _finite_inputs(case):  # the values first: most are finite, and the inputs need no look then
        return None
    return NonFinite(case, causal, what, _kind([t]), True, _rows(what, t))


def non_finite(case: Case, causal: bool, out: torch.Tensor, weights: torch.Tensor) -> NonFinite | None:
    """The record of a call with finite inputs whose out or weights hold a non-finite entry; None otherwise.
    A record is ``partial`` when each of them keeps some finite number."""
    pairs = (("out", out), ("weights", weights))
    if all(all_finite(t) for _, t in pairs) or not _finite_inputs(case):  # the values first, as above
        return None
    empty = [(what, t) for what, t in pairs if t.numel() and not bool(torch.isfinite(t).any())]
    if empty:
        return NonFinite(case, causal, " and ".join(w for w, _ in empty), _kind([t for _, t in empty]))
    some = [(what, t) for what, t in pairs if t.numel() and not bool(torch.isfinite(t).all())]
    if not some:
        return None
    said = [_rows(w, t) for w, t in some]
    if len(some) == 2 and said[0].removeprefix(_row_words(said[0])).startswith(" of out (") and _same_rows(some):
        said = [said[0].replace(" of out (", " of out and weights (")]
    rows = " and ".join(said)
    return NonFinite(case, causal, " and ".join(w for w, _ in some), _kind([t for _, t in some]), True, rows)


EACH_REPLY_BYTES = 16 * 2**20  # one request of attention_each answers at most about this much
AFTER_HANG = 0.25  # of the per-call limit: how long a call outside the checks waits on a function that hung


def _fmt_shape(shape: tuple[int, ...] | list[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


class Head:
    """The student's module as the checks see it.

    Every call is made after the worker seeds torch, numpy and ``random`` with :attr:`rng_seed` (the runner
    sets it per check), so the paired calls of a check draw the same random numbers; a call may pass its
    own ``rng`` instead (the determinism check varies it on purpose).
    """

    rng_seed: int | None = None
    current_check: str | None = None  # set by the runner; names the check a timed-out call came from
    non_finite: NonFinite | None = None  # the smallest call of the current check with no finite out or weights
    part_finite: NonFinite | None = None  # the smallest with some non-finite entries (issue 30: rows unobserved)
    syntax_error: str | None = None  # the module's SyntaxError on the student's file (grader.submission.syntax_error)

    def __init__(
        self,
        sandbox: Sandbox,
        entry: EntryPoints,
        unavailable: Mapping[str, str] | None = None,
        provided: Sequence[str] = (),
    ) -> None:
        self._sandbox = sandbox
        self._entry = entry
        self._unavailable = dict(unavailable or {})  # submission's name -> a package it needs that is missing
        self._provided = tuple(provided)  # the course's packages, named when one is missing
        self._found: dict[str, str] | None = None
        # a hang costs only its own function's checks: no second call on an input at least as large,
        # and each function spends only its share of the submission's time budget
        self.hangs = HangRegistry()
        self.memory_hit: list[int | None] = []  # allocations the memory cap refused (bytes, when said); shared
        # an in-process stand-in for the sandbox (benchmarks/grade_bench.py) has no limits: the defaults apply
        self._limits: SandboxLimits = getattr(sandbox, "limits", None) or SandboxLimits()
        self._shares = TimeShares(self._limits)
        self._restart_for: str | None = None  # the function whose timeout stopped the worker

    def beside(self, sandbox: Sandbox) -> Head:
        """A Head on another worker of the same submission (``Sandbox.sidecar``), for checks that run in
        another thread meanwhile. It shares what this one has learnt: the module's names, earlier hangs
        and the functions' time shares; its seed, check and restart are its own."""
        other = Head(sandbox, self._entry, self._unavailable, self._provided)
        other._found, other.hangs, other._shares = self._found, self.hangs, self._shares
        other.memory_hit = self.memory_hit
        other.syntax_error = self.syntax_error
        return other

    # -- plumbing ---------------------------------------------------------------------------------

    def _request(
        self, op: str, params: dict[str, Any], tensors: dict[str, torch.Tensor], *, fn: str | None = None
    ) -> Reply:
        """One request on behalf of contract function ``fn`` (None: no student function runs); the reply
        when "ok", else a StudentFailure ("timeout" for every kind of hang, import included)."""
        return _judged(self._send(op, params, tensors, fn))

    def _send(self, op: str, params: dict[str, Any], tensors: dict[str, torch.Tensor], fn: str | None) -> Reply:
        """The sandbox's reply, unless ``fn`` hung before on an input no larger or its time share is spent."""
        actual = getattr(self._entry, fn) if fn else f"{self._entry.module}.py"
        size = call_size(fn, params, tensors) if fn else NO_INPUT
        earlier = self.hangs.covering(fn or op, size)
        if earlier is not None:
            raise StudentFailure("timeout", earlier.refusal(size or NO_INPUT))
        if self._restart_for is not None:  # the worker stopped after a hang: that function pays the restart
            owner, self._restart_for = self._restart_for, None
            t0 = time.monotonic()
            self._sandbox.start()
            self._shares.charge(owner, time.monotonic() - t0)
        timeout = self._shares.timeout_s(fn)
        if fn is not None and timeout <= 0:
            raise StudentFailure("timeout", self._shares.spent_message(fn, actual))
        # a call made outside the checks (the diagnosis's probes: tiny inputs) to a function that hung before waits
        # a part of the per-call limit only: a head that hangs at some lengths is graded in bounded time (issue 51)
        after_hang = self.current_check is None and fn is not None and self.hangs.hung(fn)
        if after_hang:
            timeout = min(timeout, AFTER_HANG * self._limits.per_call_timeout_s)
        t0 = time.monotonic()
        reply = self._sandbox.request(op, params, tensors, timeout_s=timeout)
        self._shares.charge(fn, time.monotonic() - t0)  # the caller's whole wait, stopping the worker included
        on = f" on input {size.described}" if size is not None and size is not NO_INPUT else ""
        if reply.status == "timeout":
            self._restart_for = fn
            per_call = fn is None or timeout >= self._limits.per_call_timeout_s or after_hang
            slow = reply.header.get("slow") or {}
            site = (slow["file"], slow["line"], slow["code"]) if slow else None
            at = f"\nIt was at {site[0]}:{site[1]} (`{site[2]}`) when the limit came." if site else ""
            if size is not None:  # a wait cut short after a hang is of a function past the per-call limit: its words
                limit = self._limits.per_call_timeout_s if after_hang else timeout if per_call else None
                self.hangs.record(fn or op, Hang(actual, size, self.current_check, limit, site))
            if not per_call:
                what = f"what was left of its share of the time budget ({self._shares.share_s(fn or ''):.3g} s),"
                message = f"`{actual}` did not finish within {timeout:.3g} s, {what}{on}; the worker was stopped"
            elif after_hang:  # the same first line as the function's other verdicts: one slow function, one cause
                message = (
                    f"{past_the_limit(actual, self._limits.per_call_timeout_s)}\n`{actual}` did not finish within "
                    f"{timeout:.3g} s{on}, the limit of a call the diagnosis makes to a function that ran past the "
                    "per-call limit before; the worker was stopped."
                )
            else:  # the same first line as every refusal it causes (grader/_hangs.py): one slow function, one cause
                message = (
                    f"{past_the_limit(actual, timeout)}\nIt did not finish within {timeout:g} s{on}; the worker "
                    f"was stopped.{at}"
                )
            return replace(reply, message=message)
        if _out_of_memory(reply):  # the cap refused an allocation: said with the cap where the student looks
            tried = _TRIED.search(reply.message)
            self.memory_hit.append(int(tried.group(1)) if tried else None)
        if reply.status == "budget" and fn is not None:
            return replace(reply, message=f"{reply.message} (calling `{actual}`{on})")
        if reply.status == "import_error" and self.syntax_error and reply.header.get("exc_type") in _SYNTAX:
            return replace(reply, message=self.syntax_error)  # the student's file named, its line shown
        return reply

    def found(self) -> dict[str, str]:
        """Contract names the module defines, mapped to 'callable' or the type found."""
        if self._found is None:
            names = [getattr(self._entry, n) for n in CORE + EXTENSIONS]
            self._found = self._request("attrs", {"names": names}, {}).header["found"]  # no student function
        return self._found

    def require(self, name: str, *, optional: bool = False) -> str:
        """The submission's name for contract function ``name``; raises if it is absent."""
        actual = getattr(self._entry, name)
        kind = self.found().get(actual)
        if kind is None:
            raise MissingFunction(actual, optional, self._unavailable.get(actual), self._provided)
        if kind != "callable":
            raise StudentFailure("error", f"`{actual}` is a {kind}, not a function")
        return actual

    def _call(
        self, name: str, args: list[Any], tensors: dict[str, torch.Tensor], *, op: str = "call", **options: Any
    ) -> Reply:
        fn = self.require(name, optional=name in EXTENSIONS)
        return self._request(op, {"fn": fn, "args": args, **options}, tensors, fn=name)

    @staticmethod
    def _items(reply: Reply, fn: str, n: int) -> list[torch.Tensor]:
        """The ``n`` tensors of a tuple result, or a StudentFailure describing what came back."""
        res = reply.header["result"]
        items = res.get("items", [])
        if res["kind"] not in ("tuple", "list") or len(items) != n:
            raise StudentFailure("failed", f"`{fn}` must return a tuple of {n} tensors; it returned {returned(res)}")
        return [Head._item(reply, fn, item, k) for k, item in enumerate(items)]

    @staticmethod
    def _item(reply: Reply, fn: str, item: dict[str, Any], k: int) -> torch.Tensor:
        """The tensor at position ``k`` of a tuple result, or a StudentFailure saying what came back there."""
        if "name" not in item:
            problem = item.get("problem", "")
            raise StudentFailure(
                "failed",
                f"`{fn}` returned {_value(item)}{' with ' + problem if problem else ''} at position {k}",
            )
        return reply.tensors[item["name"]]

    @staticmethod
    def _expect(
        t: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype | None, what: str, symbols: str = ""
    ) -> None:
        """A returned tensor of the wrong shape or dtype fails the check that asked for it."""
        if tuple(t.shape) != shape:
            expected = f"{symbols} = {_fmt_shape(shape)}" if symbols else _fmt_shape(shape)
            raise StudentFailure("failed", f"{what} has shape {_fmt_shape(t.shape)}, expected {expected}", what)
        if dtype is not None and t.dtype != dtype:
            raise StudentFailure(
                "failed",
                f"{what} has dtype {dtype_name(t.dtype)}, expected {dtype_name(dtype)} (the input dtype)",
            )

    # -- the contract -----------------------------------------------------------------------------

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
        """``causal_self_attention(X, W_Q, W_K, W_V, causal=causal)`` on ``case``, validated.

        Outputs of another floating dtype are cast to the input dtype (``returned_dtypes`` keeps what came
        back): a dtype slip costs points once, in the interface check, and the values are judged as usual.
        """
        fn = "causal_self_attention"
        tensors = case.tensors()
        options: dict[str, Any] = {"kwargs": {"causal": {"v": causal}}, "device": device, "repeat": repeat}
        options["seed"] = self.rng_seed if rng is None else rng
        if upstream is not None:  # a None upstream: that value is not differentiated (it broke the contract)
            ups = {
                k: (name, u)
                for k, (name, u) in enumerate(zip(("u_out", "u_w"), upstream, strict=True))
                if u is not None
            }
            tensors = {**tensors, **{name: u for name, u in ups.values()}}
            options["grad"] = {"wrt": ["X", "W_Q", "W_K", "W_V"], "upstream": {str(k): n for k, (n, _) in ups.items()}}
        if jacobian_upstream is not None:
            tensors = {**tensors, "u_jac": jacobian_upstream}
            options["jacobian_rows"] = {"wrt": "X", "output": 0, "upstream": "u_jac"}
        options.update(return_inputs=return_inputs, trace=trace or [], no_grad=no_grad)
        args = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]
        reply = self._call(fn, args, tensors, **options)
        call = self._head_call(reply, case, causal)
        if upstream is not None:
            grads = reply.header["grads"]
            if "problem" in grads:
                raise _undifferentiable(grads["problem"])
            call.grads = {k.removeprefix("g:"): v for k, v in reply.tensors.items() if k.startswith("g:")}
            # No autograd path from these inputs: their gradient is zero, which gradient_blocks compares with
            # finite differences of the forward pass (a cut graph disagrees; an input the head ignores agrees).
            for name in grads["missing"]:
                call.grads[name] = torch.zeros_like(tensors[name])
        if jacobian_upstream is not None:
            if "problem" in reply.header["jacobian"]:
                raise _undifferentiable(reply.header["jacobian"]["problem"])
            call.jacobian = reply.tensors["jac"]
        call.inputs_after = {k.removeprefix("in:"): v for k, v in reply.tensors.items() if k.startswith("in:")}
        return call

    def attention_each(self, cases: list[Case], *, causal: bool = True) -> list[HeadCall]:
        """``attention(case, causal=causal)`` for every case, in one request: the worker makes the calls one
        after another, each after the same seeding, so this is exactly the list of single calls. Long lists
        go in several requests, so that no reply outgrows the channel's frame cap (255 calls at T = 128 do)."""
        chunks, size, start = [], 0, 0
        for k, case in enumerate(cases):
            s = case.shape  # the reply of one call: out and weights, with room for a wider answer
            bytes_ = 2 * s.B * s.T * (s.T + max(s.d, s.d_v)) * case.X.element_size()
            if k > start and size + bytes_ > EACH_REPLY_BYTES:
                chunks.append(cases[start:k])
                start, size = k, 0
            size += bytes_
        chunks.append(cases[start:])
        if len(chunks) > 1:
            return [call for chunk in chunks for call in self._each(chunk, causal)]
        return self._each(cases, causal)

    def _each(self, cases: list[Case], causal: bool) -> list[HeadCall]:
        fn = "causal_self_attention"
        tensors = {f"{k}:{name}": t for k, case in enumerate(cases) for name, t in case.tensors().items()}
        options: dict[str, Any] = {"kwargs": {"causal": {"v": causal}}, "seed": self.rng_seed, "count": len(cases)}
        args = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]
        reply = self._call(fn, args, tensors, op="call_each", **options)
        each = reply.header.get("each")
        if not isinstance(each, list) or len(each) != len(cases):
            raise StudentFailure("error", "the worker answered a batch of calls with the wrong number of results")
        calls = []
        for k, (header, case) in enumerate(zip(each, cases, strict=True)):
            got = {n.split(":", 1)[1]: t for n, t in reply.tensors.items() if n.startswith(f"{k}:")}
            calls.append(self._head_call(Reply("ok", header, got), case, causal))
        return calls

    def _head_call(self, reply: Reply, case: Case, causal: bool) -> HeadCall:
        """The validated (out, weights) of one call on ``case``, cast to the input dtype; a call whose out or
        weights hold no finite number on finite inputs is remembered for the current check (the smallest)."""
        fn = "causal_self_attention"
        res = reply.header["result"]
        items = list(res.get("items", []))
        alone = res["kind"] == "single" or (res["kind"] in ("tuple", "list") and len(items) == 1)
        if not alone and (res["kind"] not in ("tuple", "list") or len(items) != 2):
            self._items(reply, fn, 2)  # raises: what came back instead of two values
        s = case.shape
        expected = {"out": ((s.B, s.T, s.d_v), "(B, T, d_v)"), "weights": ((s.B, s.T, s.T), "(B, T, T)")}
        values: dict[str, tuple[torch.dtype, torch.Tensor]] = {}
        broken: dict[str, StudentFailure] = {}
        for k, (what, (shape, symbols)) in enumerate(expected.items()):
            try:
                if k >= len(items) or alone and k:  # one value returned: judged as out; the weights are missing
                    self._items(reply, fn, 2)
                t = self._item(reply, fn, items[k], k)
                self._expect(t, shape, None, what, symbols)
                values[what] = (t.dtype, _as_dtype(t, case.X.dtype, what))
            except StudentFailure as exc:
                broken[what] = exc
        if len(broken) == 2:
            if alone:
                self._items(reply, fn, 2)  # raises: one value, and not an out either
            raise broken["out"]
        placeholder = (case.X.dtype, torch.empty(0, dtype=case.X.dtype))
        (r_out, out), (r_w, weights) = (values.get(w, placeholder) for w in expected)
        call = HeadCall(out, weights, reply.header.get("times", []), reply.header.get("traced", []), broken=broken)
        call.returned_dtypes = (r_out, r_w)
        if self.current_check is not None and (found := non_finite(case, causal, out, weights)) is not None:
            kept = "part_finite" if found.partial else "non_finite"
            if getattr(self, kept) is None or found.size < getattr(self, kept).size:
                setattr(self, kept, found)
        return call

    def traced_calls(self, case: Case, names: list[str]) -> list[str]:
        """Which of ``names`` one forward call reaches, whatever the call returns."""
        args = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]
        reply = self._call("causal_self_attention", args, case.tensors(), trace=names)
        return list(reply.header.get("traced", []))

    def gaussian_weights(self, T: int, bandwidth: float) -> torch.Tensor:
        fn = "gaussian_positional_weights"
        reply = self._call(fn, [{"v": T}, {"v": bandwidth}], {})
        res = reply.header["result"]
        if res["kind"] != "single" or "name" not in res["items"][0]:
            raise StudentFailure("failed", f"`{fn}` must return one tensor; it returned {returned(res)}")
        w = reply.tensors["r0"]
        self._expect(w, (T, T), None, f"{fn}({T}, {bandwidth:g})")
        return w

    def gaussian_qk(self, T: int, bandwidth: float) -> tuple[torch.Tensor, torch.Tensor]:
        fn = "gaussian_positional_qk"
        Q, K = self._items(self._call(fn, [{"v": T}, {"v": bandwidth}], {}), fn, 2)
        self._expect(Q, (T, 2), None, f"Q from {fn}({T}, {bandwidth:g})")
        self._expect(K, (T, 2), None, f"K from {fn}({T}, {bandwidth:g})")
        return Q, K

    def statistics(self, d_k: int, *, T: int, n_samples: int, seed: int) -> dict[str, float]:
        fn = "score_scale_statistics"
        kwargs = {"T": {"v": T}, "n_samples": {"v": n_samples}, "seed": {"v": seed}}
        reply = self._call(fn, [{"v": d_k}], {}, kwargs=kwargs)
        res = reply.header["result"]
        if res["kind"] != "dict":
            raise StudentFailure("failed", f"`{fn}` must return a dict; it returned {returned(res)}")
        values: dict[str, float] = {}
        for key, item in res["entries"].items():
            if item["type"] == "number":
                values[key] = item["value"]
            elif "name" in item and reply.tensors[item["name"]].numel() == 1:
                values[key] = float(reply.tensors[item["name"]].double())
        return values

    def statistics_global_rng(self, d_k: int, *, T: int, n_samples: int, seed: int) -> list[str]:
        """Which global generators (torch, numpy, random) ``score_scale_statistics`` seeded or drew from in one
        call (the README forbids them: the samples come from ``torch.Generator().manual_seed(seed)``)."""
        fn = "score_scale_statistics"
        kwargs = {"T": {"v": T}, "n_samples": {"v": n_samples}, "seed": {"v": seed}}
        reply = self._call(fn, [{"v": d_k}], {}, kwargs=kwargs, watch_rng=True)
        found = reply.header.get("global_rng")
        return [str(g) for g in found if g in ("torch", "numpy", "random")] if isinstance(found, list) else []

    # -- optional extensions and speed (Section 8, Aside 8.1, Section 8.1) ---------------------------

    def _extension_request(
        self,
        names: tuple[str, ...],
        op: str,
        params: dict[str, Any],
        tensors: dict[str, torch.Tensor],
        stub_ok: bool,
    ) -> Reply:
        """``_request`` for optional functions. When ``stub_ok`` (a check's first call), the template
        stub's NotImplementedError raises :class:`NotAttempted`; later it is an ordinary error."""
        reply = self._send(op, params, tensors, names[-1])  # a decode's time and hangs are the step's
        if reply.status == "error" and stub_ok and _is_not_implemented(reply):
            raise NotAttempted(tuple(getattr(self._entry, n) for n in names))
        return _judged(reply)

    def streaming(
        self,
        Q: torch.Tensor,
        K: torch.Tensor,
        V: torch.Tensor,
        block_size: int,
        *,
        causal: bool = True,
        stub_ok: bool = False,
    ) -> torch.Tensor:
        """``streaming_attention(Q, K, V, block_size, causal=causal)``: (B, T, d_v) in Q's dtype."""
        fn = self.require("streaming_attention", optional=True)
        kwargs = {"causal": {"v": causal}}
        params = {"fn": fn, "args": _qkv_args(block_size), "kwargs": kwargs, "no_grad": True}
        reply = self._extension_request(("streaming_attention",), "call", params, _qkv(Q, K, V), stub_ok)
        out = _single_tensor(reply, fn)
        self._expect(out, (*Q.shape[:2], V.shape[2]), Q.dtype, f"{fn}(..., block_size={block_size})")
        return out

    def streaming_memory(
        self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, block_size: int, *, stub_ok: bool = False
    ) -> PeakMemory:
        """Peak torch allocation of one causal ``streaming_attention`` call, and of the dense formula."""
        fn = self.require("streaming_attention", optional=True)
        kwargs = {"causal": {"v": True}}
        params = {"fn": fn, "args": _qkv_args(block_size), "kwargs": kwargs, "dense": ["Q", "K", "V"]}
        name = ("streaming_attention",)
        reply = self._extension_request(name, "peak_memory", params, _qkv(Q, K, V), stub_ok)
        out = _single_tensor(reply, fn)
        self._expect(out, (*Q.shape[:2], V.shape[2]), Q.dtype, f"{fn}(..., block_size={block_size})")
        return PeakMemory(out, int(reply.header["peak_bytes"]), reply.header.get("dense_peak_bytes"))

    def kv_decode(self, case: Case, *, stub_ok: bool = False) -> Decode:
        """Feed ``case.X`` one position at a time to ``cached_attention_step`` with a fresh ``KVCache``."""
        self.require("KVCache", optional=True)
        fn = self.require("cached_attention_step", optional=True)
        names = ("KVCache", "cached_attention_step")
        reply = self._extension_request(names, "kv_cache", {}, case.tensors(), stub_ok)
        s = case.shape
        steps = []
        for t, item in enumerate(reply.header["steps"]):
            if "name" not in item:
                problem = " with " + item["problem"] if item.get("problem") else ""
                what = f"{item['type']}{problem} at step {t}"
                raise StudentFailure("error", f"`{fn}` returned {what}, not a tensor")
            y = reply.tensors[item["name"]]
            self._expect(y, (s.B, s.d_v), case.X.dtype, f"`{fn}` output at step {t}")
            steps.append(y)
        kv = {w: reply.header[w] for w in ("keys", "values")}
        return Decode(
            steps=torch.stack(steps, dim=1),  # T x (B, d_v) -> (B, T, d_v)
            lengths=[int(n) for n in reply.header["lengths"]],
            keys=reply.tensors[kv["keys"]["name"]] if "name" in kv["keys"] else None,
            values=reply.tensors[kv["values"]["name"]] if "name" in kv["values"] else None,
            keys_type=kv["keys"]["type"],
            values_type=kv["values"]["type"],
        )

    def time_head(
        self, case: Case, *, rounds: int, budget_s: float, baseline_repeats: int = 1, device: str = "cpu"
    ) -> Timing:
        """Interleaved times of ``causal_self_attention`` and the worker's plain formula on ``case``."""
        fn = self.require("causal_self_attention")
        params = {"fn": fn, "rounds": rounds, "budget_s": budget_s, "baseline_repeats": baseline_repeats}
        params["device"] = device
        h = self._request("time_head", params, case.tensors(), fn="causal_self_attention").header
        self._timed_returned(h.get("returned"), case)  # a call that computed nothing was not timed (issue 53.2)
        clocks = ("student_s", "baseline_s", "student_cpu_s", "baseline_cpu_s")
        return Timing(*([float(t) for t in h[k]] for k in clocks))

    @staticmethod
    def _timed_returned(returned: Any, case: Case) -> None:
        """Raise the contract's StudentFailure when the timed calls returned no output of the case's shape (None, a
        value of another kind or shape): the same words an ordinary call's breach gets (:meth:`_items`). The timing
        judges ``out`` alone, as every check that needs only the sound value does (weights left out or None are the
        interface's to charge, issue 30)."""
        fn = "causal_self_attention"
        if not isinstance(returned, dict):
            raise StudentFailure("failed", f"`{fn}` returned nothing the grader could read while it was timed")
        kind, items = returned.get("kind"), returned.get("items") or []
        first = items[0] if items else {}
        if first.get("type") != "tensor":
            got = first.get("type", "nothing") if kind == "single" else f"a {kind} of {returned.get('length')} values"
            got = "None" if got == "NoneType" else got
            raise StudentFailure("failed", f"`{fn}` must return a tuple of 2 tensors; it returned {got}")
        want = (case.shape.B, case.shape.T, case.shape.d_v)
        if tuple(first.get("shape", ())) != want:
            shape = _fmt_shape(tuple(first.get("shape", ())))
            raise StudentFailure("failed", f"out from `{fn}` has shape {shape}, expected {_fmt_shape(want)}")

    # -- appended: unjudged probes, for naming a known bug (grader/diagnosis.py) ----------------------

    def probe(
        self,
        name: str,
        args: list[Any],
        tensors: dict[str, torch.Tensor],
        *,
        seed: int,
        op: str = "seeded_call",
        **options: Any,
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Contract function ``name`` run by ``op`` after ``torch.manual_seed(seed)``, not validated:
        the worker's header and tensors as they came (``options`` as for the ``call`` op)."""
        fn = self.require(name, optional=name in EXTENSIONS)
        reply = self._request(op, {"fn": fn, "args": args, "seed": seed, **options}, tensors, fn=name)
        return reply.header, reply.tensors

    def intervene(
        self,
        name: str,
        args: list[Any],
        tensors: dict[str, torch.Tensor],
        patches: Sequence[dict[str, Any]],
        *,
        seed: int,
        causal: bool,
        no_grad: bool = True,
        values: bool = True,
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """``name`` traced as the ``trace`` op does, with some of its values replaced (issue 35): each patch
        names a site (``file``, ``line``, ``nth`` value recorded there, ``var`` for a NumPy local) and gives
        ``value``, a tensor that replaces it, or None for the op's input (pass-through). Not validated.
        ``no_grad`` False: run with autograd recording on, as a plain call is; ``values`` False: the call's
        result alone comes back, not the values recorded on the way."""
        specs, sent = _patch_specs(patches)
        sent.update(tensors)
        options = {"kwargs": {"causal": {"v": causal}}, "patches": specs, "no_grad": no_grad, "values": values}
        return self.probe(name, args, sent, seed=seed, op="intervene", **options)

    def intervened_calls(
        self,
        cases: Sequence[Case],
        patches: Sequence[Sequence[dict[str, Any]]],
        *,
        causal: bool,
        seed: int | None,
        no_grad: bool = False,
        arrays: bool = True,
    ) -> list[HeadCall]:
        """``causal_self_attention`` on each case with its own ``patches`` applied (as :meth:`intervene`, the
        values recorded on the way left out), in one request, validated as :meth:`attention` validates a call; a
        call that raised raises its StudentFailure ("error"). ``arrays`` False: no NumPy local is followed (a
        torch head's: its calls cost less). For the diagnosis's proof (issue 35)."""
        fn = "causal_self_attention"
        sent: dict[str, torch.Tensor] = {}
        each = []
        for k, (case, mine) in enumerate(zip(cases, patches, strict=True)):
            sent.update({f"{k}:{n}": t for n, t in case.tensors().items()})
            specs, values = _patch_specs(mine)
            sent.update({f"{k}:{n}": t for n, t in values.items()})
            each.append(specs)
        options = {"kwargs": {"causal": {"v": causal}}, "patches_each": each, "no_grad": no_grad, "values": False}
        options["arrays"] = arrays
        args = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]
        reply = self._call(fn, args, sent, op="intervene_each", seed=seed, **options)
        headers = reply.header.get("each")
        if not isinstance(headers, list) or len(headers) != len(cases):
            raise StudentFailure("error", "the worker answered a batch of calls with the wrong number of results")
        calls = []
        for k, (header, case) in enumerate(zip(headers, cases, strict=True)):
            raised = header.get("raised") if isinstance(header, dict) else None
            if isinstance(raised, dict):
                at = f" at line {raised['line']}" if "line" in raised else ""
                raise StudentFailure("error", f"{raised.get('type') or 'an exception'} raised{at}")
            got = {n.split(":", 1)[1]: t for n, t in reply.tensors.items() if n.startswith(f"{k}:")}
            calls.append(self._head_call(Reply("ok", header, got), case, causal))
        return calls


def _patch_specs(patches: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """The ``intervene`` op's patch specs (a site, and the name of its value's tensor: ``patch:<k>``; none for a
    pass-through) and those tensors."""
    specs, values = [], {}
    for k, p in enumerate(patches):
        spec: dict[str, Any] = {key: p[key] for key in ("file", "line", "nth", "var") if key in p}
        if p.get("value") is not None:
            values[f"patch:{k}"] = p["value"]
            spec["value"] = f"patch:{k}"
        specs.append(spec)
    return specs, values


class NotAttempted(MissingFunction):
    """An optional function that is still the template stub: it raises NotImplementedError."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__(names[0], optional=True)
        which = " or ".join(f"`{n}`" for n in names)
        self.message = f"{which} raises NotImplementedError (the template stub)"


@dataclass
class PeakMemory:
    """One metered call: its result and the peak bytes torch allocated during it."""

    result: torch.Tensor
    peak_bytes: int
    dense_peak_bytes: int | None  # the plain masked formula on the same inputs, in the same worker


@dataclass
class Decode:
    """A whole decode through ``cached_attention_step`` with one fresh ``KVCache``."""

    steps: torch.Tensor  # (B, T, d_v), step t's output in row t
    lengths: list[int]  # len(cache) after each step
    keys: torch.Tensor | None  # cache.keys after the last step; None when it is not a tensor
    values: torch.Tensor | None
    keys_type: str  # the type cache.keys had
    values_type: str


@dataclass
class Timing:
    """Interleaved times per call, in seconds, of the student's head and the worker's plain formula."""

    student_s: list[float]  # wall clock
    baseline_s: list[float]
    student_cpu_s: list[float]  # CPU time of the worker process
    baseline_cpu_s: list[float]


def _as_dtype(t: torch.Tensor, dtype: torch.dtype, what: str) -> torch.Tensor:
    """``t`` in ``dtype`` when it is a floating tensor; anything else breaks the contract."""
    if t.dtype == dtype:
        return t
    if not t.dtype.is_floating_point:
        raise StudentFailure("failed", f"{what} has dtype {dtype_name(t.dtype)}; attention returns floating tensors")
    return t.to(dtype)


_SYNTAX = ("SyntaxError", "IndentationError", "TabError")


# An allocation the memory cap refused: Python's MemoryError, torch's CPU allocator (Linux and macOS: "can't allocate
# memory", Windows: "not enough memory"), or the sandbox's own watchdog ("memory limit (N MiB) exceeded").
_ALLOCATION = re.compile(r"can't allocate memory|not enough memory|memory limit \(\d+ MiB\) exceeded")
_TRIED = re.compile(r"you tried to allocate (\d+) bytes")


def _out_of_memory(reply: Reply) -> bool:
    if reply.status not in ("error", "crash"):
        return False
    return reply.header.get("exc_type") == "MemoryError" or _ALLOCATION.search(reply.message) is not None


def _judged(reply: Reply) -> Reply:
    """``reply`` when it is "ok"; otherwise the StudentFailure it amounts to (every hang is a timeout)."""
    if reply.status == "ok":
        return reply
    if reply.status in ("timeout", "budget", "import_timeout"):
        raise StudentFailure("timeout", reply.message)
    if reply.status == "import_error":
        raise ImportFailure(reply.message, str(reply.header.get("traceback", "")))
    raise StudentFailure("error", reply.message)


def _qkv(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"Q": Q, "K": K, "V": V}


def _qkv_args(block_size: int) -> list[dict[str, Any]]:
    return [{"t": "Q"}, {"t": "K"}, {"t": "V"}, {"v": block_size}]


def _is_not_implemented(reply: Reply) -> bool:
    if reply.header.get("exc_type") == "NotImplementedError":
        return True
    lines = f"{reply.message}\n{reply.header.get('traceback', '')}".strip().splitlines()
    return bool(lines) and any(line.startswith("NotImplementedError") for line in (lines[0], lines[-1]))


def returned(res: dict[str, Any]) -> str:
    """What a function returned, as a student would say it (issue 53: 'None', not 'NoneType' nor 'single')."""
    items = res.get("items", [])
    if res["kind"] == "single" and items:
        return _value(items[0])
    if res["kind"] in ("tuple", "list"):
        return f"a {res['kind']} of {len(items)} value{'' if len(items) == 1 else 's'}"
    return f"a {res['kind']}"


def _value(item: dict[str, Any]) -> str:
    """One returned value: 'None', 'a tensor', 'a number', 'a str'."""
    kind = str(item.get("type", "value"))
    return "None" if kind == "NoneType" else f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _single_tensor(reply: Reply, fn: str) -> torch.Tensor:
    """The one tensor a function returned, or a StudentFailure saying what came back instead."""
    res = reply.header["result"]
    item = res["items"][0] if res["kind"] == "single" else None
    if item is None or "name" not in item:
        got = returned(res)
        if item is not None and item.get("problem"):
            got += f" with {item['problem']}"
        raise StudentFailure("error", f"`{fn}` must return one tensor; it returned {got}")
    return reply.tensors[item["name"]]
