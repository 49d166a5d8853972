"""Values never projected (X itself averaged) beside scores divided by d_k: a wrong scale first."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q = X @ W_Q
    k = X @ W_K
    v = X
    scores = q @ k.transpose(-2, -1) / k.shape[-1]
    if causal:
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
