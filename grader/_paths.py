"""Where bundled data lives: inside the installed package, or at the top of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_MAPPED = {
    "reference": "_reference",
    "rubrics": "_rubrics",
    "student_template": "_student_template",
    "snapshots": "_snapshots",  # the student kit's stored reference outputs (grader/kit.py writes them)
}


def bundled(name: str) -> Path:
    """Folder ``name`` (reference, rubrics, student_template, snapshots) as shipped by ``pip install .``."""
    installed = _PACKAGE / _MAPPED[name]
    checkout = _PACKAGE.parent / name
    if installed.is_dir() or not (_PACKAGE.parent / "pyproject.toml").is_file():
        return installed  # installed (the student kit lacks _reference: callers ask whether it exists)
    return checkout  # running from a source checkout
