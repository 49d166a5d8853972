import math

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q = X @ W_Q  # (B, T, d_k)
    k = X @ W_K  # (B, T, d_k)
    v = X @ W_V  # (B, T, d_v)
    outs, rows = [], []
    for i in range(T):
        n = i + 1 if causal else T  # keys query i may read
        s = (q[:, i : i + 1] @ k[:, :n].transpose(-2, -1)) / math.sqrt(d_k)  # (B, 1, n)
        w = torch.softmax(s, dim=-1)  # (B, 1, n)
        outs.append(w @ v[:, :n])  # (B, 1, d_v)
        rows.append(F.pad(w, (0, T - n)))  # (B, 1, T), exact zeros after column n
    return torch.cat(outs, dim=1), torch.cat(rows, dim=1)  # (B, T, d_v), (B, T, T)
