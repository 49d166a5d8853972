"""Tolerances (one dtype-keyed table) and mismatch records worded like ``torch.testing``.

Comparisons happen only here, in the grader process, with its own torch: nothing a submission does in
its worker can reach these functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    def __str__(self) -> str:
        if self.rtol == 0 and self.atol == 0:
            return "exact equality"
        return f"rtol {self.rtol:g}, atol {self.atol:g}"


# Reference match. float64 can be tight: a correct head differs from the reference by <= 1e-15
# (research/numerics.md §7); float32 keeps torch.testing's defaults against a float64 golden on the
# same float32 inputs; the half types follow PyTorch's CPU fused-vs-math SDPA tolerances.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(rtol=1e-10, atol=1e-12),
    torch.float32: Tolerance(rtol=1e-4, atol=2e-5),
    torch.float16: Tolerance(rtol=1e-2, atol=1e-2),
    torch.bfloat16: Tolerance(rtol=5e-2, atol=5e-2),
}

# Row sums of the weights: measured worst deviation of a correct head for T <= 1024 is 2.5e-7
# (float32), 2.6e-4 (float16), 2.2e-3 (bfloat16); the bounds leave headroom over those.
ROW_SUM_TOLERANCE: dict[torch.dtype, float] = {
    torch.float64: 1e-12,
    torch.float32: 2e-6,
    torch.float16: 1e-3,
    torch.bfloat16: 8e-3,
}

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
