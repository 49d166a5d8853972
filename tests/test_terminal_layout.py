"""Issue 25, item 4: the summary laid out for where it lands when that is not a terminal (``!grade`` in a
notebook cell, a CI log, a pipe): ``COLUMNS`` honoured (a wide default otherwise), a citation never cut
in two, no trailing spaces, a command line never wrapped, and the ``Score:`` line still last."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from rich.console import Console

from grader.library import known_heads
from grader.models import CheckResult, GradeResult
from grader.report import wording
from grader.report.terminal import WIDE, render_terminal, summary_console

REPO = Path(__file__).resolve().parent.parent
LONG_CITE = "Section 9.1 (the batch coordinate is preserved)"
REPRODUCE = "grade 'my long folder name/with spaces in it/attention_head.py' --only batch_independence --seed 20417"


def _result() -> GradeResult:
    checks = [
        CheckResult(
            id="interface", title="t", cites="Section 9.1 (batched shapes)", status="passed", score=5, max_score=5,
            message="ok", seed=1, duration_s=0,
        ),
        CheckResult(
            id="batch_independence", title="t", cites=LONG_CITE, status="failed", score=0, max_score=6,
            message="Batch element 1 changed when element 0 did: "
            + "the head mixes the batch coordinate into the scores, which Section 9.1 rules out. " * 3,
            reproduce=REPRODUCE, seed=1, duration_s=0,
        ),
    ]  # fmt: skip
    return GradeResult(
        submission="attention_head.py", seed=1, score=5, max_score=11, checks=checks, rubric="Project Step 4",
        duration_s=0,
    )  # fmt: skip


def _render(width: int) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, highlight=False)
    render_terminal(_result(), console)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [60, 80, 120])
def test_outside_a_terminal_every_line_is_whole(width: int) -> None:
    lines = _render(width)
    result = _result()
    assert lines[-1] == wording.score_line(result)
    assert [ln for ln in lines if ln != ln.rstrip()] == []  # no padding to the width
    assert sum(LONG_CITE in ln for ln in lines) == 1  # the citation in one piece, never "... coordinate" / "is ..."
    assert not any(ln.strip() == "is preserved)" for ln in lines)
    assert f"      Reproduce: {REPRODUCE}" in lines  # the command, whole, even past the width
    for ln in lines:  # everything else keeps to the width
        assert len(ln) <= width or REPRODUCE in ln, ln
    row = next(ln for ln in lines if "batch_independence" in ln)
    if len(row) + 1 + len(LONG_CITE) <= width:
        assert row.endswith(LONG_CITE)


def test_a_row_too_wide_for_its_citation_puts_it_on_the_next_line() -> None:
    lines = _render(60)
    k = next(i for i, ln in enumerate(lines) if ln.startswith("✗ FAILED  batch_independence"))
    assert lines[k].rstrip().endswith("0 / 6")
    assert lines[k + 1].strip() == LONG_CITE


KERNEL_MARKS = ("JPY_PARENT_PID", "MPLBACKEND")  # what a notebook's kernel leaves in its children's environment


def _terminal(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, color_system=None, highlight=False, force_terminal=True), out


def test_a_terminal_keeps_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the citation column wraps inside the terminal's width, as before."""
    for name in KERNEL_MARKS:
        monkeypatch.delenv(name, raising=False)
    console, out = _terminal(60)
    render_terminal(_result(), console)
    lines = out.getvalue().splitlines()
    assert not any(LONG_CITE in ln for ln in lines)  # wrapped in its column
    assert lines[-1].rstrip() == wording.score_line(_result())


MARKS = [("JPY_PARENT_PID", "4242"), ("MPLBACKEND", "module://matplotlib_inline.backend_inline")]


@pytest.mark.parametrize("mark", MARKS)
def test_under_a_kernel_a_terminal_gets_whole_lines(monkeypatch: pytest.MonkeyPatch, mark: tuple[str, str]) -> None:
    """``!grade`` in a cell is a terminal to rich; the kernel's environment gives the cell away."""
    for name in KERNEL_MARKS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(*mark)
    console, out = _terminal(80)
    render_terminal(_result(), console)
    lines = out.getvalue().splitlines()
    assert sum(LONG_CITE in ln for ln in lines) == 1 and [ln for ln in lines if ln != ln.rstrip()] == []


def test_the_console_honours_columns_or_is_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "64")
    assert summary_console(io.StringIO()).width == 64
    monkeypatch.delenv("COLUMNS")
    assert summary_console(io.StringIO()).width == WIDE  # a pipe: not rich's 80 columns


def _grade_in_a_notebook_cell(cmd: list[str], env: dict[str, str]) -> str:
    """What ``!CMD`` in a notebook cell gives the command: a pseudo-terminal of 24 x 80 that nothing
    resizes (IPython runs it through pexpect) and the kernel's environment; the text the cell shows."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    kernel_env = env | {"JPY_PARENT_PID": str(os.getpid()), "FORCE_COLOR": "1", "TERM": "xterm-color"}
    with subprocess.Popen(cmd, cwd=REPO, env=kernel_env, stdout=follower, stderr=follower) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # EIO: every writer is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(300) == 0
    os.close(leader)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;]*m", "", text)  # the cell renders the colours; the text is what is left


@pytest.mark.parametrize(("where", "columns"), [("pipe", None), ("pipe", "72"), ("notebook cell", None)])
def test_grade_where_it_lands(where: str, columns: str | None) -> None:
    """The real command, its stdout a pipe (a CI log) or a notebook cell's pseudo-terminal: every row
    holds its whole citation (beside the row or on the next line), and the Score line is last."""
    chaff = next(h for h in known_heads("chaff") if h.id == "batch_coupling")
    drop = ("COLUMNS", *KERNEL_MARKS)
    env = {k: v for k, v in os.environ.items() if k not in drop} | ({"COLUMNS": columns} if columns else {})
    cmd = [sys.executable, "-m", "grader", str(chaff.path)]
    if where == "pipe":
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        out = done.stdout
    else:
        out = _grade_in_a_notebook_cell(cmd, env)
    lines = out.splitlines()
    width = int(columns) if columns else WIDE
    assert lines[-1].startswith("Score: ")
    assert [ln for ln in lines if ln != ln.rstrip()] == []
    assert all(len(ln) <= width or "Reproduce: " in ln for ln in lines)
    assert sum(LONG_CITE in ln for ln in lines) == 1
    if columns is None:
        assert any(ln.startswith("✗ FAILED  batch_independence") and ln.endswith(LONG_CITE) for ln in lines)


def _extra_credit_result() -> GradeResult:
    """The longest check id of the rubric, two-digit points and extra credit ('+0 / 3 extra', '+2.5 / 3 extra')."""
    checks = [
        CheckResult(
            id="permutation_equivariance", title="t", cites="Theorem 6.1 and Remark 6.3", status="failed", score=0,
            max_score=12, message="out[0, 1] moved with the permutation", seed=1, duration_s=0,
        ),
        CheckResult(
            id="kv_cache", title="t", cites="Section 8.1 (autoregressive inference and the key-value cache)",
            status="skipped", score=0, max_score=3, extra_credit=True, message="Optional: not submitted.", seed=1,
            duration_s=0,
        ),
        CheckResult(
            id="streaming_softmax", title="t", cites="Aside 8.1 (streaming softmax)", status="passed", score=2.5,
            max_score=3, extra_credit=True, message="ok", seed=1, duration_s=0,
        ),
    ]  # fmt: skip
    return GradeResult(
        submission="attention_head.py", seed=1, score=2.5, max_score=12, checks=checks, rubric="Project Step 4",
        duration_s=0,
    )  # fmt: skip


ROW_WIDTH = 9 + 1 + len("permutation_equivariance") + 1 + len("+2.5 / 3 extra")  # status, id, points


@pytest.mark.parametrize("terminal", [True, False], ids=["table", "lines"])
def test_the_points_column_is_never_cut(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    """Issue 36.6: at 130 columns the terminal cut '+0 / 3 extra' to '+0 / 3 ext…'. At every width that holds
    a row's status, id and points, each row shows its points whole, right-aligned in one column."""
    for name in KERNEL_MARKS:
        monkeypatch.delenv(name, raising=False)
    result = _extra_credit_result()
    for width in sorted({130, *range(ROW_WIDTH + 2, 201)}):
        out = io.StringIO()
        console = Console(file=out, width=width, color_system=None, highlight=False, force_terminal=terminal)
        render_terminal(result, console)
        lines = out.getvalue().splitlines()
        ends = set()
        for check in result.checks:
            row = next(ln for ln in lines if ln.startswith(wording.STATUS_GLYPH[check.status] + " ") and check.id in ln)
            points = wording.points(check)
            assert f" {points}" in row, (width, row)
            ends.add(row.index(points) + len(points))
        assert len(ends) == 1, (width, lines)  # one column, right-aligned
