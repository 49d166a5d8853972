"""Batch throughput and memory: a cold single `grade` against `grade batch --jobs 2`, and what a class takes.

    python benchmarks/batch_bench.py [--correct 50] [--jobs 2] [--cold-runs 3] [--keep DIR]
    python benchmarks/batch_bench.py --scaling [--correct 24]    # the README's table for 300 and 1,000 students

``--scaling`` grades one mixed class (correct heads, known bugs, hostile ones) with ``--jobs 1`` and then
``--jobs 2``, each in a fresh process, and prints the seconds per submission at each and the parallel efficiency
of the second (E2 = t1 / (2 t2)). The table it prints for 300 and 1,000 submissions on 2, 8 and 32 cores is
derived, not measured: n t1 / (c E2), that is the efficiency measured at 2 jobs assumed at c jobs (each job is a
warm worker of its own, so a batch scales with cores until memory or disk bind; it cannot scale better than
that). Only the 2-core row for the class measured is a measurement.

Builds a class of submissions (correct variants of the reference with cosmetic differences, a few
known bugs, a few hostile ones), then measures, each in a fresh process as a user would run it:

1. one cold ``grade reference.py`` (interpreter start, torch import, zygote start, every check);
2. ``grade batch --jobs N`` on the correct submissions only: amortised seconds per correct submission,
   and its ratio to the cold grade (the goal is at most 1/3);
3. ``grade batch --jobs N`` on the whole mixed class, hostile submissions included;
4. ``grade gradescope`` as ``run_autograder`` starts it, on a correct head and on a memory bomb.

Memory is the peak over the whole process tree (grader, zygotes, workers), sampled every 0.1 s: the sum
of RSS (counts pages shared between the zygote and its forks once per process, so it overstates) and
the sum of PSS (shares them out; what a container's memory limit sees). Gradescope's default is 768 MB.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.library import known_heads, reference_path  # noqa: E402

CHAFFS = ("no_mask", "no_scaling", "softmax_wrong_axis", "mask_leaks_by_one")
HOSTILE = {
    # module-level code that never finishes: the import timeout stops it, once
    "hostile_import_hang": "while True:\n    pass\n",
    # exits the worker from inside the head on every call
    "hostile_exit": ("import os\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    os._exit(0)\n"),
    # allocates without bound on every call: the memory watchdog / RLIMIT_DATA stop it
    "hostile_memory": (
        "import torch\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n"
        "    hog = []\n    while True:\n        hog.append(torch.ones(64 << 20, dtype=torch.uint8))\n"
    ),
    # floods stdout and spawns a daemon that outlives the call
    "hostile_flood_daemon": (
        "import os, sys, time\n\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(3600)\n"
        "for _ in range(20000):\n    print('All tests passed! ' * 10)\n"
    ),
}
MB = 1 << 20


def build_class(root: Path, n_correct: int, *, mixed: bool) -> dict[str, int]:
    """Write the submissions; returns how many of each kind."""
    root.mkdir(parents=True)
    ref = reference_path().read_text(encoding="utf-8")
    variants = [ref] + [h.source() for h in known_heads("variant")]
    for k in range(n_correct):
        # Distinct bytes per student (a comment), so nothing can be shared or cached by content.
        (root / f"student{k:03d}.py").write_text(f"# student {k}\n" + variants[k % len(variants)], encoding="utf-8")
    counts = {"correct": n_correct}
    if mixed:
        chaffs = {h.id: h for h in known_heads("chaff")}
        for cid in CHAFFS:
            (root / f"buggy_{cid}.py").write_text(chaffs[cid].source(), encoding="utf-8")
        for name, text in HOSTILE.items():
            (root / f"{name}.py").write_text(ref + "\n\n" + text, encoding="utf-8")
        counts |= {"buggy": len(CHAFFS), "hostile": len(HOSTILE)}
    return counts


class TreeSampler:
    """Peak RSS and PSS summed over a process and all its descendants."""

    def __init__(self, pid: int, period: float = 0.1) -> None:
        self.root = psutil.Process(pid)
        self.period = period
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root] + self.root.children(recursive=True)
            except psutil.Error:
                procs = []
            rss = pss = 0
            for p in procs:
                try:
                    info = p.memory_full_info()
                except psutil.Error:
                    continue
                rss += info.rss
                pss += getattr(info, "pss", info.rss)
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss)
            self.peak_procs = max(self.peak_procs, len(procs))
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def timed(cmd: list[str], *, cwd: Path = REPO) -> tuple[float, TreeSampler, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = TreeSampler(proc.pid)
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.stop()
    return wall, sampler, subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def batch(dirname: Path, out: Path, jobs: int) -> tuple[float, TreeSampler, dict[str, int]]:
    wall, sampler, done = timed(
        [
            sys.executable,
            "-m",
            "grader",
            "batch",
            str(dirname),
            "--out",
            str(out),
            "--jobs",
            str(jobs),
            "--quiet",
        ]
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"grade batch failed ({done.returncode}):\n{done.stdout}")
    rows = csv.DictReader(io.StringIO((out / "grades.csv").read_text()))
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return wall, sampler, statuses


def scaling(work: Path, n_correct: int) -> None:
    """One mixed class graded with --jobs 1 then --jobs 2 (fresh processes, fresh outputs); the derived table."""
    mixed = work / "scaling"
    counts = build_class(mixed, n_correct, mixed=True)
    n = sum(counts.values())
    per: dict[int, float] = {}
    for jobs in (1, 2):
        wall, s, statuses = batch(mixed, work / f"out-scaling-{jobs}", jobs)
        per[jobs] = wall / n
        print(f"--jobs {jobs}: {n} submissions {counts} in {wall:.1f} s, {per[jobs]:.2f} s each; {statuses}; {mem(s)}")
    efficiency = per[1] / (2 * per[2])
    print(f"parallel efficiency at 2 jobs: E2 = t1 / (2 t2) = {efficiency:.2f}")
    print("derived (n t1 / (c E2); measured only for c = 2 at this class's size):")
    print("| submissions | 2 cores (--jobs 2) | 8 cores (--jobs 8) | 32 cores (--jobs 32) |")
    print("|---|---|---|---|")
    for size in (300, 1000):
        cells = [n_minutes(size * per[1] / (c * efficiency)) for c in (2, 8, 32)]
        print(f"| {size:,} | " + " | ".join(cells) + " |")


def n_minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds / 60:.1f} min"


def mem(s: TreeSampler) -> str:
    return f"peak tree RSS {s.peak_rss / MB:.0f} MiB, PSS {s.peak_pss / MB:.0f} MiB ({s.peak_procs} processes)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--correct", type=int, default=50, help="correct submissions (default 50)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--cold-runs", type=int, default=3)
    p.add_argument("--no-mixed", action="store_true", help="skip the mixed class with hostile submissions")
    p.add_argument("--keep", type=Path, help="keep the classes and outputs here")
    p.add_argument("--scaling", action="store_true", help="only: --jobs 1 and 2 on one mixed class, and the table")
    args = p.parse_args()
    if args.scaling:
        work = Path(tempfile.mkdtemp(prefix="step4-bench-")) if args.keep is None else args.keep
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}")
        try:
            scaling(work, args.correct)
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
        return 0

    work = Path(tempfile.mkdtemp(prefix="step4-bench-")) if args.keep is None else args.keep
    try:
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}")
        colds = []
        for _ in range(args.cold_runs):
            wall, s, done = timed([sys.executable, "-m", "grader", str(reference_path()), "--quiet"])
            assert done.returncode == 0, done.stdout
            colds.append(wall)
        cold = statistics.median(colds)
        print(
            f"cold single grade: median {cold:.2f} s over {len(colds)} runs "
            f"({', '.join(f'{c:.2f}' for c in colds)}); {mem(s)}"
        )

        correct = work / "correct"
        n = build_class(correct, args.correct, mixed=False)["correct"]
        wall, s, statuses = batch(correct, work / "out-correct", args.jobs)
        per = wall / n
        print(
            f"batch --jobs {args.jobs}, {n} correct submissions: {wall:.1f} s wall, "
            f"{per:.2f} s amortised per "
            f"submission, ratio to cold {per / cold:.3f} (goal <= 0.333); statuses {statuses}; {mem(s)}"
        )
        resume_wall, _, _ = batch(correct, work / "out-correct", args.jobs)
        print(f"rerun (resume, nothing changed): {resume_wall:.1f} s")

        if not args.no_mixed:
            mixed = work / "mixed"
            counts = build_class(mixed, args.correct, mixed=True)
            total = sum(counts.values())
            wall, s, statuses = batch(mixed, work / "out-mixed", args.jobs)
            print(
                f"batch --jobs {args.jobs}, mixed class {counts} = {total}: {wall:.1f} s wall, "
                f"{wall / total:.2f} s per submission; statuses {statuses}; {mem(s)}"
            )
            slow = sorted(
                (json.loads((work / "out-mixed" / d / "result.json").read_text())["duration_s"], d)
                for d in os.listdir(work / "out-mixed")
                if (work / "out-mixed" / d / "result.json").is_file()
            )[-len(HOSTILE) :]
            print("  slowest: " + ", ".join(f"{d} {t:.1f} s" for t, d in reversed(slow)))

        ref = reference_path().read_text(encoding="utf-8")
        for kind, text in (("correct", ref), ("memory bomb", ref + "\n\n" + HOSTILE["hostile_memory"])):
            ag = work / f"autograder-{kind.replace(' ', '-')}"
            (ag / "submission").mkdir(parents=True)
            (ag / "submission" / "attention_head.py").write_text(text, encoding="utf-8")
            cmd = [sys.executable, "-m", "grader", "gradescope", "--submission", str(ag / "submission")]
            cmd += ["--results", str(ag / "results" / "results.json")]
            cmd += ["--metadata", str(ag / "submission_metadata.json")]
            wall, s, done = timed(cmd)
            score = json.loads((ag / "results" / "results.json").read_text())["score"]
            print(f"gradescope run ({kind}): {wall:.1f} s, score {score:g}; {mem(s)} (default limit 768 MB)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
