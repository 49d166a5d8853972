"""The strict judge of the generated bench (issue 52), on results written by hand: what counts and what does not."""

from __future__ import annotations

from typing import Any

from generated.heads import Head, Mistake
from generated.strict import judge, summary


def _mistake(kind: str, causes: tuple[str, ...], lines: tuple[int, ...], **kw: Any) -> Mistake:
    fields = {"family": "mask", "finding": (), "spelling": "s", "site": "inline", "cell": None} | kw
    cell = fields.pop("cell")
    where = tuple((cell, line) for line in lines)
    return Mistake(kind, fields["family"], causes, fields["finding"], "s", "inline", lines, where)


def _head(*mistakes: Mistake, notebook: bool = False) -> Head:
    return Head("h", "inline_steps", "", notebook, "", mistakes, ())


def _cause(cid: str, line: int | None, cell: int | None = None, **departure: str) -> dict[str, Any]:
    c: dict[str, Any] = {"id": cid, "where": None if line is None else {"line": line, "cell": cell}}
    if departure:
        c["departure"] = departure
    return c


def _record(*causes: dict[str, Any]) -> dict[str, Any]:
    return {"result": {"diagnosis": list(causes), "score": 80.0, "max_score": 100.0, "checks": []}, "stderr": ""}


def test_the_right_id_at_a_line_to_edit_is_right_and_elsewhere_only_named() -> None:
    head = _head(_mistake("mask_transposed", ("mask_transposed",), (12,)))
    [m] = judge(head, _record(_cause("mask_transposed", 12))).mistakes
    assert m["strict"] and m["named"] and m["found"] and m["at_line"]
    [m] = judge(head, _record(_cause("mask_transposed", 14))).mistakes
    assert not m["strict"] and m["named"] and m["found"] and not m["at_line"]
    [m] = judge(head, _record(_cause("mask_transposed", None))).mistakes  # a cause with no line
    assert not m["strict"] and m["named"]


def test_a_cause_of_the_right_family_but_another_id_is_a_false_alarm() -> None:
    head = _head(_mistake("mask_transposed", ("mask_transposed",), (12,)))
    j = judge(head, _record(_cause("mask_excludes_diagonal", 12)))
    [m] = j.mistakes
    assert not m["strict"] and not m["named"] and m["found"] and m["at_line"]  # loosely found, strictly not
    assert j.false_alarms == ["mask_excludes_diagonal@12"] and not j.loose_false


def test_one_cause_credits_one_mistake() -> None:
    a = _mistake("mask_discarded", ("no_mask",), (10, 11))
    b = _mistake("flag_never_set", ("no_mask",), (11, 20))
    j = judge(_head(a, b), _record(_cause("no_mask", 11)))
    assert [m["strict"] for m in j.mistakes].count(True) == 1
    j = judge(_head(a, b), _record(_cause("no_mask", 11), _cause("no_mask", 20)))
    assert all(m["strict"] for m in j.mistakes)  # the matching gives line 11 to a, 20 to b


def test_one_mistake_named_twice_is_counted() -> None:
    head = _head(_mistake("fill_huge", ("weak_mask_fill", "weak_mask_constant"), (14,), family="fill"))
    j = judge(head, _record(_cause("weak_mask_fill", 14), _cause("weak_mask_constant", 14)))
    assert j.mistakes[0]["strict"] and j.twice == ["weak_mask_constant@14"] and not j.false_alarms


def test_a_kind_with_no_id_needs_the_findings_fields() -> None:
    finding = (("stage", "weights"), ("what", "sigmoid"))
    head = _head(_mistake("sigmoid_weights", (), (15,), family="weights", finding=finding))
    [m] = judge(head, _record(_cause("departure:weights", 15, stage="weights", description="..."))).mistakes
    assert not m["strict"] and m["stage_at_line"] and m["found"] and m["at_line"]
    [m] = judge(head, _record(_cause("departure:weights", 15, stage="weights", what="sigmoid"))).mistakes
    assert m["strict"]
    [m] = judge(head, _record(_cause("departure:weights", 15, stage="scores", what="sigmoid"))).mistakes
    assert not m["strict"]


def test_in_a_notebook_the_cell_counts() -> None:
    head = _head(_mistake("scale_missing", ("no_scaling",), (3,), family="scale", cell=4), notebook=True)
    assert judge(head, _record(_cause("no_scaling", 3, cell=4))).mistakes[0]["strict"]
    assert not judge(head, _record(_cause("no_scaling", 3, cell=5))).mistakes[0]["strict"]
    assert not judge(head, _record(_cause("no_scaling", 3))).mistakes[0]["strict"]


def test_on_a_correct_head_every_cause_is_a_false_alarm_but_missing_functions() -> None:
    j = judge(_head(), _record(_cause("missing:gaussian_positional_weights", None), _cause("no_scaling", 9)))
    assert j.correct and j.false_alarms == ["no_scaling@9"]
    s = summary([j])
    assert s["causes_on_correct"] == 1 and s["false_alarms"] == 0 and s["correct"] == 1 and s["full_on_correct"] == 0
