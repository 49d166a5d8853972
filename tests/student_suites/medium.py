"""A medium suite: the simplex and the mask, nothing about scale, gradients or batches."""

import torch
from attention_head import causal_self_attention


def inputs():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(2, 4, 3, generator=g, dtype=torch.float64)
    W = torch.randn(3, 3, generator=g, dtype=torch.float64)
    return X, W, W.flip(0), W.flip(1)


def test_rows_sum_to_one():
    """Proposition 3.1."""
    _, w = causal_self_attention(*inputs())
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, dtype=torch.float64))


def test_upper_triangle_is_zero():
    """Definition 4.1."""
    _, w = causal_self_attention(*inputs())
    assert (w.triu(1) == 0).all()
