import math

import torch


def score_scale_statistics(d_k, T=64, n_samples=200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Q = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)  # (n, T, d_k)
    K = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)  # (n, T, d_k)
    raw = Q @ K.transpose(-2, -1)  # (n, T, T)
    scaled = raw / math.sqrt(d_k)  # (n, T, T)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)

    def max_weight(S):
        A = torch.softmax(S.masked_fill(~allowed, float("-inf")), dim=-1)  # (n, T, T)
        return torch.quantile(A.amax(dim=-1).flatten(), 0.5).item()

    return {
        "raw_std": raw[:, allowed].var().item(),
        "scaled_std": scaled[:, allowed].var().item(),
        "raw_max_weight": max_weight(raw),
        "scaled_max_weight": max_weight(scaled),
    }
