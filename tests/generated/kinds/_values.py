"""What is multiplied and returned (Definition 2.2): the projections, the product, the packed split, the weights
returned, and the shapes that only run at some widths."""

from __future__ import annotations

from . import E, Kind

GPT_MAP = '"query.weight": W_Q.t(), "key.weight": W_K.t(), "value.weight": W_V.t()'
HELPER_CALLS = "project(X, W_Q), project(X, W_K), project(X, W_V)"
IS_SCORES = "queries @ keys.transpose(1, 2)"

_PROJECTIONS = (
    Kind(
        "keys_from_wq",
        "keys",
        "the keys made with W_Q",
        ("keys_from_query_projection",),
        (
            E("W_Q in the keys' product", ("keys = X @ W_K\n", "keys = X @ W_Q\n")),
            E("W_Q in the keys' product", ("keys = torch.matmul(X, W_K)", "keys = torch.matmul(X, W_Q)")),
            E("W_Q in the keys' product", (HELPER_CALLS, "project(X, W_Q), project(X, W_Q), project(X, W_V)")),
            E("the queries reused", ("keys = X @ W_K\n", "keys = queries\n")),
            E("the queries reused", ("keys = X @ W_K  # (B, T, d_k)", "keys = queries  # (B, T, d_k)")),
            E("W_Q bound to the key projection", (GPT_MAP, GPT_MAP.replace("W_K.t()", "W_Q.t()"))),
            E("W_Q bound to the key projection", ('"k_proj.weight": W_K.T', '"k_proj.weight": W_Q.T')),
            E("W_Q bound to the key projection", ('"to_k.weight": W_K.T', '"to_k.weight": W_Q.T')),
        ),
    ),
    Kind(
        "queries_from_wk",
        "keys",
        "the queries made with W_K",
        (),
        (
            E("W_K in the queries' product", ("queries = X @ W_Q\n", "queries = X @ W_K\n")),
            E("W_K in the queries' product", ("queries = torch.matmul(X, W_Q)", "queries = torch.matmul(X, W_K)")),
            E("W_K handed to the helper", (HELPER_CALLS, "project(X, W_K), project(X, W_K), project(X, W_V)")),
            E("W_K handed to the helper", ("query=X @ W_Q,", "query=X @ W_K,")),
            E("W_K bound to the query projection", (GPT_MAP, GPT_MAP.replace("W_Q.t()", "W_K.t()"))),
            E("W_K bound to the query projection", ('"q_proj.weight": W_Q.T', '"q_proj.weight": W_K.T')),
        ),
        finding=(("stage", "Q"), ("what", "projected with W_K")),
    ),
    Kind(
        "projections_swapped_kv",
        "keys",
        "the keys made with W_V and the values with W_K (it runs only where d_k = d_v)",
        (),
        (
            E(
                "swapped in the products",
                ("keys = X @ W_K\n", "keys = X @ W_V\n"),
                ("values = X @ W_V\n", "values = X @ W_K\n"),
            ),
            E(
                "swapped in the products",
                ('k = torch.einsum("bsd,dh->bsh", X, W_K)', 'k = torch.einsum("bsd,dh->bsh", X, W_V)'),
                ('v = torch.einsum("bsd,dv->bsv", X, W_V)', 'v = torch.einsum("bsd,dv->bsv", X, W_K)'),
            ),
            E("swapped in the helper's arguments", (HELPER_CALLS, "project(X, W_Q), project(X, W_V), project(X, W_K)")),
            E("swapped in the helper's arguments", ("key=X @ W_K, value=X @ W_V", "key=X @ W_V, value=X @ W_K")),
            E(
                "swapped in the parameter binding",
                (GPT_MAP, '"query.weight": W_Q.t(), "key.weight": W_V.t(), "value.weight": W_K.t()'),
            ),
            E(
                "swapped in the parameter binding",
                ('"k_proj.weight": W_K.T, "v_proj.weight": W_V.T', '"k_proj.weight": W_V.T, "v_proj.weight": W_K.T'),
            ),
        ),
        finding=(("stage", "K"), ("what", "projected with W_V")),
    ),
    Kind(
        "values_unprojected",
        "values",
        "the values never projected (X averaged)",
        ("no_value_projection",),
        (
            E("X itself", ("values = X @ W_V\n", "values = X\n")),
            E("X itself", ("values = torch.matmul(X, W_V)", "values = X")),
            E("the module's input", ("v = self.value(x)  # (B, T, vs)", "v = x  # (B, T, vs)")),
            E("the module's input", ("v = x @ w_v  # (T, d_v)", "v = x  # (T, d_v)")),
            E("X handed to the helper", (HELPER_CALLS, "project(X, W_Q), project(X, W_K), X")),
            E("X handed to the helper", ("X @ W_V, is_causal=causal)", "X, is_causal=causal)")),
        ),
    ),
    Kind(
        "scores_kq",
        "keys",
        "the scores K Q^T",
        ("scores_transposed",),
        (
            E("@ with the operands swapped", (IS_SCORES, "keys @ queries.transpose(1, 2)")),
            E(
                "@ with the operands swapped",
                ("q @ k.transpose(-2, -1) / math.sqrt(d_k)", "k @ q.transpose(-2, -1) / math.sqrt(d_k)"),
            ),
            E("matmul with the operands swapped", ("torch.matmul(q, k.mT)", "torch.matmul(k, q.mT)")),
            E(
                "matmul with the operands swapped",
                ("torch.matmul(queries, keys.transpose(-2, -1))", "torch.matmul(keys, queries.transpose(-2, -1))"),
            ),
            E(
                "einsum with the operands swapped",
                ('torch.einsum("bqh,bkh->bqk", q, k)', 'torch.einsum("bqh,bkh->bqk", k, q)'),
            ),
            E(
                "einsum with the operands swapped",
                ('torch.einsum("bid,bjd->bij", q, k)', 'torch.einsum("bid,bjd->bij", k, q)'),
            ),
        ),
    ),
    Kind(
        "helper_args_swapped",
        "keys",
        "the queries and keys handed to a helper in each other's place (K Q^T)",
        ("scores_transposed",),
        (
            E("positional arguments", ("return attend(q, k, v, mask)", "return attend(k, q, v, mask)")),
            E(
                "positional arguments",
                ("layer(X @ W_Q, X @ W_K, X @ W_V, mask)", "layer(X @ W_K, X @ W_Q, X @ W_V, mask)"),
            ),
            E(
                "positional arguments",
                ("scaled_dot_product_attention(Q, K, V, mask)", "scaled_dot_product_attention(K, Q, V, mask)"),
            ),
            E("keyword arguments", ("query=X @ W_Q, key=X @ W_K", "query=X @ W_K, key=X @ W_Q")),
            E("the projections handed over swapped", ("(x, W_Q, W_K, W_V, causal)", "(x, W_K, W_Q, W_V, causal)")),
            E(
                "the projections handed over swapped",
                ("attend(X @ W_Q, X @ W_K, X @ W_V", "attend(X @ W_K, X @ W_Q, X @ W_V"),
            ),
        ),
    ),
    Kind(
        "packed_chunk",
        "keys",
        "a packed QKV split into three equal parts (right only where d_k = d_v)",
        (),
        (
            E("chunk(3)", (".split([self.d_k, self.d_k, self.d_v], dim=-1)", ".chunk(3, dim=-1)")),
            E("chunk(3)", ("torch.split(qkv, [d_k, d_k, d_v], dim=-1)", "torch.chunk(qkv, 3, dim=-1)")),
            E(
                "split by a third",
                (".split([self.d_k, self.d_k, self.d_v], dim=-1)", ".split(self.qkv.out_features // 3, dim=-1)"),
            ),
            E(
                "split by a third",
                ("torch.split(qkv, [d_k, d_k, d_v], dim=-1)", "torch.split(qkv, qkv.shape[-1] // 3, dim=-1)"),
            ),
            E("tensor_split(3)", (".split([self.d_k, self.d_k, self.d_v], dim=-1)", ".tensor_split(3, dim=-1)")),
            E("tensor_split(3)", ("torch.split(qkv, [d_k, d_k, d_v], dim=-1)", "torch.tensor_split(qkv, 3, dim=-1)")),
        ),
        finding=(("stage", "Q"), ("what", "a packed projection split in equal parts")),
    ),
)

_RETURNED = (
    Kind(
        "weights_transposed",
        "output",
        "the weights returned transposed",
        ("weights_transposed",),
        (
            E(".transpose", ("return output, weights", "return output, weights.transpose(1, 2)")),
            E(".transpose", ("return weights @ v, weights", "return weights @ v, weights.transpose(-2, -1)")),
            E(".mT or .T", ("return torch.matmul(p, v), p", "return torch.matmul(p, v), p.mT")),
            E(".mT or .T", ("return a @ v, a\n", "return a @ v, a.T\n"), only="per_sequence"),
            E(".permute", ("return att @ v, att", "return att @ v, att.permute(0, 2, 1)")),
            E(".permute", ("return y, attn.squeeze(1)", "return y, attn.squeeze(1).permute(0, 2, 1)")),
        ),
    ),
    Kind(
        "logits_returned",
        "output",
        "the scores (the softmax's input) returned as the weights",
        ("scores_returned",),
        (
            E("the scores' variable returned", ("return output, weights", "return output, scores")),
            E(
                "the scores' variable returned",
                ("return torch.matmul(attn, values), attn", "return torch.matmul(attn, values), logits"),
            ),
            E(
                "a helper returns its scores",
                ("return weights @ v, weights\n", "return weights @ v, scores\n"),
                only="helpers",
            ),
            E("a helper returns its scores", ("return a @ v, a\n", "return a @ v, scores\n"), only="per_sequence"),
            E("a helper returns its scores", ("return probs @ value, probs", "return probs @ value, scores")),
            E(
                "the softmax's input kept under the weights' name",
                (
                    "        att = F.softmax(att, dim=-1)\n        return att @ v, att\n",
                    "        weights = F.softmax(att, dim=-1)\n        return weights @ v, att\n",
                ),
            ),
            E(
                "the softmax's input kept under the weights' name",
                (
                    "        p_attn = scores.softmax(dim=-1)\n        return torch.matmul(p_attn, value), p_attn\n",
                    "        p_attn = scores.softmax(dim=-1)\n        return torch.matmul(p_attn, value), scores\n",
                ),
            ),
        ),
    ),
)

_SHAPES = (
    Kind(
        "view_for_transpose",
        "keys",
        "the keys reshaped where they must be transposed (view as a transpose)",
        (),
        (
            E("view", ("k_t = keys.transpose(-2, -1)", "k_t = keys.view(B, d_k, T)")),
            E("view", ("K.transpose(0, 1)", "K.view(K.size(1), K.size(0))")),
            E("reshape with -1", ("k_t = keys.transpose(-2, -1)", "k_t = keys.reshape(B, -1, T)")),
            E("reshape with -1", ("scores = q @ k.T  # (T, T)", "scores = q @ k.reshape(k.shape[1], -1)  # (T, T)")),
            E(
                "view with the sizes read off",
                ("k_t = keys.transpose(-2, -1)", "k_t = keys.view(B, keys.shape[-1], keys.shape[-2])"),
            ),
            E(
                "view with the sizes read off",
                ("q @ k.T / math.sqrt(w_k.shape[1])", "q @ k.view(k.shape[1], k.shape[0]) / math.sqrt(w_k.shape[1])"),
            ),
        ),
        finding=(("stage", "scores"), ("what", "the keys reshaped, not transposed")),
    ),
    Kind(
        "transpose_wrong_axes",
        "crash",
        "the queries transposed instead of the keys (Q^T K: it runs only where T = d_k)",
        ("width_crash",),
        (
            E(
                "the query transposed",
                (
                    "scores = queries @ k_t / math.sqrt(d_k)",
                    "scores = queries.transpose(-2, -1) @ keys / math.sqrt(d_k)",
                ),
            ),
            E("the query transposed", (IS_SCORES, "queries.transpose(1, 2) @ keys")),
            E(
                "the query transposed",
                ("q @ k.transpose(-2, -1) / math.sqrt(d_k)", "q.transpose(-2, -1) @ k / math.sqrt(d_k)"),
            ),
            E(".T on the wrong operand", ("scores = q @ k.T  # (T, T)", "scores = q.T @ k  # (T, T)")),
            E(".T on the wrong operand", ("s = q @ k.T / math.sqrt", "s = q.T @ k / math.sqrt")),
            E(
                "an einsum over the positions",
                ('torch.einsum("bqh,bkh->bqk", q, k)', 'torch.einsum("bth,btk->bhk", q, k)'),
            ),
            E(
                "an einsum over the positions",
                ('torch.einsum("bid,bjd->bij", q, k)', 'torch.einsum("bid,bie->bde", q, k)'),
            ),
        ),
    ),
    Kind(
        "head_view_width",
        "crash",
        "a head-axis view that assumes d_k = d (or d_v = d_k): it runs only at some widths",
        ("width_crash",),
        (
            E(
                "the model width in the constructor",
                ("self.head_dim = d_k // n_heads", "self.head_dim = d_model // n_heads"),
            ),
            E(
                "the model width in the view",
                (
                    "view(B, T, self.n_heads, self.head_dim).transpose(1, 2)\n        k =",
                    "view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)\n        k =",
                ),
            ),
            E(
                "the model width in the view",
                ("split_heads(X @ W_Q, N_HEADS, d_k // N_HEADS)", "split_heads(X @ W_Q, N_HEADS, d // N_HEADS)"),
            ),
            E(
                "the key width for the values",
                ("view(B, T, self.n_heads, self.v_head_dim)", "view(B, T, self.n_heads, self.head_dim)"),
            ),
            E(
                "the key width for the values",
                ("split_heads(X @ W_V, N_HEADS, d_v // N_HEADS)", "split_heads(X @ W_V, N_HEADS, d_k // N_HEADS)"),
            ),
        ),
    ),
    Kind(
        "missing_attribute",
        "crash",
        "an attribute read that the object never set (it raises on every call, or on every causal one)",
        ("crash:causal_self_attention",),
        (
            E("an attribute misspelt", ("attn_scores * self.scale", "attn_scores * self.scaling")),
            E("an attribute misspelt", ("* self.inv_sqrt_dk", "* self.inv_sqrt_d_k")),
            E(
                "an attribute misspelt",
                ("diagonal=1), self.fill)", "diagonal=1), self.fill_value)"),
                causes=("branch_crash",),  # read only where causal=True
            ),
            E(
                "a buffer under another name",
                ("self.tril[:T, :T] == 0", "self.mask[:T, :T] == 0"),
                causes=("branch_crash",),
            ),
            E(
                "a buffer under another name",
                ("self.bias[:T, :T]", "self.causal_bias[:T, :T]"),
                causes=("branch_crash",),
            ),
            E("an option never stored", ("if self.causal:", "if self.is_causal:")),
            E(
                "an option never stored",
                (
                    "dtype=torch.bool, device=device).triu(1)  # True",
                    "dtype=torch.bool, device=self.device).triu(1)  # True",
                ),
                causes=("branch_crash",),
            ),
        ),
    ),
)

VALUES = (*_PROJECTIONS, *_RETURNED, *_SHAPES)
