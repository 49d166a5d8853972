"""One submission's isolated worker, as the grader sees it: requests in, validated replies out.

Every way student code can misbehave (raise, hang, exit, crash, flood output, exhaust memory, send
garbage) becomes a :class:`Reply` with a status; nothing the worker does can raise in the grader.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from grader._timeline import mark
from grader.sandbox._framing import FrameReader, FrameTooLarge, send_frame_within
from grader.sandbox._limits import SandboxLimits
from grader.sandbox._output import CapturedOutput, OutputCollector, OutputDrain
from grader.sandbox._pool import WorkerPool
from grader.sandbox._private import guarded_paths, secret_paths
from grader.sandbox._reaper import describe_exit, kill_leftovers
from grader.sandbox._slots import STARTUP_S, SlotError, WorkerHandle, ZygoteSlot, poll_in, poll_out, subtree
from grader.sandbox._watchdog import MemoryWatchdog
from grader.sandbox._workspace import Workspace

if TYPE_CHECKING:  # torch comes with the first message (grader.sandbox._wire): a grade launches its worker first
    import torch

Status = Literal["ok", "error", "timeout", "crash", "import_error", "import_timeout", "budget"]
_MIB = 1 << 20
_RLIMIT_MARGIN_MB = 256  # with RLIMIT_DATA active, let it fail allocations cleanly before the watchdog kills
_EXIT_WAIT_S = 1.0
_TEXT_CAP = 4000
ATTEMPTS = ("reads", "writes", "commands", "connections")  # what a worker counts (_child.Attempts)


def _slow_site(where: Any) -> dict[str, Any] | None:
    """The worker's ``slow`` note, read defensively (student code ran beside it): file, line and code, or None."""
    if not isinstance(where, dict):
        return None
    file, line, code = where.get("file"), where.get("line"), where.get("code", "")
    if not isinstance(file, str) or not isinstance(line, int) or not isinstance(code, str):
        return None
    return {"file": file[:300], "line": line, "code": code[:300]}


@dataclass(frozen=True)
class Reply:
    """The outcome of one request. ``header``/``tensors`` are the worker's answer when status is "ok"."""

    status: Status
    header: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    message: str = ""
    duration_s: float = 0.0


# Replies another worker of the same submission can cause (a sweep kills every worker, the budget is
# shared): what a sidecar's caller repeats serially. A timeout is the call's own.
INTERRUPTIONS = frozenset({"crash", "budget", "import_error", "import_timeout"})


class _Budget:
    """The submission's time budget: busy seconds of its workers, a sandbox's and its sidecar's."""

    def __init__(self, total_s: float) -> None:
        self._total_s = total_s
        self._spent_s = 0.0
        self._lock = threading.Lock()

    def spend(self, seconds: float) -> None:
        with self._lock:
            self._spent_s += seconds

    @property
    def left_s(self) -> float:
        return max(self._total_s - self._spent_s, 0.0)


class _Deadline(Exception):
    pass


class _Gone(Exception):
    """The worker exited, or closed its end of the channel."""


class _BadReply(Exception):
    pass


@dataclass
class _Live:
    worker: WorkerHandle
    chan: socket.socket
    drain: OutputDrain
    watchdog: MemoryWatchdog
    frames: FrameReader  # the worker's replies, each in one read where it can (see FrameReader)


class Sandbox:
    """An isolated worker for the submission in ``submission_dir``; a context manager.

    The worker starts (and imports the submission) on the first request or on :meth:`start`. After a
    timeout or a crash the next request transparently starts a fresh worker. An import failure is
    final: every later request returns the same "import_error" reply ("import_timeout" when the import
    hung: it is named a hang, not a crash).
    """

    def __init__(
        self,
        submission_dir: Path,
        limits: SandboxLimits | None = None,
        *,
        pool: WorkerPool | None = None,
        module: str = "attention_head",
        ops: Path | None = None,
    ) -> None:
        self._limits = limits or SandboxLimits()
        self._own_pool = pool is None
        self._pool = pool or WorkerPool(1, uid_base=self._limits.sandbox_uid_base, spares=False)
        self._slot = self._pool.acquire()
        try:
            self._workspace = Workspace(Path(submission_dir), self._slot.uid)
        except BaseException:
            self._release_slot()
            raise
        self._module = module
        self._config: dict[str, Any] = {
            "src_dir": str(self._workspace.src),
            "work_dir": str(self._workspace.work),
            "module": module,
            "limits": self._limits.model_dump(),
            "uid": self._slot.uid,
            "ops_path": None if ops is None else str(Path(ops).resolve()),
            "pdeathsig": True,
            # what the worker may never read (see _filesystem); STEP4_FS_ISOLATION=mount|none skips
            # Landlock (or both layers) to test the fallbacks
            "secret_paths": secret_paths(self._pool.secret_paths),
            "guarded_paths": guarded_paths(self._pool.guarded_paths),
            "fs_isolation": os.environ.get("STEP4_FS_ISOLATION", "auto"),
        }
        self._output = OutputCollector(self._limits.output_cap_kb * 1024)
        self._attempts: dict[int, dict[str, int]] = {}  # worker pid -> what its student code tried (_child.Attempts)
        self._max_reply = self._limits.max_reply_mb * _MIB
        self._budget = _Budget(self._limits.per_submission_timeout_s)
        self._primary: Sandbox | None = None  # set on a sidecar: the sandbox whose slot and copy it shares
        self._new_worker_state()

    def _new_worker_state(self) -> None:
        self._live: _Live | None = None
        self._launched = False  # a worker forked by :meth:`launch` whose hello and import are not read yet
        self._launching: threading.Thread | None = None  # launch(background=True) in flight
        self._launch_error: BaseException | None = None
        self._final: Reply | None = None  # an import failure, repeated for every later request
        self._protections: list[str] = []
        self._closed = False
        self._sidecars: list[Sandbox] = []
        self.interruptions = 0  # replies another worker of this submission may have caused (see sidecar)

    @property
    def sidecar_possible(self) -> bool:
        """Whether :meth:`sidecar` can give a second worker here (workers forked from a zygote)."""
        return self._primary is None and isinstance(self._slot, ZygoteSlot)

    def sidecar(self) -> Sandbox | None:
        """A second worker for the same submission, to run other requests in another thread meanwhile;
        None where workers are not forked from a zygote (a fresh interpreter would cost seconds).

        It shares this sandbox's slot, copy of the submission, output capture and time budget. Stopping
        it kills only its own worker (never a sweep); closing this sandbox closes it first. Each worker's
        memory watchdog counts its own processes. A sweep of this sandbox (after a timeout or a crash)
        kills the sidecar's worker too, so a caller should repeat, serially, whatever got a reply in
        ``INTERRUPTIONS`` while both ran: :attr:`interruptions` counts them.
        """
        self._settle()
        self._check_open()
        if not self.sidecar_possible or self._final is not None:
            return None
        side = object.__new__(Sandbox)
        side._limits, side._own_pool, side._pool, side._slot = self._limits, False, self._pool, self._slot
        side._workspace, side._module, side._config = self._workspace, self._module, self._config
        side._output, side._max_reply, side._budget = self._output, self._max_reply, self._budget
        side._attempts = self._attempts
        side._primary = self
        side._new_worker_state()
        self._sidecars.append(side)
        return side

    # -- public --------------------------------------------------------------------------------

    @property
    def protections(self) -> list[str]:
        """Protections active for the last worker (empty before the first one started)."""
        return list(self._protections)

    @property
    def absent_protections(self) -> list[str]:
        """Protections of the Linux sandbox this platform lacks (Windows), for the result to say so."""
        return list(getattr(self._slot, "absent", ()))

    @property
    def output(self) -> CapturedOutput:
        """Everything the submission printed so far, capped."""
        return self._output.snapshot()

    @property
    def attempts(self) -> dict[str, int]:
        """What the submission's code tried beyond what it owns, summed over its workers (issue 54): reads and
        writes outside its folders, commands, inet sockets, as each worker last counted them."""
        total = dict.fromkeys(ATTEMPTS, 0)
        for counts in list(self._attempts.values()):
            for kind, n in counts.items():
                total[kind] += n
        return total

    @property
    def limits(self) -> SandboxLimits:
        return self._limits

    @property
    def budget_left_s(self) -> float:
        return self._budget.left_s

    @property
    def skipped_files(self) -> list[str]:
        """Submission entries not copied into the sandbox (symlinks, directories, oversized files)."""
        return list(self._workspace.skipped)

    def start(self) -> Reply:
        """Start the worker and import the submission, if not done yet; "ok" or the failure."""
        self._settle()
        with self._pool.cancellable():  # grade --watch: WorkerPool.cancel abandons the grade
            return self._counted(self._start_once())

    def launch(self, *, background: bool = False) -> None:
        """Fork the worker now, without waiting for it: it hardens and imports the submission on its own,
        and the first :meth:`start` or request reads its hello and import result (the import's time limit
        and budget count from then). For a caller about to start another worker of this slot (a sidecar):
        the zygote forks one worker at a time, and this one is then forked first. Raises SlotError as
        :meth:`start` does; nothing is launched after a failed import or once a worker runs.

        ``background``: ask for the fork from a thread and return at once (a cold grade, before it imports
        torch: the zygote answers once its own import is done). Every other method waits for that thread
        first, and the first to do so raises what it raised."""
        self._settle()
        if background:
            self._launching = threading.Thread(target=self._launch_in_background, name="worker-launch", daemon=True)
            self._launching.start()
            return
        self._launch_now()

    def _launch_in_background(self) -> None:
        try:
            self._launch_now()
        except BaseException as exc:  # raised to whoever uses the sandbox next (_settle)
            self._launch_error = exc

    def _settle(self) -> None:
        """Wait for a launch in the background to end; raise what it raised."""
        thread, self._launching = self._launching, None
        if thread is None:
            return
        thread.join()
        error, self._launch_error = self._launch_error, None
        if error is not None:
            raise error

    def _launch_now(self) -> None:
        with self._pool.cancellable():
            self._check_open()
            if self._final is not None or self._live is not None or self.budget_left_s <= 0:
                return
            mark("worker asked for" + (" (sidecar)" if self._primary is not None else ""))
            self._launch()
            self._launched = True

    def _counted(self, reply: Reply) -> Reply:
        if reply.status in INTERRUPTIONS:
            self.interruptions += 1
        return reply

    def _start_once(self) -> Reply:
        self._check_open()
        if self._final is not None:
            return self._final
        if self._live is not None and not self._launched:
            return Reply("ok")
        if self.budget_left_s <= 0 and not self._launched:
            return self._budget_reply("the submission was not imported")
        return self._start()

    def request(
        self,
        op: str,
        params: dict[str, Any],
        tensors: dict[str, torch.Tensor],
        *,
        timeout_s: float | None = None,
    ) -> Reply:
        """Run one op in the worker; never raises for anything the submission does (a cancelled pool
        raises Cancelled: the grader abandoned the grade, see WorkerPool.cancel)."""
        self._settle()
        with self._pool.cancellable():
            return self._request(op, params, tensors, timeout_s)

    def _request(
        self, op: str, params: dict[str, Any], tensors: dict[str, torch.Tensor], timeout_s: float | None
    ) -> Reply:
        if self._final is not None:  # the import failed before: say so again, at no cost
            return self._counted(replace(self._final, duration_s=0.0))
        started = self._start_once()
        if started.status != "ok":
            return self._counted(started)
        if self.budget_left_s <= 0:
            return self._counted(self._budget_reply(f"{op!r} was not run"))
        from grader.sandbox import _wire

        limit = self._limits.per_call_timeout_s if timeout_s is None else timeout_s
        # watch_s: the worker says where the student's code is shortly before the limit (_child._SlowWatch)
        blob = _wire.encode({"op": op, "params": params, "watch_s": limit}, tensors)  # ours: errors are bugs
        return self._counted(self._exchange(op, blob, limit))

    def close(self) -> None:
        """Kill the worker and everything it started, delete the workspace; idempotent. A sidecar's close
        stops its own worker only."""
        with contextlib.suppress(SlotError):  # a launch that failed left no worker: nothing to stop
            self._settle()
        if self._closed:
            return
        self._closed = True
        if self._primary is not None:
            self._stop_worker()
            return
        try:
            for side in self._sidecars:
                side.close()
            self._stop_worker()
            if self._slot.uid is not None:
                kill_leftovers([self._slot.uid])  # belt and braces before anyone writes results
        finally:
            self._workspace.remove()
            self._release_slot()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    # -- starting the worker -------------------------------------------------------------------

    def _start(self) -> Reply:
        if not self._launched:  # else forked ahead by launch()
            mark("worker asked for" + (" (sidecar)" if self._primary is not None else ""))
            self._launch()
        self._launched = False
        try:
            hello, _ = self._receive(time.monotonic() + STARTUP_S)
            mark("worker hardened" + (" (sidecar)" if self._primary is not None else ""))
            if hello.get("status") != "hello":
                raise _BadReply(f"expected a hello, got {hello.get('status')!r}")
        except (_Deadline, _Gone, _BadReply) as exc:  # no student code has run yet: our failure
            tail = self._stop_worker()[1]
            raise SlotError(f"the worker failed to start ({type(exc).__name__}: {exc}); output: {tail}") from None
        self._protections = self._parent_protections() + [str(p)[:200] for p in hello.get("protections", [])][:64]
        if any(p.startswith(("rlimit data", "Job Object memory limit")) for p in self._protections):
            assert self._live is not None
            self._live.watchdog.limit_bytes += _RLIMIT_MARGIN_MB * _MIB
        return self._await_import()

    def _launch(self) -> None:
        opener = getattr(self._slot, "open_worker", None)
        if opener is not None:  # Windows: a worker started ahead brings its own channel and output pipe
            worker, chan, out_r = opener(self._config)
        else:
            chan, theirs = socket.socketpair()
            out_r, out_w = os.pipe()
            try:
                worker = self._slot.launch(self._config, theirs.fileno(), out_w)
            except BaseException:
                chan.close()
                os.close(out_r)
                raise
            finally:
                theirs.close()  # the worker has its own copies now; ours would hide its death
                os.close(out_w)
        limit = self._limits.memory_mb * _MIB
        if self._primary is not None:  # a sidecar's watchdog counts its own worker's processes
            watchdog = MemoryWatchdog(lambda: subtree(worker.pid), limit)
        else:  # everything under the zygote but a running sidecar's worker (its own watchdog counts it)
            watchdog = MemoryWatchdog(lambda: self._slot.tree(worker, exclude=self._sidecar_pids()), limit)
        chan.setblocking(False)  # every send and read waits in poll, bounded by its deadline (_send, _receive)
        self._live = _Live(worker, chan, self._output.drain(out_r), watchdog, FrameReader(chan))

    def _await_import(self) -> Reply:
        t0 = time.monotonic()
        by_budget = self.budget_left_s < self._limits.import_timeout_s
        deadline = t0 + min(self._limits.import_timeout_s, self.budget_left_s)
        what = f"importing {self._module}.py"
        try:
            header, _ = self._receive(deadline)
        except _Deadline:
            status: Status = "budget" if by_budget else "import_timeout"
            message = self._timeout_message(what, by_budget)
            if not by_budget:  # top-level code (a demo, a training loop) runs at import
                message = (
                    f"importing your module ({self._module}.py) took more than {self._limits.import_timeout_s:g} s: "
                    'move demo code under `if __name__ == "__main__":`; the worker was stopped'
                )
            reply = self._end(status, message, t0)
        except _Gone:
            reply = self._end("import_error", self._death_message(what), t0)
        except _BadReply as exc:
            reply = self._end("import_error", f"bad reply format while {what}: {exc}", t0)
        else:
            reply = self._import_outcome(header, t0)
        finally:
            self._budget.spend(time.monotonic() - t0)
        if reply.status != "ok":
            self._final = reply
        mark(f"submission imported ({reply.status})" + (" (sidecar)" if self._primary is not None else ""))
        return reply

    def _import_outcome(self, header: dict[str, Any], t0: float) -> Reply:
        if header.get("status") == "ready":
            return Reply("ok", duration_s=time.monotonic() - t0)
        if header.get("status") == "import_error":
            error = _error_fields(header)
            reply = self._end("import_error", f"{error['exc_type']}: {error['message']}", t0)
            return replace(reply, header=error)
        return self._end("import_error", "bad reply format while importing the submission", t0)

    # -- requests ------------------------------------------------------------------------------

    def _exchange(self, op: str, blob: bytes, limit: float) -> Reply:
        assert self._live is not None
        t0 = time.monotonic()
        by_budget = self.budget_left_s < limit
        deadline = t0 + min(limit, self.budget_left_s)
        slow: dict[str, Any] | None = None  # where the student's code was near the limit (issue 53)
        try:
            self._send(blob, deadline)
            header, tensors = self._receive(deadline)
            while header.get("status") == "slow":  # the worker's note on the way; the reply follows
                slow = _slow_site(header.get("where"))
                header, tensors = self._receive(deadline)
        except _Deadline:
            status: Status = "budget" if by_budget else "timeout"
            ended = self._end(status, self._timeout_message(f"{op!r}", by_budget, limit), t0)
            return self._lost(replace(ended, header={"slow": slow}) if slow is not None else ended)
        except _Gone:
            return self._lost(self._end("crash", self._death_message(f"running {op!r}"), t0))
        except _BadReply as exc:
            return self._lost(self._end("crash", f"bad reply format: {exc}", t0))
        finally:
            self._budget.spend(time.monotonic() - t0)
        duration = time.monotonic() - t0
        status = header.pop("status", None)
        if status == "ok":
            return Reply("ok", header, tensors, "", duration)
        if status == "error":
            error = _error_fields(header)
            return Reply("error", error, {}, f"{error['exc_type']}: {error['message']}", duration)
        return self._end("crash", "bad reply format: unknown reply status", t0)

    def _lost(self, reply: Reply) -> Reply:
        """After a timeout or a crash the next request starts a fresh worker: a slot that starts its workers
        ahead (Windows) starts that one now, and keeps one ready from then on (``WindowsSlot.worker_lost``)."""
        lost = getattr(self._slot, "worker_lost", None)
        if reply.status in ("timeout", "crash") and lost is not None:
            lost()
        return reply

    def _send(self, blob: bytes, deadline: float) -> None:
        assert self._live is not None
        chan = self._live.chan

        def writable() -> None:  # the worker is not reading: wait for room, never past the deadline
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline
            poll_out(chan.fileno(), remaining)

        if deadline <= time.monotonic():
            raise _Deadline
        try:
            send_frame_within(chan, blob, writable)
        except OSError:  # broken pipe / reset: the worker is gone
            raise _Gone from None

    def _receive(self, deadline: float) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        from grader.sandbox import _wire

        """One reply, or _Deadline / _Gone / _BadReply; never blocks past ``deadline``."""
        assert self._live is not None
        live = self._live

        def wait() -> None:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Deadline
                # with a pidfd, poll sleeps until data, death or deadline; without one, poll in slices
                # (data written before a death is already readable when the pidfd fires)
                pidfd = live.worker.pidfd
                fds = [live.chan.fileno()] + ([pidfd] if pidfd is not None else [])
                if live.chan.fileno() in poll_in(fds, remaining if pidfd is not None else min(remaining, 0.05)):
                    return
                if not live.worker.alive():
                    raise _Gone

        try:
            blob = live.frames.read(self._max_reply, wait)
        except FrameTooLarge as exc:
            raise _BadReply(str(exc)) from None
        except OSError:
            raise _Gone from None
        if blob is None:
            raise _Gone
        try:
            header, tensors = _wire.decode(blob, max_bytes=self._max_reply)
        except _wire.WireError as exc:
            raise _BadReply(str(exc)) from None
        said = header.get("attempts")
        if isinstance(said, dict):  # the worker's counts so far (untrusted: only known kinds, as bounded ints)
            counts = {k: min(v, 1 << 30) for k, v in said.items() if k in ATTEMPTS and type(v) is int and v >= 0}
            self._attempts[live.worker.pid] = counts
        return header, tensors

    # -- ending a worker -----------------------------------------------------------------------

    def _end(self, status: Status, message: str, t0: float) -> Reply:
        """Stop the worker (the next request starts a fresh one) and build the failure reply."""
        if self._live is not None:
            self._stop_worker()
        return Reply(status, {}, {}, message, time.monotonic() - t0)

    def _death_message(self, what: str) -> str:
        """Why the worker died during ``what`` (memory, signal or exit code), with its last output."""
        assert self._live is not None
        live = self._live
        try:
            code = self._slot.exit_code(live.worker, _EXIT_WAIT_S)  # let a sys.exit finish exiting
        except SlotError:  # the zygote went too (a same-uid worker can kill it); the next launch restarts it
            code = None
        _, tail = self._stop_worker()
        if live.watchdog.tripped:
            used = live.watchdog.used_bytes // _MIB
            limit = self._limits.memory_mb
            return f"memory limit ({limit} MiB) exceeded while {what}: its processes used {used} MiB"
        text = f"the worker {describe_exit(code)} while {what}"
        tail = tail.replace(str(self._workspace.src) + os.sep, "").strip()  # as the student named the file
        if tail:
            text += "\nLast output:\n" + tail[-_TEXT_CAP:]
        return text

    def _timeout_message(self, what: str, by_budget: bool, limit: float | None = None) -> str:
        if by_budget:
            budget = self._limits.per_submission_timeout_s
            return f"the submission's time budget ({budget:g} s) ran out while {what}"
        limit = self._limits.import_timeout_s if limit is None else limit
        return f"{what} did not finish within {limit:g} s; the worker was stopped"

    def _budget_reply(self, what: str) -> Reply:
        budget = self._limits.per_submission_timeout_s
        return Reply("budget", message=f"the submission's time budget ({budget:g} s) is spent; {what}")

    def _stop_worker(self) -> tuple[int | None, str]:
        """Kill the worker's whole tree (or sweep leftovers if none runs); returns exit code, last output."""
        live, self._live, self._launched = self._live, None, False
        if live is not None:
            live.watchdog.stop()
        code = None
        with contextlib.suppress(SlotError):  # a broken zygote was killed with its whole tree instead
            if self._primary is None:
                code = self._slot.sweep(live.worker if live else None)
            elif live is not None:  # a sidecar never sweeps: the primary's worker runs on
                assert isinstance(self._slot, ZygoteSlot)
                code = self._slot.stop_one(live.worker)
        if live is None:
            return None, ""
        live.chan.close()
        live.worker.close()
        live.drain.finish(2.0)  # every writer is dead: EOF arrives at once
        return code, live.drain.tail()

    # -- misc ----------------------------------------------------------------------------------

    def _parent_protections(self) -> list[str]:
        lim = self._limits
        return (
            [
                f"time limits ({lim.per_call_timeout_s:g} s a call, {lim.per_submission_timeout_s:g} s total)",
                f"memory watchdog {lim.memory_mb} MiB (whole process tree)",
                f"output capped at {lim.output_cap_kb} KiB",
                "pickle-free size-capped replies",
                "read-only copy of the submission",
                self._copies_protection(),
            ]
            + (["grader memory unreadable (non-dumpable)"] if self._pool.grader_non_dumpable else [])
            + self._slot.protections()
        )

    def _copies_protection(self) -> str:
        if self._slot.uid is not None and hasattr(os, "geteuid") and os.geteuid() == 0:
            return "private copies readable only by the sandbox uid"
        if os.name == "nt":
            return "private copies in the user's own temp folder (its ACL)"
        return "private copies 0700"

    def _sidecar_pids(self) -> set[int]:
        return {side._live.worker.pid for side in self._sidecars if side._live is not None}

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the sandbox is closed")

    def _release_slot(self) -> None:
        self._pool.release(self._slot)
        if self._own_pool:
            self._pool.close()


def _error_fields(header: dict[str, Any]) -> dict[str, str]:
    """The worker's error description, coerced to capped strings (it is untrusted data)."""
    return {k: str(header.get(k, ""))[:_TEXT_CAP] for k in ("exc_type", "message", "traceback")}
