"""Sandbox uids, one per worker slot, leased across every grader process on the machine.

Two concurrent graders (or two pool slots) must never share a uid: RLIMIT_NPROC is counted per uid,
and the cleanup ``kill(-1)`` as that uid would kill the other's worker. A uid is leased by holding
an ``flock`` on a file in a root-only directory; the kernel drops the lock when the holder dies.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

if sys.platform != "win32":  # leases exist only for a root grader, which Windows never is
    import fcntl
    import grp
    import pwd

_SPAN = 4096  # how many uids above the base a machine may lease at once
DEFAULT_UID_BASE = 64000  # limits.sandbox_uid_base unless the rubric says otherwise


@dataclass
class UidLease:
    uid: int
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing drops the flock
            self._fd = -1


def lease_uid(base: int) -> UidLease:
    """Lease the first free uid in ``[base, base + 4096)`` with no passwd entry and no process (root only)."""
    lock_dir = _lock_dir()
    busy = _uids_with_processes()
    for uid in range(base, base + _SPAN):
        # a real account, or a uid some other tool is using: never run code as it, never kill(-1) as it;
        # nor a gid with a group entry: a worker runs with gid = uid, and its private copy is readable by that gid
        if uid in busy or _has_passwd_entry(uid) or _has_group_entry(uid):
            continue
        fd = os.open(lock_dir / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidLease(uid, fd)
    raise RuntimeError(f"no free sandbox uid in [{base}, {base + _SPAN})")


def _uids_with_processes() -> set[int]:
    busy: set[int] = set()
    for p in psutil.process_iter(["uids"]):
        if p.info["uids"] is not None:
            busy.update(p.info["uids"])
    return busy


def _has_group_entry(gid: int) -> bool:
    try:
        grp.getgrgid(gid)
    except KeyError:
        return False
    return True


def _has_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


_private_dir: Path | None = None


def _lock_dir() -> Path:
    """A root-owned 0700 directory shared by all graders; a private one if the shared one looks tampered.

    The path is fixed (never TMPDIR-dependent): two graders that disagreed on it could lease the same
    uid and kill each other's workers with ``kill(-1)``.
    """
    global _private_dir
    base = next((Path(d) for d in ("/run", "/tmp") if os.path.isdir(d)), Path(tempfile.gettempdir()))
    shared = base / "step4-grader-uids"
    with contextlib.suppress(FileExistsError):
        shared.mkdir(mode=0o700)
    st = os.lstat(shared)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and st.st_mode & 0o077 == 0:
        return shared
    # someone else made it (an old sandbox uid, say): trusting it would let them hand out shared uids
    if _private_dir is None:
        _private_dir = Path(tempfile.mkdtemp(prefix="step4-grader-uids-"))
    return _private_dir
