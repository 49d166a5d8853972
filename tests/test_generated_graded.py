"""Issue 52's generated heads, graded (a seeded sample each; ``benchmarks/diagnosis_bench.py`` grades thousands).

Correct programs written as people write heads get full marks and no cause, as modules and as notebooks; heads with
mistakes of the held-out and the tuned kinds are graded without an exception inside the grader (their strict figures
are printed: the bench measures them).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from generated.heads import Head, correct_heads, sample
from generated.judge import exceptions_of
from generated.strict import judge, summary

from grader.checks import CHECKS
from grader.exports import result_json
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

SEED = 5203
HEAD_CHECKS = [c for c, spec in CHECKS.items() if "causal_self_attention" in spec.needs and c != "performance"]
HELD_OUT = Path(__file__).parent / "generated" / "held_out_kinds.toml"


def _graded(head: Head, tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> dict:
    folder = tmp_path / head.id
    folder.mkdir()
    (folder / head.filename).write_text(head.source, encoding="utf-8")
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        result = grade(folder / head.filename, rubric, only=HEAD_CHECKS, pool=pool, parallel=False, visuals=False)
    return {"result": json.loads(result_json(result)), "stderr": stderr.getvalue(), "raised": None}


@pytest.mark.slow
@pytest.mark.parametrize("k", range(6))
def test_a_correct_program_gets_full_marks_and_no_cause(
    k: int, tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """Six of the programs, seeded (every fifth head of the order a notebook: the sixth here)."""
    head = correct_heads(6, SEED)[k]
    record = _graded(head, tmp_path, rubric, pool)
    judged = judge(head, record)
    assert not judged.exceptions, judged.exceptions
    assert judged.false_alarms == [], (head.id, judged.causes)
    assert judged.full, (head.id, record["result"]["score"], record["result"]["max_score"])


@pytest.mark.slow
def test_heads_of_held_out_and_tuned_kinds_are_graded_without_a_grader_exception(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    import tomllib

    from generated.kinds import KINDS

    held = tomllib.loads(HELD_OUT.read_text(encoding="utf-8"))["held_out"]
    heads = sample(3, SEED, held, correct_every=0) + sample(3, SEED, sorted(set(KINDS) - set(held)), correct_every=0)
    rows = []
    for k, head in enumerate(heads):
        (tmp_path / str(k)).mkdir()
        rows.append(judge(head, _graded(head, tmp_path / str(k), rubric, pool)))
    raised = {r.id: r.exceptions for r in rows if r.exceptions}
    assert not raised, raised
    s = summary(rows)
    print(f"generated kinds sample: strict {s['strict']}/{s['mistakes']}, false alarms {s['false_alarms']}")
    assert exceptions_of({"result": None, "raised": "boom"}) == ["grade raised: boom"]  # the check above can fail
