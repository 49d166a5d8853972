"""d2l-style masked softmax (masked scores replaced by -1e6) with dropout, wrapped to the contract."""

import math

import torch
from torch import nn


def sequence_mask(X, valid_len, value=0.0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = self.dropout(masked_softmax(scores, valid_lens))
        return torch.bmm(self.attention_weights, values)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    attention = DotProductAttention(dropout=0.1)
    valid = torch.arange(1, T + 1, device=X.device).repeat(B, 1) if causal else None  # query i sees i + 1 keys
    out = attention(X @ W_Q, X @ W_K, X @ W_V, valid)
    return out, attention.attention_weights


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
