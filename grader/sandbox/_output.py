"""Student stdout/stderr: drained by grader threads, capped, never parsed.

The worker's fd 1 and 2 share one pipe (so prints and tracebacks interleave as on a terminal). A
thread reads it continuously, so a flood can never block the worker; the first ``cap`` bytes are
kept, the rest counted and dropped, and a short tail is kept for crash messages.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

_CHUNK = 1 << 16
TAIL_BYTES = 2048


@dataclass(frozen=True)
class CapturedOutput:
    """What a submission printed: the head of it, and how much was dropped."""

    text: str
    truncated: bool
    bytes_dropped: int


class OutputCollector:
    """Keeps the first ``cap_bytes`` of everything all of a sandbox's workers printed."""

    def __init__(self, cap_bytes: int) -> None:
        self._cap = cap_bytes
        self._head = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()

    def drain(self, fd: int) -> OutputDrain:
        """Start a thread reading ``fd`` (a pipe's read end, closed at EOF) into this collector."""
        return OutputDrain(fd, self)

    def _add(self, chunk: bytes) -> None:
        with self._lock:
            room = self._cap - len(self._head)
            self._head += chunk[: max(room, 0)]
            self._dropped += max(len(chunk) - max(room, 0), 0)

    def snapshot(self) -> CapturedOutput:
        with self._lock:
            text = self._head.decode("utf-8", errors="replace")
            return CapturedOutput(text=text, truncated=self._dropped > 0, bytes_dropped=self._dropped)


class OutputDrain:
    """One worker's output pipe, read to EOF by a daemon thread."""

    def __init__(self, fd: int, collector: OutputCollector) -> None:
        self._fd = fd
        self._collector = collector
        self._tail = bytearray()
        self._thread = threading.Thread(target=self._run, name="sandbox-output", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while chunk := os.read(self._fd, _CHUNK):
                self._collector._add(chunk)
                self._tail = (self._tail + chunk[-TAIL_BYTES:])[-TAIL_BYTES:]
        finally:
            os.close(self._fd)

    def finish(self, timeout: float) -> bool:
        """Wait for EOF (every writer dead); False if a writer is still alive after ``timeout``."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def tail(self) -> str:
        """The last bytes this worker printed, e.g. the traceback of a crash."""
        return bytes(self._tail).decode("utf-8", errors="replace")
