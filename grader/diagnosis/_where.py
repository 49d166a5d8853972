"""Crashes that depend on the input, and where the head does run (issue 24, families 2, 3 and 8).

A head that raises for some inputs only has one mistake, not one per check it stopped: a buffer of fixed
length (it raises for every T != 128), a branch of an argument (it raises whenever causal=True), a dtype it
cannot take (NumPy has no bfloat16). Each is found by probing the head at the lengths, flag values or dtypes
in question, and is one cause explaining every check the same exception stopped. Its price is what it stops:
a property that was never observed is never credited (the cause has no default price, so it costs the
points of the checks it explains).

Such a crash must not hide the head's other mistakes: :class:`Where` says where the head does run (a length,
the flag values), and the diagnosis probes it there (``_known.attention_probes``) to name them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from grader.diagnosis._causes import cause, varying
from grader.diagnosis._known import PROBE_SEED
from grader.diagnosis._naming import n_checks
from grader.head import Head, MissingFunction, StudentFailure
from grader.models import CheckResult, Diagnosis

K = TypeVar("K", bound=Hashable)  # what a family of probes varies: the length, the flag, the dtype
ATTENTION = "causal_self_attention"
ARGS = [{"t": "X"}, {"t": "W_Q"}, {"t": "W_K"}, {"t": "W_V"}]
VARIED = ("length", "flag", "dtype", "width")  # what the probes below vary: each crash kind's ``varies`` (causes.toml)
SIZE_CRASH = varying("length", VARIED)  # fixed_size_buffer: a crash at some sequence lengths only, a fixed buffer
FLAG_CRASH = varying("flag", VARIED)  # branch_crash: a crash for one value of the causal flag only, a branch raises
DTYPE_CRASH = varying("dtype", VARIED)  # unsupported_dtype: a crash for some input dtypes only (NumPy, bfloat16)
WIDTH_CRASH = varying("width", VARIED)  # width_crash: a crash for some widths or batch sizes only (issue 30)
# (B, d, d_k, d_v) of the width probes: the usual probe, then each size made equal to another or changed alone
WIDTHS = ((2, 4, 3, 2), (2, 4, 4, 4), (2, 4, 4, 2), (2, 4, 3, 4), (2, 4, 3, 3), (1, 4, 3, 2), (3, 4, 3, 2))
# The conditions a width crash is named by, in order: the first true of every probe it raises at and of none
# it runs at names it.
# each rule: its words, the widths it says must equal d for the head to run (a projection left out leaves that
# width d), and the rule itself
WIDTH_RULES = (
    ("whenever d_k ≠ d or d_v ≠ d", ("d_k", "d_v"), lambda B, d, d_k, d_v: d_k != d or d_v != d),
    ("whenever d_k ≠ d", ("d_k",), lambda B, d, d_k, d_v: d_k != d),
    ("whenever d_v ≠ d", ("d_v",), lambda B, d, d_k, d_v: d_v != d),
    ("whenever d_k ≠ d_v", (), lambda B, d, d_k, d_v: d_k != d_v),
    ("whenever d_k = d_v", (), lambda B, d, d_k, d_v: d_k == d_v),
    ("whenever B = 1", (), lambda B, d, d_k, d_v: B == 1),
    ("whenever B ≠ 1", (), lambda B, d, d_k, d_v: B != 1),
)
SIZES = (1, 2, 3, 4, 5, 8, 16, 32, 64, 127, 128, 129, 255, 256, 257, 512)
LONG = 1024  # the performance check's length: probed only when that check crashed
PROBE_LENGTHS = (4, 5)  # the lengths of the diagnosis's own probes (_known.attention_probes)
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Where:
    """Where the head runs: the length of every probe (None: the probes' own) and the causal flags it takes."""

    length: int | None = None
    flags: tuple[bool, ...] = (True, False)
    square: bool = False  # the head runs with d_k = d_v = d only: its stopped checks run again there
    # a length the head takes, where the checks a length-dependent crash stopped are run again (issue 30: set
    # also when the probes' own lengths run, as for a buffer of 8 positions sliced to T)
    runs_at: int | None = None

    @property
    def moved(self) -> bool:
        return self.length is not None or self.flags != (True, False) or self.square

    def said(self) -> str:
        """'at T = 128', 'with causal=False', 'with d_k = d_v = d': where a cause found here was seen."""
        parts = (
            ([f"at T = {self.length}"] if self.length else [])
            + ([f"with causal={self.flags[0]}"] if len(self.flags) == 1 else [])
            + (["with d_k = d_v = d"] if self.square else [])
        )
        return " and ".join(parts)

    def kwargs(self) -> dict[str, Any]:
        """The causal flag of a single probe made here."""
        return {"causal": {"v": self.flags[0]}}


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def exception(line: str) -> str:
    """'NotImplementedError' from 'NotImplementedError: ...'; the whole line when it names no exception."""
    name = line.split(":", 1)[0].strip()
    return name if name.isidentifier() and ":" in line else line


def crash_name(check: CheckResult) -> str | None:
    """The exception that stopped ``check`` (or one of its cases), as the message names it."""
    whole = [s for s in check.stopped if s.scope == "check" and s.kind in ("raised", "timeout")]
    stop = next(iter(whole or [s for s in check.stopped if s.scope != "check"]), None)
    return exception(first_line(stop.text)) if stop is not None else None


def inputs(T: int, dtype: torch.dtype, g: torch.Generator, B: int = 1) -> dict[str, torch.Tensor]:
    """A small random input of the head (d = 4, d_k = 3, d_v = 2) in ``dtype``, drawn in float64."""
    shapes = {"X": (B, T, 4), "W_Q": (4, 3), "W_K": (4, 3), "W_V": (4, 2)}
    return {n: torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype) for n, shape in shapes.items()}


def by_size(head: Head, failing: list[CheckResult]) -> tuple[Diagnosis | None, Where]:
    """The crash that depends on the sequence length, and the length to probe the head at instead: the head
    probed at lengths 1 to 512 (and 1024 when the performance check crashed) raises at some and not others."""
    crashed = _crashed(failing)
    if not crashed:
        return None, Where()
    g = torch.Generator().manual_seed(PROBE_SEED)
    lengths = SIZES + ((LONG,) if "performance" in crashed else ())
    split = _split(head, {T: (inputs(T, torch.float64, g), True) for T in lengths}, crashed)
    if split is None:
        return None, Where()
    raised, worked, name, explains = split
    if len(worked) == 1 and (swapped := _follows_key_width(head, worked[0], crashed, failing)) is not None:
        return swapped, Where()
    where = _lengths(sorted(raised), worked)
    first = min(raised)
    entry = cause(SIZE_CRASH)
    what = (
        entry.phrase("long_only", long=LONG)
        if explains == ["performance"]
        else entry.phrase("stopped", checks=n_checks(len(explains)))
    )
    title, hint, cites = entry.words(
        function=ATTENTION,
        exception=name,
        where=where,
        what=what,
        worked=", ".join(map(str, worked[:6])) + (", ..." if len(worked) > 6 else ""),
        first=first,
        error=first_line(raised[first]),
    )
    found = Diagnosis(
        id=SIZE_CRASH, title=title, hint=hint, cites=cites, kind="crash", explains=explains, detail=raised[first]
    ).with_facts(exception=name)
    runs_there = set(PROBE_LENGTHS) <= set(worked)
    if runs_there:  # probed at their own lengths; the stopped checks run again at the longest short length
        return found, Where(runs_at=max(n for n in worked if n <= max(16, min(worked))))
    length = min(worked, key=lambda T: (abs(T - 5), T))
    return found, Where(length=length, runs_at=length)


# The comparisons with the reference's values: where a head that runs only at T = d_k runs, its (d_k, d_k) array
# stands where the (T, T) one belongs (or broadcasts into it, at d_k = 1), so its values are the same mistake's.
COMPARED = ("reference_match", "fused_kernel")


def _follows_key_width(head: Head, T: int, crashed: dict[str, str], failing: list[CheckResult]) -> Diagnosis | None:
    """The crash of a head that runs at the one length ``T`` because ``T`` equals its probe's key width (a transpose
    of the wrong axes makes a (d_k, d_k) array where a (T, T) one belongs): it raises at ``T`` with another d_k and
    runs at T = d_k there, so the crash follows d_k, not T (issue 35, item 7: it was named a fixed-length buffer).
    None when that does not hold."""
    d, d_k, d_v = 4, T + 2, 2
    calls = {}
    for length in (T, d_k):
        g = torch.Generator().manual_seed(PROBE_SEED)
        shapes = {"X": (1, length, d), "W_Q": (d, d_k), "W_K": (d, d_k), "W_V": (d, d_v)}
        calls[length] = ({n: torch.randn(*s, generator=g, dtype=torch.float64) for n, s in shapes.items()}, True)
    split = _split(head, calls, crashed)
    if split is None or list(split[1]) != [d_k]:
        return None
    raised, _, name, stopped = split
    explains = sorted({*stopped, *(c.id for c in failing if c.id in COMPARED)})
    title, hint, cites = cause(WIDTH_CRASH).words(
        "key_width",
        function=ATTENTION,
        exception=name,
        good=f"T = d_k = {d_k}",
        bad=f"T = {T}, d_k = {d_k}",
        checks=n_checks(len(stopped)),
        error=first_line(raised[T]),
    )
    return Diagnosis(
        id=WIDTH_CRASH, title=title, hint=hint, cites=cites, kind="crash", explains=explains, detail=raised[T]
    ).with_facts(exception=name)


def by_flag(head: Head, unexplained: list[CheckResult], where: Where) -> tuple[Diagnosis | None, Where]:
    """The crash of one branch of the causal flag: the head raises for causal=True and not for causal=False,
    or the other way round; and where it runs then (the other branch)."""
    crashed = _crashed(unexplained)
    if not crashed:
        return None, where
    T = where.length or 5
    g = torch.Generator().manual_seed(PROBE_SEED)
    split = _split(head, {flag: (inputs(T, torch.float64, g, B=2), flag) for flag in (True, False)}, crashed)
    if split is None:
        return None, where
    raised, worked, name, explains = split
    [flag] = raised
    title, hint, cites = cause(FLAG_CRASH).words(
        function=ATTENTION,
        exception=name,
        flag=flag,
        other=not flag,
        checks=n_checks(len(explains)),
        error=first_line(raised[flag]),
    )
    found = Diagnosis(
        id=FLAG_CRASH, title=title, hint=hint, cites=cites, kind="crash", explains=explains, detail=raised[flag]
    ).with_facts(exception=name)
    return found, Where(where.length, tuple(worked), where.square, where.runs_at)


def by_width(head: Head, unexplained: list[CheckResult], where: Where) -> tuple[Diagnosis | None, Where]:
    """The crash that depends on the widths d, d_k, d_v or the batch size: the head probed with each of
    :data:`WIDTHS` (where it runs otherwise) raises for some and not others; named by the first of
    :data:`WIDTH_RULES` that tells them apart, else by the sizes it raises at."""
    crashed = _crashed(unexplained)
    if not crashed:
        return None, where
    T, flag = where.length or 5, where.flags[0]
    calls = {}
    for B, d, d_k, d_v in WIDTHS:
        g = torch.Generator().manual_seed(PROBE_SEED)
        shapes = {"X": (B, T, d), "W_Q": (d, d_k), "W_K": (d, d_k), "W_V": (d, d_v)}
        calls[(B, d, d_k, d_v)] = (
            {n: torch.randn(*s, generator=g, dtype=torch.float64) for n, s in shapes.items()},
            flag,
        )
    split = _split(head, calls, crashed)
    if split is None:
        return None, where
    raised, worked, name, explains = split
    said, equal_d = next(
        (
            (text, widths)
            for text, widths, rule in WIDTH_RULES
            if all(rule(*k) for k in raised) and not any(rule(*k) for k in worked)
        ),
        (None, ()),
    )
    sizes = lambda keys: "; ".join(f"B = {B}, d = {d}, d_k = {d_k}, d_v = {d_v}" for B, d, d_k, d_v in keys)  # noqa: E731
    first = next(iter(raised))
    title, hint, cites = cause(WIDTH_CRASH).words(
        function=ATTENTION,
        exception=name,
        where=said or f"with {sizes(raised)}",
        good=sizes(worked),
        bad=sizes(raised),
        checks=n_checks(len(explains)),
        error=first_line(raised[first]),
    )
    found = Diagnosis(
        id=WIDTH_CRASH, title=title, hint=hint, cites=cites, kind="crash", explains=explains, detail=raised[first]
    ).with_facts(equal_d=equal_d, exception=name)
    square = (2, 4, 4, 4) in worked and all(d_k != d or d_v != d for _, d, d_k, d_v in raised)
    return found, Where(where.length, where.flags, square or where.square, where.runs_at)


def by_dtype(head: Head, unexplained: list[CheckResult], where: Where) -> tuple[Diagnosis | None, str]:
    """The crash that depends on the input dtype alone, and the dtypes it raises for: the head probed in each
    floating dtype (where it runs otherwise) raises in some and not others (a NumPy head has no bfloat16)."""
    crashed = _crashed(unexplained)
    if not crashed:
        return None, ""
    T, flag = where.length or 5, where.flags[0]
    calls = {d: (inputs(T, d, torch.Generator().manual_seed(PROBE_SEED)), flag) for d in DTYPES}
    split = _split(head, calls, crashed)
    if split is None:
        return None, ""
    raised, worked, name, explains = split
    bad, good = " and ".join(dtype_name(d) for d in raised), ", ".join(dtype_name(d) for d in worked)
    first = next(iter(raised))
    overflow = "without overflow" in raised[first] or "overflow" in first_line(raised[first]).lower()
    title, hint, cites = cause(DTYPE_CRASH).words(
        "overflow" if overflow else None,
        function=ATTENTION,
        exception=name,
        bad=bad,
        good=good,
        checks=n_checks(len(explains)),
        error=first_line(raised[first]),
    )
    found = Diagnosis(
        id=DTYPE_CRASH, title=title, hint=hint, cites=cites, kind="crash", explains=explains, detail=raised[first]
    ).with_facts(float32_met=bool(_FLOAT32.search(raised[first])), exception=name)
    return found, bad


_FLOAT32 = re.compile(r"\b[Ff]loat\b")  # torch's name of float32 in a dtype mismatch ("found Float", "float != ")


def absorbed(causes: list[Diagnosis], crash: Diagnosis) -> list[Diagnosis]:
    """``causes`` without what ``crash`` explains in their message-grouped crashes (their messages differed
    only by the input), ``crash`` first."""
    kept = []
    for c in causes:
        if c.kind == "crash":
            c = c.model_copy(update={"explains": [x for x in c.explains if x not in crash.explains]})
            if not c.explains:
                continue
        kept.append(c)
    return [crash, *kept]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _crashed(failing: list[CheckResult]) -> dict[str, str]:
    return {c.id: name for c in failing if (name := crash_name(c)) is not None}


def _split(
    head: Head, calls: dict[K, tuple[dict[str, torch.Tensor], bool]], crashed: dict[str, str]
) -> tuple[dict[K, str], list[K], str, list[str]] | None:
    """The head on each call (inputs, causal flag): where it raised (with the message), where it worked, the
    exception raised most often, and the crashed checks that exception explains; None unless it both raised
    and worked (or when it hung or lacks the function)."""
    raised: dict[K, str] = {}
    worked: list[K] = []
    for key, (tensors, causal) in calls.items():
        try:
            head.probe(ATTENTION, ARGS, tensors, seed=PROBE_SEED, kwargs={"causal": {"v": causal}})
            worked.append(key)
        except MissingFunction:
            return None
        except StudentFailure as exc:
            if exc.status == "timeout":
                return None
            raised[key] = exc.message
    if not raised or not worked:
        return None
    name = Counter(exception(first_line(m)) for m in raised.values()).most_common(1)[0][0]
    explains = sorted(cid for cid, n in crashed.items() if n == name)
    return (raised, worked, name, explains) if explains else None


def _lengths(raised: list[int], worked: list[int]) -> str:
    """Where the head raises, in words: 'for every T ≠ 128', 'for every T > 256', or the lengths."""
    if len(worked) == 1:
        return f"for every T ≠ {worked[0]}"
    if max(worked) < min(raised):
        return f"for every T > {max(worked)}" + (f" (tried up to {max(raised)})" if max(raised) == LONG else "")
    if min(worked) > max(raised):
        return f"for every T < {min(worked)}"
    return "at T = " + ", ".join(map(str, raised))
