"""Every mistake by intervention (issue 35): the worker's ``intervene`` op, the walk, and the causes it makes.

Most tests run the worker's op in this process (``_ops`` imported as the worker imports it) on small modules
written here, so they need no sandbox; the last ones run a head in the worker, as a grade does.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from grader.diagnosis import _intervene, _pointing, diagnose
from grader.diagnosis._intervene import intervene
from grader.diagnosis._known import PROBE_SEED
from grader.diagnosis._stages import stages_of
from grader.diagnosis._trace import probe, traced
from grader.diagnosis._where import ARGS, ATTENTION
from grader.head import Head
from grader.library import load_reference
from grader.models import CheckResult, Diagnosis
from grader.oracle import LiveOracle
from grader.rubric import Rubric
from grader.sandbox import Sandbox, WorkerPool

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "grader" / "sandbox"))  # the worker's own modules, as the worker imports them
import _ops  # type: ignore[import-not-found]  # noqa: E402

HEADER = "import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n\n\n"
LINE0 = HEADER.count("\n")  # a case's first line is line LINE0 + 1 of the file

CASES = {  # source, then the lines (of the source) each mistake is at, in the order the walk finds them
    "scale then no mask": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    C = X.shape[-1]
    wei = q @ k.transpose(-2, -1) * C**-0.5
    wei = torch.softmax(wei, dim=-1)
    return wei @ v, wei
""",
        [5, 6],
    ),
    "head axis, diagonal masked, dropout": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = (X @ W_Q).unsqueeze(1), (X @ W_K).unsqueeze(1), (X @ W_V).unsqueeze(1)
    s = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1])
    T = X.shape[1]
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(0), -1e9)
    w = torch.softmax(s, dim=-1)
    w = F.dropout(w, 0.1)
    return (w @ V).squeeze(1), w.squeeze(1)
""",
        [6, 8],
    ),
    "per-sequence loop, width scale": (
        """
def one(x, wq, wk, wv, causal):
    q, k, v = x @ wq, x @ wk, x @ wv
    s = q @ k.T / math.sqrt(x.shape[-1])
    if causal:
        s = s + torch.triu(torch.full((x.shape[0], x.shape[0]), float("-inf"), dtype=s.dtype), 1)
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs = [one(x, W_Q, W_K, W_V, causal) for x in X]
    return torch.stack([o for o, _ in outs]), torch.stack([w for _, w in outs])
""",
        [4],
    ),
    "numpy softmax divided by the scores' sum": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    x, wq, wk, wv = (t.numpy() for t in (X, W_Q, W_K, W_V))
    q = x @ wq
    k = x @ wk
    v = x @ wv
    s = q @ k.transpose(0, 2, 1) / np.sqrt(k.shape[-1])
    T = x.shape[1]
    if causal:
        s = np.where(np.triu(np.ones((T, T)), 1) > 0, -np.inf, s)
    e = np.exp(s - s.max(-1, keepdims=True))
    with np.errstate(all="ignore"):
        w = e / s.sum(-1, keepdims=True)
    return torch.from_numpy(w @ v), torch.from_numpy(w)
""",
        [13],
    ),
    "a crash at the mask, then dropout": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(8, 8, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    w = F.dropout(w, 0.2)
    return w @ V, w
""",
        [6, 8],
    ),
    "float32 by a cast of each projection": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = (X @ W_Q).float(), (X @ W_K).float(), (X @ W_V).float()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        T = X.shape[1]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return (w @ v).to(X.dtype), w
""",
        [3],
    ),
    "per-sequence loop: keys from W_Q, scaled up, the mask one place late": (
        """
def one(x, wq, wk, wv, causal):
    q, k, v = x @ wq, x @ wk, x @ wv
    s = q @ k.T * math.sqrt(k.shape[1])
    if causal:
        T = x.shape[0]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(2), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs = [one(x, W_Q, W_Q, W_V, causal) for x in X]
    return torch.stack([o for o, _ in outs]), torch.stack([w for _, w in outs])
""",
        [4, 4, 7],
    ),
    "always masks": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1])
    T = X.shape[1]
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ V, w
""",
        [6],
    ),
}


class InProcess:
    """A head run by the worker's ops in this process (``Head.probe`` and ``Head.intervene``, unsandboxed)."""

    def __init__(self, path: Path) -> None:
        spec = importlib.util.spec_from_file_location("attention_head", path)
        assert spec is not None and spec.loader is not None
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)

    def probe(
        self, name: str, args: list[Any], tensors: dict[str, torch.Tensor], *, seed: int, op: str, **options: Any
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        return _ops.dispatch(self.module, op, {"fn": name, "args": args, "seed": seed, **options}, tensors)

    def intervene(
        self,
        name: str,
        args: list[Any],
        tensors: dict[str, torch.Tensor],
        patches: Sequence[dict[str, Any]],
        *,
        seed: int,
        causal: bool,
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        return Head.intervene(cast(Head, self), name, args, tensors, patches, seed=seed, causal=causal)


def _head(tmp_path: Path, source: str, name: str = "attention_head.py") -> Head:
    folder = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / name).write_text(source, encoding="utf-8")
    return cast(Head, InProcess(folder / name))


# ---- the worker's op ---------------------------------------------------------------------------------------------


def test_a_replaced_torch_value_is_what_the_head_goes_on_with_and_what_is_recorded(tmp_path: Path) -> None:
    head = _head(tmp_path, HEADER + CASES["scale then no mask"][0])
    tensors = probe()
    stages = stages_of(tensors, True, (), {}, None)
    assert stages is not None
    line = LINE0 + 5  # wei = q @ k.transpose(-2, -1) * C**-0.5: transpose, matmul, then the multiply (nth 2)
    patch = {"file": "attention_head.py", "line": line, "nth": 2, "value": stages["masked"]}
    trace = traced(head, tensors, True, patches=[patch])
    assert trace is not None and trace.raised is None
    [mul] = [r for r in trace.records if r.line == line and r.op == "mul"]
    assert mul.value is not None and torch.equal(mul.value, stages["masked"])
    out, weights = trace.returns
    assert out is not None and weights is not None
    assert torch.allclose(weights, stages["weights"]) and torch.allclose(out, stages["out"])
    plain = traced(head, tensors, True)  # without patches: the head's own values, as the trace op gives them
    assert plain is not None and not torch.allclose(plain.returns[1], stages["weights"])  # type: ignore[arg-type]


def test_pass_through_returns_the_ops_input_and_restores_an_in_place_target(tmp_path: Path) -> None:
    source = """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1])
    T = X.shape[1]
    s.masked_fill_(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    w = F.dropout(w, 0.5)
    return w @ V, w
"""
    head = _head(tmp_path, HEADER + source)
    tensors = probe()
    stages = stages_of(tensors, False, (), {}, None)
    assert stages is not None
    patches = [
        {"file": "attention_head.py", "line": LINE0 + 6, "nth": 2, "value": None},  # ones, triu, then the mask: undone
        {"file": "attention_head.py", "line": LINE0 + 8, "nth": 0, "value": None},  # dropout, skipped
    ]
    trace = traced(head, tensors, False, patches=patches)
    assert trace is not None and trace.raised is None
    assert torch.allclose(trace.returns[1], stages["weights"])  # type: ignore[arg-type]
    assert torch.allclose(trace.returns[0], stages["out"])  # type: ignore[arg-type]


def test_a_numpy_local_is_replaced_from_the_line_tracer(tmp_path: Path) -> None:
    source, [line] = CASES["numpy softmax divided by the scores' sum"]
    head = _head(tmp_path, HEADER + source)
    tensors = probe()
    stages = stages_of(tensors, True, (), {}, None)
    assert stages is not None
    patch = {"file": "attention_head.py", "line": LINE0 + line, "nth": 0, "var": "w", "value": stages["weights"]}
    trace = traced(head, tensors, True, patches=[patch])
    assert trace is not None and trace.raised is None
    assert torch.allclose(trace.returns[1], stages["weights"])  # type: ignore[arg-type]
    assert torch.allclose(trace.returns[0], stages["out"])  # type: ignore[arg-type]  # w @ v read the patch


def test_a_crashing_op_is_walked_past_with_its_patch(tmp_path: Path) -> None:
    source = """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K / math.sqrt(K.shape[-1])
    w = torch.softmax(s, dim=-1)
    return w @ V, w
"""
    head = _head(tmp_path, HEADER + source)
    tensors = probe()
    stages = stages_of(tensors, False, (), {}, None)
    assert stages is not None
    assert (crashed := traced(head, tensors, False)) is not None and crashed.raised is not None
    patch = {"file": "attention_head.py", "line": LINE0 + 4, "nth": 0, "value": stages["scores"]}  # Q @ K raises
    trace = traced(head, tensors, False, patches=[patch])
    assert trace is not None and trace.raised is None
    assert torch.allclose(trace.returns[1], stages["weights"])  # type: ignore[arg-type]


# ---- the walk -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_every_mistake_is_found_at_its_line_and_the_head_repaired(tmp_path: Path, case: str) -> None:
    source, lines = CASES[case]
    walk = intervene(_head(tmp_path, HEADER + source))
    assert [i.record.line - LINE0 for i in walk.interventions] == lines
    assert walk.complete, walk.repaired
    assert walk.runs <= 2 * _intervene.RUNS_MAX


def test_two_mistakes_with_no_op_between_stay_two_and_are_described(tmp_path: Path) -> None:
    walk = intervene(_head(tmp_path, HEADER + CASES["scale then no mask"][0]))
    scale, mask = walk.interventions
    assert scale.stage == "scaled" and "1/sqrt(d) = 0.4472" in scale.description
    assert mask.stage == "weights" and "not masked" in mask.description


def test_dropout_is_passed_through_and_a_head_axis_read_in_the_stage_layout(tmp_path: Path) -> None:
    walk = intervene(_head(tmp_path, HEADER + CASES["head axis, diagonal masked, dropout"][0]))
    mask, dropout = walk.interventions
    assert "hides the diagonal too" in mask.description
    assert mask.value is not None and mask.value.shape == (2, 7, 7)
    assert dropout.passthrough and "dropout with p = 0.1" in dropout.description


def test_a_mask_applied_whatever_the_flag_is_found_at_causal_false(tmp_path: Path) -> None:
    walk = intervene(_head(tmp_path, HEADER + CASES["always masks"][0]))
    [mask] = walk.interventions
    assert not mask.causal and "although causal=False" in mask.description
    assert walk.repaired == {True: True, False: True}


UNSCALED_MASK_ELSEWHERE = """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K.transpose(-2, -1)
    T = X.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).tril(-1)
    if causal:
        s = s.masked_fill(future, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ V, w
"""


def test_each_stage_is_put_in_where_it_is_due_not_the_furthest_one(tmp_path: Path) -> None:
    """Q Q^T is replaced by the scores (not by the weights, which reach further), and the multiply after it by
    the scaled scores (not passed through, which would leave the scale to the mask's patch)."""
    walk = intervene(
        _head(tmp_path, HEADER + CASES["per-sequence loop: keys from W_Q, scaled up, the mask one place late"][0])
    )
    keys, scale, mask = walk.interventions
    assert (keys.stage, scale.stage, mask.stage) == ("scores", "scaled", "masked")
    # used in the scores at 4, made at 3 of the parameter wk, which the caller binds to W_Q at 13: the line to edit
    assert (keys.record.line - LINE0, keys.at.line - LINE0) == (4, 13)
    assert "query projection" in keys.description and "sqrt(d_k) = 2.449" in scale.description
    assert "of the argument passed here" in keys.description
    assert all(len(i.patches) == 2 for i in walk.interventions)  # each sequence's occurrence, with its own slice


KEYS_FROM_WQ_INSIDE = """
def one(x, wq, wk, wv, causal):
    q = x @ wq
    k = x @ wq
    v = x @ wv
    s = q @ k.T / math.sqrt(k.shape[1])
    if causal:
        T = x.shape[0]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs = [one(x, W_Q, W_K, W_V, causal) for x in X]
    return torch.stack([o for o, _ in outs]), torch.stack([w for _, w in outs])
"""


def test_keys_made_with_the_wrong_parameter_are_at_their_own_line(tmp_path: Path) -> None:
    """The converse of the caller's argument: ``k = x @ wq`` reads a parameter the queries read too, bound to the
    right input; the line to edit is the one that reads it where ``wk`` belongs, never the caller's."""
    [keys] = intervene(_head(tmp_path, HEADER + KEYS_FROM_WQ_INSIDE)).interventions
    assert "query projection" in keys.description
    assert keys.at.line - LINE0 == 4


def test_a_missing_scale_and_a_mask_built_elsewhere_are_at_their_lines_to_edit(tmp_path: Path) -> None:
    walk = intervene(_head(tmp_path, HEADER + UNSCALED_MASK_ELSEWHERE))
    scale, mask = walk.interventions
    assert (scale.at.line - LINE0, scale.stage) == (4, "scaled")  # where the scores are made, not the mask's line
    assert "never divided by sqrt(d_k)" in scale.description
    assert (mask.record.line - LINE0, mask.at.line - LINE0) == (8, 6)  # applied at 8, its pattern made at 6
    assert "the mask is transposed" in mask.description and "applied at line" in mask.description
    assert walk.complete


def test_a_named_mistake_without_a_line_takes_the_line_of_the_intervention_its_model_makes(tmp_path: Path) -> None:
    walk = intervene(_head(tmp_path, HEADER + UNSCALED_MASK_ELSEWHERE))
    named = [
        Diagnosis(id=m, title="t", hint="h", cites="c", kind="mutation") for m in ("no_scaling", "mask_transposed")
    ]
    placed = _pointing._placed(named, walk.interventions, {})
    assert [c.where.line - LINE0 if c.where else None for c in placed] == [4, 6]


MASK_THEN_SCALE = """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K.transpose(-2, -1)
    T = X.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu({diagonal})
    if causal:
        s.masked_fill_(future, float("-inf"))
    w = torch.softmax(s / math.sqrt({width}), dim=-1)
    return w @ V, w
"""


def test_a_head_that_masks_then_scales_is_walked_in_its_own_order(tmp_path: Path) -> None:
    """The masked scores before the scale are an equivalent form: correct, nothing is patched; with the mask one
    place late and the model width's scale, the mask is patched in that form (not to the scaled stage a line
    early) and the scale where it is applied."""
    right = intervene(_head(tmp_path, HEADER + MASK_THEN_SCALE.format(diagonal=1, width="K.shape[-1]")))
    assert right.interventions == [] and right.complete
    walk = intervene(_head(tmp_path, HEADER + MASK_THEN_SCALE.format(diagonal=2, width="X.shape[-1]")))
    mask, scale = walk.interventions
    assert (mask.record.line - LINE0, mask.at.line - LINE0, scale.at.line - LINE0) == (8, 6, 9)
    assert "leaks through" in mask.description and "1/sqrt(d) = 0.4472" in scale.description
    assert walk.complete


def test_the_input_bound_where_the_values_belong_is_at_its_line(tmp_path: Path) -> None:
    """A returned output of another width (A X, d wide, where A V is d_v wide) is replaced by the output; the
    line to edit is the one that bound the input."""
    source = """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k = X @ W_Q, X @ W_K
    v = X
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    T = X.shape[1]
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")) if causal else s
    w = torch.softmax(s, dim=-1)
    return w @ v, w
"""
    walk = intervene(_head(tmp_path, HEADER + source))
    [values] = walk.interventions
    assert (values.stage, values.record.line - LINE0, values.at.line - LINE0) == ("out", 9, 4)
    assert values.description.startswith("X used where V = X W_V belongs") and walk.complete


def _correct_heads() -> list[tuple[str, str]]:
    ref = (REPO / "reference" / "attention_head.py").read_text(encoding="utf-8")
    variants = tomllib.loads((REPO / "reference" / "variants" / "catalog.toml").read_text(encoding="utf-8"))
    out = [
        (v["id"], ref + "\n" + (REPO / "reference" / "variants" / f"{v['id']}.py").read_text(encoding="utf-8"))
        for v in variants["variant"]
    ]
    realistic = tomllib.loads((REPO / "tests" / "realistic" / "catalog.toml").read_text(encoding="utf-8"))
    out += [
        (h["id"], (REPO / "tests" / "realistic" / f"{h['id']}.py").read_text(encoding="utf-8"))
        for h in realistic["head"]
        if "(correct" in h["title"]
    ]
    return out


@pytest.mark.parametrize(("name", "source"), _correct_heads(), ids=[n for n, _ in _correct_heads()])
def test_a_correct_head_gets_no_intervention(tmp_path: Path, name: str, source: str) -> None:
    walk = intervene(_head(tmp_path, source))
    assert walk.interventions == [] and walk.complete
    assert walk.runs == 3  # one traced call per flag and one on the large probe, nothing else


# ---- in the worker, and as causes -----------------------------------------------------------------------------

FAILED = [
    CheckResult(id=c, title="t", cites="c", status="failed", score=0, max_score=1, message="m", seed=0, duration_s=0)
    for c in ("reference_match",)
]


def test_the_engine_runs_in_the_worker_and_its_causes_point_at_every_line(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K.transpose(-2, -1) * 0.5
    T = X.shape[1]
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    w = w.clamp(min=0.01)
    return w @ V, w
"""
    (tmp_path / "attention_head.py").write_text(HEADER + source, encoding="utf-8")
    with Sandbox(tmp_path, rubric.limits, pool=pool) as sandbox:
        head = Head(sandbox, rubric.entry_points)
        walk = intervene(head)
        # a fixed factor, a clamp, and a mask applied whatever the flag (found at causal=False)
        assert [i.record.line - LINE0 for i in walk.interventions] == [4, 8, 6] and walk.complete
        header, _ = head.intervene(ATTENTION, ARGS, probe(), [], seed=PROBE_SEED, causal=True)
        assert header["records"] and "raised" not in header
        monkeypatch.setattr(_pointing, "INTERVENE", False)
        before = diagnose(FAILED, head, LiveOracle(load_reference()))
        monkeypatch.setattr(_pointing, "INTERVENE", True)
        after = diagnose(FAILED, head, LiveOracle(load_reference()))
    lines = {c.where.line - LINE0 for c in after if c.where is not None}
    assert {4, 6, 8} <= lines
    assert {c.id for c in before} <= {c.id for c in after}
    added = [c for c in after if c.id not in {b.id for b in before}]
    assert all(c.departure is not None for c in added), added  # each with the values at its line
    assert {c.id for c in added} == {"departure:weights", "causal_flag_ignored"}  # the catalog names the flag


def test_a_numpy_head_is_patched_in_the_worker(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    """Frame locals written from the line tracer (PyFrame_LocalsToFast before Python 3.13) in the sandbox."""
    source, lines = CASES["numpy softmax divided by the scores' sum"]
    (tmp_path / "attention_head.py").write_text(HEADER + source, encoding="utf-8")
    with Sandbox(tmp_path, rubric.limits, pool=pool) as sandbox:
        walk = intervene(Head(sandbox, rubric.entry_points))
    assert [i.at.line - LINE0 for i in walk.interventions] == lines and walk.complete
