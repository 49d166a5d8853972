"""step4-grader: grade one causal self-attention head against the theorems of Lecture 4.

Data flow: submission -> isolated worker -> checks -> verdicts -> score -> report / exports.
"""

from grader.models import CheckResult, GradeResult
from grader.rubric import Rubric, load_rubric

__version__ = "0.1.0"


def grade(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Grade one submission (see :func:`grader.runner.grade`); imported lazily to keep startup light."""
    from grader.runner import grade as _grade

    return _grade(*args, **kwargs)


__all__ = ["CheckResult", "GradeResult", "Rubric", "grade", "load_rubric"]
