"""A 0/1 mask multiplied out: s * keep + (1 - keep) * -inf, where 0 * -inf is NaN on every kept entry (issue 35.12)."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if causal:
        T = X.shape[1]
        keep = torch.tril(torch.ones(T, T, dtype=X.dtype, device=X.device))
        scores = scores * keep + (1 - keep) * float("-inf")
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
