"""Where a cold `grade` spends its wall time: the marks of every process of one grade, and their CPU over time.

    python benchmarks/grade_timeline.py [--head HEAD] [--with-tests] [--only ID] [--runs 3] [--windows]

One cold ``grade HEAD --json r.json`` (the head copied alone into a fresh folder, unless ``--with-tests``, which
copies the test file beside the reference too), run ``--runs`` times; the run with the median wall time is printed:

1. its marks (``STEP4_TIMELINE``, grader/_timeline.py): the grader's phases (arguments read, worker started,
   torch imported, each check's start and end, diagnosis, pictures, files written, exit), the zygote's (or on
   Windows each standby's: started, torch imported, warmed up, lent out) and each worker's import of the head,
   in seconds from the moment the command was started;
2. the CPU each process used in every 100 ms (psutil, sampled every 10 ms): ``#`` a whole core busy, ``+``
   more than half, ``-`` some, ``.`` idle, so what waits for what on two cores can be seen;
3. ``python -X importtime``'s twelve largest imports of the grader process (cumulative), and the plain property
   script's and ``python -c "import torch"``'s wall times on the same machine for scale.

This checkout's bytecode is compiled first, as ``pip install`` compiles an installed grader's.
``--windows`` runs the Windows Python of ../shared/windows under Wine (``wrun``; set it up with ``setup.sh
--project-only .``) instead of this machine's.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("STEP4_WINDOWS_TOOLS", REPO.parent / "shared" / "windows"))
BUCKET_S = 0.1
SAMPLE_S = 0.01


@dataclass
class Run:
    wall: float
    marks: list[tuple[float, str, str]]  # (seconds from the start, process, event)
    cpu: dict[str, list[float]]  # process label -> CPU seconds in each bucket
    born: dict[str, float] = field(default_factory=dict)


def _label(proc: psutil.Process, root: int) -> str:
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return f"? {proc.pid}"
    if proc.pid == root:
        return "grade"
    try:
        parent = " ".join(proc.parent().cmdline()) if proc.parent() else ""
    except psutil.Error:
        parent = ""
    if "--zygote" in parent:  # forked by the zygote: a worker (its command line is the zygote's)
        return f"worker {proc.pid}"
    for flag, name in (("--zygote", "zygote"), ("--standby", "standby"), ("--worker", "worker")):
        if flag in cmd:
            return f"{name} {proc.pid}"
    if "_zygote.py" in cmd:  # a fork of the zygote: the head's worker
        return f"worker {proc.pid}"
    if "grade" in cmd and "python" in cmd.lower():
        return "grade"
    return f"{(proc.name() or '?')[:12]} {proc.pid}"


class Sampler:
    """Every process of the tree under ``root`` (and, under Wine, every Windows Python): CPU per bucket."""

    def __init__(self, root: int, t0: float, windows: bool) -> None:
        self.root, self.t0, self.windows = root, t0, windows
        self.seen: dict[int, tuple[str, float]] = {}  # pid -> (label, CPU seconds at the last sample)
        self.cpu: dict[str, list[float]] = {}
        self.born: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _procs(self) -> list[psutil.Process]:
        try:
            top = psutil.Process(self.root)
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            procs = []
        if self.windows:
            pids = {p.pid for p in procs}
            for p in psutil.process_iter(["cmdline", "create_time"]):
                cmd = " ".join(p.info["cmdline"] or [])
                if p.pid not in pids and "python.exe" in cmd and (p.info["create_time"] or 0) >= self.t0 - 1:
                    procs.append(p)
        return procs

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            bucket = int((now - self.t0) / BUCKET_S)
            for p in self._procs():
                try:
                    times = p.cpu_times()
                    used = times.user + times.system
                    label, before = self.seen.get(p.pid) or (_label(p, self.root), 0.0)
                except psutil.Error:
                    continue
                if p.pid not in self.seen:
                    self.born.setdefault(label, max(0.0, p.create_time() - self.t0))
                self.seen[p.pid] = (label, used)
                row = self.cpu.setdefault(label, [])
                row.extend([0.0] * (bucket + 1 - len(row)))
                row[bucket] += max(0.0, used - before)
            time.sleep(SAMPLE_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def one_run(cmd: list[str], work: Path, windows: bool) -> Run:
    marks_file = work / "timeline.txt"
    marks_file.unlink(missing_ok=True)
    env = {**os.environ, "STEP4_TIMELINE": str(marks_file)}
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = Sampler(proc.pid, t0, windows)
    _, err = proc.communicate()
    wall = time.time() - t0
    sampler.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}:\n{err.decode(errors='replace')[-3000:]}")
    marks = []
    for line in marks_file.read_text().splitlines() if marks_file.exists() else []:
        stamp, pid, process, event = line.split(" ", 3)
        marks.append((float(stamp) - t0, f"{process} {pid}" if process != "grader" else "grade", event))
    return Run(wall, sorted(marks), sampler.cpu, sampler.born)


def _bar(row: list[float], width: int) -> str:
    chars = []
    for used in row[:width] + [0.0] * (width - len(row)):
        share = used / BUCKET_S
        chars.append("#" if share > 0.85 else "+" if share > 0.5 else "-" if share > 0.05 else ".")
    return "".join(chars)


def show(run: Run) -> None:
    print(f"wall {run.wall:.2f} s\n\n  t (s)  process          event")
    for t, process, event in run.marks:
        print(f"{t:7.3f}  {process:16} {event}")
    width = int(run.wall / BUCKET_S) + 1
    print(f"\nCPU per {BUCKET_S * 1000:.0f} ms ('#' one core busy, '+' over half, '-' some, '.' idle; total CPU s)")
    ruler = "".join(str(i // 10 % 10) if i % 10 == 0 else " " for i in range(width))
    print(f"{'seconds':16} {ruler}")
    for label, row in sorted(run.cpu.items(), key=lambda kv: run.born.get(kv[0], 0.0)):
        if sum(row) > 0.005:
            print(f"{label:16} {_bar(row, width)} {sum(row):.2f}")


def importtime(cmd: list[str], work: Path) -> None:
    """The twelve largest cumulative imports of the grader process itself."""
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line[len("import time:") :].split("|")
            rows.append((int(cumulative), name.rstrip()))
    print("\nlargest imports of the grader process (cumulative ms, -X importtime)")
    for us, name in sorted(rows, reverse=True)[:12]:
        print(f"{us / 1000:8.0f}  {name}")


def wall_of(cmd: list[str], work: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--head", type=Path, default=REPO / "reference" / "attention_head.py")
    ap.add_argument("--with-tests", action="store_true", help="the reference's test file beside the head")
    ap.add_argument("--only", help="grade --only this check")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--windows", action="store_true", help="the Windows Python under Wine (../shared/windows)")
    args = ap.parse_args()
    compileall.compile_dir(REPO / "grader", quiet=1)  # as `pip install` leaves it, whatever PYTHONDONTWRITEBYTECODE
    with tempfile.TemporaryDirectory(prefix="step4-timeline-") as tmp:
        work = Path(tmp)
        shutil.copy(args.head, work / "attention_head.py")
        if args.with_tests:
            shutil.copy(REPO / "reference" / "test_attention_head.py", work)
        python = [str(TOOLS / "wrun"), "python.exe"] if args.windows else [sys.executable]
        grade = [*python, "-m", "grader", "attention_head.py", "--json", "r.json"]
        if args.only:
            grade[-2:] = ["--only", args.only]
        runs = sorted((one_run(grade, work, args.windows) for _ in range(args.runs)), key=lambda r: r.wall)
        show(runs[len(runs) // 2])
        if not args.windows:
            importtime([python[0], "-X", "importtime", *grade[1:]], work)
        plain = [*python, str(REPO / "benchmarks" / "plain_properties.py"), "attention_head.py"]
        scale = {
            "plain property script": statistics.median(wall_of(plain, work) for _ in range(args.runs)),
            'python -c "import torch"': statistics.median(
                wall_of([*python, "-c", "import torch"], work) for _ in range(args.runs)
            ),  # noqa: E501
        }
        print(f"\nfor scale (medians of {args.runs}): " + "; ".join(f"{k} {v:.2f} s" for k, v in scale.items()))
        print(f"runs of the grade (wall s): {', '.join(f'{r.wall:.2f}' for r in runs)}")


if __name__ == "__main__":
    main()
