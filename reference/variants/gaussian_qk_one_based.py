import math

import torch


def gaussian_positional_qk(T, bandwidth):
    pos = torch.arange(1, T + 1, dtype=torch.float64)  # (T,), positions 1..T
    h2 = bandwidth**2
    Q = torch.stack([math.sqrt(2.0) * pos / h2, torch.full_like(pos, math.sqrt(2.0))], dim=-1)  # (T, 2)
    K = torch.stack([pos, -(pos**2) / (2 * h2)], dim=-1)  # (T, 2)
    return Q, K
