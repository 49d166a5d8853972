"""The diagnosis's engine (issue 51, point 4): one state, rules with declared reads and writes, one acceptance point,
a fixpoint; and the same causes for a head whatever order the rules are listed in."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import grader.diagnosis._examine as examine_module
import grader.diagnosis._rules as rules_module
from grader.diagnosis._engine import BudgetSpent, Engine, Rule, Slot
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

REPO = Path(__file__).resolve().parents[1]


def _rule(name: str, reads: str, fn: Any, **default: object) -> Rule:
    return Rule(name, tuple(reads.split()), tuple(default), fn, default)


def _toys() -> list[Rule]:
    """x -> double -> plus (reads x and double) -> total; and a rule that reads nothing given but x."""
    return [
        _rule("double", "x", lambda s: {"double": 2 * s.x}, double=0),
        _rule("plus", "x double", lambda s: {"plus": s.x + s.double}, plus=Slot("double")),
        _rule("total", "plus double", lambda s: {"total": [s.plus, s.double]}, total=[]),
        _rule("square", "x", lambda s: {"square": s.x * s.x}, square=0),
    ]


def test_the_rules_run_once_each_after_their_writers_and_reach_the_fixpoint() -> None:
    engine = Engine(list(reversed(_toys())), {"x": 3})
    values = engine.run()
    assert (values["double"], values["plus"], values["total"], values["square"]) == (6, 9, [9, 6], 9)
    assert sorted(engine.order) == ["double", "plus", "square", "total"]  # each once
    assert engine.order.index("double") < engine.order.index("plus") < engine.order.index("total")
    assert engine.unfinished == () and engine.passes.raised == []
    assert {s.name: (s.runs, s.changed) for s in engine.passes.steps.values()}["plus"] == (1, True)


@pytest.mark.parametrize("seed", range(5))
def test_shuffled_rules_give_the_same_state(seed: int) -> None:
    rules = _toys()
    random.Random(seed).shuffle(rules)
    assert Engine(rules, {"x": 5}).run() == Engine(_toys(), {"x": 5}).run()


def test_a_slot_has_one_writer() -> None:
    twice = [*_toys(), _rule("again", "x", lambda s: {"double": 0}, double=0)]
    with pytest.raises(ValueError, match="two writers"):
        Engine(twice, {"x": 1})
    with pytest.raises(ValueError, match="two writers"):  # a given slot is the caller's
        Engine([_rule("x", "double", lambda s: {"x": 0}, x=0), *_toys()], {"x": 1})
    with pytest.raises(ValueError, match="never written"):
        Engine([_rule("lonely", "nowhere", lambda s: {"y": 0}, y=0)], {"x": 1})


def test_a_rule_reads_and_writes_only_what_it_declares() -> None:
    engine = Engine(_toys(), {"x": 1})
    plus = engine.rules[1]
    with pytest.raises(ValueError, match="beyond the slots it writes"):
        engine.accept(plus, {"plus": 1, "square": 4})
    with pytest.raises(ValueError, match="lacks"):
        engine.accept(plus, {})
    assert "square" not in engine.values
    assert engine.accept(plus, {"plus": 1}) == ["plus"] and engine.versions["plus"] == 1
    assert engine.accept(plus, {"plus": 1}) == [] and engine.versions["plus"] == 1  # the same value: no change


@pytest.mark.diagnosis_error
def test_a_rule_that_raises_or_strays_answers_its_default_and_is_recorded() -> None:
    def peek(s: Any) -> Mapping[str, object]:
        return {"plus": s.square}  # a slot it does not declare

    rules = [*_toys()[:1], _rule("plus", "x double", peek, plus=Slot("double")), *_toys()[2:]]
    rules.append(_rule("stray", "x", lambda s: {"stray": 1, "square": 2}, stray=-1))
    engine = Engine(rules, {"x": 2})
    values = engine.run()
    assert values["plus"] == 4 and values["stray"] == -1 and values["square"] == 4
    assert [name for name, _ in engine.passes.raised] == ["plus", "stray"]
    error = engine.passes.error()
    assert error is not None and error.type == "AttributeError" and error.passes == ["plus", "stray"]
    steps = {s.name: s for s in engine.passes.steps.values()}
    assert steps["plus"].raised == 1 and steps["plus"].changed == 0 and steps["double"].raised == 0


@pytest.mark.diagnosis_error
def test_the_budget_ends_with_the_rules_left_said() -> None:
    engine = Engine(_toys(), {"x": 1}, max_runs=2)
    values = engine.run()
    assert len(engine.order) == 2 and set(engine.unfinished) == {"double", "plus", "square", "total"} - set(
        engine.order
    )
    assert "total" not in values
    [(name, exc)] = engine.passes.raised
    assert name == "engine" and isinstance(exc, BudgetSpent)
    assert all(r in str(exc) for r in engine.unfinished)


@pytest.mark.diagnosis_error
def test_a_budget_of_seconds_ends_too() -> None:
    slow = _rule("slow", "x", lambda s: time.sleep(0.05) or {"slow": 1}, slow=0)
    engine = Engine([slow, *_toys()], {"x": 1}, max_seconds=0.01)
    engine.run()
    assert engine.order == ["slow"] and len(engine.unfinished) == 4
    assert "0.01 s" in str(engine.passes.raised[0][1])


@pytest.mark.diagnosis_error
def test_a_budget_that_ends_the_diagnosis_is_said_in_the_result(
    rubric: Rubric, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never silent: the grade's diagnosis_error names the engine and the rules left, and the grade is
    provisional (never below the per-check sum)."""

    @dataclasses.dataclass
    class Tight(Engine):
        max_runs: int | None = 5

    monkeypatch.setattr(examine_module, "Engine", Tight)
    result = grade(REPO / "tests" / "realistic" / "mask_fill_minus_1e9.py", rubric, pool=pool, visuals=False)
    error = result.diagnosis_error
    assert error is not None and error.passes == ["engine"] and error.type == "BudgetSpent"
    assert "prove" in error.message and "search" in error.message
    assert result.provisional and result.score >= (result.score_by_checks or 0.0)
    # where the head runs first (its lengths, flag and widths: 3 rules), then 5 runs of the rest
    assert len(result.diagnosis_steps) == 3 + 5


def test_every_rule_of_the_diagnosis_has_its_slots_and_one_writer_per_slot() -> None:
    """The diagnosis's own rules: built into an engine (one writer per slot, every slot read is written), and a
    cycle-free order exists (the engine would otherwise run a rule before its writers)."""
    given = dict.fromkeys(rules_module.GIVEN)
    engine = Engine(rules_module.RULES, given)
    written = set(given)
    left = list(engine.rules)
    while left:
        ready = [r for r in left if set(r.reads) <= written]
        assert ready, f"a cycle among {[r.name for r in left]}"
        for r in ready:
            written |= set(r.writes)
            left.remove(r)
    assert "causes" in written and "proof" in written


# One head of each kind: two causes, a crash of one branch of the flag with a cause found where the head runs (a
# NumPy head: its breaches named once), a dtype crash merged into one decision, a mask constant, a dtype crash
# beside a fill, a projection left out whose width decides where the head runs.
HEADS = [
    "realistic/d2l_masked_softmax_dropout.py",
    "realistic/numpy_infty_mask.py",
    "realistic/float32_scale_tensor.py",
    "realistic/mask_fill_minus_1e9.py",
    "realistic/naive_softmax_fill_1e8.py",
    "realistic/unprojected_qk.py",
]


@pytest.mark.parametrize("path", HEADS)
def test_the_same_head_gets_the_same_causes_whatever_the_rule_order(
    path: str, rubric: Rubric, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every diagnosis of the grade is run three times on the same check results and head: as the grader runs it
    (the rules as listed, where the head runs first and then on from that state) and from scratch with the rules
    shuffled by two seeds. The causes (ids, titles, explains, lines: every field, so the score counted from them
    too) and the proof are the same, while the rules did run in another order."""
    listed = list(rules_module.RULES)
    original = examine_module._examine
    seen: list[tuple[tuple[str, ...] | None, Any, list[Any]]] = []

    def thrice(
        checks: Any, head: Any, ref: Any, rubric: Any, seed: Any, passes: Any, previous: Any = None, wanted: Any = None
    ) -> examine_module.Examination:
        """The examination as the grader runs it (where the head runs first, then on from that state), and twice
        more from scratch with the rules shuffled."""
        as_run = original(checks, head, ref, rubric, seed, passes, previous, wanted)
        exams = [as_run]
        for shuffle in (1, 2):
            rules = list(listed)
            random.Random(shuffle).shuffle(rules)
            monkeypatch.setattr(rules_module, "RULES", rules)
            exams.append(original(checks, head, ref, rubric, seed, examine_module.Passes(), None, wanted))
        monkeypatch.setattr(rules_module, "RULES", listed)
        seen.append((wanted, previous, exams))
        return as_run

    monkeypatch.setattr(examine_module, "_examine", thrice)
    result = grade(REPO / "tests" / path, rubric, pool=pool, visuals=False)
    assert result.diagnosis and result.diagnosis_error is None and seen
    names = sorted(r.name for r in listed)
    assert [wanted for wanted, _, _ in seen][-1] is None  # the last examination is the whole diagnosis
    for wanted, previous, exams in seen:
        first, *others = exams
        for other in others:
            assert [d.model_dump() for d in other.causes] == [d.model_dump() for d in first.causes]
            assert other.proof == first.proof and other.where == first.where and other.stopped == first.stopped
            assert other.error is None and other.unfinished == ()
            if wanted is None:  # every rule ran once from scratch; as run, once over both examinations
                assert sorted(other.order) == names
                assert set(first.order) | set(previous.order if previous else ()) == set(names)
        if wanted is None:
            assert exams[1].order != exams[2].order  # the shuffles did change the order the rules ran in


def test_the_report_says_how_the_causes_were_found(rubric: Rubric, pool: WorkerPool) -> None:
    """Issue 51: the result records each rule that ran, in order, with its words; the report's "how these causes
    were found" lists them, the ones that found something marked. A passing head ran no rule and shows none."""
    from grader.report.html import render_html

    result = grade(REPO / "tests" / "realistic" / "mask_fill_minus_1e9.py", rubric, pool=pool, visuals=False)
    steps = result.diagnosis_steps
    assert [s.name for s in steps][:3] == ["by_size", "by_flag", "by_width"]  # where the head runs, first
    assert sorted(s.name for s in steps) == sorted(r.name for r in rules_module.RULES)  # every rule ran, once
    assert all(s.says == rules_module.SAYS[s.name] and s.runs == 1 for s in steps)
    assert any(s.changed for s in steps if s.name == "search")
    page = render_html(result)
    section = page[page.index('<details class="how-found">') : page.index("</details>", page.index("how-found"))]
    assert f"{len(steps)} steps, in the order they ran" in section
    assert section.count("<li>") == len(steps)
    assert "searched the error model" in section and "found something" in section and "found nothing" in section
    passing = grade(REPO / "reference" / "attention_head.py", rubric, pool=pool, visuals=False)
    assert passing.diagnosis_steps == [] and "how-found" not in render_html(passing)
