"""Reads the grader's memory, environment and files; lists, writes and runs what it may."""

import os
import subprocess
import sys


def read_proc(pid=0, what="environ"):
    with open(f"/proc/{pid}/{what}", "rb") as f:
        return len(f.read(4096))


def read_file(path=""):
    with open(path, "rb") as f:
        return len(f.read())


def list_dir(path=""):
    return len(os.listdir(path))


def write_file(path=""):
    with open(path, "w") as f:
        return f.write("written by a submission")


def outcomes(paths=(), write=()):
    """For each path: "read" (or "listed"), or the exception's name; for each of ``write``: "written" or
    the exception's name. One string, "path=outcome" per line."""
    lines = []
    for path in paths:
        try:
            if os.path.isdir(path):
                os.listdir(path)
                lines.append(f"{path}=listed")
            else:
                with open(path, "rb") as f:
                    f.read(16)
                lines.append(f"{path}=read")
        except OSError as exc:
            lines.append(f"{path}={type(exc).__name__}")
    for path in write:
        try:
            with open(path, "a") as f:
                f.write("")
            lines.append(f"{path}=written")
        except OSError as exc:
            lines.append(f"{path}={type(exc).__name__}")
    return "\n".join(lines)


def list_names(path=""):
    return ",".join(sorted(os.listdir(path)))


def needed():
    """What a head must still reach: packages and the standard library, found afresh on the import path
    (as root, a Python in a root-only folder is reached through the fds the worker pinned)."""
    from importlib.machinery import PathFinder

    lines = []
    for name in ("torch", "numpy", "statistics", "json"):
        spec = PathFinder.find_spec(name)
        try:
            with open(spec.origin, "rb") as f:
                f.read(16)
            lines.append(f"{name}=read")
        except (OSError, AttributeError, TypeError) as exc:
            lines.append(f"{name}={type(exc).__name__}")
    import fractions  # noqa: F401  # not imported by the zygote: found and loaded now
    import sqlite3  # noqa: F401  # a C extension and its shared library

    return "\n".join(lines)


def run_python():
    """A subprocess: the interpreter itself must stay runnable (where its folder is reachable)."""
    done = subprocess.run([sys.executable, "-c", "import math; print(math.pi)"], capture_output=True, text=True)
    return done.stdout.strip()
