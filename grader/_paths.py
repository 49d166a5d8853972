"""Where bundled data lives: inside the installed package, or at the top of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_MAPPED = {"reference": "_reference", "rubrics": "_rubrics", "student_template": "_student_template"}


def bundled(name: str) -> Path:
    """Folder ``name`` (reference, rubrics, student_template) as shipped by ``pip install .``."""
    installed = _PACKAGE / _MAPPED[name]
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name  # running from a source checkout
