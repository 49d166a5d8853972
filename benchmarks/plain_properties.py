"""A plain, hand-written property script: what a student or TA would run instead of `grade`.

    python benchmarks/plain_properties.py path/to/attention_head.py

One process: import torch, import the head directly (no isolation), then about 18 checks on one seeded
case each, with bare asserts. It is the baseline `benchmarks/grade_bench.py` measures `grade` against;
it is deliberately *not* built from the grader's own check functions.
"""

from __future__ import annotations

import importlib.util
import math
import sys

import torch


def load(path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("attention_head", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(path: str) -> None:
    m = load(path)
    g = torch.Generator().manual_seed(0)
    B, T, d, d_k, d_v = 2, 8, 6, 4, 5
    X = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    W_Q, W_K, W_V = (torch.randn(d, n, generator=g, dtype=torch.float64) / math.sqrt(d) for n in (d_k, d_k, d_v))
    out, w = m.causal_self_attention(X, W_Q, W_K, W_V)
    assert out.shape == (B, T, d_v) and w.shape == (B, T, T)  # 1 shapes
    assert out.dtype == X.dtype  # 2 dtype
    assert (w >= 0).all() and torch.allclose(w.sum(-1), torch.ones(B, T, dtype=torch.float64))  # 3 rows
    assert (w.triu(1) == 0).all()  # 4 mask
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)
    exp = torch.softmax(s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), -1)
    assert torch.allclose(w, exp) and torch.allclose(out, exp @ v)  # 5 formula
    X2 = X.clone()
    X2[:, 4:] = torch.randn(B, T - 4, d, generator=g, dtype=torch.float64)
    assert torch.equal(m.causal_self_attention(X2, W_Q, W_K, W_V)[0][:, :4], out[:, :4])  # 6 future
    Xg = X.clone().requires_grad_(True)
    o, _ = m.causal_self_attention(Xg, W_Q, W_K, W_V)
    (gx,) = torch.autograd.grad(o[:, 2].sum(), Xg)
    assert (gx[:, 3:] == 0).all()  # 7 gradient blocks
    perm = torch.randperm(T, generator=g)
    o1, _ = m.causal_self_attention(X, W_Q, W_K, W_V, causal=False)
    o2, _ = m.causal_self_attention(X[:, perm], W_Q, W_K, W_V, causal=False)
    assert torch.allclose(o2, o1[:, perm])  # 8 equivariance
    assert torch.equal(m.causal_self_attention(X[:1], W_Q, W_K, W_V)[0][0], out[0]) or torch.allclose(
        m.causal_self_attention(X[:1], W_Q, W_K, W_V)[0][0], out[0]
    )  # 9 batch
    assert torch.equal(m.causal_self_attention(X, W_Q, W_K, W_V)[0], out)  # 10 determinism
    o16, w16 = m.causal_self_attention(*(t.half() for t in (X, W_Q, W_K, W_V)))
    assert torch.isfinite(o16).all() and torch.allclose(o16.double(), out, atol=2e-2)  # 11 float16
    big = m.causal_self_attention(100 * X, W_Q, W_K, W_V)[1]
    assert torch.isfinite(big).all() and (big.triu(1) == 0).all()  # 12 huge scores
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    assert torch.allclose(out, sdpa(q, k, v, is_causal=True))  # 13 fused kernel
    K8 = m.gaussian_positional_weights(8, 2.0)
    i = torch.arange(8, dtype=torch.float64)
    future = torch.ones(8, 8, dtype=torch.bool).triu(1)
    ker = torch.softmax((-((i[:, None] - i) ** 2) / 8).masked_fill(future, -math.inf), -1)
    assert torch.allclose(K8, ker)  # 14 Gaussian kernel
    assert torch.allclose(m.gaussian_positional_weights(8, 1e-3), torch.eye(8, dtype=torch.float64))  # 15 limit
    Q2, K2 = m.gaussian_positional_qk(8, 2.0)
    s2 = (Q2 @ K2.T / math.sqrt(2)).masked_fill(future, -math.inf)
    assert torch.allclose(torch.softmax(s2, -1), ker)  # 16 Gaussian q/k
    for dk in (16, 64):
        st = m.score_scale_statistics(dk, T=32, n_samples=50, seed=0)
        assert abs(st["raw_std"] / math.sqrt(dk) - 1) < 0.1 and abs(st["scaled_std"] - 1) < 0.1  # 17, 18 Ex. 3
    print("all properties hold")


if __name__ == "__main__":
    main(sys.argv[1])
