"""One comparison of the two editions' results, for every test that grades a head with both (issue 23).

What students see is what they get: on the same head, the student kit and the instructor's grader give the
same verdicts, name the same causes in the same words, charge them alike and total the same. What may differ
is what the README's "Two kits" table documents: the notes (which edition graded), student_tests (graded on
submission: the kit runs the suite on the student's head for 0 points), and a timed check's timings.
"""

from __future__ import annotations

from pathlib import Path

from grader.checks import CHECKS
from grader.library import known_heads, reference_path
from grader.models import FAILING, GradeResult

TESTS = "student_tests"
REALISTIC = Path(__file__).resolve().parent / "realistic"


def library_heads() -> list[tuple[str, str]]:
    """(name, module text) of the reference, every variant, every chaff and every realistic head."""
    heads = [("reference", reference_path().read_text(encoding="utf-8"))]
    heads += [(f"{h.kind}:{h.id}", h.source()) for h in (*known_heads("variant"), *known_heads("chaff"))]
    heads += [(f"realistic:{p.stem}", p.read_text(encoding="utf-8")) for p in sorted(REALISTIC.glob("*.py"))]
    return heads


def _timed(cid: str) -> bool:
    return cid in CHECKS and CHECKS[cid].timed


def malformed(result: GradeResult) -> list[str]:
    """What is broken in one edition's result whatever the other says: a cause with no title, a title that is
    its id respelled, a cause that explains nothing, a failing check that points at a cause that does not
    list it, a charged cause that explains no check."""
    problems = []
    causes = {d.id: d for d in result.diagnosis}
    for d in result.diagnosis:
        if not d.title.strip() or d.title.strip().lower() == d.id.replace("_", " ").lower():
            problems.append(f"{d.id}: title {d.title!r}")
        if not d.hint.strip() or not d.cites.strip():
            problems.append(f"{d.id}: no hint or citation")
        if not d.explains:
            problems.append(f"{d.id}: explains no check")
        if result.scoring == "mistakes" and d.deduction is None:
            problems.append(f"{d.id}: counted by mistakes without a deduction")
    for c in result.checks:
        for cid in c.causes:
            if cid not in causes or c.id not in causes[cid].explains:
                problems.append(f"{c.id} names cause {cid}, which does not explain it")
        lost = c.status in FAILING and not c.extra_credit and c.score < c.max_score and c.pending is None
        if result.scoring == "mistakes" and lost and not c.causes:
            problems.append(f"{c.id}: counted by mistakes but explained by no cause")
    return problems


def differences(full: GradeResult, kit: GradeResult) -> list[str]:
    """Where the kit's result of a head differs from the instructor's beyond what the README documents."""
    out = [f"instructor: {p}" for p in malformed(full)] + [f"kit: {p}" for p in malformed(kit)]
    theirs, mine = {c.id: c for c in full.checks}, {c.id: c for c in kit.checks}
    if set(theirs) != set(mine):
        out.append(f"checks {sorted(set(theirs) ^ set(mine))} graded by one edition only")
    for cid in sorted(set(theirs) & set(mine) - {TESTS}):
        a, b = theirs[cid], mine[cid]
        if (a.status, a.score, a.causes) != (b.status, b.score, b.causes):
            out.append(f"{cid}: {a.status} {a.score} {a.causes} vs {b.status} {b.score} {b.causes}")
        elif a.message != b.message and not _timed(cid):
            out.append(f"{cid}: message {a.message!r} vs {b.message!r}")
    a_causes, b_causes = {d.id: d for d in full.diagnosis}, {d.id: d for d in kit.diagnosis}
    if list(a_causes) != list(b_causes):
        out.append(f"causes {list(a_causes)} vs {list(b_causes)}")
    for cid in a_causes.keys() & b_causes.keys():
        a_d, b_d = a_causes[cid], b_causes[cid]
        fields = ["kind", "cites", "explains", "deduction", "detail", "where", "departure"]  # where: issue 28
        if not all(_timed(x) for x in a_d.explains):  # an own:performance cause quotes the check's timings
            fields += ["title", "hint"]
        for f in fields:
            if getattr(a_d, f) != getattr(b_d, f):
                out.append(f"{cid}.{f}: {getattr(a_d, f)!r} vs {getattr(b_d, f)!r}")
    if full.scoring != kit.scoring:
        out.append(f"scoring {full.scoring} vs {kit.scoring}")
    own_tests = [r.score - sum(c.score for c in r.checks if c.id == TESTS) for r in (full, kit)]
    if own_tests[0] != own_tests[1]:
        out.append(f"score (student_tests aside) {own_tests[0]} vs {own_tests[1]}")
    return out
