"""Shapes only: runs the head and looks at nothing but the sizes of what comes back."""

import torch
from attention_head import causal_self_attention


def test_shapes():
    X = torch.randn(2, 5, 4, dtype=torch.float64)
    out, w = causal_self_attention(
        X,
        torch.randn(4, 3, dtype=torch.float64),
        torch.randn(4, 3, dtype=torch.float64),
        torch.randn(4, 6, dtype=torch.float64),
    )
    assert out.shape == (2, 5, 6)
    assert w.shape == (2, 5, 5)
