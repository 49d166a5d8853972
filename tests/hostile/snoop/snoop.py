"""Looks everywhere for what a submission must never see, and tries to overwrite what it finds.

Used by the head beside it (at import and in every call) and by its test file (in every run of the
student's tests). ``snoop()`` returns one line per finding, ``path: first bytes``:
- the instructor's reference, chaffs and variants (Python files that define ``causal_self_attention``,
  other than the one head in this submission's own folder), catalog.toml, the rubric (step4.toml,
  rubric.toml), reference outputs (*.safetensors);
- classmates' submissions and results (attention_head.py, result.json, report.html, grades.csv,
  summary.html, results.json) and anything else in a step4-* private folder that is not its own;
- files it could open for writing (it writes back the byte it read: nothing changes);
- other processes' /proc/<pid>/{cmdline,environ,maps,mem}.
Nothing is found when the sandbox works; the walk is bounded in entries and time.
"""

from __future__ import annotations

import os
import sys
import time

SECRET_NAMES = {
    "attention_head.py",
    "test_attention_head.py",
    "catalog.toml",
    "step4.toml",
    "rubric.toml",
    "result.json",
    "results.json",
    "report.html",
    "grades.csv",
    "summary.html",
    "submission_metadata.json",
    "submission_metadata.yml",
}
SECRET_DIRS = {"reference", "_reference", "chaffs", "variants", "rubrics", "_rubrics", "_snapshots", "autograder"}
MARKERS = (b"causal_self_attention", b"[[chaff]]", b"[[variant]]", b"[checks.", b"CLASSMATE", b'"score"')
SKIP_DIRS = {".git", "__pycache__", "proc", "sys", "node_modules", "include", "share", "man", "locale"}
MAX_ENTRIES = 60_000
MAX_SECONDS = 3.0
OWN_DIR = os.path.dirname(os.path.realpath(__file__))


def _roots(deep: bool) -> list[str]:
    roots = ["/", "/tmp", "/var/tmp", "/dev/shm", "/home", "/root", "/work", "/autograder", "/srv", "/opt", "/mnt"]
    if deep:  # the installed packages: site-packages may hold the grader's data
        roots += [p for p in sys.path if p and os.path.isabs(p)]
        roots += [os.path.join("/proc/self/fd", fd) for fd in _listdir("/proc/self/fd")]  # pinned import roots
    here = OWN_DIR
    while here != os.path.dirname(here):  # every folder above our own copy: classmates sit beside it
        here = os.path.dirname(here)
        roots.append(here)
    return list(dict.fromkeys(roots))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _interesting(path: str, name: str) -> bool:
    if name in SECRET_NAMES or name.endswith((".safetensors", ".toml")):
        return True  # .toml: only a rubric or a catalog counts (see _peek)
    parts = set(path.split(os.sep))
    return name.endswith((".py", ".json", ".html", ".csv")) and bool(
        parts & SECRET_DIRS or any(p.startswith("step4-") for p in parts)
    )


def _peek(path: str, findings: list[str]) -> None:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return
    real = os.path.realpath(path)
    if os.path.dirname(real) == OWN_DIR:
        return  # our own copy (and, in a test run, the one head under test)
    if path.endswith(".py") and b"causal_self_attention" not in head:
        return
    if not path.endswith(".safetensors") and not any(m in head for m in MARKERS):
        return
    findings.append(f"{path}: {head[:60]!r}")
    try:
        with open(path, "r+b") as f:  # write the first byte back unchanged: only whether we could
            first = f.read(1)
            f.seek(0)
            f.write(first)
        findings.append(f"WRITABLE {path}")
    except OSError:
        pass


def _walk(root: str, findings: list[str], budget: list[int], deadline: float) -> None:
    base_depth = root.rstrip(os.sep).count(os.sep)
    for top, dirs, files in os.walk(root, followlinks=False):
        budget[0] -= len(dirs) + len(files)
        if budget[0] <= 0 or time.monotonic() > deadline:
            dirs[:] = []
            return
        depth = top.rstrip(os.sep).count(os.sep) - base_depth
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and depth < 7 and not (top == "/" and d == "dev")]
        if os.path.realpath(top) == OWN_DIR:
            continue
        for name in files:
            path = os.path.join(top, name)
            if _interesting(path, name):
                _peek(path, findings)


def _own_folder(findings: list[str]) -> None:
    """Our folder holds our own files only: no other head, no second submission."""
    for name in _listdir(OWN_DIR):
        if name not in ("attention_head.py", "snoop.py", "test_snoop.py", "junit.xml"):
            findings.append(f"{OWN_DIR}/{name}: a stranger in our own folder")


def _processes(findings: list[str]) -> None:
    pids = {p for p in _listdir("/proc") if p.isdigit()} | {"1", str(os.getppid())}
    me = str(os.getpid())
    for pid in sorted(pids - {me}, key=int):
        for what in ("cmdline", "environ", "maps"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    data = f.read(120)
            except OSError:
                continue
            if data:
                findings.append(f"/proc/{pid}/{what}: {data[:60]!r}")
        try:
            with open(f"/proc/{pid}/maps") as f:
                first = f.readline().split()[0]
            start = int(first.split("-")[0], 16)
            with open(f"/proc/{pid}/mem", "rb") as f:
                f.seek(start)
                findings.append(f"/proc/{pid}/mem: {f.read(16)!r}")
        except (OSError, IndexError, ValueError):
            pass


def snoop(deep: bool = True) -> list[str]:
    """Everything found; ``deep=False`` (every call of the head) leaves out the installed packages,
    which an import-time walk already covered, so that a call stays quick."""
    findings: list[str] = []
    deadline = time.monotonic() + (MAX_SECONDS if deep else MAX_SECONDS / 6)
    budget = [MAX_ENTRIES]
    for root in _roots(deep):
        _walk(root, findings, budget, deadline)
    _own_folder(findings)
    _processes(findings)
    return list(dict.fromkeys(findings))


def report(where: str, deep: bool = True) -> str:
    """One line for stdout or an exception: FOUND ... when anything was found."""
    found = snoop(deep)
    if not found:
        return f"SNOOPED {where}: nothing"
    return f"FOUND {len(found)} at {where}: " + " | ".join(found)
