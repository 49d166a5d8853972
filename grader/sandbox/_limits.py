"""Limits for one submission's isolated worker: the ``[limits]`` table of the rubric."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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
        default=64000,
        ge=1000,
        le=2**31 - 65536,
        description="As root, slot k runs as uid base+k or the next free uid (no passwd entry needed).",
    )
