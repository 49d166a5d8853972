"""The timeline of a cold grade (STEP4_TIMELINE, read by benchmarks/grade_timeline.py): every process marks it,
and no student code learns where it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.sandbox import fork_supported

REPO = Path(__file__).resolve().parents[1]

LOOKS = textwrap.dedent(
    """
    import os

    print("seen in os.environ:", "STEP4_TIMELINE" in os.environ)
    try:
        print("seen in /proc/self/environ:", b"STEP4_TIMELINE" in open("/proc/self/environ", "rb").read())
    except OSError as exc:
        print("/proc/self/environ:", type(exc).__name__)
    """
)


@pytest.mark.skipif(not fork_supported(), reason="the zygote's marks: Linux")
def test_every_process_marks_the_timeline_and_the_head_never_sees_it(tmp_path: Path) -> None:
    (tmp_path / "attention_head.py").write_text((REPO / "reference" / "attention_head.py").read_text() + LOOKS)
    marks = tmp_path / "marks.txt"
    env = {**os.environ, "STEP4_TIMELINE": str(marks)}
    cmd = [sys.executable, "-m", "grader", "attention_head.py", "--only", "interface", "--json", "r.json"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line.split(" ", 3) for line in marks.read_text().splitlines()]
    events = [(process, event) for _, _, process, event in lines]
    for expected in [
        ("grader", "worker started"),
        ("zygote", "torch imported"),
        ("grader", "torch imported"),
        ("grader", "check interface begins"),
        ("grader", "submission imported (ok)"),
        ("grader", "files written"),
        ("grader", "worker pool closed"),
    ]:
        assert expected in events, events
    stamps = [float(stamp) for stamp, *_ in lines]
    assert stamps == sorted(stamps) or len({p for _, p, _, _ in lines}) > 1  # one process marks in order
    said = json.loads((tmp_path / "r.json").read_text())["output"]["text"]
    assert "seen in os.environ: False" in said
    assert "seen in /proc/self/environ: True" not in said


def test_without_the_variable_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader import _timeline

    monkeypatch.setattr(_timeline, "_PATH", "")
    _timeline.mark("anything")
    assert _timeline.helper_env() == {}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not fork_supported(), reason="zygotes: Linux")
def test_the_tests_zygote_starts_with_the_checks_not_when_the_tests_begin(tmp_path: Path) -> None:
    """A submission with tests: the slot that runs them starts when the submission is prepared, so its torch
    import overlaps the checks instead of being waited for when student_tests begins (issue 37)."""
    (tmp_path / "attention_head.py").write_bytes((REPO / "reference" / "attention_head.py").read_bytes())
    (tmp_path / "test_attention_head.py").write_bytes((REPO / "reference" / "test_attention_head.py").read_bytes())
    marks = tmp_path / "marks.txt"
    env = {**os.environ, "STEP4_TIMELINE": str(marks)}
    cmd = [sys.executable, "-m", "grader", "attention_head.py", "--only", "interface", "student_tests"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    events = [line.split(" ", 3)[2:] for line in marks.read_text().splitlines()]
    zygotes = [k for k, (process, event) in enumerate(events) if process == "zygote" and event == "started"]
    assert len(zygotes) == 2, events
    spare = events.index(["grader", "spare worker started"])
    assert events.index(["grader", "submission prepared"]) < spare < events.index(["grader", "check interface begins"])


@pytest.mark.skipif(not fork_supported(), reason="zygotes and sidecars: Linux")
@pytest.mark.parametrize("only", [[], ["--only", "interface", "gaussian_kernel"]])
def test_the_heads_worker_is_launched_first(tmp_path: Path, only: list[str]) -> None:
    """The zygote forks one worker at a time and the head's checks are the longer lane: the head's worker is
    asked for before the sidecar's. A whole grade asks for it before this process imports torch, so that it
    imports the submission meanwhile; ``--only`` (a check that may need no worker) when the checks begin."""
    (tmp_path / "attention_head.py").write_bytes((REPO / "reference" / "attention_head.py").read_bytes())
    marks = tmp_path / "marks.txt"
    env = {**os.environ, "STEP4_TIMELINE": str(marks)}
    cmd = [sys.executable, "-m", "grader", "attention_head.py", *only]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    events = [line.split(" ", 3)[3] for line in marks.read_text().splitlines() if line.split(" ", 3)[2] == "grader"]
    assert events.index("worker asked for") < events.index("worker asked for (sidecar)"), events
    assert "submission imported (ok)" in events and "submission imported (ok) (sidecar)" in events
    early = events.index("worker asked for") < events.index("torch imported")
    assert early == (not only), events
