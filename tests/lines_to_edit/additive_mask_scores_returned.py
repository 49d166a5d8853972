"""A BERT-style head: the mask is turned into an additive one with ``(1.0 - mask) * -10000.0`` (a finite constant,
weak at large scores), and the helper returns the masked scores instead of the probabilities as the weights. Two
mistakes: the weights returned are the scores, and the fill is -1e4."""

import math

import torch


def extended_mask(mask, dtype):
    mask = mask.to(dtype)
    return (1.0 - mask) * -10000.0


def attend(q, k, v, mask):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, scores


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    mask = extended_mask(torch.tril(torch.ones(T, T, device=X.device)), X.dtype) if causal else None
    return attend(X @ W_Q, X @ W_K, X @ W_V, mask)
