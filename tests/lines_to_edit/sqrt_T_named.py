"""Scores scaled by 1/sqrt(T): T is right where it is made (the mask reads it too), its use is what is wrong."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    T = X.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(T)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
