"""A private directory per sandbox: a read-only copy of the submission and a scratch work dir.

    <root>/      0711 grader   (enter only: no listing)
      src/       0555 grader   regular files copied from the submission, 0444
      work/      0700 worker   the worker's cwd, HOME and TMPDIR

The worker never runs inside the submission directory (module shadowing), cannot edit the source it
is graded on, and, running as its own uid, cannot write anywhere the grader owns.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

MAX_FILE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 32 << 20
MAX_FILES = 256


class Workspace:
    def __init__(self, submission_dir: Path, uid: int | None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="step4-sandbox-"))
        os.chmod(self.root, 0o711)
        self.src = self.root / "src"
        self.work = self.root / "work"
        self.src.mkdir(mode=0o755)
        self.work.mkdir(mode=0o700)
        if uid is not None:
            os.chown(self.work, uid, uid)
        self.skipped = _copy_regular_files(Path(submission_dir), self.src)
        os.chmod(self.src, 0o555)

    def remove(self) -> None:
        """Delete everything; call only once no worker process is left (nothing can race the walk)."""
        remove_tree(self.root)


def remove_tree(root: Path) -> None:
    """Delete a workspace left by a sandbox, whatever permissions the student gave its files."""
    if root.exists():
        _open_up(root)
        shutil.rmtree(root, ignore_errors=True)


def _open_up(root: Path) -> None:
    """Make every directory writable: a non-root grader cannot empty our 0555 src copy or a dir the
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
        fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)  # it may have become a symlink since
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
        target = dest / entry.name
        target.write_bytes(data)
        os.chmod(target, 0o444)
        total += len(data)
        copied += 1
    return skipped
