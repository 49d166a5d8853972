"""A course-skeleton head that returns the scores it softmaxed (masked with -1e9) where the weights belong; the
output itself is right."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q = X @ W_Q
    k = X @ W_K
    v = X @ W_V
    att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
    if causal:
        T = X.shape[1]
        keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device))
        att = att.masked_fill(~keep, -1e9)
    weights = torch.softmax(att, dim=-1)
    out = weights @ v
    return out, att
