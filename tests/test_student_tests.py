"""The student_tests check (Exercise 2): wheats and chaffs, judged from untrusted JUnit XML.

Suites of known quality live in tests/student_suites/ (not named test_*, so this session does not
collect them); each test copies one into a fresh submission folder as test_<name>.py.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.checks import CHECKS, Ctx
from grader.checks._student_tests import (
    ALWAYS_IN_SCOPE,
    SKIPPED_ON_WHEAT,
    USES,
    Call,
    Tally,
    _score,
    disguised_head,
    grade_suite,
    in_scope,
    own_head_suite,
    parse_junit,
    run_suite,
    suite_files,
    used_inputs,
    without_course_tests,
)
from grader.library import known_heads, load_reference, reference_path
from grader.oracle import LiveOracle
from grader.rubric import EntryPoints, Rubric
from grader.sandbox import SandboxLimits, WorkerPool
from grader.sandbox._filesystem import landlock_abi
from grader.submission import prepare

SUITES = Path(__file__).parent / "student_suites"


def suite_text(name: str) -> str:
    """A fixture suite; "strong" is the instructor's own suite shipped with the reference submission."""
    if name == "strong":
        return (reference_path().parent / "test_attention_head.py").read_text()
    return (SUITES / f"{name}.py").read_text()


TEMPLATE = Path(__file__).resolve().parent.parent / "student_template" / "test_attention_head.py"
FILES_ISOLATED = landlock_abi() > 0 or os.geteuid() == 0  # Landlock, or a mount namespace as root
CHAFFS = known_heads("chaff")


@pytest.fixture(scope="module")
def suite_pool() -> Iterator[WorkerPool]:
    with WorkerPool(2) as p:
        yield p


@pytest.fixture
def quick(rubric: Rubric) -> Rubric:
    """Short limits, so a hanging suite costs seconds."""
    return rubric.model_copy(update={"limits": SandboxLimits(per_call_timeout_s=2, per_submission_timeout_s=30)})


def submission(tmp_path: Path, *suites: str, text: str | None = None) -> Path:
    """A submission folder whose own head cannot even be imported: the check must never use it."""
    d = tmp_path / "sub"
    d.mkdir(parents=True)
    (d / "attention_head.py").write_text("raise RuntimeError('the student head must not be used')\n")
    for name in suites:
        (d / f"test_{name}.py").write_text(text or suite_text(name))
    return d


def grade(d: Path, rubric: Rubric, pool: WorkerPool):  # type: ignore[no-untyped-def]
    return grade_suite(d, rubric, pool=pool, jobs=2, rng=random.Random(0))


# ---- fast: files, scope, disguise, reports -------------------------------------------------------


def test_a_test_file_that_does_not_import_names_the_file(
    tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool
) -> None:
    text = "from attention_head import helper\n\ndef test_a():\n    pass\n"
    verdict = grade(submission(tmp_path, "imports", text=text), rubric, suite_pool)
    assert verdict.message.splitlines()[:3] == [
        "Your test file test_imports.py fails on a correct head, so it would reject a right answer:",
        "  test_imports.py, line 1: from attention_head import helper",
        "  collection failure: ImportError: cannot import name 'helper' from 'attention_head'",
    ]


def test_no_tests_is_skipped(tmp_path: Path, rubric: Rubric) -> None:
    verdict = grade_suite(submission(tmp_path), rubric)
    assert verdict.status == "skipped"
    assert "no test files (test_*.py beside the file with your head, or in a tests/ folder there)" in verdict.message


def test_suite_folder_takes_tests_from_both_places_and_never_the_head(tmp_path: Path) -> None:
    d = submission(tmp_path, "assert_true")
    (d / "tests").mkdir()
    (d / "tests" / "test_more.py").write_text("def test_x():\n    pass\n")
    (d / "tests" / "test_assert_true.py").write_text("")
    files, notes = suite_files(d, "attention_head")
    assert sorted(files) == ["test_assert_true.py", "test_more.py"]
    assert notes == ["tests/test_assert_true.py was not run: a file of the same name is at the top level."]


def test_scope_is_the_head_plus_the_functions_a_suite_mentions() -> None:
    entry = EntryPoints()
    head_only = in_scope(CHAFFS, "from attention_head import causal_self_attention", entry)
    assert {c.function for c in head_only} == {"causal_self_attention"}
    assert not {"python_double_loop", "uses_builtin_sdpa"} & {c.id for c in head_only}  # same values as the wheat
    with_kernel = in_scope(CHAFFS, "gaussian_positional_weights(5, 1.0)", entry)
    assert {c.function for c in with_kernel} == {"causal_self_attention", "gaussian_positional_weights"}
    assert len(head_only) >= 15


def test_heads_are_disguised_alike() -> None:
    """Only behaviour may tell the heads apart: same names, docstrings, annotations; no comments."""
    ref = load_reference()
    wheat = disguised_head(None)
    assert "#" not in wheat
    layout = _layout(wheat)
    for chaff in CHAFFS:
        text = disguised_head(chaff.path.read_text())
        assert "#" not in text and chaff.id not in text, chaff.id
        assert _layout(text) == layout, chaff.id
        namespace: dict[str, object] = {}
        exec(compile(text, chaff.id, "exec"), namespace)
        fn = namespace[chaff.function]
        assert fn.__doc__ == getattr(ref, chaff.function).__doc__, chaff.id  # type: ignore[attr-defined]
        assert fn.__annotations__ == getattr(ref, chaff.function).__annotations__, chaff.id  # type: ignore[attr-defined]


def _layout(text: str) -> list[tuple[str, str]]:
    module = ast.parse(text)
    return [(type(n).__name__, getattr(n, "name", ast.unparse(n)[:40])) for n in module.body]


def test_renamed_entry_points_get_aliases() -> None:
    text = disguised_head(None, EntryPoints(causal_self_attention="attend"))
    assert text.rstrip().endswith("attend = causal_self_attention")


@pytest.mark.parametrize(
    ("xml", "problem"),
    [
        (None, "pytest wrote no report"),
        ("<testsuites><testsuite", "not valid XML"),
        ('<!DOCTYPE r [<!ENTITY a "a">]><testsuites/>', "declares a DTD or entities"),
        ("<report/>", "has no <testsuite>"),
        (
            '<testsuite failures="0"><testcase name="t"><failure message="x"/></testcase></testsuite>',
            "count of failures does not match",
        ),
        ("<testsuite>" + "x" * (1 << 20) + "</testsuite>", "larger than"),
    ],
)
def test_untrusted_reports_are_refused(xml: str | None, problem: str) -> None:
    result = parse_junit(xml)
    assert isinstance(result, str) and problem in result


def test_report_cases_are_read() -> None:
    xml = (
        '<testsuites><testsuite tests="3" failures="1" errors="1" skipped="0">'
        '<testcase classname="test_a" name="test_ok"/>'
        '<testcase classname="test_a.TestRows" name="test_sum"><failure message="AssertionError: rows">'
        "E   AssertionError: rows</failure></testcase>"
        '<testcase classname="test_b" name="test_b"><error message="collection failure">'
        "E   ImportError: cannot import name 'helper'</error></testcase>"
        "</testsuite></testsuites>"
    )
    cases = parse_junit(xml)
    assert not isinstance(cases, str)
    assert [(c.id, c.outcome, c.message) for c in cases] == [
        ("test_a.py::test_ok", "passed", ""),
        ("test_a.py::TestRows::test_sum", "failed", "AssertionError: rows"),
        ("test_b.py::test_b", "error", "collection failure: ImportError: cannot import name 'helper'"),
    ]


# ---- one run against the wheat -------------------------------------------------------------------


def test_a_test_failing_on_the_wheat_earns_nothing(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    verdict = grade(submission(tmp_path, "fails_on_wheat"), rubric, suite_pool)
    assert verdict.status == "failed" and verdict.fraction is None
    assert verdict.message.splitlines()[:4] == [
        "Your test test_fails_on_wheat.py::test_upper_triangle_is_used fails on a correct head, so it would "
        "reject a right answer:",
        '  test_fails_on_wheat.py, line 18: assert w[0, 0, 1] > 0, "query 0 should see key 1"',
        "  AssertionError: query 0 should see key 1",  # the student's own string; the compared values are not
        "(Values your test computed from the correct head, and what it printed, are not shown: run your tests "
        "on your own head with pytest to see them.)",
    ]


def test_a_hanging_suite_times_out(tmp_path: Path, quick: Rubric, suite_pool: WorkerPool) -> None:
    verdict = grade(submission(tmp_path, "hanging"), quick, suite_pool)
    assert verdict.status == "timeout" and verdict.fraction is None
    assert verdict.message.startswith(
        "Your tests did not finish against a correct head: 'pytest' did not finish within 2 s"
    )


def test_an_exiting_suite_is_an_error(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    verdict = grade(submission(tmp_path, "exiting"), rubric, suite_pool)
    assert verdict.status == "error" and verdict.fraction is None
    assert verdict.message.startswith("Your tests did not complete a test run against a correct head: the worker")


def test_a_forged_report_is_refused(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    verdict = grade(submission(tmp_path, "forges_report"), rubric, suite_pool)
    assert verdict.status == "error"
    assert "the test report declares a DTD or entities (pytest exit code 0)" in verdict.message


@pytest.mark.parametrize("isolation", ["none", "auto"])
def test_a_suite_that_keeps_state_between_runs_earns_nothing(
    tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool, monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """Without file-system isolation the second wheat run catches the state; with it (Landlock or a mount
    namespace) a run cannot even leave a file behind, so the first run already fails."""
    monkeypatch.setenv("STEP4_FS_ISOLATION", isolation)
    token = uuid.uuid4().hex
    marker = Path(f"/tmp/step4-stateful-{token}")
    text = (SUITES / "stateful.py").read_text().replace("TOKEN", token)
    try:
        verdict = grade(submission(tmp_path, "stateful", text=text), rubric, suite_pool)
    finally:
        marker.unlink(missing_ok=True)
    assert verdict.status == "failed" and verdict.fraction is None
    lines = verdict.message.splitlines()
    if isolation == "auto" and FILES_ISOLATED:
        assert lines[0].startswith("Your test test_stateful.py::test_first_run_only fails on a correct head")
        assert lines[1:3] == ['  test_stateful.py, line 12: with open(MARKER, "w"):', "  PermissionError"]
        return
    assert lines[0] == (
        "Your test test_stateful.py::test_first_run_only passed on a correct head once and failed on it in a later run:"
    )


@pytest.mark.parametrize("mode", ["message", "compared", "type", "module", "output", "report"])
def test_a_failure_on_the_wheat_quotes_nothing_of_the_head(
    tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool, mode: str
) -> None:
    """A suite holds the correct head in its process and can put its source anywhere a failure is
    reported; the verdict shows only what the student's own files say (test names, lines, strings)."""
    text = suite_text("leaks_wheat").replace('MODE = "MODE"', f'MODE = "{mode}"')
    verdict = grade(submission(tmp_path, "leaks", text=text), rubric, suite_pool)
    assert verdict.status in ("failed", "error") and verdict.fraction is None
    head = [line.strip() for line in disguised_head(None).splitlines()]
    leaked = [line for line in head if len(line) >= 12 and line in verdict.message and line not in text]
    assert leaked == [], verdict.message
    assert "Instructor" not in verdict.message and "Definition" not in verdict.message, verdict.message
    first = verdict.message.splitlines()[0]
    assert first.startswith(("Your test test_leaks.py::test_leak (one of its parametrized", "Your tests did")), first


# ---- whole suites against every chaff ------------------------------------------------------------


@pytest.mark.slow
def test_suites_of_known_quality_get_ordered_scores(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    scores = {}
    for name in ("strong", "medium", "shape_only", "assert_true", "fails_on_wheat"):
        verdict = grade(submission(tmp_path / name, name), rubric, suite_pool)
        scores[name] = verdict.fraction or 0.0
    assert scores["strong"] == 1.0
    assert scores["strong"] > scores["medium"] > scores["shape_only"] > scores["assert_true"] == 0.0
    assert scores["fails_on_wheat"] == 0.0


@pytest.mark.slow
def test_missed_chaffs_are_named_by_property_never_by_code(
    tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool
) -> None:
    verdict = grade(submission(tmp_path, "medium"), rubric, suite_pool)
    lines = verdict.message.splitlines()
    assert verdict.status == "failed" and 0 < (verdict.fraction or 0) < 1
    assert lines[1] == "Properties no test checked yet (add a test for each):"
    missed = lines[2:]
    scope = in_scope(CHAFFS, "causal_self_attention", EntryPoints())
    assert len(missed) == round(len(scope) * (1 - (verdict.fraction or 0)))
    assert any("Lemma 5.5" in line for line in missed)  # the medium suite never checks the scale
    assert not any(c.id in verdict.message for c in CHAFFS)


@pytest.mark.slow
def test_the_template_suite_passes_on_the_wheat(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    """The template's example test, edited by the student (here: another length), is theirs and earns its share."""
    d = submission(tmp_path)
    edited = TEMPLATE.read_text().replace("make_inputs()", "make_inputs(T=6)").replace("ones(2, 5", "ones(2, 6")
    (d / TEMPLATE.name).write_text(edited)
    verdict = grade(d, rubric, suite_pool)
    assert verdict.status == "failed" and 0 < (verdict.fraction or 0) < 0.5  # one example test: a start
    lines = verdict.message.splitlines()
    assert lines[0].startswith("Your tests pass on a correct head and catch ")
    assert lines[-1] == SKIPPED_ON_WHEAT  # no count: the run on the instructor's head computed it
    for said in ("uses d != d_k", "uses d_v != d", "calls the head with causal=False"):  # make_inputs does
        assert f"none of your tests {said}" not in verdict.message.lower(), said


# ---- course code earns nothing (issue 54) --------------------------------------------------------


def test_the_templates_own_example_earns_nothing(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    """It earned 2.077 of the 9 points: the untouched template scored that much."""
    d = submission(tmp_path)
    shutil.copy(TEMPLATE, d / TEMPLATE.name)
    files, notes = without_course_tests({TEMPLATE.name: TEMPLATE.read_bytes(), "helper.py": b"x = 1\n"})
    assert notes == [
        "test_attention_head.py::test_rows_are_probability_vectors is the student template's own example, "
        "unchanged: it earns no points and was not run (write tests of your own)."
    ]
    before, after = TEMPLATE.read_text().splitlines(), files[TEMPLATE.name].decode().splitlines()
    assert len(before) == len(after) and [a for a, b in zip(before, after, strict=True) if a != b] == [
        "def test_rows_are_probability_vectors():"
    ]
    verdict = grade(d, rubric, suite_pool)
    assert verdict.status == "skipped" and not verdict.fraction, verdict.message
    assert notes[0] in verdict.notes


def test_a_module_that_does_not_import_earns_nothing_for_its_tests(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The instructor's own strong suite beside a head that does not parse: it earned points before."""
    from grader.checks._base import STOPPED
    from grader.runner import grade as grade_submission

    d = tmp_path / "project"
    d.mkdir()
    (d / "attention_head.py").write_text("def causal_self_attention(X, W_Q, W_K, W_V, causal=True:\n    pass\n")
    (d / "test_attention_head.py").write_text(suite_text("strong"))
    result = grade_submission(d, rubric, only=["student_tests"], pool=pool, visuals=False)
    (check,) = result.checks
    assert (check.status, check.score) == ("error", 0.0)
    assert check.message.startswith(STOPPED) and "SyntaxError" in check.message


def test_the_check_runs_the_submission_folder(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    ctx = Ctx(
        None,
        LiveOracle(load_reference()),
        rubric,
        rubric.seed,
        "student_tests",
        "",
        submission_dir=tmp_path,
        pool=suite_pool,
    )  # type: ignore[arg-type]
    assert CHECKS["student_tests"].needs == ()  # the student's head is never required
    verdict = CHECKS["student_tests"].fn(ctx)
    assert verdict.status == "skipped"


# ---- the tests beside a graded .py (issue 36.2) --------------------------------------------------


def _student_folder(tmp_path: Path) -> Path:
    """A student's folder as the template leaves it, and more: a tests/ folder, a helper, other files."""
    d = tmp_path / "project"
    (d / "tests").mkdir(parents=True)
    (d / "attention_head.py").write_text(reference_path().read_text())
    shutil.copy(TEMPLATE, d / TEMPLATE.name)
    (d / "conftest.py").write_text("")
    (d / "shapes_test.py").write_text("def test_shapes():\n    pass\n")
    (d / "tests" / "test_more.py").write_text("def test_more():\n    pass\n")
    (d / "scratch.py").write_text("raise SystemExit('not a test file: never copied')\n")
    (d / "README.md").write_text("")
    return d


def test_a_single_file_brings_the_tests_beside_it(tmp_path: Path) -> None:
    """`grade attention_head.py` (the student README's command) runs the same tests as `grade .`."""
    d = _student_folder(tmp_path)
    with prepare(d / "attention_head.py") as alone, prepare(d) as folder:
        copied = sorted(p.relative_to(alone.dir).as_posix() for p in alone.dir.rglob("*.py"))
        assert copied == [
            "attention_head.py",
            "conftest.py",
            "shapes_test.py",
            "test_attention_head.py",
            "tests/test_more.py",
        ]
        tests = sorted(n for n in suite_files(alone.dir, "attention_head")[0] if n != "conftest.py")
        assert tests == ["shapes_test.py", "test_attention_head.py", "test_more.py"]
        assert (
            suite_files(folder.dir, "attention_head")[0].keys() - {"scratch.py"}
            == suite_files(alone.dir, "attention_head")[0].keys()
        )


def test_a_watched_file_is_graded_again_when_a_test_beside_it_is_saved(tmp_path: Path) -> None:
    from grader.watch import watched

    d = _student_folder(tmp_path).resolve()
    _, _, relevant = watched(d / "attention_head.py")
    assert all(relevant(d / name) for name in ("attention_head.py", "test_attention_head.py", "shapes_test.py"))
    assert not any(relevant(d / name) for name in ("scratch.py", "README.md", "test_x.txt"))
    _, _, relevant = watched(d / "homework.ipynb")
    assert not relevant(d / "test_attention_head.py")  # a notebook brings no tests


def test_a_file_among_classmates_files_brings_none_of_them(tmp_path: Path) -> None:
    """A batch's class folder: a .py entry must not read a classmate's tests (nor a notebook its folder's)."""
    d = _student_folder(tmp_path)
    with prepare(d / "attention_head.py", tests_beside=False) as sub:
        assert [p.name for p in sub.dir.rglob("*.py")] == ["attention_head.py"]
    cell: dict[str, object] = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    code = "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    return X, X\n"
    notebook = {"cells": [{**cell, "source": code}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (d / "homework.ipynb").write_text(json.dumps(notebook))
    with prepare(d / "homework.ipynb") as sub:  # a test file cannot import a notebook: none is its test
        assert [p.name for p in sub.dir.rglob("*.py")] == ["attention_head.py"]


def test_a_batch_grades_a_file_entry_without_its_neighbours(
    tmp_path: Path, rubric: Rubric, monkeypatch: pytest.MonkeyPatch
) -> None:
    import grader.runner
    from grader.batch import Entry, grade_entry

    seen: dict[str, bool] = {}

    def fake_grade(path: Path, rubric: Rubric, **kwargs: object) -> None:
        seen[Path(path).name] = bool(kwargs.get("tests_beside", True))
        raise RuntimeError("stop here")

    monkeypatch.setattr(grader.runner, "grade", fake_grade)
    (tmp_path / "class" / "bob").mkdir(parents=True)
    (tmp_path / "class" / "alice.py").write_text("")
    (tmp_path / "class" / "test_carol.py").write_text("")
    (tmp_path / "class" / "bob" / "my_head.py").write_text("")
    for entry in (Entry("alice", tmp_path / "class" / "alice.py"), Entry("bob", tmp_path / "class" / "bob")):
        grade_entry(entry, rubric, pool=None)
    assert seen == {"alice.py": False, "my_head.py": True}  # bob's folder is his own


def test_grading_the_file_runs_its_tests(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    from grader.runner import grade as grade_submission

    d = tmp_path / "project"
    d.mkdir()
    (d / "attention_head.py").write_text(reference_path().read_text())
    (d / "test_fails_on_wheat.py").write_text(suite_text("fails_on_wheat"))
    result = grade_submission(d / "attention_head.py", rubric, only=["student_tests"], pool=pool, visuals=False)
    (check,) = result.checks
    assert check.message.startswith("Your test test_fails_on_wheat.py::test_upper_triangle_is_used fails"), check


# ---- counted as pytest counts, shown as pytest shows (issue 36.3) --------------------------------


def test_tests_are_counted_as_pytest_counts_them() -> None:
    xml = (
        '<testsuites><testsuite tests="6" failures="2" errors="1" skipped="2">'
        '<testcase classname="test_a" name="test_ok"/>'
        '<testcase classname="test_a" name="test_f"><failure message="AssertionError">E   AssertionError</failure>'
        '</testcase><testcase classname="test_a" name="test_g"><failure message="x">E   x</failure></testcase>'
        '<testcase classname="test_a" name="test_e"><error message="fixture">E   x</error></testcase>'
        '<testcase classname="test_a" name="test_todo"><skipped type="pytest.skip" message="TODO"/></testcase>'
        '<testcase classname="test_a" name="test_xf"><skipped type="pytest.xfail" message="known"/></testcase>'
        "</testsuite></testsuites>"
    )
    cases = parse_junit(xml)
    assert not isinstance(cases, str)
    tally = Tally.of(cases)
    assert tally == Tally(passed=1, failed=2, errors=1, skipped=2)
    assert tally.words() == "2 failed, 1 passed, 2 skipped, 1 error"  # pytest's summary line, in its order
    assert Tally(passed=3, skipped=5).words() == "3 passed, 5 skipped"


def test_a_failure_is_shown_as_pytest_shows_it_and_bounded() -> None:
    detail = "\n".join(f"E   line {k}" for k in range(30))
    xml = (
        '<testsuite tests="1" failures="1" errors="0" skipped="0"><testcase classname="test_a" name="test_f">'
        '<failure message="AssertionError: Tensor-likes are not close!&#10;&#10;Mismatched elements: 3 / 4&#10;'
        '[+2 more lines; full report in element text]">'
        "../src/test_a.py:12: in test_f\n    torch.testing.assert_close(out, expected)\n"
        "E   AssertionError: Tensor-likes are not close!\nE   \nE   Mismatched elements: 3 / 4\n"
        f"{detail}</failure></testcase></testsuite>"
    )
    cases = parse_junit(xml)
    assert not isinstance(cases, str)
    (case,) = cases
    assert "element text" not in case.message
    lines = case.excerpt.splitlines()
    assert lines[:4] == [
        "test_a.py, line 12, in test_f",
        "  torch.testing.assert_close(out, expected)",
        "AssertionError: Tensor-likes are not close!",
        "Mismatched elements: 3 / 4",
    ]
    assert len(lines) == 12 and lines[-1] == "... (23 more lines: run pytest on this test to see them)"
    assert "\\n" not in case.excerpt and "E   " not in case.excerpt


TWO_FAILING = """

def test_row_zero_sees_key_one():
    X, W_Q, W_K, W_V = make_inputs()
    _, weights = causal_self_attention(X, W_Q, W_K, W_V)
    assert weights[0, 0, 1] == 1, "first line\\nsecond line"


def test_output_moves():
    X, W_Q, W_K, W_V = make_inputs()
    out, _ = causal_self_attention(X, W_Q, W_K, W_V)
    torch.testing.assert_close(out, out + 1)
"""


def test_the_kit_counts_the_templates_skips_as_skips(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    d = submission(tmp_path)
    shutil.copy(TEMPLATE, d / TEMPLATE.name)
    verdict = own_head_suite(d, reference_path().read_text(), rubric, pool=suite_pool)
    lines = verdict.message.splitlines()
    assert lines[0] == "Your tests pass on your own head: 1 passed, 7 skipped."
    assert lines[-1] == "The 7 skipped tests check nothing: replace each pytest.skip(...) with a real test."
    assert verdict.status == "passed" and verdict.pending  # issue 53.1: graded on submission, pending here
    own = verdict.own_tests
    assert own is not None and (own.passed, own.failed, own.skipped) == (1, 0, 7)
    # issue 53.1: the one real test (rows in the simplex) catches the mutants that break the rows or crash, and
    # misses the scale, the causal branch and the diagonal of the mask, each named at its line of the head
    assert own.mutants == 8 and own.caught == 5, own
    survived = {(m.before, m.after) for m in own.survived}
    assert ("causal", "not causal") in survived
    assert lines[1].startswith("Mutation testing: your tests catch 5 of 8 mutations of your head")
    assert any(ln.startswith("- attention_head.py:49: causal  ->  not causal") for ln in lines), lines


def test_the_kit_counts_every_failure_and_shows_the_first(
    tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool
) -> None:
    """pytest runs every test on the student's own head, so the counts are the ones pytest prints."""
    d = submission(tmp_path)
    (d / TEMPLATE.name).write_text(TEMPLATE.read_text() + TWO_FAILING)
    verdict = own_head_suite(d, reference_path().read_text(), rubric, pool=suite_pool)
    line = len(TEMPLATE.read_text().splitlines()) + 6
    assert verdict.status == "failed" and verdict.pending  # issue 53.9: failing, not a grey skip; 53.1: pending
    assert verdict.reproduce == "pytest test_attention_head.py::test_row_zero_sees_key_one"  # issue 53.9
    assert verdict.message.splitlines()[:6] == [
        "Your test test_attention_head.py::test_row_zero_sees_key_one fails on your own head (2 failed, 1 passed, "
        "7 skipped; the first failure is shown):",
        f"  test_attention_head.py, line {line}, in test_row_zero_sees_key_one",
        '    assert weights[0, 0, 1] == 1, "first line\\nsecond line"',  # the student's own source, as written
        "  AssertionError: first line",
        "    second line",
        "  assert tensor(0., dtype=torch.float64) == 1",
    ]
    assert verdict.message.splitlines()[-1].startswith("The 7 skipped tests check nothing")


# ---- the inputs a suite uses, seen through its helpers (issue 36.3) ------------------------------


def test_the_inputs_the_tests_use_are_observed_through_a_helper(tmp_path: Path, suite_pool: WorkerPool) -> None:
    """The template's tests build their inputs with make_inputs (d=4, d_k=3, d_v=2): the grader sees the calls
    the head gets while the tests run, not the source."""
    files = {TEMPLATE.name: TEMPLATE.read_bytes()}
    run = run_suite(files, disguised_head(None), SandboxLimits(), suite_pool, observe=["causal_self_attention"])
    assert run.outcome == "passed"
    shapes = {(c.args, tuple(sorted(c.kwargs.items()))) for c in run.calls}
    assert shapes == {(((2, 5, 4), (4, 3), (4, 3), (4, 2)), (("causal", causal),)) for causal in (True, False)}
    used = used_inputs(run.calls, EntryPoints())
    assert used == {("causal_self_attention", c) for c in ("d != d_k", "d_v != d", "causal=False", "B >= 2")}


def test_a_call_is_bound_as_the_reference_names_its_parameters() -> None:
    square = Call("causal_self_attention", ((1, 3, 4), (4, 4), (4, 4), (4, 4)), {})
    assert used_inputs([square], EntryPoints()) == set()  # causal defaults to True; B = 1; d = d_k = d_v
    renamed = Call("attend", ((2, 3, 4),), {"W_Q": (4, 3), "W_K": (4, 3), "W_V": (4, 4), "causal": False})
    found = used_inputs([renamed], EntryPoints(causal_self_attention="attend"))
    assert found == {("causal_self_attention", c) for c in ("d != d_k", "causal=False", "B >= 2")}
    assert used_inputs([Call("attend", ((2, 3, 4),) * 6, {})], EntryPoints(causal_self_attention="attend")) == set()


def test_a_missed_bug_never_says_no_test_uses_an_input_the_tests_use() -> None:
    chaff = next(c for c in CHAFFS if c.id == "scale_by_sqrt_d_model")
    unused = _score([chaff], [chaff], []).message
    assert "- None of your tests uses d != d_k" in unused
    used = _score([chaff], [chaff], [], used={("causal_self_attention", "d != d_k")}).message
    assert "none of your tests uses d != d_k" not in used.lower()
    assert "- Your tests call the head with d != d_k, but none compares" in used


def test_every_input_the_catalog_names_is_one_the_grader_observes() -> None:
    said = [c for c in CHAFFS if c.uses]
    assert {c.id for c in said} >= {"scale_by_sqrt_d_model", "causal_flag_ignored", "no_value_projection"}
    for c in said:
        assert c.uses in USES and c.missed_if_used.strip() and c.function in ALWAYS_IN_SCOPE, c.id


def test_the_kit_takes_the_run_a_pytest_session_made(
    tmp_path: Path, rubric: Rubric, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 53.9: under ``pytest --step4`` the session has run the student's tests on the head; the kit's
    student_tests reads that run (pytest's own failure text, tests/ kept in the ids) and runs no suite again."""
    import grader.checks._student_tests as suites
    from grader.checks._student_tests import session_run

    d = submission(tmp_path)
    (d / "tests").mkdir()
    (d / "tests" / "test_more.py").write_text("def test_more():\n    assert 0\n")
    text = "tests/test_more.py:2: in test_more\n    assert 0\nE   assert 0"
    ran = session_run({"tests/test_more.py::test_more": ("failed", text), "test_a.py::test_a": ("passed", "")})
    monkeypatch.setattr(suites, "run_suite", lambda *a, **k: pytest.fail("the suite was run again"))
    verdict = own_head_suite(d, reference_path().read_text(), rubric, ran=ran)
    assert verdict.status == "failed" and verdict.own_tests is not None
    assert verdict.own_tests.failing == ["tests/test_more.py::test_more"]
    assert (
        verdict.message.splitlines()[0]
        == "Your test tests/test_more.py::test_more fails on your own head (1 failed, 1 passed):"
    )
    assert "E   assert 0" in verdict.message and verdict.reproduce == "pytest tests/test_more.py::test_more"


def test_a_long_line_of_a_failure_is_cut_between_tokens() -> None:
    """Issue 53.9: a line past the excerpt's width is cut at a space and marked, never inside a token."""
    from grader.checks._student_tests import EXCERPT_WIDTH, _excerpt

    words = " ".join(f"token{k:03d}" for k in range(40))
    shown = _excerpt(f"E   AssertionError: {words}").splitlines()[0]
    assert len(shown) <= EXCERPT_WIDTH and shown.endswith(" …")
    assert re.fullmatch(r"AssertionError: (token\d{3} )+…", shown), shown
