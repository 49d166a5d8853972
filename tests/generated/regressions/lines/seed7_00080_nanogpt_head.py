"""One head of self-attention, as in the build-a-GPT tutorial, wrapped to the course's contract."""

import torch
import torch.nn as nn
from torch.nn import functional as F

dropout = 0.0


class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, n_embd, head_size, value_size, block_size, causal=True):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, value_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size), diagonal=-1))
        self.dropout = nn.Dropout(dropout)
        self.causal = causal

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B, T, hs)
        q = self.query(x)  # (B, T, hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
        wei = F.softmax(wei, dim=-1)  # (B, T, T)
        wei = self.dropout(wei)
        v = self.value(x)  # (B, T, vs)
        out = wei @ v  # (B, T, T) @ (B, T, vs) -> (B, T, vs)
        return out, wei


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, C = X.shape
    head = Head(C, W_Q.shape[1], W_V.shape[1], T, causal)
    # nn.Linear computes x @ weight.T, so the projections go in transposed
    params = {"query.weight": W_Q.T, "key.weight": W_Q.T, "value.weight": W_V.T}
    return torch.func.functional_call(head, params, (X,))
