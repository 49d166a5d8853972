"""What a hanging function may still cost: the bookkeeping behind :class:`grader.head.Head`.

A contract function that timed out on some input is not called again on an input at least as large
(:class:`HangRegistry`), and every function spends only its own share of the submission's time budget
(:class:`TimeShares`, the rubric's ``limits.function_budget_share``). So one hang costs the checks of
that function, never those of the others. Plain data; :class:`~grader.head.Head` turns it into verdicts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch

from grader.compare import dtype_name
from grader.sandbox._limits import SandboxLimits

# the functions whose calls share one time share (the rest are their own): a decode is one request
SHARED_WITH = {"KVCache": "cached_attention_step"}


@dataclass(frozen=True)
class CallSize:
    """How much work one call asks for, comparable with an earlier call of the same function.

    ``key`` is (T, total input elements), compared lexicographically (T is the work axis; at the same T,
    more elements is more work), or (d_k, T, n_samples), compared component by component.
    """

    key: tuple[int, ...]
    componentwise: bool
    described: str  # "B=2, T=8, d=4, d_k=3, d_v=5 (float64)"

    def at_least(self, other: CallSize) -> bool:
        if self.componentwise:
            return len(self.key) == len(other.key) and all(a >= b for a, b in zip(self.key, other.key, strict=True))
        return self.key >= other.key


NO_INPUT = CallSize((), componentwise=False, described="no input")  # e.g. listing the module's names


def call_size(function: str, params: dict[str, Any], tensors: dict[str, torch.Tensor]) -> CallSize | None:
    """The size of one request for ``function``; None when it cannot be read off (then no hang covers it)."""
    args: list[Any] = params.get("args", [])
    kwargs: dict[str, Any] = params.get("kwargs", {})
    values = [a.get("v") for a in args if isinstance(a, dict)]
    if function in ("gaussian_positional_weights", "gaussian_positional_qk"):
        if not values or not isinstance(values[0], int):
            return None
        bandwidth = f", bandwidth={values[1]:g}" if len(values) > 1 and isinstance(values[1], float | int) else ""
        return CallSize((values[0],), False, f"T={values[0]}{bandwidth}")
    if function == "score_scale_statistics":
        found = [values[0] if values else None] + [kwargs.get(k, {}).get("v") for k in ("T", "n_samples")]
        sizes = [n for n in found if isinstance(n, int)]
        if len(sizes) != 3:  # a default of the student's own: its size is unknown
            return None
        d_k, T, n = sizes
        return CallSize((d_k, T, n), True, f"d_k={d_k}, T={T}, n_samples={n}")
    return _tensor_size(tensors, values)


def _tensor_size(tensors: dict[str, torch.Tensor], values: list[Any]) -> CallSize | None:
    """X (B, T, d) with W_Q, W_V; or Q, K, V (B, T, d_k) with a block size. Several input sets in one
    request (names ``<k>:X``): the largest of them."""
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        prefix, _, bare = name.rpartition(":")
        groups.setdefault(prefix, {})[bare] = t
    if len(groups) > 1 or "" not in groups:
        sizes = [_tensor_size(group, values) for group in groups.values()]
        known = [size for size in sizes if size is not None]
        return max(known, key=lambda size: size.key) if len(known) == len(sizes) and known else None
    main = tensors.get("X", tensors.get("Q"))
    if main is None or main.dim() != 3:
        return None
    B, T, d = main.shape
    numel = sum(t.numel() for t in tensors.values())
    if "X" in tensors and "W_Q" in tensors and "W_V" in tensors:
        dims = f"B={B}, T={T}, d={d}, d_k={tensors['W_Q'].shape[-1]}, d_v={tensors['W_V'].shape[-1]}"
    elif "V" in tensors:
        block = f", block_size={values[-1]}" if values and isinstance(values[-1], int) else ""
        dims = f"B={B}, T={T}, d_k={d}, d_v={tensors['V'].shape[-1]}{block}"
    else:
        dims = f"B={B}, T={T}, d={d}"
    return CallSize((T, numel), False, f"{dims} ({dtype_name(main.dtype)})")


@dataclass(frozen=True)
class Hang:
    """One call that ran out of time."""

    function: str  # the submission's name for it
    size: CallSize
    check: str | None  # the check that made the call; None outside the checks (diagnosis, pictures)
    limit_s: float | None = None  # the per-call limit it ran past (None: what was left of its time share)
    site: tuple[str, int, str] | None = None  # (file, line, code) where the worker saw it near the limit

    def refusal(self, size: CallSize) -> str:
        """Why a call is not made. Past the per-call limit, the first line is the same for every call of the
        function (issue 53: the checks one slow function stopped are one cause), the inputs on the next."""
        where = f"in check {self.check}" if self.check else "outside the checks (naming a bug or drawing the report)"
        if not self.size.key:
            said = f"`{self.function}` timed out earlier {where}; not asked again"
        else:
            also = "" if size.described == self.size.described else f" (this one: {size.described})"
            said = (
                f"`{self.function}` timed out earlier {where} on input {self.size.described}; "
                f"not called again on inputs at least as large{also}"
            )
        return said if self.limit_s is None else f"{past_the_limit(self.function, self.limit_s)}\n{said}"


def past_the_limit(function: str, limit_s: float) -> str:
    """The first line of every verdict a call past the per-call limit stopped: '`f` ran past the per-call limit
    (20 s)'."""
    return f"`{function}` ran past the per-call limit ({limit_s:g} s)"


class HangRegistry:
    """The calls that timed out, per function; asks whether a new call is covered by one of them."""

    def __init__(self) -> None:
        self._hangs: dict[str, list[Hang]] = {}

    def record(self, key: str, hang: Hang) -> None:
        self._hangs.setdefault(key, []).append(hang)

    def covering(self, key: str, size: CallSize | None) -> Hang | None:
        """The first recorded hang of ``key`` whose input this call's is at least as large as."""
        if size is None:
            return None
        return next((h for h in self._hangs.get(key, []) if size.at_least(h.size)), None)

    def hung(self, key: str) -> bool:
        """Whether ``key`` timed out before, on any input."""
        return bool(self._hangs.get(key))

    def __len__(self) -> int:
        return sum(len(v) for v in list(self._hangs.values()))  # list(): another thread may add a key

    def sites(self) -> dict[str, tuple[str, int, str]]:
        """Function -> where the worker saw its code when its first hang with a known place neared the limit."""
        found: dict[str, tuple[str, int, str]] = {}
        for function, hangs in list(self._hangs.items()):
            site = next((h.site for h in hangs if h.site is not None), None)
            if site is not None:
                found[function] = site
        return found


class TimeShares:
    """Seconds each contract function has spent, against its share of the submission's budget."""

    def __init__(self, limits: SandboxLimits) -> None:
        self._limits = limits
        self._spent: dict[str, float] = {}
        self._lock = threading.Lock()  # the Heads of two threads may share one (Head.beside)

    def share_s(self, function: str) -> float:
        budget = self._limits.per_submission_timeout_s
        return self._limits.function_budget_share.seconds(SHARED_WITH.get(function, function), budget)

    def left_s(self, function: str) -> float:
        return max(self.share_s(function) - self._spent.get(SHARED_WITH.get(function, function), 0.0), 0.0)

    def timeout_s(self, function: str | None) -> float:
        """How long the next call of ``function`` may run (None: no student function, the per-call limit)."""
        per_call = self._limits.per_call_timeout_s
        return per_call if function is None else min(per_call, self.left_s(function))

    def charge(self, function: str | None, seconds: float) -> None:
        if function is not None:
            key = SHARED_WITH.get(function, function)
            with self._lock:
                self._spent[key] = self._spent.get(key, 0.0) + max(seconds, 0.0)

    def spent_message(self, function: str, actual: str) -> str:
        budget = self._limits.per_submission_timeout_s
        return (
            f"`{actual}` has used up its share of the time budget ({self.share_s(function):.3g} s of the "
            f"submission's {budget:g} s, limits.function_budget_share); not called again"
        )
