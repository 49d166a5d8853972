"""A correct causal self-attention head (the control case)."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (B, T, d) x (d, d_k) -> (B, T, d_k)
    scores = Q @ K.transpose(-2, -1) / K.shape[-1] ** 0.5  # (B, T, T)
    if causal:
        T = X.shape[-2]
        future = ~torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def fail(X):
    """Raise an ordinary exception from two frames deep."""
    return _helper(X)


def _helper(X):
    raise ValueError("shapes do not line up")


def parallel_matmul(X):
    """Enough work for OpenMP to use its thread pool (fork-after-OpenMP regression)."""
    A = X.reshape(-1, X.shape[-1])
    return (A.T @ A).sum(dim=0, keepdim=True)


def info():
    """Where the worker runs: uid, cwd and the number of torch threads."""
    import os

    return torch.tensor([os.getuid(), torch.get_num_threads()]), os.getcwd()


def stdlib_imports():
    """Modules the zygote has not imported: pure-Python, packages and C extensions."""
    import cProfile  # noqa: F401
    import fractions  # noqa: F401
    import sqlite3  # noqa: F401
    import statistics
    import xml.dom.minidom  # noqa: F401

    return statistics.mean([1, 2, 3])
