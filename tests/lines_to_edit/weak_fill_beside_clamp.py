"""A fill of -1e4 that only huge scores show, beside a clamp the ordinary probe shows (issue 35, item 1)."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if causal:
        T = X.shape[1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -1e4)
    weights = torch.softmax(scores, dim=-1).clamp(1e-6, 1.0)
    return weights @ v, weights
