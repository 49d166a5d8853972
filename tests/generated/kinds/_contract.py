"""The calling contract (Section 9.1) and what a call does beside its results: dtypes, dropout left on, inputs
changed or cut from the graph, printing, seeding, writing files, changing torch's default dtype."""

from __future__ import annotations

from . import E, Kind

SM = "weights = torch.softmax(scores, dim=-1)\n"  # inline_steps and others: a line to add another after
IMPORT = "import math\n\nimport torch\n"  # inline_steps and others: module-level statements follow it

_DTYPES = (
    Kind(
        "mask_dtype_promotion",
        "precision",
        "a mask or bias in another dtype than the scores (it promotes them: half precision breaks)",
        ("unsupported_dtype",),
        (
            E("the cast to the scores' dtype dropped", ("self.bias[:T, :T].to(att.dtype)", "self.bias[:T, :T]")),
            E("a NumPy float64 bias", (".to(dtype=X.dtype, device=X.device)", ".to(device=X.device)")),
            E(
                "made in the default dtype",
                ('float("-inf"), dtype=dtype, device=device).triu(1)', 'float("-inf"), device=device).triu(1)'),
            ),
            E(
                "made in the default dtype",
                ('float("-inf"), dtype=X.dtype, device=X.device).triu(1)', 'float("-inf"), device=X.device).triu(1)'),
            ),
            E(
                "made in the default dtype",
                ("torch.zeros(T, T, dtype=S.dtype, device=S.device)", "torch.zeros(T, T, device=S.device)"),
            ),
        ),
    ),
    Kind(
        "output_dtype_slip",
        "precision",
        "the output returned in float32 whatever the input's dtype",
        ("output_dtype",),
        (
            E(".float() on the way out", ("return output, weights", "return output.float(), weights")),
            E(
                ".float() on the way out",
                ("return attn @ v, attn\n", "return (attn @ v).float(), attn\n"),
                only="named_widths",
            ),
            E(
                ".to(torch.float32)",
                ("return weights @ v, weights\n", "return (weights @ v).to(torch.float32), weights\n"),
                only="helpers",
            ),
            E(
                ".to(torch.float32)",
                ("return a @ v, a\n", "return (a @ v).to(torch.float32), a\n"),
                only="per_sequence",
            ),
            E(
                "an accumulator in the default dtype",
                (
                    "acc = torch.zeros(B, T, v.shape[-1], dtype=X.dtype, device=X.device)",
                    "acc = torch.zeros(B, T, v.shape[-1], device=X.device)",
                ),
            ),
            E(
                "an accumulator in the default dtype",
                ("out = attn @ v\n", "out = torch.zeros(*attn.shape[:-1], v.shape[-1]) + attn @ v\n"),
            ),
        ),
    ),
)

_DROPOUT = (
    Kind(
        "dropout_on",
        "dropout",
        "attention dropout left on (a module in training mode, or functional dropout whose training flag is True)",
        ("dropout_left_on",),
        (
            E(
                "a Dropout module in training mode",
                ("dropout=0.0)\n    params", "dropout=0.1)\n    params"),
                only="book_scaled_in_init",
            ),
            E("a Dropout module in training mode", ("nn.Dropout(p=0.0)", "nn.Dropout(p=0.1)")),
            E("functional dropout, training left at its default", ('"dropout": 0.0', '"dropout": 0.1')),
            E(
                "functional dropout, training left at its default",
                ("    " + SM, "    " + SM + "    weights = torch.nn.functional.dropout(weights, p=0.1)\n"),
                only="inline_steps",
            ),
            E(
                "functional dropout, training left at its default",
                ("    dropout: float = 0.0\n", "    dropout: float = 0.1\n"),
            ),
            E(
                "torch.dropout with train=True",
                ("X @ W_V, is_causal=causal)", "X @ W_V, is_causal=causal, dropout_p=0.1)"),
            ),
            E(
                "torch.dropout with train=True",
                (
                    "    " + SM + "    return",
                    "    " + SM + "    weights = torch.dropout(weights, 0.1, True)\n    return",
                ),
                only="helpers",
            ),
        ),
    ),
    Kind(
        "output_dropout",
        "dropout",
        "dropout on the output (a second dropout, after the weights)",
        ("dropout_left_on",),
        (
            E(
                "functional, on the output",
                ("output = weights @ values", "output = torch.nn.functional.dropout(weights @ values, p=0.1)"),
            ),
            E(
                "functional, on the output",
                (
                    "return torch.matmul(attn, values), attn",
                    "return torch.nn.functional.dropout(torch.matmul(attn, values), 0.1), attn",
                ),
            ),
            E(
                "a Dropout module made in the call",
                ("return weights @ v, weights\n", "return torch.nn.Dropout(0.1)(weights @ v), weights\n"),
                only="helpers",
            ),
            E(
                "a Dropout module made in the call",
                ("return a @ v, a\n", "return torch.nn.Dropout(0.1)(a @ v), a\n"),
                only="per_sequence",
            ),
            E("torch.dropout with train=True", ("out = attn @ v\n", "out = torch.dropout(attn @ v, 0.1, True)\n")),
        ),
    ),
)

_GRAPH = (
    Kind(
        "inplace_input",
        "contract",
        "an input changed in place (the scale folded into W_Q)",
        ("inplace_input_mutation",),
        (
            E("div_", ("q = (X @ W_Q) / math.sqrt(W_Q.shape[1])", "q = X @ W_Q.div_(math.sqrt(W_Q.shape[1]))")),
            E(
                "/=",
                (
                    "    q = (X @ W_Q) / math.sqrt(W_Q.shape[1])\n",
                    "    W_Q /= math.sqrt(W_Q.shape[1])\n    q = X @ W_Q\n",
                ),
            ),
            E(
                "mul_ in the constructor",
                ("        self.W_Q = W_Q\n", "        self.W_Q = W_Q.mul_(1.0 / math.sqrt(W_Q.shape[1]))\n"),
                (" * self.inv_sqrt_dk\n", "\n"),
            ),
        ),
    ),
    Kind(
        "detached",
        "contract",
        "a projection cut from the autograd graph (.detach(), .data): no gradient reaches it",
        ("inputs_cut_from_graph", "no_autograd_graph"),
        (
            E(".detach() on a product", ("keys = X @ W_K\n", "keys = (X @ W_K).detach()\n")),
            E(".detach() on a product", ("keys = torch.matmul(X, W_K)", "keys = torch.matmul(X, W_K).detach()")),
            E(".detach() on a product", ("k = X @ W_K\n", "k = (X @ W_K).detach()\n")),
            E(".data", ("def project(x, w):\n    return x @ w\n", "def project(x, w):\n    return x @ w.data\n")),
            E(".data", ("k = x @ w_k  # (T, d_k)", "k = x @ w_k.data  # (T, d_k)")),
            E("a detached binding", ('"key.weight": W_K.t()', '"key.weight": W_K.t().detach()')),
            E("a detached binding", ('"k_proj.weight": W_K.T', '"k_proj.weight": W_K.T.detach()')),
        ),
    ),
)

_EFFECTS = (
    Kind(
        "prints_each_call",
        "effects",
        "prints on every call",
        (),
        (
            E("a shape", ("    " + SM, "    " + SM + '    print("scores", scores.shape)\n'), only="inline_steps"),
            E("a shape", ("        B, T, C = x.shape\n", "        B, T, C = x.shape\n        print(x.shape)\n")),
            E(
                "the values",
                ("    return weights @ v, weights\n", "    print(weights)\n    return weights @ v, weights\n"),
                only="helpers",
            ),
            E(
                "the values",
                ("    a = torch.softmax(scores, dim=1)\n", "    a = torch.softmax(scores, dim=1)\n    print(a)\n"),
            ),
            E(
                "an f-string",
                (
                    "    q, k, v = X @ W_Q, X @ W_K, X @ W_V\n",
                    '    q, k, v = X @ W_Q, X @ W_K, X @ W_V\n    print(f"{q.shape=} {k.shape=} {v.shape=}")\n',
                ),
                only=("arange_compare", "own_softmax", "tiled_online"),
            ),
        ),
        finding=(("stage", "call"), ("what", "prints")),
    ),
    Kind(
        "seeds_global_rng",
        "effects",
        "seeds the global random state (at import or on every call)",
        (),
        (
            E(
                "torch.manual_seed at import",
                (IMPORT, IMPORT + "\ntorch.manual_seed(0)\n"),
                only=("inline_steps", "arange_compare", "named_widths"),
            ),
            E(
                "torch.manual_seed on every call",
                ("    q, k, v = " + "project(X, W_Q)", "    torch.manual_seed(1234)\n    q, k, v = project(X, W_Q)"),
            ),
            E(
                "torch.manual_seed on every call",
                (
                    "        super().__init__()\n        self.query",
                    "        super().__init__()\n        torch.manual_seed(42)\n        self.query",
                ),
            ),
            E(
                "np.random.seed",
                (
                    "    d_k = W_Q.shape[1]\n    q, k, v = X @ W_Q",
                    "    np.random.seed(0)\n    d_k = W_Q.shape[1]\n    q, k, v = X @ W_Q",
                ),
                only="numpy_bool_mask",
            ),
            E(
                "np.random.seed",
                ("import numpy as np\nimport torch\n", "import numpy as np\nimport torch\n\nnp.random.seed(42)\n"),
                only="numpy_bias",
            ),
        ),
        finding=(("stage", "call"), ("what", "seeds the global random state")),
    ),
    Kind(
        "writes_file",
        "effects",
        "writes a file on every call",
        (),
        (
            E(
                "torch.save",
                ("    " + SM, "    " + SM + '    torch.save(weights, "attention_weights.pt")\n'),
                only="inline_steps",
            ),
            E(
                "torch.save",
                (
                    "        att = F.softmax(att, dim=-1)\n",
                    '        att = F.softmax(att, dim=-1)\n        torch.save(att.detach(), "att.pt")\n',
                ),
            ),
            E(
                "np.save",
                (
                    "        scores = scores + torch.from_numpy(bias)",
                    '        np.save("bias.npy", bias)\n        scores = scores + torch.from_numpy(bias)',
                ),
            ),
            E(
                "a log file",
                (
                    "    weights = torch.softmax(scores, dim=-1)\n    return weights @ v, weights\n",
                    "    weights = torch.softmax(scores, dim=-1)\n"
                    '    with open("attention.log", "a") as log:\n'
                    '        log.write(f"{tuple(scores.shape)}\\n")\n'
                    "    return weights @ v, weights\n",
                ),
                only="helpers",
            ),
            E(
                "a log file",
                (
                    "    a = torch.softmax(scores, dim=1)\n",
                    "    a = torch.softmax(scores, dim=1)\n"
                    '    with open("attention.log", "a") as log:\n'
                    "        print(a.shape, file=log)\n",
                ),
            ),
        ),
        finding=(("stage", "call"), ("what", "writes a file")),
    ),
    Kind(
        "sets_default_dtype",
        "effects",
        "changes torch's default dtype",
        (),
        (
            E(
                "at import",
                (IMPORT, IMPORT + "\ntorch.set_default_dtype(torch.float64)\n"),
                only=("inline_steps", "where_allowed", "named_widths"),
            ),
            E(
                "on every call",
                (
                    "    q, k, v = " + "project(X, W_Q)",
                    "    torch.set_default_dtype(torch.float64)\n    q, k, v = project(X, W_Q)",
                ),
            ),
            E(
                "on every call",
                (
                    "    T = X.shape[1]\n    q, k, v = X @ W_Q, X @ W_K, X @ W_V\n    s = q",
                    "    torch.set_default_dtype(torch.float64)\n"
                    "    T = X.shape[1]\n"
                    "    q, k, v = X @ W_Q, X @ W_K, X @ W_V\n"
                    "    s = q",
                ),
            ),
            E(
                "in the constructor",
                (
                    "        super().__init__()\n        self.query",
                    "        super().__init__()\n        torch.set_default_dtype(torch.float64)\n        self.query",
                ),
            ),
            E(
                "in the constructor",
                (
                    "        super().__init__()\n        self.W_query",
                    "        super().__init__()\n        torch.set_default_dtype(torch.float64)\n        self.W_query",
                ),
            ),
        ),
        finding=(("stage", "call"), ("what", "changes the default dtype")),
    ),
)

CONTRACT = (*_DTYPES, *_DROPOUT, *_GRAPH, *_EFFECTS)
