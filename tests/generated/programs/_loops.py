"""Heads that loop: per sequence, per query, per key block (an online softmax), per entry."""

from __future__ import annotations

from . import Program

PER_SEQUENCE = '''\
"""A head for one sequence (T, d), called for each sequence of the batch."""

import math

import torch


def head_2d(x, w_q, w_k, w_v, causal):
    q = x @ w_q  # (T, d_k)
    k = x @ w_k  # (T, d_k)
    v = x @ w_v  # (T, d_v)
    scores = q @ k.T  # (T, T)
    scores = scores / math.sqrt(k.shape[1])
    if causal:
        T = x.shape[0]
        scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), float("-inf"))
    a = torch.softmax(scores, dim=1)
    return a @ v, a


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs, weights = [], []
    for x in X:
        o, a = head_2d(x, W_Q, W_K, W_V, causal)
        outs.append(o)
        weights.append(a)
    return torch.stack(outs), torch.stack(weights)
'''

PER_QUERY_ROWS = '''\
"""One query at a time: query i attends to the prefix of keys it may read, padded back to T."""

import math

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scale = 1.0 / math.sqrt(q.shape[-1])
    rows_out, rows_w = [], []
    for i in range(T):
        end = i + 1 if causal else T
        s = (q[:, i : i + 1] @ k[:, :end].transpose(1, 2)) * scale  # (B, 1, end)
        w = torch.softmax(s, dim=-1)
        rows_out.append(w @ v[:, :end])  # (B, 1, d_v)
        rows_w.append(F.pad(w, (0, T - end)))  # zeros for the keys it may not read
    return torch.cat(rows_out, dim=1), torch.cat(rows_w, dim=1)
'''

DOUBLE_LOOP = '''\
"""Every score computed as a dot product in a double loop (slow, but the lecture's definition entry by entry)."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    d_k = W_Q.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    hidden = torch.full((B,), float("-inf"), dtype=X.dtype, device=X.device)
    rows = []
    for i in range(T):
        row = []
        for j in range(T):
            if causal and j > i:
                row.append(hidden)
            else:
                row.append((q[:, i] * k[:, j]).sum(dim=-1) / math.sqrt(d_k))
        rows.append(torch.stack(row, dim=-1))
    scores = torch.stack(rows, dim=1)  # (B, T, T)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''

LOOP_BUILT_MASK = '''\
"""A mask filled in by a loop over the rows, in a helper."""

import math

import torch


def build_mask(T, device):
    mask = torch.zeros(T, T, dtype=torch.bool, device=device)
    for i in range(T):
        mask[i, i + 1 :] = True  # query i may not read the keys after it
    return mask


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    att = q @ k.transpose(1, 2) / math.sqrt(W_K.shape[-1])
    if causal:
        att = att.masked_fill(build_mask(T, X.device), float("-inf"))
    att = torch.softmax(att, dim=-1)
    return att @ v, att
'''

TILED_ONLINE = '''\
"""Keys in blocks with a running max and sum (an online softmax, as fused kernels stream it)."""

import math

import torch

BLOCK = 3


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    q = (X @ W_Q) / math.sqrt(W_Q.shape[1])
    k, v = X @ W_K, X @ W_V
    pos = torch.arange(T, device=X.device)
    m = torch.full((B, T, 1), float("-inf"), dtype=X.dtype, device=X.device)  # running row max
    l = torch.zeros(B, T, 1, dtype=X.dtype, device=X.device)  # running row sum
    acc = torch.zeros(B, T, v.shape[-1], dtype=X.dtype, device=X.device)
    for start in range(0, T, BLOCK):
        stop = min(start + BLOCK, T)
        s = q @ k[:, start:stop].transpose(1, 2)  # (B, T, block)
        if causal:
            s = s.masked_fill(pos[start:stop][None, :] > pos[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        correction = torch.exp(m - m_new)
        l = l * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ v[:, start:stop]
        m = m_new
    scores = q @ k.transpose(1, 2)
    if causal:
        scores = scores.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
    return acc / l, torch.exp(scores - m) / l
'''

VMAP_2D = '''\
"""A head for one sequence, mapped over the batch with torch.func.vmap."""

import math

import torch
from torch.func import vmap


def single(x, w_q, w_k, w_v, causal):
    T = x.shape[0]
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    s = q @ k.T / math.sqrt(w_k.shape[1])
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return p @ v, p


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    return vmap(lambda x: single(x, W_Q, W_K, W_V, causal))(X)
'''

UNBIND_STACK = '''\
"""Each sequence unbound from the batch, attended, and stacked back."""

import math

import torch


def attend_one(x, W_Q, W_K, W_V, causal):
    T = x.size(0)
    Q = x @ W_Q
    K = x @ W_K
    V = x @ W_V
    S = Q @ K.transpose(0, 1) / math.sqrt(K.size(1))
    if causal:
        S = S.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
    A = torch.softmax(S, dim=-1)
    return A @ V, A


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    pairs = [attend_one(x, W_Q, W_K, W_V, causal) for x in X.unbind(0)]
    return torch.stack([o for o, _ in pairs]), torch.stack([a for _, a in pairs])
'''

QUERY_CHUNKS = '''\
"""Queries in chunks of four rows, each chunk's mask offset by where it starts."""

import math

import torch

CHUNK = 4


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    cols = torch.arange(T, device=X.device)
    outs, weights = [], []
    for start in range(0, T, CHUNK):
        qc = q[:, start : start + CHUNK]  # (B, c, d_k)
        s = qc @ k.transpose(1, 2) / math.sqrt(k.shape[-1])  # (B, c, T)
        if causal:
            rows = torch.arange(start, start + qc.shape[1], device=X.device)
            s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
        p = torch.softmax(s, dim=-1)
        outs.append(p @ v)
        weights.append(p)
    return torch.cat(outs, dim=1), torch.cat(weights, dim=1)
'''

ROW_SOFTMAX_LOOP = '''\
"""The softmax taken row by row over the keys each query may read."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    scores = q @ k.transpose(1, 2) / math.sqrt(k.shape[-1])
    rows = []
    for i in range(T):
        if causal:
            r = torch.softmax(scores[:, i, : i + 1], dim=-1)  # (B, i + 1)
            r = torch.cat([r, r.new_zeros(B, T - r.shape[1])], dim=-1)
        else:
            r = torch.softmax(scores[:, i], dim=-1)
        rows.append(r)
    weights = torch.stack(rows, dim=1)
    return weights @ v, weights
'''

LOOPS = (
    Program("per_sequence", "loop", "torch", PER_SEQUENCE),
    Program("per_query_rows", "loop", "torch", PER_QUERY_ROWS),
    Program("double_loop", "loop", "torch", DOUBLE_LOOP),
    Program("loop_built_mask", "loop", "torch", LOOP_BUILT_MASK),
    Program("tiled_online", "tiled", "torch", TILED_ONLINE),
    Program("vmap_2d", "loop", "torch", VMAP_2D),
    Program("unbind_stack", "loop", "torch", UNBIND_STACK),
    Program("query_chunks", "loop", "torch", QUERY_CHUNKS),
    Program("row_softmax_loop", "loop", "torch", ROW_SOFTMAX_LOOP),
)
