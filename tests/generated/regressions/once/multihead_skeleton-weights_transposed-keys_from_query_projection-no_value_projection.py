"""The course's multi-head self-attention skeleton (padding mask, head axis), used with one head."""

import math

import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v, n_heads=1, dropout=0.0):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_k // n_heads
        self.d_value = d_v // n_heads
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_v, bias=False)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, x, attention_mask=None, causal=True):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T, d_head)
        k = self.k_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T, d_head)
        v = x.view(B, T, self.n_heads, self.d_value).transpose(1, 2)  # (B, h, T, d_value)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_head)  # (B, h, T, T)
        if attention_mask is not None:
            scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        if causal:
            future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
            scores = scores.masked_fill(future, float("-inf"))
        attn = torch.softmax(scores, dim=-1)  # (B, h, T, T)
        attn = self.attn_dropout(attn)
        out = torch.matmul(attn, v)  # (B, h, T, d_value)
        out = out.transpose(1, 2).reshape(B, T, self.n_heads * self.d_value)
        return out, attn


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, d = X.shape
    mha = MultiHeadSelfAttention(d, W_Q.shape[1], W_V.shape[1], n_heads=1, dropout=0.0)
    params = {"q_proj.weight": W_Q.T, "k_proj.weight": W_Q.T, "v_proj.weight": W_V.T}
    attention_mask = torch.ones(B, T, dtype=torch.long, device=X.device)  # no padding
    out, attn = torch.func.functional_call(mha, params, (X,), {"attention_mask": attention_mask, "causal": causal})
    return out, attn[:, 0].transpose(-2, -1)
