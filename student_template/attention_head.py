"""One causal scaled-dot-product self-attention head (Lecture 4, Project Step 4).

Your implementation. Replace every `raise NotImplementedError(...)` with code.
Write a shape comment beside every tensor line, e.g. `att = q @ k.transpose(-2, -1)  # (B, T, T)`.
Shapes: B batch, T positions, d model width, d_k query/key width, d_v value width.

Required: causal_self_attention, gaussian_positional_weights, gaussian_positional_qk,
score_scale_statistics. Optional extensions: streaming_attention, KVCache and
cached_attention_step.
Do not call torch.nn.functional.scaled_dot_product_attention or torch.nn.MultiheadAttention.
"""

from __future__ import annotations

import math  # noqa: F401  (for math.sqrt)

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
    raise NotImplementedError("causal_self_attention: project, scale the scores, mask, softmax, average")


def gaussian_positional_weights(T: int, bandwidth: float) -> torch.Tensor:
    """Masked Gaussian positional kernel (Example 7.4, Exercise 7).

    Returns the (T, T) float64 matrix with A_ij proportional to
    exp(-(i - j)^2 / (2 h^2)) for j <= i, 0 for j > i, each row summing to 1.
    The limits are exact: h -> 0 (including h = 0) gives the identity, h -> inf the
    running mean over the prefix.
    """
    raise NotImplementedError("gaussian_positional_weights: build the masked kernel and normalise its rows")


def gaussian_positional_qk(T: int, bandwidth: float) -> tuple[torch.Tensor, torch.Tensor]:
    """2-D queries and keys whose causal attention is the Gaussian kernel (Example 7.4).

    Derivation: -(i - j)^2 / (2 h^2) = -i^2 / (2 h^2) + i j / h^2 - j^2 / (2 h^2).
    The first term is constant along row i, and the softmax ignores it (Proposition 5.1).
    Choose q_i, k_j in R^2 so that <q_i, k_j> / sqrt(2) equals the rest for every i, j; then
    causal_self_attention with d_k = 2 reproduces gaussian_positional_weights(T, h).

    Returns:
        Q, K: each (T, 2) float64; requires h > 0.
    """
    raise NotImplementedError("gaussian_positional_qk: write q_i and k_j from your derivation")


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
    raise NotImplementedError("score_scale_statistics: draw Q and K with a seeded torch.Generator")


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
    raise NotImplementedError("streaming_attention is optional")


class KVCache:
    """Optional. The keys and values of every position seen so far (Section 8.1).

    keys is (B, t, d_k) and values (B, t, d_v) after t positions; both are None
    before the first position. len(cache) == t.
    """

    def __init__(self) -> None:
        raise NotImplementedError("KVCache is optional")

    @property
    def keys(self) -> torch.Tensor | None:
        raise NotImplementedError("KVCache is optional")

    @property
    def values(self) -> torch.Tensor | None:
        raise NotImplementedError("KVCache is optional")

    def __len__(self) -> int:
        raise NotImplementedError("KVCache is optional")

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Append one position: k (B, d_k), v (B, d_v). A helper; the grader does not call it."""
        raise NotImplementedError("KVCache is optional")


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
    raise NotImplementedError("cached_attention_step is optional")
