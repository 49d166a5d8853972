"""The mask applied before the scale (as a book's chapter does), the scale inverted: times sqrt(d_k), and
dropout left on."""

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    queries, keys, values = X @ W_Q, X @ W_K, X @ W_V
    scores = queries @ keys.transpose(1, 2)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), -torch.inf)
    weights = torch.softmax(scores * keys.shape[-1] ** 0.5, dim=-1)
    weights = F.dropout(weights, p=0.1)
    return weights @ values, weights
