"""A stand-in for the grading itself, for the tests of what a batch does around it (tests/test_batch.py,
tests/test_class_files.py; the ``fake`` fixture in tests/conftest.py puts it in place): the fake grade reads what to
conclude from the submission's own text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from grader.models import Attempts, CheckResult, Diagnosis, GradeResult
from grader.rubric import Rubric
from grader.submission import SubmissionError


def _passed(cid: str, points: float) -> CheckResult:
    return CheckResult(
        id=cid,
        title=cid,
        cites="",
        status="passed",
        score=points,
        max_score=points,
        message="ok",
        seed=1,
        duration_s=0.01,
    )


class FakeGrade:
    """Stands in for grader.runner.grade: full marks; 'unreadable' is unreadable, 'boom' breaks the grader.

    A submission's text may say what else to conclude: ``score=13`` (the grade), ``timeout=gaussian_kernel`` (that
    check timed out), ``cause=ID:TITLE`` (a root cause), ``reads=20 commands=4`` (hostile attempts counted)."""

    def __init__(self, rubric: Rubric) -> None:
        self.rubric = rubric
        self.calls: list[str] = []
        self.before: dict[str, Any] = {}  # name -> called with the submission's name before it is graded

    def __call__(self, submission: Path, rubric: Rubric, **kw: Any) -> GradeResult:
        path = Path(submission)
        name = path.stem if path.is_file() or path.suffix else path.name
        self.calls.append(name)
        if name in self.before:
            self.before[name](name)
        if name == "unreadable":
            raise SubmissionError("unreadable.py holds no attention_head.py")
        if name == "boom":
            raise RuntimeError("the grader broke")
        text = _text(path)
        said = dict(re.findall(r"(\w+)=(\S+)", text))
        checks = [_passed(cid, rc.points) for cid, rc in rubric.checks.items()]
        score = float(said.get("score", 100.0))
        if "timeout" in said:
            checks = [
                c.model_copy(update={"status": "timeout", "score": 0.0, "message": "did not finish"})
                if c.id == said["timeout"]
                else c
                for c in checks
            ]
        diagnosis = []
        if "cause" in said:
            cid, title = said["cause"].rsplit(":", 1)
            diagnosis = [Diagnosis(id=cid, title=title.replace("_", " "), hint="fix it", cites="Section 9.1")]
        attempts = Attempts(**{k: int(said[k]) for k in ("reads", "writes", "commands", "connections") if k in said})
        return GradeResult(
            submission=kw["label"],
            seed=rubric.seed,
            score=score,
            max_score=100.0,
            checks=checks,
            rubric=rubric.name,
            duration_s=0.05,
            diagnosis=diagnosis,
            attempts=attempts,
        )


def _text(path: Path) -> str:
    if path.is_file():
        return path.read_text(encoding="utf-8", errors="replace")
    found = path / "attention_head.py"
    return found.read_text(encoding="utf-8", errors="replace") if found.is_file() else ""


def _class(root: Path, names: list[str] | dict[str, str]) -> Path:
    """A class folder of ``.py`` submissions: names, or name -> what the fake grade should conclude."""
    root.mkdir()
    said = names if isinstance(names, dict) else dict.fromkeys(names, "")
    for n, text in said.items():
        (root / f"{n}.py").write_text(f"# {n} {text}\n")
    return root
