"""A helper for one sequence, correct as it stands, called with W_Q where the keys' weight belongs (issue 35.2)."""

import math

import torch


def attend(x, w_q, w_k, w_v, causal):
    q = x @ w_q
    k = x @ w_k
    v = x @ w_v
    s = q @ k.T / math.sqrt(k.shape[1])
    if causal:
        T = x.shape[0]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    a = torch.softmax(s, dim=-1)
    return a @ v, a


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs = [attend(x, W_Q, W_Q, W_V, causal) for x in X]
    return torch.stack([o for o, _ in outs]), torch.stack([a for _, a in outs])
