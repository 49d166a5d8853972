"""Inputs for the checks: small keyword-only generators on explicit seeded generators.

Every tensor is made in the grader from ``torch.Generator().manual_seed(seed)``, never the global
RNG (a submission may reseed or consume it). Shape families are listed smallest first, so the first
failing family is the minimal counterexample.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from grader.compare import dtype_name
from grader.models import Counterexample


@dataclass(frozen=True)
class Shape:
    B: int
    T: int
    d: int
    d_k: int
    d_v: int

    def as_dict(self) -> dict[str, int]:
        return {"B": self.B, "T": self.T, "d": self.d, "d_k": self.d_k, "d_v": self.d_v}


# Smallest first. B >= 2 and d, d_k, d_v, T all different somewhere, so transposition slips show.
FAMILIES: tuple[Shape, ...] = (
    Shape(1, 1, 1, 1, 1),
    Shape(1, 2, 1, 1, 1),
    Shape(2, 3, 4, 2, 3),
    Shape(2, 5, 6, 3, 4),
    Shape(3, 8, 7, 5, 2),
    Shape(2, 12, 16, 6, 9),
)


# Where a head runs only at one length (a mask buffer of fixed size), its checks are run again there: every
# case made by make_case then has that many positions (the seeds, widths and batch sizes stay the check's).
_LENGTH: ContextVar[int | None] = ContextVar("length", default=None)


@contextlib.contextmanager
def at_length(T: int) -> Iterator[None]:
    """Within this block, every case :func:`make_case` makes (a check's families and shapes) has length ``T``."""
    token = _LENGTH.set(T)
    try:
        yield
    finally:
        _LENGTH.reset(token)


# Where a head runs only when d_k = d_v = d (a .view(B, T, d) of a projection), its checks are run again there:
# every case made by make_case then has both head widths equal to the model width d (issue 30).
_SQUARE: ContextVar[bool] = ContextVar("square", default=False)


@contextlib.contextmanager
def at_model_width() -> Iterator[None]:
    """Within this block, every case :func:`make_case` makes has d_k = d_v = d (its d, T, B and seed kept)."""
    token = _SQUARE.set(True)
    try:
        yield
    finally:
        _SQUARE.reset(token)


def check_seed(base: int, check_id: str, salt: int = 0) -> int:
    """A per-check seed derived from the base seed and the check's id (stable across runs)."""
    digest = hashlib.sha256(f"{base}:{check_id}:{salt}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@dataclass(frozen=True)
class Case:
    """One input to the head: X (B, T, d) and the three projections."""

    X: torch.Tensor
    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    shape: Shape
    seed: int
    params: tuple[tuple[str, float | int | bool | str], ...] = ()

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"X": self.X, "W_Q": self.W_Q, "W_K": self.W_K, "W_V": self.W_V}

    def to(self, dtype: torch.dtype) -> Case:
        X, W_Q, W_K, W_V = (t.to(dtype) for t in (self.X, self.W_Q, self.W_K, self.W_V))
        return Case(X, W_Q, W_K, W_V, self.shape, self.seed, self.params)

    def with_X(self, X: torch.Tensor) -> Case:
        return Case(X, self.W_Q, self.W_K, self.W_V, self.shape, self.seed, self.params)

    def counterexample(self, base_seed: int, **extra: float | int | bool | str) -> Counterexample:
        return Counterexample(
            shape=self.shape.as_dict(),
            dtype=dtype_name(self.X.dtype),
            seed=base_seed,
            params={**dict(self.params), **extra},
        )


def make_case(
    shape: Shape, *, seed: int, dtype: torch.dtype = torch.float64, x_scale: float = 1.0, w_scale: float = 1.0
) -> Case:
    """X ~ N(0, x_scale^2); W ~ N(0, w_scale^2 / d), so scores stay O(1) unless scaled up on purpose
    (``shape``'s length replaced inside :func:`at_length`)."""
    if (T := _LENGTH.get()) is not None:
        shape = dataclasses.replace(shape, T=T)
    if _SQUARE.get():
        shape = dataclasses.replace(shape, d_k=shape.d, d_v=shape.d)
    g = torch.Generator().manual_seed(seed)
    s = shape
    X = torch.randn(s.B, s.T, s.d, generator=g, dtype=torch.float64) * x_scale
    std = w_scale / math.sqrt(s.d)
    W_Q = torch.randn(s.d, s.d_k, generator=g, dtype=torch.float64) * std
    W_K = torch.randn(s.d, s.d_k, generator=g, dtype=torch.float64) * std
    W_V = torch.randn(s.d, s.d_v, generator=g, dtype=torch.float64) * std
    params: tuple[tuple[str, float | int | bool | str], ...] = ()
    if x_scale != 1.0:
        params += (("x_scale", x_scale),)
    if w_scale != 1.0:
        params += (("w_scale", w_scale),)
    return Case(X.to(dtype), W_Q.to(dtype), W_K.to(dtype), W_V.to(dtype), shape, seed, params)


def family_cases(
    base_seed: int,
    check_id: str,
    families: tuple[Shape, ...] = FAMILIES,
    *,
    dtype: torch.dtype = torch.float64,
    **kw: float,
) -> Iterator[Case]:
    """One seeded case per shape family, smallest first (a check's ``Ctx.cases``)."""
    for k, shape in enumerate(families):
        yield make_case(shape, seed=check_seed(base_seed, check_id, k), dtype=dtype, **kw)


def simple_cases(*, seed: int, dtype: torch.dtype = torch.float64) -> list[Case]:
    """Hand-checkable inputs of the kind Hypothesis-style shrinking favours, smallest first: an all-zero
    first token (its query and key are 0, so every score in its row is 0), a zero token in the middle,
    repeated tokens, one-hot tokens, and d_k = 1. A mask derived from score values (``scores == 0``) is
    wrong on exactly these."""
    cases = []
    specs: tuple[tuple[Shape, str], ...] = (
        (Shape(1, 2, 2, 1, 1), "zero_first_token"),
        (Shape(1, 3, 3, 2, 2), "zero_first_token"),
        (Shape(2, 4, 3, 2, 3), "zero_middle_token"),
        (Shape(2, 4, 3, 2, 2), "repeated_tokens"),
        (Shape(2, 5, 5, 3, 2), "one_hot_tokens"),
        (Shape(2, 5, 4, 1, 3), "d_k_one"),
    )
    for k, (spec, kind) in enumerate(specs):
        base = make_case(spec, seed=seed + k)
        shape = base.shape  # the spec's, or its length replaced (at_length)
        X = base.X.clone()
        if kind == "zero_first_token":
            X[:, 0] = 0
        elif kind == "zero_middle_token":
            X[:, shape.T // 2] = 0
        elif kind == "repeated_tokens":
            X[:, 1:] = X[:, :1]
        elif kind == "one_hot_tokens":
            X = torch.eye(shape.d, dtype=torch.float64)[torch.arange(shape.T) % shape.d].expand(shape.B, -1, -1).clone()
        W_Q, W_K, W_V = (t.to(dtype) for t in (base.W_Q, base.W_K, base.W_V))
        cases.append(Case(X.to(dtype), W_Q, W_K, W_V, shape, base.seed, (("simple", kind),)))
    return cases
