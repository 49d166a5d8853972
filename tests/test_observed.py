"""A property is observed per entry (issue 30): what a call or a comparison held that was not finite, on finite
inputs, is named by its rows, and a pass judged on it is not credited."""

from __future__ import annotations

import torch

from grader.checks._base import UNOBSERVED, observed, passed
from grader.head import compared_non_finite, non_finite
from grader.inputs import Shape, make_case


def _nan_rows(t: torch.Tensor, rows: list[int]) -> torch.Tensor:
    t = t.clone()
    t[:, rows] = float("nan")
    return t


def test_a_partly_nan_call_is_a_partial_record_naming_its_rows() -> None:
    case = make_case(Shape(2, 5, 4, 3, 4), seed=0)
    out, weights = torch.zeros(2, 5, 4, dtype=torch.float64), torch.zeros(2, 5, 5, dtype=torch.float64)
    assert non_finite(case, True, out, weights) is None
    found = non_finite(case, True, _nan_rows(out, [0, 1, 2, 3]), _nan_rows(weights, [0, 1, 2, 3]))
    assert found is not None and found.partial and found.kind == "NaN"
    assert found.said() == "rows 0-3 of out and weights (of T = 5, every batch element) are NaN"
    one = weights.clone()
    one[1, 4, 0] = float("inf")
    found = non_finite(case, True, out, one)
    assert found is not None and found.said() == "row 4 of weights (of T = 5, batch element 1) is infinite"
    every = non_finite(case, True, torch.full_like(out, float("nan")), weights)
    assert every is not None and not every.partial and every.said() == "every entry of out is NaN"


def test_non_finite_inputs_make_no_record() -> None:
    case = make_case(Shape(1, 3, 2, 2, 2), seed=0)
    X = case.X.clone()
    X[0, 0, 0] = float("nan")
    bad = case.with_X(X)
    out = torch.full((1, 3, 2), float("nan"), dtype=torch.float64)
    assert non_finite(bad, True, out, torch.zeros(1, 3, 3, dtype=torch.float64)) is None
    assert compared_non_finite(bad, True, "out", out, out) is None


def test_a_comparison_is_judged_on_the_entries_it_compared() -> None:
    case = make_case(Shape(1, 4, 2, 2, 2), seed=0)
    a = torch.zeros(4, 2, dtype=torch.float64)
    assert compared_non_finite(case, True, "out[0]", a, a) is None
    found = compared_non_finite(case, True, "out[0]", _nan_rows(a[None], [0])[0], a)
    assert found is not None and found.said() == "row 0 of out[0] (of T = 4) is NaN"


def test_a_pass_on_some_finite_rows_is_not_observed() -> None:
    class _Ctx:  # what observed reads of a check's context
        base_seed, compared, observed_finite, vacuous = 1, 0, 0, None

    case = make_case(Shape(2, 5, 4, 3, 4), seed=0)
    out, weights = torch.zeros(2, 5, 4, dtype=torch.float64), torch.zeros(2, 5, 5, dtype=torch.float64)
    part = non_finite(case, True, _nan_rows(out, [0]), _nan_rows(weights, [0]))
    verdict = observed(passed("held"), None, _Ctx(), part)  # type: ignore[arg-type]
    assert verdict.status == "failed" and verdict.message.startswith(UNOBSERVED + "row 0 of out and weights")
    assert verdict.counterexample is not None
    assert observed(passed("held"), None, _Ctx(), None).status == "passed"  # type: ignore[arg-type]
