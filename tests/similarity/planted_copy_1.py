"""Project Step 4: my attention head (single head, decoder style)."""

import torch
import torch.nn as nn
from torch.nn import functional as F

p_drop = 0.2


class AttnHead(nn.Module):
    """A single causal attention head."""

    def __init__(self, width, qk_size, max_len, v_size=None):
        super().__init__()
        self.query = nn.Linear(width, qk_size, bias=False)
        self.key = nn.Linear(width, qk_size, bias=False)
        self.value = nn.Linear(width, v_size or qk_size, bias=False)
        self.drop = nn.Dropout(p_drop)
        # lower-triangular matrix: position i may look at j <= i
        self.register_buffer("lower", torch.tril(torch.ones(max_len, max_len)))

    def forward(self, inp):
        N, L, D = inp.shape
        queries = self.query(inp)  # N x L x qk
        keys = self.key(inp)  # N x L x qk
        values = self.value(inp)  # N x L x v
        # similarity of every query with every key, scaled
        att = queries @ keys.transpose(-2, -1) * D**-0.5
        # hide the future
        att = att.masked_fill(self.lower[:L, :L] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.drop(att)
        result = att @ values  # mix the values
        return result, att


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    N, L, D = X.shape
    module = AttnHead(D, W_Q.shape[1], L, W_V.shape[1])
    # Linear layers store the transpose of the projection matrix
    weights = {"key.weight": W_K.T, "query.weight": W_Q.T, "value.weight": W_V.T}
    return torch.func.functional_call(module, weights, (X,))


def gaussian_positional_weights(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    lag = pos[:, None] - pos[None, :]  # (T, T), i - j
    logit = torch.where(lag == 0, 0.0, -0.5 * (lag / bandwidth) ** 2)  # (T, T)
    logit = logit.masked_fill(lag < 0, float("-inf"))  # (T, T)
    return torch.softmax(logit, dim=-1)


def gaussian_positional_qk(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    Q = 2.0**0.5 * torch.stack([pos, torch.ones_like(pos)], dim=-1) / bandwidth  # (T, 2)
    K = torch.stack([pos, -0.5 * pos**2], dim=-1) / bandwidth  # (T, 2)
    return Q, K


def score_scale_statistics(d_k, T=64, n_samples=200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Q = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)
    K = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)
    raw = Q @ K.transpose(-2, -1)  # (n, T, T)
    scaled = raw / d_k**0.5
    allowed = torch.ones(T, T, dtype=torch.bool).tril()

    def max_weight(S):
        A = torch.softmax(S.masked_fill(~allowed, float("-inf")), dim=-1)
        return torch.quantile(A.amax(dim=-1).flatten(), 0.5).item()

    return {
        "raw_std": raw[:, allowed].std().item(),
        "scaled_std": scaled[:, allowed].std().item(),
        "raw_max_weight": max_weight(raw),
        "scaled_max_weight": max_weight(scaled),
    }
