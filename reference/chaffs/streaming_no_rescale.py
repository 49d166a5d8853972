import math

import torch


def streaming_attention(Q, K, V, block_size, causal=True):
    B, T, d_k = Q.shape
    dtype = Q.dtype
    work = torch.promote_types(dtype, torch.float32)
    Q, K, V = Q.to(work), K.to(work), V.to(work)  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
    rows = torch.arange(T, device=Q.device)[:, None]  # (T, 1)
    m = Q.new_full((B, T, 1), float("-inf"))  # (B, T, 1)
    denom = Q.new_zeros((B, T, 1))  # (B, T, 1)
    acc = Q.new_zeros((B, T, V.shape[-1]))  # (B, T, d_v)
    for start in range(0, T, block_size):
        kb = K[:, start : start + block_size]  # (B, b, d_k)
        vb = V[:, start : start + block_size]  # (B, b, d_v)
        s = (Q @ kb.transpose(-2, -1)) / math.sqrt(d_k)  # (B, T, b)
        if causal:
            cols = torch.arange(start, start + kb.shape[1], device=Q.device)[None, :]  # (1, b)
            s = s.masked_fill(cols > rows, float("-inf"))  # (B, T, b)
        m = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (B, T, 1)
        p = torch.exp(s - m)  # (B, T, b)
        denom = denom + p.sum(dim=-1, keepdim=True)  # (B, T, 1)
        acc = acc + p @ vb  # (B, T, d_v)
    return (acc / denom).to(dtype)  # (B, T, d_v)
