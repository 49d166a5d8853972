"""Agreement with PyTorch's fused kernel, and no borrowing of it (Aside 8.1 context)."""

from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from grader.checks._base import Ctx, Verdict, check, failed, heatmaps_for, passed
from grader.compare import TOLERANCES, dtype_name, mismatch
from grader.inputs import FAMILIES, Case

# Calls that reach the same kernels under other names; traced alongside the rubric's list.
ALIASES = {"torch.nn.functional.scaled_dot_product_attention": ["torch._C._nn.scaled_dot_product_attention"]}


def sdpa_reference(case: Case, causal: bool) -> torch.Tensor:
    """torch's fused scaled_dot_product_attention on the projected inputs, in the case's dtype."""
    Q, K, V = case.X @ case.W_Q, case.X @ case.W_K, case.X @ case.W_V  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
    return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)  # (B, T, d_v)


@check(
    "fused_kernel",
    title="outputs agree with torch's fused scaled_dot_product_attention on CPU",
    cites="Aside 8.1 (fused kernels compute the same function)",
)
def fused_kernel(ctx: Ctx) -> Verdict:
    """Aside 8.1: a fused kernel is an exact reorganisation of dense attention, so the head agrees with
    torch.nn.functional.scaled_dot_product_attention (is_causal=True and False) in float64 and float32."""
    for dtype in (torch.float64, torch.float32):
        tol = TOLERANCES[dtype]
        for case in ctx.cases(FAMILIES[2:], dtype=dtype):
            for causal in (True, False):
                call = ctx.head.attention(case, causal=causal)
                expected = sdpa_reference(case, causal)
                bad = mismatch(call.out, expected, tol, f"out vs SDPA (causal={causal}, {dtype_name(dtype)})")
                if bad is not None:
                    return failed(
                        "Your output differs from torch's fused scaled_dot_product_attention "
                        f"(is_causal={causal}) on the same inputs.\n{bad.text()}",
                        counterexample=case.counterexample(ctx.base_seed, causal=causal),
                        heatmaps=heatmaps_for(call.weights, None, causal=causal),
                    )
    return passed("Agrees with torch's scaled_dot_product_attention on CPU in float64 and float32.")


def static_forbidden(source: str, forbidden: list[str]) -> list[str]:
    """Forbidden names that the source refers to (attributes, imports, bare names; not comments)."""
    leaves = {name.rsplit(".", 1)[-1]: name for name in forbidden}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    hits = set()
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.alias):
            name = node.name.rsplit(".", 1)[-1]
        if name in leaves:
            hits.add(leaves[name])
    return sorted(hits)


@check(
    "forbidden_api",
    title="the head computes attention itself (no fused attention or MultiheadAttention)",
    cites="Exercise 2 (implement one head)",
)
def forbidden_api(ctx: Ctx) -> Verdict:
    """Exercise 2: the head is implemented from its definition; it neither refers to nor calls the
    rubric's forbidden functions (checked in the source and by tracing a call)."""
    forbidden = list(ctx.rubric.forbidden_calls)
    in_source = static_forbidden(ctx.source, forbidden)
    traced = forbidden + [a for f in forbidden for a in ALIASES.get(f, [])]
    case = next(ctx.cases(FAMILIES[2:3]))
    called = ctx.head.traced_calls(case, traced)
    called = sorted({next((f for f in forbidden if c == f or c in ALIASES.get(f, [])), c) for c in called})
    found = sorted(set(in_source) | set(called))
    if found:
        how = []
        if in_source:
            how.append("referred to in your source")
        if called:
            how.append("called during a forward pass")
        return failed(
            f"Your head uses {', '.join(found)} ({' and '.join(how)}). Exercise 2 asks you to implement the "
            "head from its definition: scores, mask, softmax, weighted sum of values."
        )
    return passed("No forbidden attention API is referred to or called.")
