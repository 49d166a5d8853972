import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q = X @ W_Q  # (B, T, d_k)
    k = X @ W_K  # (B, T, d_k)
    v = X @ W_V  # (B, T, d_v)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)  # (B, T, T)
    att = torch.softmax(att, dim=-1)  # (B, T, T)
    if causal:
        att = att * torch.ones(T, T, dtype=att.dtype, device=X.device).tril()  # (B, T, T)
        att = att / att.sum(dim=-1, keepdim=True)  # (B, T, T)
    return att @ v, att
