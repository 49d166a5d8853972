"""A Flax-style port: the mask is made by a helper as a (B, 1, T, T) tensor from a comparison of positions, then
applied with ``torch.where`` and the dtype's most negative number. The comparison is ``>=`` where ``>`` belongs (each
query is kept from itself): the line to edit is the one that makes the mask, not the ``where`` that applies it."""

import torch


def causal_mask(batch, length, device):
    pos = torch.arange(length, device=device).expand(batch, length)
    allowed = pos[:, :, None] > pos[:, None, :]
    return allowed[:, None, :, :]


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, _ = X.shape
    q = (X @ W_Q)[:, None]  # (B, 1, T, d_k)
    k = (X @ W_K)[:, None]
    v = (X @ W_V)[:, None]
    logits = q @ k.transpose(-1, -2) / W_Q.shape[1] ** 0.5
    if causal:
        logits = torch.where(causal_mask(B, T, X.device), logits, torch.finfo(logits.dtype).min)
    probs = torch.softmax(logits, dim=-1)
    return (probs @ v)[:, 0], probs[:, 0]
