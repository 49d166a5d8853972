"""One tolerance table (issue 51): every comparison's allowance comes from ``grader.compare.tolerance(purpose,
dtype)``, as torch.testing's comes from ``_DTYPE_PRECISIONS``; none is written out beside the code that uses it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from grader.compare import TABLE, Tolerance, tolerance

GRADER = Path(__file__).resolve().parents[1] / "grader"
DTYPES = ("float64", "float32", "float16", "bfloat16")


def _numbers(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, float) for n in ast.walk(node))


def _tables_elsewhere() -> list[str]:
    """A ``Tolerance`` built from written numbers, or a dict of numbers keyed by dtype, outside compare.py."""
    found = []
    for path in sorted(GRADER.rglob("*.py")):
        rel = path.relative_to(GRADER).as_posix()
        if rel == "compare.py" or rel.startswith("report/compiled/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            built = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Tolerance"
            if built and any(_numbers(a) for a in [*node.args, *(k.value for k in node.keywords)]):
                found.append(f"grader/{rel}:{node.lineno}: {ast.unparse(node)[:100]}")
            keyed = isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Attribute) and k.attr in DTYPES for k in node.keys if k is not None
            )
            if keyed and any(_numbers(v) for v in node.values):
                found.append(f"grader/{rel}:{node.lineno}: a table keyed by dtype")
    return found


def test_no_tolerance_is_written_outside_the_table() -> None:
    assert _tables_elsewhere() == []


@pytest.mark.parametrize("purpose", sorted(TABLE))
def test_every_purpose_answers_in_float64_and_says_what_it_allows(purpose: str) -> None:
    tol = tolerance(purpose, torch.float64)  # type: ignore[arg-type]
    assert isinstance(tol, Tolerance) and tol.rtol >= 0 and tol.atol >= 0
    assert str(tol) in ("exact equality", f"rtol {tol.rtol:g}, atol {tol.atol:g}")


def test_a_purpose_of_one_number_serves_every_dtype_and_the_dtype_keyed_ones_differ() -> None:
    assert tolerance("kernel", torch.float16) == tolerance("kernel", torch.float64)
    assert tolerance("reference", torch.float16).rtol > tolerance("reference", torch.float32).rtol
    assert tolerance("reference", torch.float32).rtol > tolerance("reference", torch.float64).rtol
