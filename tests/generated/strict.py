"""The strict judge of issue 52's bench: the right cause, at a line to edit, one cause per mistake.

Reads a grade's result as JSON (``GradeResult``), so it needs nothing of the grader. For a head and its mistakes:

- a cause **names** a mistake when its id is one of the mistake's ids, or, for a kind no catalog id names, when it is
  a departure whose finding carries every field of the truth (the stage, and what it is) with the truth's values;
- a mistake is **right** (strict) when a cause names it at one of its lines to edit (``where``: the line, and in a
  notebook the cell, as the grader reports them); one cause credits one mistake (a maximum matching of causes to
  mistakes), so one cause never counts for two;
- a cause that names no mistake of the head is a **false alarm**, even when it is of the right family (every cause
  on a correct head is one; ``missing:*`` is left out: a generated file defines the head alone); a cause that names
  a mistake another cause was credited with is that mistake **named twice**;
- the loose figures, as issue 35's judge counted them, beside: a cause of the mistake's family (any id of the kind
  of mistake, ``LOOSE``) names it, at any line (found) or at one of its lines (at the line), with no one-to-one rule;
  and, for the kinds with no id, a departure at the truth's stage and line (the finding's "what" aside).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .heads import Head, Mistake
from .judge import exceptions_of
from .mutations import FAMILIES

# The kinds of mistake each cause id names, for the loose figures: issue 35's table, and the ids issue 52's kinds add.
LOOSE: dict[str, frozenset[str]] = {
    **FAMILIES,
    **dict.fromkeys(("width_crash", "branch_crash", "fixed_size_buffer"), frozenset({"crash"})),
    "unsupported_dtype": frozenset({"crash", "precision"}),
    "output_dtype": frozenset({"precision"}),
    "weights_dtype": frozenset({"precision"}),
    "scale_in_float32": frozenset({"scale", "precision"}),
    "scale_tensor_in_float32": frozenset({"scale", "precision"}),
    "scale_constant": frozenset({"scale"}),
    "non_finite_outputs": frozenset({"fill"}),
    **dict.fromkeys(("inplace_input_mutation", "inputs_cut_from_graph", "no_autograd_graph"), frozenset({"contract"})),
    **dict.fromkeys(("no_query_projection", "no_key_projection", "no_query_key_projection"), frozenset({"keys"})),
    "departure:weights": FAMILIES["departure:weights"] | {"weights"},
}


def families(cause_id: str) -> frozenset[str]:
    """The kinds of mistake a cause names, loosely (a crash of any function is of the crash family)."""
    if cause_id.startswith("crash:"):
        return frozenset({"crash"})
    parts = cause_id.split(":")
    if parts[0] == "departure" and len(parts) == 3:  # a second departure at one stage carries its line
        cause_id = ":".join(parts[:2])
    return LOOSE.get(cause_id, frozenset())


def place(cause: dict[str, Any]) -> tuple[int | None, int] | None:
    where = cause.get("where")
    return (where.get("cell"), where["line"]) if where else None


def names(mistake: Mistake, cause: dict[str, Any]) -> bool:
    """The cause names the mistake: one of its ids, or a departure carrying every field of its finding."""
    if cause["id"] in mistake.causes:
        return True
    if not mistake.finding or not cause["id"].startswith("departure"):
        return False
    found = cause.get("departure") or {}
    return all(found.get(key) == value for key, value in mistake.finding)


def _matching(edges: list[set[int]]) -> dict[int, int]:
    """A maximum matching of causes (the list's index) to mistakes (the sets' members): mistake -> cause."""
    owner: dict[int, int] = {}

    def take(c: int, seen: set[int]) -> bool:
        for m in edges[c]:
            if m not in seen:
                seen.add(m)
                if m not in owner or take(owner[m], seen):
                    owner[m] = c
                    return True
        return False

    for c in range(len(edges)):
        take(c, set())
    return owner


@dataclass
class Judged:
    """One head, judged."""

    id: str
    program: str
    notebook: bool
    kinds: list[str]
    mistakes: list[dict[str, Any]] = field(default_factory=list)  # per mistake: its kind and what found it
    causes: list[tuple[str, Any]] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    loose_false: list[str] = field(default_factory=list)  # causes of no family of the head's mistakes
    full: bool = False
    graded: bool = False
    exceptions: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def correct(self) -> bool:
        return not self.kinds


def judge(head: Head, record: dict[str, Any]) -> Judged:
    """Judge ``record`` (``{"result": GradeResult as JSON or None, "stderr": ..., "raised": ...}``) against ``head``."""
    result = record.get("result") or {}
    causes = [c for c in result.get("diagnosis", []) if not c["id"].startswith("missing:")]
    j = Judged(head.id, head.program, head.notebook, [m.kind for m in head.mistakes])
    j.causes = [(c["id"], place(c)) for c in causes]
    named = [{k for k, m in enumerate(head.mistakes) if names(m, c)} for c in causes]
    placed = [{k for k in ks if place(c) in head.mistakes[k].where} for ks, c in zip(named, causes, strict=True)]
    strict, any_line = _matching(placed), _matching(named)
    for k, m in enumerate(head.mistakes):
        family = [c for c in causes if m.family in families(c["id"])]
        stage = dict(m.finding).get("stage")
        j.mistakes.append(
            {
                "kind": m.kind,
                "spelling": m.spelling,
                "site": "cell" if head.notebook else m.site,
                "strict": k in strict,
                "named": k in any_line,
                "idless": bool(m.finding),
                "found": bool(family),
                "at_line": any(place(c) in m.where for c in family),
                "stage_at_line": bool(stage)
                and any(
                    c["id"].startswith("departure")
                    and (c.get("departure") or {}).get("stage") == stage
                    and place(c) in m.where
                    for c in causes
                ),
            }
        )
    credited = set(any_line.values())
    for c, (cause, ks) in enumerate(zip(causes, named, strict=True)):
        label = f"{cause['id']}@{place(cause)[1] if place(cause) else '-'}"
        if not ks:
            j.false_alarms.append(label)
        elif c not in credited:
            j.twice.append(label)
        if not families(cause["id"]) & {m.family for m in head.mistakes}:
            j.loose_false.append(label)
    if result:
        j.graded = True
        j.full = result["score"] >= result["max_score"] - 1e-9
        j.seconds = float(result.get("duration_s") or 0.0)
    j.exceptions = exceptions_of(record)
    return j


def summary(rows: Iterable[Judged]) -> dict[str, Any]:
    """The counts of a group of judged heads."""
    rows = list(rows)
    mistakes = [m for r in rows for m in r.mistakes]
    correct = [r for r in rows if r.correct]
    times = sorted(r.seconds for r in rows if r.graded)
    idless = [m for m in mistakes if m["idless"]]
    return {
        "heads": len(rows),
        "correct": len(correct),
        "mistakes": len(mistakes),
        "strict": sum(m["strict"] for m in mistakes),
        "named": sum(m["named"] for m in mistakes),
        "found": sum(m["found"] for m in mistakes),
        "at_line": sum(m["at_line"] for m in mistakes),
        "idless": len(idless),
        "stage_at_line": sum(bool(m["stage_at_line"]) for m in idless),
        "heads_all_right": sum(  # mutated heads whose every mistake is right, with no other cause
            all(m["strict"] for m in r.mistakes) and not r.false_alarms and not r.twice for r in rows if not r.correct
        ),
        "false_alarms": sum(len(r.false_alarms) for r in rows if not r.correct),
        "twice": sum(len(r.twice) for r in rows),
        "causes_on_correct": sum(len(r.false_alarms) for r in correct),
        "full_on_correct": sum(r.full for r in correct),
        "exceptions": sum(bool(r.exceptions) for r in rows),
        "median_s": round(statistics.median(times), 2) if times else 0.0,
        "p90_s": round(times[int(0.9 * (len(times) - 1))], 2) if times else 0.0,
        "max_s": round(times[-1], 2) if times else 0.0,
    }


def per_kind(rows: Iterable[Judged]) -> dict[str, dict[str, int]]:
    """Per kind: its mistakes, and how many were right (strict), named at any line, found and at the line loosely."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        for m in r.mistakes:
            n = out.setdefault(
                m["kind"], dict.fromkeys(("n", "strict", "named", "found", "at_line", "stage_at_line"), 0)
            )
            n["n"] += 1
            for key in ("strict", "named", "found", "at_line", "stage_at_line"):
                n[key] += bool(m[key])
    return dict(sorted(out.items()))


__all__ = ["LOOSE", "Judged", "families", "judge", "names", "per_kind", "place", "summary"]
