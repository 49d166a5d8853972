"""A module that keeps its scale as an attribute set in ``__init__`` and scales the queries in ``forward``; the
attribute is sqrt(d_k) where 1/sqrt(d_k) belongs (a minus sign left out of the exponent)."""

import torch
from torch import nn


class SingleHead(nn.Module):
    def __init__(self, W_Q, W_K, W_V):
        super().__init__()
        self.W_Q, self.W_K, self.W_V = W_Q, W_K, W_V
        self.scale = W_Q.shape[1] ** 0.5

    def forward(self, x, causal=True):
        q, k, v = x @ self.W_Q, x @ self.W_K, x @ self.W_V
        q = q * self.scale
        att = q @ k.transpose(-2, -1)
        if causal:
            T = x.shape[1]
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        att = att.softmax(dim=-1)
        return att @ v, att


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    return SingleHead(W_Q, W_K, W_V)(X, causal=causal)
