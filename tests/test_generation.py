"""Streaming softmax, KV cache and speed (Aside 8.1, Section 8.1, Section 8) through the real grader.

Every test grades a real submission in the sandbox with the bundled rubric: the reference and correct
variants pass, each extension bug fails the check that names it, absent or stubbed extensions are
skipped (never passed), and only a Python double loop is too slow.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from grader.library import KnownHead, known_heads, materialize, reference_path
from grader.models import CheckResult
from grader.report import wording
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

GENERATION = ["streaming_softmax", "kv_cache", "performance"]
CHAFFS = {h.id: h for h in known_heads("chaff")}
VARIANTS = {h.id: h for h in known_heads("variant")}
TEMPLATE = Path(__file__).resolve().parents[1] / "student_template" / "attention_head.py"
_FOLDERS = itertools.count()


def _results(source: str, write_head, rubric: Rubric, pool: WorkerPool, only: list[str]) -> dict[str, CheckResult]:  # type: ignore[no-untyped-def]
    folder = write_head(source, name=f"sub{next(_FOLDERS)}")
    result = grade(folder, rubric, only=only, pool=pool, label="attention_head.py")
    return {c.id: c for c in result.checks}


def test_checks_are_in_the_rubric(rubric: Rubric) -> None:
    for cid in GENERATION:
        assert rubric.checks[cid].enabled
    assert rubric.checks["streaming_softmax"].extra_credit and rubric.checks["kv_cache"].extra_credit
    assert not rubric.checks["performance"].extra_credit


def test_reference_passes(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    res = _results(reference_path().read_text(), write_head, rubric, pool, GENERATION)
    assert {cid: r.status for cid, r in res.items()} == dict.fromkeys(GENERATION, "passed"), res
    assert "block sizes [1, 2, 3, 4, 5, 7, 8, 12, 15]" in res["streaming_softmax"].message
    peak = re.search(r"at T = 1024 it allocated ([\d.]+) MB at most", res["streaming_softmax"].message)
    assert peak is not None and float(peak.group(1)) < 2.5  # measured 1.2 MB; one T x T matrix is 8.4 MB
    ratio = re.match(r"([\d.]+)x the time of the plain batched formula at T = 1024", res["performance"].message)
    assert ratio is not None and float(ratio.group(1)) < 5, res["performance"].message


@pytest.mark.parametrize(
    ("variant", "check_id"),
    [
        ("streaming_reverse_blocks", "streaming_softmax"),
        ("kv_cache_list", "kv_cache"),
        ("row_loop", "performance"),
    ],
)
def test_correct_variant_passes(variant: str, check_id: str, write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    res = _results(VARIANTS[variant].source(), write_head, rubric, pool, [check_id])
    assert res[check_id].status == "passed", res[check_id].message


EXTENSION_CHAFFS = [h for h in CHAFFS.values() if h.function in ("streaming_attention", "cached_attention_step")]


@pytest.mark.parametrize("head", EXTENSION_CHAFFS, ids=[h.id for h in EXTENSION_CHAFFS])
def test_extension_chaff_is_caught_by_its_check(head: KnownHead, write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    res = _results(head.source(), write_head, rubric, pool, ["streaming_softmax", "kv_cache"])
    failing = {cid for cid, r in res.items() if r.status != "passed"}
    assert failing == set(head.caught_by), {cid: r.message for cid, r in res.items()}
    msg = wording.text(res[head.caught_by[0]])
    assert "Smallest failing input: B=1, T=2" in msg or "Smallest failing input: B=2, T=3" in msg, msg
    assert f"Reproduce: grade attention_head.py --only {head.caught_by[0]} --seed 20417" in msg


def test_streaming_messages_say_what_to_fix(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    rescale = _results(CHAFFS["streaming_no_rescale"].source(), write_head, rubric, pool, ["streaming_softmax"])
    assert rescale["streaming_softmax"].message.startswith(
        "streaming_attention differs from dense attention (Aside 8.1: streaming is an exact reorganisation) "
        "with block_size = 1 (2 blocks for T = 2); worst at query row 1.\n"
    )
    assert "multiply the old denominator and numerator by exp(m_old - m_new)" in rescale["streaming_softmax"].message
    local = _results(CHAFFS["streaming_local_mask_index"].source(), write_head, rubric, pool, ["streaming_softmax"])
    assert "Row 0 should equal v_0 exactly but reads later keys" in local["streaming_softmax"].message


def test_kv_messages_say_what_went_wrong(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    no_append = _results(CHAFFS["kv_cache_no_append"].source(), write_head, rubric, pool, ["kv_cache"])["kv_cache"]
    assert no_append.message.startswith(
        "len(cache) after each of the 2 steps was [0, 0], expected [1, 2]: after step 0 (positions 0..0 "
        "fed) the "
        "cache should hold 1 position(s) but holds 0."
    )
    self_excl = _results(CHAFFS["kv_cache_excludes_self"].source(), write_head, rubric, pool, ["kv_cache"])["kv_cache"]
    assert self_excl.message.startswith(
        "Decoding step 1 (the new position attends to positions 0..1, itself included) differs from row 1 "
        "of the "
        "full causal head; step 0 matches"
    )


def test_streaming_that_builds_the_full_matrix_fails_on_memory(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    dense = """
def streaming_attention(Q, K, V, block_size, causal=True):
    T = Q.shape[1]
    s = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])  # (B, T, T): not streaming at all
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ V
"""
    res = _results(materialize(dense), write_head, rubric, pool, ["streaming_softmax"])["streaming_softmax"]
    assert res.status == "failed"
    assert res.message.startswith("streaming_attention materialises a T x T matrix: at T = 1024 (B = 1, d_k = d_v = 16")
    assert "one T x T float64 matrix is 8.4 MB and at most 4.2 MB is allowed" in res.message


def test_absent_extensions_are_skipped_not_passed(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    source = reference_path().read_text() + "\n\ndel streaming_attention, KVCache, cached_attention_step\n"
    res = _results(source, write_head, rubric, pool, ["streaming_softmax", "kv_cache"])
    assert res["streaming_softmax"].status == "skipped"
    assert res["streaming_softmax"].message == (
        "Optional: your submission does not define `streaming_attention`; not graded."
    )
    assert res["kv_cache"].status == "skipped" and "does not define `KVCache`" in res["kv_cache"].message
    assert res["kv_cache"].score == 0


def test_template_stubs_are_skipped(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    res = _results(TEMPLATE.read_text(), write_head, rubric, pool, ["streaming_softmax", "kv_cache"])
    assert res["streaming_softmax"].status == "skipped"
    assert res["streaming_softmax"].message == (
        "Optional extension not attempted: `streaming_attention` raises NotImplementedError (the template "
        "stub); "
        "not graded."
    )
    assert res["kv_cache"].status == "skipped"
    assert "`KVCache` or `cached_attention_step` raises NotImplementedError" in res["kv_cache"].message


def test_not_implemented_after_the_first_call_is_an_error(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    partial = """
_reference_streaming = streaming_attention


def streaming_attention(Q, K, V, block_size, causal=True):
    if not causal:
        raise NotImplementedError("only the causal case")
    return _reference_streaming(Q, K, V, block_size, causal)
"""
    res = _results(materialize(partial), write_head, rubric, pool, ["streaming_softmax"])["streaming_softmax"]
    assert res.status == "error" and "NotImplementedError: only the causal case" in res.message


def test_python_double_loop_is_too_slow(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    res = _results(CHAFFS["python_double_loop"].source(), write_head, rubric, pool, ["performance"])["performance"]
    assert res.status == "failed"
    m = re.match(r"Your head is (\d+)x slower than the plain batched formula already at T = 256 ", res.message)
    assert m is not None and int(m.group(1)) > 100, res.message  # measured 1200-2000x
    assert "Reproduce: grade attention_head.py --only performance --seed 20417" in wording.text(res)
