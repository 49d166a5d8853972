"""Limits for one submission's isolated worker: the ``[limits]`` table of the rubric."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grader.sandbox._uids import DEFAULT_UID_BASE


class FunctionBudgetShare(BaseModel):
    """Each contract function's share of ``per_submission_timeout_s``, as a fraction of it.

    All calls of one function (by every check, the diagnosis and the report's pictures) draw on its share,
    so a function that hangs or crawls costs only the checks that call it. The shares sum to at most 1; the
    rest of the budget is the reserve for importing the submission and restarting workers (keep it at
    least ``import_timeout_s`` so that a slow import cannot starve a function). The submission's total
    budget stays the outer cap.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    causal_self_attention: float = Field(
        default=0.5, gt=0, le=1, description="The head, including timing, gradients and diagnosis probes."
    )
    gaussian_positional_weights: float = Field(default=0.08, gt=0, le=1, description="Exercise 7 kernel.")
    gaussian_positional_qk: float = Field(default=0.08, gt=0, le=1, description="Exercise 7 queries/keys.")
    score_scale_statistics: float = Field(default=0.1, gt=0, le=1, description="Exercise 3 measurement.")
    streaming_attention: float = Field(default=0.06, gt=0, le=1, description="Optional: Aside 8.1.")
    cached_attention_step: float = Field(
        default=0.06, gt=0, le=1, description="Optional: Section 8.1, the whole decode (KVCache included)."
    )

    @model_validator(mode="after")
    def _at_most_the_budget(self) -> FunctionBudgetShare:
        total = sum(self.model_dump().values())
        if total > 1 + 1e-9:
            raise ValueError(f"the shares sum to {total:g}; they are fractions of one budget and may sum to at most 1")
        return self

    def seconds(self, function: str, budget_s: float) -> float:
        """``function``'s share of a budget of ``budget_s`` seconds."""
        fraction: float = getattr(self, function)
        return fraction * budget_s


class SandboxLimits(BaseModel):
    """Time, memory and resource limits applied to the worker that runs a submission.

    Every limit that the platform cannot enforce is skipped, and the worker reports which
    protections were actually active (``Sandbox.protections``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_call_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="Wall-clock limit for one request; the worker is killed and restarted after it.",
    )
    per_submission_timeout_s: float = Field(
        default=180.0,
        gt=0,
        description="Total wall-clock time for importing and answering; later requests are refused.",
    )
    import_timeout_s: float = Field(default=20.0, gt=0, description="Wall-clock limit for importing the submission.")
    function_budget_share: FunctionBudgetShare = Field(
        default_factory=FunctionBudgetShare,
        description=(
            "Fraction of per_submission_timeout_s each contract function may use over all its calls; one call "
            "waits at most min(per_call_timeout_s, what is left of its share). A function that timed out is not "
            "called again on inputs at least as large. The shares sum to at most 1; the rest is for imports."
        ),
    )
    memory_mb: int = Field(
        default=2048,
        ge=256,
        description="Memory cap in MiB: RLIMIT_DATA per process where supported, and a watchdog on the tree.",
    )
    cpu_s: int = Field(
        default=300,
        ge=1,
        description="RLIMIT_CPU per worker process in seconds; a backstop behind the wall clock.",
    )
    file_size_mb: int = Field(default=16, ge=1, description="RLIMIT_FSIZE: largest file the worker may write, in MiB.")
    open_files: int = Field(default=64, ge=16, description="RLIMIT_NOFILE: most file descriptors open at once.")
    max_processes: int = Field(
        default=64,
        ge=8,
        description="RLIMIT_NPROC (processes and threads); enforced only when the worker has its own uid.",
    )
    output_cap_kb: int = Field(
        default=64, ge=1, description="Student stdout+stderr kept, in KiB; the rest is drained and dropped."
    )
    max_reply_mb: int = Field(default=64, ge=1, description="Largest reply accepted from the worker, in MiB.")
    threads: int = Field(default=1, ge=1, le=64, description="torch intra-op threads in the worker.")
    network: bool = Field(
        default=False,
        description="Allow network access; false blocks inet sockets where the platform allows it.",
    )
    sandbox_uid_base: int = Field(
        default=DEFAULT_UID_BASE,
        ge=1000,
        le=2**31 - 65536,
        description="As root, slot k runs as uid base+k or the next free uid (no passwd entry needed).",
    )
