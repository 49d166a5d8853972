"""An eager-attention function given its scale by the module that calls it, the module's ``self.scaling`` made
from the model width d where the key width d_k belongs."""

import torch
from torch import nn


def eager_attention(query, key, value, additive_mask, scaling):
    weights = torch.matmul(query, key.transpose(-2, -1)) * scaling
    if additive_mask is not None:
        weights = weights + additive_mask
    weights = nn.functional.softmax(weights, dim=-1)
    return torch.matmul(weights, value), weights


class Attention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.scaling = hidden_size**-0.5

    def forward(self, q, k, v, additive_mask):
        return eager_attention(q, k, v, additive_mask, self.scaling)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    mask = None
    if causal:
        mask = torch.full((T, T), float("-inf"), dtype=X.dtype, device=X.device).triu(1)
    return Attention(X.shape[-1])(X @ W_Q, X @ W_K, X @ W_V, mask)
