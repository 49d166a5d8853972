"""A module constant -1e6 passed to a helper that fills the future scores with it (issue 35.2)."""

import math

import torch

NEG = -1e6


def fill_future(scores, value):
    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
    return scores.masked_fill(future, value)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if causal:
        scores = fill_future(scores, NEG)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
