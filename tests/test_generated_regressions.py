"""Heads the generated bench (benchmarks/diagnosis_bench.py) found the grader raising on, kept as they were
generated (tests/generated/regressions/): the diagnosis of each finishes, and names its mistakes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from generated.judge import line_of, match
from generated.mutations import Truth, families, mutate

from grader.checks import CHECKS
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

HERE = Path(__file__).parent / "generated" / "regressions"
# the checks of the head, as the bench grades it (benchmarks/diagnosis_bench.py): those that call it, but the
# machine's own measure
HEAD_CHECKS = [c for c, spec in CHECKS.items() if "causal_self_attention" in spec.needs and c != "performance"]


@pytest.mark.slow
def test_two_departures_holding_tensors_are_told_apart(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, capfd: pytest.CaptureFixture[str]
) -> None:
    """Keys from W_Q, the mask's triangle upper and the causal flag ignored: pointing matched each named cause
    with its departure by ==, which compared their tensors and raised, so the grade lost its diagnosis."""
    shutil.copy(HERE / "keys_from_wq_mask_upper.py", tmp_path / "attention_head.py")
    result = grade(tmp_path, rubric, pool=pool, visuals=False, only=["reference_match", "causal_mask"])
    assert "Traceback" not in capfd.readouterr().err
    assert result.diagnosis and all(d.where is not None for d in result.diagnosis), result.diagnosis


@pytest.mark.slow
def test_weights_that_do_not_follow_the_scores_are_a_failure_not_a_grader_error(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The diagonal and the past filled with -1e4 and the weights returned transposed: score_scaling's fit has a
    slope of exactly 0, and naming the scale divided by it (an internal grader error, where a failure is due)."""
    shutil.copy(HERE / "einsum_weights_transposed_weak_fill.py", tmp_path / "attention_head.py")
    result = grade(tmp_path, rubric, pool=pool, visuals=False, only=["score_scaling"])
    [check] = result.checks
    assert check.status == "failed" and "Internal grader error" not in check.message, check.message


LINES = sorted((HERE / "lines").glob("*.py"))


def _diagnosed(
    path: Path, tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> tuple[list[Truth], list[dict[str, Any]]]:
    """The ground truth kept beside a generated head (``<name>.json``), and the causes its grade names (as JSON)."""
    raw = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    truths = [Truth(t["mutation"], t["family"], tuple(t["causes"]), tuple(t["lines"])) for t in raw]
    shutil.copy(path, tmp_path / "attention_head.py")
    result = grade(tmp_path, rubric, pool=pool, visuals=False, only=HEAD_CHECKS)
    assert result.diagnosis_error is None, result.diagnosis_error
    return truths, [c.model_dump() for c in result.diagnosis]


@pytest.mark.slow
@pytest.mark.parametrize("path", LINES, ids=[p.stem for p in LINES])
def test_every_mistake_is_named_at_its_line_with_no_cause_that_is_no_mistake(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, path: Path
) -> None:
    """Heads of the generated bench (seeds 11 and 7, as generated, with their ground truth beside them) whose mistakes
    the diagnosis missed or pointed elsewhere: two mistakes on one line (a float32 softmax and a clamp), a mask
    leaking one key with a -1e4 fill applied before the scale, a masked_fill whose result is thrown away before
    the scale, a NumPy softmax's own steps (never departures), ``v = x`` of ``x = X[b]`` in a per-sequence helper,
    ``scale = 1.0`` made on its own line, exp without the max found on huge scores for a cause that had no line,
    a mask applied whatever the flag where its pattern is made in ``__init__`` (the flag kept as ``self.causal``
    too), or made where the flag is in reach and passed to a helper that has none; of the held-out 5,000 (seeds
    101-105): NumPy keys made with W_Q, a NumPy np.where thrown away, a masked_fill thrown away before a wrong
    scale (the scale's line, not the scores'), a scale missing altogether where a mask on a branch (a padding mask,
    ``if causal:``) comes after the scores (the product's line). Each is found, at one of its
    lines, and no cause names a mistake the head does not have."""
    truths, causes = _diagnosed(path, tmp_path, rubric, pool)
    for t in truths:
        mine = [c for c in causes if match(t, c)]
        assert mine, (t, [(c["id"], line_of(c)) for c in causes])
        assert any(line_of(c) in t.lines for c in mine), (t, [(c["id"], line_of(c)) for c in mine])
    strays = [c["id"] for c in causes if families(c["id"]) and not any(match(t, c) for t in truths)]
    assert not strays, strays  # a cause of a kind of mistake the head does not have


ONCE = sorted((HERE / "once").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", ONCE, ids=[p.stem for p in ONCE])
def test_each_mistake_is_one_cause_and_no_symptom_is_another(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, path: Path
) -> None:
    """Generated heads (named by their style and mutations) whose mistakes were found, but beside a second cause
    for one of them: the NaN rows of a diagonal masked with -inf charged again as non-finite outputs (a clamp of
    the weights beside it, which the search cannot model, left that mask to the walk), and taking a wrong scale's
    line with it; the same masked diagonal said again as a departure at its own line; a mask's pattern and its
    -1e4 fill on one line (masked_fill(j > i + 1, -1e4)) patched as one, the fill never found; values never
    projected in a multi-head skeleton (``x.view(B, T, h, d_v)``, which raises where d_v ≠ d), named a width crash
    beside a departure at the output's reshape. Every cause here is one of the head's mistakes, each at one of its
    lines."""
    truths, causes = _diagnosed(path, tmp_path, rubric, pool)
    for t in truths:
        assert any(match(t, c) and line_of(c) in t.lines for c in causes), (t, [(c["id"], line_of(c)) for c in causes])
    others = [(c["id"], line_of(c)) for c in causes if not any(match(t, c) for t in truths)]
    assert not others, others


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "line"), [("dropped_mask_transposed.py", 25), ("dropped_mask_diagonal.py", 30)], ids=["book", "skeleton"]
)
def test_a_mask_thrown_away_with_a_pattern_of_its_own_is_named_at_its_line(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, name: str, line: int
) -> None:
    """A masked_fill whose result is thrown away, its pattern wrong too (the triangle transposed; the diagonal hidden):
    its value is no lecture stage, so it was never seen as a stage never used and the missing mask pointed at the
    softmax. It is named (no_mask) at its own line, in words that say its pattern is its own; what that pattern
    hides shows once the line keeps its result."""
    shutil.copy(HERE / name, tmp_path / "attention_head.py")
    result = grade(tmp_path, rubric, pool=pool, visuals=False, only=HEAD_CHECKS)
    assert result.diagnosis_error is None, result.diagnosis_error
    [mask] = [c for c in result.diagnosis if c.id == "no_mask"]
    assert mask.where is not None and mask.where.line == line, mask.where
    assert mask.departure is not None and "a pattern of their own" in mask.departure.description


@pytest.mark.slow
@pytest.mark.parametrize("mutations", [("mask_transposed",), ("mask_leaks_by_one", "no_scaling")], ids="-".join)
def test_a_per_sequence_mask_with_a_wrong_pattern_and_minus_inf_is_proven(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, mutations: tuple[str, ...]
) -> None:
    """A per-sequence head whose inline mask (masked_fill(j < i, -inf)) hides the wrong keys: patching its pattern
    apart from the fill (for a finite fill beside it) left the proof unable to re-apply it on the checks' calls, and
    14 of 400 held-out heads lost their proof. With -inf the line is patched whole: found, at its line, proven."""
    head = mutate("per_sequence_2d", mutations)
    assert head is not None
    (tmp_path / "attention_head.py").write_text(head.source, encoding="utf-8")
    result = grade(tmp_path, rubric, pool=pool, visuals=False, only=HEAD_CHECKS)
    assert result.diagnosis_error is None, result.diagnosis_error
    causes = [c.model_dump() for c in result.diagnosis]
    for t in head.truths:
        assert any(match(t, c) and line_of(c) in t.lines for c in causes), (t, [(c["id"], line_of(c)) for c in causes])
    assert result.diagnosis_complete, [(c["id"], line_of(c)) for c in causes]
