"""The scale left out, and the future keys filled with -100 instead of -inf."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1)
    if causal:
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, -100.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
