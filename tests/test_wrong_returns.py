"""The grader never raises on what a head returns (issue 30, point 6): a fuzz over heads that return every
wrong shape, dtype and type, for either value, and a few wrong containers.

Each head is the reference with its result replaced, so the student's code never raises: any check that
reports an exception (its own or the worker's, "did not complete") met an error of the grader's code, which
must never happen. A wrong return is the contract's verdict, named by a cause; and where one value keeps the
contract, the checks that need only that one still pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.checks._base import BREACH, CASE_STOPPED, STOPPED
from grader.library import reference_path
from grader.models import FAILING
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

# What replaces one value (``t``: the right tensor of that value), in a few words each.
WRONG = {
    "no_batch_axis": "t[0]",
    "extra_axis": "t.unsqueeze(0)",
    "transposed": "t.transpose(1, 2)",
    "one_column_short": "t[..., :-1]",
    "scalar": "t.sum()",
    "empty": "t[:, :0]",
    "int64": "t.long()",
    "bool": "t > 0",
    "complex": "t.to(torch.complex128)",
    "none": "None",
    "list": "t.tolist()",
    "numpy": "t.detach().numpy()",
    "number": "3",
    "text": "'weights'",
}
# Whole results that are not (out, weights).
CONTAINERS = {
    "single_tensor": "o",  # out alone: judged as out, the weights missing
    "one_tuple": "(o,)",
    "three_values": "(o, w, w)",
    "dict": "{'out': o, 'weights': w}",
    "none_at_all": "None",
}
# Checks that read only out: they must still judge a sound out beside broken weights.
OUT_ONLY = ("convex_hull", "batch_independence", "determinism", "future_perturbation")
SKIPPED = ("performance", "student_tests", "streaming_softmax", "kv_cache", "fused_kernel_cuda")


def _head(result: str) -> str:
    return (
        reference_path().read_text(encoding="utf-8")
        + "\n\n_right = causal_self_attention\n\n\n"
        + "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n"
        + "    o, w = _right(X, W_Q, W_K, W_V, causal=causal)\n"
        + f"    return {result}\n"
    )


CASES = {
    **{f"out_{k}": f"({v.replace('t', 'o', 1) if v.startswith('t') else v}, w)" for k, v in WRONG.items()},
    **{f"weights_{k}": f"(o, {v.replace('t', 'w', 1) if v.startswith('t') else v})" for k, v in WRONG.items()},
    **CONTAINERS,
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_wrong_return_is_the_contracts_verdict_never_an_error_of_the_grader(
    name: str, rubric: Rubric, pool: WorkerPool, write_head, tmp_path: Path
) -> None:
    only = [cid for cid, rc in rubric.checks.items() if rc.enabled and cid not in SKIPPED]
    result = grade(write_head(_head(CASES[name])), rubric, pool=pool, only=only, visuals=False)
    ours = [
        f"{c.id}: {c.message.splitlines()[0]}"
        for c in result.checks
        if c.status == "error" or STOPPED in c.message or CASE_STOPPED in c.message or "Internal grader" in c.message
    ]
    assert not ours, f"{name}: the grader's own code raised:\n" + "\n".join(ours)
    by_id = {c.id: c for c in result.checks}
    if name == "weights_transposed":  # (B, T, T) still: a wrong value, judged by the property checks
        assert by_id["row_stochastic"].status == "failed"
        return
    assert by_id["interface"].status == "failed", f"{name}: interface passed"
    breached = [c for c in result.checks if c.status in FAILING and c.message.startswith(BREACH)]
    unexplained = [c.id for c in breached if not c.causes]
    assert breached and not unexplained, f"{name}: unexplained {unexplained}"
    if name.startswith("weights_") or name == "single_tensor":  # out is sound: what needs only out is judged
        assert all(by_id[cid].status == "passed" for cid in OUT_ONLY), {cid: by_id[cid].message for cid in OUT_ONLY}
