"""The report where a notebook shows it: a :class:`GradeResult` in a Jupyter, VS Code or Colab output.

One display holds two views of the same result, and the front end picks the one it can show:

- ``text/html``: the self-contained HTML report (grader/report/html.py, byte for byte) in an ``<iframe>``
  by ``srcdoc``. The page's own stylesheet styles ``body``, headings and tables; inlined, it would restyle
  the notebook around it. In a frame of its own it cannot, and its ``sandbox`` runs no script of any kind
  (the page has none: its content security policy says so too).
- ``text/plain``: the terminal summary as laid out for a non-terminal (grader/report/terminal.py), for
  a terminal IPython, ``jupyter console`` or a front end that shows no HTML.

A result is shown once per cell: ``check()`` shows its result at once (so ``r = check()`` and a loop of
checks show theirs), and when the same cell then ends on that result, IPython's display of the cell's
value finds it shown already (``check()`` registers :func:`show` as the kernel's display of a result).
"""

from __future__ import annotations

import html
import io
from typing import Any

from grader.models import GradeResult
from grader.report.html import render_html
from grader.report.terminal import render_terminal, summary_console

FRAME_HEIGHT_PX = 720  # a frame cannot grow to its content without a script; the student can drag it taller
FRAME_STYLE = f"width:100%;height:{FRAME_HEIGHT_PX}px;border:1px solid #d9dde5;border-radius:6px;resize:vertical"

# (execution count, results shown while that cell ran): a cell's value is not shown a second time
_shown: tuple[int | None, list[GradeResult]] = (None, [])


def plain_summary(result: GradeResult) -> str:
    """The summary a terminal would print, laid out for text that nothing reflows (``COLUMNS`` or wide)."""
    out = io.StringIO()
    render_terminal(result, summary_console(out))  # a file's console: no terminal, so no colour codes
    return out.getvalue()


def inline_html(result: GradeResult) -> str:
    """The HTML report in a sandboxed frame that keeps its styles to itself."""
    page = html.escape(render_html(result), quote=True)
    title = html.escape(f"Step 4 feedback for {result.submission}", quote=True)
    return f'<iframe title="{title}" sandbox srcdoc="{page}" style="{FRAME_STYLE}"></iframe>'


def mimebundle(result: GradeResult) -> dict[str, str]:
    return {"text/plain": plain_summary(result), "text/html": inline_html(result)}


def show(result: GradeResult) -> None:
    """Display ``result`` in the running IPython front end, unless this cell already showed it."""
    from IPython import get_ipython
    from IPython.display import display

    global _shown
    shell = get_ipython()
    count = getattr(shell, "execution_count", None)
    if _shown[0] != count:
        _shown = (count, [])
    if any(r is result for r in _shown[1]):
        return
    _shown[1].append(result)
    bundle: Any = mimebundle(result)
    display(bundle, raw=True)
