# ruff: noqa: F821
"""Imports torch.nn.functional as f, then uses F at module level: the import raises NameError (issue 35.10)."""

import math

import torch
import torch.nn.functional as f  # noqa: F401

softmax = F.softmax


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if causal:
        T = X.shape[1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights
