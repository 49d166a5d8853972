"""Run by the Windows Python (under Wine: tests/test_windows.py) to grade many submissions in one process.

    python.exe tests/windows_driver.py OUT_DIR HEAD_ID ...

Writes, in OUT_DIR (UTF-8, always):
- ``<name>.json``: the GradeResult of each submission: the template's stubs, a correct head, the library
  heads named, and hostile heads made here from the reference (a hang, a memory blow-up, an access violation,
  a daemon the head starts, non-ASCII prints), graded on one pool as a class would be;
- ``crash_alone.json``: the access violation graded again as one ``grade`` is, on a pool of its own that keeps
  no standby behind its worker until one crashes (``spares=False``, grader/sandbox/_winslot.py);
- ``watch.json``: a ``--watch`` session on a copy of a correct head: the first grade, then a save that breaks
  it, and how long that save took to be graded;
- ``processes.json``: every process of this Windows machine still running the worker's entry point or a
  hostile head's marker once the pool is closed (none may be left);
- ``timings.json``: wall time of each grade.

It imports the grader installed in this Python (``setup.sh --project-only`` installs the checkout).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = "step4-windows-tier-daemon"

HOSTILE = {
    # T > 4 hangs: the small-input cases pass, the rest time out, and the grade goes on
    # (with a file of its work folder held open: the private copy is removed once the killed worker lets go)
    "hang": """
import time as _time
_held = open("held open.txt", "w", encoding="utf-8")
_reference_head = causal_self_attention

def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    if X.shape[1] > 4:
        while True:
            _time.sleep(60)
    return _reference_head(X, W_Q, W_K, W_V, causal=causal)
""",
    # every call tries to hold 8 GiB: the Job Object's memory cap (or the watchdog) stops it
    "memory": """
_reference_head = causal_self_attention

def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    big = torch.ones(8 << 30, dtype=torch.uint8)
    return _reference_head(X, W_Q, W_K, W_V, causal=causal) + big[:1].to(X.dtype) * 0
""",
    # an access violation on long inputs: a read outside any foreign call (ctypes turns one inside a foreign
    # call, ctypes.string_at(0), into an OSError on Windows) of a non-canonical address (Wine maps page 0);
    # the same head segfaults on Linux, and both grades must agree
    "crash": """
import ctypes as _ctypes
_reference_head = causal_self_attention

def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    if X.shape[1] >= 12:
        _ctypes.c_char.from_address(0x8000000000000000).value
    return _reference_head(X, W_Q, W_K, W_V, causal=causal)
""",
    # a student's non-ASCII prints, at import and in a call, and a process started that would outlive the
    # grade if anything could (detached, in a new process group)
    "nonascii": f"""
import subprocess as _subprocess, sys as _sys
print("Größe ✓ – ≠ 注意 at import")
_reference_head = causal_self_attention
_started = []

def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    if not _started:
        print("in a call: ∑ softmax → ✓")
        _started.append(_subprocess.Popen([_sys.executable, "-c", "import time; time.sleep(600)", "{MARKER}"],
                                          creationflags=0x00000008 | 0x00000200))
    return _reference_head(X, W_Q, W_K, W_V, causal=causal)
""",
}
# Hostile heads run a few checks only, with short limits: what matters is that each ends as a verdict. The
# memory blow-up runs one: each of its calls costs a worker (Wine enforces no Job Object memory limit, so the
# watchdog kills it, and the next call waits for a fresh standby's torch import).
HOSTILE_CHECKS = ["interface", "reference_match", "causal_mask"]
CHECKS_OF = {"memory": ["interface"], "crash": ["reference_match", "causal_mask"]}


def hostile_rubric(rubric, name: str = ""):  # type: ignore[no-untyped-def]
    """The rubric hostile heads are graded with here (and on Linux, to compare): short limits. The head that starts
    a child keeps the default memory cap: the job counts the child python.exe beside the worker, and under Wine the
    two came to 1080 MiB on its first call (over a 1024 MiB cap, in a CI run of the tier)."""
    limits: dict[str, float] = {"per_call_timeout_s": 4.0, "import_timeout_s": 60.0}
    if name != "nonascii":
        limits["memory_mb"] = 1024
    return rubric.model_copy(update={"limits": rubric.limits.model_copy(update=limits)})


def hostile_head(name: str) -> str:
    """The source of hostile head ``name``: the reference with ``HOSTILE[name]`` appended."""
    return (REPO / "reference" / "attention_head.py").read_text(encoding="utf-8") + "\n" + HOSTILE[name]


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")


def _submissions(work: Path, heads: list[str]) -> dict[str, Path]:
    reference = (REPO / "reference" / "attention_head.py").read_text(encoding="utf-8")
    found: dict[str, Path] = {}
    for name, folder in (("template", REPO / "student_template"), ("correct", None)):
        target = work / name
        target.mkdir()
        if folder is not None:
            shutil.copy(folder / "attention_head.py", target / "attention_head.py")
        else:  # CRLF line ends and a path with a space: as a Windows editor saves it
            (target / "attention_head.py").write_bytes(reference.replace("\n", "\r\n").encode("utf-8"))
        found[name] = target / "attention_head.py"
    for head in heads:
        found[head] = REPO / "tests" / "realistic" / f"{head}.py"
    for name in HOSTILE:
        target = work / name
        target.mkdir()
        (target / "attention_head.py").write_text(hostile_head(name), encoding="utf-8")
        found[name] = target / "attention_head.py"
    return found


def _grade_all(out: Path, work: Path, heads: list[str]) -> None:
    from grader.rubric import load_rubric
    from grader.runner import grade
    from grader.sandbox import WorkerPool

    rubric = load_rubric()
    timings: dict[str, float] = {}
    with WorkerPool(2, uid_base=rubric.limits.sandbox_uid_base) as pool:
        for name, path in _submissions(work, heads).items():
            hostile = name in HOSTILE
            print(f"grading {name}", flush=True)  # where it was, if it never returns
            t0 = time.perf_counter()
            result = grade(
                path,
                hostile_rubric(rubric, name) if hostile else rubric,
                pool=pool,
                tests_pool=pool,
                only=CHECKS_OF.get(name, HOSTILE_CHECKS) if hostile else None,
                visuals=False,
                parallel=False,
            )
            timings[name] = round(time.perf_counter() - t0, 2)
            (out / f"{name}.json").write_text(result.model_dump_json(indent=1), encoding="utf-8")
            print(f"graded {name}: {result.score:g} / {result.max_score:g} in {timings[name]} s", flush=True)
        t0 = time.perf_counter()  # the pool's close: every job terminated, every standby too
    timings["pool_close"] = round(time.perf_counter() - t0, 2)
    _write_json(out / "timings.json", timings)


def _crash_alone(out: Path, work: Path) -> None:
    """The access violation graded with no pool given, as a one-shot ``grade`` is: its first crash waits for a
    cold standby, the next ones find one ready; the verdicts are the pooled grade's."""
    from grader.rubric import load_rubric
    from grader.runner import grade

    folder = work / "crash alone"
    folder.mkdir()
    (folder / "attention_head.py").write_text(hostile_head("crash"), encoding="utf-8")
    short = hostile_rubric(load_rubric(), "crash")
    t0 = time.perf_counter()
    result = grade(folder / "attention_head.py", short, only=CHECKS_OF["crash"], visuals=False, parallel=False)
    took = time.perf_counter() - t0  # the first crash's restart waits for a cold standby's torch import
    print(f"graded crash alone: {result.score:g} / {result.max_score:g} in {took:.2f} s", flush=True)
    (out / "crash_alone.json").write_text(result.model_dump_json(indent=1), encoding="utf-8")


def _watch(out: Path, work: Path) -> None:
    from grader.rubric import load_rubric
    from grader.runner import grade
    from grader.sandbox import WorkerPool
    from grader.watch import Session, warm_up, watch

    folder = work / "watched folder"
    folder.mkdir()
    head = folder / "attention_head.py"
    reference = (REPO / "reference" / "attention_head.py").read_text(encoding="utf-8")
    head.write_text(reference, encoding="utf-8")
    rubric = load_rubric()
    outcomes: list[dict[str, object]] = []
    stop = threading.Event()
    graded = threading.Event()
    with WorkerPool(2, uid_base=rubric.limits.sandbox_uid_base, lazy=True) as pool:
        pool.prestart(1)

        def grade_once():  # type: ignore[no-untyped-def]
            return grade(head, rubric, pool=pool, tests_pool=pool, visuals=False)

        def on_outcome(outcome) -> None:  # type: ignore[no-untyped-def]
            if outcome.result is not None:
                outcomes.append({"score": outcome.result.score, "at": time.perf_counter()})
                graded.set()

        session = Session(grade_once, lambda before, result: None, pool, warm_up=warm_up(pool), on_outcome=on_outcome)
        thread = threading.Thread(target=watch, args=(head, session), kwargs={"stop_event": stop}, daemon=True)
        thread.start()
        ok = graded.wait(300)
        time.sleep(8)  # the warm-up after the first grade (the second slot's standby) settles
        graded.clear()
        saved_at = time.perf_counter()
        head.write_text(reference.replace("/ math.sqrt(d_k)", "").replace("/ d_k**0.5", ""), encoding="utf-8")
        ok = graded.wait(300) and ok
        stop.set()
        thread.join(60)
        stopped = not thread.is_alive()
    _write_json(
        out / "watch.json",
        {
            "ok": ok,
            "stopped": stopped,
            "scores": [o["score"] for o in outcomes],
            "save_s": round(float(outcomes[-1]["at"]) - saved_at, 2) if len(outcomes) > 1 else None,
        },
    )


def _leftovers() -> list[str]:
    import psutil

    left = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.pid == os.getpid():
            continue
        cmd = " ".join(p.info["cmdline"] or [])
        if "_zygote.py" in cmd or MARKER in cmd:
            left.append(f"{p.pid}: {cmd}")
    return left


def _as_grade_exe() -> None:
    """This process as grade.exe's: one torch thread for the grader's own tensors (grader/cli.py), and a crash
    that ends it at once with its code, as a worker's does (Wine otherwise starts winedbg, which may never
    return: the tier then waits out its whole timeout with nothing to show)."""
    import torch

    from grader.sandbox._crashfilter import crash_ends_the_process

    if not crash_ends_the_process():
        print("the driver could not set its crash filter: a crash may start winedbg", file=sys.stderr, flush=True)
    torch.set_num_threads(1)


def main(argv: list[str]) -> int:
    _as_grade_exe()
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    heads = argv[2:]
    with tempfile.TemporaryDirectory(prefix="step4 windows tier ") as tmp:  # a space in every path
        work = Path(tmp)
        _grade_all(out, work, heads)
        _crash_alone(out, work)
        _watch(out, work)
    time.sleep(1.0)  # a job's processes are gone a moment after TerminateJobObject returns
    _write_json(out / "processes.json", _leftovers())
    from grader.sandbox._private import private_root

    _write_json(out / "private.json", sorted(p.name for p in private_root().iterdir() if p.name != ".lock"))
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as grade.exe ends (grader/cli.py: run): no interpreter teardown with torch loaded
