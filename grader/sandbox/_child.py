"""The worker's request loop: import the submission cleanly, then answer requests until EOF.

Runs inside the (already hardened) worker, loaded by ``_zygote.py``'s bootstrap finder; it must
never import ``grader``. Every message on the channel is a length-prefixed ``_wire`` blob.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import os
import socket
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import _framing  # type: ignore[import-not-found]  # served by the worker's bootstrap finder
import _wire  # type: ignore[import-not-found]

REQUEST_CAP = 1 << 30  # requests come from the grader, which is trusted; this only bounds a bug
MAX_FRAMES = 6
MAX_TEXT = 4000
BLOCKED_PACKAGES = frozenset({"grader", "reference"})
BLOCKED_MESSAGE = "the grader's own packages cannot be imported from a submission"


class _RefuseGraderPackages(importlib.abc.MetaPathFinder):
    """First on the meta path: ``import grader`` / ``import reference`` (and submodules) fail."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.partition(".")[0] in BLOCKED_PACKAGES:
            raise ImportError(BLOCKED_MESSAGE, name=fullname)


class _SiblingFinder(importlib.abc.MetaPathFinder):
    """Last on the meta path: serves a helper module that sits next to the submission.

    Being last means a submitted ``torch.py`` or ``json.py`` is never used: the real module is found
    first. Standard-library names are refused even when that module is not installed here.
    """

    def __init__(self, src_dir: str) -> None:
        self._src_dir = src_dir

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if path is not None or "." in fullname:  # top-level modules only
            return None
        if fullname in sys.stdlib_module_names or fullname in sys.builtin_module_names:
            return None
        candidate = os.path.join(self._src_dir, fullname + ".py")
        if not os.path.isfile(candidate):
            return None
        return importlib.util.spec_from_file_location(fullname, candidate)


class Attempts:
    """What the submission's own code tries beyond what it owns (issue 54), counted by an audit hook in the worker:
    opens and listings of paths outside its copy and its work dir (reads; writes, removals and renames: writes),
    commands and programs started, inet sockets asked for. Counted only when the call comes from the student's own
    code (the first frame that is not the standard library's is in the submission's folder): a library reading its
    own files is not the student. Where the file-system layer holds, every such read and write was denied. The
    counts ride on every reply (``attempts``); the grader only adds them up, for the instructor."""

    READS = frozenset({"os.listdir", "os.scandir"})
    WRITES = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.truncate", "os.chmod"})
    COMMANDS = frozenset({"os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn"})
    WATCHED = READS | WRITES | COMMANDS | {"open", "socket.__new__", "socket.connect"}
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    _OWN = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero", "/proc/self/")

    def __init__(self, src_dir: str, work_dir: str, secrets: Sequence[str] = ()) -> None:
        self.counts = {"reads": 0, "writes": 0, "commands": 0, "connections": 0}
        self._mine = _folders(src_dir)
        self._owned = self._mine + _folders(work_dir)
        # what the layer lets every worker read (the Python installation and its packages), less the secrets in it
        self._readable = _folders(sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p))
        self._secret = _folders(*secrets)
        paths = sysconfig.get_paths()
        self._stdlib = tuple(
            {os.path.join(os.path.realpath(paths[k]), "") for k in ("stdlib", "platstdlib") if paths.get(k)}
        )

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in self.WATCHED:
            return
        try:  # an audit hook that raises would break the call it watches: never
            kind = self._kind(event, args)
            if kind is not None and self._by_the_student():
                self.counts[kind] += 1
        except Exception:
            pass

    def _kind(self, event: str, args: tuple[Any, ...]) -> str | None:
        if event in self.COMMANDS:
            return "commands"
        if event == "socket.__new__":
            return "connections" if len(args) > 1 and args[1] in (socket.AF_INET, socket.AF_INET6) else None
        if event == "socket.connect":
            return "connections" if not isinstance(args[1], str | bytes) else None  # an inet address, not a unix path
        path = args[0]
        if isinstance(path, int) or path is None:  # an open descriptor: already its own
            return None
        text = os.fsdecode(os.fspath(path))
        full = os.path.join(os.path.abspath(text), "")
        if full.startswith(self._owned) or text.startswith(self._OWN):
            return None
        writing = event in self.WRITES
        if event == "open":
            mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
            writing = any(c in str(mode or "") for c in "wax+") or bool((flags or 0) & self._WRITE_FLAGS)
        if not writing and full.startswith(self._readable) and not full.startswith(self._secret):
            return None  # the installation's own files (a module imported late): readable by every worker
        return "writes" if writing else "reads"

    def _by_the_student(self) -> bool:
        frame = sys._getframe(2)  # _by_the_student <- hook <- the frame that made the audited call
        while frame is not None:
            name = frame.f_code.co_filename
            standard = name.startswith(self._stdlib) and "-packages" not in name  # a venv's platstdlib holds them
            if not (name.startswith("<") or standard):
                return os.path.join(os.path.abspath(name), "").startswith(self._mine)
            frame = frame.f_back  # type: ignore[assignment]
        return False

    def said(self) -> dict[str, int]:
        return {k: n for k, n in self.counts.items() if n}


def _folders(*paths: str) -> tuple[str, ...]:
    """Each path as an absolute folder prefix ending in a separator, as given and with its links resolved."""
    return tuple({os.path.join(os.path.abspath(f), "") for p in paths for f in (p, os.path.realpath(p))})


_attempts: Attempts | None = None


def install_import_hygiene(src_dir: str) -> None:
    """``python -I`` already dropped the script dir, user site and PYTHON* variables; finish the job."""
    real_src = os.path.realpath(src_dir)
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != real_src]
    sys.meta_path.insert(0, _RefuseGraderPackages())
    sys.meta_path.append(_SiblingFinder(src_dir))
    sys.dont_write_bytecode = True  # the submission copy is read-only; never litter it


def import_submission(src_dir: str, module_name: str) -> ModuleType:
    """Load ``<src_dir>/<module_name>.py`` by path under the fixed name ``module_name``."""
    path = os.path.join(src_dir, module_name + ".py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"the submission has no {module_name}.py")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module_name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.argv = [path]
    spec.loader.exec_module(module)
    return module


def serve(
    sock: socket.socket,
    submission_dir: str,
    limits: dict[str, Any],
    *,
    module_name: str = "attention_head",
    ops: Any = None,
    protections: Sequence[str] = (),
    secrets: Sequence[str] = (),
) -> int:
    """Say hello, import the submission, then answer requests until the grader hangs up.

    Returns the exit code for the worker. Exceptions from student code in a request become error
    replies; ``SystemExit`` and ``KeyboardInterrupt`` are deliberately not caught, so they end the
    worker and the grader reports a crash.
    """
    global _attempts
    install_import_hygiene(submission_dir)
    _send(sock, {"status": "hello", "protections": list(protections), "pid": os.getpid()}, {})
    _attempts = Attempts(submission_dir, os.getcwd(), secrets)  # the worker's cwd is its own work dir (_harden)
    sys.addaudithook(_attempts.hook)  # from here on, the student's code runs
    try:
        module = import_submission(submission_dir, module_name)
    except Exception as exc:
        _send(sock, _error_header(exc, submission_dir, status="import_error"), {})
        return 0
    _flush_stdio()
    _send(sock, {"status": "ready"}, {})
    requests = _framing.FrameReader(sock)  # each request in one read where it can (a round trip under Wine)
    watch = _SlowWatch(sock, submission_dir)
    while True:
        blob = requests.read(REQUEST_CAP)
        if blob is None:
            return 0
        header, tensors = _wire.decode(blob, max_bytes=REQUEST_CAP)
        watch.arm(header.get("watch_s"))
        try:
            reply, out = _answer(ops, module, header, tensors, submission_dir)
        finally:
            watch.disarm()
        _flush_stdio()  # so a student's unterminated print line shows up before the next request
        _send_reply(sock, reply, out, submission_dir)


class _SlowWatch:
    """Where the student's code is when a request nears its time limit (issue 53: the line where the time went).

    One watcher thread for the worker's life (a thread per request cost about 0.1 ms each): :meth:`arm` gives it
    the request's limit, and shortly before it the thread reads the main thread's stack and sends one ``slow``
    frame naming the innermost frame in the submission's own files; the grader keeps it as it waits for the reply,
    and says the line if the request times out. :meth:`disarm` runs before the reply is sent, under the same lock
    the thread sends under, so no ``slow`` frame ever follows a reply."""

    def __init__(self, sock: socket.socket, src_dir: str) -> None:
        self._sock, self._src = sock, os.path.join(src_dir, "")
        self._cond = threading.Condition()
        self._due: float | None = None  # when to look (monotonic), while a request runs
        self._main = threading.get_ident()
        self._thread: threading.Thread | None = None

    def arm(self, watch_s: Any) -> None:
        if not isinstance(watch_s, (int, float)) or watch_s <= 0:
            return
        with self._cond:
            self._due = time.monotonic() + max(0.8 * watch_s, watch_s - 1.0)
            self._cond.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="grader-slow-watch", daemon=True)
            self._thread.start()

    def disarm(self) -> None:
        with self._cond:
            self._due = None

    def _watch(self) -> None:
        with self._cond:
            while True:
                if self._due is None:
                    self._cond.wait()
                    continue
                left = self._due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._due = None
                site = self._site()
                if site is not None:  # sent under the lock: disarm() (before the reply) waits for it
                    with contextlib.suppress(Exception):
                        _send(self._sock, {"status": "slow", "where": site}, {})

    def _site(self) -> dict[str, Any] | None:
        frame = sys._current_frames().get(self._main)
        while frame is not None:  # innermost first: the first frame in the submission's files
            name = frame.f_code.co_filename
            if name.startswith(self._src):
                code = linecache.getline(name, frame.f_lineno).strip()[:300]
                return {"file": name[len(self._src) :], "line": frame.f_lineno, "code": code}
            frame = frame.f_back
        return None


def _answer(
    ops: Any, module: ModuleType, header: dict[str, Any], tensors: dict[str, Any], src_dir: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        out_header, out = ops.dispatch(module, header["op"], header.get("params", {}), tensors)
    except Exception as exc:
        return _error_header(exc, src_dir), {}
    return {**out_header, "status": "ok"}, out


def _send_reply(sock: socket.socket, header: dict[str, Any], tensors: dict[str, Any], src_dir: str) -> None:
    """Encode and send; a result that cannot be encoded becomes an error reply instead."""
    try:
        blob = _wire.encode(_counted(header), tensors)
    except Exception as exc:
        failed = _error_header(exc, src_dir)
        failed["message"] = "the result could not be sent back: " + failed["message"]
        blob = _wire.encode(_counted(failed), {})
    _framing.send_frame(sock, blob)


def _send(sock: socket.socket, header: dict[str, Any], tensors: dict[str, Any]) -> None:
    _framing.send_frame(sock, _wire.encode(_counted(header), tensors))


def _counted(header: dict[str, Any]) -> dict[str, Any]:
    """``header`` with the attempts counted so far, when there are any (every reply carries them)."""
    said = _attempts.said() if _attempts is not None else {}
    return {**header, "attempts": said} if said else header


def student_traceback(exc: BaseException, src_dir: str) -> str:
    """The traceback of ``exc`` showing only the student's own frames, paths relative to the submission."""
    prefix = os.path.join(src_dir, "")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(prefix)]
    for f in frames:
        f.filename = f.filename[len(prefix) :]
    lines = traceback.format_list(frames[-MAX_FRAMES:])
    try:
        lines += traceback.format_exception_only(type(exc), exc)
    except Exception:  # an exception whose __str__ itself raises
        lines.append(f"{type(exc).__name__}: <unprintable>\n")
    text = "Traceback (most recent call last):\n" + "".join(lines)
    return text.replace(prefix, "")[-MAX_TEXT:]


def _error_header(exc: BaseException, src_dir: str, *, status: str = "error") -> dict[str, Any]:
    """An error reply: exception type, message and the student's part of the traceback."""
    return {
        "status": status,
        "exc_type": type(exc).__name__[:200],
        "message": _safe_str(exc).replace(os.path.join(src_dir, ""), "")[:MAX_TEXT],
        "traceback": student_traceback(exc, src_dir),
    }


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return "<unprintable exception>"


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the student may have replaced or closed them
            stream.flush()
