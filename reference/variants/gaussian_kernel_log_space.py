import math

import torch


def gaussian_positional_weights(T, bandwidth):
    i = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    j = torch.arange(T, dtype=torch.float64)[None, :]  # (1, T)
    if bandwidth == 0:
        return torch.eye(T, dtype=torch.float64)  # (T, T), the h -> 0 limit
    z = (i - j) / (math.sqrt(2.0) * bandwidth)  # (T, T)
    logk = torch.where(j <= i, -(z**2), float("-inf"))  # (T, T)
    return torch.exp(logk - torch.logsumexp(logk, dim=-1, keepdim=True))  # (T, T)
