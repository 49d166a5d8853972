"""Weights clamped to [1e-6, 1] after the softmax (issue 35.4): a clamp, not float32 arithmetic."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if causal:
        T = X.shape[1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1).clamp(1e-6, 1.0)
    return weights @ v, weights
