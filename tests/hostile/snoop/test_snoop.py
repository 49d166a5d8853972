"""The hostile submission's own tests: snoop in every run, and put the head's source in every failure.

On the correct head they pass (when nothing is found); on a chaff they fail with the chaff's source as
the message, in a test whose parametrized id is more of it: the grader must show none of that.
"""

import inspect

import attention_head
import pytest
import torch
from snoop import report

SOURCE = inspect.getsource(attention_head)


def own_head(X, W_Q, W_K, W_V):
    T = X.shape[-2]
    scores = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / W_K.shape[-1] ** 0.5
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ (X @ W_V)


def test_snoop():
    line = report("student test")
    assert not line.startswith("FOUND"), line


@pytest.mark.parametrize("k", [0], ids=[SOURCE[:120]])
def test_against_own_head(k):
    g = torch.Generator().manual_seed(k)
    X = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    W = [torch.randn(4, 3, generator=g, dtype=torch.float64) for _ in range(3)]
    out, _ = attention_head.causal_self_attention(X, *W)
    assert torch.allclose(out, own_head(X, *W)), "LEAKED SOURCE:\n" + SOURCE
