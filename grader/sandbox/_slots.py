"""Worker slots: where a sandbox's worker processes come from, and how they are cleaned up.

- ``ZygoteSlot`` (Linux): a warm zygote forks each worker in ~20-60 ms and sweeps its descendants.
- ``SpawnSlot`` (macOS, or ``STEP4_NO_FORK=1``): a fresh ``python -I`` worker each time (~2 s).

Both give a worker the same config, the same hardening and the same serve loop. A slot is used by
one sandbox at a time; the grader process itself is never forked.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Protocol

import psutil

from grader.sandbox._early import ENTRY, Started, clean_env, start_zygote
from grader.sandbox._reaper import TOKEN_VAR, kill_leftovers, kill_procs, proc_file, proc_pids, processes_of
from grader.sandbox._uids import UidLease

STARTUP_S = 180.0  # importing torch on a loaded half-vCPU container; not charged to the student
CONTROL_S = 30.0


class SlotError(RuntimeError):
    """The sandbox machinery itself failed (not the submission): the grader cannot run student code."""


def windows() -> bool:
    """Windows: workers are spawned ahead in Job Objects (grader/sandbox/_winslot.py)."""
    return sys.platform == "win32"


@dataclass
class WorkerHandle:
    """One running worker process."""

    pid: int
    pidfd: int | None  # readable once the worker has exited (Linux); None elsewhere
    popen: subprocess.Popen[bytes] | None = None
    token: str | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return self.pidfd is not None and not poll_in([self.pidfd], 0)

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def popen_exit_code(worker: WorkerHandle, timeout: float) -> int | None:
    """A spawned worker's exit code, waiting at most ``timeout`` for it; None while it runs."""
    assert worker.popen is not None
    try:
        return worker.popen.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def poll_in(fds: list[int], timeout: float) -> set[int]:
    """The fds among ``fds`` readable within ``timeout`` seconds (poll: no FD_SETSIZE cap, unlike select).
    Windows has no poll: select there, which takes sockets only (all a Windows worker's waits are on)."""
    if not hasattr(select, "poll"):
        readable, _, _ = select.select(fds, [], [], max(timeout, 0))
        return set(readable)
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return {fd for fd, _ in poller.poll(max(timeout, 0) * 1000)}


def poll_out(fd: int, timeout: float) -> bool:
    """Whether ``fd`` can take more bytes within ``timeout`` seconds (select on Windows, as poll_in)."""
    if not hasattr(select, "poll"):
        _, writable, _ = select.select([], [fd], [], max(timeout, 0))
        return bool(writable)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return bool(poller.poll(max(timeout, 0) * 1000))


def subtree(pid: int) -> list[psutil.Process]:
    """``pid`` and its descendants; empty once it is gone."""
    try:
        root = psutil.Process(pid)
        return [root, *_descendants(root)]
    except psutil.Error:
        return []


def _descendants(root: psutil.Process, exclude: Collection[int] = ()) -> list[psutil.Process]:
    """``root.children(recursive=True)``, less the subtrees of the pids in ``exclude``, from one pass over
    ``/proc`` on Linux. A memory watchdog lists its tree every 200 ms: psutil reads every process's stat file
    through its own layers (about 2 ms a listing of a hundred processes, more on a desktop; and the primary's
    watchdog needed a second one for a sidecar's subtree); this reads each once with two system calls."""
    parents = _parents()
    if parents is None:  # no /proc (macOS): psutil's listing
        listed = root.children(recursive=True)
        skip = {p.pid for p in listed if p.pid in exclude}
        for pid in list(skip):
            skip.update(p.pid for p in psutil.Process(pid).children(recursive=True))
        return [p for p in listed if p.pid not in skip]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    procs: list[psutil.Process] = []
    seen, level = {root.pid}, [root.pid]
    while level:  # breadth first, as psutil lists them; an excluded pid hides its whole subtree
        kept = []
        for pid in [c for parent in level for c in children.get(parent, ())]:
            if pid in exclude or pid in seen:  # a pid reused during the pass can make a cycle
                continue
            seen.add(pid)
            with contextlib.suppress(psutil.Error):  # exited since the pass
                child = psutil.Process(pid)
                if child.create_time() >= root.create_time():  # else a reused pid, older than the root
                    procs.append(child)
                    kept.append(pid)
        level = kept
    if not root.is_running():  # the root's pid was reused meanwhile: these are someone else's children
        return []
    return procs


def _parents() -> dict[int, int] | None:
    """Every process's parent pid, from ``/proc/<pid>/stat`` (None where there is no ``/proc``)."""
    names = proc_pids()
    if names is None:
        return None
    parents = {}
    for name in names:
        data = proc_file(name, "stat", 512)  # "pid (comm) state ppid ...": comm is at most 64 bytes
        if data is None:  # exited since the listing
            continue
        fields = data[data.rfind(b")") + 2 :].split(None, 2)  # comm may hold spaces and parentheses
        if len(fields) >= 2 and fields[1].isdigit():
            parents[int(name)] = int(fields[1])
    return parents


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):  # not Linux, or already gone
        return None


class Slot(Protocol):
    uid: int | None

    def launch(self, cfg: dict[str, Any], chan_fd: int, out_fd: int) -> WorkerHandle: ...
    def exit_code(self, worker: WorkerHandle, timeout: float) -> int | None: ...
    def sweep(self, worker: WorkerHandle | None) -> int | None: ...
    def tree(self, worker: WorkerHandle, exclude: Collection[int] = ()) -> list[psutil.Process]: ...
    def protections(self) -> list[str]: ...
    def close(self) -> None: ...


@dataclass
class ZygoteSlot:
    """A warm zygote process and the uid its workers run as."""

    lease: UidLease | None
    uid: int | None = field(init=False, default=None)
    eager: bool = True  # start the zygote now (in parallel with others), or on first use
    tests: bool = True  # its workers may run a student's tests: the zygote imports pytest for them
    _proc: subprocess.Popen[bytes] | None = None
    _ctl: socket.socket | None = None
    _info: dict[str, Any] = field(default_factory=dict)
    _closed: bool = False
    _exit_sent: bool = False
    # the control socket carries one request and its answer at a time; a sandbox and its sidecar (another
    # thread) share the slot
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.uid = self.lease.uid if self.lease else None
        if self.eager:
            self.start()

    def start(self, started: Started | None = None) -> None:
        """Start the zygote without waiting for it (torch imports in parallel across slots), or adopt one
        ``started`` ahead (``grade`` starts its first before importing the pool: ``grader/sandbox/_early.py``)."""
        started = started or start_zygote(tests=self.tests)
        self.tests = started.tests
        self._proc, self._ctl = started.proc, started.ctl
        self._info = {}
        self._exit_sent = False

    def _ready(self) -> None:
        if self._closed or self._exit_sent:
            raise SlotError("the worker pool was closed while a sandbox still used it")
        if self._proc is None or self._proc.poll() is not None:
            self._kill_zygote()
            self.start()
        if self._info:
            return
        info = self._receive(STARTUP_S)
        if info.get("status") != "ready":
            raise self._fail(f"zygote failed to start: {info}")
        if info["threads"] != 1:  # forking a multi-threaded torch process can hang its children
            raise self._fail(f"zygote runs {info['threads']} threads after warm-up; refusing to fork it")
        self._info = info

    def launch(self, cfg: dict[str, Any], chan_fd: int, out_fd: int) -> WorkerHandle:
        with self._lock:
            self._ready()
            reply = self._call({"op": "spawn", "config": cfg}, fds=(chan_fd, out_fd))
        return WorkerHandle(pid=reply["pid"], pidfd=_pidfd(reply["pid"]))

    def exit_code(self, worker: WorkerHandle, timeout: float) -> int | None:
        return self._call({"op": "status", "pid": worker.pid, "timeout": timeout}, timeout=timeout + CONTROL_S)["exit"]

    def sweep(self, worker: WorkerHandle | None) -> int | None:
        if not self._info:  # never started a worker, or the zygote was replaced: nothing to sweep
            return None
        pid = worker.pid if worker else None
        return self._call({"op": "sweep", "uid": self.uid, "pid": pid})["exit"]

    def stop_one(self, worker: WorkerHandle) -> int | None:
        """Kill one worker and its descendants, leaving the slot's other workers running (a sidecar's
        stop; the sweep of the sandbox that owns the slot gets everything else); its exit code."""
        if not self._info:
            return None
        return self._call({"op": "stop", "pid": worker.pid, "timeout": CONTROL_S}, timeout=2 * CONTROL_S)["exit"]

    def tree(self, worker: WorkerHandle, exclude: Collection[int] = ()) -> list[psutil.Process]:
        """Every process under the zygote (daemons reparent to it), less the subtrees of the workers in
        ``exclude`` (a sidecar's, whose memory its own watchdog counts)."""
        try:
            return _descendants(psutil.Process(self._info["pid"]), exclude)  # live children of ours: no reused pids
        except (psutil.Error, KeyError):
            return []

    def protections(self) -> list[str]:
        active = ["subreaper cleanup"] if self._info.get("subreaper") else []
        return active + (["kill(-1) as sandbox uid"] if self.uid is not None else [])

    def begin_close(self) -> None:
        """Ask the zygote to sweep and exit, without waiting (``close`` collects it): its exit then
        overlaps whatever the grader does next. Only once no sandbox uses this slot."""
        with self._lock:
            if self._closed or self._exit_sent or not self._info or self._proc is None or self._proc.poll() is not None:
                return
            with contextlib.suppress(SlotError):
                self._send({"op": "exit"})
                self._exit_sent = True

    def close(self) -> None:
        self._closed = True
        try:
            if self._info and self._proc is not None and self._proc.poll() is None:
                if self._exit_sent:
                    with self._lock:
                        self._receive(10)
                else:
                    self._call({"op": "exit"}, timeout=10)
                self._proc.wait(10)
        except (SlotError, subprocess.TimeoutExpired):
            pass
        finally:
            self._kill_zygote()
            if self.lease:
                self.lease.release()

    # -- control socket ------------------------------------------------------------------------

    def _call(self, message: dict[str, Any], fds: tuple[int, ...] = (), timeout: float = CONTROL_S) -> dict[str, Any]:
        with self._lock:
            self._send(message, fds)
            return self._receive(timeout)

    def _send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        if self._ctl is None:
            raise SlotError("the zygote is gone")
        try:
            socket.send_fds(self._ctl, [json.dumps(message).encode()], list(fds))
        except OSError as exc:
            raise self._fail(f"zygote unreachable: {exc}") from None

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self._ctl is not None
        if not poll_in([self._ctl.fileno()], timeout):
            raise self._fail(f"zygote did not answer within {timeout:.0f} s")
        data = self._ctl.recv(1 << 16)
        if not data:
            raise self._fail("zygote exited unexpectedly")
        reply: dict[str, Any] = json.loads(data)
        if "error" in reply:
            raise self._fail(reply["error"])
        return reply

    def _fail(self, reason: str) -> SlotError:
        """Kill the broken zygote (the next launch starts a fresh one) and describe the failure."""
        self._kill_zygote()
        return SlotError(reason)

    def _kill_zygote(self) -> None:
        if self._proc is not None:
            try:
                root = psutil.Process(self._proc.pid)
                kill_procs(root.children(recursive=True) + [root])
            except psutil.Error:
                pass
            self._proc.wait()
            self._proc = None
        if self.uid is not None:
            kill_leftovers([self.uid])
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        self._info = {}


@dataclass
class SpawnSlot:
    """Fresh ``python -I`` workers; cleanup by process tree, environment token and (root) uid."""

    lease: UidLease | None
    uid: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.uid = self.lease.uid if self.lease else None

    def launch(self, cfg: dict[str, Any], chan_fd: int, out_fd: int) -> WorkerHandle:
        token = secrets.token_hex(16)
        # PR_SET_PDEATHSIG fires when the creating *thread* exits, so only ask for it from the main thread
        main = threading.current_thread() is threading.main_thread()
        cfg = {**cfg, "pdeathsig": main, "expected_ppid": os.getpid()}
        popen = subprocess.Popen(
            [sys.executable, "-I", str(ENTRY), "--worker", str(chan_fd), json.dumps(cfg)],
            pass_fds=(chan_fd,),
            stdin=subprocess.DEVNULL,
            stdout=out_fd,
            stderr=out_fd,
            env=clean_env({TOKEN_VAR: token}),
            cwd="/",
        )
        return WorkerHandle(pid=popen.pid, pidfd=_pidfd(popen.pid), popen=popen, token=token)

    def exit_code(self, worker: WorkerHandle, timeout: float) -> int | None:
        return popen_exit_code(worker, timeout)

    def sweep(self, worker: WorkerHandle | None) -> int | None:
        if worker is None:
            return None
        uids = [self.uid] if self.uid is not None else []
        for _ in range(50):
            if not kill_procs(self.tree(worker) + processes_of(uids, worker.token)):
                break
        assert worker.popen is not None
        return worker.popen.wait()

    def tree(self, worker: WorkerHandle, exclude: Collection[int] = ()) -> list[psutil.Process]:
        return subtree(worker.pid)  # one worker at a time: nothing to exclude

    def protections(self) -> list[str]:
        active = ["process-tree and environment-token cleanup"]
        return active + (["cleanup of every sandbox-uid process"] if self.uid is not None else [])

    def close(self) -> None:
        if self.lease:
            self.lease.release()
