import torch


def gaussian_positional_weights(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    lag = pos[:, None] - pos[None, :]  # (T, T)
    logit = torch.where(lag == 0, 0.0, -0.5 * (lag / bandwidth) ** 2)  # (T, T)
    logit = logit.masked_fill(lag < 0, float("-inf"))  # (T, T)
    return torch.exp(logit)  # (T, T)
