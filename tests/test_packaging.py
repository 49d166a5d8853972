"""The wheel holds every package of the grader: a fresh `pip install .` must be able to import all of it.

Tests run against the source tree, so a subpackage missing from pyproject.toml would pass here and break
only for users; this pins the list to the folders.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_grader_package_is_declared() -> None:
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "grader").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk <= declared, f"packages missing from pyproject.toml: {sorted(on_disk - declared)}"


def test_both_editions_register_the_pytest_plugin() -> None:
    """``pytest --step4`` works wherever the grader is installed: this repository's wheel, and the trees
    the student kit and the Gradescope bundle rebuild (grader.packaging.pyproject)."""
    from grader.packaging import package_files, pyproject

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    rebuilt = tomllib.loads(pyproject(package_files(leave_out=("reference",))))["project"]
    for edition in (project, rebuilt):
        assert edition["entry-points"]["pytest11"] == {"step4": "grader.pytest_plugin"}
    assert not any("nbclient" in d or "ipykernel" in d for d in rebuilt["dependencies"])  # Jupyter: test extra only
    # the similarity report is the instructor's: the kit and the bundle never install its matcher
    assert any(d.startswith("copydetect") for d in project["dependencies"])
    assert not any("copydetect" in d for d in rebuilt["dependencies"])
