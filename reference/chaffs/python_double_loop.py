import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    d_k = W_Q.shape[1]
    q = X @ W_Q  # (B, T, d_k)
    k = X @ W_K  # (B, T, d_k)
    v = X @ W_V  # (B, T, d_v)
    rows = []
    for i in range(T):
        row = []
        for j in range(T):
            if causal and j > i:
                row.append(torch.full((B,), float("-inf"), dtype=X.dtype, device=X.device))  # (B,)
            else:
                row.append((q[:, i] * k[:, j]).sum(-1) / math.sqrt(d_k))  # (B,)
        rows.append(torch.stack(row, dim=-1))  # (B, T)
    att = torch.softmax(torch.stack(rows, dim=1), dim=-1)  # (B, T, T)
    return att @ v, att
