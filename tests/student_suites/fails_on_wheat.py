"""A wrong test: it expects weights that fill the upper triangle (a misreading of Definition 4.1)."""

import torch
from attention_head import causal_self_attention


def test_rows_sum_to_one():
    X = torch.randn(1, 3, 2, dtype=torch.float64)
    W = torch.eye(2, dtype=torch.float64)
    _, w = causal_self_attention(X, W, W, W)
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 3, dtype=torch.float64))


def test_upper_triangle_is_used():
    X = torch.randn(1, 3, 2, dtype=torch.float64)
    W = torch.eye(2, dtype=torch.float64)
    _, w = causal_self_attention(X, W, W, W)
    assert w[0, 0, 1] > 0, "query 0 should see key 1"
