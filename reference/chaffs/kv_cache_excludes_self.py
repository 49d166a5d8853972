import math

import torch


def cached_attention_step(x_t, cache, W_Q, W_K, W_V):
    d_k = W_Q.shape[1]
    q = x_t @ W_Q  # (B, d_k)
    k = x_t @ W_K  # (B, d_k)
    v = x_t @ W_V  # (B, d_v)
    if len(cache) == 0:
        out = v  # (B, d_v), the first position has nothing else to read
    else:
        s = (q[:, None, :] @ cache.keys.transpose(-2, -1)) / math.sqrt(d_k)  # (B, 1, t)
        w = torch.softmax(s, dim=-1)  # (B, 1, t)
        out = (w @ cache.values)[:, 0]  # (B, d_v)
    cache.append(k, v)
    return out
