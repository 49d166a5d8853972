"""Grader-side process cleanup: make sure nothing a submission started is still running.

Call :func:`kill_leftovers` with the pool's uids (``WorkerPool.uids``) before writing results, as a
final guarantee on top of ``Sandbox.close()``. It scans and kills until a scan comes back empty;
RLIMIT_NPROC on the sandbox uid bounds how many processes a fork bomb can hold at any moment. (The
zygote's own sweep uses ``kill(-1)`` from a forked helper; the grader never forks itself.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
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
    if token is None:
        listed = _owned(wanted)
        if listed is not None:
            return listed
    found = []
    for p in psutil.process_iter(["uids", "status"]):
        if p.pid == os.getpid() or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        ids = p.info["uids"]
        owned = ids is not None and bool(wanted & {ids.real, ids.effective, ids.saved})
        if owned or (token is not None and _has_token(p, token)):
            found.append(p)
    return found


def _owned(wanted: set[int]) -> list[psutil.Process] | None:
    """:func:`processes_of` by uid alone, from one pass over ``/proc`` (None where there is none: psutil's
    listing then). psutil makes an object of every process and reads its stat and status files through its own
    layers (about 80 us a process: 6 ms a sweep of 74 processes, several sweeps a grade, more on a desktop);
    this reads each status file once and makes objects of the owned ones only, whose uids psutil then reads
    again, so that a pid reused between the pass and the object is never taken for a sandbox process."""
    if not wanted:
        return []
    pids = proc_pids()
    if pids is None:
        return None
    me, found = str(os.getpid()), []
    for name in pids:
        if name == me or not wanted & _status_uids(name):
            continue
        with contextlib.suppress(psutil.Error):  # exited since the pass
            p = psutil.Process(int(name))
            ids = p.uids()
            if wanted & {ids.real, ids.effective, ids.saved} and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
    return found


def _status_uids(pid: str) -> set[int]:
    """The real, effective and saved uids on ``/proc/<pid>/status``'s Uid line; none for a zombie or a process
    gone since the listing."""
    data = proc_file(pid, "status", 2048)  # the Uid line comes within the first few hundred bytes
    if data is None:
        return set()
    state = data.find(b"\nState:\t")
    if state >= 0 and data[state + 8 : state + 9] == b"Z":
        return set()
    at = data.find(b"\nUid:\t")
    if at < 0:
        return set()
    fields = data[at + 6 : data.find(b"\n", at + 1)].split()
    return {int(f) for f in fields[:3] if f.isdigit()}


def proc_pids() -> list[str] | None:
    """The pids listed in ``/proc`` (as its entries name them), or None where there is no ``/proc`` (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None


def proc_file(pid: str, name: str, size: int) -> bytes | None:
    """The first ``size`` bytes of ``/proc/<pid>/<name>`` in two system calls (not psutil's layers), or None once the
    process is gone."""
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY)
        try:
            return os.read(fd, size)
        finally:
            os.close(fd)
    except OSError:
        return None


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
