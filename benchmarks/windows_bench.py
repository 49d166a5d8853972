"""`grade` in the Windows Python (under Wine) against the plain property script run by that same Python.

    python benchmarks/windows_bench.py [--runs 7] [--saves 4] [--settle 20] [--linux] [--boot-each-run]

Whole processes, as a Windows student runs them (``wrun`` of ../shared/windows: ``python.exe`` and
``Scripts\\grade.exe`` of the Windows Python that setup.sh built; run ``setup.sh --project-only .`` first):

1. ``--runs`` rounds of three commands, their order rotated from round to round (so that none always
   follows the teardown of another): the plain property script (benchmarks/plain_properties.py: torch
   imported, the head imported directly, about 18 hand-written checks), ``python -c "import torch"`` (the
   floor of anything that uses torch) and a cold ``grade.exe HEAD --json r.json``, on a copy of the reference
   head alone (its folder brings its tests since issue 36: a grade would run them on every known bug).
   Reported: the medians, and the median and range of each round's own ratio (grade / plain script), which
   cancels most of the shared machine's drift between rounds; the load average before and after;
2. ``grade.exe FOLDER --watch``: after its first grade and ``--settle`` seconds (its second standby worker
   starts and the diagnosis warms up, as while a student edits), ``--saves`` saves alternating a known bug
   and the correct head, each timed from the save to the new ``Score:`` line on its stdout; then the watch is
   killed from outside (SIGTERM to Wine: the process dies as by ``taskkill /f``) and no Windows process of
   the grader may be left (the Job Objects' kill-on-close).

Wine's own services (wineserver and the processes it starts: services.exe, explorer.exe, ...) are kept
running for the whole benchmark, as Windows' are on a student's machine; ``--boot-each-run`` lets Wine start
them again for every command instead (each command then pays about a second more, plain script included).

``--linux`` times the same commands with this machine's Python and ``grade`` too, for the comparison.

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


def cold(runs: int, python: list[str], grade: list[str], work: Path) -> dict[str, list[float]]:
    """The three commands on a copy of the reference head alone, as the plain script tests it (the reference's
    folder brings its tests, which a grade runs on every known bug: minutes under Wine)."""
    alone = work / "head alone"
    alone.mkdir(exist_ok=True)
    head = shutil.copy(HEAD, alone / HEAD.name)
    commands = {
        "plain script": [*python, str(REPO / "benchmarks" / "plain_properties.py"), str(head)],
        "import torch": [*python, "-c", "import torch"],
        "cold grade": [*grade, str(head), "--json", str(work / "r.json")],
    }
    names = list(commands)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(runs):
        for name in names[i % 3 :] + names[: i % 3]:
            times[name].append(timed(commands[name], work))
    return times


def report(name: str, times: dict[str, list[float]]) -> float:
    """Print one platform's row; returns the median of the rounds' ratios."""
    ratios = [g / p for g, p in zip(times["cold grade"], times["plain script"], strict=True)]
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"{name:16} {medians['plain script']:13.2f} {medians['import torch']:13.2f} {medians['cold grade']:11.2f}"
        f" {statistics.median(ratios):6.2f} ({min(ratios):.2f}-{max(ratios):.2f})   goal <= 1.5"
    )
    for k, v in times.items():
        print(f"{'':16}   {k}: {[round(t, 2) for t in v]}")
    return statistics.median(ratios)


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
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--saves", type=int, default=4, help="0: no --watch part")
    p.add_argument("--settle", type=float, default=20.0)
    p.add_argument("--linux", action="store_true", help="time this machine's Python and grade as well")
    p.add_argument("--boot-each-run", action="store_true", help="let Wine start its services for every command")
    args = p.parse_args()
    wrun = str(TOOLS / "wrun")
    load_before = os.getloadavg()
    server = None if args.boot_each_run else wine_services()
    try:
        with tempfile.TemporaryDirectory(prefix="step4-windows-bench-") as tmp:
            work = Path(tmp)
            rows = [("Windows (Wine)", cold(args.runs, [wrun, "python.exe"], [wrun, "Scripts/grade.exe"], work))]
            if args.linux:
                grade = shutil.which("grade") or str(Path(sys.executable).with_name("grade"))
                rows.append(("Linux", cold(args.runs, [sys.executable], [grade], work)))
            saves, left = watch(args.saves, args.settle, work) if args.saves else ([], [])
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
    print(
        f"{'':16} {'plain script':>13} {'import torch':>13} {'cold grade':>11} {'ratio':>6}"
        f"   (medians of {args.runs}, seconds; ratio: of each round's own)"
    )
    for name, times in rows:
        report(name, times)
    print(f"load average (1, 5, 15 min) before {load_before}, after {os.getloadavg()}")
    if saves:
        mp = statistics.median(rows[0][1]["plain script"])
        ms = statistics.median(saves)
        print(
            f"Windows --watch save to Score: median {ms:.2f} s of {[round(s, 2) for s in saves]}; ratio {ms / mp:.2f}"
            "   goal <= 0.5"
        )
        print(f"Windows processes left after the watch was killed: {left or 'none'}")
    return 0 if not left else 1


def wine_services() -> subprocess.Popen[bytes]:
    """A wineserver kept running (``-f -p``: in the foreground, persistent), with the services it starts,
    as Windows' own are before a student types a command; stopped at the end. The services are started
    by a first command whose streams are /dev/null: they keep the streams they inherit open."""
    prefix = Path(os.environ.get("STEP4_WINDOWS", Path.home() / ".cache" / "step4-windows")) / "prefix"
    env = {**os.environ, "WINEPREFIX": str(prefix), "WINEDEBUG": "-all"}
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = subprocess.Popen(["/usr/lib/wine/wineserver64", "-f", "-p"], env=env, **quiet)  # type: ignore[call-overload]
    subprocess.run(["/usr/lib/wine/wine64", "cmd", "/c", "exit"], env=env, check=True, timeout=120, **quiet)  # type: ignore[call-overload]
    return server


if __name__ == "__main__":
    sys.exit(main())
