"""The terminal summary: one line per check, the failure message indented below it, the score last.

Student text (messages carry exception text) is always wrapped in ``rich.text.Text``, never parsed as
rich markup, so a message containing ``[bold]`` or ``[/]`` prints as written.

Two layouts of the same lines. On a terminal, a table that wraps each column inside the terminal's width.
Anywhere else (``!grade`` in a notebook cell, a CI log, a pipe, the plain text of ``check()``) nothing
reflows the text after it is written, so every line is laid out whole at ``COLUMNS`` (default
:data:`WIDE`): a check's row keeps its citation in one piece (beside the row, or alone on the next line
when the row would pass the width), messages wrap at words with their indent and no trailing spaces, and
a line holding a command (``Reproduce: grade ...``) is never cut, so it can be copied as it stands.

A notebook cell's ``!grade`` is a terminal to the grader (IPython runs the command in an 80-column
pseudo-terminal that nothing resizes, with ``FORCE_COLOR`` set) but lands in the cell: it gets the
line layout, in colour. The kernel's environment says so (:func:`in_notebook_cell`).
"""

from __future__ import annotations

import os
from typing import IO

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grader.models import CheckResult, GradeResult, Status
from grader.report import wording

STYLE: dict[Status, str] = {
    "passed": "green",
    "failed": "bold red",
    "error": "bold yellow",
    "timeout": "bold yellow",
    "skipped": "dim",
}
INDENT = 6
WIDE = 120  # the width of the non-terminal layout when COLUMNS does not say: a row and its citation fit
STATUS_WIDTH, POINTS_WIDTH = 9, 11  # the points column is at least this wide, and as wide as its widest cell
COMMAND = "Reproduce: "  # a line holding it ends with a command: never wrapped outside a terminal


def in_notebook_cell() -> bool:
    """Whether this process runs under a notebook's kernel (``!grade`` in a cell), from what the kernel
    leaves in its children's environment: jupyter_client's ``JPY_PARENT_PID``, ipykernel's inline
    matplotlib backend (VS Code and Colab run ipykernel too)."""
    return "JPY_PARENT_PID" in os.environ or "backend_inline" in os.environ.get("MPLBACKEND", "")


def table_layout(console: Console) -> bool:
    """The terminal's table, or whole lines (a notebook cell, a log, a pipe, a file)."""
    return console.is_terminal and not in_notebook_cell()


def summary_console(file: IO[str] | None = None) -> Console:
    """The console the summary is printed on: a terminal keeps its own width; elsewhere the width is
    ``COLUMNS`` when set (rich reads it), else :data:`WIDE`, never the 80 columns rich assumes for a pipe
    or IPython gives ``!grade``. Text for a ``file`` is plain text kept for later (``check()``'s summary):
    no terminal, whatever ``FORCE_COLOR`` says, and no notebook display, even in a kernel."""
    plain = {"force_terminal": False, "force_jupyter": False} if file is not None else {}
    console = Console(file=file, highlight=False, **plain)  # type: ignore[arg-type]
    if not table_layout(console) and not os.environ.get("COLUMNS", "").strip().isdigit():
        console.width = WIDE
    return console


def _row_cells(check: CheckResult, *, withheld: bool) -> tuple[Text, Text, Text, Text]:
    """The four cells of a check's row: status, id, points, citation."""
    status = Text(f"{wording.STATUS_GLYPH[check.status]} {wording.STATUS_LABEL[check.status]}", STYLE[check.status])
    cites = wording.WITHHELD.get(check.visibility, "") if withheld else check.cites
    points = Text(wording.points(check), "bold" if wording.is_problem(check) else "")
    return status, Text(check.id), points, Text(cites, "dim")


def points_width(result: GradeResult) -> int:
    """The width of the points column: its widest cell ('+0 / 3 extra'), never cut at any width."""
    return max([POINTS_WIDTH, *(Text(wording.points(c)).cell_len for c in result.checks)])


def check_row(check: CheckResult, *, id_width: int, withheld: bool, points_width: int = POINTS_WIDTH) -> Table:
    """'✗ FAILED  causal_mask  0 / 8  Definition 4.1'; fixed columns keep rows aligned as cites wrap."""
    row = Table.grid(padding=(0, 1))
    row.add_column(width=STATUS_WIDTH, no_wrap=True)
    row.add_column(width=id_width, no_wrap=True)
    row.add_column(width=points_width, justify="right", no_wrap=True)
    row.add_column(ratio=1)
    row.add_row(*_row_cells(check, withheld=withheld))
    return row


def check_lines(
    check: CheckResult, *, id_width: int, withheld: bool, width: int, points_width: int = POINTS_WIDTH
) -> list[Text]:
    """The row laid out whole for a non-terminal: the citation beside it when the line fits ``width``,
    else alone on the next line, under the citations of the other rows (or indented, when even that is
    too wide); a citation is never cut in two."""
    status, cid, points, cites = _row_cells(check, withheld=withheld)
    status.pad_right(STATUS_WIDTH - status.cell_len)
    cid.pad_right(id_width - cid.cell_len)
    points.pad_left(points_width - points.cell_len)
    row = Text(" ").join([status, cid, points])
    if not cites.plain:
        return [row]
    if row.cell_len + 1 + cites.cell_len <= width:
        return [Text.assemble(row, " ", cites)]
    column = row.cell_len + 1 if row.cell_len + 1 + cites.cell_len <= width else INDENT
    return [row, Text.assemble(" " * column, cites)]


def _line(console: Console, text: Text, indent: int = 0, *, table: bool) -> None:
    """One line of the summary, ``indent`` columns in. The table layout lets rich wrap it (an indented
    line in a padded box); the line layout wraps it at words with its indent and no trailing spaces, and
    leaves a line holding a command whole."""
    if table:
        console.print(Padding(text, (0, 0, 0, indent), expand=False) if indent else text)
        return
    pieces = [text] if COMMAND in text.plain else text.wrap(console, max(console.width - indent, 20))
    for piece in pieces:
        piece.rstrip()
        console.print(Text.assemble(" " * indent, piece), soft_wrap=True)


def _indented(console: Console, text: Text, *, table: bool) -> None:
    _line(console, text, INDENT, table=table)


def _causes(result: GradeResult, console: Console, *, table: bool) -> None:
    """The root causes first: the sentence, then each cause with its hint and the checks it explains."""
    sentence = wording.causes_sentence(result)
    if sentence:
        _line(console, Text(sentence, "bold yellow"), table=table)
    for d in result.diagnosis:
        _line(console, Text(wording.cause_heading(result, d.id), "yellow"), table=table)
        where = wording.where_line(d)
        if where:
            _indented(console, Text(where, "bold"), table=table)
        seen = (wording.seen_line(d),)
        for line in (*seen, d.hint, wording.explains_line(result, d.id), *(d.detail or "").splitlines()):
            if line:
                _indented(console, Text(line), table=table)
    unexplained = wording.unexplained_line(result) if result.diagnosis else None
    if unexplained:
        _line(console, Text(unexplained, "yellow"), table=table)
    proven = wording.diagnosis_complete_line(result) if result.diagnosis else None
    if proven:  # the diagnosis's proof that it is complete (issue 35)
        _line(console, Text(proven, "bold"), table=table)


def render_terminal(
    result: GradeResult, console: Console, *, show_hidden: bool = False, report: str | None = None
) -> None:
    """Print the summary of ``result`` to ``console``: root causes, then one line per check. ``report``: the HTML
    report this run wrote, where the captured output can be read."""
    id_width = max((len(c.id) for c in result.checks), default=1)
    points = points_width(result)
    table = table_layout(console)
    _line(console, Text(f"{result.rubric}: {result.submission} (seed {result.seed})", "bold"), table=table)
    for note in result.notes:
        _line(console, Text(f"Note: {note}", "dim"), table=table)
    _causes(result, console, table=table)
    for check in result.checks:
        withheld = wording.is_withheld(check, show_hidden=show_hidden)
        if table:
            console.print(check_row(check, id_width=id_width, withheld=withheld, points_width=points))
        else:
            lines = check_lines(check, id_width=id_width, withheld=withheld, width=console.width, points_width=points)
            for row in lines:
                console.print(row, soft_wrap=True)
        if withheld:
            continue
        crash = wording.stopped_by(result, check)
        if crash is not None:  # the crash is printed once, with the causes; here only a pointer
            number = wording.cause_numbers(result)[crash]
            pointer = f"Could not run: see cause ({number}) above. {COMMAND}{check.reproduce}"
            _indented(console, Text(pointer), table=table)
        elif wording.is_problem(check) or check.status == "skipped" or check.pending is not None:
            style = "" if wording.is_problem(check) or check.pending is not None else "dim"
            for line in wording.text(check).splitlines():  # line by line: a multi-line Text pads each to the longest
                _indented(console, Text(line, style), table=table)
            if wording.pointer(result, check):
                _indented(console, Text(wording.pointer(result, check) or "", "yellow"), table=table)
        for note in check.notes:
            _indented(console, Text(f"Note: {note}", "dim"), table=table)
    failed = wording.diagnosis_error_line(result)
    if failed:  # the grader's own error is never silent (issue 35)
        _line(console, Text(failed, "bold red"), table=table)
    for line in wording.limit_lines(result, report):  # the caps met, said where the student looks (issue 53.7)
        _line(console, Text(line, "bold yellow" if line.startswith("Memory") else ""), table=table)
    pending = wording.pending_line(result)
    if pending:  # the points this edition cannot grade, and why (issue 53.1)
        _line(console, Text(pending, "bold"), table=table)
    counted = wording.scoring_line(result)
    if counted:  # just above the score line, which stays last (tools and --watch read it)
        _line(console, Text(counted, "bold" if result.scoring == "mistakes" else "dim"), table=table)
    _line(console, Text(wording.score_line(result), "bold"), table=table)
