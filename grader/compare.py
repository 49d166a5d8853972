"""Tolerances (one dtype-keyed table) and mismatch records worded like ``torch.testing``.

Comparisons happen only here, in the grader process, with its own torch: nothing a submission does in
its worker can reach these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    def __str__(self) -> str:
        if self.rtol == 0 and self.atol == 0:
            return "exact equality"
        return f"rtol {self.rtol:g}, atol {self.atol:g}"


F64, F32, F16, BF16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
Purpose = Literal[
    "reference", "row_sum", "hull", "equivariance", "scale_fit", "kernel", "kernel_limit", "large_scores", "match",
    "ladder", "symmetry_gap", "finite_difference", "trace",
]  # fmt: skip

# Every tolerance the grader compares with, by what the comparison is for and the dtype the values are in (the
# precision the head computes in, where a check measures it). One table, as torch.testing's _DTYPE_PRECISIONS;
# every message that compares prints what was allowed (``Tolerance.__str__``, ``Mismatch.text``).
TABLE: dict[Purpose, dict[torch.dtype, Tolerance]] = {
    # reference match. float64 can be tight: a correct head differs from the reference by <= 1e-15
    # (research/numerics.md §7); float32 keeps torch.testing's defaults against a float64 golden on the same
    # float32 inputs; the half types follow PyTorch's CPU fused-vs-math SDPA tolerances.
    "reference": {
        F64: Tolerance(rtol=1e-10, atol=1e-12),
        F32: Tolerance(rtol=1e-4, atol=2e-5),
        F16: Tolerance(rtol=1e-2, atol=1e-2),
        BF16: Tolerance(rtol=5e-2, atol=5e-2),
    },
    # row sums of the weights (atol): measured worst deviation of a correct head for T <= 1024 is 2.5e-7 (float32),
    # 2.6e-4 (float16), 2.2e-3 (bfloat16); the bounds leave headroom over those
    "row_sum": {F64: Tolerance(0, 1e-12), F32: Tolerance(0, 2e-6), F16: Tolerance(0, 1e-3), BF16: Tolerance(0, 8e-3)},
    # out_i inside the hull of v_1..v_i (rtol: of the values' spread)
    "hull": {F64: Tolerance(1e-10, 0), F32: Tolerance(1e-5, 0), F16: Tolerance(1e-2, 0), BF16: Tolerance(5e-2, 0)},
    # f(P X) against P f(X): the same arithmetic in another order
    "equivariance": {
        F64: Tolerance(rtol=1e-10, atol=1e-12),
        F32: Tolerance(rtol=1e-5, atol=1e-6),
        F16: Tolerance(rtol=1e-2, atol=1e-2),
        BF16: Tolerance(rtol=5e-2, atol=5e-2),
    },
    # the scale read off the weights (rtol: of the slope; atol: the fit's residual, relative to the scores)
    "scale_fit": {
        F64: Tolerance(1e-6, 1e-6),
        F32: Tolerance(1e-4, 1e-3),
        F16: Tolerance(2e-2, 5e-2),
        BF16: Tolerance(5e-2, 1e-1),
    },
    # the Gaussian positional kernel against its formula, and against its limits at extreme bandwidths
    "kernel": {F64: Tolerance(rtol=1e-9, atol=1e-12)},
    "kernel_limit": {F64: Tolerance(rtol=0.0, atol=1e-8)},
    # a head at huge scores against its own float64 result (the scores' own rounding is added where it is larger)
    "large_scores": {
        F64: Tolerance(rtol=1e-8, atol=1e-9),
        F32: Tolerance(rtol=1e-4, atol=1e-4),
        F16: Tolerance(rtol=1e-4, atol=1e-4),
        BF16: Tolerance(rtol=1e-4, atol=1e-4),
    },
    # the diagnosis: a head's values against a model's (another way to write the same float64 arithmetic, not
    # float32; a float32 softmax replayed: the same rounding, up to order), at the ladder's scores of 1e9 (their
    # rounding of 1e-7: agree on the pattern, not bits)
    "match": {F64: Tolerance(rtol=1e-9, atol=1e-12), F32: Tolerance(rtol=2e-5, atol=1e-7)},
    "ladder": {F64: Tolerance(rtol=1e-4, atol=1e-12)},
    # autograd against central differences of the head's own forward (rtol), with the step FD_STEP: in float64 the
    # error is about eps^2 (truncation) + 1e-16 / eps (rounding); a float32 head needs a larger step
    "finite_difference": {
        F64: Tolerance(1e-6, 0),
        F32: Tolerance(2e-2, 0),
        F16: Tolerance(2e-1, 0),
        BF16: Tolerance(2e-1, 0),
    },
    # the diagnosis's trace against the error model's stages: float64 agreement (float32 rounding shows as a
    # departure, described as such), and float32's (about 1e-7 relative per op, a few ops deep) for a value the
    # head computed in float32
    "trace": {F64: Tolerance(rtol=1e-9, atol=1e-12), F32: Tolerance(rtol=1e-5, atol=1e-7)},
    # how far apart a causal head's outputs must be when two rows are swapped (atol): below it they are the same
    "symmetry_gap": {F64: Tolerance(rtol=0, atol=1e-9)},
}


def tolerance(purpose: Purpose, dtype: torch.dtype = torch.float64) -> Tolerance:
    """What a comparison made for ``purpose`` allows in ``dtype``; a purpose that is one number for every dtype
    has only its float64 entry."""
    table = TABLE[purpose]
    return table.get(dtype, table[F64])


FD_STEP = {F64: 1e-5, F32: 1e-2, F16: 1e-1, BF16: 1e-1}  # the finite differences' step, by the head's precision
EXACT = Tolerance(0.0, 0.0)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class Mismatch:
    """Where two tensors disagree beyond a tolerance, as data; :meth:`text` words it."""

    what: str
    n_bad: int
    n_total: int
    max_abs: float
    abs_index: tuple[int, ...]
    max_rel: float
    rel_index: tuple[int, ...]
    got: float
    expected: float
    tolerance: Tolerance

    def text(self) -> str:
        verb = "equal" if self.tolerance == EXACT else "close"
        pct = 100.0 * self.n_bad / max(self.n_total, 1)
        return "\n".join(
            [
                f"{self.what}: tensors are not {verb} ({self.tolerance}).",
                f"Mismatched elements: {self.n_bad} / {self.n_total} ({pct:.1f}%)",
                f"Greatest absolute difference: {self.max_abs:.4g} at index {self.abs_index}"
                f" (up to {self.tolerance.atol:g} allowed)",
                f"Greatest relative difference: {self.max_rel:.4g} at index {self.rel_index}"
                f" (up to {self.tolerance.rtol:g} allowed)",
                f"At index {self.abs_index}: got {self.got:.10g}, expected {self.expected:.10g}.",
            ]
        )


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    """The row-major index of flat position ``flat`` in ``shape``. (torch.unravel_index would do, but its
    first call imports sympy and torch.fx, about half a second of every grade that finds a mismatch.)"""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def mismatch(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance, what: str) -> Mismatch | None:
    """Compare elementwise in float64; ``None`` when every element is within ``atol + rtol*|expected|``.

    Shapes must already agree (callers check shapes explicitly: no broadcasting). Non-finite values
    count as mismatches unless both sides hold the same non-finite value.
    """
    g, e = got.detach().double(), expected.detach().double()
    both_same_nonfinite = (~torch.isfinite(g)) & (g == e)
    diff = (g - e).abs()
    diff = torch.where(both_same_nonfinite, torch.zeros_like(diff), diff)
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    bad = diff > tol.atol + tol.rtol * e.abs()
    if not bool(bad.any()):
        return None
    # As torch.testing: relative to |expected|, infinite where expected is 0 but the values differ.
    rel = torch.where(diff == 0, torch.zeros_like(diff), diff / e.abs())
    ia, ir = int(diff.flatten().argmax()), int(rel.flatten().argmax())
    return Mismatch(
        what=what,
        n_bad=int(bad.sum()),
        n_total=bad.numel(),
        max_abs=float(diff.flatten()[ia]),
        abs_index=_index(ia, diff.shape),
        max_rel=float(rel.flatten()[ir]),
        rel_index=_index(ir, diff.shape),
        got=float(g.flatten()[ia]),
        expected=float(e.flatten()[ia]),
        tolerance=tol,
    )
