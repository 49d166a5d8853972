"""Windows worker slots: spawned workers started ahead, each in its own Job Object.

Windows has no fork, and ``spawn`` is its only way to start a process. So a slot keeps one *standby*
worker started ahead, as a zygote is on Linux: a fresh ``python -I -X utf8 _zygote.py --standby`` that has
already imported torch and warmed up, and waits on a loopback connection for its configuration. A sandbox
that launches a worker takes the standby (the submission is imported at once). A slot with ``spares`` (a pool
that grades again: --watch, a batch, a notebook's check(); a student's suite, run on the head and then on each
known bug: ``WorkerPool.keep_spares``) starts the next standby behind it, at a low priority, so that the next
worker, or a restart after a timeout or a crash, finds one ready. A one-shot grade's slot does
not: that standby's torch import (seconds of CPU, a third import on two cores) would run beside the checks for
nothing. Once one of its workers is lost to a timeout or a crash (:meth:`WindowsSlot.worker_lost`), it starts
one at once and keeps spares from then on: that first restart waits for a cold spawn (the standby's torch
import: a few seconds on Windows, 5 to 15 s under Wine; not charged to the student's time budget), a second
finds one ready.

The channel is a TCP connection on 127.0.0.1 (Windows' ``socketpair`` is one too), authenticated by a
random token the standby reads from its stdin (never its command line or environment), carrying the same
length-prefixed, pickle-free ``_wire`` frames as on Linux, with Nagle's algorithm off at both ends (a frame
is two sends: with it, every round trip waited for a delayed ACK). Output goes through a pipe of its own.

Each standby runs in its own Job Object (``_winjob``), assigned before it runs any code of the student's:
the whole tree is killed by ``TerminateJobObject`` (the per-call watchdog, a sweep, a cancelled grade), and
by the kernel if the grader dies (kill-on-close). Memory is capped per process by the job, and the tree by
the grader's memory watchdog over the job's process list.

Imported only on Windows.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import psutil

from grader._timeline import helper_env
from grader.sandbox._framing import send_frame
from grader.sandbox._slots import ENTRY, STARTUP_S, SlotError, WorkerHandle, poll_in, popen_exit_code
from grader.sandbox._winjob import CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, Job, JobError
from grader.sandbox._zygote import NO_TESTS, STANDBY

TOKEN_BYTES = 32
_MIB = 1 << 20
_ACCEPT_SLICE_S = 0.1

# What Linux gives a worker that Windows does not, stated in every Windows result (absent_protections).
ABSENT_ON_WINDOWS = (
    "seccomp filter (network sockets and ptrace are not blocked)",
    "Landlock or a mount namespace (the worker may read what the user may: file permissions only)",
    "a sandbox uid (the worker runs as the user)",
    "network and IPC namespaces",
    "rlimits on CPU time, file size and open files (the wall clock and the Job Object bound it instead)",
    "fork from a warm zygote (workers are spawned ahead instead)",
)

_PASSED_VARIABLES = (
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "PROCESSOR_IDENTIFIER",
    "KMP_AFFINITY",  # Wine's OpenMP needs it (see shared/windows); harmless on Windows
    # oneDNN's instruction-set cap: Wine 8 does not enable AMX's tile state, so on such a CPU torch's JIT kernels die of
    # an illegal instruction unless it is capped (the Windows tier sets it; README, "On Windows"); no secret in it
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
)


def windows_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A worker's environment on Windows: none of the grader's variables, but what Windows itself needs
    (without SYSTEMROOT a Windows Python cannot even open a socket)."""
    env = {k: os.environ[k] for k in _PASSED_VARIABLES if k in os.environ}
    root = env.get("SYSTEMROOT", r"C:\Windows")
    env["PATH"] = os.pathsep.join([os.path.join(root, "System32"), root, os.path.dirname(sys.executable)])
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONUTF8="1")
    return {**env, **(extra or {})}


@dataclass
class _Standby:
    popen: subprocess.Popen[bytes]
    job: Job
    out_r: int
    token: bytes
    started: float = field(default_factory=time.monotonic)


@dataclass
class WindowsSlot:
    """One standby worker started ahead, and the jobs of the workers it has lent out."""

    lease: None = None  # no uid leases on Windows
    uid: int | None = field(init=False, default=None)
    eager: bool = True
    tests: bool = True  # its workers may run a student's tests: the standby imports pytest for them
    spares: bool = True  # start the next standby behind each worker lent (see the module's docstring)
    _listener: socket.socket | None = None
    _standby: _Standby | None = None
    _running: dict[int, tuple[subprocess.Popen[bytes], Job]] = field(default_factory=dict)
    _limits_seen: dict[str, int] = field(default_factory=dict)
    _closed: bool = False
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        if self.eager:
            self.start()

    # -- the standby ---------------------------------------------------------------------------

    def start(self, *, background: bool = False) -> None:
        """Start a standby now if none is waiting (its torch import runs while the grader goes on)."""
        with self._lock:
            if self._closed or self._standby is not None:
                return
            self._standby = self._spawn(background)

    def _spawn(self, background: bool) -> _Standby:
        """A new standby (under the lock); the slot's listening socket is made with the first one (a lazy
        slot's first standby is spawned by its first launch)."""
        if self._listener is None:
            self._listener = socket.create_server(("127.0.0.1", 0), backlog=8)
        host, port = self._listener.getsockname()[:2]
        token = secrets.token_bytes(TOKEN_BYTES)
        out_r, out_w = os.pipe()
        flags = [] if self.tests else [NO_TESTS]
        job = Job()
        try:
            popen = subprocess.Popen(
                [sys.executable, "-I", "-X", "utf8", str(ENTRY), STANDBY, host, str(port), *flags],
                stdin=subprocess.PIPE,
                stdout=out_w,
                stderr=out_w,
                env=windows_env(helper_env()),
                cwd=tempfile.gettempdir(),
                creationflags=CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW,  # the student's Ctrl-C is the grader's
            )
        except BaseException:
            os.close(out_r)
            job.close()
            raise
        finally:
            os.close(out_w)
        try:
            job.assign(int(popen._handle))  # type: ignore[attr-defined]  # before it can start anything
            assert popen.stdin is not None
            popen.stdin.write(token)
            popen.stdin.close()
            if background:  # the next standby must not slow the grade in flight
                with contextlib.suppress(psutil.Error):
                    psutil.Process(popen.pid).nice(psutil.BELOW_NORMAL_PRIORITY_CLASS)  # type: ignore[attr-defined]
        except BaseException:
            job.close()
            popen.wait()
            os.close(out_r)
            raise
        return _Standby(popen, job, out_r, token)

    def _accept(self, standby: _Standby) -> socket.socket:
        """The standby's connection, once it has imported torch and proved it holds the token."""
        assert self._listener is not None
        deadline = standby.started + STARTUP_S
        while time.monotonic() < deadline:
            if standby.popen.poll() is not None:
                raise SlotError(f"the standby worker exited with code {standby.popen.returncode} before it was ready")
            if not poll_in([self._listener.fileno()], _ACCEPT_SLICE_S):
                continue
            conn, _ = self._listener.accept()
            conn.settimeout(5.0)
            try:
                got = b""
                while len(got) < TOKEN_BYTES and (chunk := conn.recv(TOKEN_BYTES - len(got))):
                    got += chunk
            except OSError:
                got = b""
            if secrets.compare_digest(got, standby.token):
                conn.settimeout(None)
                # a frame is two sends (length, then body): with Nagle's algorithm and delayed ACKs each round
                # trip waits ~90 ms under Wine (200 ms is Windows' delayed-ACK timer), 0.7 ms without
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return conn
            conn.close()  # someone else on this machine connected: not our worker
        raise SlotError(f"the standby worker was not ready within {STARTUP_S:.0f} s")

    # -- the Slot protocol ---------------------------------------------------------------------

    def open_worker(self, cfg: dict[str, Any]) -> tuple[WorkerHandle, socket.socket, int]:
        """Lend the standby to a sandbox: (worker, its channel, the read end of its output pipe)."""
        with self._lock:
            if self._closed:
                raise SlotError("the worker pool was closed while a sandbox still used it")
            if self._standby is None:
                self._standby = self._spawn(background=False)
            standby, self._standby = self._standby, None
        try:
            with contextlib.suppress(psutil.Error):
                psutil.Process(standby.popen.pid).nice(psutil.NORMAL_PRIORITY_CLASS)  # type: ignore[attr-defined]
            limits = cfg["limits"]
            standby.job.limit(memory_bytes=int(limits["memory_mb"]) * _MIB, max_processes=int(limits["max_processes"]))
            self._limits_seen = standby.job.limits()
            conn = self._accept(standby)
            send_frame(conn, json.dumps(cfg).encode())
        except (OSError, SlotError) as exc:
            standby.job.close()
            standby.popen.wait()
            os.close(standby.out_r)
            raise exc if isinstance(exc, SlotError) else SlotError(f"the worker could not be started: {exc}") from None
        with self._lock:
            self._running[standby.popen.pid] = (standby.popen, standby.job)
        if self.spares:
            threading.Thread(target=self._next_standby, name="sandbox-standby", daemon=True).start()
        worker = WorkerHandle(pid=standby.popen.pid, pidfd=None, popen=standby.popen)
        return worker, conn, standby.out_r

    def _next_standby(self) -> None:
        with contextlib.suppress(Exception):  # the next launch starts one itself if this failed
            self.start(background=True)

    def worker_lost(self) -> None:
        """A lent worker was killed after a timeout or a crash, and the sandbox's next request will want
        another: start it now (its torch import overlaps the rest of that check), and keep spares from now on,
        so that a second loss restarts fast."""
        self.spares = True
        with contextlib.suppress(Exception):  # the next launch starts one itself if this failed
            self.start()

    def launch(self, cfg: dict[str, Any], chan_fd: int, out_fd: int) -> WorkerHandle:
        raise SlotError("Windows workers bring their own channel: use open_worker")

    def exit_code(self, worker: WorkerHandle, timeout: float) -> int | None:
        return popen_exit_code(worker, timeout)

    def sweep(self, worker: WorkerHandle | None) -> int | None:
        """Kill the worker's whole job (every process it started, wherever it was reparented); None:
        every lent worker's (a cancelled grade)."""
        with self._lock:
            if worker is None:
                running = list(self._running.items())
                self._running.clear()
            else:
                entry = self._running.pop(worker.pid, None)
                running = [(worker.pid, entry)] if entry else []
        code = None
        for _pid, (popen, job) in running:
            job.terminate(1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = popen.wait(10)
            job.close()
        if worker is not None and worker.popen is not None:
            code = worker.popen.poll()
        return code

    def tree(self, worker: WorkerHandle, exclude: Collection[int] = ()) -> list[psutil.Process]:
        """Every live process of the worker's job (a daemon stays in it wherever it was reparented)."""
        with self._lock:
            entry = self._running.get(worker.pid)
        pids = entry[1].pids() if entry else []
        if not pids and worker.popen is not None and worker.popen.poll() is None:
            pids = [worker.pid]
        procs = []
        for pid in pids:
            if pid in exclude:
                continue
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(pid))
        return procs

    def protections(self) -> list[str]:
        seen = self._limits_seen
        flags = seen.get("flags", 0)
        active = ["Job Object per worker: the whole tree killed with it (kill on close)"]
        if flags & 0x100:
            active.append(f"Job Object memory limit {seen['process_memory'] // _MIB} MiB per process")
        if flags & 0x8:
            active.append(f"Job Object at most {seen['active_processes']} processes")
        if flags & 0x400:
            active.append("crash ends the process (no error dialog)")
        return active + ["spawned worker started ahead"]

    @property
    def absent(self) -> tuple[str, ...]:
        """The Linux sandbox's protections that no Windows worker has."""
        return ABSENT_ON_WINDOWS

    def close(self) -> None:
        with self._lock:
            self._closed = True
            standby, self._standby = self._standby, None
            running = list(self._running.values())
            self._running.clear()
        if standby is not None:
            standby.job.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                standby.popen.wait(10)
            os.close(standby.out_r)
        for popen, job in running:
            job.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(10)
        if self._listener is not None:
            self._listener.close()
            self._listener = None


def check_available() -> None:
    """Raise JobError where Job Objects cannot be made (what every Windows worker relies on)."""
    Job().close()


__all__ = ["ABSENT_ON_WINDOWS", "JobError", "WindowsSlot", "check_available", "windows_env"]
