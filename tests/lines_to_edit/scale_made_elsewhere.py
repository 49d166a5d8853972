"""A scale computed on its own line as 1/d_k and used on the next (issue 35.2): the line that makes it."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scale = q.shape[-1] ** -1
    scores = q @ k.transpose(-2, -1) * scale
    if causal:
        T = X.shape[1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
