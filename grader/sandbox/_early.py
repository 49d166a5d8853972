"""Start a zygote's process before the grader imports anything else (issue 37).

A cold grade waits for two torch imports, the grader's and its zygote's, one core each on two. The zygote's
began only once the pool's modules were imported (psutil, the slots, the uid leases: about 25 ms of a quiet
machine's CPU, twice that loaded); this module imports nothing but the standard library's process and socket
modules, so ``grade`` can start the zygote first of all and hand it to its pool (``WorkerPool.prestart``).
A process started here and never adopted is stopped by :meth:`Started.discard`; the zygote also exits on its
own once its control socket closes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass

from grader._timeline import helper_env

ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zygote.py")
NO_TESTS = "--no-tests"  # _zygote.py's flag (that file imports nothing of grader): its workers run no tests


def fork_supported() -> bool:
    """Fork from a warm zygote only where that is safe: Linux, unless STEP4_NO_FORK=1."""
    return sys.platform.startswith("linux") and os.environ.get("STEP4_NO_FORK", "") != "1"


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of helper processes: none of the grader's variables (tokens, paths) leak."""
    env = {
        "PATH": os.defpath,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # OpenMP/BLAS pools must not exist before a fork (research/sandbox.md section 4)
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }
    return {**env, **(extra or {})}


@dataclass
class Started:
    """A zygote's process, running, and the grader's end of its control socket."""

    proc: subprocess.Popen[bytes]
    ctl: socket.socket
    tests: bool

    def discard(self) -> None:
        """Stop it (it was never adopted by a slot): nothing of it is left running."""
        self.ctl.close()
        self.proc.kill()
        self.proc.wait()


def start_zygote(*, tests: bool) -> Started:
    """Start a zygote without waiting for it (its torch import runs while the caller goes on).
    ``tests=False``: its workers will never run a student's tests, so it does not import pytest."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    flags = [] if tests else [NO_TESTS]
    with theirs:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", ENTRY, "--zygote", str(theirs.fileno()), *flags],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=clean_env(helper_env()),
                cwd="/",
                start_new_session=True,  # a Ctrl-C aimed at the grader must not kill it mid-sweep
            )
        except BaseException:
            ours.close()
            raise
    return Started(proc, ours, tests)


def start_early(*, tests: bool) -> Started | None:
    """:func:`start_zygote` where the pool will fork from a zygote (Linux), else None; an error starting it is
    left for the pool to meet and report, as it would without this head start."""
    if not fork_supported():
        return None
    try:
        return start_zygote(tests=tests)
    except OSError:
        return None
