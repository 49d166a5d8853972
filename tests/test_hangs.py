"""Issue 11, part 1: a hanging function costs only its own checks.

The submissions are the reference with one override from tests/hostile/hangs/ (as chaffs are built).
Limits are small (per-call 2-3 s) so that the whole grades stay fast; the default limits were measured
by hand (see the report of issue 11).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from grader._hangs import CallSize, Hang, HangRegistry, TimeShares, call_size
from grader.batch import run_batch
from grader.head import Head, StudentFailure
from grader.inputs import Shape, make_case
from grader.library import materialize
from grader.models import GradeResult
from grader.rubric import Rubric, RubricError, load_rubric
from grader.runner import grade
from grader.sandbox import Sandbox, SandboxLimits, WorkerPool

HANGS = Path(__file__).resolve().parent / "hostile" / "hangs"
HOSTILE = HANGS.parent


def _submission(tmp_path: Path, override: str) -> Path:
    folder = tmp_path / override
    folder.mkdir()
    source = materialize((HANGS / f"{override}.py").read_text(encoding="utf-8"))
    (folder / "attention_head.py").write_text(source, encoding="utf-8")
    return folder


def _tight(rubric: Rubric, **limits: float) -> Rubric:
    return rubric.model_copy(update={"limits": rubric.limits.model_copy(update=limits)})


def _statuses(result: GradeResult) -> dict[str, str]:
    return {c.id: c.status for c in result.checks}


def _message(result: GradeResult, check_id: str) -> str:
    return next(c.message for c in result.checks if c.id == check_id)


# -- the bookkeeping, without a worker ----------------------------------------------------------------


def _attention_size(B: int, T: int, d: int) -> CallSize:
    case = make_case(Shape(B, T, d, 2, 3), seed=1)
    size = call_size("causal_self_attention", {}, case.tensors())
    assert size is not None
    return size


def test_a_hang_covers_longer_sequences_and_more_elements_at_the_same_length() -> None:
    hang = _attention_size(2, 8, 4)
    assert hang.described == "B=2, T=8, d=4, d_k=2, d_v=3 (float64)"
    assert _attention_size(1, 9, 1).at_least(hang)  # T is the work axis
    assert _attention_size(3, 8, 4).at_least(hang)  # same T, more elements
    assert not _attention_size(1, 8, 4).at_least(hang)  # same T, fewer elements: still tried
    assert not _attention_size(9, 7, 9).at_least(hang)  # shorter: still tried


def test_statistics_sizes_compare_component_by_component() -> None:
    def size(d_k: int, T: int, n: int) -> CallSize:
        kwargs = {"T": {"v": T}, "n_samples": {"v": n}, "seed": {"v": 0}}
        found = call_size("score_scale_statistics", {"args": [{"v": d_k}], "kwargs": kwargs}, {})
        assert found is not None
        return found

    hang = size(16, 64, 200)
    assert size(16, 64, 200).at_least(hang) and size(64, 128, 500).at_least(hang)
    assert not size(64, 128, 100).at_least(hang)  # fewer samples: still tried
    assert call_size("score_scale_statistics", {"args": [{"v": 4}]}, {}) is None  # defaults unknown: no guess


def test_the_registry_names_the_check_and_both_inputs() -> None:
    registry = HangRegistry()
    size = call_size("gaussian_positional_weights", {"args": [{"v": 32}, {"v": 2.0}]}, {})
    assert size is not None
    registry.record("gaussian_positional_weights", Hang("gaussian_positional_weights", size, "gaussian_kernel"))
    small = call_size("gaussian_positional_weights", {"args": [{"v": 8}, {"v": 2.0}]}, {})
    large = call_size("gaussian_positional_weights", {"args": [{"v": 64}, {"v": 0.5}]}, {})
    assert registry.covering("gaussian_positional_weights", small) is None
    assert registry.covering("gaussian_positional_qk", large) is None  # another function: its own record
    earlier = registry.covering("gaussian_positional_weights", large)
    assert earlier is not None
    assert earlier.refusal(large) == (  # type: ignore[arg-type]
        "`gaussian_positional_weights` timed out earlier in check gaussian_kernel on input T=32, bandwidth=2; "
        "not called again on inputs at least as large (this one: T=64, bandwidth=0.5)"
    )


def test_time_shares_bound_each_function_by_its_own_share() -> None:
    limits = SandboxLimits(per_call_timeout_s=20, per_submission_timeout_s=100)
    shares = TimeShares(limits)
    assert shares.timeout_s("causal_self_attention") == 20  # the per-call limit while the share lasts
    shares.charge("causal_self_attention", 45)
    assert shares.timeout_s("causal_self_attention") == pytest.approx(5)  # 50 s share, 45 s spent
    assert shares.timeout_s("gaussian_positional_weights") == pytest.approx(8)  # untouched by the head's spending
    shares.charge("KVCache", 6)  # a decode: the cache class and the step share one share
    assert shares.timeout_s("cached_attention_step") == 0
    assert shares.timeout_s(None) == 20  # no student function: the per-call limit


def test_shares_are_validated_and_stated_in_the_rubric(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sum to 1.3"):
        SandboxLimits(function_budget_share={"causal_self_attention": 0.92})  # type: ignore[arg-type]
    text = (Path(__file__).resolve().parent.parent / "rubrics" / "step4.toml").read_text(encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("[limits]\n", "[limits]\nfunction_budget_share = { gaussian = 0.1 }\n", 1))
    with pytest.raises(RubricError, match="limits.function_budget_share.gaussian"):
        load_rubric(bad)
    good = tmp_path / "good.toml"
    good.write_text(text.replace("[limits]\n", "[limits]\nfunction_budget_share = { streaming_attention = 0.1 }\n", 1))
    assert load_rubric(good).limits.function_budget_share.streaming_attention == 0.1


# -- the boundary: Head over a real worker ------------------------------------------------------------


def test_head_refuses_a_larger_input_at_once_and_still_tries_smaller_ones(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    limits = SandboxLimits(per_call_timeout_s=1.5, per_submission_timeout_s=60)
    folder = _submission(tmp_path, "hang_T_gt_5")
    lines = (folder / "attention_head.py").read_text(encoding="utf-8").splitlines()
    sleep = next(n for n, text in enumerate(lines, start=1) if "_time.sleep(60)" in text)
    with Sandbox(folder, limits, pool=pool) as sandbox:
        head = Head(sandbox, rubric.entry_points)
        head.current_check = "causal_mask"
        with pytest.raises(StudentFailure) as hung:
            head.attention(make_case(Shape(2, 8, 4, 2, 3), seed=1))
        assert hung.value.status == "timeout"
        first, second, *where = hung.value.message.splitlines()  # one first line for every call it stops (issue 53)
        assert first == "`causal_self_attention` ran past the per-call limit (1.5 s)"
        assert second == (
            "It did not finish within 1.5 s on input B=2, T=8, d=4, d_k=2, d_v=3 (float64); the worker was stopped."
        )
        # the worker said where the time went, shortly before the limit: the sleep in the loop
        assert where == [f"It was at attention_head.py:{sleep} (`_time.sleep(60)`) when the limit came."], where
        head.current_check = "performance"
        t0 = time.monotonic()
        with pytest.raises(StudentFailure) as refused:
            head.attention(make_case(Shape(1, 64, 4, 2, 3), seed=2))
        assert time.monotonic() - t0 < 0.5  # not called: no second wait
        assert refused.value.status == "timeout"
        assert refused.value.message.startswith(
            "`causal_self_attention` ran past the per-call limit (1.5 s)\n"
            "`causal_self_attention` timed out earlier in check causal_mask on input B=2, T=8, d=4, d_k=2, d_v=3 "
            "(float64); not called again on inputs at least as large (this one: B=1, T=64"
        )
        assert head.attention(make_case(Shape(2, 5, 4, 2, 3), seed=3)).out.shape == (2, 5, 3)  # smaller: tried
        assert head.gaussian_weights(12, 2.0).shape == (12, 12)  # another function: untouched
        assert len(head.hangs) == 1


def test_a_call_outside_the_checks_waits_a_part_of_the_limit_on_a_function_that_hung(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """Issue 51: a head that hangs beyond T = 5 took 62 s to grade: after its check's hang (20 s), the diagnosis's
    own probes met the hang twice more at inputs the first does not cover (B=1, T=8; T=7), 20 s each. A call made
    outside the checks to a function that hung before waits a quarter of the per-call limit; a function that never
    hung keeps the whole limit, and a check's call too."""
    from grader.head import AFTER_HANG

    limits = SandboxLimits(per_call_timeout_s=2.0, per_submission_timeout_s=60)
    with Sandbox(_submission(tmp_path, "hang_T_gt_5"), limits, pool=pool) as sandbox:
        head = Head(sandbox, rubric.entry_points)
        head.current_check = "causal_mask"
        with pytest.raises(StudentFailure):
            head.attention(make_case(Shape(2, 8, 4, 2, 3), seed=1))
        head.current_check = None  # the diagnosis
        with pytest.raises(StudentFailure) as hung:
            head.attention(make_case(Shape(1, 7, 4, 3, 2), seed=2))  # not covered by the first: called
        assert hung.value.status == "timeout"
        assert hung.value.message == (
            "`causal_self_attention` ran past the per-call limit (2 s)\n"
            f"`causal_self_attention` did not finish within {AFTER_HANG * 2.0:.3g} s on input B=1, T=7, d=4, d_k=3, "
            "d_v=2 (float64), the limit of a call the diagnosis makes to a function that ran past the per-call "
            "limit before; the worker was stopped."
        )
        # a later refusal it causes says the per-call limit, as every refusal of this function does
        head.current_check = "causal_mask"
        with pytest.raises(StudentFailure) as refused:
            head.attention(make_case(Shape(1, 7, 4, 3, 2), seed=5))
        assert refused.value.message.startswith("`causal_self_attention` ran past the per-call limit (2 s)\n")
        head.current_check = None
        assert head.attention(make_case(Shape(1, 5, 4, 3, 2), seed=3)).out.shape == (1, 5, 2)  # it runs there
        head.current_check = "future_perturbation"
        with pytest.raises(StudentFailure) as in_a_check:
            head.attention(make_case(Shape(1, 6, 4, 3, 2), seed=4))
        assert "ran past the per-call limit (2 s)" in in_a_check.value.message  # a check's call: the whole limit


def test_a_function_that_spent_its_share_is_not_called_again(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    # 1 s of a 100 s budget, far below the 20 s per-call limit; the other functions keep their default shares
    # (score_scale_statistics: 10 s), which no busy machine spends on the small call below (issue 36)
    share = {"causal_self_attention": 0.01}
    limits = SandboxLimits(per_call_timeout_s=20, per_submission_timeout_s=100, function_budget_share=share)  # type: ignore[arg-type]
    with Sandbox(_submission(tmp_path, "hang_T_gt_5"), limits, pool=pool) as sandbox:
        head = Head(sandbox, rubric.entry_points)
        t0 = time.monotonic()
        with pytest.raises(StudentFailure, match=r"did not finish within 1 s, what was left of its share"):
            head.attention(make_case(Shape(1, 6, 2, 2, 2), seed=1))
        assert time.monotonic() - t0 < limits.per_call_timeout_s  # its share, not the per-call limit
        with pytest.raises(StudentFailure) as spent:
            head.attention(make_case(Shape(1, 1, 2, 2, 2), seed=2))  # small, but the share is gone
        assert spent.value.status == "timeout"
        assert spent.value.message == (
            "`causal_self_attention` has used up its share of the time budget (1 s of the submission's 100 s, "
            "limits.function_budget_share); not called again"
        )
        assert head.statistics(4, T=8, n_samples=10, seed=0)["raw_std"] > 0  # its own share is intact


# -- whole grades ----------------------------------------------------------------------------------------


def test_a_head_hanging_beyond_T_5_loses_only_the_checks_that_call_it(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    per_call = 3.0
    result = grade(_submission(tmp_path, "hang_T_gt_5"), _tight(rubric, per_call_timeout_s=per_call), pool=pool)
    status = _statuses(result)
    for cid in ("gaussian_kernel", "gaussian_qk", "score_scale_experiment", "streaming_softmax", "kv_cache"):
        assert status[cid] == "passed", (cid, _message(result, cid))
    assert status["row_stochastic"] == "timeout"
    # interface meets the hang first (its lengths: issue 30), at T = 8; a hang is not its verdict
    assert status["interface"] == "passed"
    assert "timed out earlier in check interface on input B=2, T=8" in _message(result, "row_stochastic")
    # each distinct hang waits once (T = 8 in interface, then the T = 6 precision probe), no more: a refused
    # check waits for no hang, and at most two checks lasted a per-call limit (counted, not timed against the
    # grade's own work, which a busy machine stretches: issue 36)
    refused = [c for c in result.checks if "timed out earlier" in c.message]
    assert len(refused) >= 8 and all(c.duration_s < per_call for c in refused if c.status == "timeout")
    assert sum(c.duration_s >= per_call for c in result.checks) <= 2


def test_a_head_hanging_beyond_T_64_keeps_every_small_shape_check(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    result = grade(_submission(tmp_path, "hang_T_gt_64"), _tight(rubric, per_call_timeout_s=3.0), pool=pool)
    status = _statuses(result)
    small = ("interface", "row_stochastic", "causal_mask", "future_perturbation", "reference_match", "gaussian_kernel")
    assert {cid: status[cid] for cid in small} == dict.fromkeys(small, "passed")
    assert status["performance"] == "timeout"
    # met first by interface at T = 129 (its lengths, issue 30), which a hang does not fail
    assert "timed out earlier in check interface on input B=2, T=129" in _message(result, "performance")
    assert {cid for cid, s in status.items() if s not in ("passed", "skipped")} == {"performance"}


def test_a_submission_whose_every_function_hangs_is_bounded_by_the_budget(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    budget = 16.0
    tight = _tight(rubric, per_call_timeout_s=2.0, per_submission_timeout_s=budget)
    result = grade(_submission(tmp_path, "hang_everything"), tight, pool=pool)
    assert result.duration_s < budget + 6  # the budget, plus the grader's own work
    honest = ("did not finish within", "timed out earlier in check", "used up its share of the time budget")
    for c in result.checks:
        if c.status == "skipped":
            continue
        assert c.status == "timeout", (c.id, c.message)
        assert any(h in c.message for h in honest), (c.id, c.message)
    assert _statuses(result)["gaussian_kernel"] == "timeout"
    assert "`gaussian_positional_weights` did not finish" in _message(result, "gaussian_kernel")


def test_an_import_hang_is_a_timeout_in_every_verdict_and_in_the_batch(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    subs = tmp_path / "subs"
    shutil.copytree(HOSTILE / "import_hang", subs / "import_hang")
    tight = _tight(rubric, import_timeout_s=1.5, per_call_timeout_s=2.0, per_submission_timeout_s=20.0)
    report = run_batch(subs, tmp_path / "out", tight, jobs=1, pool=pool)
    (outcome,) = report.outcomes
    assert outcome.status == "timeout"  # not "crashed"
    for c in outcome.result.checks:
        if c.status != "skipped":
            assert c.status == "timeout", (c.id, c.message)
            assert "importing" in c.message and "attention_head.py" in c.message, (c.id, c.message)
    assert outcome.result.duration_s < 10
