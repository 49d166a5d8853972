"""Grading by mistakes (issue 16): each named cause costs its price once; never below the per-check sum."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.diagnosis import cause_ids, prices
from grader.diagnosis._mutations import SLOT_OF
from grader.library import known_heads
from grader.models import CheckResult, Diagnosis
from grader.oracle import load_oracle
from grader.rubric import RubricError, load_rubric
from grader.runner import checked_rubric
from grader.scoring import tally


def _check(cid: str, score: float, max_score: float, status: str = "failed", extra: bool = False) -> CheckResult:
    return CheckResult(
        id=cid, title="t", cites="c", status=status, score=score, max_score=max_score, extra_credit=extra,
        message="m", seed=0, duration_s=0,
    )  # type: ignore[arg-type]  # fmt: skip


def _cause(cid: str, explains: list[str], kind: str = "mutation") -> Diagnosis:
    return Diagnosis(id=cid, title=cid, hint="h", cites="c", kind=kind, explains=explains)  # type: ignore[arg-type]


CHECKS = [
    _check("reference_match", 0, 12),
    _check("row_stochastic", 0, 7),
    _check("determinism", 0, 3),
    _check("causal_mask", 7, 7, "passed"),
    _check("student_tests", 0, 9, "skipped"),
]


def test_one_cause_of_many_failures_costs_its_price_once() -> None:
    t = tally(
        CHECKS,
        [_cause("dropout_left_on", ["reference_match", "row_stochastic", "determinism"])],
        {"dropout_left_on": 8},
    )
    assert (t.scoring, t.score_by_checks) == ("mistakes", 7)
    assert t.score == 7 + 22 - 8  # the skipped check's points stay unearned
    assert [d.deduction for d in t.diagnosis] == [8]
    assert t.note and "each charged once" in t.note


def test_an_unexplained_failure_keeps_the_per_check_score_and_says_which() -> None:
    t = tally(CHECKS, [_cause("dropout_left_on", ["reference_match", "row_stochastic"])], {"dropout_left_on": 8})
    assert (t.scoring, t.score) == ("checks", 7)
    assert t.note and "determinism" in t.note
    assert all(d.deduction is None for d in t.diagnosis)


def test_never_below_the_per_check_score() -> None:
    t = tally(CHECKS, [_cause("no_mask", ["reference_match", "row_stochastic", "determinism"])], {"no_mask": 30})
    assert (t.scoring, t.score) == ("checks", 7)
    assert t.note == (
        "Counted by checks: the named causes explain every failing check, but their prices add up to 30 points, "
        "more than the 22 the failing checks cost, so counting by mistakes would give 0; the per-check sum (7) is "
        "higher and stands."
    )
    assert [d.deduction for d in t.diagnosis] == [30]  # the price is shown either way


def test_when_the_two_counts_agree_the_note_says_so_plainly() -> None:
    """Issue 36.12: 'their prices (82 points by mistakes) come to no more than the per-check sum (82)' read as
    if the prices were 82 points. When the counts agree the note says so, and each cause keeps its price."""
    causes = [
        _cause("no_scaling", ["reference_match", "row_stochastic"]),
        _cause("dropout_left_on", ["determinism"]),
    ]
    t = tally(CHECKS, causes, {"no_scaling": 19, "dropout_left_on": 3})  # 22 = what the three failing checks cost
    assert (t.scoring, t.score, t.score_by_checks) == ("checks", 7, 7)
    assert t.note == (
        "Counted by checks: the named causes explain every failing check, and counting each once at its price "
        "gives the same score (7 points)."
    )
    assert [d.deduction for d in t.diagnosis] == [19, 3]


def test_an_unpriced_cause_costs_the_points_of_its_checks_each_once() -> None:
    causes = [
        _cause("no_value_projection", ["reference_match", "row_stochastic"]),
        _cause("dropout_left_on", ["row_stochastic", "determinism"]),
    ]
    t = tally(CHECKS, causes, {"dropout_left_on": 2})
    assert [d.deduction for d in t.diagnosis] == [12, 2]  # row_stochastic is the priced cause's
    assert t.score == 7 + 22 - 14


def test_a_check_a_crash_stopped_is_the_crashs_and_is_never_bought_back() -> None:
    """The crash (unpriced: it costs what it stops) is charged the checks it stopped, even where a mutation
    found where the head runs breaks their property too: a property never observed is never credited."""
    causes = [
        _cause("fixed_size_buffer", ["reference_match", "row_stochastic"], kind="crash"),
        _cause("dropout_left_on", ["row_stochastic", "determinism"]),
    ]
    t = tally(CHECKS, causes, {"dropout_left_on": 2})
    assert [d.deduction for d in t.diagnosis] == [19, 2]  # determinism, which ran, is the mutation's
    assert (t.scoring, t.score) == ("mistakes", 7 + 22 - 21)
    alone = tally(CHECKS, [_cause("fixed_size_buffer", ["reference_match", "row_stochastic", "determinism"], "crash"),
                           _cause("dropout_left_on", ["row_stochastic"])], {"dropout_left_on": 2})  # fmt: skip
    assert (alone.scoring, alone.score) == ("checks", 7)  # = the per-check sum, and each cause shows its price
    assert [d.deduction for d in alone.diagnosis] == [22, 0] and alone.note and "the same score" in alone.note


def test_a_cause_that_breaks_only_extra_credit_costs_nothing() -> None:
    checks = [*CHECKS[:3], _check("kv_cache", 0, 3, extra=True)]
    causes = [
        _cause("dropout_left_on", ["reference_match", "row_stochastic", "determinism"]),
        _cause("kv_cache_no_append", ["kv_cache"], kind="known"),
    ]
    t = tally(checks, causes, {"dropout_left_on": 8, "kv_cache_no_append": 5})
    assert [d.deduction for d in t.diagnosis] == [8, 0]
    assert t.score == 22 - 8


def test_no_failure_no_counting() -> None:
    t = tally([CHECKS[3]], [], {})
    assert (t.scoring, t.score, t.note) == ("checks", 7, None)


def test_every_cause_of_the_error_model_and_the_library_has_a_default_price() -> None:
    """The prices live with the causes (causes.toml, the chaff catalog); the bundled rubric overrides none. A
    crash that depends on the input has none: it costs the points of the checks it stops (at most its cap); nor
    has a head's answer with no finite number, which costs the checks that could not observe it (issue 30)."""
    oracle = load_oracle()
    defaults = prices({}, oracle)
    unpriced = {
        "fixed_size_buffer",
        "branch_crash",
        "unsupported_dtype",
        "width_crash",
        "non_finite_outputs",
        "one_value_breach",
    }
    assert set(SLOT_OF) <= set(defaults)
    assert {c.id for c in known_heads("chaff")} <= set(defaults)
    assert cause_ids() - unpriced == set(defaults) and not unpriced & set(defaults)
    assert load_rubric().mistakes == {}
    assert prices({"no_scaling": 1.5}, oracle) == defaults | {"no_scaling": 1.5}


def test_a_price_for_an_unknown_cause_is_refused(tmp_path: Path) -> None:
    bundled = Path(__file__).resolve().parent.parent / "rubrics" / "step4.toml"
    path = tmp_path / "r.toml"
    path.write_text(bundled.read_text() + "no_such_mistake = 3\n")
    load_rubric(path)  # the schema alone holds: the ids are the runner's to match
    with pytest.raises(RubricError, match="mistakes.no_such_mistake: no such cause"):
        checked_rubric(path)
    path.write_text(bundled.read_text() + "no_scaling = -1\n")
    with pytest.raises(RubricError, match="mistakes.no_scaling"):
        load_rubric(path)


def test_a_crash_where_the_head_runs_elsewhere_never_costs_more_than_its_cap() -> None:
    """Issue 30: an unpriced cause costs the points of the checks it explains, but at most its cap."""
    from grader.diagnosis._causes import caps
    from grader.models import CheckResult, Diagnosis
    from grader.scoring import tally

    def check(cid: str, lost: float) -> CheckResult:
        status = "failed" if lost else "passed"
        return CheckResult(
            id=cid, title=cid, cites="", status=status, score=10 - lost, max_score=10, message="", seed=0, duration_s=0
        )

    checks = [check("a", 10), check("b", 10), check("c", 10), check("d", 0)]
    crash = Diagnosis(id="fixed_size_buffer", title="t", hint="h", cites="c", kind="crash", explains=["a", "b", "c"])
    assert caps()["fixed_size_buffer"] == 25
    uncapped = tally(checks, [crash], {})
    capped = tally(checks, [crash], {}, caps())
    assert uncapped.score == 10 and uncapped.scoring == "checks"
    assert capped.score == 15 and capped.scoring == "mistakes" and capped.diagnosis[0].deduction == 25
