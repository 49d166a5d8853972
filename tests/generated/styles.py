"""Correct heads in the shapes real code takes, each a complete submission wrapped to the contract.

Every style is written here from the public shapes (a tutorial ``Head`` module, a book's ``CausalAttention``, a
CS336-style function, d2l's ``masked_softmax``, a course's multi-head skeleton, a per-sequence 2-D function, einsum,
NumPy), never from ``reference/``, and is correct as it stands: the generator (``mutations.py``) breaks it. A style
defines only ``causal_self_attention``; the bench grades the head's checks alone.

A style's ``sites`` anchor the generic mutations where a pattern is ambiguous in that style (which ``-inf`` is the
causal one in a head that also has a padding mask; the expression that projects the values; the model width in the
scope of the scale): the mutations themselves are written once, for every style.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Style:
    name: str
    source: str
    held_out: bool  # reported on, never tuned on
    d_model: str | None = None  # the model width d, in the scope of the scale (None: no name for it there)
    value_proj: str | None = None  # the expression that projects the values ...
    value_input: str | None = None  # ... and what it becomes when the values are not projected
    fill_index: int = 0  # which -inf constant is the causal mask's (in source order)
    dropped_index: int = 0  # which ``s = s.masked_fill(...)`` is the causal mask's
    numpy: bool = False
    # causes every head of this style carries, correct or not: a NumPy head leaves torch (its own contract cause)
    contract_causes: frozenset[str] = field(default_factory=frozenset)
    # the style's own choice named otherwise beside a mutation: no mistake of the mutation's either
    contract_alike: frozenset[str] = field(default_factory=frozenset)


NANOGPT = '''\
"""One head of self-attention, as in the build-a-GPT tutorial, wrapped to the course's contract."""

import torch
import torch.nn as nn
from torch.nn import functional as F

dropout = 0.0


class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, n_embd, head_size, value_size, block_size, causal=True):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, value_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)
        self.causal = causal

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B, T, hs)
        q = self.query(x)  # (B, T, hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
        wei = F.softmax(wei, dim=-1)  # (B, T, T)
        wei = self.dropout(wei)
        v = self.value(x)  # (B, T, vs)
        out = wei @ v  # (B, T, T) @ (B, T, vs) -> (B, T, vs)
        return out, wei


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, C = X.shape
    head = Head(C, W_Q.shape[1], W_V.shape[1], T, causal)
    # nn.Linear computes x @ weight.T, so the projections go in transposed
    params = {"query.weight": W_Q.T, "key.weight": W_K.T, "value.weight": W_V.T}
    return torch.func.functional_call(head, params, (X,))
'''

BOOK = '''\
"""Causal attention as built in a book's chapter on attention, wrapped to the course's contract."""

import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, d_value, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_value, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x, causal=True):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        attn_scores = queries @ keys.transpose(1, 2)
        if causal:
            attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = attn_weights @ values
        return context_vec, attn_weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    b, num_tokens, d_in = X.shape
    ca = CausalAttention(d_in, W_Q.shape[1], W_V.shape[1], num_tokens, dropout=0.0)
    params = {"W_query.weight": W_Q.T, "W_key.weight": W_K.T, "W_value.weight": W_V.T}
    return torch.func.functional_call(ca, params, (X,), {"causal": causal})
'''

CS336 = '''\
"""Scaled dot-product attention with its own softmax, as a CS336-style assignment writes it."""

import math

import torch
from torch import Tensor


def softmax(x: Tensor, dim: int) -> Tensor:
    x_max = x.max(dim=dim, keepdim=True).values
    x_exp = torch.exp(x - x_max)
    return x_exp / x_exp.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None = None):
    d_k = Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., queries, keys)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ V, weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[-2]
    Q = X @ W_Q
    K = X @ W_K
    V = X @ W_V
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device)) if causal else None
    return scaled_dot_product_attention(Q, K, V, mask)
'''

D2L = '''\
"""d2l-style dot-product attention with masked_softmax over valid lengths, wrapped to the contract."""

import math

import torch
from torch import nn


def sequence_mask(X, valid_len, value=0.0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    if valid_lens is not None:
        shape = X.shape
        X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens.reshape(-1), value=float("-inf")).reshape(shape)
    return nn.functional.softmax(X, dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = self.dropout(masked_softmax(scores, valid_lens))
        return torch.bmm(self.attention_weights, values)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    attention = DotProductAttention(dropout=0.0)
    valid_lens = torch.arange(1, T + 1, device=X.device).repeat(B, 1) if causal else None  # query i sees i + 1 keys
    out = attention(X @ W_Q, X @ W_K, X @ W_V, valid_lens)
    return out, attention.attention_weights
'''

MULTIHEAD = '''\
"""The course's multi-head self-attention skeleton (padding mask, head axis), used with one head."""

import math

import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v, n_heads=1, dropout=0.0):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_k // n_heads
        self.d_value = d_v // n_heads
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_v, bias=False)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, x, attention_mask=None, causal=True):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T, d_head)
        k = self.k_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T, d_head)
        v = self.v_proj(x).view(B, T, self.n_heads, self.d_value).transpose(1, 2)  # (B, h, T, d_value)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_head)  # (B, h, T, T)
        if attention_mask is not None:
            scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        if causal:
            future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
            scores = scores.masked_fill(future, float("-inf"))
        attn = torch.softmax(scores, dim=-1)  # (B, h, T, T)
        attn = self.attn_dropout(attn)
        out = torch.matmul(attn, v)  # (B, h, T, d_value)
        out = out.transpose(1, 2).reshape(B, T, self.n_heads * self.d_value)
        return out, attn


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, d = X.shape
    mha = MultiHeadSelfAttention(d, W_Q.shape[1], W_V.shape[1], n_heads=1, dropout=0.0)
    params = {"q_proj.weight": W_Q.T, "k_proj.weight": W_K.T, "v_proj.weight": W_V.T}
    attention_mask = torch.ones(B, T, dtype=torch.long, device=X.device)  # no padding
    out, attn = torch.func.functional_call(mha, params, (X,), {"attention_mask": attention_mask, "causal": causal})
    return out, attn[:, 0]
'''

PER_SEQUENCE = '''\
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
        scores = scores.masked_fill(j > i, float("-inf"))
    a = torch.softmax(scores, dim=-1)  # (T, T)
    return a @ v, a


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs, weights = [], []
    for b in range(X.shape[0]):
        o, a = attention_2d(X[b], W_Q, W_K, W_V, causal)
        outs.append(o)
        weights.append(a)
    return torch.stack(outs), torch.stack(weights)
'''

EINSUM = '''\
"""A head in einsum notation with a torch.where mask."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q = torch.einsum("btd,dk->btk", X, W_Q)
    k = torch.einsum("btd,dk->btk", X, W_K)
    v = torch.einsum("btd,dv->btv", X, W_V)
    scale = q.shape[-1] ** -0.5
    scores = torch.einsum("bik,bjk->bij", q, k) * scale
    if causal:
        T = X.shape[1]
        allowed = torch.ones(T, T, dtype=torch.bool, device=X.device).tril()
        scores = torch.where(allowed, scores, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = torch.einsum("bij,bjv->biv", weights, v)
    return out, weights
'''

NUMPY = '''\
"""A head written in NumPy (as in a course that starts before PyTorch), converted back to tensors."""

import numpy as np
import torch


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    x = X.detach().cpu().numpy()
    q = x @ W_Q.detach().cpu().numpy()
    k = x @ W_K.detach().cpu().numpy()
    v = x @ W_V.detach().cpu().numpy()
    T = x.shape[1]
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(k.shape[-1])
    if causal:
        future = np.triu(np.ones((T, T), dtype=bool), k=1)
        scores = np.where(future, -np.inf, scores)
    weights = softmax(scores, axis=-1)
    out = weights @ v
    return torch.from_numpy(out), torch.from_numpy(weights)
'''

STYLES: dict[str, Style] = {
    s.name: s
    for s in (
        Style("nanogpt_head", NANOGPT, held_out=False, d_model="C", value_proj="self.value(x)", value_input="x"),
        Style("cs336_function", CS336, held_out=False, value_proj="X @ W_V", value_input="X"),
        Style("d2l_masked_softmax", D2L, held_out=False, value_proj="X @ W_V", value_input="X"),
        Style(
            "einsum",
            EINSUM,
            held_out=False,
            d_model="X.shape[-1]",
            value_proj='torch.einsum("btd,dv->btv", X, W_V)',
            value_input="X",
        ),
        Style("book_causal", BOOK, held_out=True, d_model="d_in", value_proj="self.W_value(x)", value_input="x"),
        Style(
            "multihead_skeleton",
            MULTIHEAD,
            held_out=True,
            d_model="x.shape[-1]",
            value_proj="self.v_proj(x)",
            value_input="x",
            fill_index=1,
            dropped_index=1,
        ),
        Style(
            "per_sequence_2d", PER_SEQUENCE, held_out=True, d_model="x.shape[1]", value_proj="x @ w_v", value_input="x"
        ),
        Style(
            "numpy",
            NUMPY,
            held_out=True,
            d_model="x.shape[-1]",
            value_proj="x @ W_V.detach().cpu().numpy()",
            value_input="x",
            numpy=True,
            contract_causes=frozenset({"computed_outside_torch"}),
            # leaving torch named as the missing graph alone, where a head's other mistake hides its other
            # consequences (v = x of a NumPy x: out's width stops the dtype probes)
            contract_alike=frozenset({"no_autograd_graph"}),
        ),
    )
}
TUNE = tuple(n for n, s in STYLES.items() if not s.held_out)
HELD_OUT = tuple(n for n, s in STYLES.items() if s.held_out)
