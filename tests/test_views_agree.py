"""Every view of one result shows the same total, ``GradeResult.score``, and says how it was counted.

Graded by mistakes, the total is more than the sum of the per-check points (each cause is charged once),
so a view that adds up the checks itself shows another grade. The result here is counted by mistakes by
grader.scoring itself; each view is rendered and read back.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

import grader
from grader.batch import Outcome, grades_csv
from grader.gradescope import results_json
from grader.models import CheckResult, Diagnosis, GradeResult
from grader.report import render_html, render_terminal, wording
from grader.report.junit import render_junit
from grader.report.summary import render_summary
from grader.rubric import Rubric
from grader.scoring import tally
from grader.watch import change_line

MASK_CHECKS = ("causal_mask", "convex_hull", "future_perturbation")
PRICE = 10.0
# The modules that render a result or a class of results; none may add up check points into a total.
VIEW_MODULES = ("report/", "exports.py", "gradescope.py", "batch.py", "cli.py", "watch.py")


def _check(cid: str, points: float, status: str = "passed", **kw: object) -> CheckResult:
    problem = status != "passed"
    return CheckResult.model_validate(
        {
            "id": cid,
            "title": f"the property {cid}",
            "cites": "Proposition 4.3",
            "status": status,
            "score": 0.0 if problem else points,
            "max_score": points,
            "message": "Your weights leak into the future." if problem else "holds",
            "seed": 1,
            "duration_s": 0.01,
        }
        | kw
    )


def by_mistakes(rubric: Rubric) -> GradeResult:
    """Every enabled check of the rubric; the three mask checks fail, all explained by one priced cause."""
    checks = [
        _check(cid, rc.points, "failed" if cid in MASK_CHECKS else "passed", extra_credit=rc.extra_credit)
        for cid, rc in rubric.checks.items()
        if rc.enabled
    ]
    cause = Diagnosis(
        id="no_mask", title="No causal mask", hint="Mask the scores.", cites="Definition 4.1", explains=[*MASK_CHECKS]
    )
    counted = tally(checks, [cause], {"no_mask": PRICE})
    checks = [c.model_copy(update={"causes": ["no_mask"]}) if c.id in MASK_CHECKS else c for c in checks]
    return GradeResult(
        submission="attention_head.py",
        seed=1,
        score=counted.score,
        max_score=sum(c.max_score for c in checks if not c.extra_credit),
        scoring=counted.scoring,
        score_by_checks=counted.score_by_checks,
        scoring_note=counted.note,
        checks=checks,
        diagnosis=counted.diagnosis,
        rubric=rubric.name,
        duration_s=1.0,
    )


@pytest.fixture(scope="module")
def result(rubric: Rubric) -> GradeResult:
    r = by_mistakes(rubric)
    assert r.scoring == "mistakes" and r.scoring_note, r.scoring_note  # the premise of every test here
    assert r.score > (r.score_by_checks or 0.0) == sum(c.score for c in r.checks)
    assert r.diagnosis[0].deduction == PRICE
    return r


def test_terminal(result: GradeResult) -> None:
    console = Console(record=True, width=200, color_system=None)
    render_terminal(result, console)
    lines = console.export_text().splitlines()
    assert lines[-1] == wording.score_line(result)  # the score line stays last: --watch and tools read it
    assert lines[-1].startswith(f"Score: {wording.fmt_points(result.score)} / ")
    assert lines[-2] == result.scoring_note
    assert "(1) No causal mask (Definition 4.1): −10 points" in lines


def test_html(result: GradeResult) -> None:
    page = render_html(result)
    score = page.split('<div class="score">', 1)[1].split("<small>", 1)[0].strip()
    assert score == wording.fmt_points(result.score)
    note = page.index(str(result.scoring_note)), page.index('<div class="score">'), page.index('id="diagnosis"')
    assert note[1] < note[0] < note[2]  # near the score, above the causes
    assert '<span class="chip deduction">−10 points</span>' in page


def test_junit(result: GradeResult) -> None:
    suite = ET.fromstring(render_junit(result)).find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["score"] == f"{result.score:g}" and props["scoring"] == "mistakes"
    assert props["score_by_checks"] == f"{result.score_by_checks:g}" and props["scoring_note"] == result.scoring_note


def test_gradescope(result: GradeResult) -> None:
    data = results_json(result)
    assert data["score"] == result.score > sum(t["score"] for t in data["tests"])
    assert result.scoring_note in data["output"]
    assert "(1) No causal mask (Definition 4.1): −10 points" in data["output"].splitlines()
    assert [t["score"] for t in data["tests"]] == [c.score for c in result.checks]  # the evidence, unchanged


def test_batch_files(result: GradeResult, rubric: Rubric) -> None:
    outcomes = [Outcome("ada", "ada.py", "graded", result)]
    (row,) = csv.DictReader(io.StringIO(grades_csv(outcomes, rubric)))
    assert float(row["score"]) == result.score and row["scoring"] == "mistakes"
    assert float(row["score_by_checks"]) == sum(float(row[c]) for c in rubric.checks if rubric.checks[c].enabled)
    page = render_summary(outcomes, rubric)
    assert f"{wording.fmt_points(result.score)} / {wording.fmt_points(result.max_score)}" in page
    assert "1 of them counted by mistakes" in page and "<th>Counted by</th>" in page


def test_watch_and_json(result: GradeResult) -> None:
    assert change_line(None, result).endswith(f"score {wording.fmt_points(result.score)} / 100)")
    assert json.loads(result.model_dump_json())["score"] == result.score


def test_counted_by_checks_says_so(rubric: Rubric) -> None:
    """A failing check no cause explains: counted by checks, and the views say why (no deduction shown)."""
    r = by_mistakes(rubric)
    r = r.model_copy(update={"diagnosis": [], "checks": [c.model_copy(update={"causes": []}) for c in r.checks]})
    counted = tally(r.checks, [], {})
    r = r.model_copy(update={"score": counted.score, "scoring": counted.scoring, "scoring_note": counted.note})
    assert r.scoring == "checks" and r.scoring_note
    console = Console(record=True, width=200, color_system=None)
    render_terminal(r, console)
    assert console.export_text().splitlines()[-2] == r.scoring_note
    assert r.scoring_note in results_json(r)["output"] and r.scoring_note in render_html(r)
    assert "−" not in results_json(r)["output"]


def _sums_check_points(node: ast.Call) -> bool:
    """``sum(x.score for x in ...)``, unless it adds up extra credit only (a part of the total, not one)."""
    if not (isinstance(node.func, ast.Name) and node.func.id == "sum" and node.args):
        return False
    arg = node.args[0]
    if not isinstance(arg, ast.GeneratorExp | ast.ListComp):
        return False
    scores = isinstance(arg.elt, ast.Attribute) and arg.elt.attr == "score"
    extra = any(isinstance(n, ast.Attribute) and n.attr == "extra_credit" for g in arg.generators for n in ast.walk(g))
    return scores and not extra


def test_no_view_adds_up_check_points() -> None:
    root = Path(grader.__file__).parent
    files = [p for v in VIEW_MODULES for p in ([root / v] if v.endswith(".py") else sorted((root / v).rglob("*.py")))]
    offenders = [
        f"{p.relative_to(root)}:{node.lineno}"
        for p in files
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and _sums_check_points(node)
    ]
    assert len(files) > 8 and offenders == []
