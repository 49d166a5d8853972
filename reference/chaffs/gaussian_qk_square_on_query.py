import math

import torch


def gaussian_positional_qk(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    Q = math.sqrt(2.0) * torch.stack([pos, -0.5 * pos**2], dim=-1) / bandwidth  # (T, 2)
    K = torch.stack([pos, torch.ones_like(pos)], dim=-1) / bandwidth  # (T, 2)
    return Q, K
