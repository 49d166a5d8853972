"""Run untrusted submissions in isolated, resource-limited worker processes.

    with WorkerPool(slots=4) as pool:
        with Sandbox(submission_dir, limits, pool=pool) as sandbox:
            reply = sandbox.request("call", params, tensors)   # Reply(status="ok" | "error" | ...)

The grader process never imports student code; it only ever receives plain tensors and JSON, size-
capped and pickle-free. See research/sandbox.md for the measurements behind each protection.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.sandbox._early import fork_supported
    from grader.sandbox._limits import SandboxLimits
    from grader.sandbox._output import CapturedOutput
    from grader.sandbox._pool import WorkerPool
    from grader.sandbox._reaper import kill_leftovers
    from grader.sandbox._sandbox import Reply, Sandbox, Status
    from grader.sandbox._slots import SlotError

# Exports resolve on first use, so that the limits and the pool can be imported (and a zygote started)
# before anything here imports torch: the grader's own torch import then overlaps the zygote's.
_EXPORTS = {
    "CapturedOutput": "_output",
    "Reply": "_sandbox",
    "Sandbox": "_sandbox",
    "SandboxLimits": "_limits",
    "SlotError": "_slots",
    "Status": "_sandbox",
    "WorkerPool": "_pool",
    "fork_supported": "_early",
    "kill_leftovers": "_reaper",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grader.sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(f"grader.sandbox.{_EXPORTS[name]}"), name)


__all__ = [
    "CapturedOutput",
    "Reply",
    "Sandbox",
    "SandboxLimits",
    "SlotError",
    "Status",
    "WorkerPool",
    "fork_supported",
    "kill_leftovers",
]
