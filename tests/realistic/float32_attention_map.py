"""Attention head that also returns its attention map for plotting, the map taken as a float32 softmax (as
mixed-precision code does) and never cast back; the output, computed in the input dtype by its own path, is
always causal (the flag reaches only the map)."""

import math

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
    future = torch.tril(torch.ones(T, T, device=X.device)) == 0  # (T, T)
    att = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(k.size(-1)))  # (B, T, T)
    y = F.softmax(att.masked_fill(future, float("-inf")), dim=-1) @ v  # (B, T, d_v)
    if causal:
        att = att.masked_fill(future, float("-inf"))
    att = F.softmax(att.float(), dim=-1)  # the map, for plotting
    return y, att


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
