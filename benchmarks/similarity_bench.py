"""How long the class similarity report takes for a class of 200, and its share of the batch's time.

    python benchmarks/similarity_bench.py [--students 200] [--grade 20] [--jobs 2] [--keep DIR]

The class: every head the repository holds (the realistic heads, the notebooks' heads, the known bugs and the
correct variants as the grader runs them), then, to reach ``--students``, the same heads again as another
student would hand them in (a header comment, the local names renamed). Two rings of copies are planted in it.

1. ``grade batch --jobs N`` on ``--grade`` of the submissions (a sample: grading 200 takes long on two
   cores): amortised seconds per submission, times the class size, is the batch's time for the class.
2. ``grade similarity OUT`` in a fresh process, as an instructor runs it, on all ``--students``: each one's
   result.json is there (the sample's real ones; for the others a graded one copied, so that 200 result
   files are read and parsed). Reported: wall time, the stage's own matching time, and its share of
   batch + similarity.
3. What an instructor would otherwise run: copydetect's own detector with its defaults on the class's .py
   files (it reads no notebook), alone and with the same boilerplate: how many pairs it shows (its display
   threshold, 0.33) and how long it takes.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.library import known_heads  # noqa: E402

NAMES = re.compile(r"\b(scores|weights|att|wei|mask|out|attn|logits|probs|q|k|v|Q|K|V)\b")


def build_class(root: Path, students: int) -> int:
    """Write ``students`` submissions into ``root``; returns how many distinct heads they came from."""
    root.mkdir(parents=True)
    heads: list[tuple[str, str, str]] = []  # (name, suffix, text)
    for f in sorted((REPO / "tests" / "realistic").glob("*.py")):
        heads.append((f.stem, ".py", f.read_text(encoding="utf-8")))
    for nb in sorted((REPO / "tests" / "notebooks").glob("*.ipynb")):
        heads.append((nb.stem, ".ipynb", nb.read_text(encoding="utf-8")))
    for kind in ("chaff", "variant"):
        heads += [(f"{kind}_{h.id}", ".py", h.source()) for h in known_heads(kind)]
    for f in sorted((REPO / "tests" / "similarity").glob("planted_copy_*.py")):
        heads.append((f.stem, ".py", f.read_text(encoding="utf-8")))
    for k in range(students):
        name, suffix, text = heads[k % len(heads)]
        again = k // len(heads)
        if again and suffix == ".py":
            text = f"# student {k}: my own work\n" + NAMES.sub(rf"\1_{again}", text)
        (root / f"s{k:03d}_{name}{suffix}").write_text(text, encoding="utf-8")
    return len(heads)


def baseline(subs: Path, tmp: Path) -> None:
    """copydetect's CopyDetector with its defaults, on the .py files, without and with the boilerplate."""
    from copydetect import CopyDetector

    from grader.similarity import boilerplate_sources

    plate = tmp / "boilerplate"
    plate.mkdir()
    course = boilerplate_sources()
    for k, text in enumerate(course.given + course.solutions):
        (plate / f"course{k}.py").write_text(text, encoding="utf-8")
    files = sorted(subs.glob("*.py"))
    pairs = len(files) * (len(files) - 1) // 2
    for label, extra in (("defaults", {}), ("defaults + boilerplate", {"boilerplate_dirs": [str(plate)]})):
        started = time.perf_counter()
        detector = CopyDetector(test_dirs=[str(subs)], extensions=["py"], silent=True, autoopen=False, **extra)
        detector.run()
        shown = len(detector.get_copied_code_list())
        print(
            f"copydetect {label} ({len(files)} .py files, {pairs} pairs): {shown} pairs over its display threshold "
            f"in {time.perf_counter() - started:.1f} s"
        )


def run(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader", *argv], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=200)
    p.add_argument("--grade", type=int, default=20, help="submissions graded to time the batch")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--keep", type=Path, help="keep the class and its graded folder here")
    p.add_argument("--no-baseline", action="store_true", help="skip copydetect's own detector")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="similarity-bench-"))
    try:
        subs, out, sample = tmp / "class", tmp / "out", tmp / "sample"
        distinct = build_class(subs, args.students)
        sample.mkdir()
        step = max(1, args.students // args.grade)
        for f in sorted(subs.iterdir())[::step][: args.grade]:
            shutil.copy(f, sample / f.name)
        batch_s = run(["batch", str(sample), "--out", str(out), "--jobs", str(args.jobs), "--quiet"])
        per = batch_s / args.grade
        graded = sorted(p for p in out.iterdir() if (p / "result.json").is_file())
        for k, f in enumerate(sorted(subs.iterdir())):
            sid = f.stem if f.is_file() else f.name
            if not (out / sid).exists():
                shutil.copytree(graded[k % len(graded)], out / sid)
        (out / ".batch.json").write_text(json.dumps({"submissions": str(subs)}))
        sim_s = run(["similarity", str(out)])
        rows = list(csv.DictReader((out / "similarity.csv").open(encoding="utf-8")))
        class_batch = per * args.students
        print(f"class: {args.students} submissions from {distinct} distinct heads; {len(rows)} pairs above the floor")
        print(f"grade batch --jobs {args.jobs}: {batch_s:.1f} s for {args.grade} = {per:.2f} s per submission")
        print(f"  -> about {class_batch:.0f} s for the class of {args.students}")
        print(f"grade similarity (fresh process, {args.students} submissions): {sim_s:.1f} s")
        print(f"  share of batch + similarity: {100 * sim_s / (class_batch + sim_s):.1f}%")
        flagged = [r for r in rows if r["flagged"] == "true"]
        ring = ("gpt_walkthrough_head", "planted_copy_1", "planted_copy_2")  # one head and its two planted copies

        def head(sid: str) -> str:
            name = sid.split("_", 1)[1]
            return ring[0] if name in ring else name

        others = [r for r in flagged if head(r["a"]) != head(r["b"])]
        print(f"flagged pairs: {len(flagged)}; of two different heads (not a copy): {len(others)}")
        for r in flagged[:8] + others:
            print(f"  {r['a']} · {r['b']}: {r['similarity']}  {r['rare_causes']}")
        if not args.no_baseline:
            baseline(subs, tmp)
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
