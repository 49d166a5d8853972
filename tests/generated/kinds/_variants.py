"""Research variants written where the lecture's head is asked for: a sliding window, a distance bias, rotary
position embeddings. No catalog id names them; a right diagnosis says what they compute."""

from __future__ import annotations

from . import E, Kind

HELPER_TRIU = "mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)\n"
ROTATE_HALF = (
    "    pos = torch.arange(T, dtype=X.dtype, device=X.device)[:, None]\n"
    "    angle = pos * 10000 ** (-torch.arange(0, d_k, 2, dtype=X.dtype, device=X.device) / d_k)\n"
    "    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)\n"
    "    queries = queries * cos + torch.cat([-queries[..., d_k // 2 :], queries[..., : d_k // 2]], -1) * sin\n"
    "    keys = keys * cos + torch.cat([-keys[..., d_k // 2 :], keys[..., : d_k // 2]], -1) * sin\n"
)
ROTATE_PAIRS = (
    "def rotate(x):\n"
    "    T, d = x.shape[-2], x.shape[-1]\n"
    "    pos = torch.arange(T, dtype=x.dtype, device=x.device)[:, None]\n"
    "    theta = pos * 10000 ** (-torch.arange(0, d, 2, dtype=x.dtype, device=x.device) / d)\n"
    "    x1, x2 = x[..., 0::2], x[..., 1::2]\n"
    "    return torch.stack([x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()], "
    "-1).flatten(-2)\n"
    "\n\n"
)
ROTATE_COMPLEX = (
    "    angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * 10000 ** (\n"
    "        -torch.arange(0, d_head, 2, dtype=torch.float64) / d_head\n"
    "    )\n"
    "    turn = torch.polar(torch.ones_like(angle), angle)\n"
    "    q = torch.view_as_real(torch.view_as_complex(q.double().unflatten(-1, (-1, "
    "2))) * turn).flatten(-2).to(q.dtype)\n"
    "    k = torch.view_as_real(torch.view_as_complex(k.double().unflatten(-1, (-1, "
    "2))) * turn).flatten(-2).to(k.dtype)\n"
)

VARIANTS = (
    Kind(
        "sliding_window",
        "mask",
        "a sliding window: each query reads only its last 4 keys",
        (),
        (
            E("a band by comparison", ("col > row, -math.inf", "(col > row) | (row - col >= 4), -math.inf")),
            E("a band by comparison", ("if causal and j > i:", "if causal and (j > i or i - j >= 4):")),
            E(
                "tril then triu",
                (
                    "torch.tril(torch.ones(T, T, device=X.device)) == 0",
                    "torch.tril(torch.ones(T, T, device=X.device)).triu(-3) == 0",
                ),
            ),
            E(
                "tril then triu",
                (
                    "torch.tril(torch.ones(block_size, block_size))",
                    "torch.tril(torch.ones(block_size, block_size)).triu(-3)",
                ),
            ),
            E(
                "tril then triu",
                ("dtype=torch.bool, device=X.device).tril()\n", "dtype=torch.bool, device=X.device).tril().triu(-3)\n"),
            ),
            E(
                "two triangles",
                (
                    HELPER_TRIU,
                    HELPER_TRIU[:-1]
                    + " | torch.tril(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=-4)\n",
                ),
            ),
            E(
                "two triangles",
                ("mask[i, i + 1 :] = True", "mask[i, i + 1 :] = True\n        mask[i, : max(i - 3, 0)] = True"),
            ),
        ),
        finding=(("stage", "masked"), ("what", "a sliding window")),
    ),
    Kind(
        "distance_bias",
        "scale",
        "a bias on the scores that falls with the distance to the key (ALiBi-style)",
        (),
        (
            E(
                "the distance clamped",
                (
                    "    col = torch.arange(T, device=X.device).unsqueeze(0)\n",
                    "    col = torch.arange(T, device=X.device).unsqueeze(0)\n"
                    "    scores = scores - 0.5 * (row - col).clamp(min=0).to(scores.dtype)\n",
                ),
            ),
            E(
                "the distance's absolute value",
                (
                    "    scores = scores / math.sqrt(d_k)\n",
                    "    scores = scores / math.sqrt(d_k)\n"
                    "    scores = scores - 0.25 * (torch.arange(T)[:, None] - torch.arange(T)[None, "
                    ":]).abs().to(scores.dtype)\n",
                ),
            ),
            E(
                "the distance's absolute value",
                (
                    "    scores = scores / math.sqrt(k.shape[1])\n",
                    "    scores = scores / math.sqrt(k.shape[1])\n"
                    "    n = x.shape[0]\n"
                    "    scores = scores - 0.25 * (torch.arange(n)[:, None] - torch.arange(n)[None, "
                    ":]).abs().to(scores.dtype)\n",
                ),
            ),
            E(
                "a helper's bias",
                (
                    "def attend(q, k, v, mask=None):\n",
                    "def alibi(T, slope=0.5):\n"
                    "    pos = torch.arange(T)\n"
                    "    return -slope * (pos[:, None] - pos[None, :]).clamp(min=0)\n"
                    "\n"
                    "\n"
                    "def attend(q, k, v, mask=None):\n",
                ),
                (
                    "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n",
                    "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"
                    "    scores = scores + alibi(scores.shape[-1]).to(scores.dtype)\n",
                ),
            ),
        ),
        finding=(("stage", "scaled"), ("what", "a bias that falls with distance")),
    ),
    Kind(
        "rotary",
        "keys",
        "rotary position embeddings applied to the queries and keys",
        (),
        (
            E("rotate-half", ("    values = X @ W_V\n", "    values = X @ W_V\n" + ROTATE_HALF), only="inline_steps"),
            E(
                "interleaved pairs in a helper",
                ("def attend(q, k, v, mask=None):\n", ROTATE_PAIRS + "def attend(q, k, v, mask=None):\n"),
                (
                    "    mask = causal_mask(X.shape[1], X.device)",
                    "    q, k = rotate(q), rotate(k)\n    mask = causal_mask(X.shape[1], X.device)",
                ),
            ),
            E(
                "interleaved pairs in a helper",
                ("def head_2d(x, w_q, w_k, w_v, causal):\n", ROTATE_PAIRS + "def head_2d(x, w_q, w_k, w_v, causal):\n"),
                (
                    "    scores = q @ k.T  # (T, T)\n",
                    "    q, k = rotate(q), rotate(k)\n    scores = q @ k.T  # (T, T)\n",
                ),
            ),
            E(
                "complex numbers",
                (
                    "    v = X @ W_V  # (batch, seq_len, d_value)\n",
                    "    v = X @ W_V  # (batch, seq_len, d_value)\n" + ROTATE_COMPLEX,
                ),
            ),
        ),
        finding=(("stage", "Q"), ("what", "rotary position embeddings")),
    ),
)
