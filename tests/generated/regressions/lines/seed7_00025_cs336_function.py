"""Scaled dot-product attention with its own softmax, as a CS336-style assignment writes it."""

import math

import torch
from torch import Tensor


def softmax(x: Tensor, dim: int) -> Tensor:
    x_max = x.max(dim=dim, keepdim=True).values
    x_exp = torch.exp(x - x_max)
    return x_exp / x_exp.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None = None):
    d_k = Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., queries, keys)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ V, weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[-2]
    Q = X @ W_Q
    K = X @ W_K
    V = X @ W_V
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=X.device))
    return scaled_dot_product_attention(Q, K, V, mask)
