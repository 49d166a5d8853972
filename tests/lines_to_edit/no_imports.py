# ruff: noqa: F821
"""Imports nothing: the annotation torch.Tensor raises NameError when the module is imported (issue 35.10)."""


def causal_self_attention(X: torch.Tensor, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
