"""A head in einsum notation with a torch.where mask."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q = torch.einsum("btd,dk->btk", X, W_Q)
    k = torch.einsum("btd,dk->btk", X, W_K)
    v = torch.einsum("btd,dv->btv", X, W_V)
    scale = 1.0
    scores = torch.einsum("bik,bjk->bij", q, k) * scale
    if causal:
        T = X.shape[1]
        allowed = torch.ones(T, T, dtype=torch.bool, device=X.device).triu()
        scores = torch.where(allowed, scores, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = torch.einsum("bij,bjv->biv", weights, v)
    return out, weights
