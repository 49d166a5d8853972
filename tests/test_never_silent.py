"""Never silent (issue 35, point 6): the grader's own exception inside the diagnosis is recorded in the result,
shown on every surface, fails the tests (tests/conftest.py) and never lowers a grade."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import grader.diagnosis._examine as examine_module
import grader.diagnosis._rules as rules_module
from grader.batch import submission_status
from grader.diagnosis import examine
from grader.gradescope import results_json
from grader.head import Head
from grader.library import load_reference, reference_path
from grader.models import CheckResult, DiagnosisError, GradeResult
from grader.oracle import LiveOracle
from grader.report.html import render_html
from grader.report.junit import render_junit
from grader.report.terminal import render_terminal, summary_console
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import Sandbox, WorkerPool

UNSCALED = (
    reference_path().read_text(encoding="utf-8").replace("/ math.sqrt(d_k)", "", 1)
)  # the reference with its scale left out: one named mistake, no_scaling


def _failed(cid: str) -> CheckResult:
    return CheckResult(
        id=cid, title=cid, cites="", status="failed", score=0, max_score=1, message="m", seed=0, duration_s=0
    )


def _boom(*args: object) -> object:
    raise RuntimeError("a bug of the grader's own")


def _examined(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> examine_module.Examination:
    (tmp_path / "attention_head.py").write_text(UNSCALED, encoding="utf-8")
    with Sandbox(tmp_path, rubric.limits, pool=pool) as sandbox:
        head = Head(sandbox, rubric.entry_points)
        return examine([_failed("reference_match")], head, LiveOracle(load_reference()))


def test_the_unscaled_head_is_named_when_nothing_raises(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    assert "/ math.sqrt(d_k)" in reference_path().read_text(encoding="utf-8")  # what UNSCALED takes out
    exam = _examined(tmp_path, rubric, pool)
    assert exam.error is None
    assert [d.id for d in exam.causes] == ["no_scaling"]


@pytest.mark.diagnosis_error
def test_a_raising_pass_is_recorded_and_the_others_keep_their_causes(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass that points causes at their lines raises: the cause the search found stays (without a line),
    and the exception is in the examination, not on stderr only."""
    monkeypatch.setattr(rules_module, "point", _boom)
    exam = _examined(tmp_path, rubric, pool)
    assert [d.id for d in exam.causes] == ["no_scaling"]
    assert exam.causes[0].where is None
    assert exam.error is not None
    assert (exam.error.type, exam.error.message, exam.error.passes) == (
        "RuntimeError",
        "a bug of the grader's own",
        ["point"],
    )
    assert any("_boom" in frame for frame in exam.error.traceback)


@pytest.mark.diagnosis_error
def test_an_exception_between_the_passes_is_recorded_too(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(examine_module, "_explained", _boom)
    exam = _examined(tmp_path, rubric, pool)
    assert exam.causes == []
    assert exam.error is not None and exam.error.passes == ["examine"]


@pytest.mark.diagnosis_error
def test_the_grade_records_it_and_never_counts_below_the_checks(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search raises: no_scaling is not found, so the grade is counted by checks (never less), marked
    provisional, and the batch calls it a grader error (retried on its next run)."""
    monkeypatch.setattr(rules_module, "_changes", _boom)
    (tmp_path / "attention_head.py").write_text(UNSCALED, encoding="utf-8")
    only = ["causal_mask", "score_scaling", "reference_match"]
    result = grade(tmp_path / "attention_head.py", rubric, pool=pool, visuals=False, only=only, parallel=False)
    assert result.diagnosis_error is not None and "search" in result.diagnosis_error.passes
    assert result.provisional
    assert result.score >= (result.score_by_checks or 0.0)
    assert result.scoring_note is not None and result.scoring_note.startswith("Provisional: the diagnosis could not")
    assert submission_status(result) == "grader_error"
    again = GradeResult.model_validate_json(result.model_dump_json())
    assert again.diagnosis_error == result.diagnosis_error


def _result(error: DiagnosisError | None) -> GradeResult:
    check = _failed("causal_mask")
    return GradeResult(
        submission="sub",
        seed=0,
        score=0,
        max_score=1,
        checks=[check],
        rubric="r",
        duration_s=0,
        diagnosis_error=error,
    )


ERROR = DiagnosisError(
    type="IndexError", message="list index out of range", passes=["search"], traceback=["  File x", "IndexError"]
)
SAID = "The diagnosis could not finish: the grader's own IndexError in its search pass (list index out of range)"


def test_every_surface_says_the_diagnosis_could_not_finish() -> None:
    result = _result(ERROR)
    out = io.StringIO()
    render_terminal(result, summary_console(out))
    assert SAID in " ".join(out.getvalue().split())
    assert SAID in render_html(result).replace("&#39;", "'")
    assert SAID in json.loads(json.dumps(results_json(result)))["output"]
    suite = ET.fromstring(render_junit(result)).find("testsuite")
    assert suite is not None and suite.get("errors") == "1" and suite.get("tests") == "2"
    error = suite.find("testcase[@name='diagnosis']/error")
    assert error is not None and error.get("type") == "IndexError" and SAID in (error.get("message") or "")


def test_a_finished_diagnosis_says_nothing_of_it() -> None:
    result = _result(None)
    out = io.StringIO()
    render_terminal(result, summary_console(out))
    assert "could not finish" not in out.getvalue()
    assert "could not finish" not in render_html(result)
    assert "could not finish" not in results_json(result)["output"]
    assert "could not finish" not in render_junit(result)
    assert submission_status(result) != "grader_error"


def test_the_tests_fail_when_the_diagnosis_raises_unless_they_ask_for_it(tmp_path: Path) -> None:
    """tests/conftest.py's watch, run on two tests of its own: the one that did not ask for the error fails."""
    import subprocess
    import sys

    here = Path(__file__).resolve().parent
    (tmp_path / "conftest.py").write_text((here / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    diagnosis_error: asked for\n", encoding="utf-8")
    (tmp_path / "test_watched.py").write_text(
        "import pytest\n"
        "from grader.diagnosis._engine import Engine, Rule\n\n\n"
        "def _raising():  # one rule of the engine that raises: it answers its default, the exception recorded\n"
        "    rule = Rule('search', (), ('found',), lambda s: {'found': 1 // 0}, {'found': 0})\n"
        "    return Engine([rule], {}).run()['found']\n\n\n"
        "def test_unasked():\n"
        "    assert _raising() == 0\n\n\n"
        "@pytest.mark.diagnosis_error\n"
        "def test_asked():\n"
        "    assert _raising() == 0\n",
        encoding="utf-8",
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "ERROR test_watched.py::test_unasked" in ran.stdout, ran.stdout
    assert "the diagnosis raised inside the grader" in ran.stdout
    assert "2 passed, 1 error" in ran.stdout, ran.stdout  # test_unasked passed, then failed at its teardown
