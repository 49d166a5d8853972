"""A course's multi-head skeleton with a padding mask, used with one head: the padding mask is built inside the head
as zeros (so `attention_mask == 0` fills every score with -1e9), the causal mask adds +1 to the future scores
instead of -inf, and dropout is left on."""

import math

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    q = (X @ W_Q).unsqueeze(1)  # (B, 1, T, d_k): one head
    k = (X @ W_K).unsqueeze(1)
    v = (X @ W_V).unsqueeze(1)
    attention_mask = torch.zeros(B, 1, 1, T, dtype=X.dtype)  # padding mask of the batch: none given
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(attention_mask == 0, -1e9)
    if causal:
        scores = scores + torch.triu(torch.ones(T, T, dtype=X.dtype), diagonal=1)
    weights = F.softmax(scores, dim=-1)
    weights = F.dropout(weights, p=0.1, training=True)
    out = torch.matmul(weights, v)
    return out.squeeze(1), weights.squeeze(1)


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
