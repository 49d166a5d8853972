"""The scale (Lemma 5.5): missing, the wrong width or power, a number, applied twice, thrown away, in float32."""

from __future__ import annotations

from . import E, Kind

IS_SCALE = "    scores = scores / math.sqrt(d_k)\n"  # inline_steps: the scale on a line of its own
HELPER_SCALE = "q @ k.transpose(-2, -1) / math.sqrt(d_k)"  # helpers' attend
BOOK_SCALE = "self.scale = d_out ** -0.5"  # book_scaled_in_init's constructor
CALL_SCALE = "scale=1 / math.sqrt(d_k)"  # callable_class: the scale handed to the constructor
SDPA_CALL = "is_causal=causal)"  # docs_sdpa: the call of the helper, where a scale= may be passed
ROWS_SCALE = "scale = 1.0 / math.sqrt(q.shape[-1])"  # per_query_rows
FIRST_SCALE = "torch.matmul(queries, keys.transpose(-2, -1)) * d_k ** -0.5"  # values_first
GPT_SCALE = "(q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))"  # gpt_head_buffer

SCALE = (
    Kind(
        "scale_missing",
        "scale",
        "the scores never divided by sqrt(d_k)",
        ("no_scaling",),
        (
            E("scale line dropped", (IS_SCALE, "")),
            E("scale line dropped", ("    scores = scores / math.sqrt(k.shape[1])\n", "")),
            E("scale line dropped", ("    scores.div_(math.sqrt(d_k))\n", "")),
            E("factor dropped", (HELPER_SCALE, "q @ k.transpose(-2, -1)")),
            E("factor dropped", (GPT_SCALE, "(q @ k.transpose(-2, -1))")),
            E("factor dropped", (FIRST_SCALE, "torch.matmul(queries, keys.transpose(-2, -1))")),
            E("factor dropped", (", alpha=1.0 / math.sqrt(d_k))", ")")),
            E("a scale of 1", (BOOK_SCALE, "self.scale = 1.0")),
            E("a scale of 1", (CALL_SCALE, "scale=1.0")),
            E("a scale of 1", (SDPA_CALL, "is_causal=causal, scale=1.0)")),
            E("computed, never applied", (" * scale  # (B, 1, end)", "  # (B, 1, end)")),
            E(
                "computed, never applied",
                ("q = (X @ W_Q) / math.sqrt(W_Q.shape[1])", "q = X @ W_Q"),
                only="scaled_queries",
            ),
        ),
    ),
    Kind(
        "scale_by_dk",
        "scale",
        "the scores divided by d_k",
        ("scale_by_dk",),
        (
            E("divided by d_k", (IS_SCALE, "    scores = scores / d_k\n")),
            E("divided by d_k", (HELPER_SCALE, "q @ k.transpose(-2, -1) / d_k")),
            E("divided by d_k", ("/ math.sqrt(self.head_dim)", "/ self.head_dim")),
            E("to the power -1", (FIRST_SCALE, "torch.matmul(queries, keys.transpose(-2, -1)) * d_k ** -1")),
            E("to the power -1", (BOOK_SCALE, "self.scale = d_out ** -1")),
            E("to the power -1", ("k.shape[-1] ** -0.5", "k.shape[-1] ** -1")),
            E("1/d_k handed over", (CALL_SCALE, "scale=1 / d_k")),
            E("1/d_k handed over", (SDPA_CALL, "is_causal=causal, scale=1 / W_Q.shape[1])")),
            E("1/d_k handed over", (ROWS_SCALE, "scale = 1.0 / q.shape[-1]")),
        ),
    ),
    Kind(
        "scale_twice",
        "scale",
        "the scale applied twice (the scores divided by d_k)",
        ("scale_applied_twice",),  # issue 51: the walk sees the second division (the search's scale_by_dk)
        (
            E(
                "on two lines",
                (
                    "    scores = queries @ keys.transpose(1, 2)\n",
                    "    scores = queries @ keys.transpose(1, 2) / math.sqrt(d_k)\n",
                ),
                fix=((IS_SCALE, ""),),
            ),
            E(
                "on two lines",
                (
                    "attn_scores = queries @ keys.transpose(1, 2)\n",
                    "attn_scores = queries @ keys.transpose(1, 2) * self.scale\n",
                ),
                fix=(("torch.softmax(attn_scores * self.scale, dim=-1)", "torch.softmax(attn_scores, dim=-1)"),),
            ),
            E(
                "on the queries and on the scores",
                ("logits = q @ k.transpose(-1, -2)", "logits = q @ k.transpose(-1, -2) / math.sqrt(W_Q.shape[1])"),
                fix=(("q = (X @ W_Q) / math.sqrt(W_Q.shape[1])", "q = X @ W_Q"),),
            ),
            E(
                "by the caller and by the helper",
                ("q, k, v = project(X, W_Q), ", "q, k, v = project(X, W_Q) / math.sqrt(W_Q.shape[1]), "),
                fix=((HELPER_SCALE, "q @ k.transpose(-2, -1)"),),
            ),
            E(
                "on two lines",
                ("    raw = q @ k.transpose(-2, -1)\n", "    raw = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"),
                fix=(("scaled = raw / math.sqrt(d_k)", "scaled = raw"),),
            ),
        ),
    ),
    Kind(
        "scale_times_sqrt_dk",
        "scale",
        "the scores multiplied by sqrt(d_k)",
        ("scale_times_sqrt_dk",),
        (
            E("times the root", (IS_SCALE, "    scores = scores * math.sqrt(d_k)\n")),
            E("times the root", (HELPER_SCALE, "q @ k.transpose(-2, -1) * math.sqrt(d_k)")),
            E("power +0.5", (FIRST_SCALE, "torch.matmul(queries, keys.transpose(-2, -1)) * d_k ** 0.5")),
            E("power +0.5", (BOOK_SCALE, "self.scale = d_out ** 0.5")),
            E("power +0.5", ("self.k.out_features ** -0.5", "self.k.out_features ** 0.5")),
            E("the reciprocal left out", (CALL_SCALE, "scale=math.sqrt(d_k)")),
            E("the reciprocal left out", (ROWS_SCALE, "scale = math.sqrt(q.shape[-1])")),
            E("the reciprocal left out", ("(1.0 / math.sqrt(k.size(-1)))", "math.sqrt(k.size(-1))")),
        ),
    ),
    Kind(
        "scale_model_width",
        "scale",
        "the scores divided by sqrt(d), the model width",
        ("scale_by_sqrt_d_model",),
        (
            E("the model width's name", (IS_SCALE, "    scores = scores / math.sqrt(d)\n")),
            E("the model width's name", ("/ math.sqrt(d_head)", "/ math.sqrt(d_model)")),
            E("the model width's name", ("math.sqrt(k.size(-1))", "math.sqrt(C)"), only="gpt_head_buffer"),
            E("the model width's name", (BOOK_SCALE, "self.scale = d_in ** -0.5")),
            E("the input's last axis", (CALL_SCALE, "scale=1 / math.sqrt(X.shape[-1])")),
            E(
                "the input's last axis",
                ("math.sqrt(q.shape[-1])", "math.sqrt(X.shape[-1])"),
                only=("arange_compare", "per_query_rows"),
            ),
            E("the config's d_model", ("math.sqrt(self.config.d_k)", "math.sqrt(self.config.d_model)")),
            E("the config's d_model", ("math.sqrt(d_k // N_HEADS)", "math.sqrt(d // N_HEADS)")),
        ),
    ),
    Kind(
        "scale_value_width",
        "scale",
        "the scores divided by sqrt(d_v), the values' width",
        ("scale_by_sqrt_dv",),
        (
            E("the values' width by name", ("/ math.sqrt(d_head)", "/ math.sqrt(d_value)")),
            E("the values' width by name", ("math.sqrt(self.config.d_k)", "math.sqrt(self.config.d_v)")),
            E("the values' last axis", ("math.sqrt(k.size(-1))", "math.sqrt(v.size(-1))"), only="gpt_head_buffer"),
            E("the values' last axis", (ROWS_SCALE, "scale = 1.0 / math.sqrt(v.shape[-1])")),
            E("the values' last axis", ("math.sqrt(k.shape[-1])", "math.sqrt(v.shape[-1])"), only="additive_bias"),
            E("a scale handed over", (SDPA_CALL, "is_causal=causal, scale=W_V.shape[1] ** -0.5)")),
            E("a scale handed over", (CALL_SCALE, "scale=1 / math.sqrt(W_V.shape[1])")),
        ),
    ),
    Kind(
        "scale_hardcoded",
        "scale",
        "a fixed number for the scale",
        ("scale_constant",),
        (
            E("the root of a number", (IS_SCALE, "    scores = scores / math.sqrt(64)\n")),
            E("the root of a number", (ROWS_SCALE, "scale = 1.0 / math.sqrt(16)")),
            E("the root of a number", (HELPER_SCALE, "q @ k.transpose(-2, -1) / math.sqrt(8)")),
            E("a decimal", (FIRST_SCALE, "torch.matmul(queries, keys.transpose(-2, -1)) * 0.125")),
            E("a decimal", (CALL_SCALE, "scale=0.125")),
            E("a fraction", (BOOK_SCALE, "self.scale = 1 / 8")),
            E("a fraction", ("(1.0 / math.sqrt(k.size(-1)))", "(1 / 4)")),
        ),
    ),
    Kind(
        "scale_width_from_config",
        "scale",
        "the width for the scale read from a config entry the caller never sets (its default)",
        ("scale_constant",),
        (
            E("a keyword's default", ('kwargs.get("head_dim", d_k)', 'kwargs.get("head_dim", 64)')),
            E(
                "a dataclass field's default",
                ('    fill: float = float("-inf")\n', '    fill: float = float("-inf")\n    head_dim: int = 64\n'),
                ("math.sqrt(self.config.d_k)", "math.sqrt(self.config.head_dim)"),
            ),
            E(
                "a dict entry's default",
                ("math.sqrt(k.size(-1))", 'math.sqrt(CONFIG.get("head_dim", 64))'),
                only="config_dict",
            ),
        ),
    ),
    Kind(
        "scale_precedence",
        "scale",
        "d_k ** 1/2 (operator precedence: the scores divided by 2 d_k)",
        (),
        (
            E("/ x ** 1/2", (IS_SCALE, "    scores = scores / d_k ** 1/2\n")),
            E("/ x ** 1/2", (HELPER_SCALE, "q @ k.transpose(-2, -1) / d_k ** 1/2")),
            E("/ x ** 1/2", ("/ math.sqrt(d_head)", "/ d_head**1/2")),
            E("* x ** -1/2", (FIRST_SCALE, "torch.matmul(queries, keys.transpose(-2, -1)) * d_k ** -1/2")),
            E("* x ** -1/2", (BOOK_SCALE, "self.scale = d_out ** -1/2")),
            E("* x ** -1/2", ("self.k.out_features ** -0.5", "self.k.out_features ** -1/2")),
            E("1 / x ** 1/2", (ROWS_SCALE, "scale = 1.0 / q.shape[-1] ** 1/2")),
            E("1 / x ** 1/2", (CALL_SCALE, "scale=1 / d_k ** 1/2")),
        ),
        finding=(("stage", "scaled"), ("what", "divided by 2 d_k")),
    ),
    Kind(
        "scale_discarded",
        "scale",
        "the division computed and thrown away",
        ("no_scaling",),
        (
            E(
                "out of place, result dropped",
                ("    scores.div_(math.sqrt(d_k))\n", "    scores.div(math.sqrt(d_k))\n"),
            ),
            E("an expression statement", (IS_SCALE, "    scores / math.sqrt(d_k)\n")),
            E(
                "an expression statement",
                ("    scores = scores / math.sqrt(k.shape[1])\n", "    scores / math.sqrt(k.shape[1])\n"),
            ),
            E(
                "torch.div, result dropped",
                ("    scores = scores / math.sqrt(k.shape[1])\n", "    torch.div(scores, math.sqrt(k.shape[1]))\n"),
            ),
            E("torch.div, result dropped", (IS_SCALE, "    torch.div(scores, math.sqrt(d_k))\n")),
            E(
                "torch.div, result dropped",
                ("    scaled = raw / math.sqrt(d_k)\n", "    torch.div(raw, math.sqrt(d_k))\n    scaled = raw\n"),
            ),
        ),
    ),
    Kind(
        "scale_float32_tensor",
        "scale",
        "the scale made as a float32 tensor (float32 rounding in a float64 head)",
        ("scale_in_float32", "scale_tensor_in_float32"),
        (
            E("a tensor without its dtype", ("torch.tensor(d_k, dtype=X.dtype)", "torch.tensor(d_k)")),
            E("a tensor without its dtype", (BOOK_SCALE, "self.scale = torch.tensor(d_out ** -0.5)")),
            E("a tensor without its dtype", (CALL_SCALE, "scale=torch.tensor(1 / math.sqrt(d_k))")),
            E("torch.sqrt of an integer tensor", (IS_SCALE, "    scores = scores / torch.sqrt(torch.tensor(d_k))\n")),
            E("torch.sqrt of an integer tensor", ("/ math.sqrt(d_head)", "/ torch.sqrt(torch.tensor(d_head))")),
            E("a tensor method", (HELPER_SCALE, "q @ k.transpose(-2, -1) / torch.tensor(d_k).sqrt()")),
            E("a tensor method", (ROWS_SCALE, "scale = torch.tensor(q.shape[-1]).rsqrt()")),
        ),
    ),
)
