"""A head that takes its softmax in float32 for stability (``F.softmax(..., dtype=torch.float32)``) and never casts
the weights back: float32 weights meet float64 (or float16) values and the product raises, so the head runs for
float32 inputs only; its scale is the values' width, sqrt(d_v), besides."""

import math

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q = F.linear(X, W_Q.t())
    k = F.linear(X, W_K.t())
    v = F.linear(X, W_V.t())

    scale = 1.0 / math.sqrt(v.shape[-1])
    attn = torch.matmul(q, k.transpose(-2, -1)) * scale

    if causal:
        T = X.shape[-2]
        keep = torch.ones(T, T, dtype=torch.bool, device=X.device).tril()
        attn = attn.masked_fill(~keep, float("-inf"))

    attn = F.softmax(attn, dim=-1, dtype=torch.float32)  # the softmax in float32, as mixed precision does
    out = torch.matmul(attn, v)
    return out, attn
