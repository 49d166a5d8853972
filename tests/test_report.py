"""The HTML feedback report and the terminal summary: structure, escaping, determinism, size.

Most tests render hand-built results (fast, deterministic); the heatmaps in them are real attention
weights of the reference and of a head without a mask. One slow test goes through the real grading
path and the sandbox.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import torch
from markupsafe import escape
from rich.console import Console

from grader.checks._base import heatmaps_for
from grader.head import HeadCall, StudentFailure
from grader.inputs import Case, Shape, make_case
from grader.library import known_heads, load_reference
from grader.models import CheckResult, Counterexample, Diagnosis, GradeResult, SourceLine, StudentOutput
from grader.oracle import LiveOracle
from grader.report import render_html, render_terminal, wording, write_html
from grader.visuals import BANDWIDTHS, Visuals, collect_visuals

REF = load_reference()
N_VISUAL_MAPS = 2 + 2 * len(BANDWIDTHS)  # sentence: yours + reference; each bandwidth: yours + reference


# ---- stand-ins for the proxy Head (collect_visuals only calls these three methods) ------------------


class ReferenceHead:
    """Answers like a correct submission (the reference, in-process); ``causal_ignored`` drops the mask."""

    def __init__(self, *, causal_ignored: bool = False) -> None:
        self.causal_ignored = causal_ignored

    def attention(self, case: Case, *, causal: bool = True, **_: Any) -> HeadCall:
        with torch.no_grad():
            out, w = REF.causal_self_attention(*case.tensors().values(), causal=causal and not self.causal_ignored)
        return HeadCall(out, w)

    def gaussian_weights(self, T: int, bandwidth: float) -> torch.Tensor:
        return REF.gaussian_positional_weights(T, bandwidth)

    def statistics(self, d_k: int, *, T: int, n_samples: int, seed: int) -> dict[str, float]:
        return REF.score_scale_statistics(d_k, T=T, n_samples=n_samples, seed=seed)


class BrokenHead:
    """Every call fails the way the proxy reports a student crash."""

    def __init__(self, message: str) -> None:
        self.message = message

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise StudentFailure("error", self.message)

    attention = gaussian_weights = statistics = _fail


class GraderBugHead:
    """Every call raises something that is not a StudentFailure (a bug on our side)."""

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError("internal")

    attention = gaussian_weights = statistics = _fail


# ---- hand-built results ---------------------------------------------------------------------------

SEED = 20417


@pytest.fixture(scope="module")
def visuals_ok() -> dict[str, object]:
    return collect_visuals(ReferenceHead(), LiveOracle(REF), SEED)  # type: ignore[arg-type]


def no_mask_maps(T: int) -> list:  # type: ignore[type-arg]
    """Heatmaps of a head without a mask against the reference on one seeded input."""
    case = make_case(Shape(1, T, 4, 2, 3), seed=7)
    with torch.no_grad():
        _, unmasked = REF.causal_self_attention(*case.tensors().values(), causal=False)
        _, masked = REF.causal_self_attention(*case.tensors().values(), causal=True)
    return heatmaps_for(unmasked, masked)


def make_check(
    cid: str,
    status: str = "passed",
    *,
    points: float = 5.0,
    message: str | None = None,
    heatmaps: list | None = None,
    visibility: str = "visible",
    T: int = 2,
) -> CheckResult:  # type: ignore[type-arg]
    problem = status in ("failed", "error", "timeout")
    cx = (
        Counterexample(shape={"B": 1, "T": T, "d": 4, "d_k": 2, "d_v": 3}, dtype="float64", seed=SEED)
        if problem
        else None
    )
    reproduce = f"grade attention_head.py --only {cid} --seed {SEED}" if problem else None
    text = message or (
        f"{cid} holds."
        if not problem
        else (
            "Your weights differ from the reference head (Definition 2.2).\n"
            "weights (causal=True): tensors are not close (rtol 1e-10, atol 1e-12).\n"
            "Greatest absolute difference: 0.9543 at index (0, 0, 1) (up to 1e-12 allowed)\n"
            "At index (0, 0, 1): got 0.9543, expected 0."
        )
    )
    return CheckResult(
        id=cid,
        title=f"the property {cid}",
        cites="Proposition 4.3",
        status=status,  # type: ignore[arg-type]
        score=0.0 if problem else points,
        max_score=points,
        visibility=visibility,  # type: ignore[arg-type]
        message=text,
        counterexample=cx,
        reproduce=reproduce,
        seed=SEED,
        duration_s=0.01,
        heatmaps=heatmaps if heatmaps is not None else (no_mask_maps(T) if status == "failed" else []),
    )


def make_result(
    checks: list[CheckResult],
    *,
    visuals: dict[str, object] | None = None,
    output: str = "",
    submission: str = "attention_head.py",
) -> GradeResult:
    return GradeResult(
        submission=submission,
        seed=SEED,
        score=sum(c.score for c in checks),
        max_score=sum(c.max_score for c in checks),
        checks=checks,
        protections=["separate process", "rlimits"],
        devices=["cpu"],
        output=StudentOutput(text=output),
        rubric="Project Step 4",
        duration_s=1.0,
        visuals=visuals or {},
    )


def count_heatmaps(html: str) -> int:
    return html.count('<svg class="hm"')


# ---- the page -------------------------------------------------------------------------------------


def test_passing_report_has_every_section_and_no_failures(visuals_ok: dict[str, object]) -> None:
    checks = [make_check(c) for c in ("interface", "causal_mask", "future_perturbation")]
    html = render_html(make_result(checks, visuals=visuals_ok))
    assert html.startswith("<!DOCTYPE html>")
    for section in ('id="checks"', 'id="visuals"', 'id="output"', 'id="reading"'):
        assert section in html
    assert 'id="failures"' not in html
    assert html.count('<tr class="row-passed">') == 3
    assert count_heatmaps(html) == N_VISUAL_MAPS
    assert html.count('<svg class="chart"') == 2
    assert "could not be computed" not in html
    assert "✓ Your weights match the reference" in html
    assert wording.score_line(make_result(checks)) in html  # shared wording, in the page title


def test_failing_report_explains_each_failure(visuals_ok: dict[str, object]) -> None:
    checks = [
        make_check("interface"),
        make_check("causal_mask", "failed"),
        make_check("reference_match", "failed", T=5),
        make_check("determinism", "error", message="Your code did not complete this check: boom"),
    ]
    html = render_html(make_result(checks, visuals=visuals_ok))
    assert 'id="failures"' in html
    assert html.count('<article class="card') == 3
    assert count_heatmaps(html) == 2 * 3 + N_VISUAL_MAPS
    assert html.count("Smallest failing input</h4>") == 3
    assert "grade attention_head.py --only causal_mask --seed 20417" in html
    assert "Expected vs got" in html and "(up to 1e-12 allowed)" in html and "got 0.9543, expected 0." in html
    # The reference's masked triangle is hatched; the unmasked head's weight above the diagonal is outlined.
    assert 'fill="url(#p-masked)"' in html and 'stroke="#d1001f"' in html
    assert "1 cell above the diagonal carries weight" in html
    assert "10 cells above the diagonal carry weight" in html  # T = 5: 10 strict-upper cells
    assert "<title>query 0, key 1: " in html  # values on hover
    assert ">key j</text>" in html and ">query i</text>" in html
    # The message lines shown as fields are not repeated in the explanation.
    card = html[html.index('id="check-causal_mask"') :]
    assert card.count("grade attention_head.py --only causal_mask") == 1


def test_hostile_text_is_shown_as_text_never_markup() -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    checks = [
        make_check("interface", "error", message=f"Your code raised ValueError: {evil}"),
        make_check("causal_mask", "failed", message=f"weights[0, 0, 1] = 0.4 `{evil}`\nmore {evil}"),
    ]
    visuals = collect_visuals(BrokenHead(f"ZeroDivisionError: {evil}"), LiveOracle(REF), SEED)  # type: ignore[arg-type]
    html = render_html(make_result(checks, visuals=visuals, output=f"</pre>{evil}", submission=f"{evil}.py"))
    assert "<script" not in html.lower()  # the page has no script of its own, and none gets in
    assert "<img" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "could not be computed: ZeroDivisionError: &lt;script&gt;" in html
    assert html.count('<pre class="output">') == 1 and "&lt;/pre&gt;" in html


def test_hidden_check_lists_name_and_outcome_only() -> None:
    secret = make_check(
        "gradient_blocks",
        "failed",
        visibility="hidden",
        message="SECRET: perturbed X[0, 3] by 0.5\nAt index (0, 3): got 1, expected 0.",
    )
    html = render_html(make_result([make_check("interface"), secret]))
    assert "gradient_blocks" in html and "✗ FAILED" in html and "only its outcome is shown" in html
    assert "SECRET" not in html and 'id="check-gradient_blocks"' not in html
    assert str(secret.counterexample.describe()) not in html  # type: ignore[union-attr]
    assert count_heatmaps(html) == 0
    revealed = render_html(make_result([secret]), show_hidden=True)
    assert "SECRET" in revealed and count_heatmaps(revealed) == 3


def test_same_result_same_bytes_and_self_contained(visuals_ok: dict[str, object]) -> None:
    result = make_result([make_check("causal_mask", "failed", T=5), make_check("interface")], visuals=visuals_ok)
    html = render_html(result)
    assert html == render_html(GradeResult.model_validate_json(result.model_dump_json()))
    assert not re.search(r"https?:|//[a-z]|\bsrc=|@import|url\((?!#)", html, re.IGNORECASE)
    assert set(re.findall(r'href="(.)', html)) == {"#"}
    assert "default-src 'none'" in html  # the browser refuses any fetch a future edit might add


def test_report_stays_small(visuals_ok: dict[str, object]) -> None:
    # Failing checks at the sizes the checks report for a head without a mask (T = 2, 2, 3, 2, 2, 12, 3).
    typical = [make_check(f"check_{k}", "failed", T=T) for k, T in enumerate((2, 2, 3, 2, 2, 12, 3))]
    assert len(render_html(make_result(typical, visuals=visuals_ok)).encode()) < 300_000
    worst = [make_check(f"check_{k}", "failed", T=16) for k in range(8)]  # more and larger than any known bug
    assert len(render_html(make_result(worst, visuals=visuals_ok)).encode()) < 1_000_000
    assert len(render_html(make_result([make_check("interface")], visuals=visuals_ok)).encode()) < 150_000


def test_output_is_escaped_and_truncated_with_a_note() -> None:
    result = make_result([make_check("interface")], output="x" * 20_000 + "TAIL")
    result = result.model_copy(
        update={"output": StudentOutput(text="x" * 20_000 + "TAIL", truncated=True, bytes_dropped=123)}
    )
    html = render_html(result)
    assert "Only the first 16000 of 20004 captured characters are shown" in html
    assert "123 more bytes" in html and "TAIL" not in html
    assert "printed nothing" in render_html(make_result([make_check("interface")]))


def test_write_html_writes_the_rendered_page(tmp_path: Path) -> None:
    result = make_result([make_check("interface")])
    path = write_html(result, tmp_path / "sub" / "report.html")
    assert path.read_text(encoding="utf-8") == render_html(result)


# ---- the visualisation data -----------------------------------------------------------------------


def test_visuals_are_complete_for_a_correct_head(visuals_ok: dict[str, object]) -> None:
    v = Visuals.model_validate(visuals_ok)
    assert v.problems == [] and v.sentence is not None and v.kernels is not None and v.scale is not None
    assert v.sentence.panel.max_abs_diff == 0.0 and len(v.sentence.tokens) <= 12
    assert all(p.max_abs_diff == 0.0 for p in v.kernels.panels)
    assert [p.d_k for p in v.scale.yours] == [p.d_k for p in v.scale.reference] and v.scale.problem is None


def test_visuals_show_a_leaking_head() -> None:
    v = Visuals.model_validate(collect_visuals(ReferenceHead(causal_ignored=True), LiveOracle(REF), SEED))  # type: ignore[arg-type]
    assert v.sentence is not None and v.sentence.panel.max_abs_diff is not None and v.sentence.panel.max_abs_diff > 0.1
    html = render_html(make_result([make_check("interface")], visuals=v.model_dump(mode="json")))
    assert "✗ Your weights differ from the reference" in html and "cells above the diagonal carry weight" in html


@pytest.mark.parametrize("head", [BrokenHead("the submission defines no `score_scale_statistics`"), GraderBugHead()])
def test_visuals_never_raise_and_say_why(head: object) -> None:
    v = Visuals.model_validate(collect_visuals(head, LiveOracle(REF), SEED))  # type: ignore[arg-type]
    assert v.sentence is not None and v.sentence.panel.yours is None and v.sentence.panel.reference is not None
    assert v.sentence.panel.problem is not None and v.sentence.panel.problem.startswith("could not be computed: ")
    assert v.kernels is not None and all(p.problem for p in v.kernels.panels)
    assert v.scale is not None and v.scale.yours == [] and v.scale.problem
    html = render_html(make_result([make_check("interface")], visuals=v.model_dump(mode="json")))
    assert count_heatmaps(html) == 1 + len(v.kernels.panels)  # only the reference's maps
    assert "could not be computed" in html


class _Source(HTMLParser):
    """The children of ``<pre class="source">``: ('span', classes, text) for each element, ('text', '', data)
    for text between them."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.span: list[str] | None = None
        self.children: list[tuple[str, ...]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = dict(attrs).get("class") or ""
        if tag == "pre" and "source" in classes.split():
            self.inside = True
        elif self.inside:
            assert tag == "span" and self.span is None, tag  # flat: one span per line
            self.span = ["span", classes, ""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self.inside = False
        elif self.inside and tag == "span" and self.span is not None:
            self.children.append(tuple(self.span))
            self.span = None

    def handle_data(self, data: str) -> None:
        if self.span is not None:
            self.span[2] += data
        elif self.inside:
            self.children.append(("text", "", data))


def test_code_excerpts_are_single_spaced() -> None:
    """Issue 36.5: each line of the excerpt is a block; a newline between two blocks inside a ``<pre>`` is
    an empty line of its own, so the excerpt read double-spaced. One block per line, nothing between them."""
    context = {12: "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):", 13: "    d_k = X.shape[-1]",
               14: "", 15: "    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)"}  # fmt: skip
    where = SourceLine(file="attention_head.py", line=13, code="d_k = X.shape[-1]", context=context)
    cause = Diagnosis(
        id="d_k_from_d", title="d_k read from X", hint="Read d_k from W_K.", cites="Lemma 5.5", explains=["x"],
        where=where,
    )  # fmt: skip
    result = make_result([make_check("score_scaling", "failed")]).model_copy(update={"diagnosis": [cause]})
    page = render_html(result)
    parser = _Source()
    parser.feed(page)
    assert [kind for kind, _, _ in parser.children] == ["span"] * len(context)  # no text, not even a newline
    assert [text for _, _, text in parser.children] == [f"{n:4d}  {t}" for n, t in context.items()]
    assert [classes for _, classes, _ in parser.children] == ["src-line", "src-line src-hl", "src-line", "src-line"]
    assert re.search(r"pre\.source \.src-line \{[^}]*display: block", page)  # each span is a line of its own


# ---- the terminal summary -------------------------------------------------------------------------


def test_terminal_summary_uses_the_same_wording() -> None:
    checks = [
        make_check("interface"),
        make_check("causal_mask", "failed"),
        make_check("determinism", "error", message="Your code raised [bold]KeyError[/]: 'x'"),
    ]
    result = make_result(checks)
    console = Console(record=True, width=120, color_system=None)
    render_terminal(result, console)
    text = console.export_text()
    lines = text.splitlines()
    assert lines[-1] == wording.score_line(result)
    assert re.search(r"^✓ PASSED +interface +5 / 5 +Proposition 4\.3$", text, re.M)
    assert re.search(r"^✗ FAILED +causal_mask +0 / 5 +Proposition 4\.3$", text, re.M)
    assert "      Your weights differ from the reference head (Definition 2.2)." in lines
    assert "      Your code raised [bold]KeyError[/]: 'x'" in lines  # markup in student text stays literal
    html = render_html(result)
    for c in checks:
        assert wording.points(c) in text and wording.points(c) in html
        if wording.is_problem(c):
            assert wording.headline(c) in text and str(escape(wording.headline(c))) in html


def test_every_view_shows_each_causes_price_whichever_count_stands() -> None:
    """Issue 36.12: when the two counts agree the grade counts checks, and the note says they agree; each cause
    still shows its price, on the terminal, in the report, in the JSON and on Gradescope."""
    from grader.gradescope import results_json
    from grader.scoring import tally

    checks = [make_check("interface"), make_check("causal_mask", "failed"), make_check("convex_hull", "failed")]
    cause = Diagnosis(id="no_mask", title="No causal mask", hint="Mask the scores.", cites="Definition 4.1",
                      explains=["causal_mask", "convex_hull"])  # fmt: skip
    counted = tally(checks, [cause], {"no_mask": 10})  # = the two failing checks' points: the counts agree
    assert counted.scoring == "checks" and counted.note and "the same score (5 points)" in counted.note
    checks = [c.model_copy(update={"causes": ["no_mask"]}) if c.status == "failed" else c for c in checks]
    result = make_result(checks).model_copy(
        update={"diagnosis": counted.diagnosis, "scoring_note": counted.note, "score_by_checks": counted.score}
    )
    heading = "(1) No causal mask (Definition 4.1): price 10 points"
    console = Console(record=True, width=200, color_system=None)
    render_terminal(result, console)
    terminal = console.export_text().splitlines()
    assert heading in terminal and terminal[-2] == counted.note
    assert '<span class="chip deduction">price 10 points</span>' in render_html(result)
    assert json.loads(result.model_dump_json())["diagnosis"][0]["deduction"] == 10
    assert heading in results_json(result)["output"].splitlines()


# ---- through the real grading path ----------------------------------------------------------------


@pytest.mark.slow
def test_report_of_a_real_graded_chaff(tmp_path: Path, rubric, pool, write_head) -> None:  # type: ignore[no-untyped-def]
    from grader.runner import grade

    chaff = next(h for h in known_heads("chaff") if h.id == "no_mask")
    only = ["interface", "causal_mask", "future_perturbation"]
    result = grade(write_head(chaff.source()), rubric, only=only, pool=pool)
    html = render_html(result)
    failing = [c for c in result.checks if wording.is_problem(c)]
    assert {c.id for c in failing} == {"causal_mask", "future_perturbation"}
    assert html.count('<article class="card') == len(failing)
    assert count_heatmaps(html) == sum(len(c.heatmaps) for c in failing) > 0
    for c in failing:
        assert c.reproduce is not None and c.reproduce in html


@pytest.mark.slow
def test_student_prints_and_raises_script_through_the_sandbox(rubric, pool, write_head) -> None:  # type: ignore[no-untyped-def]
    from grader.runner import grade

    source = (
        'print("<script>alert(1)</script>")\n'
        "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n"
        '    raise ValueError("<script>alert(2)</script>")\n'
    )
    result = grade(write_head(source), rubric, only=["causal_mask"], pool=pool)
    assert "<script>" in result.output.text and "<script>" in result.checks[0].message
    html = render_html(result)
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html


# ---- limits and output, said where the student looks (issue 53.7) -----------------------------------------


def _limited(**fields: object) -> GradeResult:
    return GradeResult(submission="h.py", seed=1, score=0, max_score=10, checks=[], rubric="r", duration_s=0, **fields)  # type: ignore[arg-type]


def test_the_terminal_says_the_memory_cap_and_the_captured_output() -> None:
    from grader.models import LimitHit, StudentOutput
    from grader.report.terminal import render_terminal

    result = _limited(
        limits_hit=[LimitHit(limit="memory", cap_mb=2048, tried_bytes=8 << 30)],
        output=StudentOutput(text="x" * 65536, truncated=True, bytes_dropped=14 << 20),
    )
    console = Console(width=200, record=True, force_terminal=False)
    render_terminal(result, console, report="report.html")
    lines = console.export_text().splitlines()
    text = " ".join(" ".join(lines).split())
    assert "Memory cap hit: your code tried to allocate 8 GiB, and a submission may use at most 2048 MiB" in text
    assert (
        "Output captured: your code printed 14.1 MiB while being graded; the first 64 KiB were kept (read it in "
        "report.html) and the rest dropped." in text
    )
    assert lines[-1].startswith("Score: ")
    small = _limited(output=StudentOutput(text="debug\n"))
    said = wording.limit_lines(small)
    assert said == ["Output captured: your code printed 6 bytes while being graded, not shown here (rerun with --html "
                    "report.html to read it)."]  # fmt: skip
    assert wording.limit_lines(_limited()) == []


def test_no_sentence_speaks_of_a_change_when_no_change_was_named() -> None:
    """Issue 53.7: a crash alone proven complete: 'With cause (1) fixed', never 'With this change'."""
    from grader.models import Diagnosis, DiagnosisProof

    crash = Diagnosis(id="crash:causal_self_attention", title="raises", hint="h", cites="c", kind="crash")
    proven = _limited(diagnosis=[crash], diagnosis_complete=DiagnosisProof(changes=1, checks=["causal_mask"]))
    line = wording.diagnosis_complete_line(proven)
    assert line is not None and line.startswith("With cause (1) fixed your head") and "this change" not in line
    change = crash.model_copy(update={"id": "no_scaling", "kind": "mutation"})
    line = wording.diagnosis_complete_line(_limited(diagnosis=[change], diagnosis_complete=proven.diagnosis_complete))
    assert line is not None and line.startswith("With this change")


def test_an_allocation_the_cap_refused_is_a_limit_hit(write_head: Any, rubric: Any, pool: Any) -> None:
    """Issue 53.7: torch's allocator error in the worker is recorded as the memory cap met, with what was tried."""
    from grader.library import reference_path
    from grader.runner import grade

    reference = reference_path().read_text(encoding="utf-8")

    source = reference.replace(
        "    T = X.shape[1]\n", "    big = torch.ones(8 << 30, dtype=torch.uint8)  # 8 GiB\n    T = X.shape[1]\n", 1
    )
    result = grade(write_head(source), rubric, pool=pool, only=["interface"], visuals=False)
    assert [(h.limit, h.cap_mb, h.tried_bytes) for h in result.limits_hit] == [
        ("memory", rubric.limits.memory_mb, 8 << 30)
    ]
    clean = grade(write_head(reference, "clean"), rubric, pool=pool, only=["interface"], visuals=False)
    assert clean.limits_hit == []
