"""The grader validates itself on the instructor's library of heads.

Every known bug (chaff) must fail exactly the checks it breaks (its mutation's in the error model, or
its catalog entry's) and pass all others (so a bug confined to one function costs no points elsewhere);
every correct-but-different head (variant) must get full marks: no false alarms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.diagnosis import caught_by
from grader.library import KnownHead, known_heads, materialize, reference_path
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

CHAFFS = known_heads("chaff")
VARIANTS = known_heads("variant")


def _grade(head_source: str, tmp: Path, rubric: Rubric, pool: WorkerPool):  # type: ignore[no-untyped-def]
    (tmp / "attention_head.py").write_text(head_source, encoding="utf-8")
    return grade(tmp, rubric, pool=pool)


def test_reference_gets_full_marks(rubric: Rubric, pool: WorkerPool) -> None:
    """The bundled reference submission: the head and the instructor's own tests (Exercise 2)."""
    result = grade(reference_path().parent, rubric, pool=pool)
    not_passed = {c.id: c.message for c in result.checks if c.status not in ("passed", "skipped")}
    assert not_passed == {}
    assert {c.id for c in result.checks if c.status == "skipped"} == {"fused_kernel_cuda"}
    extra = sum(c.score for c in result.checks if c.extra_credit)
    assert result.score == result.max_score + extra


@pytest.mark.parametrize("head", VARIANTS, ids=[h.id for h in VARIANTS])
def test_correct_variant_gets_full_marks(head: KnownHead, tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    result = _grade(head.source(), tmp_path, rubric, pool)
    not_passed = {c.id: c.message for c in result.checks if c.status not in ("passed", "skipped")}
    assert not_passed == {}, f"false alarm on correct head {head.id}"


@pytest.mark.parametrize("head", CHAFFS, ids=[h.id for h in CHAFFS])
def test_chaff_fails_exactly_its_checks(head: KnownHead, tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    result = _grade(head.source(), tmp_path, rubric, pool)
    failing = {c.id for c in result.checks if c.status in ("failed", "error", "timeout")}
    assert failing == set(caught_by(head)), {c.id: c.message for c in result.checks if c.id in failing}
    for check in result.checks:
        if check.id in failing:
            assert check.reproduce is not None and check.reproduce.startswith("grade ")
            assert f"--only {check.id} --seed " in check.reproduce and "Reproduce:" not in check.message


def test_every_chaff_is_caught_by_some_check() -> None:
    assert len(CHAFFS) >= 15
    assert all(caught_by(h) for h in CHAFFS), [h.id for h in CHAFFS if not caught_by(h)]


def test_catalog_matches_files() -> None:
    for kind, heads in (("chaff", CHAFFS), ("variant", VARIANTS)):
        folder = reference_path().parent / f"{kind}s"
        assert {h.id for h in heads} == {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}


def test_materialize_appends_override() -> None:
    src = materialize("def extra():\n    return 1\n")
    assert src.startswith(reference_path().read_text()) and src.rstrip().endswith("return 1")
