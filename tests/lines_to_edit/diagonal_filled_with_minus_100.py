"""Two mask mistakes at once: the diagonal hidden too (j >= i), and filled with -100 instead of -inf."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if causal:
        hidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(hidden, -100.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
