"""The softmax (Propositions 3.1 and 5.1): its axis, its stability, its dtype, and what replaces it."""

from __future__ import annotations

from . import E, Kind

SM = "torch.softmax(scores, dim=-1)"  # inline_steps, helpers' attend and a dozen others
OWN_BODY = (
    "    x = x - x.amax(dim=dim, keepdim=True)\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)\n"
)

SOFTMAX = (
    Kind(
        "softmax_axis",
        "softmax",
        "the softmax over the queries (the columns sum to one)",
        ("softmax_wrong_axis",),
        (
            E("dim=-2", (SM, "torch.softmax(scores, dim=-2)")),
            E("dim=-2", ("scores.softmax(dim=-1)", "scores.softmax(dim=-2)")),
            E("dim=1 of a 3-D tensor", ("torch.softmax(s, dim=2)", "torch.softmax(s, dim=1)")),
            E("dim=1 of a 3-D tensor", ("F.softmax(att, dim=-1)", "F.softmax(att, dim=1)")),
            E("dim=0 of a 2-D tensor", ("torch.softmax(scores, dim=1)", "torch.softmax(scores, dim=0)")),
            E("configured once", ("partial(torch.softmax, dim=-1)", "partial(torch.softmax, dim=-2)")),
            E("configured once", ("nn.Softmax(dim=-1)", "nn.Softmax(dim=-2)")),
        ),
    ),
    Kind(
        "softmax_batch_axis",
        "softmax",
        "the softmax across the batch",
        ("softmax_over_batch",),
        (
            E("dim=0", (SM, "torch.softmax(scores, dim=0)")),
            E("dim=0", ("attn = sim.softmax(dim=-1)", "attn = sim.softmax(dim=0)")),
            E("the dim left implicit", ("F.softmax(att, dim=-1)", "F.softmax(att)")),
            E("the dim left implicit", ("F.softmax(scores, dim=-1)\n", "F.softmax(scores)\n")),
            E("configured once", ("partial(torch.softmax, dim=-1)", "partial(torch.softmax, dim=-3)")),
            E("configured once", ("nn.Softmax(dim=-1)", "nn.Softmax(dim=0)")),
        ),
    ),
    Kind(
        "softmax_unstable",
        "stability",
        "a softmax without the row max subtracted (exp overflows at large scores)",
        ("unstable_softmax",),
        (
            E(
                "the max line dropped",
                ("    x = x - x.amax(dim=dim, keepdim=True)\n", ""),
                fix=(("    e = torch.exp(x)\n", "    e = torch.exp(x - x.amax(dim=dim, keepdim=True))\n"),),
            ),
            E(
                "written out on one line",
                ("weights = " + SM, "weights = torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)"),
            ),
            E(
                "written out on one line",
                ("weights = scores.softmax(dim=-1)", "weights = scores.exp() / scores.exp().sum(-1, keepdim=True)"),
            ),
            E(
                "written out on two lines",
                ("attn = " + SM, "attn = torch.exp(scores)\n    attn = attn / attn.sum(dim=-1, keepdim=True)"),
            ),
        ),
    ),
    Kind(
        "softmax_global_max",
        "stability",
        "the max of the whole tensor subtracted, not each row's (rows underflow to 0/0)",
        ("global_max_softmax",),
        (
            E("x.max() in the helper", ("x = x - x.amax(dim=dim, keepdim=True)", "x = x - x.max()")),
            E(
                "the max over the batch too",
                ("x = x - x.amax(dim=dim, keepdim=True)", "x = x - x.amax(dim=(0, dim), keepdim=True)"),
            ),
            E(
                "written out with the global max",
                (
                    "weights = " + SM,
                    "weights = torch.exp(scores - scores.max())\n"
                    "    weights = weights / weights.sum(dim=-1, keepdim=True)",
                ),
            ),
            E(
                "written out with the global max",
                (
                    "weights = scores.softmax(dim=-1)",
                    "weights = (scores - scores.amax()).exp()\n    weights = weights / weights.sum(-1, keepdim=True)",
                ),
            ),
        ),
    ),
    Kind(
        "sigmoid_weights",
        "weights",
        "a sigmoid of each score in place of the softmax",
        (),
        (
            E("torch.sigmoid", (SM, "torch.sigmoid(scores)")),
            E("torch.sigmoid", ("attn = sim.softmax(dim=-1)", "attn = sim.sigmoid()")),
            E("F.sigmoid", ("F.softmax(att, dim=-1)", "F.sigmoid(att)")),
            E("written out", ("weights = scores.softmax(dim=-1)", "weights = 1 / (1 + torch.exp(-scores))")),
            E("written out", (OWN_BODY, "    return 1 / (1 + torch.exp(-x))\n")),
        ),
        finding=(("stage", "weights"), ("what", "sigmoid")),
    ),
    Kind(
        "softmax_plus_one",
        "weights",
        "a softmax with an extra zero logit (rows sum to less than one)",
        (),
        (
            E(
                "a zero column padded on",
                (
                    "weights = " + SM,
                    "weights = torch.softmax(torch.nn.functional.pad(scores, (0, 1)), dim=-1)[..., :-1]",
                ),
            ),
            E(
                "zeros concatenated",
                (
                    "weights = " + SM,
                    "weights = torch.softmax(torch.cat([scores, scores.new_zeros(*scores.shape[:-1], 1)], "
                    "-1), dim=-1)[..., :-1]",
                ),
                only=("helpers", "keyword_helper", "numpy_bias", "additive_bias"),
            ),
            E(
                "one added to the denominator",
                (
                    OWN_BODY,
                    "    m = x.amax(dim=dim, keepdim=True)\n"
                    "    e = torch.exp(x - m)\n"
                    "    return e / (torch.exp(-m) + e.sum(dim=dim, keepdim=True))\n",
                ),
            ),
        ),
        finding=(("stage", "weights"), ("what", "an extra zero logit")),
    ),
    Kind(
        "softmax_float32",
        "precision",
        "the softmax computed in float32 and cast back",
        ("softmax_in_float32", "computed_in_float32"),
        (
            E(".float() and back", (SM, "torch.softmax(scores.float(), dim=-1).to(scores.dtype)")),
            E(".float() and back", ("attn = sim.softmax(dim=-1)", "attn = sim.float().softmax(dim=-1).to(sim.dtype)")),
            E("dtype=torch.float32", ("dtype=scores.dtype)", "dtype=torch.float32).to(scores.dtype)")),
            E(
                "dtype=torch.float32",
                ("F.softmax(att, dim=-1)", "F.softmax(att, dim=-1, dtype=torch.float32).type_as(att)"),
            ),
            E(
                "the helper casts",
                (
                    OWN_BODY,
                    "    dtype = x.dtype\n    x = x.float()\n"
                    + OWN_BODY.replace("keepdim=True)\n", "keepdim=True).to(dtype)\n"),
                ),
            ),
        ),
    ),
)
