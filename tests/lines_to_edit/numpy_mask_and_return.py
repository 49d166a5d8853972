"""A NumPy head whose mask hides the diagonal too (made on one line, applied on the next) and whose weights are
returned transposed in the return statement itself (issue 35, item 6)."""

import numpy as np
import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    x = X.detach().cpu().numpy()
    q, k, v = x @ W_Q.detach().cpu().numpy(), x @ W_K.detach().cpu().numpy(), x @ W_V.detach().cpu().numpy()
    T = x.shape[1]
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(k.shape[-1])
    if causal:
        hidden = np.triu(np.ones((T, T), dtype=bool), k=0)
        scores = np.where(hidden, -1e30, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return torch.from_numpy(weights @ v), torch.from_numpy(weights.transpose(0, 2, 1))
