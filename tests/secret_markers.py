"""What the instructor's files and classmates' work would look like in an output, to search for.

Imported by the tests that grade tests/hostile/snoop (a head that looks everywhere and reports what it
finds in its exceptions and output): none of these may appear in anything a grade writes.
"""

from __future__ import annotations

import html
import json
from functools import cache
from typing import Any

from grader import _paths
from grader.library import known_heads, reference_path

FOUND = "FOUND "  # how the snoop reports a find (tests/hostile/snoop/snoop.py)
SNOOPED = "SNOOPED import: nothing"  # and that it looked and found nothing


@cache
def secret_lines() -> frozenset[str]:
    """Code lines of the reference, the chaffs and the variants (long enough to be telling), and of the
    catalogs and the rubric (their comments and keys: what is shown to students is their prose)."""
    found: set[str] = set()
    sources = [reference_path(), *(h.path for kind in ("chaff", "variant") for h in known_heads(kind))]
    for path in sources:
        found |= {s for line in path.read_text().splitlines() if len(s := line.strip()) >= 30 and not s.startswith("#")}
    for path in (reference_path().parent / "chaffs" / "catalog.toml", _paths.bundled("rubrics") / "step4.toml"):
        found |= {
            s for line in path.read_text().splitlines() if (s := line.strip()).startswith(("#", "[")) and len(s) >= 9
        }
    return frozenset(found)


def plain(text: str) -> str:
    """``text`` as a reader sees it: JSON strings decoded, HTML entities unescaped."""
    try:
        data = json.loads(text)
    except ValueError:
        return html.unescape(text)
    return "\n".join(_strings(data))


def _strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in [str(k), *_strings(v)]]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return []


def leaked(text: str, *also: str) -> list[str]:
    """Every secret line, find report and ``also`` string in ``text`` (JSON, HTML or plain)."""
    seen = plain(text)
    return [s for s in (*secret_lines(), FOUND, *also) if s and s in seen]
