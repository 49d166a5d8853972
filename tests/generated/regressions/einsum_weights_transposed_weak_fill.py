"""A head in einsum notation with a torch.where mask."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q = torch.einsum("btd,dk->btk", X, W_Q)
    k = torch.einsum("btd,dk->btk", X, W_K)
    v = torch.einsum("btd,dv->btv", X, W_V)
    scale = q.shape[-1] ** -0.5
    scores = torch.einsum("bik,bjk->bij", q, k) * scale
    if causal:
        T = X.shape[1]
        allowed = torch.ones(T, T, dtype=torch.bool, device=X.device).tril(-1)
        scores = torch.where(allowed, scores, -1e4)
    weights = scores.softmax(dim=-1)
    out = torch.einsum("bij,bjv->biv", weights, v)
    return out, weights.transpose(-2, -1)
