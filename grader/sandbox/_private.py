"""Private folders for copies of submissions, and the paths no worker may ever see.

Every private copy (a prepared submission, a sandbox's workspace, a student-test run's folder) lives in
one per-user folder that others can enter but not list::

    <tmp>/step4-grader-<euid>/        0711 grader
      sub-XXXX/      0700 grader      the prepared submission (the grader reads it; no worker does)
      suite-XXXX/    0700 grader      one run of a student's tests: their files and one head
      sandbox-XXXX/  0700 grader, or 0750 root:<slot gid> as root (see _workspace)

Each folder is locked (``flock`` on the folder itself) for as long as its creator uses it, so a grader
that starts removes the folders that a killed run (``kill -9``) left behind, and never those of a
grader running meanwhile: a folder whose lock can be taken is stale.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

_WINDOWS = sys.platform == "win32"
if _WINDOWS:
    import msvcrt
else:
    import fcntl

KINDS = ("sub", "suite", "sandbox")
_LOCK_FILE = ".lock"
_HELD_SUFFIX = ".held"  # Windows: a folder's lock is a locked file beside it (a folder cannot be locked there)
_REMOVE_TRIES_S = 5.0  # Windows: a killed worker's open files close a moment after it is gone
_root: Path | None = None
_root_lock = threading.Lock()


def private_root() -> Path:
    """This user's folder of private copies, made (0711) on first use; stale copies in it are removed then.

    The name is fixed per user, so later runs find what a killed one left. If someone else made it (or
    it is a link), a fresh folder of our own is used instead, and nothing is swept.
    """
    global _root
    with _root_lock:
        if _root is not None and _root.is_dir():
            return _root
        euid = os.geteuid() if hasattr(os, "geteuid") else 0
        shared = Path(tempfile.gettempdir()) / f"step4-grader-{euid}"
        with contextlib.suppress(FileExistsError):
            shared.mkdir(mode=0o711)
        st = os.lstat(shared)
        # Windows: the user's own temp folder, protected by its ACL (no uid, no mode bits to check)
        if stat.S_ISDIR(st.st_mode) and (_WINDOWS or (st.st_uid == euid and st.st_mode & 0o022 == 0)):
            os.chmod(shared, 0o711)  # enter only: nobody else may list the copies' names
            _root = shared
            sweep_stale(shared)
        else:
            _root = Path(tempfile.mkdtemp(prefix=f"step4-grader-{euid}-"))
            os.chmod(_root, 0o711)
        return _root


class PrivateDir:
    """A fresh 0700 folder in :func:`private_root`, locked until :meth:`remove`."""

    def __init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind of private folder {kind!r}")
        root = private_root()
        with _creating(root):  # a sweep never sees it between mkdtemp and the lock
            self.path = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=root))
            self._fd = _hold(self.path)

    def remove(self) -> None:
        """Delete the folder and drop its lock; idempotent."""
        try:
            if _WINDOWS and self._fd >= 0:  # an open file cannot be deleted there: unlock, then remove both
                os.close(self._fd)
                self._fd = -1
            remove_tree(self.path)
        finally:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if _WINDOWS:
                with contextlib.suppress(OSError):
                    os.remove(str(self.path) + _HELD_SUFFIX)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _hold(folder: Path) -> int:
    """Lock ``folder`` for as long as the returned fd is open: ``flock`` on the folder itself, or on
    Windows a locked ``<folder>.held`` file beside it (the folder's files are copied as a submission)."""
    if sys.platform == "win32":  # (not _WINDOWS: mypy narrows only this test)
        fd = os.open(str(folder) + _HELD_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_NOINHERIT, 0o600)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            os.close(fd)
            raise
        return fd
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _held_elsewhere(folder: str) -> bool:
    """Whether a live grader holds ``folder`` (its lock cannot be taken); a folder that cannot even be
    opened counts as held (it is left alone)."""
    try:
        fd = _hold(Path(folder))
    except BlockingIOError:
        return True
    except OSError:
        # Windows reports a range locked by another process as EACCES (msvcrt.locking), not EWOULDBLOCK
        return True
    os.close(fd)  # ours: nobody else can take it meanwhile (the caller holds the sweep lock)
    return False


@contextlib.contextmanager
def _creating(root: Path, *, sweep: bool = False) -> Iterator[None]:
    """Shared while a folder is made and locked; exclusive while stale ones are looked for."""
    if sys.platform == "win32":  # no shared locks there: one creator or sweeper at a time (milliseconds each)
        fd = os.open(root / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOINHERIT, 0o600)
        try:
            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                    break
                except OSError:
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # closing the file drops its locks
        return
    fd = os.open(root / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if sweep else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def sweep_stale(root: Path | None = None) -> list[Path]:
    """Remove the private folders in ``root`` that nobody holds (left by a killed run); returns them."""
    root = private_root() if root is None else root
    removed: list[Path] = []
    with _creating(root, sweep=True):
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if not entry.name.startswith(tuple(f"{k}-" for k in KINDS)) or not entry.is_dir(follow_symlinks=False):
                continue
            if _WINDOWS:
                if _held_elsewhere(entry.path):  # a live grader's copy
                    continue
                remove_tree(Path(entry.path), patient=False)
                with contextlib.suppress(OSError):
                    os.remove(entry.path + _HELD_SUFFIX)
                removed.append(Path(entry.path))
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live grader's copy
                continue
            finally:
                os.close(fd)  # ours, if we got it: nobody else can take it meanwhile (we hold the sweep lock)
            remove_tree(Path(entry.path))
            removed.append(Path(entry.path))
    return removed


def remove_tree(root: Path, *, patient: bool = True) -> None:
    """Delete a private folder, whatever permissions the student gave the files in it.

    On Windows a read-only file (our 0400 copies) must be made writable first, and a file that a killed
    worker still held open stays undeletable for a moment after the kill: each failure is retried for a
    few seconds (``patient``), and what still resists then is left (the next start's sweep removes it)."""
    if not root.exists():
        return
    if not _WINDOWS:
        _open_up(root)
        shutil.rmtree(root, ignore_errors=True)
        return

    def writable_then_retry(function: object, path: str, exc: BaseException) -> None:
        with contextlib.suppress(OSError):
            os.chmod(path, stat.S_IWRITE | stat.S_IREAD)
        with contextlib.suppress(OSError):
            function(path)  # type: ignore[operator]

    deadline = time.monotonic() + (_REMOVE_TRIES_S if patient else 0)
    while True:
        with contextlib.suppress(OSError):
            if sys.version_info >= (3, 12):
                shutil.rmtree(root, onexc=writable_then_retry)
            else:  # pragma: no cover - the Windows kit's Python is 3.12 or later in practice
                shutil.rmtree(root, onerror=lambda f, p, e: writable_then_retry(f, p, e[1]))
        if not root.exists() or time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def _open_up(root: Path) -> None:
    """Make every directory writable: a non-root grader cannot empty a 0500 src copy or a dir the
    student chmod-ed to 000. Symlinks are skipped, since chmod would follow them out of the tree."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return  # root needs no permission bits to delete
    os.chmod(root, 0o700)
    for parent, dirs, _ in os.walk(root):  # top-down: each dir is opened up before the walk enters it
        for name in dirs:
            path = os.path.join(parent, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)


# -- secrets ----------------------------------------------------------------------------------------


def secret_paths(extra: Sequence[Path] = ()) -> list[str]:
    """Folders a worker must never read, nor anything inside them: the grader package (its data:
    reference, chaffs, rubrics, snapshots), the bundled data wherever it lies, every private copy, and
    ``extra`` (a batch's submissions and output folders)."""
    from grader import _paths

    found = [_paths._PACKAGE, *(_paths.bundled(name) for name in _paths._MAPPED), private_root(), *extra]
    found += installed_copies()
    return sorted({os.path.realpath(p) for p in found})


def installed_copies() -> list[Path]:
    """Every copy of the grader package an import path holds, not only the one imported here: tests run
    from a checkout beside a ``pip install .`` copy in site-packages, with its own reference."""
    import site

    roots = [*sys.path, *site.getsitepackages(), site.getusersitepackages()]
    found = []
    for root in dict.fromkeys(r for r in roots if r and os.path.isabs(r)):
        package = Path(root) / "grader"
        with contextlib.suppress(OSError):
            if (package / "_paths.py").is_file() and (package / "sandbox" / "_filesystem.py").is_file():
                found.append(package)
    return found


def guarded_paths(extra: Sequence[Path] = ()) -> list[str]:
    """Folders a worker may not read as a whole, though a folder inside one may be granted (a virtual
    environment inside the checkout): the source checkout, the grader's working folder, and ``extra``
    (/autograder, which holds the grader's virtual environment beside its source and the submission)."""
    from grader import _paths

    found: list[Path] = list(extra)
    checkout = _paths._PACKAGE.parent
    if (checkout / "pyproject.toml").is_file():  # a source checkout (editable install), not site-packages
        found.append(checkout)
    with contextlib.suppress(OSError):
        cwd = os.path.realpath(Path.cwd())
        system = ("/", "/usr", "/lib", "/etc", "/bin", "/sbin", "/var")
        installed = (sys.prefix, sys.base_prefix, *sysconfig.get_paths().values())
        libraries = {os.path.realpath(p) for p in installed if p}
        if cwd not in system and not any(_inside(cwd, lib) for lib in libraries):  # never cut Python's own folders
            found.append(Path(cwd))
    return sorted({os.path.realpath(p) for p in found})


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
