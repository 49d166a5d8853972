"""Heads built as ``nn.Module``s (and one plain class), wrapped to the course's contract."""

from __future__ import annotations

from . import Program

GPT_HEAD_BUFFER = '''\
"""A decoder head as a from-scratch GPT tutorial builds it, driven through torch.func.functional_call."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalHead(nn.Module):
    def __init__(self, n_embd, head_size, value_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, value_size, bias=False)
        self.causal = causal
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.query(x)  # (B, T, hs)
        k = self.key(x)  # (B, T, hs)
        v = self.value(x)  # (B, T, vs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, T, T)
        if self.causal:
            att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        return att @ v, att


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    head = CausalHead(X.shape[-1], W_Q.shape[1], W_V.shape[1], X.shape[1], causal=causal)
    weights = {"query.weight": W_Q.t(), "key.weight": W_K.t(), "value.weight": W_V.t()}
    return torch.func.functional_call(head, weights, (X,))
'''

BOOK_SCALED_IN_INIT = '''\
"""Causal attention with its scale, mask and dropout fixed when the module is built."""

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, d_value, context_length, dropout):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_value, bias=False)
        self.scale = d_out ** -0.5
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        )

    def forward(self, x, causal=True):
        b, n, _ = x.shape
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        if causal:
            attn_scores.masked_fill_(self.mask[:n, :n], -torch.inf)
        attn_weights = torch.softmax(attn_scores * self.scale, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values, attn_weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    layer = CausalSelfAttention(X.shape[2], W_Q.shape[1], W_V.shape[1], X.shape[1], dropout=0.0)
    params = {"W_query.weight": W_Q.T, "W_key.weight": W_K.T, "W_value.weight": W_V.T}
    return torch.func.functional_call(layer, params, (X,), {"causal": causal})
'''

DATACLASS_CONFIG = '''\
"""One attention head configured by a dataclass, its weights held as parameters."""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class AttentionConfig:
    d_model: int
    d_k: int
    d_v: int
    causal: bool = False
    dropout: float = 0.0
    fill: float = float("-inf")


class SingleHeadAttention(nn.Module):
    def __init__(self, config: AttentionConfig):
        super().__init__()
        self.config = config
        self.W_q = nn.Parameter(torch.empty(config.d_model, config.d_k))
        self.W_k = nn.Parameter(torch.empty(config.d_model, config.d_k))
        self.W_v = nn.Parameter(torch.empty(config.d_model, config.d_v))

    def forward(self, x):
        T = x.size(1)
        q = x @ self.W_q
        k = x @ self.W_k
        v = x @ self.W_v
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.config.d_k)
        if self.config.causal:
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
            scores = scores.masked_fill(future, self.config.fill)
        weights = F.softmax(scores, dim=-1)
        weights = F.dropout(weights, p=self.config.dropout, training=self.training)
        return weights @ v, weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    config = AttentionConfig(d_model=X.shape[-1], d_k=W_Q.shape[1], d_v=W_V.shape[1], causal=causal)
    model = SingleHeadAttention(config)
    return torch.func.functional_call(model, {"W_q": W_Q, "W_k": W_K, "W_v": W_V}, (X,))
'''

MULTIHEAD_ONE = '''\
"""A multi-head attention skeleton (key padding mask, head axis) used here with a single head."""

import math

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v, n_heads=1):
        super().__init__()
        assert d_k % n_heads == 0 and d_v % n_heads == 0
        self.n_heads = n_heads
        self.head_dim = d_k // n_heads
        self.v_head_dim = d_v // n_heads
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x, key_padding_mask=None, causal=True):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_heads, self.v_head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, h, T, T)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        if causal:
            causal_mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            scores = scores.masked_fill(~causal_mask, float("-inf"))
        attn = scores.softmax(dim=-1)
        y = (attn @ v).transpose(1, 2).contiguous().view(B, T, self.n_heads * self.v_head_dim)
        return y, attn


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, d = X.shape
    mha = MultiHeadAttention(d, W_Q.shape[1], W_V.shape[1], n_heads=1)
    params = {"q_proj.weight": W_Q.T, "k_proj.weight": W_K.T, "v_proj.weight": W_V.T}
    keep = torch.ones(B, T, dtype=torch.bool, device=X.device)  # no padding
    y, attn = torch.func.functional_call(mha, params, (X,), {"key_padding_mask": keep, "causal": causal})
    return y, attn.squeeze(1)
'''

PACKED_QKV_MODULE = '''\
"""One linear layer makes the queries, keys and values at once (a packed QKV projection)."""

import math

import torch
import torch.nn as nn


class PackedHead(nn.Module):
    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.d_k, self.d_v = d_k, d_v
        self.qkv = nn.Linear(d_model, 2 * d_k + d_v, bias=False)

    def forward(self, x, causal=True):
        T = x.shape[1]
        q, k, v = self.qkv(x).split([self.d_k, self.d_k, self.d_v], dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if causal:
            hidden = torch.triu(torch.ones(T, T, device=x.device, dtype=torch.bool), 1)
            scores = scores.masked_fill(hidden, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        return probs @ v, probs


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    head = PackedHead(X.shape[-1], W_Q.shape[1], W_V.shape[1])
    packed = torch.cat([W_Q, W_K, W_V], dim=1).T  # (2 d_k + d_v, d)
    return torch.func.functional_call(head, {"qkv.weight": packed}, (X,), {"causal": causal})
'''

TENSOR_ATTRIBUTES = '''\
"""A module that keeps the projection tensors it is given (no copies, so gradients reach them)."""

import math

import torch
from torch import nn


class AttentionHead(nn.Module):
    def __init__(self, W_Q, W_K, W_V, causal=True):
        super().__init__()
        self.W_Q = W_Q
        self.W_K = W_K
        self.W_V = W_V
        self.causal = causal
        self.inv_sqrt_dk = 1.0 / math.sqrt(W_Q.shape[1])
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        T = x.shape[1]
        Q = torch.matmul(x, self.W_Q)
        K = torch.matmul(x, self.W_K)
        V = torch.matmul(x, self.W_V)
        scores = torch.matmul(Q, K.transpose(1, 2)) * self.inv_sqrt_dk
        if self.causal:
            mask = torch.tril(torch.ones(T, T, device=x.device, dtype=torch.bool))
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        A = self.softmax(scores)
        return torch.matmul(A, V), A


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    return AttentionHead(W_Q, W_K, W_V, causal)(X)
'''

MASK_METHOD = '''\
"""A head whose causal mask comes from a method of its own."""

import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.to_q = nn.Linear(d_model, d_k, bias=False)
        self.to_k = nn.Linear(d_model, d_k, bias=False)
        self.to_v = nn.Linear(d_model, d_v, bias=False)

    def causal_mask(self, T, device):
        mask = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)  # True: a key query i may not read
        return mask

    def forward(self, x, causal=True):
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        sim = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(q.shape[-1])
        mask = self.causal_mask(x.shape[1], x.device) if causal else None
        if mask is not None:
            sim = sim.masked_fill(mask, -math.inf)
        attn = sim.softmax(dim=-1)
        return torch.einsum("bij,bjd->bid", attn, v), attn


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    attention = Attention(X.shape[-1], W_Q.shape[1], W_V.shape[1])
    params = {"to_q.weight": W_Q.T, "to_k.weight": W_K.T, "to_v.weight": W_V.T}
    return torch.func.functional_call(attention, params, (X,), {"causal": causal})
'''

ADDITIVE_BIAS_BUFFER = '''\
"""A head that adds a precomputed -inf bias above the diagonal (a buffer built for the longest input)."""

import math

import torch
import torch.nn as nn


class BiasedHead(nn.Module):
    def __init__(self, d_model, d_k, d_v, max_len, causal=True):
        super().__init__()
        self.wq = nn.Linear(d_model, d_k, bias=False)
        self.wk = nn.Linear(d_model, d_k, bias=False)
        self.wv = nn.Linear(d_model, d_v, bias=False)
        self.causal = causal
        self.register_buffer("bias", torch.full((max_len, max_len), float("-inf")).triu(1))

    def forward(self, x):
        T = x.size(1)
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
        if self.causal:
            att = att + self.bias[:T, :T].to(att.dtype)
        att = torch.softmax(att, dim=-1)
        return att @ v, att


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    head = BiasedHead(X.size(-1), W_Q.size(1), W_V.size(1), max_len=X.size(1), causal=causal)
    params = {"wq.weight": W_Q.T, "wk.weight": W_K.T, "wv.weight": W_V.T}
    return torch.func.functional_call(head, params, (X,))
'''

KWARGS_MODULE = '''\
"""A head whose options come as keyword arguments (read with defaults)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class FlexibleAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v, **kwargs):
        super().__init__()
        self.causal = kwargs.get("causal", False)
        self.p_drop = kwargs.get("dropout", 0.0)
        self.head_dim = kwargs.get("head_dim", d_k)
        self.proj_q = nn.Linear(d_model, d_k, bias=False)
        self.proj_k = nn.Linear(d_model, d_k, bias=False)
        self.proj_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x):
        T = x.shape[-2]
        q, k, v = self.proj_q(x), self.proj_k(x), self.proj_v(x)
        logits = q @ k.mT / math.sqrt(self.head_dim)
        if self.causal:
            logits = logits.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), -math.inf)
        probs = F.softmax(logits, dim=-1)
        probs = F.dropout(probs, p=self.p_drop, training=False)
        return probs @ v, probs


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    module = FlexibleAttention(X.shape[-1], W_Q.shape[1], W_V.shape[1], causal=causal, dropout=0.0)
    params = {"proj_q.weight": W_Q.T, "proj_k.weight": W_K.T, "proj_v.weight": W_V.T}
    return torch.func.functional_call(module, params, (X,))
'''

MODULE_LIST = '''\
"""A stack of heads (nn.ModuleList) built with one head, each head a small module."""

import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.q = nn.Linear(d_model, d_k, bias=False)
        self.k = nn.Linear(d_model, d_k, bias=False)
        self.v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x, causal):
        T = x.shape[1]
        wei = self.q(x) @ self.k(x).transpose(-2, -1) * self.k.out_features ** -0.5
        if causal:
            keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
            wei = torch.where(keep, wei, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        return wei @ self.v(x), wei


class Heads(nn.Module):
    def __init__(self, n_heads, d_model, d_k, d_v):
        super().__init__()
        self.heads = nn.ModuleList([Head(d_model, d_k, d_v) for _ in range(n_heads)])

    def forward(self, x, causal=True):
        outs = [h(x, causal) for h in self.heads]
        return torch.cat([o for o, _ in outs], dim=-1), outs[0][1]


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    heads = Heads(1, X.shape[-1], W_Q.shape[1], W_V.shape[1])
    params = {"heads.0.q.weight": W_Q.T, "heads.0.k.weight": W_K.T, "heads.0.v.weight": W_V.T}
    return torch.func.functional_call(heads, params, (X,), {"causal": causal})
'''

SEQ2SEQ_LAYER = '''\
"""An attention layer written for queries, keys and values from anywhere, called here with one sequence."""

import math

import torch
from torch import nn


class ScaledDotProductAttention(nn.Module):
    def forward(self, query, key, value, mask=None):
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        p_attn = scores.softmax(dim=-1)
        return torch.matmul(p_attn, value), p_attn


def subsequent_mask(size, device=None):
    """1 where position i may attend to position j (j <= i)."""
    return torch.tril(torch.ones(1, size, size, device=device))


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    layer = ScaledDotProductAttention()
    mask = subsequent_mask(X.shape[1], X.device) if causal else None
    return layer(X @ W_Q, X @ W_K, X @ W_V, mask)
'''

CALLABLE_CLASS = '''\
"""A plain class (no nn.Module) whose instances are called like functions."""

import math

import torch


class CausalAttention:
    def __init__(self, scale, fill=float("-inf")):
        self.scale = scale
        self.fill = fill

    def __call__(self, q, k, v, causal=True):
        T = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) * self.scale
        if causal:
            s = s.masked_fill(torch.triu(torch.ones_like(s, dtype=torch.bool), diagonal=1), self.fill)
        a = torch.softmax(s, dim=-1)
        return a @ v, a


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    d_k = W_Q.shape[1]
    attend = CausalAttention(scale=1 / math.sqrt(d_k))
    return attend(X @ W_Q, X @ W_K, X @ W_V, causal=causal)
'''

MODULES = (
    Program("gpt_head_buffer", "module", "torch", GPT_HEAD_BUFFER),
    Program("book_scaled_in_init", "module", "torch", BOOK_SCALED_IN_INIT),
    Program("dataclass_config", "config", "torch", DATACLASS_CONFIG),
    Program("multihead_one", "multihead", "torch", MULTIHEAD_ONE),
    Program("packed_qkv_module", "packed", "torch", PACKED_QKV_MODULE),
    Program("tensor_attributes", "module", "torch", TENSOR_ATTRIBUTES),
    Program("mask_method", "module", "torch", MASK_METHOD),
    Program("additive_bias_buffer", "module", "torch", ADDITIVE_BIAS_BUFFER),
    Program("kwargs_module", "config", "torch", KWARGS_MODULE),
    Program("module_list", "module", "torch", MODULE_LIST),
    Program("seq2seq_layer", "module", "torch", SEQ2SEQ_LAYER),
    Program("callable_class", "class", "torch", CALLABLE_CLASS),
)
