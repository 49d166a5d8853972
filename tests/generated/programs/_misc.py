"""Einsum heads, heads configured by module-level constants, a cached mask, a typed CS336-like function."""

from __future__ import annotations

from . import Program

EINSUM_WHERE = '''\
"""Every product an einsum; the hidden keys replaced with torch.where."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q = torch.einsum("bsd,dh->bsh", X, W_Q)
    k = torch.einsum("bsd,dh->bsh", X, W_K)
    v = torch.einsum("bsd,dv->bsv", X, W_V)
    sim = torch.einsum("bqh,bkh->bqk", q, k) * q.shape[-1] ** -0.5
    if causal:
        keep = torch.ones(T, T, dtype=torch.bool, device=X.device).tril()
        sim = torch.where(keep, sim, float("-inf"))
    attn = sim.softmax(dim=-1)
    return torch.einsum("bqk,bkv->bqv", attn, v), attn
'''

EINSUM_ELLIPSIS = '''\
"""Einsum with an ellipsis for the batch axes, masked_fill for the mask."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[-2]
    d_k = W_Q.shape[-1]
    q = torch.einsum("...td,dk->...tk", X, W_Q)
    k = torch.einsum("...td,dk->...tk", X, W_K)
    v = torch.einsum("...td,dv->...tv", X, W_V)
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d_k)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=X.device), 1), -torch.inf)
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kv->...qv", probs, v), probs
'''

EINSUM_BIAS = '''\
"""Einsum, and the mask as an additive bias in the scores' dtype."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, D = X.shape
    Q = torch.einsum("btd,dk->btk", X, W_Q)
    K = torch.einsum("btd,dk->btk", X, W_K)
    V = torch.einsum("btd,dv->btv", X, W_V)
    S = torch.einsum("bik,bjk->bij", Q, K) / math.sqrt(Q.shape[-1])
    if causal:
        S = S + torch.zeros(T, T, dtype=S.dtype, device=S.device).masked_fill(
            torch.ones(T, T, dtype=torch.bool, device=S.device).triu(1), float("-inf")
        )
    A = torch.softmax(S, dim=-1)
    return torch.einsum("bij,bjv->biv", A, V), A
'''

CONFIG_DICT = '''\
"""The head's options in a module-level dict, as a training script keeps its hyperparameters."""

import math

import torch
import torch.nn.functional as F

CONFIG = {"dropout": 0.0, "mask_value": float("-inf")}


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
    if causal:
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), CONFIG["mask_value"])
    att = F.softmax(att, dim=-1)
    att = F.dropout(att, p=CONFIG["dropout"])
    return att @ v, att
'''

PARTIAL_SOFTMAX = '''\
"""The normalisation chosen once at module level with functools.partial."""

import math
from functools import partial

import torch

normalize = partial(torch.softmax, dim=-1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(W_Q.shape[1])
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    weights = normalize(scores)
    return weights @ v, weights
'''

CACHED_MASK = '''\
"""Masks cached per length and device, built the first time a length is seen."""

import math

import torch

_MASKS = {}


def future_mask(T, device):
    key = (T, str(device))
    if key not in _MASKS:
        _MASKS[key] = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)
    return _MASKS[key]


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = future_mask(X.shape[1], X.device) if causal else None
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    a = torch.softmax(s, dim=-1)
    return a @ v, a
'''

TYPED_KEEP_MASK = '''\
"""A typed scaled_dot_product_attention whose mask is True where a key may be read."""

import math

import torch
from torch import Tensor


def scaled_dot_product_attention(Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    d_k = K.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kv->...qv", weights, V), weights


def causal_self_attention(X: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, causal: bool = True):
    T = X.shape[-2]
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device)) if causal else None
    return scaled_dot_product_attention(Q, K, V, mask)
'''

WHERE_TENSOR_FILL = '''\
"""torch.where with the fill as a tensor of the scores' dtype."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    queries, keys, values = X @ W_Q, X @ W_K, X @ W_V
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])
    if causal:
        minus_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
        visible = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device))
        scores = torch.where(visible, scores, minus_inf)
    weights = torch.softmax(scores, dim=-1)
    return weights @ values, weights
'''

SOFTMAX_MODULE_FN = '''\
"""A functional head that keeps an nn.Softmax and an nn.Dropout at module level."""

import math

import torch
from torch import nn

softmax = nn.Softmax(dim=-1)
attn_dropout = nn.Dropout(p=0.0)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[2])
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), -math.inf)
    weights = attn_dropout(softmax(scores))
    return weights @ v, weights
'''

HEADS_FUNCTIONAL = '''\
"""Heads split and merged by helpers, the number of heads a module constant (one here)."""

import math

import torch

N_HEADS = 1


def split_heads(x, n_heads, head_dim):
    B, T, _ = x.shape
    return x.view(B, T, n_heads, head_dim).transpose(1, 2)  # (B, h, T, head_dim)


def merge_heads(x):
    B, h, T, head_dim = x.shape
    return x.transpose(1, 2).reshape(B, T, h * head_dim)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, d = X.shape
    d_k, d_v = W_Q.shape[1], W_V.shape[1]
    q = split_heads(X @ W_Q, N_HEADS, d_k // N_HEADS)
    k = split_heads(X @ W_K, N_HEADS, d_k // N_HEADS)
    v = split_heads(X @ W_V, N_HEADS, d_v // N_HEADS)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k // N_HEADS)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return merge_heads(weights @ v), weights[:, 0]
'''

BIAS_HELPER = '''\
"""The additive mask made by a helper told the scores' dtype and device."""

import math

import torch


def causal_bias(T, dtype, device):
    """0 where query i may read key j, -inf where j > i."""
    return torch.full((T, T), float("-inf"), dtype=dtype, device=device).triu(1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    att = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        att = att + causal_bias(X.size(1), att.dtype, att.device)
    att = att.softmax(dim=-1)
    return att @ v, att
'''

MISC = (
    Program("einsum_where", "einsum", "torch", EINSUM_WHERE),
    Program("einsum_ellipsis", "einsum", "torch", EINSUM_ELLIPSIS),
    Program("einsum_bias", "einsum", "torch", EINSUM_BIAS),
    Program("config_dict", "config", "torch", CONFIG_DICT),
    Program("partial_softmax", "config", "torch", PARTIAL_SOFTMAX),
    Program("cached_mask", "functional", "torch", CACHED_MASK),
    Program("typed_keep_mask", "functional", "torch", TYPED_KEEP_MASK),
    Program("where_tensor_fill", "functional", "torch", WHERE_TENSOR_FILL),
    Program("softmax_module_fn", "config", "torch", SOFTMAX_MODULE_FN),
    Program("heads_functional", "multihead", "torch", HEADS_FUNCTIONAL),
    Program("bias_helper", "functional", "torch", BIAS_HELPER),
)
