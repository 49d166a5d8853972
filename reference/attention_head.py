"""One causal scaled-dot-product self-attention head (Lecture 4, Project Step 4).

Instructor reference. Every function cites the lecture result it implements:
the head is Definition 2.2 with the causal mask of Definition 4.1, its rows lie in
the simplex (Proposition 3.1), and the scores are divided by sqrt(d_k) (Lemma 5.5).
The optional extensions are the streaming softmax of Aside 8.1 and the KV cache of
Section 8.1. Shapes: B batch, T positions, d model width, d_k query/key width,
d_v value width.
"""

from __future__ import annotations

import math

import torch


def causal_self_attention(
    X: torch.Tensor,
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    causal: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One self-attention head: softmax(Q K^T / sqrt(d_k)) V (Definition 2.2).

    Args:
        X: (B, T, d) input streams.
        W_Q, W_K: (d, d_k) query and key projections.
        W_V: (d, d_v) value projection.
        causal: mask the scores above the diagonal to -inf before the softmax
            (Definition 4.1, Implementation aside 4.4); False gives the unmasked head.

    Returns:
        out: (B, T, d_v), row i is sum_j A_ij v_j.
        weights: (B, T, T), weights[b, i, j] = A_ij, the weight query i gives key j.
            Rows lie in the simplex (Proposition 3.1); with causal=True the strict
            upper triangle is exactly 0 and row 0 is (1, 0, ..., 0).

    Computes in the dtype of X, never modifies its inputs, and is differentiable
    in X and all three projections.
    """
    T = X.shape[1]
    d_k = W_Q.shape[1]
    q = X @ W_Q  # (B, T, d) x (d, d_k) -> (B, T, d_k)
    k = X @ W_K  # (B, T, d) x (d, d_k) -> (B, T, d_k)
    v = X @ W_V  # (B, T, d) x (d, d_v) -> (B, T, d_v)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)  # (B, T, d_k) x (B, d_k, T) -> (B, T, T), Lemma 5.5
    if causal:
        future = torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)  # (T, T), True where j > i
        att = att.masked_fill(future, float("-inf"))  # (B, T, T), exp(-inf) = 0 exactly
    att = torch.softmax(att, dim=-1)  # (B, T, T), rows in the simplex; stable (subtracts the row max)
    out = att @ v  # (B, T, T) x (B, T, d_v) -> (B, T, d_v)
    return out, att


def gaussian_positional_weights(T: int, bandwidth: float) -> torch.Tensor:
    """Masked Gaussian positional kernel (Example 7.4, Exercise 7).

    Returns the (T, T) float64 matrix with A_ij proportional to
    exp(-(i - j)^2 / (2 h^2)) for j <= i, 0 for j > i, each row summing to 1.
    The limits are exact: h -> 0 (including h = 0) gives the identity, h -> inf the
    running mean over the prefix.
    """
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    lag = pos[:, None] - pos[None, :]  # (T, T), i - j
    # (lag / h)^2 instead of lag^2 / h^2: h^2 underflows for tiny h; the diagonal is 0 even for h = 0.
    logit = torch.where(lag == 0, 0.0, -0.5 * (lag / bandwidth) ** 2)  # (T, T)
    logit = logit.masked_fill(lag < 0, float("-inf"))  # (T, T), Definition 4.1
    return torch.softmax(logit, dim=-1)  # (T, T)


def gaussian_positional_qk(T: int, bandwidth: float) -> tuple[torch.Tensor, torch.Tensor]:
    """2-D queries and keys whose causal attention is the Gaussian kernel (Example 7.4).

    Derivation: -(i - j)^2 / (2 h^2) = -i^2 / (2 h^2) + i j / h^2 - j^2 / (2 h^2).
    The first term is constant along row i, and the softmax ignores it (Proposition 5.1).
    The rest is <q_i, k_j> / sqrt(2) for q_i = sqrt(2) (i, 1) / h and k_j = (j, -j^2 / 2) / h,
    so causal_self_attention with d_k = 2 reproduces gaussian_positional_weights(T, h).

    Returns:
        Q, K: each (T, 2) float64; requires h > 0.
    """
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    Q = math.sqrt(2.0) * torch.stack([pos, torch.ones_like(pos)], dim=-1) / bandwidth  # (T, 2)
    K = torch.stack([pos, -0.5 * pos**2], dim=-1) / bandwidth  # (T, 2)
    return Q, K


def score_scale_statistics(d_k: int, T: int = 64, n_samples: int = 200, seed: int = 0) -> dict[str, float]:
    """Raw versus scaled score statistics (Exercise 3, Lemma 5.5).

    Draws unit-variance Gaussian Q then K, each (n_samples, T, d_k) float64, from
    torch.Generator().manual_seed(seed), and forms raw scores S = Q K^T. Only the causal
    entries (j <= i) are used.

    Returns:
        raw_std: std of the raw scores, about sqrt(d_k) (Lemma 5.5).
        scaled_std: std of S / sqrt(d_k), about 1.
        raw_max_weight, scaled_max_weight: median over all rows of all samples of the
            largest causal softmax weight in the row, for raw and scaled scores.
    """
    gen = torch.Generator().manual_seed(seed)
    Q = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)  # (n, T, d_k)
    K = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)  # (n, T, d_k)
    raw = Q @ K.transpose(-2, -1)  # (n, T, d_k) x (n, d_k, T) -> (n, T, T)
    scaled = raw / math.sqrt(d_k)  # (n, T, T)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T), True where j <= i

    def max_weight(S: torch.Tensor) -> float:
        A = torch.softmax(S.masked_fill(~allowed, float("-inf")), dim=-1)  # (n, T, T)
        return torch.quantile(A.amax(dim=-1).flatten(), 0.5).item()  # median of n*T row maxima

    return {
        "raw_std": raw[:, allowed].std().item(),
        "scaled_std": scaled[:, allowed].std().item(),
        "raw_max_weight": max_weight(raw),
        "scaled_max_weight": max_weight(scaled),
    }


def streaming_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, block_size: int, causal: bool = True
) -> torch.Tensor:
    """Optional. Attention over key/value blocks with a running softmax (Aside 8.1).

    Args:
        Q, K: (B, T, d_k) projected queries and keys; V: (B, T, d_v) values.
        block_size: keys per block (>= 1, need not divide T).
        causal: as in causal_self_attention.

    Returns:
        out: (B, T, d_v), equal to the dense head's output up to rounding. Never holds
        more than a (B, T, block_size) block of scores.

    Keeps a running max m, a rescaled denominator denom and numerator acc; when a
    block raises the max, the old denom and acc are multiplied by exp(m_old - m_new).
    fp16/bf16 inputs are accumulated in float32 and the result cast back.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    B, T, d_k = Q.shape
    dtype = Q.dtype
    work = torch.promote_types(dtype, torch.float32)  # float64 stays float64
    Q, K, V = Q.to(work), K.to(work), V.to(work)  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
    rows = torch.arange(T, device=Q.device)[:, None]  # (T, 1), query positions
    m = Q.new_full((B, T, 1), float("-inf"))  # (B, T, 1) running max
    denom = Q.new_zeros((B, T, 1))  # (B, T, 1) running sum of exp(s - m)
    acc = Q.new_zeros((B, T, V.shape[-1]))  # (B, T, d_v) running sum of exp(s - m) v
    for start in range(0, T, block_size):
        kb = K[:, start : start + block_size]  # (B, b, d_k)
        vb = V[:, start : start + block_size]  # (B, b, d_v)
        s = (Q @ kb.transpose(-2, -1)) / math.sqrt(d_k)  # (B, T, d_k) x (B, d_k, b) -> (B, T, b)
        if causal:
            cols = torch.arange(start, start + kb.shape[1], device=Q.device)[None, :]  # (1, b), key positions
            s = s.masked_fill(cols > rows, float("-inf"))  # (B, T, b)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (B, T, 1)
        # a row with nothing visible yet has m_new = -inf; shift by 0 there to avoid exp(-inf - -inf) = NaN
        shift = m_new.masked_fill(m_new == float("-inf"), 0.0)  # (B, T, 1)
        rescale = torch.exp(m - shift)  # (B, T, 1), exp(m_old - m_new) <= 1
        p = torch.exp(s - shift)  # (B, T, b), 0 where masked
        denom = rescale * denom + p.sum(dim=-1, keepdim=True)  # (B, T, 1)
        acc = rescale * acc + p @ vb  # (B, T, b) x (B, b, d_v) -> (B, T, d_v)
        m = m_new
    return (acc / denom).to(dtype)  # (B, T, d_v)


class KVCache:
    """Optional. The keys and values of every position seen so far (Section 8.1).

    keys is (B, t, d_k) and values (B, t, d_v) after t positions; both are None
    before the first position. len(cache) == t.
    """

    def __init__(self) -> None:
        self._keys: torch.Tensor | None = None  # (B, t, d_k)
        self._values: torch.Tensor | None = None  # (B, t, d_v)

    @property
    def keys(self) -> torch.Tensor | None:
        return self._keys

    @property
    def values(self) -> torch.Tensor | None:
        return self._values

    def __len__(self) -> int:
        return 0 if self._keys is None else self._keys.shape[1]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Append one position: k (B, d_k), v (B, d_v). A helper; the grader does not call it."""
        k, v = k[:, None], v[:, None]  # (B, 1, d_k), (B, 1, d_v)
        self._keys = k if self._keys is None else torch.cat([self._keys, k], dim=1)  # (B, t+1, d_k)
        self._values = v if self._values is None else torch.cat([self._values, v], dim=1)  # (B, t+1, d_v)


def cached_attention_step(
    x_t: torch.Tensor, cache: KVCache, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor
) -> torch.Tensor:
    """Optional. One generation step of the causal head with a KV cache (Section 8.1).

    Args:
        x_t: (B, d) the new position's input row.
        cache: the keys and values of the earlier positions; this position's are appended.
        W_Q, W_K: (d, d_k); W_V: (d, d_v).

    Returns:
        (B, d_v), the causal head's output row for the new position: it attends to
        every cached position and itself, at O(t d_k + t d_v) cost.
    """
    d_k = W_Q.shape[1]
    q = x_t @ W_Q  # (B, d) x (d, d_k) -> (B, d_k)
    cache.append(x_t @ W_K, x_t @ W_V)  # (B, d_k), (B, d_v) -> cache (B, t, d_k), (B, t, d_v)
    k, v = cache.keys, cache.values  # (B, t, d_k), (B, t, d_v), this position included
    s = q[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, 1, d_k) x (B, d_k, t) -> (B, 1, t)
    w = torch.softmax(s, dim=-1)  # (B, 1, t)
    return (w @ v)[:, 0]  # (B, 1, t) x (B, t, d_v) -> (B, d_v)
