"""A private directory per sandbox: a read-only copy of the submission and a scratch work dir.

    <private root>/sandbox-XXXX/   0700 grader; as root 0750 root:<slot gid> (the slot enters, nobody else)
      src/                         0500 grader; as root 0550 root:<slot gid>: regular files, 0400 / 0440
      work/                        0700 worker: its cwd, HOME and TMPDIR

The worker never runs inside the submission directory (module shadowing), cannot edit the source it
is graded on, and, running as its own uid, cannot write anywhere the grader owns. As root, only the
slot's own uid (whose gid is the same number) can read the copy: not another slot's worker, not any
other user. The folder is locked while in use, so a grader killed with ``kill -9`` leaves a copy that
the next start removes (``_private``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from grader.sandbox._private import PrivateDir, remove_tree

__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "Workspace", "remove_tree"]

MAX_FILE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 32 << 20
MAX_FILES = 256
# Windows has no O_NOFOLLOW (the scandir test above already skipped links), and os.open there reads and
# writes in text mode unless told otherwise: a CRLF source must be copied byte for byte
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


class Workspace:
    def __init__(self, submission_dir: Path, uid: int | None) -> None:
        self._dir = PrivateDir("sandbox")
        try:
            self.root = self._dir.path
            self.src = self.root / "src"
            self.work = self.root / "work"
            self.src.mkdir(mode=0o700)
            self.work.mkdir(mode=0o700)
            self.skipped = _copy_regular_files(Path(submission_dir), self.src)
            self._restrict(uid)
        except BaseException:
            self._dir.remove()
            raise

    def _restrict(self, uid: int | None) -> None:
        """Readable by the worker only: as root, by the slot's uid through the group (the worker drops to
        gid = uid with no other groups), so it may read but never change its copy."""
        files = [self.src / name for name in os.listdir(self.src)]
        if uid is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
            for f in files:
                os.chmod(f, 0o400)
            os.chmod(self.src, 0o500)
            return
        me = os.geteuid()
        for f in files:
            os.chown(f, me, uid)
            os.chmod(f, 0o440)
        os.chown(self.src, me, uid)
        os.chmod(self.src, 0o550)
        os.chown(self.work, uid, uid)
        os.chown(self.root, me, uid)
        os.chmod(self.root, 0o750)

    def remove(self) -> None:
        """Delete everything; call only once no worker process is left (nothing can race the walk)."""
        self._dir.remove()


def _copy_regular_files(source: Path, dest: Path) -> list[str]:
    """Copy top-level regular files (no symlinks, no devices, size-capped); returns what was skipped."""
    skipped: list[str] = []
    total = copied = 0
    entries = sorted(os.scandir(source), key=lambda e: e.name) if source.is_dir() else []
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            skipped.append(entry.name)
            continue
        if total + st.st_size > MAX_TOTAL_BYTES or copied >= MAX_FILES:
            skipped.append(entry.name)
            continue
        fd = os.open(entry.path, os.O_RDONLY | _NOFOLLOW)  # it may have become a symlink since
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
        target = dest / entry.name
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        total += len(data)
        copied += 1
    return skipped
