"""Cold `grade` against what a user would otherwise run, side by side (issue 11's table).

    python benchmarks/grade_bench.py [--runs 5] [--head HEAD] [--with-tests] [--grade KIT/bin/grade]

Four whole processes, run in alternation (so background load hits them alike), medians of ``--runs``
(peak memory is sampled on two further runs of the full grade, so that sampling does not slow the timed ones):

- the plain property script (benchmarks/plain_properties.py: one process, the head imported directly,
  about 18 hand-written checks on one seeded case each),
- a cold ``grade HEAD --json r.json`` (every check in the sandboxed worker, JSON and the HTML report), the head
  copied alone into a fresh folder, as the plain script tests it (``--with-tests``: the reference's test file
  beside it, which the grade then runs against the instructor's heads, student_tests),
- ``python -c "import torch"``,
- a cold ``grade HEAD --only interface``.

This checkout's bytecode is compiled first, as ``pip install`` compiles an installed grader's (in an editable
checkout under PYTHONDONTWRITEBYTECODE=1, every grade would otherwise compile the grader's modules again, about
0.2 s of CPU that no installed grader spends).

``--grade`` times another installation's ``grade`` command instead of this checkout's (``python -m grader``
from the repository root would import the checkout): the student kit installed into a virtual environment,
say.

Goals (issue 37): the full grade within 1.2x of the plain script, ``--only`` within 1.15x of importing torch, and
peak proportional memory (PSS) of the whole grade process tree at or under 768 MiB.
"""

from __future__ import annotations

import argparse
import compileall
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from batch_bench import TreeSampler  # the same sampler as the batch benchmark (run from this folder)

REPO = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def run(cmd: list[str], *, sample: bool = False) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the process and the descendants it reaped) and peak tree PSS (bytes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sampler = TreeSampler(proc.pid, period=0.05) if sample else None
    code = proc.wait()
    wall = time.perf_counter() - t0
    if sampler is not None:
        sampler.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} exited with {code}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, sampler.peak_pss if sampler else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--head", type=Path, default=REPO / "reference" / "attention_head.py")
    ap.add_argument("--with-tests", action="store_true", help="the reference's test file beside the head")
    ap.add_argument("--grade", type=Path, help="a `grade` command to time (default: this checkout's grader)")
    args = ap.parse_args()
    grade = [str(args.grade)] if args.grade else [sys.executable, "-m", "grader"]
    if not args.grade:  # this checkout as `pip install` leaves it: bytecode compiled, whatever PYTHONDONTWRITEBYTECODE
        compileall.compile_dir(REPO / "grader", quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        head = str(Path(tmp) / "attention_head.py")
        shutil.copy(args.head, head)
        if args.with_tests:
            shutil.copy(REPO / "reference" / "test_attention_head.py", tmp)
        commands = {
            "plain property script": [sys.executable, str(REPO / "benchmarks" / "plain_properties.py"), head],
            "grade HEAD --json r.json (+ HTML)": [*grade, head, "--json", str(Path(tmp) / "r.json")],
            'python -c "import torch"': [sys.executable, "-c", "import torch"],
            "grade HEAD --only interface": [*grade, head, "--only", "interface"],
        }
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                results[name].append(run(cmd))
        # Memory on separate runs: reading every process's smaps 20 times a second slows what it watches.
        peak = max(run(commands[name], sample=True)[2] for name in list(commands)[1:2] for _ in range(2))
    med = {
        name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for name, rs in results.items()
    }  # noqa: E501
    names = list(commands)
    base = {names[1]: names[0], names[3]: names[2]}
    print("| command | wall | CPU | runs (wall) |\n|---|---|---|---|")
    for name in names:
        wall, cpu = med[name]
        ratio = f" ({wall / med[base[name]][0]:.2f}x)" if name in base else ""
        runs = ", ".join(f"{r[0]:.2f}" for r in results[name])
        print(f"| {name} | {wall:.2f} s{ratio} | {cpu:.2f} s | {runs} |")
    print(f"\nfull grade / plain script: {med[names[1]][0] / med[names[0]][0]:.2f}x (goal <= 1.2x)")
    print(f"--only / import torch:     {med[names[3]][0] / med[names[2]][0]:.2f}x (goal <= 1.15x)")
    print(f"peak PSS of the full grade's process tree: {peak / MIB:.0f} MiB (goal <= 768 MiB)")


if __name__ == "__main__":
    main()
