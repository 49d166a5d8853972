"""Turn what a student hands in (folder, .py, .zip, .ipynb) into a private folder of plain files.

Nothing is executed here. Files are copied as bytes, never through links: zip entries that are links,
absolute or parent-relative paths, or oversized are refused (zip-slip). Folders and zips are read as
students make them: ``__MACOSX/``, AppleDouble ``._*`` files, ``.DS_Store``, ``Thumbs.db`` and hidden
folders are ignored, and the head is found at any depth (``Project Step 4/attention_head.py``); with
several candidates the shallowest is graded and a note names the others. A notebook is reduced to
the definitions the contract names need (:mod:`grader._notebook`); a ``.py`` is imported as it is,
unless ``definitions_only`` asks for the same reduction.

The student's own tests (Exercise 2) come with the head: in a folder or zip, the ``.py`` files beside
the head and in ``tests/`` there; for a single ``.py`` file, the test files beside it (``test_*.py``,
``*_test.py``, ``conftest.py``) and the ``.py`` files of a ``tests/`` folder beside it, so that
``grade attention_head.py`` runs the same tests as ``grade .`` (nothing else of its folder is read).
A notebook brings none: a test file cannot import a notebook. A batch grades a ``.py`` that sits in the
class folder without its neighbours (``tests_beside=False``): they are classmates' files.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import stat
import traceback
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from grader._notebook import Cell, NotANotebook, Reduction, missing_imports, notebook_cells, reduce_cells
from grader.sandbox._private import PrivateDir

if TYPE_CHECKING:
    from grader.rubric import EntryPoints

MAX_FILE_BYTES = 1 << 20  # 1 MiB per file: a head is a few kB
MAX_FILES = 64
MAX_SCANNED = 20_000  # entries looked at in a folder or zip before giving up (a zipped virtualenv)
MAX_DEPTH = 8  # folders deep a head may sit
JUNK_NAMES = {".DS_Store", "Thumbs.db", "desktop.ini"}
JUNK_DIRS = {"__MACOSX", "__pycache__", "node_modules", "site-packages"}
DEFAULT_CONTRACT = (
    "causal_self_attention",
    "gaussian_positional_weights",
    "gaussian_positional_qk",
    "score_scale_statistics",
    "streaming_attention",
    "KVCache",
    "cached_attention_step",
)


class SubmissionError(ValueError):
    """The submission cannot be read; the message says what to hand in instead."""


@dataclass
class Prepared:
    dir: Path  # private folder holding <module>.py and any other .py files (tests, helpers)
    module_path: Path
    source: str
    notes: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # contract name -> the missing package it needs
    provided: list[str] = field(default_factory=list)  # the course's packages (the rubric's), by name
    dropped_cells: list[int] = field(default_factory=list)  # notebook cells not run, numbered as Cell says
    origin: str = ""  # the file the module was made from, when it was reduced (a notebook, a .py): its name
    lines: dict[int, tuple[int, int]] = field(default_factory=dict)  # module line -> (cell, line in it), reduced
    cells_counted: bool = False  # a notebook's cells numbered by their execution counts, In [n] (grader._notebook.Cell)
    notebook: bool = False
    # the SyntaxError importing the module raises, as Python prints it on the student's own file (its name,
    # the line, a caret): the worker's copy is named <module>.py whatever the student called it
    syntax_error: str | None = None


def contract_names(entry: EntryPoints) -> list[str]:
    """The names a submission is graded on (the rubric's entry points), the module name aside."""
    return [name for key, name in entry.model_dump().items() if key != "module"]


def _junk(rel: PurePosixPath) -> bool:
    """Finder and Explorer leftovers, hidden files and folders, caches: never part of a submission."""
    return rel.name in JUNK_NAMES or any(p.startswith(".") or p in JUNK_DIRS for p in rel.parts)


def is_test_file(name: str) -> bool:
    """A file pytest collects by default: ``test_*.py`` or ``*_test.py``."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _test_material(rel: PurePosixPath) -> bool:
    """What a single ``.py`` brings, by its path relative to the file's folder: a test file or conftest.py
    there, or a ``.py`` in ``tests/`` there (as a folder's ``tests/`` is taken)."""
    if rel.suffix != ".py" or _junk(rel):
        return False
    if len(rel.parts) == 1:
        return is_test_file(rel.name) or rel.name == "conftest.py"
    return len(rel.parts) == 2 and rel.parts[0] == "tests"


def brought_beside(head: Path, path: Path) -> bool:
    """Whether ``path`` is one of the files a graded ``head`` (a ``.py``) brings with it: the student's tests."""
    try:
        rel = PurePosixPath(path.relative_to(head.parent).as_posix())
    except ValueError:
        return False
    return head.suffix == ".py" and path != head and _test_material(rel)


def _tests_beside(path: Path) -> Listing:
    """The student's tests beside a graded ``.py`` (see the module docstring): its folder is listed, not
    walked, and only test files are read (the folder may be a crowded Downloads)."""
    found: Listing = {}
    for sub in (PurePosixPath(), PurePosixPath("tests")):
        folder = path.parent.joinpath(*sub.parts)
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            file = folder / name
            if brought_beside(path, file) and not file.is_symlink() and file.is_file():
                found[sub / name] = lambda file=file: _read_regular(file)  # type: ignore[misc]
    return found


def _wanted(rel: PurePosixPath) -> bool:
    """Python files at the top, and test files in tests/ (Exercise 2 student tests)."""
    if rel.suffix != ".py" or _junk(rel):
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
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SubmissionError(f"{path.name} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


Listing = dict[PurePosixPath, Callable[[], bytes]]  # relative path -> reads the file's bytes (capped)


def _list_dir(src: Path) -> Listing:
    """Regular files under ``src`` (symlinks neither followed nor listed), junk left out."""
    found: Listing = {}
    scanned = 0
    for top, dirs, files in os.walk(src):
        here = PurePosixPath(Path(top).relative_to(src).as_posix())
        depth = 0 if str(here) == "." else len(here.parts)
        dirs[:] = sorted(d for d in dirs if not _junk(PurePosixPath(d)) and depth < MAX_DEPTH)
        for name in sorted(files):
            scanned += 1
            if scanned > MAX_SCANNED:
                raise SubmissionError(f"more than {MAX_SCANNED} files: hand in only your code")
            rel = here / name if depth else PurePosixPath(name)
            path = Path(top) / name
            if _junk(rel) or path.is_symlink():
                continue
            found[rel] = lambda path=path: _read_regular(path)  # type: ignore[misc]
    return found


def _list_zip(zf: zipfile.ZipFile, notes: list[str]) -> Listing:
    """The zip's regular files, minus unsafe paths (zip-slip), links, junk; oversized ones refused."""
    found: Listing = {}
    infos = zf.infolist()
    if len(infos) > MAX_SCANNED:
        raise SubmissionError(f"the zip holds more than {MAX_SCANNED} entries: hand in only your code")
    for info in infos:
        if info.is_dir():
            continue
        # Windows PowerShell's Compress-Archive (and other Windows tools) write backslashes; zipfile turns them
        # into slashes on Windows only: read them as separators everywhere, so every platform grades the same
        rel = PurePosixPath(info.filename.replace("\\", "/"))
        if rel.is_absolute() or ".." in rel.parts or (rel.parts and ":" in rel.parts[0]):
            notes.append(f"ignored unsafe path {info.filename!r} in the zip")
            continue
        if stat.S_ISLNK(info.external_attr >> 16):
            notes.append(f"ignored symbolic link {info.filename!r} in the zip")
            continue
        if _junk(rel) or len(rel.parts) > MAX_DEPTH + 1:
            continue

        def read(info: zipfile.ZipInfo = info) -> bytes:
            if info.file_size > MAX_FILE_BYTES:
                raise SubmissionError(f"{info.filename} is {info.file_size} bytes; larger files are refused")
            with zf.open(info) as fh:
                return fh.read(MAX_FILE_BYTES + 1)

        found[rel] = read
    return found


def _choose(listing: Listing, module: str, where: str, notes: list[str]) -> PurePosixPath:
    """The file to grade: the shallowest ``<module>.py`` or notebook (at equal depth the module, then
    path order); a note names the other candidates of the same kind, which are not graded."""

    def kind(p: PurePosixPath) -> int:
        return 0 if p.name == f"{module}.py" else 1 if p.suffix == ".ipynb" else 2

    found = sorted((p for p in listing if kind(p) < 2), key=lambda p: (len(p.parts), kind(p), p.as_posix()))
    if not found:
        raise SubmissionError(_not_found(listing, module, where))
    chosen = found[0]
    same = [p for p in found if kind(p) == kind(chosen)]
    if len(same) > 1:
        others = ", ".join(f"`{p}`" for p in same[1:6]) + (", ..." if len(same) > 6 else "")
        notes.append(f"Graded `{chosen}` (the shallowest of {len(same)} candidates); not graded: {others}.")
    return chosen


def _not_found(listing: Listing, module: str, where: str) -> str:
    """Why ``where`` has nothing to grade: the Python files it does hold, and how to grade the head among them."""
    message = f"{where} holds no {module}.py (the file with your head)"
    found = sorted((p for p in listing if p.suffix == ".py"), key=lambda p: (len(p.parts), p.as_posix()))
    if not found:
        return f"{message}, and no other .py file or notebook either"
    names = [f"`{p}`" for p in found[:5]] + ([f"{len(found) - 5} more"] if len(found) > 5 else [])
    shown = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    how = f"rename {names[0] if len(found) == 1 else 'the one with your head'} to {module}.py"
    if Path(where).is_dir():  # a file beside others is graded by name too (a zip's, once unpacked)
        how += f", or grade it by name{':' if len(found) == 1 else ', as in'} `grade {Path(where) / found[0]}`"
    return f"{message}; it holds {shown}: {how}"


def _copy_tree(listing: Listing, dest: Path, module: str, where: str, notes: list[str]) -> PurePosixPath:
    """Copy the chosen file's folder (its .py files and tests/) into ``dest``; returns the chosen file."""
    chosen = _choose(listing, module, where, notes)
    base = chosen.parent
    count = 0
    for rel, read in sorted(listing.items()):
        if rel == chosen and rel.suffix == ".ipynb":
            continue
        try:
            inner = PurePosixPath(rel.relative_to(base))
        except ValueError:
            continue
        if not _wanted(inner):
            continue
        count += 1
        if count > MAX_FILES:
            raise SubmissionError(f"more than {MAX_FILES} Python files")
        _write(dest, inner, read())
    if chosen.suffix == ".ipynb":
        _write(dest, PurePosixPath(chosen.name), listing[chosen]())
    return PurePosixPath(chosen.name)


def _missing_packages(packages: Sequence[str]) -> list[str]:
    """The rubric's course packages that are not installed where the grader runs."""
    missing = []
    for requirement in packages:
        name = _requirement_name(requirement)
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def _reduce(
    text: str, origin: str, contract: Sequence[str], local: set[str], notebook: bool, provided: Sequence[str]
) -> Reduction:
    if notebook:
        try:
            cells, total = notebook_cells(text)
        except NotANotebook as exc:
            raise SubmissionError(f"{origin} is {exc}") from None
        return reduce_cells(cells, contract, local_modules=local, total_cells=total, provided=provided)
    return reduce_cells([Cell(1, text)], contract, local_modules=local, origin=origin, provided=provided)


def _missing_in(module_path: Path, local: set[str]) -> list[str]:
    """The packages a .py submission imports at its top level that the grader lacks (nothing is run)."""
    if not module_path.is_file():
        return []
    return missing_imports(module_path.read_text(encoding="utf-8", errors="replace"), local)


def syntax_error(data: bytes, name: str) -> str | None:
    """The SyntaxError that importing ``data`` raises, on the student's file ``name``: the exception's line (as
    the worker reports it, the file named), then the offending line and a caret under the place, as Python
    prints them; None when it compiles. Compiling runs none of it."""
    try:
        compile(data, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        shown = "".join(traceback.format_exception_only(type(exc), exc)).splitlines()
        where = [line for line in shown[1:-1] if line.strip()]  # between 'File ...' and 'SyntaxError: ...'
        return "\n".join([f"{type(exc).__name__}: {exc}", *where])
    except ValueError:  # null bytes: the worker's import reports them
        return None
    return None


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~\[;@]", requirement.strip(), maxsplit=1)[0]


@contextlib.contextmanager
def prepare(
    path: Path,
    module: str = "attention_head",
    *,
    contract: Sequence[str] | None = None,
    packages: Sequence[str] = (),
    definitions_only: bool = False,
    tests_beside: bool = True,
) -> Iterator[Prepared]:
    """Yield a private copy of the submission; removed afterwards.

    ``contract``: the names graded (default: the default entry points); a notebook, or a module with
    ``definitions_only``, keeps only what they need. ``packages``: the course packages the rubric
    allows; a note warns about each one not installed here. ``tests_beside``: a single ``.py`` brings the
    student's tests beside it (the module docstring); False for a file among other students' files.
    """
    path = Path(path)
    contract = list(DEFAULT_CONTRACT if contract is None else contract)
    if not path.exists():
        raise SubmissionError(f"{path} does not exist")
    private = PrivateDir("sub")  # 0700, locked while in use: a killed run's copy is swept at the next start
    tmp = private.path
    try:
        dest = tmp / "submission"
        dest.mkdir()
        notes: list[str] = []
        if path.is_dir():
            chosen = _copy_tree(_list_dir(path), dest, module, str(path), notes)
        elif path.suffix == ".zip":
            try:
                zf = zipfile.ZipFile(path)
            except zipfile.BadZipFile as exc:
                raise SubmissionError(f"{path.name} is not a valid zip file ({exc})") from None
            with zf:
                chosen = _copy_tree(_list_zip(zf, notes), dest, module, str(path), notes)
        elif path.suffix in (".ipynb", ".py"):
            chosen = PurePosixPath(path.name if path.suffix == ".ipynb" else f"{module}.py")
            _write(dest, chosen, _read_regular(path))
            beside = _tests_beside(path) if path.suffix == ".py" and tests_beside else {}
            if len(beside) > MAX_FILES:
                raise SubmissionError(f"more than {MAX_FILES} Python test files beside {path.name}")
            for rel, read in sorted(beside.items()):
                _write(dest, rel, read())
        else:
            raise SubmissionError(f"{path.name}: expected a folder, a .py file, a .zip or a .ipynb notebook")
        module_path = dest / f"{module}.py"
        provided = [_requirement_name(p) for p in packages]
        local = {p.stem for p in dest.glob("*.py")} - {module}
        reduction = None
        missing = [] if definitions_only or chosen.suffix == ".ipynb" else _missing_in(module_path, local)
        if chosen.suffix == ".ipynb" or definitions_only or missing:
            source_file = dest / chosen.name
            text = source_file.read_text(encoding="utf-8", errors="replace")
            reduction = _reduce(text, chosen.name, contract, local, chosen.suffix == ".ipynb", provided)
            source_file.unlink()
            module_path.write_text(reduction.source, encoding="utf-8")
            if missing:  # as for a notebook: the package costs only what needs it
                notes.append(
                    f"{chosen.name} imports {', '.join(dict.fromkeys(missing))}, which the grader does not install: "
                    "it was graded on its definitions, and what needs the package could not be graded."
                )
            notes += reduction.notes
        if not module_path.is_file():
            raise SubmissionError(f"{path} holds no {module}.py (the file with your head)")
        for name in _missing_packages(packages):
            notes.append(
                f"The course allows {name}, but it is not installed where this grade ran: code that imports it "
                f"could not be graded here (pip install {name})."
            )
        # Only the grader reads this copy (each worker gets its own, see grader.sandbox._workspace):
        # never readable by anyone else, a classmate's worker included.
        for p in [tmp, dest, *dest.rglob("*")]:
            os.chmod(p, 0o700 if p.is_dir() else 0o600)
        source = module_path.read_text(encoding="utf-8", errors="replace")
        shown_as = path.name if path.suffix == ".py" else chosen.name  # the file the student wrote
        yield Prepared(
            dest,
            module_path,
            source,
            notes,
            unavailable=dict(reduction.unavailable) if reduction else {},
            provided=provided,
            dropped_cells=list(reduction.dropped_cells) if reduction else [],
            origin=chosen.name if reduction else "",
            lines=dict(reduction.lines) if reduction else {},
            cells_counted=bool(reduction and reduction.counted),
            notebook=chosen.suffix == ".ipynb",
            syntax_error=None if reduction else syntax_error(module_path.read_bytes(), shown_as),
        )
    finally:
        private.remove()
