"""Shared fixtures: one warm worker pool and the bundled rubric for the whole session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.rubric import Rubric, load_rubric
from grader.sandbox import WorkerPool

REPO = Path(__file__).resolve().parent.parent
# Hostile submissions hand in test files of their own (run by the student_tests check, in the sandbox):
# never collected by this session.
collect_ignore_glob = ["hostile/*/*.py"]


@pytest.fixture(scope="session")
def rubric() -> Rubric:
    return load_rubric()


@pytest.fixture(scope="session")
def pool(rubric: Rubric) -> Iterator[WorkerPool]:
    with WorkerPool(1, uid_base=rubric.limits.sandbox_uid_base) as p:
        yield p


@pytest.fixture
def write_head(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a module text as attention_head.py in a fresh folder and return the folder."""

    def write(source: str, name: str = "sub") -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "attention_head.py").write_text(source, encoding="utf-8")
        return d

    return write
