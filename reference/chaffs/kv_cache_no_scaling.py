import torch


def cached_attention_step(x_t, cache, W_Q, W_K, W_V):
    q = x_t @ W_Q  # (B, d_k)
    cache.append(x_t @ W_K, x_t @ W_V)  # (B, t, d_k), (B, t, d_v)
    s = q[:, None, :] @ cache.keys.transpose(-2, -1)  # (B, 1, t)
    w = torch.softmax(s, dim=-1)  # (B, 1, t)
    return (w @ cache.values)[:, 0]  # (B, d_v)
