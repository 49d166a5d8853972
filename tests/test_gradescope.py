"""Gradescope: results.json per the spec, hidden checks that leak nothing, always a results.json, and
the upload bundle run end to end (run_autograder in a fake /autograder tree)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from grader.diagnosis import caught_by
from grader.gradescope import build_bundle, results_json, run_gradescope
from grader.library import known_heads, reference_path
from grader.models import CheckResult, Counterexample, Diagnosis, GradeResult, Heatmap
from grader.rubric import Rubric

REPO = Path(__file__).resolve().parent.parent
TEST_KEYS = {"name", "number", "score", "max_score", "status", "output", "output_format", "visibility"}
SECRET_MESSAGE = "Row 1 of batch element 1 sums to 0.0489531826\nSmallest failing input: B=2, T=3 (float64, seed 20417)"


def _check(cid: str, status: str, visibility: str = "visible", **kw: Any) -> CheckResult:
    data = dict(
        id=cid,
        title=f"{cid} holds",
        cites="Proposition 3.1",
        status=status,
        score=4.0 if status == "passed" else 0.0,
        max_score=4.0,
        visibility=visibility,
        message=SECRET_MESSAGE if status != "passed" else "holds",
        seed=20417,
        duration_s=0.1,
    )
    return CheckResult.model_validate(data | kw)


def _result(checks: list[CheckResult]) -> GradeResult:
    return GradeResult(
        submission="attention_head.py",
        seed=20417,
        score=sum(c.score for c in checks),
        max_score=sum(c.max_score for c in checks),
        checks=checks,
        rubric="r",
        duration_s=3.25,
    )


def _validate_spec(data: dict[str, Any]) -> None:
    """The parts of the results.json spec we rely on."""
    json.dumps(data)
    assert isinstance(data["score"], float) and isinstance(data["execution_time"], int | float)
    assert data["stdout_visibility"] in ("hidden", "visible", "after_due_date", "after_published")
    for t in data["tests"]:
        assert t.keys() >= TEST_KEYS, t.keys()
        assert t["status"] in ("passed", "failed")
        assert t["visibility"] in ("hidden", "visible", "after_due_date", "after_published")
        assert t["output_format"] in ("text", "html", "simple_format", "md", "ansi")


def test_one_test_per_check_with_rubric_visibility() -> None:
    checks = [
        _check("interface", "passed"),
        _check("row_stochastic", "failed", "after_due_date"),
        _check("causal_mask", "timeout", "after_published"),
        _check("determinism", "skipped", "visible", score=0.0, max_score=0.0),
        _check("convex_hull", "error", "hidden"),
        _check("kv_cache", "skipped", extra_credit=True),
        _check("streaming_softmax", "skipped"),
    ]
    data = results_json(_result(checks))
    _validate_spec(data)
    assert data["score"] == 4.0 and data["stdout_visibility"] == "hidden"
    # the skipped checks that cost nothing (worth 0 here, extra credit) are no tests: the output names them
    assert [t["number"] for t in data["tests"]] == ["1", "2", "3", "4", "5"]  # no gap (issue 54: 17 jumped to 21)
    listed = [c for c in checks if c.id not in ("determinism", "kv_cache")]
    assert [t["visibility"] for t in data["tests"]] == [c.visibility for c in listed]
    statuses = [t["status"] for t in data["tests"]]
    assert statuses == ["passed", "failed", "failed", "failed", "failed"]  # skipped: not passed
    assert "Not graded here" in data["output"] and "    kv_cache: " in data["output"]
    assert data["tests"][2]["output"].startswith("TIMEOUT: ")  # statuses Gradescope lacks are spelled out
    assert SECRET_MESSAGE in data["tests"][1]["output"]


def test_a_skipped_check_never_reads_as_passed() -> None:
    """Issue 36.11: Gradescope showed skipped checks as passed at 0/2 and 0/3 (a test passes when its status
    says so, or, without one, when its score reaches its max_score). Gradescope has no third state: a skipped
    check that costs points is "failed", its name and output saying it was skipped and why; one that costs
    nothing is no test (either colour would say something untrue) and the overall output names it and why."""
    gpu = "Skipped: this torch build has no CUDA support. This does not count against you."
    checks = [
        _check("fused_kernel_cuda", "skipped", extra_credit=True, max_score=2.0, message=gpu),
        _check("kv_cache", "skipped", extra_credit=True, max_score=3.0, message="Optional: not defined; not graded."),
        _check("student_tests", "skipped", max_score=9.0, message="Your submission has no test files."),
        _check("interface", "passed"),
    ]
    data = results_json(_result(checks))
    _validate_spec(data)
    [skipped, passed] = data["tests"]
    assert skipped["status"] == "failed" and passed["status"] == "passed"
    assert skipped["name"].endswith(" (skipped)") and passed["name"] == "interface: interface holds"
    assert skipped["output"] == f"SKIPPED: {checks[2].message}"
    assert (skipped["score"], skipped["max_score"]) == (0.0, 9.0)
    assert not any(t["name"].startswith(("fused_kernel_cuda", "kv_cache")) for t in data["tests"])
    assert f"    fused_kernel_cuda: {gpu}" in data["output"].splitlines()
    assert "    kv_cache: Optional: not defined; not graded." in data["output"].splitlines()
    assert data["score"] == 4.0


def test_the_overall_output_names_every_cause_with_its_price_and_text() -> None:
    """Issue 36.11/36.12: the output above the tests lists each root cause as the terminal does, with its
    price whichever count stands, and a crash's full text (a SyntaxError's file and line); a cause that
    explains only hidden checks keeps its heading only."""
    crash = Diagnosis(
        id="crash:module", title="Importing your module raises SyntaxError — 2 checks could not run", hint="Fix it.",
        cites="Section 9.1", kind="crash", explains=["interface", "causal_mask"], deduction=9.0,
        detail='  File "attention_head.py", line 4\n    return X +\n             ^\nSyntaxError: invalid syntax',
    )  # fmt: skip
    secret = Diagnosis(
        id="secret", title="A hidden crash", hint="h", cites="c", kind="crash", explains=["row_stochastic"],
        detail=SECRET_MESSAGE, deduction=4.0,
    )  # fmt: skip
    checks = [
        _check("interface", "error", causes=["crash:module"], max_score=5.0),
        _check("causal_mask", "error", causes=["crash:module"]),
        _check("row_stochastic", "error", "hidden", causes=["secret"]),
    ]
    result = _result(checks).model_copy(update={"diagnosis": [crash, secret], "scoring_note": "Counted by checks."})
    lines = results_json(result)["output"].splitlines()
    heading = "(1) Importing your module raises SyntaxError — 2 checks could not run (Section 9.1): price 9 points"
    k = lines.index(heading)
    assert lines[k + 1 : k + 5] == [
        '      File "attention_head.py", line 4', "        return X +", "                 ^",
        "    SyntaxError: invalid syntax",
    ]  # fmt: skip
    assert "(2) A hidden crash (c): price 4 points" in lines and "0.0489531826" not in "\n".join(lines)
    charged = result.model_copy(update={"scoring": "mistakes", "score": 4.0})
    assert f"{heading.rsplit(':', 1)[0]}: −9 points" in results_json(charged)["output"].splitlines()


def test_a_syntax_error_is_named_in_the_overall_output(tmp_path: Path) -> None:
    """Issue 36.11: a submission that does not parse: the output above the tests names the SyntaxError, its
    file and its line (the checks it stopped only point at it)."""
    (tmp_path / "sub").mkdir()
    head = "import torch\n\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    return X +\n"
    (tmp_path / "sub" / "attention_head.py").write_text(head)
    data = run_gradescope(tmp_path / "sub", tmp_path / "results.json", out=_Log())
    _validate_spec(data)
    assert data["score"] == 0.0
    text = data["output"]
    cause = next(ln for ln in text.splitlines() if ln.startswith("(1) ") and "SyntaxError" in ln)
    detail = text.split(cause, 1)[1]  # the error's own text, under its cause
    assert "SyntaxError" in detail and "attention_head.py" in detail and "line 5" in detail, text


def test_hidden_checks_show_only_property_and_outcome() -> None:
    cx = Counterexample(shape={"B": 2, "T": 3}, dtype="float64", seed=20417)
    hm = Heatmap(title="your weights", kind="weights", data=[[1.0, 0.0], [0.3, 0.7]])
    hidden = _check(
        "row_stochastic",
        "failed",
        "hidden",
        counterexample=cx,
        heatmaps=[hm],
        reproduce="grade attention_head.py --only row_stochastic --seed 20417",
    )
    test = results_json(_result([hidden]))["tests"][0]
    assert test["output"] == "FAILED. row_stochastic holds (Proposition 3.1). Details of hidden checks are not shown."
    assert "20417" not in json.dumps(test)
    visible = results_json(_result([hidden.model_copy(update={"visibility": "visible"})]))["tests"][0]
    assert visible["output_format"] == "html" and "<table>" in visible["output"]  # a small heatmap helps
    assert "0.0489531826" in visible["output"]


def test_grader_failure_still_writes_instructor_visible_results(tmp_path: Path) -> None:
    bad_rubric = tmp_path / "bad.toml"
    bad_rubric.write_text('name = "x"\n[checks.no_such_check]\npoints = 1\n')
    results = tmp_path / "results" / "results.json"
    log = _Log()
    run_gradescope(tmp_path / "missing", results, rubric_path=bad_rubric, out=log)
    data = json.loads(results.read_text())
    _validate_spec(data)
    assert data["score"] == 0.0 and "not a problem with your code" in data["output"]
    [test] = data["tests"]
    assert test["visibility"] == "hidden" and "checks.no_such_check" in test["output"]  # the instructor's view
    assert "INTERNAL ERROR" in log.text


def test_unreadable_submission_explains_itself(tmp_path: Path, rubric: Rubric) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("I forgot the code")
    results = tmp_path / "results.json"
    data = run_gradescope(tmp_path / "sub", results, out=_Log())
    assert data == json.loads(results.read_text())
    _validate_spec(data)
    graded = [cid for cid, rc in rubric.checks.items() if rc.enabled and not rc.extra_credit]
    assert data["score"] == 0.0 and [t["name"].split(":")[0] for t in data["tests"]] == graded
    assert all("holds no attention_head.py" in t["output"] for t in data["tests"] if t["visibility"] != "hidden")
    # the extra-credit and GPU checks were never failed: not graded, and said so (issue 54)
    extra = [cid for cid, rc in rubric.checks.items() if rc.enabled and rc.extra_credit]
    assert extra and all(f"    {cid}: " in data["output"] for cid in extra)


def test_a_submission_that_timed_out_lists_no_extra_credit_check_as_failed() -> None:
    """An import that hung stops every check, extra credit and GPU ones too: those cost nothing and were never
    judged, so they are not failed tests (issue 54), and the tests are numbered without a gap."""
    hung = "Your code did not complete this check: importing your module (attention_head.py) took more than 20 s"
    checks = [
        _check("interface", "timeout", message=hung),
        _check("fused_kernel_cuda", "timeout", extra_credit=True, max_score=2.0, message=hung),
        _check("streaming_softmax", "timeout", extra_credit=True, max_score=3.0, message=hung),
        _check("performance", "timeout", message=hung),
        _check("kv_cache", "failed", extra_credit=True, max_score=3.0, message="Cached rows differ."),
    ]
    data = results_json(_result(checks))
    _validate_spec(data)
    assert [(t["number"], t["name"].split(":")[0]) for t in data["tests"]] == [
        ("1", "interface"),
        ("2", "performance"),
        ("3", "kv_cache"),  # judged and failed: a test
    ]
    assert "    fused_kernel_cuda: " in data["output"] and "    streaming_softmax: " in data["output"]


def test_setup_sh_can_be_tried_outside_autograder(tmp_path: Path) -> None:
    """setup.sh takes STEP4_AUTOGRADER_ROOT as run_autograder does (it wrote to /autograder whatever was asked).
    Run here with stand-ins for python and getent, it installs into ROOT/venv from ROOT/source."""
    build_bundle(tmp_path / "autograder.zip")
    root = tmp_path / "ag"
    _unpack(tmp_path / "autograder.zip", root)
    stubs, log = tmp_path / "stubs", tmp_path / "calls.log"
    stubs.mkdir()
    (stubs / "python3.13").write_text(
        "#!/bin/sh\n"
        'echo "$0 $*" >> "$STUB_LOG"\n'
        'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi\n'
        'if [ "$1" = "-" ]; then cat > /dev/null; fi\n'
        "exit 0\n"
    )
    (stubs / "getent").write_text("#!/bin/sh\nexit 2\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "STEP4_AUTOGRADER_ROOT": str(root), "STUB_LOG": str(log)}
    done = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = log.read_text()
    assert f"{root}/venv/bin/python -m pip install --quiet {root}/source/step4-grader" in calls
    assert stat.S_IMODE((root / "source").stat().st_mode) == 0o700
    assert "/autograder/" not in calls


class _Log:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


# -- the bundle --------------------------------------------------------------------------------------


def test_bundle_has_scripts_at_root_and_the_whole_grader(tmp_path: Path) -> None:
    out = tmp_path / "autograder.zip"
    names = build_bundle(out)
    with zipfile.ZipFile(out) as zf:
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        setup = zf.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "rubric.toml", "step4-grader/pyproject.toml"} <= set(names)
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    for needed in (
        "grader/cli.py",
        "grader/sandbox/_zygote.py",
        "grader/_reference/attention_head.py",
        "grader/_rubrics/step4.toml",
        "grader/report/templates/summary.html.j2",
        "grader/_student_template/.github/workflows/grade.yml",
    ):
        assert f"step4-grader/{needed}" in names, needed
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert "--index-url https://download.pytorch.org/whl/cpu" in setup and '"torch==2.' in setup
    build_bundle(tmp_path / "again.zip")
    assert (tmp_path / "again.zip").read_bytes() == out.read_bytes()  # reproducible


def _unpack(bundle: Path, root: Path) -> None:
    """What Gradescope does with the upload: source/ holds the zip, run_autograder is copied to the root."""
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    (root / "run_autograder").chmod(0o755)


def _run_autograder(
    root: Path, submission_text: str | None, python: str = sys.executable, files: dict[str, str] | None = None
) -> dict[str, Any]:
    sub = root / "submission"
    if sub.exists():
        for f in sub.iterdir():
            f.unlink()
    else:
        sub.mkdir()
    if submission_text is not None:
        (sub / "attention_head.py").write_text(submission_text)
    for name, text in (files or {}).items():
        (sub / name).write_text(text)
    (root / "submission_metadata.json").write_text(json.dumps({"id": 1, "users": [{"name": "Ada"}]}))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "STEP4_AUTOGRADER_ROOT": str(root),
        "STEP4_PYTHON": python,
        # the grader exactly as bundled, with this environment's dependencies (no network here)
        "PYTHONPATH": str(root / "source" / "step4-grader"),
    }
    proc = subprocess.Popen(
        ["bash", str(root / "run_autograder")],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = _PeakPss(proc.pid)
    out, _ = proc.communicate(timeout=300)
    peak.stop()
    assert proc.returncode == 0, out
    data: dict[str, Any] = json.loads((root / "results" / "results.json").read_text())
    data["_log"], data["_peak_pss"] = out, peak.peak
    return data


class _PeakPss:
    """Peak PSS of a process tree: the memory a container limit sees."""

    def __init__(self, pid: int) -> None:
        self.root, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            total = 0
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                continue
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_full_info().pss
            self.peak = max(self.peak, total)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


def test_run_autograder_writes_results_even_when_python_is_missing(tmp_path: Path) -> None:
    build_bundle(tmp_path / "autograder.zip")
    _unpack(tmp_path / "autograder.zip", tmp_path / "ag")
    data = _run_autograder(tmp_path / "ag", "x = 1\n", python="/nonexistent/python")
    assert data["score"] == 0.0 and "failed to start" in data["output"]


@pytest.mark.slow
def test_run_autograder_end_to_end_correct_and_buggy(tmp_path: Path) -> None:
    rubric = (reference_path().parents[1] / "rubrics" / "step4.toml").read_text()
    rubric = re.sub(r"(\[checks\.causal_mask\]\npoints = \S+)", r'\1\nvisibility = "hidden"', rubric)
    # The submission is a bare head with no tests of its own: leave Exercise 2's test grading out here.
    rubric = re.sub(r"(\[checks\.student_tests\]\npoints = \S+)", r"\1\nenabled = false", rubric)
    assert 'visibility = "hidden"' in rubric and "enabled = false" in rubric
    (tmp_path / "rubric.toml").write_text(rubric)
    build_bundle(tmp_path / "autograder.zip", tmp_path / "rubric.toml")
    root = tmp_path / "ag"
    _unpack(tmp_path / "autograder.zip", root)

    good = _run_autograder(root, reference_path().read_text())
    _validate_spec(good)
    assert good["score"] >= good["extra_data"]["max_score"] == 91  # 100 less student_tests; extra credit adds
    # a GPU part here without a GPU costs nothing: no test, named in the output; every test listed passed
    assert all(t["status"] == "passed" for t in good["tests"]), [t for t in good["tests"] if t["status"] != "passed"]
    assert "Not graded here" in good["output"]
    assert "submission 1 by Ada" in good["_log"]
    assert "memory watchdog 384 MiB" in good["_log"]  # capped to fit Gradescope's default container
    assert good["_peak_pss"] < 768 * 2**20, f"peak PSS {good['_peak_pss'] / 2**20:.0f} MiB over Gradescope's 768 MB"

    buggy = next(h for h in known_heads("chaff") if h.id == "no_mask")
    bad = _run_autograder(root, buggy.source())
    _validate_spec(bad)
    failed = {t["name"].split(":")[0] for t in bad["tests"] if t["status"] == "failed" and "skipped" not in t["tags"]}
    assert failed == set(caught_by(buggy))
    # The grade's total, which the output says how it counted: by mistakes, no_mask costs its price once, which
    # can be more than the tests' points add up to (they stay the evidence).
    evidence = sum(t["score"] for t in bad["tests"])
    assert evidence <= bad["score"] < 100 and "Counted by" in bad["output"]
    if bad["score"] > evidence + 1e-9:
        assert "Counted by mistakes" in bad["output"] and "No causal mask" in bad["output"] and ": −" in bad["output"]
    [hidden] = [t for t in bad["tests"] if t["visibility"] == "hidden"]
    assert hidden["output"].startswith("FAILED.") and "seed" not in hidden["output"]
    assert "causal_mask FAILED" in bad["_log"]  # instructors see every message in the run's stdout


@pytest.mark.slow
def test_run_autograder_with_a_snooping_submission(tmp_path: Path) -> None:
    """The bundle unpacked as Gradescope does (source, rubric and submission under one root, readable by
    anyone): a head that looks everywhere finds nothing, so results.json holds nothing of the reference,
    the chaffs or the rubric, in visible tests or hidden ones."""
    from secret_markers import SNOOPED, leaked

    from grader.sandbox._filesystem import landlock_abi

    rubric = (reference_path().parents[1] / "rubrics" / "step4.toml").read_text()
    rubric = re.sub(r"(\[checks\.student_tests\]\npoints = \S+)", r"\1\nenabled = false", rubric)
    (tmp_path / "rubric.toml").write_text(rubric)
    build_bundle(tmp_path / "autograder.zip", tmp_path / "rubric.toml")
    loose = Path(tempfile.mkdtemp(prefix="step4-ag-"))  # not under pytest's 0700 folder: readable by anyone
    try:
        root = loose / "ag"
        _unpack(tmp_path / "autograder.zip", root)
        for p in [loose, *loose.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        snoop = REPO / "tests" / "hostile" / "snoop"
        files = {"snoop.py": (snoop / "snoop.py").read_text()}
        data = _run_autograder(root, (snoop / "attention_head.py").read_text(), files=files)
    finally:
        shutil.rmtree(loose)
    log = data.pop("_log")
    data.pop("_peak_pss")
    assert SNOOPED in log  # the instructors' log shows what it printed: it looked, and found nothing
    assert leaked(json.dumps(data)) == []
    protections = next(line for line in log.splitlines() if line.startswith("protections: "))
    if landlock_abi() > 0:
        assert "landlock (ABI" in protections


def test_bundled_source_installs_as_a_wheel(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", reason="building offline needs setuptools in this environment")
    build_bundle(tmp_path / "autograder.zip")
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        zf.extractall(tmp_path / "src")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            str(tmp_path / "src" / "step4-grader"),
            "-w",
            str(tmp_path / "dist"),
        ],
        check=True,
        timeout=300,
    )
    [wheel] = (tmp_path / "dist").glob("step4_grader-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for needed in (
        "grader/_reference/attention_head.py",
        "grader/_reference/chaffs/catalog.toml",
        "grader/report/templates/summary.html.j2",
        "grader/_rubrics/step4.toml",
        "grader/py.typed",
        "grader/_student_template/.github/workflows/grade.yml",
    ):
        assert needed in names, needed
