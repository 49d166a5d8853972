"""Issue 11: the checks of the other contract functions run on a sidecar worker while the head's run;
every verdict and score is the serial one (grade(..., parallel=False), as a batch grades)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.checks import CHECKS
from grader.library import known_heads, materialize, reference_path
from grader.models import GradeResult
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool, fork_supported

HANGS = Path(__file__).resolve().parent / "hostile" / "hangs"
REALISTIC = Path(__file__).resolve().parent / "realistic"
CHAFFS = {h.id: h for h in known_heads("chaff")}


def _verdicts(result: GradeResult) -> list[tuple[str, str, float]]:
    return [(c.id, c.status, c.score) for c in result.checks]


def _messages(result: GradeResult) -> dict[str, str]:
    # timeouts name their durations, a timed check its timings
    return {c.id: c.message for c in result.checks if c.status != "timeout" and not CHECKS[c.id].timed}


def _source(kind: str, name: str) -> str:
    if kind == "chaff":
        return CHAFFS[name].source()
    if kind == "hang":
        return materialize((HANGS / f"{name}.py").read_text(encoding="utf-8"))
    if kind == "realistic":
        return (REALISTIC / f"{name}.py").read_text(encoding="utf-8")
    return reference_path().read_text(encoding="utf-8")


@pytest.mark.skipif(not fork_supported(), reason="sidecars exist only where workers fork from a zygote")
@pytest.mark.parametrize(
    "kind, name, limits",
    [
        ("reference", "", {}),
        ("chaff", "stats_global_rng", {}),  # a bug in a function the sidecar runs
        ("realistic", "gpt_walkthrough_head", {}),  # several bugs in the head
        ("hang", "exit_in_gaussian", {}),  # the sidecar's worker dies on its own: run again serially
        # the head hangs: each sweep kills the sidecar's worker too, its checks are run again serially
        # (the rubric's submission budget: the head's 20 s share of a 40 s one, a busy machine spent; issue 36)
        ("hang", "hang_T_gt_5", {"per_call_timeout_s": 2.0}),
    ],
)
def test_parallel_grading_gives_the_serial_verdicts(
    kind: str, name: str, limits: dict[str, float], tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    (tmp_path / "attention_head.py").write_text(_source(kind, name), encoding="utf-8")
    if limits:
        rubric = rubric.model_copy(update={"limits": rubric.limits.model_copy(update=limits)})
    serial = grade(tmp_path, rubric, pool=pool, parallel=False, visuals=False)
    parallel = grade(tmp_path, rubric, pool=pool, parallel=True, visuals=False)
    assert _verdicts(parallel) == _verdicts(serial)
    assert _messages(parallel) == _messages(serial)
    assert [d.kind for d in parallel.diagnosis] == [d.kind for d in serial.diagnosis]
