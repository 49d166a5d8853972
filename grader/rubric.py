"""The rubric: points, visibility and limits as data, validated strictly.

Instructors change `rubrics/step4.toml` (or pass `--rubric FILE`) without touching code. Unknown
keys are rejected and every error names the file and the field.
"""

from __future__ import annotations

import tomllib
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from grader._paths import bundled
from grader.models import Visibility
from grader.sandbox._limits import SandboxLimits

# A pip requirement without options, URLs or shell syntax: a name, extras, a version specifier.
_VERSION = r"[<>=!~]=?[A-Za-z0-9.*+!_-]+"
_REQUIREMENT = rf"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?({_VERSION}(,{_VERSION})*)?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckRubric(_Strict):
    points: float = Field(ge=0, description="Points for passing this check.")
    visibility: Visibility = Field(default="visible", description="When students see this check's result.")
    extra_credit: bool = Field(default=False, description="Points count on top of the maximum score.")
    enabled: bool = Field(default=True, description="Run this check at all.")


class EntryPoints(_Strict):
    """Names the submission must define (change them for a renamed assignment)."""

    module: str = Field(default="attention_head", description="Module (file stem) holding the head.")
    causal_self_attention: str = Field(default="causal_self_attention", description="The head.")
    gaussian_positional_weights: str = Field(default="gaussian_positional_weights", description="Exercise 7 kernel.")
    gaussian_positional_qk: str = Field(default="gaussian_positional_qk", description="Exercise 7 queries/keys.")
    score_scale_statistics: str = Field(default="score_scale_statistics", description="Exercise 3 measurement.")
    streaming_attention: str = Field(default="streaming_attention", description="Optional: Aside 8.1.")
    KVCache: str = Field(default="KVCache", description="Optional: Section 8.1 cache class.")
    cached_attention_step: str = Field(default="cached_attention_step", description="Optional: Section 8.1 step.")


class GradebookRubric(_Strict):
    """How a batch's grades go to a gradebook (``grade batch``'s gradebook.csv, ``grade gradebook``): nothing here
    changes a grade, so changing it regrades nothing."""

    title: str = Field(default="", description="The assignment's column in the LMS (default: the rubric's name).")
    decimals: int = Field(default=2, ge=0, le=6, description="Digits after the point of an exported score.")
    extra_credit: Literal["keep", "cap"] = Field(
        default="keep",
        description='"keep": a score above the maximum (extra credit) is exported as it is; "cap": at the maximum.',
    )
    due: datetime | None = Field(
        default=None,
        description="The deadline (a TOML date-time; without an offset, UTC): a submission handed in after it is "
        "late in the export. None: nothing is late.",
    )


class Rubric(_Strict):
    name: str = Field(description="Shown in reports.")
    seed: int = Field(default=20417, description="Default base seed for every check.")
    entry_points: EntryPoints = Field(default_factory=EntryPoints, description="Names in the submission.")
    limits: SandboxLimits = Field(default_factory=SandboxLimits, description="Isolation limits.")
    forbidden_calls: list[str] = Field(
        default=[
            "torch.nn.functional.scaled_dot_product_attention",
            "torch.nn.functional.multi_head_attention_forward",
            "torch.nn.MultiheadAttention",
        ],
        description="Dotted names the head may not call (forbidden_api check).",
    )
    cuda: Literal["extra_credit", "excluded"] = Field(
        default="extra_credit", description="How the CUDA part of fused-kernel checking counts."
    )
    checks: dict[str, CheckRubric] = Field(description="Per-check points and visibility, in report order.")
    pending: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default={},
        description="Checks this edition does not run, with their points: the student kit's rubric lists the "
        "instructor's hidden checks here (grader/kit.py), graded on submission. Each is shown as pending, its points "
        "in the total and never in the score.",
    )
    mistakes: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default={},
        description="Prices of root causes (diagnosis ids) that override their defaults when the grade counts "
        "mistakes: a head whose failing checks are all explained by named causes loses each cause's price once, "
        "however many checks it breaks (never scoring below the per-check sum). Every cause carries a default "
        "price (grader/diagnosis/causes.toml, reference/chaffs/catalog.toml); a cause without any price is "
        "charged the points of the checks it explains.",
    )
    packages: list[Annotated[str, StringConstraints(pattern=_REQUIREMENT)]] = Field(
        default=[],
        description='Extra packages the course allows (pip requirements, e.g. "matplotlib>=3.8"): the Gradescope '
        "setup.sh installs them, `grade` warns when one is missing locally, and notebook imports of them are "
        "graded like torch's.",
    )

    gradebook: GradebookRubric = Field(
        default_factory=GradebookRubric, description="How grades are exported to a gradebook (changes no grade)."
    )

    @model_validator(mode="after")
    def _cuda_entry_agrees(self) -> Rubric:
        """The CUDA check's entry must say the same as ``cuda`` (one policy, stated twice, never split)."""
        entry = self.checks.get("fused_kernel_cuda")
        if entry is None:
            return self
        if self.cuda == "extra_credit" and entry.enabled and not entry.extra_credit:
            raise ValueError('checks.fused_kernel_cuda.extra_credit must be true when cuda = "extra_credit"')
        if self.cuda == "excluded" and entry.enabled:
            raise ValueError('checks.fused_kernel_cuda.enabled must be false when cuda = "excluded"')
        return self


class RubricError(ValueError):
    """A rubric file that cannot be used; the message names the file and field."""


def load_rubric(path: Path | None = None) -> Rubric:
    """Read and validate a rubric's schema (the bundled default when ``path`` is None); pydantic only.

    Whether its check ids and priced causes exist is a question for whoever loads the checks and the
    diagnosis too: :func:`grader.runner.checked_rubric` asks it.
    """
    path = path or bundled("rubrics") / "step4.toml"
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RubricError(f"{path}: {exc}") from None
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: invalid rubric"]
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"])
            lines.append(f"  {field}: {err['msg']}")
        raise RubricError("\n".join(lines)) from None
