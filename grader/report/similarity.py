"""The class similarity page (instructor only): a pure function of :class:`~grader.models.ClassSimilarity`.

The histogram of every pair's similarity with the report's cut-off, the groups of copies (rings), then each
flagged pair side by side,
the matching passages highlighted, with both students' scores, causes and report links, and the table of
every pair above the floor. Python computes the geometry and splits the code into plain and highlighted
pieces; the template (sharing the report's stylesheet) lays them out with autoescaping on. No script, no
external resource: the page opens offline. It never imports the batch runner or the similarity stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grader.models import ClassSimilarity, SimilarityMember, SimilarPair
from grader.report import wording
from grader.report.html import jinja_environment
from grader.report.summary import Bin

WIDTH, HEIGHT = 600, 160
MAX_SHOWN = 30  # flagged pairs drawn side by side (the table and the CSV list every one)


@dataclass(frozen=True)
class Side:
    id: str
    href: str | None
    score: str
    causes: list[tuple[str, str]]
    share: float
    lines: str
    pieces: list[tuple[str, bool]]  # (text, highlighted)


@dataclass(frozen=True)
class Member:
    id: str
    href: str | None
    score: str
    causes: list[tuple[str, str]]


@dataclass(frozen=True)
class GroupShown:
    id: int
    least_share: float
    sides: list[Member]
    pairs: int
    shown_pairs: int


@dataclass(frozen=True)
class Shown:
    pair: SimilarPair
    why: str
    a: Side
    b: Side


def bars(counts: Sequence[int]) -> list[Bin]:
    """One bar per bin over [0, 1]; heights on a square-root scale, so that a few outlying pairs show
    beside hundreds of near-zero ones (each bar's title gives the count)."""
    top = max(counts, default=0) or 1
    slot = WIDTH // max(1, len(counts))
    out = []
    for k, n in enumerate(counts):
        h = round((HEIGHT - 24) * (n / top) ** 0.5)
        lo, hi = k / len(counts), (k + 1) / len(counts)
        out.append(Bin(f"{lo:.2f}–{hi:.2f}", n, k * slot, HEIGHT - 20 - h, h))
    return out


def pieces(code: str, slices: Sequence[tuple[int, int]]) -> list[tuple[str, bool]]:
    """``code`` cut into plain and highlighted runs at the matching character ranges."""
    out: list[tuple[str, bool]] = []
    at = 0
    for s, e in sorted(slices):
        s, e = max(s, at), min(e, len(code))
        if e <= s:
            continue
        if s > at:
            out.append((code[at:s], False))
        out.append((code[s:e], True))
        at = e
    if at < len(code):
        out.append((code[at:], False))
    return out


def _spans(lines: Sequence[tuple[int, int]]) -> str:
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in lines)


def _score(m: SimilarityMember) -> str:
    if m.score is None:
        return "not graded"
    return f"{wording.fmt_points(m.score)} / {wording.fmt_points(m.max_score or 0)}"


def _side(m: SimilarityMember, share: float, slices: Sequence[tuple[int, int]], lines: str) -> Side:
    return Side(m.id, m.href, _score(m), list(m.causes), share, lines, pieces(m.code, slices))


def _groups(report: ClassSimilarity, drawn: Sequence[SimilarPair]) -> list[GroupShown]:
    out = []
    for g in report.groups:
        sides = [report.members[sid] for sid in g.members]
        members = [Member(m.id, m.href, _score(m), list(m.causes)) for m in sides]
        n = len(g.members)
        out.append(GroupShown(g.id, g.least_share, members, n * (n - 1) // 2, sum(p.group == g.id for p in drawn)))
    return out


def why(p: SimilarPair, report: ClassSimilarity) -> str:
    """How far out the pair is, in words."""
    which = "verbatim" if p.verbatim > p.normalised else "after names are normalised"
    words = (
        f"{p.similarity:.0%} of their code matches ({which}); the class's matching pairs have median "
        f"{report.median:.0%}, so this is {p.z:.1f} robust deviations out"
    )
    if p.rare_causes:
        words += f", and they share a mistake rare in this class (+{report.rare_bonus:g})"
    if p.copies:
        words += f"; and each has at least {report.copy_share:.0%} of its own code in the other's: copies"
    return words + "."


def render_similarity(report: ClassSimilarity) -> str:
    shown = []
    drawn = [p for p in report.pairs if p.flagged][:MAX_SHOWN]
    for p in drawn:
        a, b = report.members[p.a], report.members[p.b]
        shown.append(
            Shown(
                p,
                why(p, report),
                _side(a, p.share_a, p.slices_a, _spans(p.lines_a)),
                _side(b, p.share_b, p.slices_b, _spans(p.lines_b)),
            )
        )
    cut = report.median + report.z_flag * report.scale
    slot = WIDTH // max(1, len(report.histogram))
    return (
        jinja_environment()
        .get_template("similarity.html.j2")
        .render(
            r=report,
            bars=bars(report.histogram),
            cut_x=round(min(1.0, cut) * slot * len(report.histogram)),
            cut=cut,
            shown=shown,
            groups=_groups(report, drawn),
            flagged=sum(p.flagged for p in report.pairs),
            more=max(0, sum(p.flagged for p in report.pairs) - MAX_SHOWN),
            spans=_spans,
        )
    )
