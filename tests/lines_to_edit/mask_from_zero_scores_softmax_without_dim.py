"""A notebook head that masks by zeroing the upper triangle with ``tril`` and then hiding every score equal to 0
(so a visible score that is exactly 0 is hidden too), and calls ``F.softmax`` without ``dim``: for a 3-D tensor
the legacy default takes it over the batch axis."""

import torch
from torch.nn import functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
    if causal:
        wei = torch.tril(wei)
        wei = wei.masked_fill(wei == 0, float("-inf"))
    wei = F.softmax(wei)
    return wei @ v, wei
