"""Rings of copiers and innocent flags: what the class similarity report finds, on classes built to measure it.

    python benchmarks/similarity_rings.py [--sizes 60 300] [--rings 3 5 10] [--seeds 1 2 3] [--held-out]

Each class (tests/similarity/classes.py): heads written apart (tests/realistic, tests/lines_to_edit, the
reference's chaffs and variants), heads that fill a public skeleton or retype a tutorial, short textbook heads,
and one ring: a head and renamed, recommented copies of it (``--rings``: its size, source included; 0: none).
The realistic heads' results carry their catalog causes (a copy, its source's); the others are compared on their
code alone. Reported per class size and ring size, summed over the seeds:

- rings found: every member of the ring in one reported group, or (a report with no groups) joined to the
  others by flagged pairs of the ring;
- ring pairs flagged, of the ring's pairs;
- innocent flags: flagged pairs that are not two members of the ring; and members of groups that are not the
  ring's.

``--edits N``: each copy also makes N small edits (two statements swapped, a line added).
``--held-out`` builds the classes from what the method was not tuned on: the held-out skeleton and rings copied
from tests/lines_to_edit. Run it from a checkout of another commit (with this file and tests/similarity/classes.py
copied in) to measure that commit's method: a report without groups is judged on its pairs.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from similarity.classes import Class, build_class  # noqa: E402

from grader.models import CheckResult, Diagnosis, GradeResult  # noqa: E402
from grader.similarity import Code, boilerplate_sources, compare_class  # noqa: E402

CATALOG = {h["id"]: h for h in tomllib.loads((REPO / "tests/realistic/catalog.toml").read_text())["head"]}


def _result(name: str, head: dict[str, Any]) -> GradeResult:
    check = CheckResult(
        id="reference_match", title="t", cites="", status="passed", score=1, max_score=1, message="", seed=1,
        duration_s=0.0,
    )  # fmt: skip
    return GradeResult(
        submission=name, seed=1, score=head["score"], max_score=100, checks=[check], rubric="Project Step 4",
        duration_s=1.0,
        diagnosis=[Diagnosis(id=c, title=c.replace("_", " "), hint="", cites="") for c in head["causes"]],
    )  # fmt: skip


def results_for(cls: Class) -> dict[str, GradeResult]:
    """The catalog's causes for each realistic head and its copies (the grader gives a copy its source's)."""
    out = {}
    for h in cls.heads:
        source = h.origin if h.origin in CATALOG else h.id
        if source in CATALOG:
            out[h.id] = _result(h.id, CATALOG[source])
    return out


def judge(report: Any, ring: list[str]) -> dict[str, int]:
    flagged = [(p.a, p.b) for p in report.pairs if p.flagged]
    members = set(ring)
    inside = [(a, b) for a, b in flagged if a in members and b in members]
    groups = [set(g.members) for g in getattr(report, "groups", [])]
    if groups:
        found = any(members <= g for g in groups) if ring else False
        strangers = sum(len(g - members) for g in groups)
    else:
        found = bool(ring) and _connected(members, inside)
        strangers = 0
    return {
        "found": int(found),
        "ring_pairs": len(inside),
        "ring_pairs_total": len(ring) * (len(ring) - 1) // 2,
        "innocent": len(flagged) - len(inside),
        "strangers": strangers,
        "groups": len(groups),
    }


def _connected(members: set[str], edges: list[tuple[str, str]]) -> bool:
    if not members:
        return False
    seen, todo = set(), [next(iter(members))]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += [b if a == m else a for a, b in edges if m in (a, b)]
    return members <= seen


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[60, 300])
    p.add_argument("--rings", type=int, nargs="+", default=[0, 3, 5, 10])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--held-out", action="store_true")
    p.add_argument("--edits", type=int, default=0, help="small edits each copy makes besides renaming")
    p.add_argument("--verbose", action="store_true", help="print each class's flagged pairs and groups")
    args = p.parse_args()
    course = boilerplate_sources()
    head = ("class", "ring", "found", "ring pairs", "innocent pairs", "strangers", "s")
    print("{:>5} {:>4}  {:>7}  {:>10}  {:>14}  {:>9}  {:>6}".format(*head))
    for n in args.sizes:
        for r in args.rings:
            total: dict[str, int] = {}
            took = 0.0
            for seed in args.seeds:
                cls = build_class(
                    n, ring=r, edits=args.edits, seed=seed + (1000 if args.held_out else 0), held_out=args.held_out
                )
                codes = [Code(h.id, h.text) for h in cls.heads]
                started = time.perf_counter()
                report = compare_class(codes, results_for(cls), course=course)
                took += time.perf_counter() - started
                ring = cls.rings[0] if cls.rings else []
                got = judge(report, ring)
                for k, v in got.items():
                    total[k] = total.get(k, 0) + v
                if args.verbose:
                    print(f"  n={n} ring={r} seed={seed}: {got}")
                    for pair in report.pairs:
                        if pair.flagged:
                            print(f"    {pair.a} · {pair.b}: {pair.similarity} z={pair.z}")
                    for g in getattr(report, "groups", []):
                        print(f"    group {g.members}")
            rings = len(args.seeds) if r > 1 else 0
            found = f"{total['found']}/{rings}"
            pairs = f"{total['ring_pairs']}/{total['ring_pairs_total']}"
            print(
                f"{n:>5} {r:>4}  {found:>7}  {pairs:>10}  {total['innocent']:>14}  {total['strangers']:>9}  "
                f"{took / len(args.seeds):>6.1f}"
            )


if __name__ == "__main__":
    main()
