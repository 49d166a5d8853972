"""``check()`` in a notebook: the first and a later call in one kernel, against the plain property script and a
cold ``grade`` (issue 25).

    python benchmarks/notebook_bench.py [--rounds 5] [--settle 5] [--chaff no_scaling]

Whole processes, as a student meets them. Each round starts a fresh ipykernel kernel (jupyter_client), runs
a cell defining a known bug (reference/chaffs; it imports torch, as the student's own cell does: not timed),
then times the cell ``from grader import check; r = check()`` from its execute request to its reply (the
inline report rendered and sent; everything the student waits for). After ``--settle`` seconds (the
student reads the report and edits: the kernel's warm-up runs meanwhile, as in ``grade --watch``), a cell
redefines the head (the correct one; not timed) and ``r = check()`` is timed again. Between rounds, the
plain property script (benchmarks/plain_properties.py, a fresh process) and a cold
``grade HEAD --html r.html`` (the report with its pictures, as the inline report has them) run once each.

Goals: the second check() at most 0.35x the plain script's median; the first at most 1.3x the cold grade's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from grader.library import known_heads, reference_path  # noqa: E402


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def kernel_spec(root: Path) -> Any:
    """A kernel spec running ipykernel on this interpreter (the default one runs whatever `python` is on PATH)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = root / "step4" / "kernel.json"
    spec.parent.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.write_text(json.dumps({"argv": argv, "display_name": "step4", "language": "python"}), encoding="utf-8")
    return KernelSpecManager(kernel_dirs=[str(root)])


def run_cell(kc: Any, code: str) -> float:
    """Seconds from the execute request to its reply; the cell must succeed."""
    t0 = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=600, output_hook=lambda msg: None)
    wall = time.perf_counter() - t0
    if reply["content"]["status"] != "ok":
        raise SystemExit(f"cell failed: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")
    return wall


def one_kernel(specs: Any, cwd: Path, bug: str, fixed: str, settle: float) -> tuple[float, float, float]:
    """(first check(), second check(), the second's score) in one fresh kernel."""
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="step4", kernel_spec_manager=specs)
    km.start_kernel(cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        run_cell(kc, bug)
        first = run_cell(kc, "from grader import check\nr = check()")
        time.sleep(settle)
        run_cell(kc, fixed)
        second = run_cell(kc, "r = check()")
        score: list[str] = []
        kc.execute_interactive("print(r.score)", output_hook=lambda m: score.append(m["content"].get("text", "")))
        return first, second, float("".join(score) or "nan")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--chaff", default="no_scaling")
    args = ap.parse_args()
    bug = {h.id: h for h in known_heads("chaff")}[args.chaff].source()
    fixed = reference_path().read_text(encoding="utf-8")
    plain_cmd = [sys.executable, str(REPO / "benchmarks" / "plain_properties.py"), str(reference_path())]
    firsts: list[float] = []
    seconds: list[float] = []
    plain: list[float] = []
    cold: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        specs = kernel_spec(Path(tmp) / "kernels")
        cold_cmd = [sys.executable, "-m", "grader", str(reference_path()), "--html", str(Path(tmp) / "r.html")]
        for _ in range(args.rounds):
            plain.append(timed(plain_cmd))
            cold.append(timed(cold_cmd))
            first, second, score = one_kernel(specs, Path(tmp), bug, fixed, args.settle)
            firsts.append(first)
            seconds.append(second)
    report(firsts, seconds, plain, cold, score)


def _row(name: str, times: list[float]) -> str:
    return f"| {name} | {statistics.median(times):.3f} s | {min(times):.3f}-{max(times):.3f} s | {len(times)} |"


def report(firsts: list[float], seconds: list[float], plain: list[float], cold: list[float], score: float) -> None:
    print("| measure | median | range | runs |\n|---|---|---|---|")
    print(_row("first check() in a fresh kernel (cell sent -> reply)", firsts))
    print(_row("second check() in that kernel", seconds))
    print(_row("plain property script", plain))
    print(_row("cold grade HEAD --html r.html", cold))
    second, first = statistics.median(seconds), statistics.median(firsts)
    print(f"\nsecond check() / plain script: {second / statistics.median(plain):.2f}x (goal <= 0.35x)")
    print(f"first check() / cold grade:    {first / statistics.median(cold):.2f}x (goal <= 1.3x)")
    print(f"score of the last second check() (the correct head): {score:g}")


if __name__ == "__main__":
    main()
