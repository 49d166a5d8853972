"""The grader's own files as a source tree that pip can install: the Gradescope bundle and the student kit.

Both rebuild a ``pyproject.toml`` around files taken from the installed package (or the checkout), so
an instructor who installed the grader from a wheel can still build them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from pathlib import Path

from grader._paths import _MAPPED, _PACKAGE, bundled

STUDENT_KIT = "step4-grader-student"  # the student kit's distribution (grader/kit.py builds it)


def package_files(leave_out: Collection[str] = ()) -> list[tuple[str, Path]]:
    """(path inside the source tree, file) for the whole installed package and its data; ``leave_out`` names
    bundled folders (``_MAPPED`` keys: "reference", "rubrics", ...) to leave out."""
    skip_dirs = {"__pycache__"}
    files: list[tuple[str, Path]] = []

    def walk(src: Path, dest: str, exclude_top: set[str]) -> None:
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if rel.parts[0] in exclude_top or skip_dirs & set(rel.parts) or path.suffix == ".pyc":
                continue
            if path.is_file() and not path.is_symlink():
                files.append((f"{dest}/{rel.as_posix()}", path))

    walk(_PACKAGE, "grader", set(_MAPPED.values()))
    for name, mapped in _MAPPED.items():
        if name not in leave_out and bundled(name).is_dir():
            walk(bundled(name), f"grader/{mapped}", set())
    return files


# What only the instructor's own machine uses (grade similarity): never installed by the kit or the bundle.
INSTRUCTOR_ONLY = frozenset({"copydetect"})


def dependencies() -> list[str]:
    """The grader's requirements for a rebuilt tree (the student kit, the Gradescope bundle): no extras,
    nothing in :data:`INSTRUCTOR_ONLY`."""
    from importlib import metadata

    try:
        found = [r for r in metadata.requires("step4-grader") or [] if "extra ==" not in r]
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        import tomllib

        project = tomllib.loads((_PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
        found = list(project["project"]["dependencies"])
    return [r for r in found if re.split(r"[\s<>=!~\[;@]", r, maxsplit=1)[0].lower() not in INSTRUCTOR_ONLY]


def pyproject(files: Sequence[tuple[str, object]], name: str = "step4-grader") -> str:
    """A pyproject.toml that installs the tree of ``files`` as the distribution ``name``."""
    import grader

    dirs = sorted({path.rsplit("/", 1)[0] for path, _ in files})
    packages = [d for d in dirs if not any(part.startswith(".") for part in d.split("/"))]
    data: dict[str, list[str]] = {}
    for path, _ in files:
        if path.endswith(".py"):
            continue
        owner = max((p for p in packages if path.startswith(p + "/")), key=len)
        data.setdefault(owner, []).append(path[len(owner) + 1 :])
    quote = json.dumps
    lines = [
        "[build-system]",
        'requires = ["setuptools>=68"]',
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        f"name = {quote(name)}",
        f"version = {quote(grader.__version__)}",
        'requires-python = ">=3.11"',
        f"dependencies = [{', '.join(quote(d) for d in dependencies())}]",
        "",
        "[project.scripts]",
        'grade = "grader.cli:run"',
        "",
        "[project.entry-points.pytest11]",
        'step4 = "grader.pytest_plugin"',
        "",
        "[tool.setuptools]",
        f"packages = [{', '.join(quote(p.replace('/', '.')) for p in packages)}]",
        "",
        "[tool.setuptools.package-data]",
    ]
    lines += [
        f"{quote(p.replace('/', '.'))} = [{', '.join(quote(f) for f in sorted(fs))}]" for p, fs in sorted(data.items())
    ]
    return "\n".join(lines) + "\n"
