"""Issue 25: ``pytest --step4`` lists the grader's checks as test items beside the student's own tests.

Each test writes a student's folder (a head, the student's own tests) with pytester and runs pytest on it
in a process of its own, with the plugin as the grader installs it (the ``pytest11`` entry point). Off,
it changes nothing and imports nothing; on, it collects one item per check whose verdict is ``grade``'s,
grades once however many items run, and never while only collecting.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

from grader.library import known_heads, reference_path
from grader.models import GradeResult
from grader.report import wording
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

pytest_plugins = ["pytester"]

CHAFF = {h.id: h for h in known_heads("chaff")}["no_scaling"]
REFERENCE = reference_path().read_text(encoding="utf-8")  # fails some checks, skips the optional ones
STUDENT_TESTS = """
def test_mine_passes():
    assert 1 + 1 == 2


def test_mine_fails():
    assert 1 + 1 == 3, "my own failure"
"""
# Counts the grades the session makes and notes the heavy modules it imported (written at its end).
COUNTING = """
import json
import sys
from pathlib import Path

import grader.runner

GRADES = []
OWN = []
_grade = grader.runner.grade


def _counted(*args, **kwargs):
    GRADES.append(args[0])
    own = kwargs.get("own_run")
    OWN.append(None if own is None else [own.outcome, sorted((c.id, c.outcome) for c in own.cases)])
    return _grade(*args, **kwargs)


grader.runner.grade = _counted


def pytest_sessionfinish(session):
    Path("grades.json").write_text(json.dumps([str(p) for p in GRADES]))
    Path("own.json").write_text(json.dumps(OWN))
"""
LIGHT = """
import json
import sys
from pathlib import Path


def pytest_sessionfinish(session):
    heavy = {"torch", "pydantic", "grader.runner", "grader.rubric", "IPython"}
    Path("imported.json").write_text(json.dumps(sorted(heavy & set(sys.modules))))
"""
NOTEBOOK = Path(__file__).resolve().parent / "notebooks" / "buggy_then_fixed.ipynb"
STATUS = {"passed": "PASSED", "failed": "FAILED", "error": "FAILED", "timeout": "FAILED", "skipped": "SKIPPED"}


@pytest.fixture
def student(pytester: pytest.Pytester) -> pytest.Pytester:
    """A student's folder: a head with a known bug and two tests of their own, one failing."""
    pytester.makepyfile(attention_head=CHAFF.source(), test_mine=STUDENT_TESTS)
    return pytester


def _verdicts(stdout: str) -> dict[str, str]:
    """node id -> PASSED / FAILED / SKIPPED, from ``pytest -v``'s lines."""
    found = re.findall(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED)", stdout, re.M)
    return dict(found)


def test_the_plugin_is_installed_and_off_until_asked(student: pytest.Pytester) -> None:
    """Without --step4 the student's session is what it was: their tests only, and nothing of the grader
    imported (not even the rubric); the option is there all the same."""
    assert any(e.value == "grader.pytest_plugin" for e in metadata.entry_points(group="pytest11"))
    student.makeconftest(LIGHT)
    result = student.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1, failed=1)
    assert set(_verdicts(result.stdout.str())) == {"test_mine.py::test_mine_passes", "test_mine.py::test_mine_fails"}
    assert (student.path / "imported.json").read_text() == "[]"
    assert "--step4" in student.runpytest_subprocess("--help").stdout.str()


@pytest.mark.slow
def test_one_item_per_check_with_the_verdicts_of_grade(
    student: pytest.Pytester, rubric: Rubric, pool: WorkerPool
) -> None:
    """``pytest --step4``: one item per check (its id the check's id) passed, failed or skipped as ``grade``
    judges it, a failure's text the check's message with its Reproduce line, one grade for all of them;
    the student's own tests pass and fail as they did."""
    student.makeconftest(COUNTING)
    result = student.runpytest_subprocess("--step4", "-v", "-rs")

    def rerun(cid: str, seed: int) -> str:
        return f"pytest --step4 attention_head.py::{cid} --step4-seed {seed}"

    graded: GradeResult = grade(student.path, rubric, pool=pool, visuals=False, label=".", reproduce=rerun)
    verdicts = _verdicts(result.stdout.str())
    expected = {f"attention_head.py::{c.id}": STATUS[c.status] for c in graded.checks}
    expected |= {"test_mine.py::test_mine_passes": "PASSED", "test_mine.py::test_mine_fails": "FAILED"}
    assert verdicts == expected
    assert {"PASSED", "FAILED", "SKIPPED"} <= set(expected.values())  # the premise: every kind is there
    output = result.stdout.str()
    for check in graded.checks:
        if check.status == "failed":
            assert check.message in output.replace("\r", ""), check.id
            assert f"Reproduce: pytest --step4 attention_head.py::{check.id} --step4-seed {graded.seed}" in output
        if check.status == "skipped":
            assert check.message.splitlines()[0] in output
    assert "my own failure" in output
    assert output.rstrip().splitlines()[-1].startswith("=")  # pytest's own summary line stays last
    assert wording.score_line(graded) in output.splitlines()  # in the terminal summary
    assert (student.path / "grades.json").read_text() == '["' + str(student.path) + '"]'  # once, the folder
    # issue 53.9: the student's tests run first, and the grade is handed what the session saw of them (the kit
    # takes it instead of running them again); a skip is located at the head, never in the grader's files
    lines = output.splitlines()
    first_check = next(k for k, ln in enumerate(lines) if ln.startswith("attention_head.py::"))
    assert all(k < first_check for k, ln in enumerate(lines) if ln.startswith("test_mine.py::"))
    assert (student.path / "own.json").read_text() == (
        '[["failed", [["test_mine.py::test_mine_fails", "failed"], ["test_mine.py::test_mine_passes", "passed"]]]]'
    )
    skips = [ln for ln in lines if ln.startswith("SKIPPED [")]
    assert skips and all(ln.split("] ", 1)[1].startswith("attention_head.py:") for ln in skips), skips

    # A head of another name is graded as `grade FILE` grades it: that file, no other (-k: that check only)
    (student.path / "my_head.py").write_text(REFERENCE, encoding="utf-8")
    result = student.runpytest_subprocess("--step4", "--step4-submission", "my_head.py", "-k", "causal_mask", "-v")
    assert _verdicts(result.stdout.str()) == {"my_head.py::causal_mask": "PASSED"}
    assert (student.path / "grades.json").read_text() == '["' + str(student.path / "my_head.py") + '"]'


def test_collecting_lists_the_checks_and_grades_nothing(student: pytest.Pytester, rubric: Rubric) -> None:
    """An editor's discovery (``pytest --collect-only``, with ``addopts = --step4`` in the student's
    pytest.ini): every check listed by id under the head, no grade made. ``--step4-submission`` names
    another head, a notebook here, whose items it then lists instead."""
    student.makeconftest(COUNTING)
    student.makeini("[pytest]\naddopts = --step4\n")
    enabled = [cid for cid, rc in rubric.checks.items() if rc.enabled]
    result = student.runpytest_subprocess("--collect-only", "-q")
    listed = [ln for ln in result.stdout.lines if "::" in ln and not ln.startswith("test_mine.py::")]
    assert listed == [f"attention_head.py::{cid}" for cid in enabled]
    assert "test_mine.py::test_mine_fails" in result.stdout.lines
    assert (student.path / "grades.json").read_text() == "[]"

    (student.path / "mine.ipynb").write_text(NOTEBOOK.read_text(encoding="utf-8"), encoding="utf-8")
    result = student.runpytest_subprocess("--collect-only", "-q", "--step4-submission", "mine.ipynb")
    listed = [ln for ln in result.stdout.lines if "::" in ln and not ln.startswith("test_mine.py::")]
    assert listed == [f"mine.ipynb::{cid}" for cid in enabled]
    assert (student.path / "grades.json").read_text() == "[]"


@pytest.mark.slow
def test_a_failing_items_location_is_the_students_line(pytester: pytest.Pytester) -> None:
    """Issue 28: a failing check's item is located at the line its cause points at (pytest's location is 0-based:
    JUnit's xunit1 ``line`` and editors read it), and its text starts with that line."""
    head = Path(__file__).resolve().parent / "realistic" / "times_sqrt_dk.py"
    pytester.makepyfile(attention_head=head.read_text(encoding="utf-8"))
    result = pytester.runpytest_subprocess(
        "--step4", "-k", "score_scaling", "--junitxml=j.xml", "-o", "junit_family=xunit1", "-p", "no:cacheprovider"
    )
    code = "scores = (Q @ K.transpose(-2, -1)) * math.sqrt(d_k)"
    assert f"At attention_head.py:15: {code}" in result.stdout.str()
    xml = (pytester.path / "j.xml").read_text(encoding="utf-8")
    assert re.search(r'<testcase [^>]*name="score_scaling" file="attention_head.py" line="14"', xml), xml
