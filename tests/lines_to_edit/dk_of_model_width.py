"""d_k read off the model width X.shape[-1] on one line, used to scale the scores on the next (issue 36.4)."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    d_k = X.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if causal:
        T = X.shape[1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
