"""The entries of a class folder: one submission each, who handed it in and when, and every entry left out with
its reason (issue 54: nothing a user handed in is dropped without a word).

    SUBMISSIONS_DIR -> survey -> Survey(entries, left out with a reason, notes)   (an unexpected layout: LayoutError)

An entry is a folder, a ``.py``, a ``.zip`` or a ``.ipynb``; its name is the student id. A Gradescope "Export
Submissions" folder (``submission_<n>/`` folders beside ``submission_metadata.yml``) is read too, with the
submitter's SID (or e-mail) as the id, their names and e-mails, and the submission's ``created_at``. Two entries
of one student (``u1901.py`` and ``u1901.zip``, ``U1902/`` and ``u1902/``, one SID twice in an export) keep two
report folders (``u1901``, ``u1901-2``) and one ``student``: the gradebook counts one of them
(:mod:`grader.gradebook`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

KINDS = (".py", ".zip", ".ipynb")
GRADESCOPE_METADATA = "submission_metadata.yml"
# The files a batch writes at the top of its output folder: no submission id may take one of these names.
RESERVED = {
    "grades.csv",
    "gradebook.csv",
    "superseded.csv",
    "overrides.csv",
    "summary.html",
    "similarity.csv",
    "similarity.html",
}
# What an operating system leaves in a folder (the macOS Finder's, Windows Explorer's): never anyone's work.
SYSTEM_NAMES = frozenset({"__MACOSX", "__pycache__", ".DS_Store", "Thumbs.db", "desktop.ini"})
_UNSAFE = re.compile(r"[^\w.@+-]")
_MAX_ID = 100
_WHEN = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d+))?\s*(Z|UTC|[+-]\d{2}:?\d{2})?")


class LayoutError(ValueError):
    """A class folder laid out so that grading it would mean a silent choice: a usage error, said plainly."""


@dataclass(frozen=True)
class Person:
    """Someone who handed a submission in, as the export names them (each part may be unknown: "")."""

    name: str = ""
    email: str = ""
    sid: str = ""


@dataclass(frozen=True)
class Entry:
    """One submission in SUBMISSIONS_DIR."""

    id: str  # safe as a single path component, unique in the class (its report folder)
    path: Path  # the folder, .py, .zip or .ipynb as found
    submitters: tuple[str, ...] = ()  # names, from Gradescope's metadata
    student: str = ""  # whose it is: entries with the same student are one student's submissions ("" -> the id)
    people: tuple[Person, ...] = ()  # from Gradescope's metadata
    submitted_at: str = ""  # ISO 8601 in UTC; "" when unknown
    dated_by: str = ""  # where submitted_at comes from: "created_at" (the export's) or "file time"

    def __post_init__(self) -> None:
        if not self.student:
            object.__setattr__(self, "student", self.id.lower())


@dataclass(frozen=True)
class Left:
    """An entry of the folder that is not graded, and why."""

    name: str
    reason: str


@dataclass
class Survey:
    """What a class folder holds: the submissions, the entries left out (each with its reason) and notes."""

    root: Path  # the folder holding the entries (an unpacked export's folder inside the one given)
    entries: list[Entry]
    left: list[Left] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def safe_id(name: str) -> str:
    """``name`` as one safe path component: separators and odd characters become ``_``, no leading dot."""
    cleaned = _UNSAFE.sub("_", name).strip(".")[:_MAX_ID].strip(".") or "submission"
    return f"_{cleaned}" if cleaned in RESERVED else cleaned


def _system(name: str) -> bool:
    return name in SYSTEM_NAMES or name.startswith("._")


def survey(root: Path, *, exclude: Path | None = None) -> Survey:
    """The submissions under ``root`` in id order, every other entry with the reason it is not graded, and notes.

    ``exclude``: a path never taken as a submission (the output folder, when it lies inside ``root``). Raises
    NotADirectoryError for a path that is no folder, and :class:`LayoutError` for a folder holding a Gradescope
    export beside other entries (or several exports): which of them is the class is the instructor's to say.
    """
    root = Path(root)
    skip = exclude.resolve() if exclude is not None else None
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a folder of submissions")
    notes: list[str] = []
    if not (root / GRADESCOPE_METADATA).is_file():
        root = _export_inside(root, skip, notes)
    metadata = _gradescope_metadata(root / GRADESCOPE_METADATA)
    entries: list[Entry] = []
    left: list[Left] = []
    system: list[str] = []
    taken: set[str] = set()
    for path in sorted(root.iterdir()):
        name = path.name
        if name == GRADESCOPE_METADATA:
            continue
        if skip is not None and path.resolve() == skip:
            notes.append(f"{name}/ is the output folder: not a submission")
            continue
        if _system(name):
            system.append(name)
            continue
        if name.startswith("."):
            left.append(Left(name, "hidden (its name starts with a dot)"))
            continue
        if not (path.is_dir() or path.suffix in KINDS):
            left.append(Left(name, "not a folder, .py, .zip or .ipynb"))
            continue
        people, created = metadata.get(name, ((), ""))
        wanted = next((v for p in people for v in (p.sid, p.email) if v), None)
        given = wanted or (name if path.is_dir() else path.stem)
        base = safe_id(given)
        sid, k = base, 2
        while sid.lower() in taken:
            sid, k = f"{base}-{k}", k + 1
        if sid != base or base != given:
            notes.append(f"{name} is graded as {sid!r}")
        taken.add(sid.lower())
        when, dated_by = (_iso(created), "created_at") if _iso(created) else (_file_time(path), "file time")
        entries.append(
            Entry(
                sid,
                path,
                tuple(p.name for p in people if p.name),
                student=base.lower(),
                people=people,
                submitted_at=when,
                dated_by=dated_by,
            )
        )
    if system:
        notes.append(f"ignored {len(system)} entries an operating system left (not anyone's work): {', '.join(system)}")
    return Survey(root, sorted(entries, key=lambda e: e.id), left, notes)


def discover(root: Path, *, exclude: Path | None = None) -> tuple[list[Entry], list[str]]:
    """:func:`survey` as entries and notes, an entry left out being a note ("skipped notes.txt: ...")."""
    found = survey(root, exclude=exclude)
    return found.entries, found.notes + [f"skipped {x.name}: {x.reason}" for x in found.left]


def _export_inside(root: Path, skip: Path | None, notes: list[str]) -> Path:
    """The unpacked export zip holds one ``assignment_<n>_export/`` folder: that folder is the class. Beside other
    entries, or beside another export, the layout is unexpected: a :class:`LayoutError`, never a silent choice."""
    exports = [p for p in sorted(root.iterdir()) if p.is_dir() and (p / GRADESCOPE_METADATA).is_file()]
    if not exports:
        return root
    if len(exports) > 1:
        names = ", ".join(f"{p.name}/" for p in exports)
        raise LayoutError(f"{root} holds {len(exports)} Gradescope exports ({names}): grade each one by itself")
    others = [
        p.name
        for p in sorted(root.iterdir())
        if p != exports[0] and not _system(p.name) and not (skip is not None and p.resolve() == skip)
    ]
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise LayoutError(
            f"{root} holds a Gradescope export ({exports[0].name}/) beside {len(others)} other "
            f"entr{'y' if len(others) == 1 else 'ies'} ({shown}): grade the export by itself "
            f"(grade batch {exports[0]} ...), or move the other entries into a folder of their own"
        )
    notes.append(f"graded the Gradescope export in {exports[0].name}/")
    return exports[0]


def _gradescope_metadata(path: Path) -> dict[str, tuple[tuple[Person, ...], str]]:
    """``submission_<n>`` -> its submitters and its ``created_at``, from Gradescope's export metadata.

    The file is YAML written by Ruby (keys like ``:submitters:``); only each top-level entry's submitters block
    and ``:created_at:`` are read, line by line, so no YAML library is needed.
    """
    if not path.is_file():
        return {}
    people: dict[str, list[dict[str, str]]] = {}
    created: dict[str, str] = {}
    current: str | None = None
    block: int | None = None  # indentation of the ":submitters:" key while inside its list
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#") or raw.startswith("---"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0:
            current, block = (line[:-1].strip("'\""), None) if line.endswith(":") else (None, None)
            if current is not None:
                people[current] = []
            continue
        if current is None:
            continue
        if line == ":submitters:":
            block = indent
            continue
        if block is not None and (indent < block or (indent == block and not line.startswith("-"))):
            block = None
        if block is None:
            m = re.fullmatch(r":created_at:\s*(.*)", line)
            if m:
                created[current] = m.group(1).strip().strip("'\"")
            continue
        if line.startswith("- "):
            people[current].append({})
            line = line[2:].strip()
        m = re.fullmatch(r":(name|sid|email):\s*(.*)", line)
        if m and people[current]:
            people[current][-1][m.group(1)] = m.group(2).strip().strip("'\"")
    return {
        key: (
            tuple(Person(p.get("name", ""), p.get("email", ""), p.get("sid", "")) for p in found),
            created.get(key, ""),
        )
        for key, found in people.items()
    }


def _iso(text: str) -> str:
    """A Gradescope time ("2026-02-01 10:00:00.000000000 -08:00") as ISO 8601 in UTC; "" when it is none."""
    m = _WHEN.search(text or "")
    if m is None:
        return ""
    day, clock, fraction, offset = m.groups()
    offset = "+00:00" if offset in (None, "Z", "UTC") else offset
    if ":" not in offset:
        offset = f"{offset[:3]}:{offset[3:]}"
    try:
        when = datetime.fromisoformat(f"{day}T{clock}.{(fraction or '0')[:6]:0<6}{offset}")
    except ValueError:
        return ""
    return when.astimezone(UTC).isoformat()


def _file_time(path: Path) -> str:
    """When the entry's files were last written (a folder: its newest file), as ISO 8601 in UTC."""
    try:
        files = [path] if not path.is_dir() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
        stamp = max((p.stat().st_mtime for p in files), default=path.stat().st_mtime)
    except OSError:
        return ""
    return datetime.fromtimestamp(stamp, UTC).isoformat()
