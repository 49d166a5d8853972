"""Views of a :class:`~grader.models.GradeResult`: the HTML feedback report and the terminal summary.

Both take their wording from :mod:`grader.report.wording`, so they say the same thing.
"""

from grader.report.html import render_html, write_html
from grader.report.terminal import render_terminal

__all__ = ["render_html", "render_terminal", "write_html"]
