"""A memory watchdog over a worker's process tree.

The only memory guard on macOS (no usable RLIMIT_DATA), and a backstop on Linux, where RLIMIT_DATA
is per process and a worker that forks could exceed the budget as a tree. Measured overshoot at a
50 ms poll is 5-9% (research/sandbox.md section 2).

RSS is cheap to read (~0.02 ms) but counts the pages every forked worker shares with the zygote once
per process; PSS splits shared pages fairly but costs ~1.3 ms per process. So RSS is the fast test
(PSS <= RSS), and PSS decides only once the RSS sum is over the limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psutil

from grader.sandbox._reaper import kill_procs

POLL_S = 0.05
REFRESH_EVERY = 4  # re-list the tree every 4 polls: listing reads every /proc/<pid>/stat (~1.5 ms)


class MemoryWatchdog:
    """Kills every process of the tree once their summed memory exceeds ``limit_bytes``."""

    def __init__(self, tree: Callable[[], list[psutil.Process]], limit_bytes: int) -> None:
        self._tree = tree
        self.limit_bytes = limit_bytes  # raised by the sandbox once it knows RLIMIT_DATA is active
        self._stop = threading.Event()
        self.used_bytes = 0  # the proportional set size that tripped the watchdog
        self.tripped = False
        self._thread = threading.Thread(target=self._run, name="sandbox-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        procs: list[psutil.Process] = []
        tick = 0
        while not self._stop.wait(POLL_S):
            if tick % REFRESH_EVERY == 0:
                procs = self._tree()
            tick += 1
            if sum(_rss(p) for p in procs) <= self.limit_bytes:
                continue
            procs = self._tree()  # a fresh, exact picture before killing anything
            used = sum(_pss(p) for p in procs)
            if used > self.limit_bytes:
                self.used_bytes = used
                self.tripped = True  # set before the kill, so whoever sees the death sees the reason
                kill_procs(procs)
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1.0)


def _rss(p: psutil.Process) -> int:
    try:
        return int(p.memory_info().rss)
    except (psutil.Error, OSError):  # exited since it was listed
        return 0


def _pss(p: psutil.Process) -> int:
    try:
        full = p.memory_full_info()
    except (psutil.Error, OSError):  # Wine: USS's NtQueryVirtualMemory(MemoryWorkingSetInformation) is missing
        return _rss(p)
    return int(getattr(full, "pss", full.uss))  # macOS has no PSS; USS is the closest
