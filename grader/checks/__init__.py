"""All checks, registered in report order. Each module groups the checks of one lecture topic."""

from grader.checks._base import CHECKS, CheckSpec, Ctx, Verdict
from grader.checks import (  # noqa: F401  (imported for registration, in report order)
    _contract,
    _simplex,
    _causality,
    _scaling,
    _symmetry,
    _stability,
    _exercises,
    _kernels,
)

__all__ = ["CHECKS", "CheckSpec", "Ctx", "Verdict"]
