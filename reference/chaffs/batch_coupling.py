import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, d = X.shape
    d_k = W_Q.shape[1]
    x = X.reshape(B * T, d)  # (B*T, d)
    q = x @ W_Q  # (B*T, d_k)
    k = x @ W_K  # (B*T, d_k)
    v = x @ W_V  # (B*T, d_v)
    att = (q @ k.T) / math.sqrt(d_k)  # (B*T, B*T)
    if causal:
        future = torch.ones(B * T, B * T, dtype=torch.bool, device=X.device).triu(1)  # (B*T, B*T)
        att = att.masked_fill(future, float("-inf"))  # (B*T, B*T)
    att = torch.softmax(att, dim=-1)  # (B*T, B*T)
    out = (att @ v).reshape(B, T, -1)  # (B, T, d_v)
    blocks = att.reshape(B, T, B, T).diagonal(dim1=0, dim2=2).permute(2, 0, 1)  # (B, T, T)
    return out, blocks
