"""Standard streams that can print what the grader prints (✓, ✗, –, ≠, ...) and what a student printed.

Python writes to a real Windows console through its Unicode API, but a redirected stream (a pipe, a file,
an IDE's output panel, ``!grade`` in a notebook on Windows, a CI log) uses the locale's code page, cp1252 in
western locales, where ``print("✓")`` raises ``UnicodeEncodeError``. :func:`printable_streams` keeps such a
stream's code page (whoever reads the pipe decodes it with that) and writes what it lacks as readable ASCII
(``✓`` as ``v``, ``≠`` as ``!=``), anything else as a ``\\u`` escape: never an exception, never a silent loss.
A stream that can encode everything (UTF-8 everywhere but such a Windows pipe) is left as it is.
"""

from __future__ import annotations

import codecs
import contextlib
import sys
from typing import Any

ERRORS = "step4.ascii"
# What the grader's own texts use, spelled with what every code page has.
ASCII = {
    "✓": "v",
    "✗": "x",
    "◔": "o",
    "–": "-",
    "—": "--",
    "≠": "!=",
    "≤": "<=",
    "≥": ">=",
    "≈": "~",
    "→": "->",
    "←": "<-",
    "×": "x",
    "·": ".",
    "…": "...",
    "√": "sqrt",
    "∞": "inf",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "•": "*",
    "▸": ">",
    "│": "|",
    "─": "-",
}
SAMPLE = "✓✗–≠"


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start : exc.end]
    return "".join(ASCII.get(ch, ch.encode("ascii", "backslashreplace").decode()) for ch in text), exc.end


with contextlib.suppress(LookupError):
    codecs.lookup_error(ERRORS)
codecs.register_error(ERRORS, _ascii_fallback)


def can_encode(stream: Any, text: str = SAMPLE) -> bool:
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def printable(stream: Any) -> None:
    """Make ``stream`` write every character without raising (see the module's docstring)."""
    if stream is None or can_encode(stream):
        return
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(Exception):  # a stream someone replaced: leave it as it came
            reconfigure(errors=ERRORS)


def printable_streams() -> None:
    """:func:`printable` for ``sys.stdout`` and ``sys.stderr``; call it first thing in every entry point."""
    printable(sys.stdout)
    printable(sys.stderr)
