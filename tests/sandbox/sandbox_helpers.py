"""Helpers for the sandbox tests (imported by the test files; pytest puts this folder on sys.path)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.sandbox import Reply, Sandbox

HOSTILE = Path(__file__).resolve().parents[1] / "hostile"
FAKE_OPS = Path(__file__).resolve().with_name("fake_ops.py")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: only a root grader gives the worker its own uid")

OpenSandbox = Callable[..., Sandbox]


def call(sb: Sandbox, fn: str, *tensors: torch.Tensor, timeout_s: float | None = None, **kwargs: Any) -> Reply:
    """Call ``fn(*tensors, **kwargs)`` in the worker through the fake ops."""
    names = {f"a{i}": t for i, t in enumerate(tensors)}
    params = {"fn": fn, "args": list(names), "kwargs": kwargs}
    return sb.request("call", params, names, timeout_s=timeout_s)


def head_inputs(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """X (2, 5, 8) and three (8, 4) projections, float64, from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(2, 5, 8, generator=g, dtype=torch.float64)
    return (X, *(torch.randn(8, 4, generator=g, dtype=torch.float64) for _ in range(3)))


def reference_head(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor) -> torch.Tensor:
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ K.transpose(-2, -1) / K.shape[-1] ** 0.5
    T = X.shape[-2]
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
