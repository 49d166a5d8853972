"""Turn what a student hands in (folder, .py, .zip, .ipynb) into a private folder of plain files.

Nothing is executed here. Files are copied as bytes, never through links: zip entries that are links,
absolute or parent-relative paths, or oversized are refused (zip-slip), and notebooks keep only their
code cells with IPython magics and shell lines removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 1 << 20  # 1 MiB per file: a head is a few kB
MAX_FILES = 64


class SubmissionError(ValueError):
    """The submission cannot be read; the message says what to hand in instead."""


@dataclass
class Prepared:
    dir: Path  # private folder holding <module>.py and any other .py files (tests, helpers)
    module_path: Path
    source: str
    notes: list[str] = field(default_factory=list)


def _wanted(rel: PurePosixPath) -> bool:
    """Python files at the top, and test files in tests/ (Exercise 2 student tests)."""
    if rel.suffix != ".py" or any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
        return False
    return len(rel.parts) == 1 or (len(rel.parts) == 2 and rel.parts[0] == "tests")


def _write(dest_root: Path, rel: PurePosixPath, data: bytes) -> None:
    if len(data) > MAX_FILE_BYTES:
        raise SubmissionError(f"{rel} is {len(data)} bytes; files over {MAX_FILE_BYTES} bytes are refused")
    target = dest_root.joinpath(*rel.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _read_regular(path: Path) -> bytes:
    """Read a regular file without following a symlink at the last component."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SubmissionError(f"{path.name} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


def _from_dir(src: Path, dest: Path) -> list[str]:
    count = 0
    for path in sorted(src.rglob("*.py")):
        rel = PurePosixPath(path.relative_to(src).as_posix())
        if not _wanted(rel) or path.is_symlink():
            continue
        count += 1
        if count > MAX_FILES:
            raise SubmissionError(f"more than {MAX_FILES} Python files")
        _write(dest, rel, _read_regular(path))
    return []


def _from_zip(src: Path, dest: Path) -> list[str]:
    notes = []
    try:
        zf = zipfile.ZipFile(src)
    except zipfile.BadZipFile as exc:
        raise SubmissionError(f"{src.name} is not a valid zip file ({exc})") from None
    with zf:
        names = [i for i in zf.infolist() if not i.is_dir()]
        roots = {PurePosixPath(i.filename).parts[0] for i in names}
        # A zip of one folder: strip that folder so attention_head.py sits at the top.
        strip = len(roots) == 1 and all(len(PurePosixPath(i.filename).parts) > 1 for i in names)
        for info in names:
            rel = PurePosixPath(info.filename)
            if rel.is_absolute() or ".." in rel.parts:
                notes.append(f"ignored unsafe path {info.filename!r} in the zip")
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                notes.append(f"ignored symbolic link {info.filename!r} in the zip")
                continue
            if strip:
                rel = PurePosixPath(*rel.parts[1:])
            if not _wanted(rel):
                continue
            if info.file_size > MAX_FILE_BYTES:
                raise SubmissionError(f"{info.filename} is {info.file_size} bytes; larger files are refused")
            with zf.open(info) as fh:
                _write(dest, rel, fh.read(MAX_FILE_BYTES + 1))
    return notes


def notebook_code(text: str) -> str:
    """Code cells of a notebook, with IPython magics (%...) and shell lines (!...) removed."""
    try:
        nb = json.loads(text)
        cells = nb["cells"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise SubmissionError(f"not a Jupyter notebook ({exc})") from None
    chunks = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        lines = src if isinstance(src, list) else src.splitlines(keepends=True)
        kept = [ln for ln in lines if not ln.lstrip().startswith(("%", "!"))]
        chunks.append("".join(kept).rstrip("\n"))
    return "\n\n".join(chunks) + "\n"


@contextlib.contextmanager
def prepare(path: Path, module: str = "attention_head") -> Iterator[Prepared]:
    """Yield a private copy of the submission; removed afterwards."""
    path = Path(path)
    if not path.exists():
        raise SubmissionError(f"{path} does not exist")
    tmp = Path(tempfile.mkdtemp(prefix="step4-sub-"))
    try:
        dest = tmp / "submission"
        dest.mkdir()
        notes: list[str] = []
        if path.is_dir():
            notes = _from_dir(path, dest)
        elif path.suffix == ".zip":
            notes = _from_zip(path, dest)
        elif path.suffix == ".ipynb":
            _write(dest, PurePosixPath(f"{module}.py"), notebook_code(path.read_text(encoding="utf-8")).encode())
        elif path.suffix == ".py":
            _write(dest, PurePosixPath(f"{module}.py"), _read_regular(path))
        else:
            raise SubmissionError(f"{path.name}: expected a folder, a .py file, a .zip or a .ipynb notebook")
        module_path = dest / f"{module}.py"
        if not module_path.is_file():
            raise SubmissionError(f"{path} holds no {module}.py (the file with your head)")
        # A sandbox uid (when grading as root) must read these files but never write them.
        for p in [tmp, *dest.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        source = module_path.read_text(encoding="utf-8", errors="replace")
        yield Prepared(dest, module_path, source, notes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
