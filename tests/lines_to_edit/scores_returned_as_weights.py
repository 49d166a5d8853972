"""A course-skeleton head that returns the scores it softmaxed (masked with -1e9) where the weights belong; the
output itself is right."""

import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q = X @ W_Q
    k = X @ W_K
    v = X @ W_V
    att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
    if causal:
        T = X.shape[1]
        keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device))
        att = att.masked_fill(~keep, -1e9)
    weights = torch.softmax(att, dim=-1)
    out = weights @ v
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
