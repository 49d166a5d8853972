"""`grade --watch`: from a save to the new Score line, against the plain property script (issue 18).

    python benchmarks/watch_bench.py [--saves 20] [--cold-runs 5] [--chaffs no_scaling,mask_transposed,...]

Whole processes. One ``grade FOLDER --watch`` runs throughout; each round runs the plain property
script (benchmarks/plain_properties.py, a fresh process) and then saves the next head into the watched
folder, alternating the correct head and three known bugs (reference/chaffs), and times the save to the
moment the new ``Score:`` line arrives on the watch's stdout (diagnosis included; nothing else is timed).
Every ``--cold-every`` rounds a cold ``grade HEAD`` runs too, for the cold figure. Before the first timed
save the watch has graded once and had ``--settle`` seconds to start its second zygote and warm up, as it
would while a student edits.

Goal: the save-to-Score median at most 0.35x the plain script's median; cold grade at most 1.0x.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from grader.library import known_heads, reference_path  # noqa: E402

MIB = 1 << 20


class Watch:
    """The watch process and the times at which its Score lines arrived."""

    def __init__(self, folder: Path) -> None:
        cmd = [sys.executable, "-m", "grader", str(folder), "--watch"]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.scores: list[tuple[float, str]] = []
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("Score:"):
                with self._cv:
                    self.scores.append((time.perf_counter(), line.strip()))
                    self._cv.notify_all()

    def wait_score(self, n: int, timeout: float = 300) -> tuple[float, str]:
        with self._cv:
            if not self._cv.wait_for(lambda: len(self.scores) >= n, timeout):
                raise SystemExit(f"no Score line #{n} within {timeout:g} s")
            return self.scores[n - 1]

    def tree_rss(self) -> tuple[int, int]:
        """Resident memory of the grader process, and of its whole tree (zygotes included)."""
        me = psutil.Process(self.proc.pid)
        procs = [me, *me.children(recursive=True)]
        total = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
        return me.memory_info().rss, total

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(120)
        self._reader.join(10)
        return code


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def heads(chaff_ids: list[str]) -> Iterator[tuple[str, str]]:
    chaffs = {h.id: h for h in known_heads("chaff")}
    sources = [("correct", reference_path().read_text(encoding="utf-8"))]
    sources += [(cid, chaffs[cid].source()) for cid in chaff_ids]
    k = 1  # the watch starts on the correct head: the first save is a bug
    while True:
        yield sources[k % len(sources)]
        k += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--saves", type=int, default=20)
    ap.add_argument("--chaffs", default="no_scaling,mask_transposed,gaussian_kernel_unmasked")
    ap.add_argument("--cold-every", type=int, default=4, help="a cold grade every N rounds (0: none)")
    ap.add_argument("--settle", type=float, default=5.0)
    args = ap.parse_args()
    plain_cmd = [sys.executable, str(REPO / "benchmarks" / "plain_properties.py"), str(reference_path())]
    saves: list[tuple[str, float]] = []
    plain: list[float] = []
    cold: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        cold_cmd = [sys.executable, "-m", "grader", str(reference_path()), "--json", str(Path(tmp) / "cold.json")]
        folder = Path(tmp) / "submission"
        folder.mkdir()
        module = folder / "attention_head.py"
        module.write_text(reference_path().read_text(encoding="utf-8"), encoding="utf-8")
        watch = Watch(folder)
        try:
            watch.wait_score(1)
            time.sleep(args.settle)
            order = heads(args.chaffs.split(","))
            for k in range(args.saves):
                plain.append(timed(plain_cmd))
                if args.cold_every and k % args.cold_every == 0:
                    cold.append(timed(cold_cmd))
                name, source = next(order)
                time.sleep(0.5)  # the student reads, edits: the machine is as idle as it gets
                t0 = time.perf_counter()
                module.write_text(source, encoding="utf-8")
                arrived, _ = watch.wait_score(k + 2)
                saves.append((name, arrived - t0))
            rss, tree = watch.tree_rss()
        finally:
            code = watch.stop()
    report(saves, plain, cold, rss, tree, code)


def report(
    saves: list[tuple[str, float]], plain: list[float], cold: list[float], rss: int, tree: int, code: int
) -> None:
    times = [t for _, t in saves]
    med_save, med_plain = statistics.median(times), statistics.median(plain)
    print("| measure | median | range | runs |\n|---|---|---|---|")
    print(f"| save -> Score (grade --watch) | {med_save:.3f} s | {min(times):.3f}-{max(times):.3f} s | {len(times)} |")
    by_head: dict[str, list[float]] = {}
    for name, t in saves:
        by_head.setdefault(name, []).append(t)
    for name, ts in by_head.items():
        print(f"| ... {name} | {statistics.median(ts):.3f} s | {min(ts):.3f}-{max(ts):.3f} s | {len(ts)} |")
    print(f"| plain property script | {med_plain:.3f} s | {min(plain):.3f}-{max(plain):.3f} s | {len(plain)} |")
    if cold:
        med_cold = statistics.median(cold)
        spread = f"{min(cold):.3f}-{max(cold):.3f} s"
        print(f"| cold grade HEAD --json (+ HTML) | {med_cold:.3f} s | {spread} | {len(cold)} |")
    print(f"\nsave -> Score / plain script: {med_save / med_plain:.2f}x (goal <= 0.35x)")
    if cold:
        print(f"cold grade / plain script:    {med_cold / med_plain:.2f}x (goal <= 1.0x)")
    print(f"watch process RSS after the saves: {rss / MIB:.0f} MiB (its tree, zygotes included: {tree / MIB:.0f} MiB)")
    print(f"Ctrl-C exit status: {code}; load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
