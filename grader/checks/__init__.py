"""All checks, registered in report order. Each module groups the checks of one lecture topic."""

from grader.checks import (  # noqa: F401  (imported for registration, in report order)
    _causality,
    _contract,
    _cuda,
    _exercises,
    _generation,
    _kernels,
    _scaling,
    _simplex,
    _stability,
    _student_tests,
    _symmetry,
)
from grader.checks._base import CHECKS, CheckSpec, Ctx, Verdict

__all__ = ["CHECKS", "CheckSpec", "Ctx", "Verdict"]
