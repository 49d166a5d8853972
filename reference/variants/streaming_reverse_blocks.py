import math

import torch


def streaming_attention(Q, K, V, block_size, causal=True):
    B, T, d_k = Q.shape
    dtype = Q.dtype
    Q, K, V = (t.to(torch.promote_types(dtype, torch.float32)) for t in (Q, K, V))  # (B, T, *)
    m = torch.full((B, T, 1), float("-inf"), dtype=Q.dtype, device=Q.device)  # (B, T, 1)
    denom = torch.zeros(B, T, 1, dtype=Q.dtype, device=Q.device)  # (B, T, 1)
    acc = torch.zeros(B, T, V.shape[-1], dtype=Q.dtype, device=Q.device)  # (B, T, d_v)
    rows = torch.arange(T, device=Q.device)[:, None]  # (T, 1)
    starts = list(range(0, T, block_size))
    for start in reversed(starts):  # last block first: early rows start fully masked
        stop = min(start + block_size, T)
        s = Q @ K[:, start:stop].transpose(-2, -1) / math.sqrt(d_k)  # (B, T, b)
        if causal:
            future = torch.arange(start, stop, device=Q.device)[None, :] > rows  # (T, b)
            s = s.masked_fill(future, float("-inf"))  # (B, T, b)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (B, T, 1)
        safe = torch.isfinite(m_new)  # (B, T, 1), False while a row has seen nothing
        m_use = torch.where(safe, m_new, torch.zeros_like(m_new))  # (B, T, 1)
        alpha = torch.where(safe, torch.exp(m - m_use), torch.zeros_like(m))  # (B, T, 1)
        p = torch.exp(s - m_use)  # (B, T, b)
        denom = alpha * denom + p.sum(dim=-1, keepdim=True)  # (B, T, 1)
        acc = alpha * acc + p @ V[:, start:stop]  # (B, T, d_v)
        m = m_new
    return (acc / denom).to(dtype)  # (B, T, d_v)
