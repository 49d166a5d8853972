import numpy as np
import torch


def score_scale_statistics(d_k, T=64, n_samples=200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Q = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64).numpy()  # (n, T, d_k)
    K = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64).numpy()  # (n, T, d_k)
    raw = Q @ K.transpose(0, 2, 1)  # (n, T, T)
    scaled = raw / np.sqrt(d_k)  # (n, T, T)
    ii, jj = np.tril_indices(T)  # causal entries j <= i

    def max_weight(S):
        S = np.where(np.tri(T, dtype=bool), S, -np.inf)  # (n, T, T)
        E = np.exp(S - S.max(axis=-1, keepdims=True))  # (n, T, T)
        return float(np.median((E / E.sum(axis=-1, keepdims=True)).max(axis=-1)))

    return {
        "raw_std": float(raw[:, ii, jj].std(ddof=1)),
        "scaled_std": float(scaled[:, ii, jj].std(ddof=1)),
        "raw_max_weight": max_weight(raw),
        "scaled_max_weight": max_weight(scaled),
    }
