"""A functional head whose additive causal bias is made by ``torch.full`` in the default dtype (float32): for
float16 inputs the bias promotes the scores to float32 and the product with the float16 values raises."""

import math

import torch


def causal_bias(T):
    return torch.full((T, T), float("-inf")).triu(1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q = torch.einsum("btd,dk->btk", X, W_Q) / math.sqrt(W_Q.shape[1])
    k = torch.einsum("btd,dk->btk", X, W_K)
    v = torch.einsum("btd,dk->btk", X, W_V)
    logits = torch.einsum("bqd,bkd->bqk", q, k)
    if causal:
        logits = logits + causal_bias(X.shape[1])
    probs = torch.softmax(logits, dim=-1)
    return torch.einsum("bqk,bkd->bqd", probs, v), probs
