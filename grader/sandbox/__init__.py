"""Run untrusted submissions in isolated, resource-limited worker processes.

    with WorkerPool(slots=4) as pool:
        with Sandbox(submission_dir, limits, pool=pool) as sandbox:
            reply = sandbox.request("call", params, tensors)   # Reply(status="ok" | "error" | ...)

The grader process never imports student code; it only ever receives plain tensors and JSON, size-
capped and pickle-free. See research/sandbox.md for the measurements behind each protection.
"""

from grader.sandbox._limits import SandboxLimits
from grader.sandbox._output import CapturedOutput
from grader.sandbox._pool import WorkerPool
from grader.sandbox._reaper import kill_leftovers
from grader.sandbox._sandbox import Reply, Sandbox, Status
from grader.sandbox._slots import SlotError, fork_supported

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
