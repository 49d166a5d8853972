"""The causal mask (Definition 4.1) and its fill (Implementation aside 4.4): its pattern, whether it is applied at all,
the flag that switches it, and the number written where a key is hidden."""

from __future__ import annotations

from . import E, Kind, unwrap

INF = 'float("-inf")'
IS_TRIL = "torch.tril(torch.ones(T, T, device=X.device)) == 0"  # inline_steps, softmax_dtype_kw
HELPER_TRIU = "torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)"  # helpers' causal_mask
METHOD_TRIU = "torch.ones(T, T, dtype=torch.bool, device=X.device).triu(1)"  # a dozen programs
GPT_TRIL = "torch.tril(torch.ones(block_size, block_size))"  # gpt_head_buffer's constructor
BOOK_TRIU = "context_length, dtype=torch.bool), diagonal=1)"  # book_scaled_in_init's constructor
KEEP_TRIL = "torch.ones(T, T, dtype=torch.bool, device=X.device).tril()"  # where_allowed, einsum_where
MASKED = f"scores = scores.masked_fill(mask, {INF})"  # inline_steps, helpers' attend, keyword_helper

_PATTERN = (
    Kind(
        "mask_transposed",
        "mask",
        "the other triangle hidden (the past, not the future)",
        ("mask_transposed",),
        (
            E("tril and triu swapped", (IS_TRIL, IS_TRIL.replace("tril", "triu"))),
            E("tril and triu swapped", (HELPER_TRIU, HELPER_TRIU.replace("triu", "tril").replace("=1)", "=-1)"))),
            E("tril and triu swapped", (GPT_TRIL, GPT_TRIL.replace("tril", "triu"))),
            E("the method swapped", (METHOD_TRIU, METHOD_TRIU.replace("triu(1)", "tril(-1)"))),
            E("the method swapped", (KEEP_TRIL, KEEP_TRIL.replace("tril()", "triu()"))),
            E("the comparison flipped", ("col > row", "col < row")),
            E("the comparison flipped", ("cols[None, :] > rows[:, None]", "cols[None, :] < rows[:, None]")),
            E("the comparison flipped", ("if causal and j > i:", "if causal and j < i:")),
        ),
    ),
    Kind(
        "mask_diagonal_hidden",
        "mask",
        "the diagonal hidden too (a query cannot read itself)",
        ("mask_excludes_diagonal",),
        (
            E("diagonal=0", (HELPER_TRIU, HELPER_TRIU.replace("diagonal=1", "diagonal=0"))),
            E("diagonal=0", (BOOK_TRIU, BOOK_TRIU.replace("diagonal=1", "diagonal=0"))),
            E("diagonal=0", (".triu(diagonal=1)", ".triu(diagonal=0)")),
            E("triu() for triu(1)", (METHOD_TRIU, METHOD_TRIU.replace("triu(1)", "triu()"))),
            E("tril(-1) for tril()", (IS_TRIL, "torch.tril(torch.ones(T, T, device=X.device), diagonal=-1) == 0")),
            E("tril(-1) for tril()", (KEEP_TRIL, KEEP_TRIL.replace("tril()", "tril(-1)"))),
            E("tril(-1) for tril()", (GPT_TRIL, "torch.tril(torch.ones(block_size, block_size), diagonal=-1)")),
            E(
                "tril(-1) for tril()",
                ("dtype=torch.bool, device=x.device).tril()", "dtype=torch.bool, device=x.device).tril(-1)"),
            ),
            E(">= for >", ("col > row", "col >= row")),
        ),
    ),
    Kind(
        "mask_off_by_one",
        "mask",
        "the mask one diagonal too high: query i reads key i + 1",
        ("mask_leaks_by_one",),
        (
            E("diagonal=2", (HELPER_TRIU, HELPER_TRIU.replace("diagonal=1", "diagonal=2"))),
            E("diagonal=2", (BOOK_TRIU, BOOK_TRIU.replace("diagonal=1", "diagonal=2"))),
            E("diagonal=2", (".triu(diagonal=1)", ".triu(diagonal=2)")),
            E("triu(2) for triu(1)", (METHOD_TRIU, METHOD_TRIU.replace("triu(1)", "triu(2)"))),
            E("tril(1) for tril()", (IS_TRIL, "torch.tril(torch.ones(T, T, device=X.device), diagonal=1) == 0")),
            E("tril(1) for tril()", (KEEP_TRIL, KEEP_TRIL.replace("tril()", "tril(1)"))),
            E("tril(1) for tril()", (GPT_TRIL, "torch.tril(torch.ones(block_size, block_size), diagonal=1)")),
            E("> i + 1 for > i", ("col > row", "col > row + 1")),
        ),
    ),
    Kind(
        "mask_inverted",
        "mask",
        "the mask's test negated: the past hidden, the future kept",
        ("mask_inverted",),
        (
            E("== 1 for == 0", (IS_TRIL, IS_TRIL.replace("== 0", "== 1"))),
            E("== 1 for == 0", ("self.tril[:T, :T] == 0", "self.tril[:T, :T] == 1")),
            E("== 1 for == 0", ("tril == 0", "tril == 1")),
            E("== 1 for == 0", ("mask == 0, float", "mask == 1, float")),
            E("where's branches swapped", (f"torch.where(allowed, s, {INF})", f"torch.where(allowed, {INF}, s)")),
            E("where's branches swapped", (f"torch.where(keep, sim, {INF})", f"torch.where(keep, {INF}, sim)")),
            E("where's branches swapped", (f"torch.where(keep, wei, {INF})", f"torch.where(keep, {INF}, wei)")),
            E("the negation dropped", ("mask.logical_not()", "mask")),
            E("the negation dropped", ("~causal_mask", "causal_mask")),
            E("the negation dropped", ("masked_fill(~mask,", "masked_fill(mask,")),
            E("the negation dropped", ("temp_mask.logical_not()", "temp_mask")),
        ),
    ),
    Kind(
        "mask_from_values",
        "mask",
        "the mask read off the scores' values (a score of exactly 0 is hidden)",
        ("mask_value_derived",),
        (
            E("tril of the scores == 0", (IS_TRIL, "torch.tril(scores) == 0")),
            E(
                "tril of the scores == 0",
                ("tril = torch.tril(torch.ones(T, T, dtype=X.dtype, device=X.device))", "tril = torch.tril(scores)"),
            ),
            E(
                "tril of the scores == 0",
                ("torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), float", "torch.tril(scores) == 0, float"),
            ),
            E("kept where the lower triangle is non-zero", ("allowed = " + KEEP_TRIL, "allowed = s.tril() != 0")),
            E("kept where the lower triangle is non-zero", ("keep = " + KEEP_TRIL, "keep = sim.tril() != 0")),
            E(
                "kept where the lower triangle is non-zero",
                (
                    "keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))",
                    "keep = torch.tril(wei) != 0",
                ),
            ),
            E("the product with the mask tested", ("self.tril[:T, :T] == 0", "(att * self.tril[:T, :T]) == 0")),
            E("the product with the mask tested", ("mask == 0, float", "scores * mask == 0, float")),
            E(
                "the product with the mask tested",
                (
                    "S.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1),",
                    "S.masked_fill(S.tril() == 0,",
                ),
            ),
        ),
    ),
)

_APPLIED = (
    Kind(
        "mask_discarded",
        "mask",
        "the masked scores computed and thrown away",
        ("no_mask",),
        (
            E("the result not assigned", (MASKED, MASKED.replace("scores = ", ""))),
            E("the result not assigned", ("att = att.masked_fill(", "att.masked_fill(")),
            E("out of place for in place", ("scores.masked_fill_(", "scores.masked_fill(")),
            E("out of place for in place", ("attn_scores.masked_fill_(", "attn_scores.masked_fill(")),
            E("out of place for in place", ("attn_bias.masked_fill_(", "attn_bias.masked_fill(")),
            E(
                "assigned to a name never read",
                (f"s = torch.where(allowed, s, {INF})", f"masked = torch.where(allowed, s, {INF})"),
            ),
            E(
                "assigned to a name never read",
                ("scores = scores.masked_fill(col > row", "masked_scores = scores.masked_fill(col > row"),
            ),
            E("assigned to a name never read", ("S = S.masked_fill(", "S_masked = S.masked_fill(")),
        ),
    ),
    Kind(
        "mask_builder_no_return",
        "mask",
        "the mask builder never returns its mask (the caller's mask is None: nothing is hidden)",
        ("no_mask",),
        (
            E("the return dropped", (f"    mask = {HELPER_TRIU}\n    return mask\n", f"    mask = {HELPER_TRIU}\n")),
            E("kept on the object, nothing returned", ("        return mask\n", "        self.mask = mask\n")),
            E("a bare return", ("    return _MASKS[key]\n", "    return\n")),
        ),
    ),
    Kind(
        "padding_as_causal",
        "mask",
        "a padding mask (every key of the sequence valid) where the causal mask belongs",
        ("no_mask",),
        (
            E(
                "full valid lengths",
                ("torch.arange(1, T + 1, device=X.device) if causal", "torch.full((T,), T, device=X.device) if causal"),
            ),
            E(
                "full valid lengths",
                ("return torch.arange(1, T + 1, device=device)", "return torch.full((T,), T, device=device)"),
            ),
            E(
                "the key padding mask in the causal mask's place",
                (
                    f"scores.masked_fill(~causal_mask, {INF})",
                    f"scores.masked_fill(~key_padding_mask[:, None, None, :], {INF})",
                ),
            ),
            E(
                "an all-ones keep mask",
                (
                    "mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device)) if causal",
                    "mask = torch.ones(T, T, dtype=torch.bool, device=X.device) if causal",
                ),
            ),
            E(
                "an all-ones keep mask",
                (
                    "return torch.tril(torch.ones(1, size, size, device=device))",
                    "return torch.ones(1, size, size, device=device)",
                ),
            ),
        ),
    ),
    Kind(
        "flag_never_set",
        "mask",
        "the causal flag taken from an argument or config entry the caller never sets (its default: unmasked)",
        ("no_mask",),
        (
            E("a keyword left at the function's default", ("X @ W_V, is_causal=causal)", "X @ W_V)")),
            E("a config field left at its default", ("d_v=W_V.shape[1], causal=causal)", "d_v=W_V.shape[1])")),
            E("passed under another name", ("causal=causal, dropout=0.0)", "is_causal=causal, dropout=0.0)")),
        ),
    ),
    Kind(
        "causal_flag_ignored",
        "causal_flag",
        "the mask applied whatever the causal flag",
        ("causal_flag_ignored",),
        (
            E("the branch unwrapped", unwrap("causal")),
            E("the branch unwrapped", unwrap("self.causal")),
            E("the conditional dropped", (" if causal else None", "")),
            E("a literal True passed on", ("X.shape[1], causal=causal)", "X.shape[1], causal=True)")),
            E("a literal True passed on", ("X @ W_V, is_causal=causal)", "X @ W_V, is_causal=True)")),
            E("a literal True passed on", ('{"causal": causal}', '{"causal": True}')),
            E("a literal True passed on", ("(x, W_Q, W_K, W_V, causal)", "(x, W_Q, W_K, W_V, True)")),
        ),
    ),
    Kind(
        "valid_lengths_off_by_one",
        "mask",
        "valid lengths one short at the caller (query i reads only keys before it)",
        ("mask_excludes_diagonal",),
        (
            E(
                "arange(T)",
                ("torch.arange(1, T + 1, device=X.device) if causal", "torch.arange(T, device=X.device) if causal"),
            ),
            E("arange(T)", ("return torch.arange(1, T + 1, device=device)", "return torch.arange(T, device=device)")),
            E(
                "arange(0, T)",
                ("torch.arange(1, T + 1, device=X.device) if causal", "torch.arange(0, T, device=X.device) if causal"),
            ),
            E("minus one", ("lengths = prefix_lengths(T, X.device)", "lengths = prefix_lengths(T, X.device) - 1")),
            E(
                "minus one",
                ("return torch.arange(1, T + 1, device=device)", "return torch.arange(1, T + 1, device=device) - 1"),
            ),
        ),
    ),
    Kind(
        "loop_bound_leaks",
        "mask",
        "a loop's slice or bound one too far: query i reads key i + 1",
        ("mask_leaks_by_one",),
        (
            E("the slice's end", ("end = i + 1 if causal else T", "end = min(i + 2, T) if causal else T")),
            E("the slice's end", ("scores[:, i, : i + 1]", "scores[:, i, : i + 2]")),
            E("the slice's start", ("mask[i, i + 1 :] = True", "mask[i, i + 2 :] = True")),
            E("the loop's condition", ("if causal and j > i:", "if causal and j > i + 1:")),
            E(
                "the chunk's offset",
                (
                    "torch.arange(start, start + qc.shape[1], device=X.device)",
                    "torch.arange(start + 1, start + qc.shape[1] + 1, device=X.device)",
                ),
            ),
        ),
    ),
    Kind(
        "loop_bound_drops_diagonal",
        "mask",
        "a loop's slice or bound one short: query i never reads key i",
        ("mask_excludes_diagonal",),
        (
            E("the slice's end", ("end = i + 1 if causal else T", "end = i if causal else T")),
            E("the slice's end", ("scores[:, i, : i + 1]", "scores[:, i, : i]")),
            E("the slice's start", ("mask[i, i + 1 :] = True", "mask[i, i:] = True")),
            E("the loop's condition", ("if causal and j > i:", "if causal and j >= i:")),
            E(
                "the chunk's offset",
                (
                    "torch.arange(start, start + qc.shape[1], device=X.device)",
                    "torch.arange(start - 1, start + qc.shape[1] - 1, device=X.device)",
                ),
            ),
        ),
    ),
)

_AFTER = (
    Kind(
        "mask_after_softmax",
        "mask",
        "the softmax over every key, then the future weights zeroed (rows sum to less than one)",
        ("mask_after_softmax_no_renorm",),
        (
            E(
                "zeroed with masked_fill",
                (
                    f"        {MASKED}\n    weights = torch.softmax(scores, dim=-1)\n",
                    "    weights = torch.softmax(scores, dim=-1)\n"
                    "    if causal:\n"
                    "        weights = weights.masked_fill(mask, 0.0)\n",
                ),
                only="inline_steps",
            ),
            E(
                "zeroed with masked_fill",
                (
                    f"    if mask is not None:\n        {MASKED}\n    weights = torch.softmax(scores, dim=-1)\n",
                    "    weights = torch.softmax(scores, dim=-1)\n"
                    "    if mask is not None:\n"
                    "        weights = weights.masked_fill(mask, 0.0)\n",
                ),
            ),
            E(
                "multiplied by the lower triangle",
                (
                    f"        scores = scores.masked_fill(tril == 0, {INF})\n"
                    "    attn = torch.softmax(scores, dim=-1)\n",
                    "    attn = torch.softmax(scores, dim=-1)\n    if causal:\n        attn = attn * tril\n",
                ),
            ),
            E(
                "torch.tril of the weights",
                (
                    "    if causal:\n"
                    "        scores = scores.masked_fill(col > row, -math.inf)\n"
                    "    weights = scores.softmax(dim=-1)\n",
                    "    weights = scores.softmax(dim=-1)\n    if causal:\n        weights = torch.tril(weights)\n",
                ),
            ),
        ),
    ),
    Kind(
        "mask_after_softmax_renorm",
        "mask",
        "the softmax over every key, then the future weights zeroed and the rows renormalised",
        ("mask_after_softmax_renorm",),
        (
            E(
                "zeroed with masked_fill, renormalised",
                (
                    f"    if mask is not None:\n        {MASKED}\n    weights = torch.softmax(scores, dim=-1)\n",
                    "    weights = torch.softmax(scores, dim=-1)\n"
                    "    if mask is not None:\n"
                    "        weights = weights.masked_fill(mask, 0.0)\n"
                    "        weights = weights / weights.sum(dim=-1, keepdim=True)\n",
                ),
            ),
            E(
                "multiplied by the lower triangle, renormalised",
                (
                    f"        scores = scores.masked_fill(tril == 0, {INF})\n"
                    "    attn = torch.softmax(scores, dim=-1)\n",
                    "    attn = torch.softmax(scores, dim=-1)\n    if causal:\n        attn = attn * tril\n"
                    "        attn = attn / attn.sum(dim=-1, keepdim=True)\n",
                ),
            ),
            E(
                "torch.tril of the weights, renormalised",
                (
                    "    if causal:\n"
                    "        scores = scores.masked_fill(col > row, -math.inf)\n"
                    "    weights = scores.softmax(dim=-1)\n",
                    "    weights = scores.softmax(dim=-1)\n    if causal:\n        weights = torch.tril(weights)\n"
                    "        weights = weights / weights.sum(-1, keepdim=True)\n",
                ),
            ),
        ),
    ),
)

_FILL = (
    Kind(
        "fill_weak",
        "fill",
        "a finite fill (-1e4) that large scores outweigh",
        ("weak_mask_fill", "weak_mask_constant"),
        (
            E("-1e4 written in", (MASKED, MASKED.replace(INF, "-1e4"))),
            E("-1e4 written in", ("col > row, -math.inf", "col > row, -1e4")),
            E("a config value", ('fill: float = float("-inf")', "fill: float = -1e4")),
            E("a config value", ('"mask_value": float("-inf")', '"mask_value": -1e4')),
            E("a config value", ('fill=float("-inf")', "fill=-1e4")),
            E("written before the scale", ('triu(1), float("-inf"))\n    scaled', "triu(1), -1e4)\n    scaled")),
            E("written before the scale", ("self.mask[:n, :n], -torch.inf)", "self.mask[:n, :n], -10000.0)")),
        ),
    ),
    Kind(
        "fill_huge",
        "fill",
        "a huge finite fill (-1e9 and beyond) that overflows float16",
        ("weak_mask_fill", "weak_mask_constant"),
        (
            E("-1e9", ('self.tril[:T, :T] == 0, float("-inf")', "self.tril[:T, :T] == 0, -1e9")),
            E("-1e9", ('diagonal=1), float("-inf"))', "diagonal=1), -1e9)"), only="per_sequence"),
            E("-1e9", ("masked_fill(future, -np.inf)", "masked_fill(future, -1e9)")),
            E("-1e30", ('device=x.device).triu(1), float("-inf"))', "device=x.device).triu(1), -1e30)")),
            E("-1e30", ("device=X.device), 1), -torch.inf)", "device=X.device), 1), -1e30)")),
            E(
                'float("-1e20")',
                ('masked_fill(~causal_mask, float("-inf"))', 'masked_fill(~causal_mask, float("-1e20"))'),
            ),
            E('float("-1e20")', ('mask == 0, float("-inf")', 'mask == 0, float("-1e20")')),
        ),
    ),
    Kind(
        "fill_finfo_float32",
        "fill",
        "float32's most negative number used whatever the dtype (it overflows float16)",
        ("weak_mask_fill", "weak_mask_constant"),
        (
            E("torch.finfo(torch.float32).min", ("torch.finfo(s.dtype).min", "torch.finfo(torch.float32).min")),
            E("torch.finfo(torch.float32).min", ("torch.finfo(scores.dtype).min", "torch.finfo(torch.float32).min")),
            E(
                "np.finfo(np.float32).min",
                ("masked_fill(future, -np.inf)", "masked_fill(future, np.finfo(np.float32).min)"),
            ),
            E("the number written out", ('fill: float = float("-inf")', "fill: float = -3.4028234663852886e38")),
            E("the number written out", ('fill=float("-inf")', "fill=-3.4e38")),
        ),
    ),
    Kind(
        "fill_leaky",
        "fill",
        "a fill small enough that hidden keys keep weight at ordinary scores",
        ("leaky_mask_fill", "leaky_mask_constant", "mask_minus_100"),
        (
            E("-100", (MASKED, MASKED.replace(INF, "-100.0"))),
            E("-100", ("self.mask[:n, :n], -torch.inf)", "self.mask[:n, :n], -100)")),
            E("-10", ('"mask_value": float("-inf")', '"mask_value": -10.0')),
            E("-10", ('fill=float("-inf")', "fill=-10.0")),
            E("zero", (f"torch.where(allowed, s, {INF})", "torch.where(allowed, s, 0.0)")),
            E("zero", ("neg = torch.finfo(s.dtype).min", "neg = 0.0")),
        ),
    ),
    Kind(
        "additive_finite",
        "fill",
        "an additive mask of -1e4 (added to the scores, outweighed by large ones)",
        ("weak_mask_constant", "weak_mask_fill"),
        (
            E("full of -1e4", (f"torch.full((T, T), {INF}, dtype=X.dtype", "torch.full((T, T), -1e4, dtype=X.dtype")),
            E("full of -1e4", (f"torch.full_like(scores[0], {INF})", "torch.full_like(scores[0], -1e4)")),
            E("full of -1e4", (f"torch.full((max_len, max_len), {INF})", "torch.full((max_len, max_len), -1e4)")),
            E(
                "full of -1e4",
                (
                    f"attn_bias.masked_fill_(temp_mask.logical_not(), {INF})",
                    "attn_bias.masked_fill_(temp_mask.logical_not(), -1e4)",
                ),
            ),
            E("full of -1e4", (f"torch.full((T, T), {INF}, dtype=dtype", "torch.full((T, T), -1e4, dtype=dtype")),
            E(
                "(1 - tril) * -1e4",
                (
                    "S + torch.zeros(T, T, dtype=S.dtype, device=S.device).masked_fill(\n"
                    f"            torch.ones(T, T, dtype=torch.bool, device=S.device).triu(1), {INF}\n        )",
                    "S + (1 - torch.ones(T, T, dtype=S.dtype, device=S.device).tril()) * -1e4",
                ),
            ),
            E("NumPy full of -1e4", ("np.full((T, T), -np.inf)", "np.full((T, T), -1e4)")),
        ),
    ),
    Kind(
        "mask_times_inf",
        "fill",
        "a 0/1 mask multiplied by -inf (0 * -inf is NaN where a key is allowed)",
        ("non_finite_outputs",),
        (
            E(
                "triu of ones times -inf",
                (
                    f"torch.full((T, T), {INF}, dtype=X.dtype, device=X.device).triu(1)",
                    f"torch.ones(T, T, dtype=X.dtype, device=X.device).triu(1) * {INF}",
                ),
            ),
            E(
                "triu of ones times -inf",
                (f"torch.full((max_len, max_len), {INF}).triu(1)", f"torch.ones(max_len, max_len).triu(1) * {INF}"),
            ),
            E(
                "triu of ones times -inf",
                (
                    f"torch.full((T, T), {INF}, dtype=dtype, device=device).triu(1)",
                    f"torch.ones(T, T, dtype=dtype, device=device).triu(1) * {INF}",
                ),
            ),
            E(
                "(1 - tril) * -inf",
                (
                    "S + torch.zeros(T, T, dtype=S.dtype, device=S.device).masked_fill(\n"
                    f"            torch.ones(T, T, dtype=torch.bool, device=S.device).triu(1), {INF}\n        )",
                    f"S + (1 - torch.ones(T, T, dtype=S.dtype, device=S.device).tril()) * {INF}",
                ),
            ),
            E(
                "NumPy ones times -inf",
                ("bias = np.triu(np.full((T, T), -np.inf), k=1)", "bias = np.triu(np.ones((T, T)), k=1) * -np.inf"),
            ),
        ),
    ),
)

MASK = (*_PATTERN, *_APPLIED, *_AFTER, *_FILL)
