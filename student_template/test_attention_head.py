"""Tests for attention_head.py (Exercise 2): one test per lecture result, each naming its source.

Run them with `pytest` in this folder. The grader also runs them (check `student_tests`), not on your
head but on the instructor's: a correct head, which every test must pass, and a collection of heads
with one known bug each, of which your tests should reject as many as possible (some test fails).
The report then names each property that no test checked.

One example test is written; replace every `pytest.skip` with a real test. Good tests
- use small shapes (T <= 8) and seeded inputs, so they are fast and give the same result every run;
- assert one property of the lecture, with the tolerance the dtype allows (exact zeros where the
  lecture says "exactly", `torch.testing.assert_close` elsewhere);
- only use what the contract promises: the function names, shapes and dtypes in the README.
"""

from __future__ import annotations

import pytest
import torch
from attention_head import causal_self_attention


def make_inputs(
    B: int = 2, T: int = 5, d: int = 4, d_k: int = 3, d_v: int = 2, *, seed: int = 0, dtype=torch.float64
):
    """Seeded X (B, T, d), W_Q and W_K (d, d_k), W_V (d, d_v); keep d, d_k and d_v different."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(B, T, d, generator=g, dtype=dtype)  # (B, T, d)
    W_Q = torch.randn(d, d_k, generator=g, dtype=dtype)  # (d, d_k)
    W_K = torch.randn(d, d_k, generator=g, dtype=dtype)  # (d, d_k)
    W_V = torch.randn(d, d_v, generator=g, dtype=dtype)  # (d, d_v)
    return X, W_Q, W_K, W_V


def test_rows_are_probability_vectors():
    """Proposition 3.1: every weight is >= 0 and every row sums to one, masked or not."""
    X, W_Q, W_K, W_V = make_inputs()
    for causal in (True, False):
        _, weights = causal_self_attention(X, W_Q, W_K, W_V, causal=causal)  # (B, T, T)
        assert (weights >= 0).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5, dtype=torch.float64))


def test_strict_upper_triangle_is_zero():
    """Definition 4.1: with causal=True, weights[b, i, j] == 0 exactly for j > i; row 0 is (1, 0, ..., 0)."""
    pytest.skip("TODO: write this test")


def test_future_perturbation_leaves_earlier_outputs_unchanged():
    """Proposition 4.3: changing X[:, t:] (even by a lot) leaves out[:, :t] unchanged."""
    pytest.skip("TODO: write this test")


def test_future_input_gradients_are_zero():
    """Proposition 4.3: d out[:, i] / d X[:, j] is exactly zero for j > i (use torch.autograd.grad)."""
    pytest.skip("TODO: write this test")


def test_scores_are_divided_by_sqrt_d_k():
    """Lemma 5.5: compare with softmax(Q K^T / sqrt(d_k)) V written out for a tiny input (d != d_k)."""
    pytest.skip("TODO: write this test")


def test_unmasked_head_is_permutation_equivariant():
    """Theorem 6.1: with causal=False, permuting the rows of X permutes the rows of out the same way."""
    pytest.skip("TODO: write this test")


def test_batch_elements_are_independent():
    """Definition 2.2 applies per sequence: changing batch element 1 leaves element 0's outputs unchanged."""
    pytest.skip("TODO: write this test")


def test_large_scores_stay_finite():
    """Proposition 5.1: adding a constant to a row of scores changes nothing, so X scaled by 100 gives
    finite weights whose rows still sum to one and whose masked entries are still exactly zero."""
    pytest.skip("TODO: write this test")
