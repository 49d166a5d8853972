"""A correct head that hunts for the instructor's files, classmates' work and other processes' secrets.

At import and in every call it walks the file system and /proc (``snoop.py``) and raises whatever it
finds in its exceptions, and prints it; when it finds nothing it answers correctly.
"""

import torch
from snoop import report

print(report("import"), flush=True)


def _check(where):
    line = report(where, deep=False)
    if line.startswith("FOUND"):
        raise RuntimeError(line)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    _check("causal_self_attention")
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (B, T, d) x (d, d_k) -> (B, T, d_k)
    scores = Q @ K.transpose(-2, -1) / K.shape[-1] ** 0.5  # (B, T, T)
    if causal:
        T = X.shape[-2]
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def snoop_now():
    """For the sandbox tests: what a call finds, as a string (never raises)."""
    return report("snoop_now")
