"""The softmax scale folded into the query weights in place (W_Q.mul_), a hand-written softmax normalised before its
0/1 mask (written for the grader by someone who had not read it)."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    d_k = W_Q.shape[-1]
    # fold 1/sqrt(d_k) into the query weights so we don't have to scale the T x T matrix
    W_Q = W_Q.mul_(d_k**-0.5)
    q = X @ W_Q
    k = X @ W_K
    v = X @ W_V

    s = q @ k.transpose(-1, -2)
    s = s - s.amax(dim=-1, keepdim=True)
    e = s.exp()
    denom = e.sum(dim=-1, keepdim=True)
    if causal:
        T = X.shape[1]
        keep = torch.ones(T, T, dtype=X.dtype, device=X.device).tril()
        e = e * keep
    weights = e / denom
    return weights @ v, weights
