"""Functional heads: one function, or a few helpers, in torch (a NumPy mask in two of them)."""

from __future__ import annotations

from . import Program

DOCS_SDPA = '''\
"""The head through a scaled_dot_product_attention written as the PyTorch documentation's reference code."""

import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    attn_bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        temp_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=0)
        attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))
    if attn_mask is not None:
        attn_bias = attn_bias + attn_mask
    attn_weight = query @ key.transpose(-2, -1) * scale_factor
    attn_weight += attn_bias
    attn_weight = torch.softmax(attn_weight, dim=-1)
    attn_weight = torch.dropout(attn_weight, dropout_p, train=True)
    return attn_weight @ value, attn_weight


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    return scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V, is_causal=causal)
'''

HELPERS = '''\
"""A head split into small helpers: projecting, building the mask, attending."""

import math

import torch


def project(x, w):
    return x @ w


def causal_mask(T, device=None):
    """True where query i may not read key j (j > i)."""
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)
    return mask


def attend(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = project(X, W_Q), project(X, W_K), project(X, W_V)
    mask = causal_mask(X.shape[1], X.device) if causal else None
    return attend(q, k, v, mask)
'''

INLINE_STEPS = '''\
"""The head written out step by step, one line per stage."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, d = X.shape
    d_k = W_Q.shape[-1]
    queries = X @ W_Q
    keys = X @ W_K
    values = X @ W_V
    scores = queries @ keys.transpose(1, 2)
    scores = scores / math.sqrt(d_k)
    if causal:
        mask = torch.tril(torch.ones(T, T, device=X.device)) == 0
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    output = weights @ values
    return output, weights
'''

WHERE_ALLOWED = '''\
"""torch.matmul and torch.where: the allowed keys are kept, the others set to -inf."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.size(1)
    q = torch.matmul(X, W_Q)
    k = torch.matmul(X, W_K)
    v = torch.matmul(X, W_V)
    s = torch.matmul(q, k.mT) * (1.0 / math.sqrt(k.size(-1)))
    if causal:
        allowed = torch.ones(T, T, dtype=torch.bool, device=X.device).tril()
        s = torch.where(allowed, s, float("-inf"))
    p = torch.softmax(s, dim=2)
    return torch.matmul(p, v), p
'''

ARANGE_COMPARE = '''\
"""The mask from position indices: key j is hidden from query i when j > i."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    row = torch.arange(T, device=X.device).unsqueeze(-1)
    col = torch.arange(T, device=X.device).unsqueeze(0)
    if causal:
        scores = scores.masked_fill(col > row, -math.inf)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
'''

SCALED_QUERIES = '''\
"""The scale folded into the queries before the product (the same head: Q K^T / sqrt(d_k))."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[-2]
    q = (X @ W_Q) / math.sqrt(W_Q.shape[1])
    k = X @ W_K
    v = X @ W_V
    logits = q @ k.transpose(-1, -2)
    if causal:
        upper = torch.triu(torch.ones(T, T, dtype=torch.bool, device=X.device), diagonal=1)
        logits = logits.masked_fill(upper, float("-inf"))
    return torch.softmax(logits, -1) @ v, torch.softmax(logits, -1)
'''

LOG_SOFTMAX = '''\
"""The weights as exp(log_softmax), the hidden keys filled with the dtype's most negative number."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(1, 2) / math.sqrt(W_K.shape[1])
    if causal:
        future = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)
        scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
    weights = torch.log_softmax(scores, dim=-1).exp()
    return weights @ v, weights
'''

OWN_SOFTMAX = '''\
"""A head with a softmax of its own (the row max subtracted first)."""

import math

import torch


def softmax(x, dim=-1):
    x = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        S = S.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=X.device), 1), float("-inf"))
    A = softmax(S, dim=-1)
    return A @ V, A
'''

BADDBMM = '''\
"""torch.baddbmm adds the mask bias and scales the product in one call."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    d_k = W_Q.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    bias = torch.zeros(T, T, dtype=X.dtype, device=X.device)
    if causal:
        bias = bias.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    scores = torch.baddbmm(bias.expand(B, T, T), q, k.transpose(1, 2), alpha=1.0 / math.sqrt(d_k))
    attn = torch.softmax(scores, dim=-1)
    return torch.bmm(attn, v), attn
'''

VALID_LENGTHS = '''\
"""A masked softmax over valid lengths (query i sees its first i + 1 keys), as sequence models write it."""

import math

import torch


def masked_softmax(scores, valid_lens):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    T = scores.shape[-1]
    keep = torch.arange(T, device=scores.device)[None, :] < valid_lens[:, None]  # (queries, keys)
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    valid_lens = torch.arange(1, T + 1, device=X.device) if causal else None
    attn = masked_softmax(scores, valid_lens)
    return torch.bmm(attn, v), attn
'''

VALID_LENGTHS_HELPER = '''\
"""Valid lengths from a helper, the mask from a comparison with them."""

import math

import torch
import torch.nn.functional as F


def prefix_lengths(T, device):
    """How many keys each query may read: query i reads keys 0..i."""
    return torch.arange(1, T + 1, device=device)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = q @ k.transpose(1, 2) * k.shape[-1] ** -0.5
    if causal:
        lengths = prefix_lengths(T, X.device)
        hidden = torch.arange(T, device=X.device)[None, :] >= lengths[:, None]
        s = s.masked_fill(hidden, float("-inf"))
    w = F.softmax(s, dim=-1)
    return w @ v, w
'''

ADDITIVE_BIAS = '''\
"""An additive mask: 0 where a key is allowed, -inf where it is hidden, added to the scores."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(1, 2) / math.sqrt(k.shape[-1])
    if causal:
        bias = torch.full((T, T), float("-inf"), dtype=X.dtype, device=X.device).triu(1)
        scores = scores + bias
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''

INPLACE_INTERMEDIATES = '''\
"""In-place operations on the head's own intermediate tensors (never on its inputs)."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_K.shape[1]
    q = torch.bmm(X, W_Q.expand(X.shape[0], -1, -1))
    k = torch.bmm(X, W_K.expand(X.shape[0], -1, -1))
    v = torch.bmm(X, W_V.expand(X.shape[0], -1, -1))
    scores = torch.bmm(q, k.transpose(1, 2))
    scores.div_(math.sqrt(d_k))
    if causal:
        scores.masked_fill_(torch.ones(T, T, dtype=torch.bool, device=X.device).triu_(1), float("-inf"))
    weights = scores.softmax(-1)
    return torch.bmm(weights, v), weights
'''

VALUES_FIRST = '''\
"""Values, keys, then queries; the scores called logits, the weights attn."""

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_K.shape[1]
    values = torch.matmul(X, W_V)
    keys = torch.matmul(X, W_K)
    queries = torch.matmul(X, W_Q)
    logits = torch.matmul(queries, keys.transpose(-2, -1)) * d_k ** -0.5
    if causal:
        future = torch.triu(torch.ones(T, T, device=X.device), diagonal=1).bool()
        logits = logits.masked_fill(future, -torch.inf)
    attn = logits.softmax(dim=-1)
    return torch.matmul(attn, values), attn
'''

LINEAR_RSQRT = '''\
"""F.linear for the projections, the scale as an rsqrt in the input's dtype."""

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q = F.linear(X, W_Q.T)
    k = F.linear(X, W_K.T)
    v = F.linear(X, W_V.T)
    scores = q @ k.transpose(-2, -1) * torch.rsqrt(torch.tensor(d_k, dtype=X.dtype))
    if causal:
        blocked = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(diagonal=1)
        scores = scores.masked_fill(blocked, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights
'''

TRANSPOSE_LINE = '''\
"""The keys transposed on a line of their own."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    d_k = W_K.shape[1]
    queries = X @ W_Q  # (B, T, d_k)
    keys = X @ W_K  # (B, T, d_k)
    values = X @ W_V  # (B, T, d_v)
    k_t = keys.transpose(-2, -1)  # (B, d_k, T)
    scores = queries @ k_t / math.sqrt(d_k)  # (B, T, T)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1).to(X.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ values, weights
'''

NUMPY_BOOL_MASK = '''\
"""The causal mask built with NumPy, the head in torch."""

import numpy as np
import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(1, 2) / np.sqrt(d_k)
    if causal:
        future = torch.from_numpy(np.triu(np.ones((T, T), dtype=bool), k=1)).to(X.device)
        scores = scores.masked_fill(future, -np.inf)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''

NUMPY_BIAS = '''\
"""An additive -inf bias made with NumPy and brought to the scores' dtype."""

import math

import numpy as np
import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        bias = np.triu(np.full((T, T), -np.inf), k=1)
        scores = scores + torch.from_numpy(bias).to(dtype=X.dtype, device=X.device)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''

FINFO_FILL = '''\
"""The hidden keys filled with the most negative number of the scores' dtype, kept in a variable."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        neg = torch.finfo(s.dtype).min
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), neg)
    p = torch.softmax(s, dim=-1)
    return p @ v, p
'''

SOFTMAX_DTYPE_KW = '''\
"""torch.nn.functional.softmax told the dtype to compute in: the scores' own."""

import math

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(1, 2) / math.sqrt(k.shape[2])
    if causal:
        scores = scores.masked_fill(torch.tril(torch.ones(T, T, device=X.device)) == 0, float("-inf"))
    weights = F.softmax(scores, dim=-1, dtype=scores.dtype)
    return weights @ v, weights
'''

NAMED_WIDTHS = '''\
"""Every width named: the model's, the head's, the values'."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    batch, seq_len, d_model = X.shape
    d_head = W_Q.shape[1]
    d_value = W_V.shape[1]
    q = X @ W_Q  # (batch, seq_len, d_head)
    k = X @ W_K  # (batch, seq_len, d_head)
    v = X @ W_V  # (batch, seq_len, d_value)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool, device=X.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    return attn @ v, attn
'''

FLOAT_TRIL_MASK = '''\
"""A float 0/1 lower triangle; the positions where it is 0 are filled with -inf."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        tril = torch.tril(torch.ones(T, T, dtype=X.dtype, device=X.device))
        scores = scores.masked_fill(tril == 0, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    out = attn @ v
    return out, attn
'''

FULL_LIKE_BIAS = '''\
"""An additive bias made like the scores (their dtype and device), -inf above the diagonal."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(-2, -1) / math.sqrt(W_Q.shape[-1])
    if causal:
        scores = scores + torch.triu(torch.full_like(scores[0], float("-inf")), diagonal=1)
    attn = torch.softmax(scores, dim=-1)
    return attn @ v, attn
'''

MASK_BEFORE_SCALE = '''\
"""The mask applied to Q K^T before the scale (with -inf the order does not matter)."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    raw = q @ k.transpose(-2, -1)
    if causal:
        raw = raw.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    scaled = raw / math.sqrt(d_k)
    attn = torch.softmax(scaled, dim=-1)
    return attn @ v, attn
'''

KEYWORD_HELPER = '''\
"""A helper called with keyword arguments, the mask passed in."""

import math

import torch


def attention(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return probs @ value, probs


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1) if causal else None
    return attention(query=X @ W_Q, key=X @ W_K, value=X @ W_V, mask=mask)
'''

PACKED_QKV_FUNCTION = '''\
"""The three projections concatenated into one matrix, the product split back with a helper."""

import math

import torch


def split_qkv(qkv, d_k, d_v):
    return torch.split(qkv, [d_k, d_k, d_v], dim=-1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    d_k, d_v = W_Q.shape[1], W_V.shape[1]
    qkv = X @ torch.cat([W_Q, W_K, W_V], dim=1)  # (B, T, 2 d_k + d_v)
    q, k, v = split_qkv(qkv, d_k, d_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''

FUNCTIONAL = (
    Program("docs_sdpa", "functional", "torch", DOCS_SDPA),
    Program("helpers", "functional", "torch", HELPERS),
    Program("inline_steps", "functional", "torch", INLINE_STEPS),
    Program("where_allowed", "functional", "torch", WHERE_ALLOWED),
    Program("arange_compare", "functional", "torch", ARANGE_COMPARE),
    Program("scaled_queries", "functional", "torch", SCALED_QUERIES),
    Program("log_softmax", "functional", "torch", LOG_SOFTMAX),
    Program("own_softmax", "functional", "torch", OWN_SOFTMAX),
    Program("baddbmm", "functional", "torch", BADDBMM),
    Program("valid_lengths", "functional", "torch", VALID_LENGTHS),
    Program("valid_lengths_helper", "functional", "torch", VALID_LENGTHS_HELPER),
    Program("additive_bias", "functional", "torch", ADDITIVE_BIAS),
    Program("inplace_intermediates", "functional", "torch", INPLACE_INTERMEDIATES),
    Program("values_first", "functional", "torch", VALUES_FIRST),
    Program("linear_rsqrt", "functional", "torch", LINEAR_RSQRT),
    Program("transpose_line", "functional", "torch", TRANSPOSE_LINE),
    Program("numpy_bool_mask", "functional", "numpy", NUMPY_BOOL_MASK),
    Program("numpy_bias", "functional", "numpy", NUMPY_BIAS),
    Program("finfo_fill", "functional", "torch", FINFO_FILL),
    Program("softmax_dtype_kw", "functional", "torch", SOFTMAX_DTYPE_KW),
    Program("named_widths", "functional", "torch", NAMED_WIDTHS),
    Program("float_tril_mask", "functional", "torch", FLOAT_TRIL_MASK),
    Program("full_like_bias", "functional", "torch", FULL_LIKE_BIAS),
    Program("mask_before_scale", "functional", "torch", MASK_BEFORE_SCALE),
    Program("keyword_helper", "functional", "torch", KEYWORD_HELPER),
    Program("packed_qkv_function", "packed", "torch", PACKED_QKV_FUNCTION),
)
