"""Grader-side process cleanup: make sure nothing a submission started is still running.

Call :func:`kill_leftovers` with the pool's uids (``WorkerPool.uids``) before writing results, as a
final guarantee on top of ``Sandbox.close()``. It scans and kills until a scan comes back empty;
RLIMIT_NPROC on the sandbox uid bounds how many processes a fork bomb can hold at any moment. (The
zygote's own sweep uses ``kill(-1)`` from a forked helper; the grader never forks itself.)
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

import psutil

TOKEN_VAR = "STEP4_SANDBOX_TOKEN"


def kill_procs(procs: Iterable[psutil.Process]) -> int:
    """SIGKILL each process that is still running; returns how many were signalled."""
    n = 0
    for p in procs:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:  # already dead; its parent reaps it
                continue
            p.kill()  # psutil refuses if the pid was reused since the Process object was made
            n += 1
        except psutil.Error:
            pass
    return n


def processes_of(uids: Iterable[int] = (), token: str | None = None) -> list[psutil.Process]:
    """Live processes owned (real, effective or saved uid) by ``uids``, or carrying ``token`` in their env."""
    wanted = set(uids)
    found = []
    for p in psutil.process_iter(["uids", "status"]):
        if p.pid == os.getpid() or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        ids = p.info["uids"]
        owned = ids is not None and bool(wanted & {ids.real, ids.effective, ids.saved})
        if owned or (token is not None and _has_token(p, token)):
            found.append(p)
    return found


def _has_token(p: psutil.Process, token: str) -> bool:
    try:
        return p.environ().get(TOKEN_VAR) == token
    except psutil.Error:
        return False


def kill_leftovers(uids: Iterable[int] = (), token: str | None = None, *, rounds: int = 50) -> int:
    """Kill every process of ``uids`` (and every process carrying ``token``) until none is left.

    Returns how many were killed; raises RuntimeError if some survive ``rounds`` attempts, so the
    caller never writes results while student code still runs.
    """
    uids = list(uids)
    killed = 0
    for _ in range(rounds):
        survivors = processes_of(uids, token)
        if not survivors:
            return killed
        killed += kill_procs(survivors)
        time.sleep(0.01)
    raise RuntimeError(f"{len(processes_of(uids, token))} sandbox processes survived {rounds} kill rounds")


# How a Windows process ends when an exception (not an exit) ends it: its exit code is the NTSTATUS value.
NTSTATUS = {
    0xC0000005: "an access violation",
    0xC00000FD: "a stack overflow",
    0xC0000409: "a fail-fast (stack buffer overrun)",
    0xC0000017: "running out of memory",
    0xC000001D: "an illegal instruction",
    0xC0000094: "an integer division by zero",
    0xC000013A: "Ctrl-C",
    0x80000003: "a breakpoint",
}


def describe_exit(code: int | None) -> str:
    """'exited with code 3' / 'was killed by SIGSEGV (segmentation fault)' for a wait status code; on
    Windows, 'crashed with an access violation (0xC0000005)' for an exception's exit code."""
    if code is None:
        return "ended (exit status unknown)"
    if code >= 0x80000000 and (code in NTSTATUS or code >= 0xC0000000):
        what = NTSTATUS.get(code, "an exception")
        return f"crashed with {what} (0x{code:08X})"
    if code >= 0:
        return f"exited with code {code}"
    try:
        sig = signal.Signals(-code)
        return f"was killed by {sig.name} ({signal.strsignal(sig) or sig.name})"
    except ValueError:
        return f"was killed by signal {-code}"
