"""The HTML feedback report: one self-contained page (inline CSS and SVG, no script, no external URL).

A pure function of the :class:`GradeResult`: the same result gives the same bytes. Python computes the
geometry of every drawing (cells, colours, ticks); the jinja2 templates only lay it out, with
autoescaping on, so whatever a student's code printed or raised is shown as text, never as markup.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import jinja2
from markupsafe import Markup, escape
from pydantic import ValidationError

from grader.exports import write_atomic
from grader.models import CheckResult, GradeResult, Heatmap, ScalePoint, ScaleVisual, Visuals
from grader.report import wording
from grader.report._precompiled import PrecompiledLoader

OUTPUT_SHOW_CHARS = 16_000  # the sandbox keeps 64 KiB; a page shows the start, which holds the first error

# ---- colour scales (colour-blind safe: viridis for weights, blue-white-orange for differences) --------

VIRIDIS = (
    "#440154",
    "#482475",
    "#414487",
    "#355f8d",
    "#2a788e",
    "#21918c",
    "#22a884",
    "#44bf70",
    "#7ad151",
    "#bddf26",
    "#fde725",
)
DIVERGING = ("#2b5c8a", "#8db3d6", "#f5f5f5", "#f4b26a", "#b65a00")


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def _ramp(stops: tuple[str, ...], t: float) -> str:
    """Colour at ``t`` in [0, 1] on evenly spaced ``stops`` (linear in sRGB, clipped)."""
    t = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    k = min(int(t), len(stops) - 2)
    a, b = _rgb(stops[k]), _rgb(stops[k + 1])
    f = t - k
    r, g, b_ = (round(x + (y - x) * f) for x, y in zip(a, b, strict=True))
    return f"#{r:02x}{g:02x}{b_:02x}"


def _ink(fill: str) -> str:
    """Black or white text, whichever reads better on ``fill``."""
    r, g, b = _rgb(fill)
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


_BACKTICKS = re.compile(r"`([^`\n]+)`")


def inline_code(text: str) -> Markup:
    """Escape ``text``, then show `name` spans as code (their content is already escaped)."""
    return Markup(_BACKTICKS.sub(r"<code>\1</code>", str(escape(text))))


def sig(x: float, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits, '-0' shown as '0'."""
    text = f"{x:.{digits}g}"
    return "0" if text in ("-0", "0") else text


# ---- heatmaps ----------------------------------------------------------------------------------------


@dataclass
class Cell:
    x: int
    y: int
    fill: str
    title: str
    text: str | None = None
    ink: str = "#000"


@dataclass
class HeatmapView:
    """Everything the heatmap macro needs, in pixels. Cells are grouped by row (one y per row)."""

    title: str
    kind: str
    size: int  # cell size
    left: int
    top: int
    rows: int
    cols: int
    cells: list[Cell]
    masked_path: str  # hatched cells: the masked strict upper triangle where the weight is exactly 0
    masked_title: str
    leak_path: str  # outlines of cells above the diagonal that carry weight
    nonfinite: list[Cell]
    xticks: list[tuple[float, str]]
    yticks: list[tuple[float, str]]
    rotate_x: bool
    scale_lo: str
    scale_hi: str
    gradient: str
    leak_count: int = 0
    leak_mass: float = 0.0
    nonfinite_count: int = 0
    caption: str = ""

    @property
    def width(self) -> int:
        return self.left + self.cols * self.size + 12

    @property
    def height(self) -> int:
        return self.top + self.rows * self.size + 44

    @property
    def grid_bottom(self) -> int:
        return self.top + self.rows * self.size

    @property
    def cell_rows(self) -> list[tuple[int, list[Cell]]]:
        """(y, cells of that row), drawn cells and non-finite ones together."""
        by_y: dict[int, list[Cell]] = {}
        for c in self.cells + self.nonfinite:
            by_y.setdefault(c.y, []).append(c)
        return sorted(by_y.items())


def _cell_size(n: int) -> int:
    if n <= 3:
        return 48
    if n <= 5:
        return 40
    if n <= 8:
        return 34
    return max(14, 256 // n)


def cell_text(v: float) -> str:
    """At most five characters, to fit inside a cell: 0.43, 0.047, -0.95, 7e-3, 1e-13."""
    if v == 0:
        return "0"
    if 0.01 <= abs(v) < 100:
        return sig(v, 2)
    mantissa, exponent = f"{v:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _short(label: str, limit: int = 10) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def heatmap_view(
    hm: Heatmap, *, labels: list[str] | None = None, size: int | None = None, show_values: bool | None = None
) -> HeatmapView:
    """Cells, hatching and leak outlines of one matrix; ``labels`` name the positions (tokens)."""
    data = hm.data
    rows, cols = len(data), max((len(r) for r in data), default=0)
    size = size or _cell_size(max(rows, cols))
    show_values = size >= 32 if show_values is None else show_values
    finite = [abs(v) for r in data for v in r if v is not None]
    if hm.kind == "difference":
        vmax = max(finite, default=0.0)
        lo, hi, gradient = (f"−{sig(vmax, 2)}", f"+{sig(vmax, 2)}", "g-diff") if vmax else ("0", "0", "g-diff")
    else:
        vmax, lo, hi, gradient = 1.0, "0", "1", "g-weights"
    names = [_short(s) for s in labels] if labels else None
    left = 78 if names else 40
    top = 78 if names else 40
    cells: list[Cell] = []
    nonfinite: list[Cell] = []
    masked, leaks = [], []
    leak_mass = 0.0
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            x, y = left + j * size, top + i * size
            where = f"query {i} “{labels[i]}”, key {j} “{labels[j]}”" if labels else f"query {i}, key {j}"
            above = hm.causal and j > i
            if v is None:
                nonfinite.append(Cell(x, y, "url(#p-nonfinite)", f"{where}: not finite (NaN or ±inf)"))
                continue
            if above and v == 0:
                masked.append(f"M{x} {y}h{size}v{size}h-{size}z")
                continue
            if above:
                leaks.append(f"M{x + 1} {y + 1}h{size - 2}v{size - 2}h-{size - 2}z")
                leak_mass += abs(v)
            if hm.kind == "difference":
                fill = _ramp(DIVERGING, 0.5 + 0.5 * v / vmax) if vmax else DIVERGING[2]
            else:
                fill = _ramp(VIRIDIS, v)
            note = " (must be 0)" if above else ""
            text = cell_text(v) if show_values else None
            cells.append(Cell(x, y, fill, f"{where}: {sig(v)}{note}", text, _ink(fill)))
    ticks = names or [str(k) for k in range(max(rows, cols))]
    step = 1 if names or max(rows, cols) <= 12 else 2
    xticks = [(left + (j + 0.5) * size, ticks[j]) for j in range(0, cols, step)]
    yticks = [(top + (i + 0.5) * size, ticks[i]) for i in range(0, rows, step)]
    caption = ""
    if leaks:
        cells_carry = (
            "1 cell above the diagonal carries" if len(leaks) == 1 else f"{len(leaks)} cells above the diagonal carry"
        )
        caption = f"{cells_carry} weight (total {sig(leak_mass, 3)}); the causal mask allows none."
    return HeatmapView(
        title=hm.title,
        kind=hm.kind,
        size=size,
        left=left,
        top=top,
        rows=rows,
        cols=cols,
        cells=cells,
        masked_path="".join(masked),
        masked_title="masked (key j > query i): weight exactly 0",
        leak_path="".join(leaks),
        nonfinite=nonfinite,
        xticks=xticks,
        yticks=yticks,
        rotate_x=bool(names),
        scale_lo=lo,
        scale_hi=hi,
        gradient=gradient,
        leak_count=len(leaks),
        leak_mass=leak_mass,
        nonfinite_count=len(nonfinite),
        caption=caption,
    )


# ---- the score-scale plot (Exercise 3) --------------------------------------------------------------


@dataclass
class Series:
    name: str
    colour: str
    marker: str  # "circle" or "square"
    hollow: bool
    dashed: bool
    points: list[tuple[float, float, str]]  # x, y, hover title

    @property
    def path(self) -> str:
        return "".join(f"{'M' if k == 0 else 'L'}{x:.1f} {y:.1f}" for k, (x, y, _) in enumerate(self.points))


@dataclass
class Chart:
    title: str
    y_label: str
    width: int
    height: int
    plot: tuple[int, int, int, int]  # left, top, right, bottom
    xticks: list[tuple[float, str]]
    yticks: list[tuple[float, str]]
    series: list[Series]
    guides: list[tuple[str, str]] = field(default_factory=list)  # (path, label) dotted theory lines


RAW_COLOUR, SCALED_COLOUR = "#c85a00", "#1f64a8"  # orange / blue: distinguishable with any colour vision


def _scale_charts(scale: ScaleVisual) -> list[Chart]:
    dks = sorted({p.d_k for p in scale.reference} | {p.d_k for p in scale.yours})
    if not dks:
        return []
    L, T, R, B = 56, 16, 300, 196
    lo, hi = math.log2(dks[0]), math.log2(dks[-1])

    def px(d_k: float) -> float:
        return L + 14 + (R - L - 28) * ((math.log2(d_k) - lo) / (hi - lo) if hi > lo else 0.5)

    xticks = [(px(d), str(d)) for d in dks]

    def chart(title: str, y_label: str, keys: tuple[str, str], y_of, yticks, guides) -> Chart:  # noqa: ANN001
        series = []
        for who, pts, hollow in (("reference", scale.reference, True), ("yours", scale.yours, False)):
            for key, colour, marker in ((keys[0], RAW_COLOUR, "square"), (keys[1], SCALED_COLOUR, "circle")):
                kind = "raw" if key.startswith("raw") else "scaled"
                coords = [
                    (px(p.d_k), y_of(getattr(p, key)), f"{who}, {kind}, d_k={p.d_k}: {sig(getattr(p, key))}")
                    for p in pts
                    if getattr(p, key) is not None
                ]
                series.append(Series(f"{who}: {kind}", colour, marker, hollow, hollow, coords))
        return Chart(title, y_label, 340, 236, (L, T, R, B), xticks, yticks, series, guides)

    # std on a log2 axis, at least 0.5 .. 32, widened to every value: raw std ~ sqrt(d_k) is a straight line.
    stds = [v for p in scale.yours + scale.reference for v in (p.raw_std, p.scaled_std) if v is not None and v > 0]
    e_lo = min(-1, *(math.floor(math.log2(v)) for v in stds)) if stds else -1
    e_hi = max(5, *(math.ceil(math.log2(v)) for v in stds)) if stds else 5
    e_lo, e_hi = max(e_lo, -20), min(e_hi, 40)

    def y_std(v: float) -> float:
        e = math.log2(v) if v > 0 else e_lo
        return B - (B - T) * (min(max(e, e_lo), e_hi) - e_lo) / (e_hi - e_lo)

    every = 1 + (e_hi - e_lo) // 8
    std_ticks = [(y_std(2.0**e), sig(2.0**e)) for e in range(e_lo, e_hi + 1, every)]
    sqrt_guide = "".join(f"{'M' if k == 0 else 'L'}{px(d):.1f} {y_std(math.sqrt(d)):.1f}" for k, d in enumerate(dks))
    one_guide = f"M{px(dks[0]):.1f} {y_std(1):.1f}L{px(dks[-1]):.1f} {y_std(1):.1f}"

    def y_weight(v: float) -> float:
        return B - (B - T) * min(max(v, 0.0), 1.0)

    weight_ticks = [(y_weight(v), sig(v)) for v in (0, 0.25, 0.5, 0.75, 1)]
    return [
        chart(
            "Score standard deviation",
            "std (log scale)",
            ("raw_std", "scaled_std"),
            y_std,
            std_ticks,
            [(sqrt_guide, "√d_k"), (one_guide, "1")],
        ),
        chart(
            "Typical largest weight in a row",
            "median row max",
            ("raw_max_weight", "scaled_max_weight"),
            y_weight,
            weight_ticks,
            [],
        ),
    ]


def _scale_rows(scale: ScaleVisual) -> list[dict[str, object]]:
    """One table row per d_k: yours and the reference's four statistics."""
    ref = {p.d_k: p for p in scale.reference}
    yours = {p.d_k: p for p in scale.yours}

    def cells(p: ScalePoint | None) -> list[str]:
        return [
            "—" if p is None or getattr(p, k) is None else sig(getattr(p, k))
            for k in ("raw_std", "scaled_std", "raw_max_weight", "scaled_max_weight")
        ]

    return [
        {"d_k": d, "sqrt": sig(math.sqrt(d)), "yours": cells(yours.get(d)), "reference": cells(ref.get(d))}
        for d in sorted(ref.keys() | yours.keys())
    ]


# ---- the page ----------------------------------------------------------------------------------------


@dataclass
class CheckView:
    check: CheckResult
    withheld: bool
    withheld_note: str
    glyph: str
    label: str
    points: str
    headline: str
    explanation: list[str]
    comparison: list[str]
    heatmaps: list[HeatmapView]

    @property
    def anchor(self) -> str:
        return f"check-{self.check.id}"


def _check_view(c: CheckResult, show_hidden: bool) -> CheckView:
    withheld = wording.is_withheld(c, show_hidden=show_hidden)
    return CheckView(
        check=c,
        withheld=withheld,
        withheld_note=wording.WITHHELD.get(c.visibility, "") if withheld else "",
        glyph=wording.STATUS_GLYPH[c.status],
        label=wording.STATUS_LABEL[c.status],
        points=wording.points(c),
        headline=wording.headline(c),
        explanation=wording.explanation_lines(c),
        comparison=wording.comparison_lines(c),
        heatmaps=[] if withheld else [heatmap_view(h) for h in c.heatmaps],
    )


def _visuals(result: GradeResult) -> tuple[Visuals | None, str | None]:
    """The visualisation data, whether the result holds it as a plain dict or as a ``Visuals`` model."""
    if not result.visuals:
        return None, None
    try:
        return Visuals.model_validate(result.visuals, from_attributes=True), None
    except ValidationError as exc:
        return None, f"The visualisation data could not be read ({exc.error_count()} problems)."


def _sentence_views(v: Visuals) -> list[HeatmapView]:
    s = v.sentence
    if s is None:
        return []
    maps = [m for m in (s.panel.yours, s.panel.reference) if m is not None]
    return [heatmap_view(m, labels=s.tokens, size=34, show_values=True) for m in maps]


def _kernel_views(v: Visuals) -> list[tuple[object, list[HeatmapView]]]:
    if v.kernels is None:
        return []
    return [
        (p, [heatmap_view(m, size=16, show_values=False) for m in (p.yours, p.reference) if m is not None])
        for p in v.kernels.panels
    ]


@cache
def jinja_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=PrecompiledLoader("grader.report", "templates"),  # compiled ahead, used while up to date
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["sig"] = sig
    env.filters["code"] = inline_code
    return env


def render_html(result: GradeResult, *, show_hidden: bool = False) -> str:
    """The report as one HTML document. ``show_hidden`` reveals withheld checks (instructors only)."""
    checks = [_check_view(c, show_hidden) for c in result.checks]
    visuals, visuals_problem = _visuals(result)
    text = result.output.text
    shown = text[:OUTPUT_SHOW_CHARS]
    page = (
        jinja_environment()
        .get_template("report.html.j2")
        .render(
            r=result,
            w=wording,
            checks=checks,
            # every failing check has its card, as many as the tally counts (a check a crash stopped: a pointer to
            # the crash, shown once in the causes); a withheld one is counted apart
            problems=[cv for cv in checks if wording.is_problem(cv.check) and not cv.withheld],
            withheld_problems=sum(1 for cv in checks if wording.is_problem(cv.check) and cv.withheld),
            tally=wording.tally(result),
            score_line=wording.score_line(result),
            scoring_line=wording.scoring_line(result),
            pending_line=wording.pending_line(result),
            diagnosis_error_line=wording.diagnosis_error_line(result),
            percent=result.percent,
            visuals=visuals,
            visuals_problem=visuals_problem,
            sentence_maps=_sentence_views(visuals) if visuals else [],
            kernel_panels=_kernel_views(visuals) if visuals else [],
            charts=_scale_charts(visuals.scale) if visuals and visuals.scale else [],
            scale_rows=_scale_rows(visuals.scale) if visuals and visuals.scale else [],
            viridis=VIRIDIS,
            diverging=DIVERGING,
            output_text=shown,
            output_cut=len(shown) < len(text),
            output_note=wording.output_note(result, shown_chars=len(shown)),
        )
    )
    return page


def write_html(result: GradeResult, path: Path | str, *, show_hidden: bool = False) -> Path:
    """Write the report to ``path`` atomically and return the path."""
    path = Path(path)
    write_atomic(path, render_html(result, show_hidden=show_hidden))
    return path
