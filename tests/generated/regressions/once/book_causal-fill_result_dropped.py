"""Causal attention as built in a book's chapter on attention, wrapped to the course's contract."""

import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, d_value, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_value, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x, causal=True):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        attn_scores = queries @ keys.transpose(1, 2)
        if causal:
            attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = attn_weights @ values
        return context_vec, attn_weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    b, num_tokens, d_in = X.shape
    ca = CausalAttention(d_in, W_Q.shape[1], W_V.shape[1], num_tokens, dropout=0.0)
    params = {"W_query.weight": W_Q.T, "W_key.weight": W_K.T, "W_value.weight": W_V.T}
    return torch.func.functional_call(ca, params, (X,), {"causal": causal})
