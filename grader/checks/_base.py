"""The check registry and the small vocabulary every check uses.

A check is a plain function ``fn(ctx) -> Verdict`` registered under its id with the lecture result it
tests. It never catches student failures itself: the proxy raises :class:`StudentFailure` and the
runner turns that into the verdict, so every check always yields exactly one verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Literal

import torch

from grader.head import Head
from grader.inputs import FAMILIES, Case, Shape, check_seed, make_case
from grader.models import Counterexample, Heatmap
from grader.rubric import Rubric
from grader.sandbox import WorkerPool


@dataclass
class Verdict:
    status: Literal["passed", "failed", "skipped", "error", "timeout"]
    message: str
    counterexample: Counterexample | None = None
    heatmaps: list[Heatmap] = field(default_factory=list)
    fraction: float | None = None  # partial credit in [0, 1]; None means all or nothing
    notes: list[str] = field(default_factory=list)


def passed(message: str, **kw: object) -> Verdict:
    return Verdict("passed", message, **kw)  # type: ignore[arg-type]


def failed(message: str, **kw: object) -> Verdict:
    return Verdict("failed", message, **kw)  # type: ignore[arg-type]


def skipped(message: str) -> Verdict:
    return Verdict("skipped", message)


@dataclass
class Ctx:
    """What a check may use: the student's head (through the proxy), the trusted reference, seeds."""

    head: Head
    ref: ModuleType
    rubric: Rubric
    base_seed: int
    check_id: str
    source: str  # text of the submission's module (read by the grader, never executed here)
    device: str = "cpu"
    submission_dir: Path | None = None  # the prepared submission folder (its test files), never imported
    pool: WorkerPool | None = None  # workers for checks that need sandboxes of their own (student tests)

    def seed(self, salt: int = 0) -> int:
        return check_seed(self.base_seed, self.check_id, salt)

    def cases(
        self, families: tuple[Shape, ...] = FAMILIES, *, dtype: torch.dtype = torch.float64, **kw: float
    ) -> Iterator[Case]:
        """One seeded case per shape family, smallest first."""
        for k, shape in enumerate(families):
            yield make_case(shape, seed=self.seed(k), dtype=dtype, **kw)


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    cites: str
    needs: tuple[str, ...]
    optional: bool
    fn: Callable[[Ctx], Verdict]


CHECKS: dict[str, CheckSpec] = {}


def check(
    id: str,
    *,
    title: str,
    cites: str,
    needs: tuple[str, ...] = ("causal_self_attention",),
    optional: bool = False,
) -> Callable[[Callable[[Ctx], Verdict]], Callable[[Ctx], Verdict]]:
    """Register ``fn`` as check ``id``. ``optional`` checks are skipped when their function is absent."""

    def register(fn: Callable[[Ctx], Verdict]) -> Callable[[Ctx], Verdict]:
        assert id not in CHECKS, f"duplicate check id {id}"
        CHECKS[id] = CheckSpec(id, title, cites, needs, optional, fn)
        return fn

    return register


# ---- helpers shared by several checks ------------------------------------------------------------


def heatmaps_for(
    student: torch.Tensor,
    reference: torch.Tensor | None,
    *,
    causal: bool = True,
    batch: int = 0,
    label: str = "reference",
) -> list[Heatmap]:
    """Heatmaps of the student's weights, the ``label`` ones and their difference for one batch element."""

    def rows(t: torch.Tensor) -> list[list[float | None]]:
        t = t.detach().double()
        return [[float(v) if torch.isfinite(v) else None for v in row] for row in t]

    maps = [Heatmap(title="your weights", kind="weights", data=rows(student[batch]), causal=causal)]
    if reference is not None:
        maps.append(Heatmap(title=f"{label} weights", kind="weights", data=rows(reference[batch]), causal=causal))
        diff = student[batch].double() - reference[batch].double()
        maps.append(Heatmap(title=f"yours − {label}", kind="difference", data=rows(diff), causal=causal))
    return maps


def ref_attention(ref: ModuleType, case: Case, causal: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The instructor reference in float64 on exactly the case's values (rounded inputs included)."""
    with torch.no_grad():
        out, w = ref.causal_self_attention(*(t.double() for t in case.tensors().values()), causal=causal)
    return out, w


def fmt(x: float) -> str:
    return f"{x:.4g}"
