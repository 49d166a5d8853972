"""Processes a test saw start, and whether they outlived what should have ended them (the watch, a kernel)."""

from __future__ import annotations

import time

import psutil


def alive(pid: int, created: float) -> bool:
    """Whether ``pid`` is still the process created at ``created`` (not a reused pid), and not a zombie."""
    try:
        p = psutil.Process(pid)
        return p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def survivors(seen: dict[int, float], timeout: float) -> list[int]:
    """Processes of ``seen`` (pid -> create time) still running, after waiting for them at most ``timeout``
    (a parent reaps asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        running = [pid for pid, created in seen.items() if alive(pid, created)]
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.1)


def windows_pythons(*markers: str) -> list[str]:
    """Processes of the Windows Python (under Wine, each is a Linux process named by its .exe) whose command
    line holds the worker's entry point or one of ``markers``: none may outlive a grade there."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if "python.exe" in cmd and any(m in cmd for m in ("_zygote.py", *markers)):
            found.append(f"{p.pid}: {cmd[:200]}")
    return found
