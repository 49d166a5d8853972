"""The terminal summary: one line per check, the failure message indented below it, the score last.

Student text (messages carry exception text) is always wrapped in ``rich.text.Text``, never parsed as
rich markup, so a message containing ``[bold]`` or ``[/]`` prints as written.
"""

from __future__ import annotations

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


def check_row(check: CheckResult, *, id_width: int, withheld: bool) -> Table:
    """'✗ FAILED  causal_mask  0 / 8  Definition 4.1'; fixed columns keep rows aligned as cites wrap."""
    row = Table.grid(padding=(0, 1))
    row.add_column(width=9, no_wrap=True)
    row.add_column(width=id_width, no_wrap=True)
    row.add_column(width=11, justify="right", no_wrap=True)
    row.add_column(ratio=1)
    status = Text(f"{wording.STATUS_GLYPH[check.status]} {wording.STATUS_LABEL[check.status]}", STYLE[check.status])
    cites = wording.WITHHELD.get(check.visibility, "") if withheld else check.cites
    points = Text(wording.points(check), "bold" if wording.is_problem(check) else "")
    row.add_row(status, Text(check.id), points, Text(cites, "dim"))
    return row


def _causes(result: GradeResult, console: Console) -> None:
    """The root causes first: the sentence, then each cause with its hint and the checks it explains."""
    sentence = wording.causes_sentence(result)
    if sentence:
        console.print(Text(sentence, "bold yellow"))
    for d in result.diagnosis:
        console.print(Text(wording.cause_heading(result, d.id), "yellow"))
        for line in (d.hint, wording.explains_line(result, d.id), *(d.detail or "").splitlines()):
            if line:
                console.print(Padding(Text(line), (0, 0, 0, INDENT), expand=False))


def render_terminal(result: GradeResult, console: Console, *, show_hidden: bool = False) -> None:
    """Print the summary of ``result`` to ``console``: root causes, then one line per check."""
    id_width = max((len(c.id) for c in result.checks), default=1)
    console.print(Text(f"{result.rubric}: {result.submission} (seed {result.seed})", "bold"))
    for note in result.notes:
        console.print(Text(f"Note: {note}", "dim"))
    _causes(result, console)
    for check in result.checks:
        withheld = wording.is_withheld(check, show_hidden=show_hidden)
        console.print(check_row(check, id_width=id_width, withheld=withheld))
        if withheld:
            continue
        crash = wording.stopped_by(result, check)
        if crash is not None:  # the crash is printed once, with the causes; here only a pointer
            number = wording.cause_numbers(result)[crash]
            line = f"Could not run: see cause ({number}) above. Reproduce: {check.reproduce}"
            console.print(Padding(Text(line), (0, 0, 0, INDENT), expand=False))
        elif wording.is_problem(check) or check.status == "skipped":
            style = "" if wording.is_problem(check) else "dim"
            for line in check.message.splitlines():  # line by line: a multi-line Text pads every line to the longest
                console.print(Padding(Text(line, style), (0, 0, 0, INDENT), expand=False))
            if wording.pointer(result, check):
                console.print(Padding(Text(wording.pointer(result, check) or "", "yellow"), (0, 0, 0, INDENT)))
        for note in check.notes:
            console.print(Padding(Text(f"Note: {note}", "dim"), (0, 0, 0, INDENT), expand=False))
    counted = wording.scoring_line(result)
    if counted:  # just above the score line, which stays last (tools and --watch read it)
        console.print(Text(counted, "bold" if result.scoring == "mistakes" else "dim"))
    console.print(Text(wording.score_line(result), "bold"))
