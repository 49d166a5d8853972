"""Proven causes (issue 35, point 3): the walk's changes applied to the head in the worker, the checks run again
on it, a claim that does not hold narrowed, and the diagnosis proven complete when every property check passes."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from grader.checks import CHECKS
from grader.diagnosis._intervene import Walk, intervene
from grader.diagnosis._proof import PatchedHead, Walked, _Patch, _rebuilt, prove
from grader.gradescope import results_json
from grader.head import Head
from grader.inputs import Shape, make_case
from grader.library import load_reference, reference_path
from grader.models import FAILING, Diagnosis, DiagnosisProof, GradeResult
from grader.oracle import LiveOracle
from grader.report.html import render_html
from grader.report.terminal import render_terminal, summary_console
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import Sandbox, WorkerPool

REPO = Path(__file__).resolve().parent.parent

REFERENCE = reference_path().read_text(encoding="utf-8")
SCALE = "att = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)  #"
SOFTMAX = "att = torch.softmax(att, dim=-1)  #"
assert REFERENCE.count(SCALE) == 1 and REFERENCE.count(SOFTMAX) == 1  # the head's own lines, once each

BY_DK = REFERENCE.replace(SCALE, "att = (q @ k.transpose(-2, -1)) / d_k  #")
BY_DK_AND_DROPOUT = BY_DK.replace(SOFTMAX, "att = torch.nn.functional.dropout(torch.softmax(att, dim=-1), 0.1)  #")
# a mistake of the gradients alone beside one of the values: the walk repairs the values, gradient_blocks cannot be
# run with patches (no graph is recorded), so the diagnosis is not proven complete
BY_DK_DETACHED = BY_DK.replace("q = X @ W_Q  #", "q = X.detach() @ W_Q  #")
assert BY_DK_DETACHED != BY_DK

PER_SEQUENCE = """import math

import torch


def one(x, wq, wk, wv, causal):
    q, k, v = x @ wq, x @ wk, x @ wv
    s = q @ k.T / math.sqrt(x.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(x.shape[0], x.shape[0], dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    outs = [one(x, W_Q, W_K, W_V, causal) for x in X]
    return torch.stack([o for o, _ in outs]), torch.stack([w for _, w in outs])
"""


# the head's own checks (a module that defines the head alone fails the others: not the head's to prove)
HEAD_CHECKS = [cid for cid, spec in CHECKS.items() if "causal_self_attention" in spec.needs and not spec.timed]


def _graded(
    tmp_path: Path, source: str, rubric: Rubric, pool: WorkerPool, name: str = "sub", only: list[str] | None = None
) -> GradeResult:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "attention_head.py").write_text(source, encoding="utf-8")
    return grade(folder / "attention_head.py", rubric, pool=pool, visuals=False, only=only)


def test_one_mistake_is_proven_complete_with_one_change_on_every_surface(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    result = _graded(tmp_path, BY_DK, rubric, pool)
    assert [d.id for d in result.diagnosis] == ["scale_by_dk"]
    proof = result.diagnosis_complete
    assert proof is not None and proof.changes == 1
    failing = {c.id for c in result.checks if c.status in FAILING}
    assert {"reference_match", "score_scaling"} <= failing == set(proof.checks)  # each run again, and passed
    said = (
        "With this change your head computes the lecture's head on every property check: the 3 checks that failed "
        "pass with it applied, the others passed already."
    )
    out = io.StringIO()
    render_terminal(result, summary_console(out))
    assert said in " ".join(out.getvalue().split())
    assert said in render_html(result).replace("&#39;", "'")
    assert said in json.loads(json.dumps(results_json(result)))["output"]
    assert GradeResult.model_validate_json(result.model_dump_json()).diagnosis_complete == proof


def test_two_mistakes_are_proven_complete_with_two_changes(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    result = _graded(tmp_path, BY_DK_AND_DROPOUT, rubric, pool)
    assert {d.id for d in result.diagnosis} == {"scale_by_dk", "dropout_left_on"}
    proof = result.diagnosis_complete
    assert proof is not None and proof.changes == 2
    assert "determinism" in proof.checks  # dropout passed through: the same bits whatever the random state


def test_a_per_sequence_head_is_patched_at_every_batch_size(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    """The walk patches each sequence of its probe (B = 2); the checks' calls have B = 1, 2 and 3."""
    result = _graded(tmp_path, PER_SEQUENCE, rubric, pool, only=HEAD_CHECKS)
    assert result.diagnosis and result.diagnosis_complete is not None
    assert result.diagnosis_complete.changes == 1
    assert "reference_match" in result.diagnosis_complete.checks  # its cases have B = 1, 2 and 3


def test_a_correct_head_has_nothing_to_prove(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    result = _graded(tmp_path, REFERENCE, rubric, pool)
    assert result.diagnosis == [] and result.diagnosis_complete is None


def test_a_mistake_the_walk_cannot_patch_leaves_the_diagnosis_unproven(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    result = _graded(tmp_path, BY_DK_DETACHED, rubric, pool)
    assert any(c.id == "gradient_blocks" and c.status in FAILING for c in result.checks)
    assert "scale_by_dk" in {d.id for d in result.diagnosis}  # a catalog cause: kept as it was
    assert result.diagnosis_complete is None


def test_a_claim_that_does_not_hold_with_the_changes_is_narrowed(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The walk's cause for the dropout claims checks that still fail when only the scale is changed: they are
    taken from it; a walk cause left explaining nothing is dropped; the catalog's causes are never touched."""
    result = _graded(tmp_path, BY_DK_AND_DROPOUT, rubric, pool)
    folder = tmp_path / "sub"
    with Sandbox(folder, rubric.limits, pool=pool) as sandbox:
        head = Head(sandbox, rubric.entry_points)
        walk = intervene(head)
        assert walk.complete and len(walk.interventions) == 2
        scale = [i for i in walk.interventions if "dropout" not in i.description]
        partial = Walk(scale, dict(walk.repaired))  # the scale's change alone: the dropout's checks still fail
        dropout = next(d for d in result.diagnosis if d.id == "dropout_left_on")
        claims = ["determinism", "score_scaling"]  # determinism still fails without its change; scaling passes
        causes = [_claiming(d, claims) if d is dropout else d for d in result.diagnosis]
        ref, seed = LiveOracle(load_reference()), result.seed
        narrowed, proof = prove(head, causes, Walked(partial, {"dropout_left_on"}), result.checks, ref, rubric, seed)
        assert proof is None  # determinism fails with the changes: not complete
        assert next(d for d in narrowed if d.id == "dropout_left_on").explains == ["score_scaling"]
        assert next(d for d in narrowed if d.id == "scale_by_dk") == next(d for d in causes if d.id == "scale_by_dk")
        only = [_claiming(dropout, ["determinism"]) if d is dropout else d for d in result.diagnosis]
        dropped, _ = prove(head, only, Walked(partial, {"dropout_left_on"}), result.checks, ref, rubric, seed)
        assert "dropout_left_on" not in {d.id for d in dropped}
        kept, _ = prove(head, only, Walked(partial, set()), result.checks, ref, rubric, seed)  # a catalog cause
        assert "dropout_left_on" in {d.id for d in kept}


def _claiming(d: Diagnosis, explains: list[str]) -> Diagnosis:
    return d.model_copy(update={"explains": explains})


def test_the_patched_head_refuses_what_a_patched_call_cannot_give(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    from grader.diagnosis._proof import Unprovable

    (tmp_path / "attention_head.py").write_text(BY_DK, encoding="utf-8")
    with Sandbox(tmp_path, rubric.limits, pool=pool) as sandbox:
        head = Head(sandbox, rubric.entry_points)
        patched = PatchedHead(head, intervene(head))
        case = make_case(Shape(1, 3, 4, 2, 3), seed=0)
        call = patched.attention(case)
        expected = LiveOracle(load_reference()).expected(case, True)
        torch.testing.assert_close(call.weights, expected[1])  # the head with its change is the lecture's
        torch.testing.assert_close(call.out, expected[0])
        with pytest.raises(Unprovable):
            patched.attention(case, upstream=(torch.ones(1, 3, 3), None))
        with pytest.raises(Unprovable):
            patched.traced_calls(case, ["torch.softmax"])


def test_a_per_sequence_patch_is_laid_out_for_the_calls_batch() -> None:
    """A patch of sequence 0 at a line each sequence records 3 values at (the 2nd of them) is laid out once per
    sequence of a call of batch 3, each with its own slice; sequence 1's is laid out by sequence 0's."""
    stages = {"scaled": torch.arange(3 * 4 * 4, dtype=torch.float64).reshape(3, 4, 4)}
    first = _Patch("h.py", 7, 1, "", "scaled", "seq:0", 0, 0, None, 3)
    patches = _rebuilt(first, stages, B=3, T=4)
    assert [p["nth"] for p in patches] == [1, 4, 7]
    assert all(torch.equal(p["value"], stages["scaled"][b]) for b, p in enumerate(patches))
    assert _rebuilt(replace(first, nth=4, seq=1), stages, B=3, T=4) == []
    passthrough = _rebuilt(replace(first, stage=None, seq=None, layout="as is"), stages, B=2, T=4)
    assert [(p["nth"], p["value"]) for p in passthrough] == [(1, None), (4, None)]
    once = _rebuilt(replace(first, period=0, seq=None, layout="transposed"), stages, B=3, T=4)
    assert len(once) == 1 and torch.equal(once[0]["value"], stages["scaled"].transpose(-2, -1))


def test_the_proof_is_a_strict_model() -> None:
    with pytest.raises(ValueError):
        DiagnosisProof.model_validate({"changes": 1, "checks": [], "extra": 1})


@pytest.mark.diagnosis_error
def test_the_graders_own_exception_in_the_proof_is_recorded_and_changes_no_cause(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import grader.diagnosis._rules as rules_module

    def boom(*args: object) -> object:
        raise RuntimeError("a bug of the proof's own")

    monkeypatch.setattr(rules_module, "prove", boom)
    result = _graded(tmp_path, BY_DK, rubric, pool)
    assert result.diagnosis_error is not None and result.diagnosis_error.passes == ["prove"]
    assert [d.id for d in result.diagnosis] == ["scale_by_dk"] and result.diagnosis_complete is None
    assert result.score >= (result.score_by_checks or 0.0)


def test_a_mask_made_per_sequence_is_rebuilt_at_every_batch_size(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """A (B, 1, T, T) mask made from positions broadcast over the batch, patched where it is made (the diagonal it
    hides too): the walk's probe has B = 2, the checks' calls B = 1, 2 and 3. The pattern was rebuilt with the
    probe's batch, the patched head raised at the others, and the proof did not hold."""
    source = (REPO / "tests" / "lines_to_edit" / "broadcast_mask_from_helper.py").read_text()
    result = _graded(tmp_path, source, rubric, pool, only=HEAD_CHECKS)
    assert [d.id for d in result.diagnosis] == ["mask_excludes_diagonal"]
    assert result.diagnosis_complete is not None and result.diagnosis_complete.changes == 1
    assert "reference_match" in result.diagnosis_complete.checks
