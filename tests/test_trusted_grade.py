"""A grade a student can trust (issue 53, points 5, 8, 10): one submission gets one grade in any form, the score's
arithmetic is shown where it is not the sum of the rows, and a slow head is one cause."""

from __future__ import annotations

from pathlib import Path

import nbformat

from grader.library import load_reference
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

REFERENCE = Path(load_reference().__file__).read_text(encoding="utf-8")
TEMPLATE = (Path(__file__).resolve().parent.parent / "student_template" / "attention_head.py").read_text()


def _function(source: str, name: str) -> str:
    """The text of top-level function ``name`` in ``source``, up to the next top-level definition."""
    start = source.index(f"\ndef {name}(") + 1
    ends = [i for i in (source.find("\ndef ", start), source.find("\nclass ", start)) if i != -1]
    return source[start : min(ends)].rstrip() + "\n"


HEAD = _function(REFERENCE, "causal_self_attention")
EXERCISES = ["interface", "gaussian_kernel", "gaussian_qk", "score_scale_experiment"]


# ---- point 10: one submission, one grade, in any form ---------------------------------------------------------


def test_the_template_stubs_and_a_notebook_without_them_get_one_grade(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The head done, the three exercise functions not: left as the template's stubs (a .py) or not written at all
    (a notebook). interface judged the stubs 5/5 and the notebook 0/5 (its message listed the absent functions);
    each function costs its own check, once, in both forms."""
    py = tmp_path / "py" / "attention_head.py"
    py.parent.mkdir()
    py.write_text(TEMPLATE.replace(_function(TEMPLATE, "causal_self_attention"), HEAD), encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import math\n\nimport torch"), nbformat.v4.new_code_cell(HEAD)]
    for k, cell in enumerate(nb.cells, start=1):
        cell.execution_count = k
    ipynb = tmp_path / "nb" / "attention_head.ipynb"
    ipynb.parent.mkdir()
    nbformat.write(nb, ipynb)
    graded = [grade(p, rubric, pool=pool, only=EXERCISES, visuals=False) for p in (py, ipynb)]
    interface = [next(c for c in r.checks if c.id == "interface") for r in graded]
    assert [(c.status, c.score) for c in interface] == [("passed", 5.0)] * 2, [c.message for c in interface]
    assert "Not judged here" in interface[1].message and "gaussian_positional_qk" in interface[1].message
    assert graded[0].score == graded[1].score == 5.0, [(r.score, r.scoring_note) for r in graded]
    for r in graded:  # each function is charged at its own check, never at interface
        assert {cid for d in r.diagnosis for cid in d.explains} == {"gaussian_kernel", "gaussian_qk",
                                                                     "score_scale_experiment"}  # fmt: skip


# ---- point 8: score arithmetic a student can follow ----------------------------------------------------------


def _check(cid: str, points: float, status: str = "passed", *, extra: bool = False, score: float | None = None):  # type: ignore[no-untyped-def]
    from grader.models import CheckResult

    earned = (0.0 if status != "passed" else points) if score is None else score
    return CheckResult(
        id=cid, title=cid, cites="Section 9.1", status=status, score=earned, max_score=points,  # type: ignore[arg-type]
        extra_credit=extra, message="m", seed=1, duration_s=0.0,
    )  # fmt: skip


def _cause(cid: str, explains: list[str], kind: str = "mutation"):  # type: ignore[no-untyped-def]
    from grader.models import Diagnosis

    return Diagnosis(id=cid, title=cid, hint="h", cites="c", kind=kind, explains=explains)  # type: ignore[arg-type]


def _counted(checks, causes, prices):  # type: ignore[no-untyped-def]
    from grader.models import GradeResult
    from grader.scoring import tally

    t = tally(checks, causes, prices)
    attached = [c.model_copy(update={"causes": [d.id for d in causes if c.id in d.explains]}) for c in checks]
    return GradeResult(
        submission="attention_head.py", seed=1, score=t.score, max_score=sum(c.max_score for c in checks if not
        c.extra_credit), scoring=t.scoring, score_by_checks=t.score_by_checks, scoring_note=t.note, checks=attached,
        diagnosis=t.diagnosis, rubric="r", duration_s=0.0,
    )  # fmt: skip


def test_a_grade_counted_by_mistakes_shows_the_sum_that_makes_it() -> None:
    """Rows summed to 72 under a score of 75: the note now adds it up, per cause, from the maximum."""
    checks = [
        _check("interface", 5),
        _check("causal_mask", 7, "failed"),
        _check("convex_hull", 3, "failed"),
        _check("determinism", 3, "failed"),
        _check("student_tests", 9, "skipped"),
        _check("kv_cache", 3, extra=True),
    ]
    causes = [_cause("no_mask", ["causal_mask", "convex_hull"]), _cause("dropout", ["determinism"])]
    r = _counted(checks, causes, {"no_mask": 4, "dropout": 2})
    assert r.scoring == "mistakes" and r.score == 5 + 7 + 3 + 3 - 4 - 2 + 3
    assert r.scoring_note is not None
    assert (
        "27 points, − 9 not earned (student_tests skipped), − 4 for cause (1), − 2 for cause (2), + 3 extra credit "
        "= 15 points" in r.scoring_note
    ), r.scoring_note
    assert "per-check sum would be 8" in r.scoring_note


def test_only_one_check_says_how_its_score_was_counted() -> None:
    """`--only score_scaling` showed 0 / 7 over 'Score: 1 / 7' and '(1 points)'."""
    r = _counted([_check("score_scaling", 7, "failed")], [_cause("scale_by_d", ["score_scaling"])], {"scale_by_d": 6})
    assert r.score == 1 and r.scoring_note is not None
    assert "7 points, − 6 for cause (1) = 1 point;" in r.scoring_note, r.scoring_note
    assert "1 points" not in r.scoring_note


def test_a_cause_priced_above_the_checks_it_explains_says_why() -> None:
    """A cause priced 8 under the one 7-point check it explains: the price is the mistake's, said beside it."""
    from grader.report import wording

    r = _counted(
        [_check("causal_mask", 7, "failed")], [_cause("scores_returned", ["causal_mask"])], {"scores_returned": 8}
    )
    heading = wording.cause_heading(r, "scores_returned")
    assert "price 8 points" in heading and "more than the 7 points of the check it explains" in heading, heading


def test_what_went_wrong_counts_every_failing_check() -> None:
    """'What went wrong (3)' under '4 failed': a check a crash stopped was left out of the section's count."""
    from grader.report import render_html

    checks = [_check("interface", 5, "failed"), _check("causal_mask", 7, "error"), _check("convex_hull", 3, "error")]
    checks += [_check("determinism", 3, "failed")]
    crash = _cause("crash:causal_self_attention", ["causal_mask", "convex_hull"], "crash")
    r = _counted(checks, [crash, _cause("own:interface", ["interface"], "own"), _cause("d", ["determinism"])], {})
    page = render_html(r)
    assert "What went wrong (4)</a>" in page, page[page.find("What went wrong") - 50 :][:200]
    assert page.count('<article class="card') == 4


# ---- point 5: a slow head is one cause ------------------------------------------------------------------------

SLOW = """import math
import time

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    time.sleep(30)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(W_Q.shape[1])
    return torch.softmax(att, dim=-1) @ v, torch.softmax(att, dim=-1)
"""
SLOW_CHECKS = ["interface", "reference_match", "row_stochastic", "causal_mask", "gradient_blocks", "convex_hull"]


def test_a_head_slower_than_the_limit_on_every_call_is_one_cause(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """Each call sleeps 30 s: the headline read "Your code raises `causal_self_attention` timed out earlier in check
    ...", one cause was split in two (each hang's input in its first line) and four checks were 'Not explained'."""
    head = tmp_path / "attention_head.py"
    head.write_text(SLOW + "\n\n" + REFERENCE[REFERENCE.index("def gaussian_positional_weights") :])
    tight = rubric.model_copy(update={"limits": rubric.limits.model_copy(update={"per_call_timeout_s": 1.0})})
    result = grade(head, tight, pool=pool, only=SLOW_CHECKS, visuals=False)
    failing = {c.id for c in result.checks if c.status in ("failed", "error", "timeout")}
    assert failing == set(SLOW_CHECKS), {c.id: c.status for c in result.checks}
    [cause] = result.diagnosis
    assert set(cause.explains) == failing, cause.explains
    assert cause.title.startswith("`causal_self_attention` ran past the per-call limit (1 s)"), cause.title
    assert "raises" not in cause.title and "timed out earlier" not in cause.title
    # the worker said where the time went, shortly before the limit: the line that sleeps
    assert cause.where is not None and (cause.where.line, cause.where.code) == (9, "time.sleep(30)"), cause.where
    assert result.scoring == "mistakes" or (result.scoring_note or "").startswith("Counted by checks: the named")
