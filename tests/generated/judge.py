"""A grade's diagnosis against a generated head's ground truth: what was found, where, and what was not a mistake.

Reads the result as JSON (a dict, as ``GradeResult`` writes it), so it needs nothing of the grader and takes fields
other parts of the grader add (the proof of completeness, a recorded diagnosis error) when they are there.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .mutations import Generated, Truth, families

INTERNAL = "Internal grader error"


def match(truth: Truth, cause: dict[str, Any]) -> bool:
    """A named cause finds a ground-truth mistake when it names a mistake of the same kind (its family)."""
    return truth.family in families(cause["id"])


def line_of(cause: dict[str, Any]) -> int | None:
    where = cause.get("where")
    return where["line"] if where else None


@dataclass
class Scored:
    """One generated head, judged."""

    id: str
    style: str
    mutations: list[str]
    correct: bool
    mistakes: int = 0
    found: int = 0  # mistakes a cause of their kind names
    exact: int = 0  # mistakes one of their own ids names
    lines: int = 0  # mistakes whose matching cause points at a line the mutation changed
    no_mistake: list[str] = field(default_factory=list)  # causes that match no mutation (nor the style's contract)
    causes: list[tuple[str, int | None]] = field(default_factory=list)
    full: bool = False  # full marks, but for the style's contract causes
    complete: bool = False  # the result says the diagnosis is proven complete
    exceptions: list[str] = field(default_factory=list)
    seconds: float = 0.0
    missed: list[str] = field(default_factory=list)
    wrong_line: list[str] = field(default_factory=list)


def exceptions_of(record: dict[str, Any]) -> list[str]:
    """Where the grader's own code raised while grading: ``grade`` itself (``raised``), a traceback on the grade's
    stderr, a check's internal error, or a diagnosis error the result records."""
    out = []
    if record.get("raised"):
        out.append(f"grade raised: {record['raised']}")
    stderr = record.get("stderr") or ""
    if "Traceback" in stderr:
        last = [ln for ln in stderr.strip().splitlines() if ln and not ln.startswith(" ")]
        out.append(f"stderr: {last[-1] if last else 'Traceback'}")
    result = record.get("result") or {}
    for check in result.get("checks", []):
        if INTERNAL in (check.get("message") or ""):
            out.append(f"{check['id']}: {check['message'].splitlines()[0][:200]}")
    for key, value in result.items():
        if "diagnosis_error" in key and value:
            out.append(f"{key}: {str(value)[:200]}")
    return out


def score(head: Generated, record: dict[str, Any]) -> Scored:
    """Judge ``record`` (``{"result": GradeResult as JSON or None, "stderr": ..., "raised": ...}``) against the
    head's ground truth. ``missing:*`` causes are left out: a generated file defines the head alone."""
    result = record.get("result") or {}
    causes = [c for c in result.get("diagnosis", []) if not c["id"].startswith("missing:")]
    s = Scored(head.id, head.style, [t.mutation for t in head.truths], not head.truths)
    s.causes = [(c["id"], line_of(c)) for c in causes]
    s.mistakes = len(head.truths)
    for t in head.truths:
        hits = [c for c in causes if match(t, c)]
        right = any(line_of(c) in t.lines for c in hits)
        s.found += bool(hits)
        s.exact += any(c["id"] in t.causes for c in causes)
        s.lines += right
        if not hits:
            s.missed.append(t.mutation)
        elif not right:
            s.wrong_line.append(f"{t.mutation}: {[line_of(c) for c in hits]} not in {list(t.lines)}")
    s.no_mistake = [
        c["id"] for c in causes if c["id"] not in head.contract_causes and not any(match(t, c) for t in head.truths)
    ]
    if result:
        contract_price = sum(c.get("deduction") or 0 for c in causes if c["id"] in head.contract_causes)
        s.full = result["score"] + contract_price >= result["max_score"] - 1e-9
        s.complete = bool(result.get("diagnosis_complete"))  # GradeResult.diagnosis_complete: the proof
        s.seconds = float(result.get("duration_s") or 0.0)
    s.exceptions = exceptions_of(record)
    return s


def summary(rows: Iterable[Scored]) -> dict[str, Any]:
    """The counts of a group of judged heads."""
    rows = list(rows)
    correct = [r for r in rows if r.correct]
    mutated = [r for r in rows if not r.correct]
    times = [r.seconds for r in rows]
    return {
        "heads": len(rows),
        "correct": len(correct),
        "mutated": len(mutated),
        "mistakes": sum(r.mistakes for r in rows),
        "found": sum(r.found for r in rows),
        "exact": sum(r.exact for r in rows),
        "lines": sum(r.lines for r in rows),
        "no_mistake_on_correct": sum(len(r.no_mistake) for r in correct),
        "no_mistake_on_mutated": sum(len(r.no_mistake) for r in mutated),
        "full_on_correct": sum(r.full for r in correct),
        "complete": sum(r.complete for r in rows),
        "exceptions": sum(bool(r.exceptions) for r in rows),
        "median_s": round(statistics.median(times), 2) if times else 0.0,
        "total_s": round(sum(times), 1),
    }
