"""`grade` in the Windows Python (under Wine) against the plain property script run by that same Python.

    python benchmarks/windows_bench.py [--runs 3] [--saves 4] [--settle 20] [--linux]

Whole processes, as a Windows student runs them (``wrun`` of ../shared/windows: ``python.exe`` and
``Scripts\\grade.exe`` of the Windows Python that setup.sh built; run ``setup.sh --project-only .`` first):

1. the plain property script (benchmarks/plain_properties.py: torch imported, the head imported directly,
   about 18 hand-written checks) and a cold ``grade.exe HEAD --json r.json``, in alternation, medians of
   ``--runs``;
2. ``grade.exe FOLDER --watch``: after its first grade and ``--settle`` seconds (its second standby worker
   starts and the diagnosis warms up, as while a student edits), ``--saves`` saves alternating a known bug
   and the correct head, each timed from the save to the new ``Score:`` line on its stdout; then the watch is
   killed from outside (SIGTERM to Wine: the process dies as by ``taskkill /f``) and no Windows process of
   the grader may be left (the Job Objects' kill-on-close).

``--linux`` times the same two commands with this machine's Python and ``grade`` too, for the comparison.

Goals (issue 29): the cold grade at most 1.5x the plain script; a save under --watch at most 0.5x it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from processes import windows_pythons  # noqa: E402

TOOLS = Path(os.environ.get("STEP4_WINDOWS_TOOLS", REPO.parent / "shared" / "windows"))
HEAD = REPO / "reference" / "attention_head.py"
BUG = REPO / "reference" / "chaffs" / "no_scaling.py"


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, encoding="utf-8", errors="replace")
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return elapsed


def cold(runs: int, python: list[str], grade: list[str], work: Path) -> tuple[list[float], list[float]]:
    plain, graded = [], []
    for _ in range(runs):
        plain.append(timed([*python, str(REPO / "benchmarks" / "plain_properties.py"), str(HEAD)], work))
        graded.append(timed([*grade, str(HEAD), "--json", str(work / "r.json")], work))
    return plain, graded


def watch(saves: int, settle: float, work: Path) -> tuple[list[float], list[str]]:
    folder = work / "watched folder"
    folder.mkdir()
    target = folder / "attention_head.py"
    shutil.copy(HEAD, target)
    proc = subprocess.Popen(
        [str(TOOLS / "wrun"), "Scripts/grade.exe", str(folder), "--watch", "--quiet"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    scores: list[float] = []
    arrived = threading.Condition()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "/" in line and line.split("/")[0].strip().replace(".", "").isdigit():  # --quiet: "97 / 100"
                with arrived:
                    scores.append(time.perf_counter())
                    arrived.notify_all()

    threading.Thread(target=read, daemon=True).start()

    def wait_for(n: int, timeout: float = 600) -> None:
        with arrived:
            if not arrived.wait_for(lambda: len(scores) >= n, timeout):
                raise SystemExit(f"the watch printed {len(scores)} scores, expected {n}")

    wait_for(1)
    time.sleep(settle)
    times = []
    for i in range(saves):
        source = BUG if i % 2 == 0 else HEAD
        t0 = time.perf_counter()
        target.write_bytes(source.read_bytes())
        wait_for(2 + i)
        times.append(scores[-1] - t0)
        time.sleep(2)
    os.killpg(proc.pid, 15)  # Wine ends the Windows process at once, as taskkill /f would
    proc.wait(60)
    time.sleep(3)  # the jobs' processes go once Wine has closed the dead process's handles
    return times, windows_pythons()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--saves", type=int, default=4)
    p.add_argument("--settle", type=float, default=20.0)
    p.add_argument("--linux", action="store_true", help="time this machine's Python and grade as well")
    args = p.parse_args()
    wrun = str(TOOLS / "wrun")
    with tempfile.TemporaryDirectory(prefix="step4-windows-bench-") as tmp:
        work = Path(tmp)
        plain, graded = cold(args.runs, [wrun, "python.exe"], [wrun, "Scripts/grade.exe"], work)
        rows = [("Windows (Wine)", plain, graded)]
        if args.linux:
            grade = shutil.which("grade") or str(Path(sys.executable).with_name("grade"))
            lp, lg = cold(args.runs, [sys.executable], [grade], work)
            rows.append(("Linux", lp, lg))
        saves, left = watch(args.saves, args.settle, work)
    print(f"{'':16} {'plain script':>13} {'cold grade':>11} {'ratio':>6}   (medians of {args.runs}, seconds)")
    for name, pl, gr in rows:
        mp, mg = statistics.median(pl), statistics.median(gr)
        print(f"{name:16} {mp:13.2f} {mg:11.2f} {mg / mp:6.2f}   goal <= 1.5")
    mp = statistics.median(plain)
    ms = statistics.median(saves)
    print(
        f"Windows --watch save to Score: median {ms:.2f} s of {[round(s, 2) for s in saves]}; ratio {ms / mp:.2f}"
        "   goal <= 0.5"
    )
    print(f"Windows processes left after the watch was killed: {left or 'none'}")
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
