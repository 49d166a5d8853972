"""A strong suite: one test per lecture result, exact where the lecture is exact, large inputs too."""

import math

import torch
from attention_head import causal_self_attention

F64 = torch.float64


def make_inputs(B=2, T=5, d=4, d_k=3, d_v=2, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    X = scale * torch.randn(B, T, d, generator=g, dtype=F64)
    return X, *(torch.randn(d, n, generator=g, dtype=F64) for n in (d_k, d_k, d_v))


def by_hand(X, W_Q, W_K, W_V, causal=True):
    """Definition 2.2 written out: softmax(Q K^T / sqrt(d_k)) V with the causal mask of Definition 4.1."""
    T, d_k = X.shape[1], W_Q.shape[1]
    S = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(d_k)
    if causal:
        S = S.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    A = torch.softmax(S, dim=-1)
    return A @ (X @ W_V), A


def test_matches_formula_exactly_in_float64():
    """Definition 2.2 and Lemma 5.5, with d != d_k != d_v and a tight float64 tolerance."""
    X, W_Q, W_K, W_V = make_inputs()
    for causal in (True, False):
        out, w = causal_self_attention(X, W_Q, W_K, W_V, causal=causal)
        exp_out, exp_w = by_hand(X, W_Q, W_K, W_V, causal)
        assert out.dtype == F64 and w.dtype == F64
        torch.testing.assert_close(w, exp_w, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(out, exp_out, rtol=1e-12, atol=1e-14)


def test_rows_are_probability_vectors():
    """Proposition 3.1."""
    X, W_Q, W_K, W_V = make_inputs()
    for causal in (True, False):
        _, w = causal_self_attention(X, W_Q, W_K, W_V, causal=causal)
        assert (w >= 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 5, dtype=F64), rtol=0, atol=1e-12)


def test_strict_upper_triangle_is_exactly_zero():
    """Definition 4.1: exact zeros above the diagonal, row 0 is e_1."""
    X, W_Q, W_K, W_V = make_inputs()
    _, w = causal_self_attention(X, W_Q, W_K, W_V)
    assert (w.triu(1) == 0).all()
    assert (w[:, 0, 0] == 1).all()


def test_future_perturbation():
    """Proposition 4.3: a large change to X[:, t:] leaves out[:, :t] unchanged."""
    X, W_Q, W_K, W_V = make_inputs(T=6)
    out, _ = causal_self_attention(X, W_Q, W_K, W_V)
    for t in range(1, 6):
        Y = X.clone()
        Y[:, t:] += 1e3
        out2, _ = causal_self_attention(Y, W_Q, W_K, W_V)
        assert torch.equal(out2[:, :t], out[:, :t])


def test_future_gradients_are_zero_and_past_ones_match():
    """Proposition 4.3: d out_i / d X_j = 0 exactly for j > i; the gradients agree with the formula's."""
    X, W_Q, W_K, W_V = make_inputs()
    X.requires_grad_(True)
    W_Q.requires_grad_(True)
    out, _ = causal_self_attention(X, W_Q, W_K, W_V)
    for i in range(5):
        (g,) = torch.autograd.grad(out[:, i].sum(), X, retain_graph=True)
        assert (g[:, i + 1 :] == 0).all()
    exp_out, _ = by_hand(X, W_Q, W_K, W_V)
    got = torch.autograd.grad(out.sum(), (X, W_Q))
    exp = torch.autograd.grad(exp_out.sum(), (X, W_Q))
    for a, b in zip(got, exp, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_unmasked_head_is_permutation_equivariant():
    """Theorem 6.1."""
    X, W_Q, W_K, W_V = make_inputs()
    perm = torch.tensor([3, 0, 4, 1, 2])
    out, w = causal_self_attention(X, W_Q, W_K, W_V, causal=False)
    out_p, w_p = causal_self_attention(X[:, perm], W_Q, W_K, W_V, causal=False)
    torch.testing.assert_close(out_p, out[:, perm], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(w_p, w[:, perm][:, :, perm], rtol=1e-12, atol=1e-14)


def test_batch_elements_are_independent():
    """Definition 2.2 acts on each sequence separately."""
    X, W_Q, W_K, W_V = make_inputs(B=3)
    out, w = causal_self_attention(X, W_Q, W_K, W_V)
    out0, w0 = causal_self_attention(X[:1], W_Q, W_K, W_V)
    torch.testing.assert_close(out[:1], out0, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(w[:1], w0, rtol=1e-12, atol=1e-14)


def test_inputs_are_not_modified_and_result_is_deterministic():
    X, W_Q, W_K, W_V = make_inputs()
    copies = [t.clone() for t in (X, W_Q, W_K, W_V)]
    first = causal_self_attention(X, W_Q, W_K, W_V)
    second = causal_self_attention(X, W_Q, W_K, W_V)
    for t, c in zip((X, W_Q, W_K, W_V), copies, strict=True):
        assert torch.equal(t, c)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_large_scores_stay_finite_and_masked():
    """Proposition 5.1: shifting a row of scores changes nothing; huge scores must not overflow."""
    X, W_Q, W_K, W_V = make_inputs(scale=300.0)
    for causal in (True, False):
        out, w = causal_self_attention(X, W_Q, W_K, W_V, causal=causal)
        assert torch.isfinite(out).all() and torch.isfinite(w).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 5, dtype=F64), rtol=0, atol=1e-12)
        if causal:
            assert (w.triu(1) == 0).all()
