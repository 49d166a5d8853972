import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q = torch.einsum("btd,dk->btk", X, W_Q)  # (B, T, d_k)
    k = torch.einsum("btd,dk->btk", X, W_K)  # (B, T, d_k)
    v = torch.einsum("btd,dv->btv", X, W_V)  # (B, T, d_v)
    att = torch.einsum("bik,bjk->bij", q, k) / math.sqrt(d_k)  # (B, T, T)
    if causal:
        future = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)  # (T, T)
        att = att.masked_fill(future, float("-inf"))  # (B, T, T)
    att = att.softmax(dim=-1)  # (B, T, T)
    return torch.einsum("bij,bjv->biv", att, v), att
