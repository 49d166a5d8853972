"""Wall-clock marks of one grade, read by ``benchmarks/grade_timeline.py``; nothing at all unless STEP4_TIMELINE is set.

Each mark appends one line, ``<unix time> <pid> <process> <event>``, to the file STEP4_TIMELINE names. The file is
opened for each line and appended to, so the grader, its zygote and its Windows standbys write one timeline between
them; the helpers get the path from :func:`helper_env` and drop it before any student code runs
(``sandbox/_zygote.py``). A mark costs one small write when on, one test of a string when off.
"""

from __future__ import annotations

import os
import time

VARIABLE = "STEP4_TIMELINE"
_PATH = os.environ.get(VARIABLE, "")


def mark(event: str, process: str = "grader") -> None:
    """Append ``event`` to the timeline, stamped now (a no-op without STEP4_TIMELINE)."""
    if not _PATH:
        return
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{time.time():.6f} {os.getpid()} {process} {event}\n".encode())
    finally:
        os.close(fd)


def helper_env() -> dict[str, str]:
    """What a zygote's or a standby's environment adds so that it marks the same timeline (empty when off)."""
    return {VARIABLE: _PATH} if _PATH else {}
