"""A pool of worker slots shared by the sandboxes of a batch: one warm zygote and one uid per slot."""

from __future__ import annotations

import ctypes
import os
import queue
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from grader._timeline import mark
from grader.sandbox._early import Started, fork_supported
from grader.sandbox._slots import Slot, SpawnSlot, ZygoteSlot, windows
from grader.sandbox._uids import DEFAULT_UID_BASE, lease_uid


class WorkerPool:
    """``slots`` worker slots; ``Sandbox(..., pool=pool)`` borrows one for its lifetime.

    ``lazy`` starts each slot's zygote on first use instead of now (for pools that may stay unused).
    ``spares=False`` (a one-shot grade): on Windows, start no standby behind each worker lent, until a
    worker is lost to a timeout or a crash (``_winslot``); elsewhere nothing is started ahead per worker.
    ``secret_paths``: folders its workers must never read, beyond the grader's own (a batch's
    submissions and output); ``guarded_paths``: folders not readable as a whole, though a folder inside
    may be (/autograder, holding the virtual environment). ``sandbox_uids=False`` keeps a root grader's
    workers on its own uid (tests: what a laptop without root gets).

    On Linux each slot is a zygote that already imported torch, so a submission's worker starts in
    tens of milliseconds; on Windows each slot keeps a spawned worker started ahead, in its own Job
    Object (``_winslot``); elsewhere (or with ``STEP4_NO_FORK=1``) each worker is a fresh interpreter.
    As root, slot k's workers run as its own leased uid (``uid_base`` + k or the next free one).
    """

    def __init__(
        self,
        slots: int = 1,
        *,
        uid_base: int | None = None,
        fork: bool | None = None,
        lazy: bool = False,
        secret_paths: Sequence[Path] = (),
        guarded_paths: Sequence[Path] = (),
        sandbox_uids: bool = True,
        spares: bool = True,
    ) -> None:
        if slots < 1:
            raise ValueError(f"a pool needs at least one slot, got slots={slots}")
        base = DEFAULT_UID_BASE if uid_base is None else uid_base
        self.secret_paths = tuple(Path(p) for p in secret_paths)
        self.guarded_paths = tuple(Path(p) for p in guarded_paths)
        self.grader_non_dumpable = _forbid_reading_our_memory()
        if windows():
            self.mode = "standby"
        else:
            self.mode = "fork" if (fork_supported() if fork is None else fork) else "spawn"
        self._slots: list[Slot] = []
        self._free: queue.Queue[Slot] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        try:
            for _ in range(slots):
                if self.mode == "standby":
                    from grader.sandbox._winslot import WindowsSlot

                    slot: Slot = WindowsSlot(eager=not lazy, spares=spares)
                    self._slots.append(slot)
                    self._free.put(slot)
                    continue
                lease = lease_uid(base) if _is_root() and sandbox_uids else None
                slot = ZygoteSlot(lease, eager=not lazy) if self.mode == "fork" else SpawnSlot(lease)
                self._slots.append(slot)
                self._free.put(slot)
        except BaseException:
            self.close()
            raise

    def prestart(self, n: int = 1, *, tests: bool = True, started: Started | None = None) -> None:
        """Start the zygotes of the first ``n`` slots now (for a lazy pool): their torch import then
        overlaps whatever the grader does next. ``tests=False``: their workers will not run a student's
        tests (a single grade's head holds its slot throughout; the tests take another), so they skip
        importing pytest, ~0.3 s of CPU while the grader itself is still starting. ``started``: a zygote
        started before the pool existed (``grader/sandbox/_early.py``), the first slot's; stopped if no
        slot takes it."""
        for slot in self._slots[:n]:
            if isinstance(slot, ZygoteSlot) and slot._proc is None:
                slot.tests = tests
                ahead = started if started is not None and started.tests == tests else None
                slot.start(ahead)
                if ahead is not None:
                    started = None
            elif self.mode == "standby" and getattr(slot, "_standby", True) is None:
                slot.tests = tests  # type: ignore[attr-defined]
                slot.start()  # type: ignore[attr-defined]
        if started is not None:
            started.discard()

    def prestart_spare(self, *, tests: bool = True) -> None:
        """Start the zygote of the first slot not started yet (a lazy pool), for work that comes later in the
        grade: the student's tests, whose slot is otherwise started when they begin, its torch import (a second
        or more) then waited for. Started now, it overlaps the checks. Linux only: a Windows slot starts its
        standby behind every worker it lends, and an unstarted one cannot be told from one just lent out."""
        for slot in self._slots:
            if isinstance(slot, ZygoteSlot) and slot._proc is None:
                slot.tests = tests
                slot.start()
                mark("spare worker started")
                return

    def keep_spares(self) -> None:
        """From now on, keep a standby behind each worker lent (Windows; see ``spares``): for work that borrows
        workers one after another, as a student's suite run on the head and then on each known bug."""
        if self.mode != "standby":
            return  # a zygote forks each worker when asked: nothing is kept ahead per worker
        for slot in self._slots:
            slot.spares = True  # type: ignore[attr-defined]

    @property
    def uids(self) -> list[int]:
        """The sandbox uids this pool's workers run as (empty when not root)."""
        return [s.uid for s in self._slots if s.uid is not None]

    def acquire(self, timeout: float | None = None) -> Slot:
        """Borrow a free slot, waiting for one; used by ``Sandbox``."""
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        return self._free.get(timeout=timeout)

    def release(self, slot: Slot) -> None:
        self._free.put(slot)

    def begin_close(self) -> None:
        """Tell every zygote to sweep and exit now, without waiting; :meth:`close` collects them. Call it
        once no sandbox uses the pool, to overlap their exit with the grader's own work (writing files)."""
        for slot in self._slots:
            if isinstance(slot, ZygoteSlot):
                slot.begin_close()

    def close(self) -> None:
        """Stop every zygote (sweeping their workers) and release the uids; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for slot in self._slots:
            slot.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    # -- cancelling (grade --watch: a newer save abandons the grade in flight) ------------------

    _cancelled = False

    def cancel(self) -> None:
        """From another thread: abandon whatever the pool's sandboxes are doing. Every worker of every
        zygote is killed now, and until :meth:`resume` every request and start raises :class:`Cancelled`.
        Call it again while the abandoned work unwinds: a worker launched just after a sweep is not
        killed by it. Where workers do not fork from a zygote, a request in flight runs to its end."""
        import contextlib  # (imported here, as below: this block keeps to itself)

        from grader.sandbox._slots import SlotError

        self._cancelled = True
        for slot in self._slots:
            if isinstance(slot, ZygoteSlot) or self.mode == "standby":  # Windows: every lent worker's job
                with contextlib.suppress(SlotError):  # a broken zygote was killed with its whole tree instead
                    slot.sweep(None)

    def resume(self) -> None:
        """Lend workers again after :meth:`cancel` (once the abandoned work has unwound)."""
        self._cancelled = False

    def cancellable(self) -> _CancelPoint:
        """Around a sandbox's request: raise :class:`Cancelled` before it when the pool is cancelled, and
        after it when the pool was cancelled meanwhile (its reply, cut short by the sweep, is no answer)."""
        return _CancelPoint(self)


class Cancelled(BaseException):
    """The pool was cancelled (:meth:`WorkerPool.cancel`): the grade is abandoned, not judged. A
    BaseException, so that no check or runner turns it into a verdict."""


class _CancelPoint:
    def __init__(self, pool: WorkerPool) -> None:
        self._pool = pool

    def __enter__(self) -> None:
        if self._pool._cancelled:
            raise Cancelled

    def __exit__(self, exc_type: type[BaseException] | None, *rest: BaseException | TracebackType | None) -> None:
        if not self._pool._cancelled:  # every request passes here: nothing more to do
            return
        from grader.sandbox._slots import SlotError

        if exc_type is None:
            raise Cancelled
        if issubclass(exc_type, SlotError):  # a worker killed while it started
            raise Cancelled from None


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _forbid_reading_our_memory() -> bool:
    """Mark the grader non-dumpable: its /proc/<pid>/mem and environ become root-only, so a worker
    running as the same (non-root) uid cannot read the grader's memory (no Yama on many systems)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE = 4
    except OSError:
        return False
