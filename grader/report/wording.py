"""Words shared by every view of a :class:`GradeResult`: status labels, headlines, points, the score line.

The terminal summary and the HTML report both take their wording from here, so a student reads the same
sentence in either place. Nothing here formats markup: callers escape (jinja2) or build rich ``Text``.
"""

from __future__ import annotations

import re

from grader.models import FAILING, CheckResult, Diagnosis, GradeResult, Status

STATUS_LABEL: dict[Status, str] = {
    "passed": "PASSED",
    "failed": "FAILED",
    "error": "ERROR",
    "timeout": "TIMEOUT",
    "skipped": "SKIPPED",
}

# Shape and label carry the meaning, so colour is never the only cue (colour-blind readers, print).
STATUS_GLYPH: dict[Status, str] = {
    "passed": "✓",
    "failed": "✗",
    "error": "!",
    "timeout": "◔",
    "skipped": "–",
}

STATUS_MEANING: dict[Status, str] = {
    "passed": "the property holds on every input tried",
    "failed": "your head violates the property; the smallest failing input is shown",
    "error": "your code crashed or returned something unusable, so the property could not be tested",
    "timeout": "your code ran past the time limit",
    "skipped": "not graded (an optional part you did not submit, or not applicable)",
}

WITHHELD: dict[str, str] = {
    "hidden": "hidden check: only its outcome is shown",
    "after_due_date": "details are shown after the due date",
    "after_published": "details are shown when grades are published",
}


_CX_PREFIX = "Smallest failing input: "
_REPRODUCE_PREFIX = "Reproduce: "

# Lines of a check message that state a numeric comparison: the torch.testing-style mismatch block
# (grader.compare.Mismatch.text) and the one-line "(0 allowed)" / "expected x ± y" forms of other checks.
_COMPARISON = re.compile(
    r"tensors are not (close|equal)|^Mismatched elements|^Greatest (absolute|relative) difference"
    r"|\bgot\b.*\bexpected\b|\ballowed\)|\bexpected\b.*±"
)


def is_problem(check: CheckResult) -> bool:
    """Failed, errored or timed out: the checks that get a detailed explanation."""
    return check.status in FAILING


def is_withheld(check: CheckResult, *, show_hidden: bool = False) -> bool:
    """Whether the student sees only this check's name and outcome (rubric visibility)."""
    return check.visibility != "visible" and not show_hidden


def fmt_points(x: float) -> str:
    """Points without float noise: 8, 7.5, 2.667."""
    return f"{x:.4g}"


def points(check: CheckResult) -> str:
    """'8 / 8', '0 / 15', '+2 / 3 extra' for extra credit, 'pending / 9' for points graded on submission."""
    if check.pending is not None:
        return f"pending / {fmt_points(check.max_score)}"
    if check.extra_credit:
        return f"+{fmt_points(check.score)} / {fmt_points(check.max_score)} extra"
    return f"{fmt_points(check.score)} / {fmt_points(check.max_score)}"


def headline(check: CheckResult) -> str:
    """The first line of the message: what happened, in one sentence."""
    return check.message.split("\n", 1)[0].strip()


def status_line(check: CheckResult) -> str:
    """'causal_mask FAILED: <headline>' — the line a student greps for."""
    return f"{check.id} {STATUS_LABEL[check.status]}: {headline(check)}"


def body_lines(check: CheckResult) -> list[str]:
    """Message lines after the headline (the counterexample and the reproduce command are fields of their own,
    which views show on their own)."""
    return [ln for ln in check.message.split("\n")[1:] if ln.strip()]


def evidence_lines(check: CheckResult) -> list[str]:
    """The smallest failing input and the line that reruns the check, for a view that prints a check's text whole
    (terminal, JUnit, Gradescope, pytest)."""
    cx = check.counterexample if is_problem(check) else None
    lines = [_CX_PREFIX + cx.describe()] if cx is not None else []
    return lines + ([_REPRODUCE_PREFIX + check.reproduce] if check.reproduce is not None else [])


def text(check: CheckResult) -> str:
    """A check's message with its evidence lines: what a view that prints the check whole shows."""
    return "\n".join([check.message, *evidence_lines(check)])


def comparison_lines(check: CheckResult) -> list[str]:
    """The lines of the message that state expected versus got, with the tolerance."""
    return [ln for ln in body_lines(check) if _COMPARISON.search(ln)]


def explanation_lines(check: CheckResult) -> list[str]:
    """The message lines that explain (not the numeric comparison)."""
    return [ln for ln in body_lines(check) if not _COMPARISON.search(ln)]


def score_line(result: GradeResult) -> str:
    """'Score: 61 / 100 (61.0%)', with extra credit and problem counts."""
    extra = sum(c.score for c in result.checks if c.extra_credit)
    text = f"Score: {fmt_points(result.score)} / {fmt_points(result.max_score)} ({result.percent:.1f}%)"
    if extra:
        text += f", including {fmt_points(extra)} extra credit"
    if result.pending_points:
        text += f"; {fmt_points(result.pending_points)} points pending"
    counts = tally(result)
    parts = [f"{n} {STATUS_LABEL[s].lower()}" for s, n in counts.items() if n]
    return f"{text} — {', '.join(parts)}" if parts else text


def scoring_line(result: GradeResult) -> str | None:
    """How the score was counted ('Counted by mistakes: ...'), or None when there is nothing to say (every
    graded check passed). Printed next to the score line, never inside it: tools parse the score line."""
    if result.scoring_note:
        return result.scoring_note
    if result.scoring == "mistakes":  # a result written without its note: say at least what was counted
        by_checks = result.score if result.score_by_checks is None else result.score_by_checks
        return (
            f"Counted by mistakes: each named cause charged once (the per-check sum would be "
            f"{fmt_points(by_checks)} / {fmt_points(result.max_score)})."
        )
    return None


def pending_line(result: GradeResult) -> str | None:
    """'Pending, 9 points: student_tests is graded when you submit: ...' (each check this edition cannot grade, with
    its reason), or None. Printed above the score line, which counts these points in its total, never in its score."""
    said = [
        f"Pending, {fmt_points(c.max_score)} point{'s' if c.max_score != 1 else ''}: {c.pending}"
        for c in result.checks
        if c.pending is not None and c.max_score and not c.extra_credit
    ]
    return " ".join(said) or None


def diagnosis_error_line(result: GradeResult) -> str | None:
    """'The diagnosis could not finish: ...' when the grader's own code raised while naming the causes (issue
    35); None when it finished. Every view prints it, so that the grader's error is never silent."""
    error = result.diagnosis_error
    if error is None:
        return None
    where = f" in its {', '.join(error.passes)} pass{'es' if len(error.passes) > 1 else ''}" if error.passes else ""
    message = error.message.strip().split("\n", 1)[0] or "(no message)"
    return (
        f"The diagnosis could not finish: the grader's own {error.type}{where} ({message}). This is not a mistake of "
        "yours: the causes listed may be incomplete and the score is provisional; please report it to your "
        "instructor."
    )


def diagnosis_complete_line(result: GradeResult) -> str | None:
    """'With these 2 changes your head computes the lecture's head on every property check: ...' when the
    diagnosis is proven complete (issue 35: the changes its walk found, applied to your head, make every property
    check it failed pass); None otherwise."""
    proof = result.diagnosis_complete
    if proof is None:
        return None
    n = proof.changes
    changes, them = ("this change", "it") if n == 1 else (f"these {n} changes", "them")
    if not any(d.kind in ("mutation", "departure") for d in result.diagnosis):  # no change was named (issue 53.7)
        causes = [f"({k})" for k, d in enumerate(result.diagnosis, start=1)]
        changes = f"cause {causes[0]} fixed" if len(causes) == 1 else f"causes {', '.join(causes)} fixed"
        them = "that fix" if len(causes) == 1 else "those fixes"
    k = len(proof.checks)
    failed = "the check that failed passes" if k == 1 else f"the {k} checks that failed pass"
    rest = ""
    if proof.not_provable:
        some = "it" if len(proof.not_provable) == 1 else "them"
        rest = f"; {', '.join(proof.not_provable)} cannot be run so, and the causes above explain {some}"
    return (
        f"With {changes} your head computes the lecture's head on every property check: {failed} with {them} "
        f"applied, the others passed already{rest}."
    )


def deduction(d: Diagnosis) -> str | None:
    """'−8 points': what a cause cost when the grade counts mistakes; None when it counts checks."""
    if d.deduction is None:
        return None
    if d.deduction == 0:
        return "no deduction"
    return f"−{_points(d.deduction)}"


def price(result: GradeResult, d: Diagnosis) -> str | None:
    """What a cause costs, beside it wherever causes are listed: '−8 points' when the grade counts mistakes,
    'price 8 points' when the causes explain every failing check but the grade counts checks (the scoring
    line says how the two counts compare), None when a failing check no cause explains leaves no price."""
    if d.deduction is None:
        return None
    charged = deduction(d) if result.scoring == "mistakes" or d.deduction == 0 else None
    said = charged or f"price {_points(d.deduction)}"
    mine = [c for c in result.checks if c.id in d.explains and is_problem(c) and not c.extra_credit]
    worth = sum(c.max_score - c.score for c in mine)
    if d.deduction > worth:  # a mistake is priced once, whatever checks show it (here fewer than it breaks)
        which = "the check it explains" if len(mine) == 1 else f"the {len(mine)} checks it explains"
        said += f", more than the {_points(worth)} of {which}: a mistake costs its price, whatever checks show it"
    return said


def _points(x: float) -> str:
    return f"{fmt_points(x)} point{'s' if x != 1 else ''}"


def tally(result: GradeResult) -> dict[Status, int]:
    """How many checks ended in each status, in the fixed status order."""
    counts: dict[Status, int] = {s: 0 for s in STATUS_LABEL}
    for c in result.checks:
        counts[c.status] += 1
    return counts


def output_note(result: GradeResult, *, shown_chars: int | None = None) -> str:
    """What the report says about the captured student output (``shown_chars``: a view's own cut)."""
    out = result.output
    if not out.text:
        return "Your code printed nothing while being graded."
    notes = ["Everything your code printed while being graded (stdout and stderr together), shown as plain text."]
    if shown_chars is not None and shown_chars < len(out.text):
        notes.append(f"Only the first {shown_chars} of {len(out.text)} captured characters are shown here.")
    if out.truncated:
        notes.append(f"Truncated: your code printed {out.bytes_dropped} more bytes, which the grader dropped.")
    return " ".join(notes)


def _size(n: float) -> str:
    """Bytes as the caps are set: '850 bytes', '64 KiB', '13.4 MiB', '8 GiB'."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:g} bytes"


def limit_lines(result: GradeResult, report: str | None = None) -> list[str]:
    """What the terminal says of the sandbox's limits the submission met (issue 53.7): the memory cap that refused
    an allocation, and the output it printed, captured (how much, where to read it). ``report``: the HTML report
    this run wrote, if any."""
    lines = []
    read = f"read it in {report}" if report else "rerun with --html report.html to read it"
    for hit in result.limits_hit:
        tried = f"tried to allocate {_size(hit.tried_bytes)}" if hit.tried_bytes else "asked for more memory"
        lines.append(
            f"Memory cap hit: your code {tried}, and a submission may use at most {hit.cap_mb} MiB (the rubric's "
            "limits.memory_mb), so the allocation failed; the error above is the cap's, not a bug of the grader. "
            "No tensor of this head needs more than (B, T, T) entries."
        )
    out = result.output
    if out.text:
        kept = len(out.text.encode("utf-8", "replace"))
        if out.truncated:
            lines.append(
                f"Output captured: your code printed {_size(kept + out.bytes_dropped)} while being graded; the first "
                f"{_size(kept)} were kept ({read}) and the rest dropped."
            )
        else:
            lines.append(
                f"Output captured: your code printed {_size(kept)} while being graded, not shown here ({read})."
            )
    return lines


def unavailable(reason: str) -> str:
    """The wording for a visual that the student's code could not produce."""
    return f"could not be computed: {reason}"


# ---- root causes (issue 10): causes first, symptoms pointing at them ------------------------------


def cause_numbers(result: GradeResult) -> dict[str, int]:
    """Each cause's number as the views print it: (1), (2), ... in diagnosis order."""
    return {d.id: k for k, d in enumerate(result.diagnosis, start=1)}


def causes_sentence(result: GradeResult) -> str | None:
    """'Your head behaves exactly like the correct head with 2 changes: (1) ...; (2) ...', or None ('Where it
    runs, ...' beside a crash: the changes were seen on the inputs it takes)."""
    numbers = cause_numbers(result)
    changes = [d for d in result.diagnosis if d.kind == "mutation"]
    if not changes:
        return None
    n = len(changes)
    listed = "; ".join(f"({numbers[d.id]}) {d.title}" for d in changes)
    who = "Where it runs, your head" if any(d.kind == "crash" for d in result.diagnosis) else "Your head"
    return f"{who} behaves exactly like the correct head with {n} change{'s' if n > 1 else ''}: {listed}."


def cause_line(result: GradeResult, cause_id: str) -> str:
    """'(2) Scores divided by d_k instead of sqrt(d_k) (Lemma 5.5)' for one cause id."""
    d = next(d for d in result.diagnosis if d.id == cause_id)
    return f"({cause_numbers(result)[d.id]}) {d.title} ({d.cites})"


def cause_heading(result: GradeResult, cause_id: str) -> str:
    """The cause line with its price: '(1) No mask (Definition 4.1): −8 points' (see :func:`price`)."""
    d = next(d for d in result.diagnosis if d.id == cause_id)
    cost = price(result, d)
    return cause_line(result, cause_id) + (f": {cost}" if cost else "")


def explains_line(result: GradeResult, cause_id: str) -> str:
    d = next(d for d in result.diagnosis if d.id == cause_id)
    return f"Explains: {', '.join(d.explains)}" if d.explains else "Explains no failing check of this rubric."


def stopped_by(result: GradeResult, check: CheckResult) -> str | None:
    """The crash cause that stopped ``check`` (its message then repeats the crash: shown once, above)."""
    crashes = {d.id for d in result.diagnosis if d.kind == "crash"}
    return next((c for c in check.causes if c in crashes), None)


def pointer(result: GradeResult, check: CheckResult) -> str | None:
    """'Cause: (1) ...' under a failing check, or None when no cause explains it."""
    if not check.causes:
        return None
    return "Cause: " + "; ".join(cause_line(result, c) for c in check.causes)


# ---- where (issue 28): the student's line each cause shows at -------------------------------------


def where_line(d: Diagnosis) -> str | None:
    """'At attention_head.py:14: wei = q @ k.T * C**-0.5' (a notebook: 'At cell 7, line 3: ...'), or None."""
    w = d.where
    if w is None:
        return None
    cell = w.cell_label or f"cell {w.cell}"  # the cell as the student's editor labels it (In [7] or cell 4)
    at = f"{w.file}, {cell}, line {w.line}" if w.cell is not None else f"{w.file}:{w.line}"
    return f"At {at}: {w.code}" if w.code else f"At {at}"


def seen_line(d: Diagnosis) -> str | None:
    """What the grader saw at that line (a departure cause says it in its title already). Its numbers are the
    grader's probe's (its widths, its factors), not those of the inputs the checks show: said so."""
    if d.departure is None or d.kind == "departure":
        return None
    stage = STAGE_NAMES.get(d.departure.stage, d.departure.stage)
    return f"Seen there on the grader's probe, where the lecture has {stage}: {d.departure.description}."


# Each stage of the lecture's computation as a noun: 'the masked scores', and without the article for a caption.
STAGE_NOUNS = {
    "Q": "queries Q = X W_Q",
    "K": "keys K = X W_K",
    "V": "values V = X W_V",
    "K^T": "keys transposed, K^T",
    "scores": "scores Q K^T",
    "premasked": "masked scores before the scale",
    "scaled": "scaled scores Q K^T / sqrt(d_k)",
    "masked": "masked scores",
    "weights": "weights",
    "out": "output A V",
}
STAGE_NAMES = {stage: f"the {noun}" for stage, noun in STAGE_NOUNS.items()}


def stage_caption(stage: str) -> str:
    """'The lecture's masked scores on the grader's probe': the caption of the stage drawn beside a cause's line."""
    return f"The lecture's {STAGE_NOUNS.get(stage, stage)} on the grader's probe"


def unexplained_line(result: GradeResult) -> str | None:
    """The failing checks no cause explains, said plainly: no named cause and no departure was found."""
    left = [c.id for c in result.checks if c.status in FAILING and not c.causes and c.pending is None]
    if not left:
        return None
    return (
        f"Not explained: {', '.join(left)}. No named cause matches, and the grader found no value of your "
        "computation that leaves the lecture's on its probe, so it cannot point at a line for these."
    )


def check_where(result: GradeResult, check: CheckResult) -> Diagnosis | None:
    """The first cause of a failing ``check`` that says where it shows, or None."""
    by_id = {d.id: d for d in result.diagnosis}
    return next((by_id[c] for c in check.causes if c in by_id and by_id[c].where is not None), None)
