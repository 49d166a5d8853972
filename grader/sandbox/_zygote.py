"""Entry point of the sandbox's helper processes; never imports ``grader``.

    python -I _zygote.py --zygote CTL_FD [--no-tests]   warm zygote: forks workers on request (Linux)
    python -I _zygote.py --worker CHAN_FD CONFIG        one fresh worker (macOS, STEP4_NO_FORK=1)
    python -I -X utf8 _zygote.py --standby HOST PORT [--no-tests]
                                                       Windows: a worker started ahead (see _winslot)

The zygote imports torch once with one thread, warms it up, and then forks one worker per request
received on its control socket (SOCK_SEQPACKET, one JSON message per packet, the worker's channel and
output pipe attached with SCM_RIGHTS). It is a child subreaper, so daemons started by a worker
reparent to it and a sweep can kill them all. It holds no secret: it never saw the grader's memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any, NoReturn

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHILD_MODULES = frozenset(
    {"_child", "_crashfilter", "_filesystem", "_framing", "_harden", "_seccomp", "_wire", "_ops"}
)
_CHANNEL_FD = 3
_PR_SET_CHILD_SUBREAPER = 36
_POLL_S = 0.05
NO_TESTS = "--no-tests"  # its workers never run a student's tests: no pytest import
STANDBY = "--standby"  # Windows: warm up, connect to the grader, then wait for this worker's config
_TOKEN_BYTES = 32
_MAX_EXITS = 256
_timeline = ""  # benchmarks/grade_timeline.py: the file STEP4_TIMELINE named (grader/_timeline.py); no worker's


def _mark(event: str, process: str) -> None:
    """One line of the grade's timeline (grader/_timeline.py: this file never imports grader)."""
    if not _timeline:
        return
    fd = os.open(_timeline, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{time.time():.6f} {os.getpid()} {process} {event}\n".encode())
    finally:
        os.close(fd)


class _Bootstrap(importlib.abc.MetaPathFinder):
    """Serves the worker-side modules of this directory by name; nothing else from it is importable."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in _CHILD_MODULES:
            return importlib.util.spec_from_file_location(fullname, os.path.join(_HERE, fullname + ".py"))
        return None


# ----------------------------------------------------------------------------------------------
# the worker (both modes)


def worker_main(chan_fd: int | socket.socket, out_fd: int | None, cfg: dict[str, Any], mode: str) -> NoReturn:
    """Harden, import the submission and serve; always ends the process, never returns."""
    global _timeline
    _timeline = ""  # the student's code is not told where the grader's timeline is
    code = 70
    try:
        code = _run_worker(chan_fd, out_fd, cfg, mode)
    except SystemExit as exc:  # student code called sys.exit(): the grader reports the code
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt as exc:  # raised by student code: show the student's frames only
        _child = sys.modules.get("_child")
        print(_child.student_traceback(exc, cfg["src_dir"]) if _child else repr(exc), file=sys.stderr)
        code = 1
    except BaseException:  # a failure of ours: leave the whole traceback in the output
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)  # in a fork of the zygote, returning would run the zygote's loop


def _run_worker(chan_fd: int | socket.socket, out_fd: int | None, cfg: dict[str, Any], mode: str) -> int:
    if isinstance(chan_fd, socket.socket):  # Windows: a connected channel, stdout/stderr already the pipe
        return _serve_windows(chan_fd, cfg, mode)
    if out_fd is not None:  # forked: point stdout/stderr at this worker's own output pipe
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # input() gets EOF instead of the grader's terminal
    if chan_fd != _CHANNEL_FD:
        os.dup2(chan_fd, _CHANNEL_FD)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # student prints arrive promptly
    sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    import _child  # type: ignore[import-not-found]
    import _harden  # type: ignore[import-not-found]

    ops = _load_ops(cfg.get("ops_path"))  # grader code: loaded while its file is surely still readable
    protections = _harden.harden(_CHANNEL_FD, cfg)
    faulthandler.enable(all_threads=False)  # a segfault leaves the crashing thread's traceback in the captured output
    protections += [mode, "isolated imports"] + _torch_settings(cfg["limits"])
    sock = socket.socket(fileno=_CHANNEL_FD)
    return int(
        _child.serve(
            sock,
            cfg["src_dir"],
            cfg["limits"],
            module_name=cfg["module"],
            ops=ops,
            protections=protections,
            secrets=cfg.get("secret_paths", []),
        )
    )


def _serve_windows(sock: socket.socket, cfg: dict[str, Any], mode: str) -> int:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # input() gets EOF (stdin was the token's pipe)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):  # a student's non-ASCII print never fails on a code page
        stream.reconfigure(encoding="utf-8", errors="backslashreplace", line_buffering=True)  # type: ignore[union-attr]
    import _child  # type: ignore[import-not-found]
    import _harden  # type: ignore[import-not-found]

    ops = _load_ops(cfg.get("ops_path"))
    faulthandler.enable(all_threads=False)  # an access violation leaves the crashing thread's traceback in the output
    protections = _harden.harden(None, cfg)  # after faulthandler: its exception filter must stay the last word
    protections += [mode, "isolated imports"] + _torch_settings(cfg["limits"])
    return int(
        _child.serve(
            sock,
            cfg["src_dir"],
            cfg["limits"],
            module_name=cfg["module"],
            ops=ops,
            protections=protections,
            secrets=cfg.get("secret_paths", []),
        )
    )


def _standby_main(host: str, port: int, tests: bool) -> NoReturn:
    """Windows: import and warm up torch with nothing printed, connect to the grader with the token it
    wrote on our stdin, and become the worker its config (the first frame) describes."""
    token = sys.stdin.buffer.read(_TOKEN_BYTES)
    _mark("started", "standby")
    # a crash while warming up (torch's import) ends the standby at once, as a worker's crash does: the grader
    # sees it exit instead of waiting out STARTUP_S for a process held by a debugger (Wine starts one)
    with contextlib.suppress(Exception):
        __import__("_crashfilter").crash_ends_the_process()
    saved = os.dup(1), os.dup(2)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # the warm-up's warnings are not the student's output
    os.dup2(quiet, 2)
    try:
        _warm_up(tests)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, quiet):
            os.close(fd)
    import _framing  # type: ignore[import-not-found]

    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # replies are two sends each (see _winslot)
    sock.sendall(token)
    _mark("warmed up, waiting", "standby")
    blob = _framing.recv_frame(sock, 1 << 24)
    if blob is None:  # the grader closed the slot without lending this worker
        os._exit(0)
    _mark("lent out", "standby")
    worker_main(sock, None, json.loads(blob), "spawned ahead (Windows)")


def _torch_settings(limits: dict[str, Any]) -> list[str]:
    import torch

    torch.set_num_threads(int(limits["threads"]))
    _deterministic(torch)
    return [f"torch threads {limits['threads']}", "deterministic torch"]


def _deterministic(torch: Any) -> None:
    """Deterministic mode, warn-only: on CPU it raises for nothing a head uses; its useful effect is
    that torch.empty is filled with NaN, so reading uninitialised memory fails every time, not by luck.

    The public ``torch.use_deterministic_algorithms`` also imports torch._inductor (about 2 s per
    fresh interpreter); the C setter it wraps does the part that matters for eager CPU code.
    """
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is not None:
        setter(True, warn_only=True)
    else:
        torch.use_deterministic_algorithms(True, warn_only=True)


def _load_ops(path: str | None) -> Any:
    """The request handlers: ``_ops.py`` beside this file unless the grader named another file."""
    default = os.path.join(_HERE, "_ops.py")
    if (path is None or os.path.abspath(path) == default) and "_ops" in sys.modules:
        return sys.modules["_ops"]
    spec = importlib.util.spec_from_file_location("_ops", path or default)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_ops"] = module
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------------------------
# the zygote


def _warm_up(tests: bool) -> int:
    """Import torch with one thread and run the kinds of ops workers run (``tests``: and pytest, for
    the workers that run a student's tests); returns the thread count."""
    import torch

    _mark("torch imported", "zygote" if "--zygote" in sys.argv else "standby")
    # before any op: forking after OpenMP started its pool makes parallel ops in the child hang
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    _deterministic(torch)
    import safetensors.torch  # noqa: F401  # workers encode replies with it

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 8, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, 8, generator=g, dtype=torch.float64)
    q = x @ w
    scores = (q @ q.transpose(-2, -1)) / 8**0.5
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    out = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ q
    out.sum().backward()
    for name in ("_framing", "_wire", "_seccomp", "_filesystem", "_harden", "_child", "_ops"):
        # _ops may fail here: workers load it again by path and report the error properly
        with contextlib.suppress(Exception):
            __import__(name)
    with contextlib.suppress(Exception):
        _warm_request_path(torch)
    if tests and "_ops" in sys.modules:
        sys.modules["_ops"].preload_pytest()
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1


def _warm_request_path(torch: Any) -> None:
    """One request through decode, dispatch and encode, as a worker serves it, in both float dtypes:
    the first one in a fresh fork cost ~10 ms (numpy.random imported on the first seeding, first-use
    paths of the encoder), paid by every worker's first answer otherwise."""
    import types

    import _ops  # type: ignore[import-not-found]
    import _wire  # type: ignore[import-not-found]

    module = types.SimpleNamespace(head=lambda x, w: torch.softmax(x @ w, dim=-1))
    for dtype in (torch.float64, torch.float32):
        x = torch.ones(2, 3, 4, dtype=dtype)
        w = torch.ones(4, 4, dtype=dtype)
        params = {"fn": "head", "args": [{"t": "x"}, {"t": "w"}], "seed": 0, "return_inputs": True}
        header, tensors = _wire.decode(
            _wire.encode({"op": "call", "params": params}, {"x": x, "w": w}), max_bytes=1 << 20
        )
        reply, out = _ops.dispatch(module, header["op"], header["params"], tensors)
        _wire.decode(_wire.encode(reply, out), max_bytes=1 << 20)


class Zygote:
    """Forks workers, reaps everything that reparents to it, and sweeps on request or at EOF."""

    def __init__(self, ctl: socket.socket, threads: int, subreaper: bool) -> None:
        self.ctl = ctl
        self.threads = threads
        self.subreaper = subreaper
        self.workers: set[int] = set()
        self.exits: dict[int, int] = {}  # worker pid -> exit code (negative: killed by that signal)
        self.uid: int | None = None  # the uid of the last worker, swept when the grader goes away

    def run(self) -> NoReturn:
        self._send({"status": "ready", "pid": os.getpid(), "threads": self.threads, "subreaper": self.subreaper})
        while True:
            self._reap()
            ready, _, _ = select.select([self.ctl], [], [], _POLL_S)
            if not ready:
                continue
            data, fds, _, _ = socket.recv_fds(self.ctl, 1 << 16, 4)
            if not data:  # the grader closed the socket or died: nothing may outlive it
                self._sweep(self.uid)
                os._exit(0)
            request = json.loads(data)
            if request["op"] == "exit":
                self._sweep(self.uid)
                self._send({"status": "bye"})
                os._exit(0)  # skip interpreter teardown with torch loaded (~0.5 s)
            self._send(self._handle(request, fds))

    def _handle(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        op = request["op"]
        if op == "spawn":
            return {"pid": self._spawn(request["config"], fds)}
        if op == "status":
            return {"exit": self._wait_for(request["pid"], float(request["timeout"]))}
        if op == "sweep":
            killed = self._sweep(request.get("uid"))
            return {"killed": killed, "exit": self.exits.get(request.get("pid") or -1)}
        if op == "stop":
            return {"exit": self._stop_one(int(request["pid"]), float(request["timeout"]))}
        return {"error": f"unknown op {op!r}"}

    def _spawn(self, cfg: dict[str, Any], fds: list[int]) -> int:
        chan_fd, out_fd = fds
        self.uid = cfg.get("uid")
        with contextlib.suppress(Exception):  # the worker works it out itself if this fails
            sys.modules["_filesystem"].prepare(cfg)  # the file-system rules, once for all workers
        with contextlib.suppress(Exception):  # the worker finds the packages it pins itself if this fails
            sys.modules["_harden"].note_packages()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.ctl.detach()  # its fd is closed by hardening; the object must not close a reused number
            worker_main(chan_fd, out_fd, {**cfg, "expected_ppid": os.getppid()}, "forked from warm zygote")
        os.close(chan_fd)
        os.close(out_fd)  # or the grader would never see EOF on the worker's output
        self.workers.add(pid)
        _mark(f"forked worker {pid}", "zygote")
        return pid

    def _send(self, message: dict[str, Any]) -> None:
        self.ctl.send(json.dumps(message).encode())

    def _reap(self) -> bool:
        """Collect every exited child; returns True while children remain."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid in self.workers:
                self.workers.discard(pid)
                self.exits[pid] = os.waitstatus_to_exitcode(status)
                while len(self.exits) > _MAX_EXITS:
                    self.exits.pop(next(iter(self.exits)))

    def _wait_for(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while pid not in self.exits and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.002)
        return self.exits.get(pid)

    def _stop_one(self, pid: int, timeout: float) -> int | None:
        """SIGKILL one worker and its descendants, leaving the other workers alone; its exit code. Only
        an unreaped child of ours is signalled: its pid cannot have been reused."""
        self._reap()
        if pid in self.workers:
            _sigkill([child for child, _ in _descendants(pid)] + [pid])
        return self._wait_for(pid, timeout)

    def _sweep(self, uid: int | None) -> int:
        """SIGKILL every descendant (and, as root, every process of ``uid``) until none is left.

        Processes already signalled only need time to die: the uid-wide kill (a fork of this large
        process, ~9 ms) is repeated only in a round that finds a descendant not signalled before."""
        signalled: set[int] = set()
        for round_ in range(500):
            live = [pid for pid, state in _descendants(os.getpid()) if state != "Z"]
            fresh = [pid for pid in live if pid not in signalled]
            if uid is not None and os.geteuid() == 0 and (round_ == 0 or fresh):
                _kill_uid(uid)
            _sigkill(live)
            signalled.update(live)
            if not self._reap() and not live:
                break
            time.sleep(0.002)
        return len(signalled)


def _sigkill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # exited meanwhile
            os.kill(pid, signal.SIGKILL)


def _kill_uid(uid: int) -> None:
    """kill(-1) from a helper running as ``uid``: reaches setsid daemons wherever they reparented."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal, except the helper itself
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _descendants(root: int) -> list[tuple[int, str]]:
    """(pid, state) of every descendant of ``root``, from one scan of /proc."""
    children: dict[int, list[tuple[int, str]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()  # the command name may contain spaces and parens
        children.setdefault(int(fields[1]), []).append((int(name), fields[0]))
    found: list[tuple[int, str]] = []
    stack = [root]
    while stack:
        for pid, state in children.get(stack.pop(), []):
            found.append((pid, state))
            stack.append(pid)
    return found


def _zygote_main(ctl_fd: int, tests: bool) -> None:
    _mark("started", "zygote")
    threads = _warm_up(tests)
    _mark("warmed up", "zygote")
    libc = ctypes.CDLL(None, use_errno=True)
    subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1), ctypes.c_ulong(0)) == 0
    ctl = socket.socket(fileno=ctl_fd)
    Zygote(ctl, threads, subreaper).run()


def main(argv: list[str]) -> None:
    global _timeline
    _timeline = os.environ.pop("STEP4_TIMELINE", "")  # out of the environment every worker inherits
    sys.meta_path.insert(0, _Bootstrap())
    if argv[1] == "--zygote":
        _zygote_main(int(argv[2]), tests=NO_TESTS not in argv[3:])
        return
    if argv[1] == STANDBY:
        _standby_main(argv[2], int(argv[3]), tests=NO_TESTS not in argv[4:])
    if argv[1] == "--worker":
        import torch

        torch.set_num_threads(1)
        worker_main(int(argv[2]), None, json.loads(argv[3]), "fresh interpreter")
    raise SystemExit(
        f"usage: {argv[0]} --zygote CTL_FD [{NO_TESTS}] | --worker CHAN_FD CONFIG | {STANDBY} HOST PORT [{NO_TESTS}]"
    )


if __name__ == "__main__":
    main(sys.argv)
