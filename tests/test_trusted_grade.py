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
