"""Words a student can trust (issue 53, points 3, 4, 12): a sentence never contradicts the cause that explains its
check, never states the grader's probe as the student's input, never stops mid-word, and counts what it says.

Most tests build results or call the wording by hand (fast); the few that need a real head grade one small head.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from grader.models import CheckResult, Departure, Diagnosis, GradeResult, SourceLine
from grader.report import render_html, wording
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool
from grader.submission import prepare

SEED = 20417


def _result(checks: list[CheckResult], diagnosis: list[Diagnosis]) -> GradeResult:
    return GradeResult(
        submission="attention_head.py",
        seed=SEED,
        score=sum(c.score for c in checks),
        max_score=sum(c.max_score for c in checks),
        checks=checks,
        diagnosis=diagnosis,
        rubric="Project Step 4",
        duration_s=1.0,
    )


def _failed(cid: str, points: float = 7.0, message: str = "It failed.", **kw: object) -> CheckResult:
    return CheckResult.model_validate(
        {
            "id": cid,
            "title": f"the property {cid}",
            "cites": "Definition 4.1",
            "status": "failed",
            "score": 0.0,
            "max_score": points,
            "message": message,
            "seed": SEED,
            "duration_s": 0.01,
        }
        | kw
    )


# ---- point 12: words ------------------------------------------------------------------------------------------


def _masked_departure() -> Diagnosis:
    inf = None  # a hidden entry: not finite, drawn as a dash
    expected = [[1.0, inf, inf], [0.5, -1.0, inf], [2.0, 0.25, 1.5]]
    produced = [[inf, inf, inf], [0.5, inf, inf], [2.0, 0.25, inf]]
    return Diagnosis(
        id="mask_excludes_diagonal",
        title="Diagonal masked too",
        hint="Mask exactly the strict upper triangle.",
        cites="Definition 4.1",
        kind="mutation",
        explains=["causal_mask"],
        where=SourceLine(file="attention_head.py", line=14, code="mask = torch.ones(T, T).triu()"),
        departure=Departure(stage="masked", description="hides the diagonal too", expected=expected, produced=produced),
    )


def test_the_lecture_stage_beside_the_line_is_named_in_full() -> None:
    """'The lecture's masked on the grader's probe': the caption used the stage's key as a noun."""
    page = html.unescape(
        render_html(_result([_failed("causal_mask", causes=["mask_excludes_diagonal"])], [_masked_departure()]))
    )
    assert "The lecture's masked scores on the grader's probe (batch 0)" in page
    for stage in ("Q", "K", "V", "scores", "premasked", "scaled", "masked", "weights", "out"):
        caption = wording.stage_caption(stage)
        assert caption.startswith("The lecture's ") and caption.endswith(" on the grader's probe"), caption
        assert caption.split("The lecture's ", 1)[1].split(" on the")[0] not in ("masked", "scaled", "premasked")


def test_what_was_seen_at_the_line_is_said_to_be_on_the_graders_probe() -> None:
    """The numbers of a departure are the grader's probe's (d = 5), not the inputs the checks show (d = 4, 48)."""
    line = wording.seen_line(_masked_departure())
    assert line is not None and line.startswith("Seen there on the grader's probe, where the lecture has"), line


def test_the_definitions_only_note_counts_no_docstring(tmp_path: Path) -> None:
    """A module docstring (or any bare string) runs nothing: it is no statement 'not run'."""
    head = tmp_path / "attention_head.py"
    body = (
        '"""My head."""\n\nimport torch\n\n\n'
        "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    return torch.zeros(1)\n"
    )
    head.write_text(body)
    with prepare(head, definitions_only=True) as sub:
        assert not any(n.startswith("Definitions only") for n in sub.notes), sub.notes
    head.write_text(body + '\n\n"""A note."""\nprint("hi")\n')
    with prepare(head, definitions_only=True) as sub:
        [note] = [n for n in sub.notes if n.startswith("Definitions only")]
        assert note.startswith("Definitions only: 1 top-level statement of attention_head.py was not run (line 11)"), (
            note
        )


def test_an_own_cause_title_is_never_cut_mid_word() -> None:
    """The performance cause's title was cut at 160 characters, mid-word ('fastest of alter')."""
    from grader.checks._generation import LIMIT, PERF_SHAPE
    from grader.diagnosis._direct import _own

    long = (
        f"Your head is 31.2x slower than the plain batched formula at T = {PERF_SHAPE.T} (yours 812 ms, formula "
        "26 ms, CPU time; fastest of alternating calls with the plain masked formula in the same worker, float32, "
        f"5 rounds); at most {LIMIT:g}x is allowed."
    )
    [cause] = _own([_failed("performance", 2.0, long + "\nReproduce: grade attention_head.py --only performance")])
    full = f"performance failed: {long}"
    stem = cause.title.removesuffix(" …")
    assert len(cause.title) <= 160 and full.startswith(stem), cause.title
    assert stem == full or full[len(stem)] == " ", cause.title  # cut between two words, and said to be cut


def test_the_performance_headline_is_one_short_sentence() -> None:
    """The check's first line is what an own cause is titled by: the ratio and the limit, the details after."""
    from grader.checks import _generation as gen

    text = gen.too_slow(31.2, LIMIT := gen.LIMIT, gen.PERF_SHAPE.T, "yours 812 ms, formula 26 ms, CPU time")
    headline, *rest = text.splitlines()
    assert headline == f"Your head is 31.2x slower than the plain batched formula at T = 1024 (at most {LIMIT:g}x)."
    assert rest and "yours 812 ms" in rest[0]


# ---- point 4: stubs and first mistakes ------------------------------------------------------------------------


def test_pass_stubs_list_the_required_functions_first_and_say_what_came_back(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The template with `pass` bodies: the optional cached_attention_step's crash was cause (1), 'Fix this error
    first' at no deduction; a head returning None was 'No autograd graph' for gradient_blocks, and 'it returned
    NoneType' (gaussian_positional_weights: 'it returned single')."""
    template = (Path(__file__).resolve().parent.parent / "student_template" / "attention_head.py").read_text()
    head = tmp_path / "attention_head.py"
    head.write_text(re.sub(r"raise NotImplementedError\([^\n]*\)", "pass", template), encoding="utf-8")
    result = grade(head, rubric, pool=pool, visuals=False)
    checks = {c.id: c for c in result.checks}
    required = {cid for cid, c in checks.items() if not c.extra_credit and c.max_score > 0}
    first = result.diagnosis[0]
    assert set(first.explains) & required, [(d.id, d.explains) for d in result.diagnosis]
    seen_optional = False
    for d in result.diagnosis:  # required functions' causes first, then those that cost nothing
        optional = not set(d.explains) & required
        assert not (seen_optional and not optional), [(d.id, d.explains) for d in result.diagnosis]
        seen_optional = seen_optional or optional
        if d.deduction == 0:
            assert "first" not in d.hint.lower(), (d.id, d.hint)
    assert "no_autograd_graph" not in {d.id for d in result.diagnosis}
    [breach] = [d for d in result.diagnosis if "gradient_blocks" in d.explains]
    assert "it returned None" in breach.hint and "NoneType" not in breach.hint, breach.hint
    assert "returned single" not in checks["gaussian_kernel"].message
    assert "it returned None" in checks["gaussian_kernel"].message, checks["gaussian_kernel"].message


# ---- point 3: a check's text agrees with the cause that explains it, or defers to it --------------------------

HEAD_CHECKS = ["causal_mask", "convex_hull", "gradient_blocks", "permutation_equivariance", "determinism"]


def _rest_of_reference() -> str:
    from grader.library import load_reference

    source = Path(load_reference().__file__).read_text(encoding="utf-8")
    return source[source.index("def gaussian_positional_weights") :]


def _head(tmp_path: Path, mask: str, returned: str) -> Path:
    body = f"""import math

import torch


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    att = (q @ k.transpose(-2, -1)) / math.sqrt(W_Q.shape[1])
    if causal:
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).{mask}, float("-inf"))
    w = torch.softmax(att, dim=-1)
    return w @ v, {returned}


"""
    path = tmp_path / f"{mask.strip('()')}_{returned}" / "attention_head.py"
    path.parent.mkdir()
    path.write_text(body + _rest_of_reference(), encoding="utf-8")
    return path


def test_a_checks_text_never_contradicts_the_cause_of_non_finite_weights(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The diagonal masked too (NaN rows) and the -inf scores returned as the weights: gradient_blocks blamed
    .detach()/.data/.item() the code does not use, causal_mask advised masking j > i before the softmax (done),
    and the NaN paragraph was repeated on six checks, also where the values are -inf."""
    for mask, returned, kind in (("triu()", "w", "NaN"), ("triu(1)", "att", "infinite")):
        result = grade(_head(tmp_path, mask, returned), rubric, pool=pool, only=HEAD_CHECKS, visuals=False)
        failing = [c for c in result.checks if wording.is_problem(c)]
        assert failing and all(c.causes for c in failing), [(c.id, c.causes) for c in result.checks]
        text = "\n".join(c.message for c in failing)
        assert ".detach()" not in text and "j > i with -inf before the softmax" not in text, text
        assert "bit-equal" not in text, text  # the cause says why a property on such values is not observed
        by_id = {c.id: c for c in result.checks}
        assert by_id["causal_mask"].advice and "before the softmax" in by_id["causal_mask"].advice  # kept as data
        if kind == "infinite":
            assert "NaN" not in text, text
        grads = by_id["gradient_blocks"]
        assert grads.status == "failed" and "not finite" in grads.message, grads.message


def test_a_checks_own_advice_stands_where_no_cause_explains_it() -> None:
    """The advice is the check's words when no cause speaks for it: then it is in the message (the smallest input
    and the reproduce line are fields of their own, which views print after it)."""
    from grader.runner import with_advice

    check = _failed(
        "causal_mask",
        message="weights[0, 0, 1] = 0.4, but query 0 may only attend to key 0.",
        advice="Mask the scores where j > i with -inf before the softmax.",
    ).model_copy(update={"reproduce": "grade a.py --only causal_mask --seed 1"})
    [alone] = with_advice([check])
    assert alone.message.splitlines()[1] == "Mask the scores where j > i with -inf before the softmax.", alone.message
    [explained] = with_advice([check.model_copy(update={"causes": ["mask"]})])
    assert "Mask the scores" not in explained.message
