import math

import torch


def cached_attention_step(x_t, cache, W_Q, W_K, W_V):
    d_k = W_Q.shape[1]
    q = x_t @ W_Q  # (B, d_k)
    k = (x_t @ W_K)[:, None]  # (B, 1, d_k)
    v = (x_t @ W_V)[:, None]  # (B, 1, d_v)
    keys = k if cache.keys is None else torch.cat([cache.keys, k], dim=1)  # (B, t, d_k)
    values = v if cache.values is None else torch.cat([cache.values, v], dim=1)  # (B, t, d_v)
    s = (q[:, None, :] @ keys.transpose(-2, -1)) / math.sqrt(d_k)  # (B, 1, t)
    w = torch.softmax(s, dim=-1)  # (B, 1, t)
    return (w @ values)[:, 0]  # (B, d_v)
