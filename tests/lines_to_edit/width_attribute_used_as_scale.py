"""A book-style module that keeps the value width as ``self.d_out`` (rightly named) and scales the scores by its
square root: the line to edit is the use, not ``self.d_out = d_out``, which only passes the width on."""

import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_qk, d_out):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_qk, bias=False)
        self.W_key = nn.Linear(d_in, d_qk, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x, causal=True):
        n = x.shape[1]
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = queries @ keys.transpose(1, 2)
        if causal:
            future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
            scores = scores.masked_fill(future, -torch.inf)
        weights = torch.softmax(scores / self.d_out**0.5, dim=-1)
        return weights @ values, weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    module = CausalAttention(X.shape[-1], W_Q.shape[1], W_V.shape[1])
    params = {"W_query.weight": W_Q.T, "W_key.weight": W_K.T, "W_value.weight": W_V.T}
    return torch.func.functional_call(module, params, (X,), {"causal": causal})
