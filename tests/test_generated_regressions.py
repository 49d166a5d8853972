"""Heads the generated bench (benchmarks/diagnosis_bench.py) found the grader raising on, kept as they were
generated (tests/generated/regressions/): the diagnosis of each finishes, and names its mistakes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

HERE = Path(__file__).parent / "generated" / "regressions"


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
