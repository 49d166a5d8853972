"""A property-based suite written with Hypothesis: the theorems of Lecture 4 as properties over shapes.

Hypothesis draws the shapes and a seed; the tensors come from a seeded torch.Generator, so every example
can be replayed. It checks the simplex, the mask, causality and the scale, but nothing about batches or
gradients.
"""

import math

import torch
from attention_head import causal_self_attention
from hypothesis import given, settings
from hypothesis import strategies as st

shapes = st.tuples(
    st.integers(1, 3),  # B
    st.integers(1, 6),  # T
    st.integers(1, 5),  # d
    st.integers(1, 4),  # d_k
    st.integers(1, 4),  # d_v
)
seeds = st.integers(0, 2**16)


def inputs(shape, seed):
    B, T, d, d_k, d_v = shape
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    W_Q = torch.randn(d, d_k, generator=g, dtype=torch.float64)
    W_K = torch.randn(d, d_k, generator=g, dtype=torch.float64)
    W_V = torch.randn(d, d_v, generator=g, dtype=torch.float64)
    return X, W_Q, W_K, W_V


@settings(max_examples=30, deadline=None)
@given(shapes, seeds)
def test_rows_lie_in_the_simplex(shape, seed):
    """Proposition 3.1: weights >= 0 and every row sums to 1."""
    _, w = causal_self_attention(*inputs(shape, seed))
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:2], dtype=torch.float64))


@settings(max_examples=30, deadline=None)
@given(shapes, seeds)
def test_strict_upper_triangle_is_zero(shape, seed):
    """Definition 4.1: query i never attends to a key j > i."""
    _, w = causal_self_attention(*inputs(shape, seed))
    assert (w.triu(1) == 0).all()


@settings(max_examples=30, deadline=None)
@given(shapes, seeds, st.data())
def test_future_does_not_change_the_past(shape, seed, data):
    """Proposition 4.3: changing rows t.. of X leaves output rows ..t-1 unchanged."""
    X, W_Q, W_K, W_V = inputs(shape, seed)
    t = data.draw(st.integers(0, X.shape[1] - 1), label="t")
    Y = X.clone()
    Y[:, t:] += 1.0
    out_x, _ = causal_self_attention(X, W_Q, W_K, W_V)
    out_y, _ = causal_self_attention(Y, W_Q, W_K, W_V)
    torch.testing.assert_close(out_x[:, :t], out_y[:, :t], rtol=0, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(shapes, seeds)
def test_matches_the_formula(shape, seed):
    """Definition 2.2 and Lemma 5.5: softmax(Q K^T / sqrt(d_k)) V, written out by hand."""
    X, W_Q, W_K, W_V = inputs(shape, seed)
    T, d_k = X.shape[1], W_Q.shape[1]
    scores = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(d_k)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    expected = torch.softmax(scores, dim=-1)
    out, w = causal_self_attention(X, W_Q, W_K, W_V)
    torch.testing.assert_close(w, expected)
    torch.testing.assert_close(out, expected @ (X @ W_V))
