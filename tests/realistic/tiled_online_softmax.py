"""Tiled causal attention with an online softmax (the streaming identity of Section 8.1, FlashAttention's
blocking): keys and values are visited BLOCK columns at a time with a running row max, a rescaled
denominator and a rescaled numerator kept in float32 or wider; the weights are rebuilt at the end from the
full scores and the final statistics."""

import math

import torch

BLOCK = 4


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    acc_dtype = torch.promote_types(X.dtype, torch.float32)
    Q, K, V = ((X @ W).to(acc_dtype) for W in (W_Q, W_K, W_V))  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
    B, T, d_k = Q.shape
    scale = 1.0 / math.sqrt(d_k)
    rows = torch.arange(T, device=X.device)
    m = torch.full((B, T, 1), float("-inf"), dtype=acc_dtype, device=X.device)  # running row max
    denom = torch.zeros((B, T, 1), dtype=acc_dtype, device=X.device)  # running denominator
    acc = torch.zeros((B, T, V.shape[-1]), dtype=acc_dtype, device=X.device)  # running numerator
    for start in range(0, T, BLOCK):
        stop = min(start + BLOCK, T)
        s = Q @ K[:, start:stop].transpose(1, 2) * scale  # (B, T, stop - start)
        if causal:
            s = s.masked_fill(torch.arange(start, stop, device=X.device)[None, :] > rows[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        alpha = torch.exp(m - m_new)  # rescales the old accumulators; exp(-inf) = 0 on the first block
        p = torch.exp(s - m_new)
        denom = denom * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:stop]
        m = m_new
    S = Q @ K.transpose(1, 2) * scale  # (B, T, T)
    if causal:
        S = S.masked_fill(rows[None, :] > rows[:, None], float("-inf"))
    weights = torch.exp(S - m) / denom
    return (acc / denom).to(X.dtype), weights.to(X.dtype)


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
