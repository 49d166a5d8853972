"""Attention for step 4.

Written by me, following the lecture.
"""

import torch
import torch.nn as nn
from torch.nn import functional as F

DROPOUT_RATE = 0.2


class SelfAttention(nn.Module):
    def __init__(self, embed_dim, head_dim, context, out_dim=None):
        super().__init__()
        self.value = nn.Linear(embed_dim, out_dim or head_dim, bias=False)
        self.key = nn.Linear(embed_dim, head_dim, bias=False)
        self.query = nn.Linear(embed_dim, head_dim, bias=False)
        self.register_buffer("causal_mask", torch.tril(torch.ones(context, context)))  # 1 = allowed
        self.dropout = nn.Dropout(DROPOUT_RATE)

    def forward(self, h):
        batch, seq, dim = h.shape
        v = self.value(h)
        q = self.query(h)
        k = self.key(h)
        # scores, then mask, then normalise
        s = q @ k.transpose(-2, -1) * dim**-0.5
        s = s.masked_fill(self.causal_mask[:seq, :seq] == 0, float("-inf"))
        s = F.softmax(s, dim=-1)
        s = self.dropout(s)
        y = s @ v
        return y, s


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    batch, seq, dim = X.shape
    attn = SelfAttention(dim, W_Q.shape[1], seq, W_V.shape[1])
    # weight matrices are stored transposed in nn.Linear
    return torch.func.functional_call(attn, {"value.weight": W_V.T, "query.weight": W_Q.T, "key.weight": W_K.T}, (X,))


def gaussian_positional_weights(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    lag = pos[:, None] - pos[None, :]  # (T, T), i - j
    logit = torch.where(lag == 0, 0.0, -0.5 * (lag / bandwidth) ** 2)  # (T, T)
    logit = logit.masked_fill(lag < 0, float("-inf"))  # (T, T)
    return torch.softmax(logit, dim=-1)


def gaussian_positional_qk(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    Q = 2.0**0.5 * torch.stack([pos, torch.ones_like(pos)], dim=-1) / bandwidth  # (T, 2)
    K = torch.stack([pos, -0.5 * pos**2], dim=-1) / bandwidth  # (T, 2)
    return Q, K


def score_scale_statistics(d_k, T=64, n_samples=200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Q = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)
    K = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)
    raw = Q @ K.transpose(-2, -1)  # (n, T, T)
    scaled = raw / d_k**0.5
    allowed = torch.ones(T, T, dtype=torch.bool).tril()

    def max_weight(S):
        A = torch.softmax(S.masked_fill(~allowed, float("-inf")), dim=-1)
        return torch.quantile(A.amax(dim=-1).flatten(), 0.5).item()

    return {
        "raw_std": raw[:, allowed].std().item(),
        "scaled_std": scaled[:, allowed].std().item(),
        "raw_max_weight": max_weight(raw),
        "scaled_max_weight": max_weight(scaled),
    }
