"""How well the diagnosis finds mistakes in code nobody wrote for it (issue 52; issue 35's bench with --bench styles).

    python benchmarks/diagnosis_bench.py [--kinds held-out,tuned] [--n 300] [--seed 52] [--jobs 2] [--json OUT]
                                         [--keep DIR] [--rescore DIR]

Issue 52's bench (the default, ``--bench kinds``): for each group of kinds (``held-out``: the kinds drawn in
``tests/generated/held_out_kinds.toml`` before any tuning; ``tuned``: the others; or a comma-separated list of
kinds), ``--n`` heads from ``tests/generated/heads.sample`` (every sixth a correct program, the others 1 to 3
mistakes of that group's kinds, about one in five handed in as a notebook, each head's truth proven), graded on the
head's checks as below and judged by ``tests/generated/strict.py``: per group and per kind, the strict figures (the
right id, or a departure carrying the truth's fields, at a line to edit, one cause per mistake; false alarms: causes
that name no mistake of the head; named twice) beside the loose ones (a cause of the mistake's family, anywhere /
at the line); on the correct programs, the causes named and the full marks; the grader's exceptions; time per head
(median, p90, max).

    python benchmarks/diagnosis_bench.py --bench styles [--n 100] [--seed 35] [--styles a,b] [--jobs 2] [--json OUT]
                                         [--via inprocess|batch] [--keep DIR] [--rescore DIR]

Generates ``--n`` heads (``tests/generated``: 8 styles of real code, round-robin; every sixth head of a style is
correct, the others carry 1 to 3 source-level mutations, each with its ground truth), grades each on the head's own
checks (those that call ``causal_self_attention``, except ``performance``, which measures the machine), compares the
diagnosis with the ground truth and prints, per style, for the tune and held-out styles, and overall:

- found: ground-truth mistakes for which a cause of the same kind is named (:func:`match`; the kinds are
  ``tests/generated/mutations.py``'s ``FAMILIES``), and ``exact``: those named by one of their own ids;
- lines: mistakes whose matching cause points (``where.line``) at one of the lines the mutation changed;
- no mistake: causes that match no mutation of the head (on a correct head, every cause), beside the style's own
  contract causes (a NumPy head leaves torch; ``computed_outside_torch`` is expected there) and ``missing:*``
  (the generated files define the head alone);
- full: correct heads graded full marks (a NumPy head: every point but its contract cause's);
- complete: heads whose result says the diagnosis is proven complete (``diagnosis_complete``: with the walk's
  changes applied, the head passes every property check that can be re-run with them);
- exceptions: heads where the grader's own code raised: a traceback on the grade's stderr, a check's "Internal
  grader error", or a ``diagnosis_error`` in the result;
- time: the grades' median and total seconds.

The grading runs in a child process (``--grade-folder``; the bookkeeping here never imports the grader's runner),
which grades one head after another on one warm worker pool, ``--jobs`` at a time, each grade's stderr captured on
its own. ``--via batch`` grades with ``grade batch`` instead (every check of the rubric, report pages written;
stderr is the whole batch's), to compare the two's speed. ``--keep DIR`` keeps the heads (with each one's
``truth.json``) and the raw results; ``--rescore DIR`` judges such a folder again without grading (after a change
of the judging), refusing one whose heads the same ``--n`` and ``--seed`` no longer generate.

Measured on 16 heads (2 jobs, a loaded 2-core machine): the child grading in-process took 47 s of wall time
(median grade 3.2 s), ``grade batch`` on the same folder 58 s (median 5.0 s: every check, report pages).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from generated import HELD_OUT, STYLES, TUNE, Generated, sample  # noqa: E402
from generated.judge import Scored, score, summary  # noqa: E402

HELD_OUT_FILE = REPO / "tests" / "generated" / "held_out_kinds.toml"

HEAD = "causal_self_attention"
MODULE = "attention_head.py"
NOTEBOOK = "attention_head.ipynb"


def head_checks() -> list[str]:
    """The checks of the head (those that call it), except ``performance`` (a measure of the machine)."""
    from grader.checks import CHECKS

    return [cid for cid, spec in CHECKS.items() if HEAD in spec.needs and cid != "performance"]


# -- the child: grading ------------------------------------------------------------------------------


class _PerThread(io.TextIOBase):
    """sys.stderr while the child grades: what each grading thread writes goes to its own buffer."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        buffer = self.buffers.get(threading.get_ident())
        return (buffer or self.fallback).write(text)

    def flush(self) -> None:
        self.fallback.flush()


def grade_folder(folder: Path, results: Path, jobs: int) -> None:
    """Grade every ``folder/<id>/attention_head.py`` into ``results/<id>.json``: {"result", "stderr", "raised"}."""
    import torch

    from grader.exports import result_json
    from grader.runner import checked_rubric, grade
    from grader.sandbox import WorkerPool

    torch.set_num_threads(1)
    rubric = checked_rubric()
    only = head_checks()
    capture = _PerThread(sys.stderr)
    sys.stderr = capture
    heads = sorted(p for p in folder.iterdir() if (p / MODULE).is_file() or (p / NOTEBOOK).is_file())

    def one(head: Path) -> None:
        buffer = capture.buffers[threading.get_ident()] = io.StringIO()
        record: dict[str, Any] = {"result": None, "raised": None}
        handed_in = head / NOTEBOOK if (head / NOTEBOOK).is_file() else head / MODULE
        try:
            result = grade(handed_in, rubric, only=only, pool=pool, parallel=False, visuals=False, label=head.name)
            record["result"] = json.loads(result_json(result))
        except Exception as exc:  # the grader's own failure: a finding of the bench, never fatal to it
            record["raised"] = f"{type(exc).__name__}: {exc}"
        finally:
            del capture.buffers[threading.get_ident()]
        record["stderr"] = buffer.getvalue()
        (results / f"{head.name}.json").write_text(json.dumps(record), encoding="utf-8")

    with (
        WorkerPool(jobs, uid_base=rubric.limits.sandbox_uid_base) as pool,
        ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="bench") as ex,
    ):
        for future in [ex.submit(one, head) for head in heads]:
            future.result()


def run_child(folder: Path, results: Path, jobs: int) -> float:
    """Grade in a child process; its wall time."""
    started = time.perf_counter()
    cmd = [sys.executable, __file__, "--grade-folder", str(folder), "--results", str(results), "--jobs", str(jobs)]
    subprocess.run(cmd, check=True)
    return time.perf_counter() - started


def run_batch(folder: Path, results: Path, jobs: int) -> float:
    """Grade with ``grade batch`` (all the rubric's checks); store its results as the child does."""
    out = results / "_batch"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--jobs", str(jobs), "--quiet"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"grade batch exited {done.returncode}: {done.stderr[-2000:]}")
    for head in folder.iterdir():
        stored = out / head.name / "result.json"
        record = {"result": json.loads(stored.read_text(encoding="utf-8")) if stored.is_file() else None}
        record |= {"raised": None if stored.is_file() else "no result", "stderr": ""}
        (results / f"{head.name}.json").write_text(json.dumps(record), encoding="utf-8")
    (results / "_batch_stderr.txt").write_text(done.stderr, encoding="utf-8")
    return wall


# -- the parent: bookkeeping ---------------------------------------------------------------------------


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "-"


COLUMNS = ("heads", "found", "exact", "lines", "no mistake (correct/mutated)", "full", "complete", "exceptions", "s")


def _cells(name: str, s: dict[str, Any]) -> list[str]:
    return [
        name,
        f"{s['heads']} ({s['correct']} ok)",
        _pct(s["found"], s["mistakes"]),
        _pct(s["exact"], s["mistakes"]),
        _pct(s["lines"], s["mistakes"]),
        f"{s['no_mistake_on_correct']} / {s['no_mistake_on_mutated']}",
        f"{s['full_on_correct']}/{s['correct']}",
        str(s["complete"]),
        str(s["exceptions"]),
        f"{s['median_s']} / {s['total_s']}",
    ]


def table(rows: list[Scored]) -> tuple[str, dict[str, Any]]:
    groups: dict[str, list[Scored]] = {}
    for style in (*TUNE, *HELD_OUT):
        mine = [r for r in rows if r.style == style]
        if mine:
            groups[f"{style}{' *' if STYLES[style].held_out else ''}"] = mine
    groups["tune"] = [r for r in rows if r.style in TUNE]
    groups["held-out *"] = [r for r in rows if r.style in HELD_OUT]
    groups["overall"] = rows
    sums = {name: summary(mine) for name, mine in groups.items() if mine}
    lines = [["style", *COLUMNS[:-1], "median / total s"]] + [_cells(n, s) for n, s in sums.items()]
    widths = [max(len(r[k]) for r in lines) for k in range(len(lines[0]))]
    text = "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)
    return text, sums


def by_mutation(rows: list[Scored], heads: dict[str, Generated]) -> str:
    """Found and line per mutation kind, over every head that carries it."""
    tally: dict[str, list[int]] = {}
    for r in rows:
        missed, wrong = set(r.missed), {w.split(":", 1)[0] for w in r.wrong_line}
        for t in heads[r.id].truths:
            n = tally.setdefault(t.mutation, [0, 0, 0])
            n[0] += 1
            n[1] += t.mutation not in missed
            n[2] += t.mutation not in missed and t.mutation not in wrong
    width = max((len(m) for m in tally), default=8)
    return "\n".join(
        f"{m.ljust(width)}  found {_pct(f, n):>13}  lines {_pct(ln, n):>13}" for m, (n, f, ln) in sorted(tally.items())
    )


# -- issue 52: mistake kinds, held out and tuned ------------------------------------------------------------


def kind_groups() -> dict[str, tuple[str, ...]]:
    """``held-out`` (drawn before tuning, less the kinds a fix moved since) and ``tuned`` (every other kind)."""
    import tomllib

    from generated.kinds import KINDS

    drawn = tomllib.loads(HELD_OUT_FILE.read_text(encoding="utf-8"))
    held = tuple(sorted(set(drawn["held_out"]) - set(drawn.get("moved", []))))
    return {"held-out": held, "tuned": tuple(sorted(set(KINDS) - set(held)))}


def _kind_rows(rows: list[Any], held: set[str]) -> str:
    from generated.strict import per_kind

    lines = [["kind", "n", "strict", "named (any line)", "found (family)", "family at line", "departure at line"]]
    for kind, n in per_kind(rows).items():
        lines.append(
            [
                f"{kind}{' *' if kind in held else ''}",
                str(n["n"]),
                _pct(n["strict"], n["n"]),
                _pct(n["named"], n["n"]),
                _pct(n["found"], n["n"]),
                _pct(n["at_line"], n["n"]),
                _pct(n["stage_at_line"], n["n"]) if n["stage_at_line"] else "",
            ]
        )
    return _aligned(lines)


def _aligned(lines: list[list[str]]) -> str:
    widths = [max(len(r[k]) for r in lines) for k in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)


def _group_rows(sums: dict[str, dict[str, Any]]) -> str:
    lines = [
        [
            "group",
            "heads (correct)",
            "mistakes",
            "strict",
            "named",
            "found (loose)",
            "at line (loose)",
            "false alarms",
            "named twice",
            "heads all right",
            "causes on correct",
            "full marks",
            "exceptions",
            "s median / p90 / max",
        ]
    ]
    for name, s in sums.items():
        lines.append(
            [
                name,
                f"{s['heads']} ({s['correct']})",
                str(s["mistakes"]),
                _pct(s["strict"], s["mistakes"]),
                _pct(s["named"], s["mistakes"]),
                _pct(s["found"], s["mistakes"]),
                _pct(s["at_line"], s["mistakes"]),
                str(s["false_alarms"]),
                str(s["twice"]),
                _pct(s["heads_all_right"], s["heads"] - s["correct"]),
                str(s["causes_on_correct"]),
                f"{s['full_on_correct']}/{s['correct']}",
                str(s["exceptions"]),
                f"{s['median_s']} / {s['p90_s']} / {s['max_s']}",
            ]
        )
    return _aligned(lines)


def kinds_main(args: argparse.Namespace, p: argparse.ArgumentParser) -> int:
    from generated.heads import sample as sample_heads
    from generated.kinds import KINDS
    from generated.strict import judge, per_kind
    from generated.strict import summary as strict_summary

    groups = kind_groups()
    wanted: dict[str, tuple[str, ...]] = {}
    for name in (args.kinds or "held-out,tuned").split(","):
        name = name.strip()
        if name in groups:
            wanted[name] = groups[name]
        elif name in KINDS:
            wanted.setdefault("chosen", ())
            wanted["chosen"] += (name,)
        else:
            p.error(f"--kinds: no group or kind {name!r} (groups: {', '.join(groups)})")
    started = time.perf_counter()
    heads = {}
    for offset, (group, kinds) in enumerate(wanted.items()):
        for h in sample_heads(args.n, args.seed + 1000 * offset, kinds):
            heads[f"{group}-{h.id}"] = (group, h)
    made = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="diagnosis_bench_") as tmp:
        root = args.keep or Path(tmp)
        folder, results = root / "heads", root / "results"
        results.mkdir(parents=True, exist_ok=True)
        for hid, (_, h) in heads.items():
            (folder / hid).mkdir(parents=True, exist_ok=True)
            (folder / hid / h.filename).write_text(h.source, encoding="utf-8")
            truth = [asdict(m) for m in h.mistakes]
            (folder / hid / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
        if args.rescore is not None:
            results, wall = args.rescore / "results", 0.0
            for hid, (_, h) in heads.items():
                stored = args.rescore / "heads" / hid / h.filename
                if not stored.is_file() or stored.read_text(encoding="utf-8") != h.source:
                    p.error(f"{stored} is not the head --n {args.n} --seed {args.seed} generates now")
        else:
            wall = run_child(folder, results, args.jobs)
        records = {hid: json.loads((results / f"{hid}.json").read_text(encoding="utf-8")) for hid in heads}
    rows = {hid: judge(h, records[hid]) for hid, (_, h) in heads.items()}
    by_group = {g: [rows[hid] for hid, (gg, _) in heads.items() if gg == g] for g in wanted}
    sums = {g: strict_summary(r) for g, r in by_group.items()}
    sums["all"] = strict_summary(rows.values())
    held = set(groups["held-out"])
    print(
        f"diagnosis bench (kinds): {len(rows)} heads, seed {args.seed}, {args.jobs} jobs, "
        f"made and proven in {made:.0f} s, graded in {wall:.0f} s"
    )
    print("(strict: the right id, or a departure with the truth's fields, at a line to edit, one cause per mistake)\n")
    print(_group_rows(sums))
    for g, r in by_group.items():
        print(f"\nper kind, {g} (* held out):\n" + _kind_rows(r, held))
    failing = [(hid, r) for hid, r in rows.items() if r.exceptions]
    for hid, r in failing[:20]:
        print(f"exception in the grader on {hid} ({', '.join(r.kinds)}): {r.exceptions[0]}")
    if args.json:
        payload = {"seed": args.seed, "n": args.n, "jobs": args.jobs, "wall_s": round(wall, 1), "summary": sums}
        payload["per_kind"] = {g: per_kind(r) for g, r in by_group.items()}
        payload["heads"] = [asdict(r) for r in rows.values()]
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--bench", choices=("kinds", "styles"), default="kinds", help="issue 52's kinds or issue 35's styles"
    )
    p.add_argument("--kinds", help="kinds: groups (held-out, tuned) or kinds, comma-separated (default both groups)")
    p.add_argument("--n", type=int, default=100, help="heads to generate (per group with --bench kinds; default 100)")
    p.add_argument("--seed", type=int, default=None, help="default 52 (kinds), 35 (styles)")
    p.add_argument("--styles", help=f"comma-separated styles (default all: {', '.join(STYLES)})")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="heads graded at once")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every head's record and the summaries here")
    p.add_argument("--via", choices=("inprocess", "batch"), default="inprocess")
    p.add_argument("--keep", type=Path, metavar="DIR", help="write the heads and results here (kept)")
    p.add_argument(
        "--rescore",
        type=Path,
        metavar="DIR",
        help="grade nothing: judge the results a --keep DIR run left (same --n, --seed)",
    )
    p.add_argument("--grade-folder", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--results", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.grade_folder is not None:
        grade_folder(args.grade_folder, args.results, args.jobs)
        return 0
    if args.n < 1 or args.jobs < 1:
        p.error(f"--n and --jobs must be at least 1, got --n {args.n} --jobs {args.jobs}")
    if args.bench == "kinds":
        args.seed = 52 if args.seed is None else args.seed
        return kinds_main(args, p)
    args.seed = 35 if args.seed is None else args.seed
    styles = tuple(s.strip() for s in args.styles.split(",")) if args.styles else None
    unknown = [s for s in styles or () if s not in STYLES]
    if unknown:
        p.error(f"--styles: no style {unknown[0]!r} (known: {', '.join(STYLES)})")
    if args.n < 1 or args.jobs < 1:
        p.error(f"--n and --jobs must be at least 1, got --n {args.n} --jobs {args.jobs}")
    heads = {h.id: h for h in sample(args.n, args.seed, styles)}
    with tempfile.TemporaryDirectory(prefix="diagnosis_bench_") as tmp:
        root = args.keep or Path(tmp)
        folder, results = root / "heads", root / "results"
        results.mkdir(parents=True, exist_ok=True)
        for h in heads.values():
            (folder / h.id).mkdir(parents=True, exist_ok=True)
            (folder / h.id / MODULE).write_text(h.source, encoding="utf-8")
            (folder / h.id / "truth.json").write_text(json.dumps([asdict(t) for t in h.truths]), encoding="utf-8")
        if args.rescore is not None:
            results, wall = args.rescore / "results", 0.0
            for h in heads.values():
                stored = args.rescore / "heads" / h.id / MODULE
                if not stored.is_file() or stored.read_text(encoding="utf-8") != h.source:
                    p.error(f"{stored} is not the head --n {args.n} --seed {args.seed} generates now")
        else:
            wall = (run_batch if args.via == "batch" else run_child)(folder, results, args.jobs)
        records = {hid: json.loads((results / f"{hid}.json").read_text(encoding="utf-8")) for hid in heads}
    rows = [score(heads[hid], records[hid]) for hid in sorted(heads)]
    text, sums = table(rows)
    print(f"diagnosis bench: {len(rows)} heads, seed {args.seed}, via {args.via}, {args.jobs} jobs, wall {wall:.0f} s")
    print("(* held-out styles; found/exact/lines count ground-truth mistakes)\n")
    print(text)
    print("\nper mutation:\n" + by_mutation(rows, heads))
    failing = [r for r in rows if r.exceptions]
    for r in failing[:10]:
        print(f"exception in the grader on {r.id}: {r.exceptions[0]}")
    if args.json:
        payload = {"seed": args.seed, "n": args.n, "via": args.via, "wall_s": round(wall, 1), "summary": sums}
        payload["heads"] = [asdict(r) for r in rows]
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
