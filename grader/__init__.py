"""step4-grader: grade one causal self-attention head against the theorems of Lecture 4.

Data flow: submission -> isolated worker -> checks -> verdicts -> score -> report / exports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.models import CheckResult, GradeResult
    from grader.notebook import check
    from grader.rubric import Rubric, load_rubric

__version__ = "0.1.0"

# Resolved on first use: `grade` starts its sandbox before pydantic is imported (startup is on every run),
# and `from grader import check` in a notebook imports nothing heavy until check() is called.
_EXPORTS = {
    "CheckResult": "models",
    "GradeResult": "models",
    "Rubric": "rubric",
    "check": "notebook",
    "load_rubric": "rubric",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grader' has no attribute {name!r}")
    return getattr(importlib.import_module(f"grader.{_EXPORTS[name]}"), name)


def grade(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Grade one submission (see :func:`grader.runner.grade`); imported lazily to keep startup light."""
    from grader.runner import grade as _grade

    return _grade(*args, **kwargs)


__all__ = ["CheckResult", "GradeResult", "Rubric", "check", "grade", "load_rubric"]
