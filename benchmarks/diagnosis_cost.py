"""What a grade costs a student, passing and failing heads apart, beside the previous release (issue 51).

    python benchmarks/diagnosis_cost.py --baseline /path/to/old/.venv/bin/grade [--sources realistic,lines_to_edit]
                                        [--generated 40 --seed 51] [--rounds 1] [--batch [--jobs 2]]

Whole processes: each head of each source is graded cold (``grade HEAD --json FILE``) by this checkout's grader
and, right after it on the same head, by the baseline's (another checkout's ``grade``, the previous release
installed in its own virtualenv), so that a busy moment costs both alike. Per source and grader it prints the
passing heads' median, the failing heads' median, 95th percentile and maximum, the ratio of the failing p95 to
the passing median (issue 51's goal: at most 3x, and no head over 10 s), and the heads over 10 s. The seconds
are the wall time of the process; the grader's own ``duration_s`` is printed beside them.

``--batch``: the issue's own measure instead: every head of the sources in one class folder, graded by one
``grade batch`` per grader and round (the graders alternated round by round), each head's seconds the
``duration_s`` its ``result.json`` records (the grade of that submission inside the batch, workers warm).

Sources: ``realistic`` (tests/realistic), ``lines_to_edit`` (tests/lines_to_edit), ``generated`` (``--generated N``
heads of the generated bench, tests/generated, seeded).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
GOAL_RATIO, GOAL_MAX = 3.0, 10.0


@dataclass
class Timed:
    source: str
    head: str
    grader: str
    seconds: float
    duration_s: float
    failing: bool


def heads(sources: list[str], generated: int, seed: int, scratch: Path) -> list[tuple[str, Path]]:
    """(source, file) for every head of the sources asked for."""
    out: list[tuple[str, Path]] = []
    for source in sources:
        if source == "generated":
            from tests.generated.mutations import sample  # the bench's generator (libcst, the test extra)

            for k, g in enumerate(sample(generated, seed)):
                path = scratch / f"generated_{k:03d}" / "attention_head.py"
                path.parent.mkdir(parents=True)
                path.write_text(g.source, encoding="utf-8")
                out.append((source, path))
            continue
        for path in sorted((REPO / "tests" / source).glob("*.py")):
            if not path.name.startswith("_"):
                out.append((source, path))
    return out


def grade(command: list[str], head: Path, scratch: Path) -> tuple[float, float, bool]:
    """(wall seconds, the grader's duration_s, whether a check failed) of one cold grade."""
    out = scratch / "result.json"
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run([*command, str(head), "--json", str(out)], capture_output=True, check=False, timeout=600)
    wall = time.perf_counter() - t0
    if not out.is_file():
        return wall, math.nan, True
    result = json.loads(out.read_text(encoding="utf-8"))
    failing = any(c["status"] in ("failed", "error", "timeout") for c in result["checks"])
    return wall, float(result.get("duration_s", math.nan)), failing


def batch(command: list[str], todo: list[tuple[str, Path]], scratch: Path, jobs: int, name: str) -> list[Timed]:
    """Every head of ``todo`` graded in one ``grade batch`` by ``command``: (source, head, seconds) per head, the
    seconds its result.json's duration_s."""
    folder, out = scratch / f"class-{name}", scratch / f"out-{name}"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    ids = {}
    for source, head in todo:
        sid = f"{source}__{head.stem if source != 'generated' else head.parent.name}"
        (folder / sid).mkdir(parents=True)
        shutil.copy(head, folder / sid / "attention_head.py")
        ids[sid] = source
    subprocess.run(
        [*command, "batch", str(folder), "--out", str(out), "--jobs", str(jobs), "--quiet"],
        capture_output=True, check=False, timeout=7200,
    )  # fmt: skip
    rows = []
    for sid, source in ids.items():
        try:
            result = json.loads((out / sid / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            print(f"{name}: no result for {sid}", file=sys.stderr)
            continue
        failing = any(c["status"] in ("failed", "error", "timeout") for c in result["checks"])
        seconds = float(result.get("duration_s", math.nan))
        rows.append(Timed(source, sid.split("__", 1)[1], name, seconds, seconds, failing))
    return rows


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)] if xs else math.nan


def report(rows: list[Timed]) -> None:
    sources = list(dict.fromkeys(r.source for r in rows))
    for source in [*sources, "all"] if len(sources) > 1 else sources:  # the sets apart, then together
        for name in dict.fromkeys(r.grader for r in rows):
            mine = [r for r in rows if source in (r.source, "all") and r.grader == name]
            passing = [r.seconds for r in mine if not r.failing]
            failing = [r.seconds for r in mine if r.failing]
            base = statistics.median(passing) if passing else math.nan
            middle = statistics.median(failing) if failing else math.nan
            print(
                f"{source:14s} {name:14s} passing n={len(passing):3d} median {base:6.2f} s | "
                f"failing n={len(failing):3d} median {middle:6.2f} s, p95 {p95(failing):6.2f} s, "
                f"max {max(failing, default=math.nan):6.2f} s | p95/passing median {p95(failing) / base:5.2f}x"
            )
            slow = sorted((r for r in mine if r.seconds > GOAL_MAX), key=lambda r: -r.seconds)
            for r in slow:
                own = f"grader's own {r.duration_s:.1f} s"
                print(f"{'':14s} {'':14s} over {GOAL_MAX:g} s: {r.head} {r.seconds:.1f} s ({own})")
    print(f"goal: failing p95 <= {GOAL_RATIO:g}x the passing median, no head over {GOAL_MAX:g} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--baseline",
        action="append",
        default=[],
        help="an earlier release's `grade` executable (its own virtualenv); repeat for several, each named by its "
        "checkout's folder",
    )
    ap.add_argument("--sources", default="realistic,lines_to_edit")
    ap.add_argument("--generated", type=int, default=40, help="heads of the generated bench, with 'generated'")
    ap.add_argument("--seed", type=int, default=51)
    ap.add_argument("--rounds", type=int, default=1, help="grade every head this many times with each grader")
    ap.add_argument("--json", type=Path, help="also write every timing here")
    ap.add_argument("--batch", action="store_true", help="grade each source in one grade batch per grader")
    ap.add_argument("--jobs", type=int, default=2, help="grade batch's workers, with --batch")
    args = ap.parse_args()
    graders = {"this": [sys.executable, "-m", "grader"]}
    for exe in args.baseline:
        graders[Path(exe).resolve().parents[2].name] = [exe]
    scratch = Path(tempfile.mkdtemp(prefix="diagnosis-cost-"))
    rows: list[Timed] = []
    try:
        todo = heads(args.sources.split(","), args.generated, args.seed, scratch)
        for _ in range(args.rounds if args.batch else 0):
            for name, command in graders.items():  # alternated round by round
                rows += batch(command, todo, scratch, args.jobs, name)
                print(f"{name}: graded {len(todo)} heads in one batch", file=sys.stderr)
        for _ in range(0 if args.batch else args.rounds):
            for k, (source, head) in enumerate(todo):
                for name, command in graders.items():  # alternated on the same head
                    wall, own, failing = grade(command, head, scratch)
                    rows.append(Timed(source, head.stem if source != "generated" else head.parent.name, name,
                                      wall, own, failing))  # fmt: skip
                print(f"[{k + 1}/{len(todo)}] {source} {rows[-1].head}", file=sys.stderr)
        report(rows)
        if args.json:
            args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1), encoding="utf-8")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
