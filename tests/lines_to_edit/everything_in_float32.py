"""A notebook head casting everything with .float(), scaling by d_k and masking the zeros of tril(scores) (written for
the grader by someone who had not read it)."""

import torch
import torch.nn.functional as F


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    X = X.float()
    Q = X @ W_Q.float()
    K = X @ W_K.float()
    V = X @ W_V.float()
    d_k = K.shape[-1]
    att = Q @ K.transpose(-2, -1) / d_k
    if causal:
        att = torch.tril(att)
        att[att == 0] = float("-inf")
    att = F.softmax(att, dim=-1)
    return att @ V, att
