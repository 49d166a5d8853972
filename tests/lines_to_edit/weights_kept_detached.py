"""The walkthrough Head keeping its softmax rows as self.last_attn = wei.detach() and returning them (written for
the grader by someone who had not read it)."""

import torch
import torch.nn as nn
from torch.nn import functional as F

dropout = 0.0


class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, n_embd, head_size, value_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, value_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, causal=True):
        B, T, C = x.shape
        k = self.key(x)  # (B,T,hs)
        q = self.query(x)  # (B,T,hs)
        # compute attention scores ("affinities")
        wei = q @ k.transpose(-2, -1) * C**-0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        if causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
        wei = F.softmax(wei, dim=-1)  # (B, T, T)
        self.last_attn = wei.detach()
        wei = self.dropout(wei)
        # perform the weighted aggregation of the values
        v = self.value(x)  # (B,T,hs)
        out = wei @ v  # (B, T, T) @ (B, T, hs) -> (B, T, hs)
        return out


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, d = X.shape
    head = Head(d, W_Q.shape[1], W_V.shape[1], block_size=T).to(X.dtype)
    params = {"query.weight": W_Q.t(), "key.weight": W_K.t(), "value.weight": W_V.t()}
    out = torch.func.functional_call(head, params, (X,), {"causal": causal})
    return out, head.last_attn
