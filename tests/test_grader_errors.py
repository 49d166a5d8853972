"""Heads on which the grader's own code raised (issue 52's bench, seed 52): graded again, the diagnosis finishes.

tests/conftest.py fails any test during which the diagnosis raised, so grading each head is the assertion; what the
diagnosis names is pinned by the bench, not here.
"""

from __future__ import annotations

from typing import Any

import pytest

from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

HEADS = {
    # a fill of 0.0 bound to a name on its own line: the search for the line that made a wrong number divided by it
    "zero_fill_named": """
import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ K.transpose(-2, -1) / K.shape[-1] ** 0.5
    fill = 0.0
    if causal:
        T = X.shape[1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, fill)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
""",
    # runs at T = 1 only (a transposed einsum makes every longer call raise): the probes at its length had no second
    # token to zero
    "runs_at_one_length_only": """
import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q = torch.einsum("bsd,dh->bsh", X, W_Q)
    k = torch.einsum("bsd,dh->bsh", X, W_V)
    v = torch.einsum("bsd,dv->bsv", X, W_K)
    sim = torch.einsum("bth,btk->bhk", q, k) * q.shape[-1] ** -0.5
    keep = torch.ones(T, T, dtype=torch.bool, device=X.device).tril()
    sim = torch.where(keep, sim, float("-inf"))
    attn = sim.softmax(dim=-1)
    return torch.einsum("bqk,bkv->bqv", attn, v), attn
""",
}


@pytest.mark.parametrize("name", sorted(HEADS))
def test_the_diagnosis_finishes(name: str, rubric: Rubric, pool: WorkerPool, write_head: Any) -> None:
    result = grade(write_head(HEADS[name]), rubric, pool=pool, visuals=False, parallel=False)
    assert result.diagnosis_error is None and result.diagnosis, name
