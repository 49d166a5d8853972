import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q = X @ W_Q  # (B, T, d_k)
    k = X @ W_K  # (B, T, d_k)
    v = X @ W_V  # (B, T, d_v)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)  # (B, T, T)
    if causal:
        future = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)  # (T, T)
        att = att.masked_fill(future, float("-inf"))  # (B, T, T)
    weights = torch.softmax(att, dim=-1).detach()  # (B, T, T), kept for plotting
    return weights @ v, weights
