"""Cold `grade` of a correct head versus a plain one-process script doing the same checks.

    python benchmarks/grade_bench.py [--repeat 3]

The baseline imports torch and the head in one process and runs every check function on it directly
(no worker, no isolation, no report): what a hand-written property script costs. The grader's goal is
a cold `grade` (fresh interpreter, zygote started, every check through the sandboxed worker) within
1.5x of it. Writing the report (visualisations and HTML) is timed separately.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The baseline: the same check functions, but the "sandbox" calls the head in this very process.
BASELINE = r"""
import importlib.util, sys, time
sys.path.insert(0, {repo!r})
import torch
from grader.sandbox import _ops, _wire
from grader.checks import CHECKS, Ctx
from grader.head import Head
from grader.library import load_reference
from grader.rubric import load_rubric

class Reply:
    def __init__(self, status, header, tensors, message=""):
        self.status, self.header, self.tensors, self.message = status, header, tensors, message

class InProcess:
    def __init__(self, path):
        spec = importlib.util.spec_from_file_location("attention_head", path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
    def request(self, op, params, tensors, *, timeout_s=None):
        header, out = _ops.dispatch(self.module, op, params, {{k: v.clone() for k, v in tensors.items()}})
        return Reply("ok", header, out)

rubric = load_rubric()
head = Head(InProcess({head!r}), rubric.entry_points)
ref = load_reference()
source = open({head!r}).read()
for cid, rc in rubric.checks.items():
    if rc.enabled and cid != "student_tests":
        CHECKS[cid].fn(Ctx(head, ref, rubric, rubric.seed, cid, source))
"""


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    head = REPO / "reference" / "attention_head.py"
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "baseline.py"
        script.write_text(BASELINE.format(repo=str(REPO), head=str(head)))
        plain = [timed([sys.executable, str(script)]) for _ in range(args.repeat)]
        cold = [timed([sys.executable, "-m", "grader", str(head), "--quiet"]) for _ in range(args.repeat)]
        report = Path(tmp) / "r.json"
        with_report = [
            timed([sys.executable, "-m", "grader", str(head), "--json", str(report), "--quiet"])
            for _ in range(args.repeat)
        ]
    p, c = statistics.median(plain), statistics.median(cold)
    rows = (
        ("plain one-process property script", plain),
        ("cold `grade` (sandboxed checks)", cold),
        ("cold `grade --json` (+ HTML report)", with_report),
    )
    for name, runs in rows:
        print(f"{name:36s}: {statistics.median(runs):6.2f} s (runs: {', '.join(f'{x:.2f}' for x in runs)})")
    print(f"{'ratio, sandboxed checks / plain':36s}: {c / p:6.2f}x  (goal <= 1.5x)")


if __name__ == "__main__":
    main()
