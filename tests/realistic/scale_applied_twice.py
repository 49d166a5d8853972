"""The scores divided by sqrt(d_k) where they are made, and again after the mask: scaled twice, by 1/d_k in all."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    d_k = W_K.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if causal:
        T = X.shape[-2]
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=X.device), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    scores = scores / math.sqrt(d_k)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


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
