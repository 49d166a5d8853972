"""The HTML report in a real browser: headless Debian Chromium opens it offline, logs no console message
(no script error, no blocked fetch, no CSP violation) and takes a screenshot.

Skipped, with the reason, only where Chromium is not installed; CI installs it (apt-get install chromium).
Set STEP4_SCREENSHOT_DIR to keep the screenshots (CI uploads them as artifacts).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.checks._base import heatmaps_for
from grader.head import HeadCall
from grader.inputs import Case, Shape, make_case
from grader.library import load_reference
from grader.models import CheckResult, Counterexample, Departure, Diagnosis, GradeResult, SourceLine, StudentOutput
from grader.oracle import LiveOracle
from grader.report import render_html, write_html
from grader.visuals import BANDWIDTHS, collect_visuals

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--enable-logging=stderr",
    "--v=0",
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HOSTILE = '<script>console.error("x")</script>'

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="Debian chromium is not installed here (apt-get install chromium); CI runs this test",
    ),
]


def chromium(page: Path, tmp: Path, *action: str, size: str = "1200,2400") -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``page`` with a fresh profile; returns the finished process."""
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    argv = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size}", *action, page.as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)  # type: ignore[list-item]


def console_messages(stderr: str) -> list[str]:
    """Chromium logs every console message (errors, CSP violations, blocked loads) as a CONSOLE line."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


class InProcessHead:
    """The reference standing in for the proxy Head, so the page has its visualisation section."""

    def attention(self, case: Case, **_: Any) -> HeadCall:
        with torch.no_grad():
            return HeadCall(*load_reference().causal_self_attention(*case.tensors().values()))

    def gaussian_weights(self, T: int, bandwidth: float) -> torch.Tensor:
        return load_reference().gaussian_positional_weights(T, bandwidth)

    def statistics(self, d_k: int, **kw: Any) -> dict[str, float]:
        return load_reference().score_scale_statistics(d_k, **kw)


def failing_result() -> GradeResult:
    """A head without a mask failing one check, with a hostile message and hostile output."""
    ref = load_reference()
    case = make_case(Shape(1, 4, 4, 2, 3), seed=3)
    with torch.no_grad():
        _, unmasked = ref.causal_self_attention(*case.tensors().values(), causal=False)
        _, masked = ref.causal_self_attention(*case.tensors().values(), causal=True)
    cx = Counterexample(shape=case.shape.as_dict(), dtype="float64", seed=20417)
    check = CheckResult(
        id="causal_mask",
        title="the strict upper triangle is exactly zero",
        cites="Definition 4.1",
        status="failed",
        score=0,
        max_score=8,
        seed=20417,
        duration_s=0.1,
        counterexample=cx,
        message=f"weights[0, 0, 1] = 0.43, but query 0 may only attend to key 0 {HOSTILE}\n"
        "At index (0, 0, 1): got 0.43, expected 0 (0 allowed).",
        reproduce="grade attention_head.py --only causal_mask --seed 20417",
        heatmaps=heatmaps_for(unmasked, masked),
    )
    return GradeResult(
        submission="attention_head.py",
        seed=20417,
        score=0,
        max_score=8,
        checks=[check],
        rubric="Project Step 4",
        duration_s=1.0,
        protections=["separate process"],
        devices=["cpu"],
        output=StudentOutput(text=f'<img src="https://example.com/x.png">{HOSTILE}'),
        visuals=collect_visuals(InProcessHead(), LiveOracle(ref), 20417),  # type: ignore[arg-type]
    )


def test_report_opens_offline_without_console_errors_and_screenshots(tmp_path: Path) -> None:
    page = write_html(failing_result(), tmp_path / "report.html")
    shot = tmp_path / "report.png"
    run = chromium(page, tmp_path, f"--screenshot={shot}")
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_messages(run.stderr) == []
    png = shot.read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 20_000  # a drawn page, not a blank one
    if os.environ.get("STEP4_SCREENSHOT_DIR"):
        dest = Path(os.environ["STEP4_SCREENSHOT_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "report.png")


def test_browser_parses_hostile_text_as_text(tmp_path: Path) -> None:
    page = write_html(failing_result(), tmp_path / "report.html")
    run = chromium(page, tmp_path, "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert 'id="failures"' in dom and dom.count('<svg class="hm"') == 3 + 2 + 2 * len(BANDWIDTHS)
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    assert "&lt;script&gt;" in dom


def test_the_console_check_would_catch_an_error(tmp_path: Path) -> None:
    """Control: the same detector flags a page that logs, so the test above cannot pass vacuously."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><p>x</p><script>console.error("deliberate")</script>', encoding="utf-8")
    run = chromium(page, tmp_path, "--dump-dom", size="400,300")
    assert any("deliberate" in line for line in console_messages(run.stderr)), run.stderr[-2000:]


def test_no_column_of_a_stage_matrix_collapses(tmp_path: Path) -> None:
    """Issue 53 (12): beside a cause's line, a column whose entries are all hidden (-inf, drawn as a dash) was a
    sliver next to the numbers. Measured in the browser: the page, its policy lifted for a script that writes
    each matrix's column widths into the DOM."""
    hidden = None
    produced = [[0.5 * i - j if j < i else hidden for j in range(7)] for i in range(7)]  # the diagonal hidden too
    expected = [[0.5 * i - j if j <= i else hidden for j in range(7)] for i in range(7)]
    cause = Diagnosis(
        id="mask_excludes_diagonal",
        title="Diagonal masked too",
        hint="Mask exactly the strict upper triangle.",
        cites="Definition 4.1",
        kind="mutation",
        explains=["causal_mask"],
        where=SourceLine(file="attention_head.py", line=14, code="mask = torch.ones(T, T).triu()"),
        departure=Departure(stage="masked", description="hides the diagonal too", expected=expected, produced=produced),
    )
    result = failing_result().model_copy(update={"diagnosis": [cause]})
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", render_html(result))
    measure = (
        '<script>document.body.setAttribute("data-widths", JSON.stringify([...document.querySelectorAll('
        '"table.matrix")].map(t => [...t.rows[0].cells].map(c => c.getBoundingClientRect().width))));</script>'
    )
    page = tmp_path / "measured.html"
    page.write_text(text.replace("</body>", measure + "</body>"), encoding="utf-8")
    run = chromium(page, tmp_path, "--dump-dom")
    found = re.search(r'data-widths="([^"]*)"', run.stdout)
    assert found is not None, run.stderr[-2000:]
    tables = json.loads(html.unescape(found[1]))
    assert len(tables) == 2 and all(len(cols) == 7 for cols in tables), tables
    for cols in tables:
        assert min(cols) >= 0.8 * max(cols), cols


# -- the class overview (issue 54) ----------------------------------------------------------------------------


def _class_overview(tmp_path: Path) -> Path:
    """A class overview with every new part: students to look at first (a low grade, a timeout, hostile attempts,
    an override), superseded submissions, entries not graded, causes in two students' own words."""
    from grader.batch import Outcome
    from grader.entries import Left
    from grader.gradebook import Override, build
    from grader.models import Attempts, Diagnosis
    from grader.report.summary import render_summary
    from grader.rubric import load_rubric

    rubric = load_rubric()

    def result(score: float, **kw: Any) -> GradeResult:
        return GradeResult(
            submission="attention_head.py",
            seed=1,
            score=score,
            max_score=100,
            checks=[],
            rubric="r",
            duration_s=1.0,
            **kw,
        )

    crash = [Diagnosis(id="crash:module", title="Importing your module raises NameError", hint="", cites="")]
    syntax = [Diagnosis(id="crash:module", title="Importing your module raises SyntaxError", hint="", cites="")]
    outcomes = [
        Outcome("amy", "amy.py", "graded", result(88)),
        Outcome("bea", "bea.py", "did_not_import", result(0, diagnosis=crash)),
        Outcome("cyd", "cyd.py", "did_not_import", result(0, diagnosis=syntax)),
        Outcome("dot", "dot.py", "graded", result(91, attempts=Attempts(reads=20, commands=4, writes=4))),
        Outcome("eve", "eve.py", "timeout", result(64)),
        Outcome("fay", "fay.py", "graded", result(13)),
        Outcome("u1901", "u1901.py", "graded", result(40), submitted_at="2026-02-01T00:00:00+00:00"),
        Outcome(
            "u1901-2", "u1901.zip", "graded", result(70), student="u1901", submitted_at="2026-02-02T00:00:00+00:00"
        ),
    ]
    book = build(outcomes, rubric, overrides=[Override("amy", "total", 95, "regrade request", 2)])
    page = render_summary(outcomes, rubric, book=book, left=[Left("notes.txt", "not a folder, .py, .zip or .ipynb")])
    path = tmp_path / "summary.html"
    path.write_text(page, encoding="utf-8")
    return path


def _help_order(dom: str) -> list[str]:
    import re

    table = dom[dom.index('id="help-table"') : dom.index("</table>", dom.index('id="help-table"'))]
    return re.findall(r'data-student="([^"]+)"', table)


def test_the_class_overview_sorts_and_shows_its_new_parts_in_a_real_browser(tmp_path: Path) -> None:
    """The students to look at first, sorted by the column the address names (the headers link there), by the
    page's one script, which its CSP pins by hash: no console message (a blocked script would log one)."""
    page = _class_overview(tmp_path)
    plain = chromium(page, tmp_path, "--dump-dom")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert console_messages(plain.stderr) == []
    assert _help_order(plain.stdout)[:3] == ["bea", "cyd", "fay"]  # lowest first, as written
    for spec, first in (("student", ["amy", "bea", "cyd"]), ("-score", ["amy", "dot", "u1901"])):
        argv = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / ('p' + spec)}", "--dump-dom"]
        run = subprocess.run(  # type: ignore[list-item]
            [*argv, page.as_uri() + f"#sort={spec}"], capture_output=True, text=True, timeout=60, check=False
        )
        assert run.returncode == 0 and console_messages(run.stderr) == [], run.stderr[-2000:]
        assert _help_order(run.stdout)[:3] == first, spec
        assert f'data-sorted="{spec}"' in run.stdout  # the script ran
    dom = plain.stdout
    for part in ('id="provisional"', 'id="hostile"', 'id="uncounted"', 'id="overrides"', "raises SyntaxError"):
        assert part in dom, part
    shot = tmp_path / "summary.png"
    run = chromium(page, tmp_path, f"--screenshot={shot}", size="1200,3000")
    assert run.returncode == 0 and shot.read_bytes().startswith(PNG_SIGNATURE) and shot.stat().st_size > 20_000
    if os.environ.get("STEP4_SCREENSHOT_DIR"):
        dest = Path(os.environ["STEP4_SCREENSHOT_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "summary.png")
