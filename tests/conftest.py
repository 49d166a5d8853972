"""Shared fixtures: one warm worker pool and the bundled rubric for the whole session."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import grader.runner
from grader.diagnosis._examine import Passes
from grader.rubric import Rubric, load_rubric
from grader.sandbox import WorkerPool

if TYPE_CHECKING:
    from batch_helpers import FakeGrade

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
def fake(monkeypatch: pytest.MonkeyPatch, rubric: Rubric) -> FakeGrade:
    """grader.runner.grade replaced by :class:`batch_helpers.FakeGrade`, for what a batch does around grading
    (imported here, not above: tests/test_never_silent.py runs this file alone, in a folder of its own)."""
    from batch_helpers import FakeGrade

    f = FakeGrade(rubric)
    monkeypatch.setattr(grader.runner, "grade", f)
    return f


@pytest.fixture
def write_head(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a module text as attention_head.py in a fresh folder and return the folder."""

    def write(source: str, name: str = "sub") -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "attention_head.py").write_text(source, encoding="utf-8")
        return d

    return write


@pytest.fixture(autouse=True)
def diagnosis_never_raises(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any test during which the grader's own code raised inside the diagnosis (issue 35): ``examine``
    records such an exception in the result instead of raising, so a test that only compares causes could pass
    over it. A test that provokes one on purpose says so with ``@pytest.mark.diagnosis_error``."""
    raised: list[tuple[str, BaseException]] = []
    record = Passes.record

    def watched(self: Passes, name: str, exc: BaseException) -> None:
        raised.append((name, exc))
        record(self, name, exc)

    monkeypatch.setattr(Passes, "record", watched)
    yield
    if raised and request.node.get_closest_marker("diagnosis_error") is None:
        told = "\n".join(f"pass {name}:\n{''.join(traceback.format_exception(exc))}" for name, exc in raised)
        pytest.fail(f"the diagnosis raised inside the grader ({len(raised)} time(s)):\n{told}", pytrace=False)
