"""A function on one sequence (T, d), called for each sequence of the batch: its mask starts one place late
and its scores are divided by d_k."""

import torch


def attention_2d(x, w_q, w_k, w_v, causal=True):
    T = x.shape[0]
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (T, d_k), (T, d_k), (T, d_v)
    scores = q @ k.T / k.shape[1]  # (T, T)
    if causal:
        late = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=2)
        scores = scores.masked_fill(late, float("-inf"))
    a = torch.softmax(scores, dim=-1)  # (T, T)
    return a @ v, a


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    pairs = [attention_2d(X[b], W_Q, W_K, W_V, causal) for b in range(X.shape[0])]
    return torch.stack([o for o, _ in pairs]), torch.stack([a for _, a in pairs])
