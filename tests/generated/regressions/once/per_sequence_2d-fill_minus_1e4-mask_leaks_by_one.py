"""Attention for one sequence (T, d), written first for 2-D inputs, called once per batch element."""

import math

import torch


def attention_2d(x, w_q, w_k, w_v, causal=True):
    q = x @ w_q  # (T, d_k)
    k = x @ w_k  # (T, d_k)
    v = x @ w_v  # (T, d_v)
    T = x.shape[0]
    scores = q @ k.T / math.sqrt(k.shape[1])  # (T, T)
    if causal:
        i = torch.arange(T).unsqueeze(1)
        j = torch.arange(T).unsqueeze(0)
        scores = scores.masked_fill(j > i + 1, -1e4)
    a = torch.softmax(scores, dim=-1)  # (T, T)
    return a @ v, a


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs, weights = [], []
    for b in range(X.shape[0]):
        o, a = attention_2d(X[b], W_Q, W_K, W_V, causal)
        outs.append(o)
        weights.append(a)
    return torch.stack(outs), torch.stack(weights)
