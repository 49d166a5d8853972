"""Imports a helper module handed in next to it."""

import helpers


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    return helpers.double(X), X
