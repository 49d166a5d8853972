"""Diagnosis: a failing head that behaves like a known bug gets that bug's name and hint.

The probes must tell every chaff apart from the reference and from every other chaff, so the grader
checks itself on its own library: each chaff is diagnosed as exactly itself, and neither the reference
nor any correct variant is ever diagnosed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.diagnosis import Seen, count_diagnoses, diagnose, indistinguishable, same
from grader.head import Head
from grader.library import KnownHead, known_heads, load_reference, reference_path
from grader.models import CheckResult, Diagnosis, GradeResult
from grader.rubric import Rubric
from grader.sandbox import Sandbox, WorkerPool

CHAFFS = known_heads("chaff")
VARIANTS = known_heads("variant")
FAILED = [
    CheckResult(
        id="reference_match", title="t", cites="c", status="failed", score=0, max_score=1, message="m",
        seed=0, duration_s=0,
    )
]  # fmt: skip


@pytest.fixture
def head_of(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> Iterator:  # type: ignore[type-arg]
    """diagnose(FAILED, <head from source>) inside a fresh sandbox."""

    def run(source: str) -> list[Diagnosis]:
        folder = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "attention_head.py").write_text(source, encoding="utf-8")
        with Sandbox(folder, rubric.limits, pool=pool) as sandbox:
            return diagnose(FAILED, Head(sandbox, rubric.entry_points), load_reference())

    yield run


def _chaff(chaff_id: str) -> KnownHead:
    return next(c for c in CHAFFS if c.id == chaff_id)


def test_a_head_that_fails_nothing_is_never_probed() -> None:
    passing = [FAILED[0].model_copy(update={"status": "passed", "score": 1})]
    assert diagnose(passing, None, load_reference()) == []  # type: ignore[arg-type]


def test_matching_compares_shapes_non_finite_patterns_and_values() -> None:
    t = torch.tensor([[1.0, float("nan")], [float("inf"), 0.5]], dtype=torch.float64)

    def seen(x: torch.Tensor) -> list[Seen]:
        return [Seen(values={"r0": x})]

    assert same(seen(t), seen(t + 1e-13))
    assert not same(seen(t), seen(t + 1e-6))
    assert not same(seen(t), seen(t.nan_to_num()))  # NaN is not a number close to anything
    assert not same(seen(t), seen(-t))  # +inf is not -inf
    assert not same(seen(t), seen(t.float()))
    assert not same(seen(t), seen(t[:1]))
    assert same([Seen(error=True)], [Seen(error=True)]) and not same([Seen(error=True)], seen(t))


def test_a_known_bug_is_named_with_its_hint(head_of) -> None:  # type: ignore[no-untyped-def]
    chaff = _chaff("mask_after_softmax_no_renorm")
    [diagnosis] = head_of(chaff.source())
    assert diagnosis == Diagnosis(id=chaff.id, title=chaff.title, hint=chaff.hint, cites="Implementation aside 4.4")
    assert "Implementation aside 4.4" in diagnosis.hint


def test_a_bug_written_another_way_is_still_recognised(head_of) -> None:  # type: ignore[no-untyped-def]
    """The student writes no_scaling with einsum and a hand-made softmax: same numbers, other code."""
    student = (
        reference_path().read_text()
        + """

def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    q, k, v = (torch.einsum("btd,de->bte", X, W) for W in (W_Q, W_K, W_V))
    s = torch.einsum("bie,bje->bij", q, k)
    if causal:
        s = s + torch.full(s.shape[-2:], float("-inf"), dtype=s.dtype).triu(1)
    e = torch.exp(s - s.amax(-1, keepdim=True))
    w = e / e.sum(-1, keepdim=True)
    return w @ v, w
"""
    )
    assert [d.id for d in head_of(student)] == ["no_scaling"]


def test_correct_heads_and_unknown_bugs_get_no_guess(head_of) -> None:  # type: ignore[no-untyped-def]
    assert head_of(reference_path().read_text()) == []
    assert head_of(next(v for v in VARIANTS if v.id == "einsum").source()) == []
    halved = (
        reference_path().read_text()
        + """

_right = causal_self_attention

def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    out, w = _right(X, W_Q, W_K, W_V, causal)
    return 0.5 * out, w
"""
    )
    assert head_of(halved) == []


@pytest.mark.slow
@pytest.mark.parametrize("head", CHAFFS + VARIANTS, ids=[f"{h.kind}:{h.id}" for h in CHAFFS + VARIANTS])
def test_every_chaff_is_named_and_no_variant_is(head: KnownHead, head_of) -> None:  # type: ignore[no-untyped-def]
    expected = [head.id] if head.kind == "chaff" and not indistinguishable(head) else []
    assert [d.id for d in head_of(head.source())] == expected


def test_class_counts() -> None:
    d = Diagnosis(id="no_mask", title="t", hint="h", cites="c")
    results = [
        GradeResult(submission=s, seed=0, score=0, max_score=1, checks=[], diagnosis=ds, rubric="r", duration_s=0)
        for s, ds in (("a", [d]), ("b", [d]), ("c", []))
    ]
    assert count_diagnoses(results) == {"no_mask": 2}
