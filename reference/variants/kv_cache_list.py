import math

import torch


class KVCache:
    def __init__(self):
        self._k = []  # t tensors (B, d_k)
        self._v = []  # t tensors (B, d_v)

    @property
    def keys(self):
        return torch.stack(self._k, dim=1) if self._k else None  # (B, t, d_k)

    @property
    def values(self):
        return torch.stack(self._v, dim=1) if self._v else None  # (B, t, d_v)

    def __len__(self):
        return len(self._k)

    def append(self, k, v):
        self._k.append(k)  # (B, d_k)
        self._v.append(v)  # (B, d_v)


def cached_attention_step(x_t, cache, W_Q, W_K, W_V):
    q = x_t @ W_Q  # (B, d_k)
    cache.append(x_t @ W_K, x_t @ W_V)
    s = torch.einsum("bk,btk->bt", q, cache.keys) / math.sqrt(q.shape[-1])  # (B, t)
    w = torch.softmax(s, dim=-1)  # (B, t)
    return torch.einsum("bt,btv->bv", w, cache.values)  # (B, d_v)
