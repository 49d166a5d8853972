"""A functional, JAX-like head (pure functions, einsum, an additive causal bias) that returns the logits, -inf
where the bias hides a key, as the weights; written for the grader by someone who had not read it."""

import math

import torch


def make_causal_bias(T, like):
    return torch.full((T, T), float("-inf"), dtype=like.dtype, device=like.device).triu(1)


def dot_product_attention_weights(query, key, bias=None):
    depth = query.shape[-1]
    query = query / math.sqrt(depth)
    logits = torch.einsum("bqd,bkd->bqk", query, key)
    if bias is not None:
        logits = logits + bias
    return logits, torch.softmax(logits, dim=-1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    params = {"query": W_Q, "key": W_K, "value": W_V}
    q = torch.einsum("btd,dk->btk", X, params["query"])
    k = torch.einsum("btd,dk->btk", X, params["key"])
    v = torch.einsum("btd,dk->btk", X, params["value"])
    bias = make_causal_bias(X.shape[1], X) if causal else None
    logits, probs = dot_product_attention_weights(q, k, bias)
    out = torch.einsum("bqk,bkd->bqd", probs, v)
    return out, logits
