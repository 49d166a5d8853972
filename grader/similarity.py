"""Class similarity (instructor only): which pairs of a graded class share code nobody else does.

    OUT (graded by ``grade batch``) + SUBMISSIONS_DIR
        -> each submission's own code: what the grader kept (a notebook's definitions, not its demo cells)
        -> copydetect fingerprints (winnowing over Pygments tokens, identifiers normalised), twice:
             normalised: boilerplate (template, course cells, reference, correct variants) removed
             verbatim:   the raw text, no normalisation, only what students are given removed (the
                         template, course cells): a leaked reference handed in twice is found here
        -> copies: submissions whose own code (beyond the passages more than ``wide`` hold) is nearly all
           the other's; linked, they are one group (a ring), which counts once below
        -> the class's common code, learned from the class: every passage that more than ``common``
           independent submissions hold (copies of one code count once), removed
        -> per pair: the share of both heads' code that matches (a head shorter than the class's median
           is measured against that median: a short head's similarity says how short it is), ranked
           against this class's pairs (robust z: median and MAD of the similarity of the pairs that share
           anything, copies left out), and the causes the two heads share that are rare in this class
        -> OUT/similarity.csv and OUT/similarity.html (grader/report/similarity.py renders the model)

The fingerprinting is copydetect's (``CodeFingerprint``, ``compare_files``); nothing here hashes code.
Nothing is ever written into a student's folder, report or Gradescope results: the two files sit beside
grades.csv at the top of OUT, for the instructor.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import io
import json
import math
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from grader.exports import write_atomic
from grader.models import ClassSimilarity, GradeResult, SimilarGroup, SimilarityMember, SimilarPair

NOISE = 45  # copydetect's k: the shortest match that counts, in normalised characters (its default is 25, about
# one line of a head: the idioms every tutorial shares, `att.masked_fill(bias[:, :T, :T] == 0, ...)`, match at 25)
GUARANTEE = 45  # a match this long is always found: copydetect's window is GUARANTEE - NOISE + 1, every k-gram
VERBATIM_NOISE = 60  # raw text (comments and names kept): a match must span more than one ordinary line
COMMON = 2  # a passage that more than 2 independent submissions hold is the class's (copies of one code count
# once): a skeleton or tutorial three students follow is learned from the class; MOSS advises 3-4 programs, not
# counting copies
Z_FLAG = 3.5  # Iglewicz & Hoaglin's cut-off for the modified z-score: an outlier
RARE_BONUS = 1.5  # a shared rare mistake counts as this many robust deviations of code similarity
SCALE_FLOOR = 0.05  # the least spread of similarity assumed: pairs 0.05 apart are alike
MIN_MATCHING = 8  # fewer matching pairs than this (a small class) are ranked against every pair, zeros included
WIDE = 10  # MOSS's default -m: a passage in more than 10 submissions (or 5% of a larger class) is the class's ...
WIDE_SHARE = 0.05  # ... whoever holds it, so it is no sign of copying when copies are looked for
COPY_SHARE = 0.9  # copies: each of two has at least 90% of its own code in passages the other shares ...
COPY_MIN = 60  # ... and at least 60 normalised characters of it (more than one shortest match, ~2 lines)
COPY_ROUNDS = 4  # copies sought again with the copies found counted once as holders, until none is added
FLOOR_Z = 1.0  # pairs listed in the CSV: evidence of at least one robust deviation above the median
BINS = 20
RARE_SHARE = 0.05  # a cause held by at most 5% of the class (and never fewer than 3 heads) is rare
CSV_COLUMNS = ("a", "b", "similarity", "flagged", "rare_causes", "lines_a", "lines_b", "group")


class SimilarityError(RuntimeError):
    """The similarity report cannot be made (no graded folder, no submissions); the message says why."""


@dataclass(frozen=True)
class Code:
    """One submission's own code as the grader kept it."""

    id: str
    text: str


def _copydetect() -> Any:
    try:
        import copydetect
    except ImportError as exc:  # the student kit and the Gradescope bundle do not install it
        raise SimilarityError(
            "the similarity report needs copydetect, which the instructor's grader installs "
            "(pip install 'copydetect>=0.5,<0.6')"
        ) from exc
    return copydetect


# -- what counts as the course's own code ----------------------------------------------------------


@dataclass(frozen=True)
class Boilerplate:
    """The course's own code: ``given`` to students (the template, a starter notebook's cells), which both
    passes remove; the instructor's ``solutions`` (the reference, its correct variants), which the normalised
    pass removes (an honest head may well normalise to them) but the verbatim one keeps, since no student is
    given their text."""

    given: tuple[str, ...] = ()
    solutions: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.given) + len(self.solutions)


def boilerplate_sources(extra: Iterable[Path] = ()) -> Boilerplate:
    """The student template and the code cells of any given file (a course notebook, a starter .py); the
    reference and each correct variant (appended to the reference, as the grader runs it)."""
    from grader._notebook import NotANotebook, notebook_cells
    from grader._paths import bundled
    from grader.library import known_heads, reference_available, reference_path

    given: list[str] = []
    template = bundled("student_template") / "attention_head.py"
    if template.is_file():
        given.append(template.read_text(encoding="utf-8"))
    for path in extra:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        if Path(path).suffix == ".ipynb":
            try:
                cells, _ = notebook_cells(text)
            except NotANotebook as exc:
                raise SimilarityError(f"{path}: {exc}") from None
            given += [c.code for c in cells]
        else:
            given.append(text)
    solutions: list[str] = []
    if reference_available():
        solutions.append(reference_path().read_text(encoding="utf-8"))
        solutions += [head.source() for head in known_heads("variant")]
    return Boilerplate(tuple(given), tuple(solutions))


# -- matching ------------------------------------------------------------------------------------


@dataclass
class _Pass:
    """One pass of copydetect over the class: fingerprints with boilerplate and common passages removed."""

    prints: dict[str, Any]
    common: int  # fingerprints dropped for being in more than ``common`` independent submissions
    copies: list[tuple[str, str, float]]  # (a, b, the lesser share of own code) of each two found copies
    floor: int  # the class's median length of code (normalised characters): shorter heads are measured on it


def _fingerprint(cd: Any, text: str, k: int, boilerplate: Any, *, normalise: bool) -> Any:
    window = GUARANTEE - NOISE + 1
    return cd.CodeFingerprint("head.py", k, window, boilerplate, filter=normalise, fp=io.StringIO(text))


def _run_pass(
    cd: Any, codes: Sequence[Code], course: Sequence[str], k: int, common: int, wide: int, *, normalise: bool
) -> _Pass:
    import numpy as np

    plate: set[int] = set()
    for text in course:
        plate |= _fingerprint(cd, text, k, None, normalise=normalise).hashes
    base = np.array(sorted(plate), dtype=np.int64)
    prints = {c.id: _fingerprint(cd, c.text, k, base, normalise=normalise) for c in codes}
    holders: dict[int, list[str]] = {}
    for sid, fp in prints.items():
        for h in fp.hashes:
            holders.setdefault(h, []).append(sid)
    ids = [c.id for c in codes]
    unit = _same_code(prints)
    for _ in range(COPY_ROUNDS):  # copies found count once as holders, which may find more copies
        copies = _copies(prints, holders, wide, unit)
        linked = _units(ids, copies, start=unit)
        if linked == unit:
            break
        unit = linked
    frequent = {h for h, ids in holders.items() if len({unit[i] for i in ids}) > common}
    for fp in prints.values():
        _drop(cd, fp, frequent)
    floor = int(statistics.median(len(fp.filtered_code) for fp in prints.values())) if prints else 0
    return _Pass(prints, len(frequent), copies, floor)


def _covered(fp: Any, hashes: Iterable[int]) -> Any:
    """Which characters of the fingerprinted code the k-grams ``hashes`` cover (a boolean array)."""
    import numpy as np

    starts = [i for h in hashes for i in fp.hash_idx.get(h, ())]
    marks = np.zeros(len(fp.filtered_code) + fp.k + 1, dtype=np.int64)
    if starts:
        at = np.asarray(starts, dtype=np.int64)
        np.add.at(marks, at, 1)
        np.add.at(marks, at + fp.k, -1)
    return (np.cumsum(marks) > 0)[: len(fp.filtered_code)]


def _same_code(prints: dict[str, Any]) -> dict[str, str]:
    """Each submission's first (by id) among those whose code is the same once names and comments are set
    aside: renamed, recommented copies of one code, which are one holder of any passage."""
    first: dict[str, str] = {}
    return {sid: first.setdefault(fp.filtered_code, sid) for sid, fp in sorted(prints.items())}


def _copies(
    prints: dict[str, Any], holders: dict[int, list[str]], wide: int, unit: dict[str, str]
) -> list[tuple[str, str, float]]:
    """The pairs that are copies of one code: each has at least COPY_SHARE of its own code (what is left once
    the passages more than ``wide`` independent submissions hold are set aside: the copies of one code known so
    far, ``unit``, count once) in passages the other shares, and COPY_MIN characters of it. A ring's own
    passages are in its members, however many they are, and in few others."""
    widely = {h for h, ids in holders.items() if len({unit[i] for i in ids}) > wide}
    own = {sid: _covered(fp, fp.hashes) & ~_covered(fp, fp.hashes & widely) for sid, fp in prints.items()}
    rare = {sid: fp.hashes - widely for sid, fp in prints.items()}
    shared: dict[tuple[str, str], int] = Counter()
    for h, ids in holders.items():
        if h not in widely and len(ids) > 1:
            for pair in combinations(sorted(ids), 2):
                shared[pair] += 1
    out = []
    for (a, b), n in sorted(shared.items()):
        if n < COPY_SHARE * min(len(rare[a]), len(rare[b])) / 2:  # far from nearly all: not worth measuring
            continue
        both = rare[a] & rare[b]
        in_a = int((_covered(prints[a], both) & own[a]).sum())
        in_b = int((_covered(prints[b], both) & own[b]).sum())
        if min(in_a, in_b) < COPY_MIN:
            continue
        least = min(in_a / max(1, int(own[a].sum())), in_b / max(1, int(own[b].sum())))
        if least >= COPY_SHARE:
            out.append((a, b, least))
    return out


def _units(
    ids: Sequence[str], links: Iterable[tuple[str, str, float]], start: dict[str, str] | None = None
) -> dict[str, str]:
    """Each submission's group of copies (linked by ``links``, and by ``start``: each id to its unit's first
    member), named by its first member."""
    parent = {i: i for i in ids}
    if start:
        parent.update({i: min(i, start[i]) for i in ids})

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, _ in links:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {i: root(i) for i in ids}


def _drop(cd: Any, fp: Any, hashes: set[int]) -> None:
    """Remove ``hashes`` from a fingerprint, as copydetect removes boilerplate (after winnowing): the same
    fingerprint as building it again with them added to the boilerplate, without tokenizing twice."""
    from copydetect.utils import get_token_coverage

    if not hashes & fp.hashes:
        return
    fp.hashes = fp.hashes - hashes
    fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in hashes}
    fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code))


@dataclass
class _Match:
    share_a: float  # of a's code (normalised characters, or raw characters) in passages b shares
    share_b: float
    slices_a: list[tuple[int, int]]  # character ranges of the raw code
    slices_b: list[tuple[int, int]]

    @property
    def score(self) -> float:
        return (self.share_a + self.share_b) / 2


def _compare(cd: Any, fa: Any, fb: Any, floor: int = 0) -> _Match:
    """copydetect's comparison of two fingerprints; the share is of the whole code (not only of what
    survived the boilerplate), so a head that is nearly all course code cannot score high on a scrap, and of
    at least ``floor`` characters, so a short head cannot either: its similarity says how short it is."""
    _, (sim_a, sim_b), (sl_a, sl_b) = cd.compare_files(fa, fb)
    if not len(sl_a) or not len(sl_a[0]):
        return _Match(0.0, 0.0, [], [])

    def share(sim: float, fp: Any) -> float:
        return min(1.0, float(sim) * float(fp.token_coverage) / max(1, len(fp.filtered_code), floor))

    def ranges(sl: Any) -> list[tuple[int, int]]:
        return [(int(s), int(e)) for s, e in zip(sl[0], sl[1], strict=True)]

    return _Match(share(sim_a, fa), share(sim_b, fb), ranges(sl_a), ranges(sl_b))


def _candidates(prints: dict[str, Any]) -> set[tuple[str, str]]:
    """The pairs that share at least one fingerprint: after frequency suppression each fingerprint is in
    a few submissions, so this is far fewer than every pair (the others match nothing)."""
    holders: dict[int, list[str]] = {}
    for sid, fp in prints.items():
        for h in fp.hashes:
            holders.setdefault(h, []).append(sid)
    pairs: set[tuple[str, str]] = set()
    for ids in holders.values():
        pairs.update(combinations(sorted(ids), 2))
    return pairs


# -- ranking -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    median: float
    mad: float
    scale: float  # 1.4826 MAD, at least SCALE_FLOOR
    q1: float
    q3: float


def spread(values: Sequence[float]) -> Spread:
    """Median, MAD and quartiles of a class's pair similarities: of the pairs that share any passage (the
    others, most of a class once common passages are removed, say nothing of how far apart honest heads
    lie, and would make the MAD 0)."""
    if not values:
        return Spread(0.0, 0.0, SCALE_FLOOR, 0.0, 0.0)
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return Spread(med, mad, max(1.4826 * mad, SCALE_FLOOR), q[0], q[2])


def wide_threshold(n: int) -> int:
    """More than how many submissions of a class of ``n`` hold a passage that is the class's, whoever they are."""
    return max(WIDE, math.ceil(WIDE_SHARE * n))


def _groups(unit: dict[str, str], copies: Sequence[tuple[str, str, float]]) -> list[SimilarGroup]:
    """The groups of three or more copies of one code (a pair of copies is a flagged pair), largest first."""
    members: dict[str, list[str]] = {}
    for sid, root in unit.items():
        members.setdefault(root, []).append(sid)
    least: dict[str, float] = {}
    for a, _, share in copies:
        least[unit[a]] = min(share, least.get(unit[a], 1.0))
    rings = sorted((sorted(m) for m in members.values() if len(m) >= 3), key=lambda m: (-len(m), m))
    return [SimilarGroup(id=k, members=m, least_share=round(least[m[0]], 4)) for k, m in enumerate(rings, 1)]


def rare_threshold(n: int) -> int:
    """At most how many heads may hold a cause for it to be rare in a class of ``n``."""
    return max(3, math.floor(RARE_SHARE * n))


EVIDENT = ("mutation", "known", "contract")  # a mistake's shape; not a crash or a check's own failure, which any
# head that stops there shares whatever its code


def _causes(result: GradeResult) -> dict[str, str]:
    return {d.id: d.title for d in result.diagnosis if d.kind in EVIDENT}


def _line_ranges(text: str, slices: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """1-based line ranges covered by character slices, merged."""
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    out: list[tuple[int, int]] = []
    for s, e in sorted(slices):
        first = bisect.bisect_right(starts, s)
        last = bisect.bisect_right(starts, max(s, e - 1))
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def compare_class(
    codes: Sequence[Code],
    results: dict[str, GradeResult],
    *,
    course: Boilerplate = Boilerplate(),
    common: int = COMMON,
    hrefs: dict[str, str] | None = None,
) -> ClassSimilarity:
    """Every pair of ``codes`` matched twice (normalised and verbatim), ranked within this class.
    ``course``: the code that is nobody's (:func:`boilerplate_sources`)."""
    cd = _copydetect()
    started = time.perf_counter()
    codes = sorted(codes, key=lambda c: c.id)
    by_id = {c.id: c for c in codes}
    n = len(codes)
    wide = wide_threshold(n)
    normal = _run_pass(cd, codes, course.given + course.solutions, NOISE, common, wide, normalise=True)
    verbatim = _run_pass(cd, codes, course.given, VERBATIM_NOISE, common, wide, normalise=False)
    copies = normal.copies + verbatim.copies
    unit = _units([c.id for c in codes], copies)
    matches: dict[tuple[str, str], tuple[_Match, _Match]] = {}
    candidates = _candidates(normal.prints) | _candidates(verbatim.prints) | {(a, b) for a, b, _ in copies}
    for a, b in sorted(candidates):
        m_norm = _compare(cd, normal.prints[a], normal.prints[b], normal.floor)
        m_verb = _compare(cd, verbatim.prints[a], verbatim.prints[b], verbatim.floor)
        if m_norm.score > 0 or m_verb.score > 0 or unit[a] == unit[b]:
            matches[(a, b)] = (m_norm, m_verb)
    total_pairs = n * (n - 1) // 2
    apart = [max(mn.score, mv.score) for (a, b), (mn, mv) in matches.items() if unit[a] != unit[b]]
    scores = [max(mn.score, mv.score) for mn, mv in matches.values()]
    values = scores + [0.0] * (total_pairs - len(scores))  # every pair of the class, the unmatched as 0
    matching = len(apart) >= MIN_MATCHING
    # the spread is of the pairs written apart: a ring of ten's 45 pairs would make copying look ordinary
    sp = spread(apart if matching else apart + [0.0] * (total_pairs - len(scores)))
    groups = _groups(unit, copies)
    group_of = {m: g.id for g in groups for m in g.members}

    holders = Counter(cid for sid in by_id if sid in results for cid in _causes(results[sid]))
    graded = sum(sid in results for sid in by_id)
    rare_max = rare_threshold(graded)  # of the heads whose causes are known

    pairs: list[SimilarPair] = []
    for (a, b), (mn, mv) in matches.items():
        best = mn if mn.score >= mv.score else mv
        sim = max(mn.score, mv.score)
        z = (sim - sp.median) / sp.scale
        ca = _causes(results[a]) if a in results else {}
        cb = _causes(results[b]) if b in results else {}
        rare = sorted(c for c in set(ca) & set(cb) if holders[c] <= rare_max)
        evidence = z + (RARE_BONUS if rare else 0.0)
        copy = unit[a] == unit[b]  # nearly all of both one code: flagged whatever the rank
        flagged = (evidence >= Z_FLAG and sim > 0) or copy
        if not flagged and evidence < FLOOR_Z:
            continue
        pairs.append(
            SimilarPair(
                a=a,
                b=b,
                similarity=round(sim, 4),
                normalised=round(mn.score, 4),
                verbatim=round(mv.score, 4),
                share_a=round(best.share_a, 4),
                share_b=round(best.share_b, 4),
                z=round(z, 2),
                evidence=round(evidence, 2),
                flagged=flagged,
                copies=copy,
                group=group_of.get(a) if copy else None,
                rare_causes=rare,
                rare_words=_rare_sentence(rare, {**ca, **cb}, {k: v for k, v in results.items() if k in by_id}),
                slices_a=best.slices_a,
                slices_b=best.slices_b,
                lines_a=_line_ranges(by_id[a].text, best.slices_a),
                lines_b=_line_ranges(by_id[b].text, best.slices_b),
            )
        )
    pairs.sort(key=lambda p: (-p.evidence, -p.similarity, p.a, p.b))
    shown = {sid for p in pairs if p.flagged for sid in (p.a, p.b)} | set(group_of)
    members = {sid: _member(by_id[sid], results.get(sid), (hrefs or {}).get(sid)) for sid in sorted(shown)}
    counts = [0] * BINS
    for v in values:
        counts[min(int(v * BINS), BINS - 1)] += 1
    return ClassSimilarity(
        submissions=n,
        graded=graded,
        pairs_total=total_pairs,
        pairs_matching=len(scores),
        spread_over="matching" if matching else "all",
        median=round(sp.median, 4),
        mad=round(sp.mad, 4),
        scale=round(sp.scale, 4),
        scale_floor=SCALE_FLOOR,
        q1=round(sp.q1, 4),
        q3=round(sp.q3, 4),
        max_similarity=round(max(values, default=0.0), 4),
        histogram=counts,
        library=f"copydetect {cd.__version__}",
        noise=NOISE,
        verbatim_noise=VERBATIM_NOISE,
        common=common,
        common_dropped=normal.common,
        wide=wide,
        copy_share=COPY_SHARE,
        copy_min=COPY_MIN,
        floor=normal.floor,
        groups=groups,
        boilerplate_files=len(course),
        rare_max=rare_max,
        z_flag=Z_FLAG,
        rare_bonus=RARE_BONUS,
        pairs=pairs,
        members=members,
        duration_s=round(time.perf_counter() - started, 3),
    )


def _rare_sentence(rare: Sequence[str], titles: dict[str, str], results: dict[str, GradeResult]) -> str:
    """'Both: scores divided by sqrt(T) and weights clamped after the softmax; 3 of 212 heads do.'"""
    if not rare:
        return ""
    words = [titles.get(c, c) for c in rare]
    said = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    holding = sum(set(rare) <= set(_causes(r)) for r in results.values())
    return f"Both: {said}; {holding} of {len(results)} heads {'does' if holding == 1 else 'do'}"


def _member(code: Code, result: GradeResult | None, href: str | None) -> SimilarityMember:
    if result is None:
        return SimilarityMember(id=code.id, code=code.text, href=href)
    return SimilarityMember(
        id=code.id,
        code=code.text,
        href=href,
        score=result.score,
        max_score=result.max_score,
        causes=[(d.id, d.title) for d in result.diagnosis],
    )


# -- the graded folder ---------------------------------------------------------------------------


def read_class(
    out: Path, submissions: Path | None = None, module: str | None = None, rubric: Any = None
) -> tuple[list[Code], dict[str, GradeResult], list[str]]:
    """Each submission's own code (prepared as the grader prepares it: nothing runs), the stored results
    of OUT, and notes on what could not be read."""
    from grader.batch import BATCH_STATE, STATE_FILE, discover, fingerprint, locate
    from grader.entries import LayoutError
    from grader.submission import SubmissionError, contract_names, prepare

    out = Path(out)
    if submissions is None:
        try:
            submissions = Path(json.loads((out / BATCH_STATE).read_text(encoding="utf-8"))["submissions"])
        except (OSError, ValueError, KeyError, TypeError):
            raise SimilarityError(
                f"{out} does not say where its submissions are (no {BATCH_STATE}): give --submissions DIR"
            ) from None
    if rubric is None:
        from grader.rubric import load_rubric

        rubric = load_rubric(None)
    module = module or rubric.entry_points.module
    try:
        entries, notes = discover(submissions, exclude=out)
    except (NotADirectoryError, LayoutError) as exc:  # a usage error, said as grade batch says it
        raise SimilarityError(str(exc)) from None
    codes: list[Code] = []
    results: dict[str, GradeResult] = {}
    ungraded: list[str] = []
    changed: list[str] = []
    for entry in entries:
        try:
            results[entry.id] = GradeResult.model_validate_json(
                (out / entry.id / "result.json").read_text(encoding="utf-8")
            )
        except (OSError, ValueError, ValidationError):
            ungraded.append(entry.id)
        else:
            if _stale(out / entry.id / STATE_FILE, fingerprint(entry, rubric)):
                changed.append(entry.id)
        try:
            with prepare(
                locate(entry.path, module),
                module,
                contract=contract_names(rubric.entry_points),
                packages=rubric.packages,
                tests_beside=False,  # only the head's source is compared
            ) as sub:
                codes.append(Code(entry.id, sub.source))
        except SubmissionError as exc:
            notes.append(f"{entry.id} left out: {exc}")
    if ungraded:
        notes.append(
            f"{_count(ungraded)} no result in {out}, so no causes: compared on code alone (grade batch grades "
            f"them): {_some(ungraded)}"
        )
    if changed:
        notes.append(
            f"{_count(changed)} changed since {out} was graded (or the rubric did): their code is compared as it "
            f"is now, their causes are the earlier grade's (grade batch regrades them): {_some(changed)}"
        )
    return codes, results, notes


def _stale(state: Path, now: str) -> bool:
    """Whether the grade stored beside a result was made of other bytes (or another rubric); unknown: no."""
    try:
        return json.loads(state.read_text(encoding="utf-8")).get("fingerprint") != now
    except (OSError, ValueError, AttributeError):
        return False


def _count(ids: Sequence[str]) -> str:
    return f"{len(ids)} submission{'s have' if len(ids) > 1 else ' has'}"


def _some(ids: Sequence[str]) -> str:
    return ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def similarity_csv(report: ClassSimilarity) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for p in report.pairs:
        writer.writerow(
            [
                p.a,
                p.b,
                f"{p.similarity:.4f}",
                "true" if p.flagged else "false",
                ";".join(p.rare_causes),
                ";".join(_span(r) for r in p.lines_a),
                ";".join(_span(r) for r in p.lines_b),
                "" if p.group is None else str(p.group),
            ]
        )
    return buf.getvalue()


def _span(r: tuple[int, int]) -> str:
    return str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}"


def write_similarity(
    out: Path,
    submissions: Path | None = None,
    *,
    boilerplate: Iterable[Path] = (),
    common: int = COMMON,
    rubric: Any = None,
) -> ClassSimilarity:
    """OUT/similarity.csv and OUT/similarity.html for a graded folder; returns the model."""
    from urllib.parse import quote

    from grader.report.similarity import render_similarity

    out = Path(out)
    if not out.is_dir():
        raise SimilarityError(f"{out} is not a graded folder (run grade batch first)")
    codes, results, notes = read_class(out, submissions, rubric=rubric)
    if len(codes) < 2:
        raise SimilarityError(f"{len(codes)} submission(s) could be read: a similarity report needs two")
    hrefs = {c.id: quote(c.id, safe="@+-._") + "/report.html" for c in codes if (out / c.id / "report.html").is_file()}
    report = compare_class(codes, results, course=boilerplate_sources(boilerplate), common=common, hrefs=hrefs)
    report = report.model_copy(update={"notes": notes})
    write_atomic(out / "similarity.csv", similarity_csv(report))
    write_atomic(out / "similarity.html", render_similarity(report))
    return report


# -- the command ---------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="grade similarity",
        description="Which submissions of a graded class share code nobody else does (instructor only). "
        "Writes OUT/similarity.html and OUT/similarity.csv.",
    )
    p.add_argument("out", type=Path, metavar="OUT_DIR", help="a folder graded by grade batch")
    add_options(p)
    return p


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_options(p: argparse.ArgumentParser, *, submissions: bool = True) -> None:
    """The options ``grade similarity`` and ``grade batch --similarity`` share (a batch knows its submissions)."""
    if submissions:
        p.add_argument(
            "--submissions",
            type=Path,
            metavar="DIR",
            help="the submissions (default: the folder grade batch graded into OUT_DIR)",
        )
    p.add_argument(
        "--boilerplate",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE",
        help="course-given code besides the template and reference (a starter notebook's cells, a .py)",
    )
    p.add_argument(
        "--common",
        type=_at_least_one,
        default=COMMON,
        metavar="N",
        help="a passage that more than N independent submissions hold is the class's common code, nobody's "
        "(copies of one code count once; default %(default)s)",
    )


class BatchStage:
    """``grade batch --similarity``: the report, once the class is graded (see grader.batch.Stage)."""

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--similarity",
            action="store_true",
            help="also write OUT/similarity.html and similarity.csv: pairs whose code stands out as shared "
            "(instructor only; grade similarity OUT makes it for an already graded folder)",
        )
        add_options(parser, submissions=False)

    def run(self, args: argparse.Namespace, rubric: Any) -> int | None:
        """None when not asked for or written; 2 (printed) when the report could not be made."""
        from rich.console import Console

        if not args.similarity:
            return None
        try:
            report = write_similarity(
                args.out, args.submissions, boilerplate=args.boilerplate, common=args.common, rubric=rubric
            )
        except (SimilarityError, OSError) as exc:
            return _error("grade batch", f"--similarity: {exc}")
        Console(highlight=False, soft_wrap=True).print(summary_line(report, args.out), markup=False)
        return None


def _error(command: str, message: str) -> int:
    from rich.console import Console

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"[bold red]{command}: error:[/] ", end="")
    err.print(message, markup=False)
    return 2


def summary_line(report: ClassSimilarity, out: Path) -> str:
    flagged = [p for p in report.pairs if p.flagged]
    groups = f", {len(report.groups)} group{'' if len(report.groups) == 1 else 's'} of copies" if report.groups else ""
    return (
        f"similarity: {report.submissions} submissions, {report.pairs_total} pairs (median {report.median:.2f}, "
        f"max {report.max_similarity:.2f}), {len(flagged)} flagged{groups}, in {report.duration_s:.1f} s\n"
        f"  {out / 'similarity.html'}\n  {out / 'similarity.csv'}"
    )


def similarity_main(argv: list[str]) -> int:
    """``grade similarity OUT``: 0 when the report was written, 2 when it could not be."""
    from rich.console import Console

    args = _parser().parse_args(argv)
    try:
        report = write_similarity(args.out, args.submissions, boilerplate=args.boilerplate, common=args.common)
    except (SimilarityError, OSError) as exc:
        return _error("grade similarity", str(exc))
    console = Console(highlight=False, soft_wrap=True)
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)
    console.print(summary_line(report, args.out), markup=False)
    return 0
