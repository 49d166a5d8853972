"""Batch grading: entries and safe ids, Gradescope exports, resume by fingerprint, the class files, and a
real run over a correct, a buggy, a hanging, a zipped and a notebook submission."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import FakeGrade, _class, _passed

import grader.runner
from grader.batch import (
    SUBMISSION_STATUS_MEANING,
    SUBMISSION_STATUSES,
    Entry,
    Outcome,
    discover,
    fingerprint,
    grades_csv,
    locate,
    run_batch,
    safe_id,
    submission_status,
)
from grader.cli import main
from grader.library import known_heads, reference_path
from grader.models import Diagnosis, GradeResult, Stop
from grader.report.summary import SORT_SCRIPT_HASH, render_summary
from grader.rubric import Rubric
from grader.sandbox import WorkerPool

METADATA_YML = """\
---
submission_111:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2026-02-01 10:00:00.000000000 -08:00
  :score: 0.0
submission_222:
  :submitters:
  - :name: Alan Turing
    :email: alan/t@example.edu
  - :name: Group Partner
    :sid: '999'
  :score: 0.0
"""


def test_safe_id_keeps_one_path_component() -> None:
    assert safe_id("alice") == "alice"
    assert safe_id("../../etc/passwd") == "_.._etc_passwd"
    assert safe_id("a\\b/c d") == "a_b_c_d"
    assert safe_id("..") == "submission" and safe_id(".hidden") == "hidden"
    assert safe_id("summary.html") == "_summary.html" and safe_id("grades.csv") == "_grades.csv"
    assert safe_id("José") == "José"
    assert "/" not in safe_id("x" * 300) and len(safe_id("x" * 300)) <= 100


def test_discover_entries_ids_and_notes(tmp_path: Path) -> None:
    for name in ("alice.py", "alice.zip", "carol smith.ipynb", ".DS_Store", "notes.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "bob").mkdir()
    (tmp_path / "summary.html").mkdir()
    entries, notes = discover(tmp_path)
    assert [(e.id, e.path.name) for e in entries] == [
        ("_summary.html", "summary.html"),
        ("alice", "alice.py"),
        ("alice-2", "alice.zip"),
        ("bob", "bob"),
        ("carol_smith", "carol smith.ipynb"),
    ]
    assert "skipped notes.txt: not a folder, .py, .zip or .ipynb" in notes
    assert "alice.zip is graded as 'alice-2'" in notes


def test_gradescope_export_layout(tmp_path: Path) -> None:
    export = tmp_path / "assignment_42_export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(METADATA_YML)
    for sub in ("submission_111", "submission_222", "submission_333"):
        (export / sub).mkdir()
        (export / sub / "attention_head.py").write_text("x = 1\n")
    entries, _ = discover(tmp_path)  # the unpacked zip: one export folder inside
    assert [(e.id, e.path.name, e.submitters) for e in entries] == [
        ("1815", "submission_111", ("Ada Lovelace",)),
        ("alan_t@example.edu", "submission_222", ("Alan Turing", "Group Partner")),
        ("submission_333", "submission_333", ()),
    ]


def test_locate_finds_the_file_to_grade(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "attention_head.ipynb").write_text("{}")
    (tmp_path / "a" / "README.md").write_text("")
    assert locate(tmp_path / "a") == tmp_path / "a" / "attention_head.ipynb"
    (tmp_path / "b" / "my-project").mkdir(parents=True)
    (tmp_path / "b" / "my-project" / "attention_head.py").write_text("")
    assert locate(tmp_path / "b") == tmp_path / "b" / "my-project"
    (tmp_path / "c").mkdir()
    assert locate(tmp_path / "c") == tmp_path / "c"  # nothing to find: prepare() will say so


def test_fingerprint_tracks_submission_and_rubric(tmp_path: Path, rubric: Rubric) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "attention_head.py").write_text("x = 1\n")
    entry = Entry("s", tmp_path / "s")
    first = fingerprint(entry, rubric)
    assert fingerprint(entry, rubric) == first
    (tmp_path / "s" / "attention_head.py").write_text("x = 2\n")
    assert fingerprint(entry, rubric) != first
    second = fingerprint(entry, rubric)
    changed = rubric.model_copy(update={"seed": rubric.seed + 1})
    assert fingerprint(entry, changed) != second


# -- orchestration, with a stand-in for the grading itself (tests/batch_helpers.py) --------------------


def test_batch_writes_everything_and_resumes(tmp_path: Path, fake: FakeGrade, rubric: Rubric) -> None:
    subs = _class(tmp_path / "subs", ["alice", "boom", "unreadable", "zed"])
    out = tmp_path / "out"
    report = run_batch(subs, out, rubric, jobs=2, pool=object())
    assert sorted(fake.calls) == ["alice", "boom", "unreadable", "zed"]
    assert {o.id: o.status for o in report.outcomes} == {
        "alice": "graded",
        "boom": "grader_error",
        "unreadable": "invalid",
        "zed": "graded",
    }
    for sid in ("alice", "boom", "unreadable", "zed"):
        assert (out / sid / "report.html").is_file()
        GradeResult.model_validate_json((out / sid / "result.json").read_text())
    assert not (out / "boom" / ".fingerprint").exists()  # a grader error is retried next time
    enabled = [cid for cid, rc in rubric.checks.items() if rc.enabled]
    unreadable = GradeResult.model_validate_json((out / "unreadable" / "result.json").read_text())
    assert {c.status for c in unreadable.checks if not c.extra_credit} == {"failed"}
    assert {c.status for c in unreadable.checks if c.extra_credit} == {"skipped"}  # never failed (issue 54)
    assert [c.id for c in unreadable.checks] == enabled  # every check listed, none dropped
    assert "holds no attention_head.py" in unreadable.checks[0].message

    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text())))
    header = ["id", "score", "max_score", "scoring", "score_by_checks", *enabled, "status"]
    assert rows[0] == [*header, "submission", "submitted_at", "note"]
    assert rows[1][:5] == ["alice", "100", "100", "checks", "100"] and rows[1][len(header) - 1] == "graded"
    assert [r[0] for r in rows[1:]] == ["alice", "boom", "unreadable", "zed"]
    assert "alice/report.html" in (out / "summary.html").read_text()

    fake.calls.clear()
    again = run_batch(subs, out, rubric, jobs=2, pool=object())
    assert fake.calls == ["boom"] and again.resumed == 3 and again.graded == 1
    (subs / "zed.py").write_text("# zed, second try\n")
    fake.calls.clear()
    run_batch(subs, out, rubric, jobs=2, pool=object())
    assert sorted(fake.calls) == ["boom", "zed"]
    fake.calls.clear()
    run_batch(subs, out, rubric.model_copy(update={"seed": 1}), jobs=2, pool=object())
    assert len(fake.calls) == 4  # the rubric changed: everything is regraded
    fake.calls.clear()
    run_batch(subs, out, rubric.model_copy(update={"seed": 1}), jobs=1, force=True, pool=object())
    assert len(fake.calls) == 4


def test_batch_command(tmp_path: Path, fake: FakeGrade, capsys: pytest.CaptureFixture[str]) -> None:
    subs = _class(tmp_path / "subs", ["alice", "bob"])
    assert main(["batch", str(subs), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert "2 submissions (2 graded now, 0 unchanged)" in capsys.readouterr().out
    _class(tmp_path / "subs2", ["boom"])
    assert main(["batch", str(tmp_path / "subs2"), "--out", str(tmp_path / "out2"), "--quiet"]) == 1
    assert main(["batch", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "is not a folder of submissions" in capsys.readouterr().err
    assert main(["batch", str(subs), "--out", str(tmp_path / "o"), "--jobs", "0"]) == 2


def test_output_inside_submissions_is_not_a_submission(tmp_path: Path, fake: FakeGrade, rubric: Rubric) -> None:
    subs = _class(tmp_path / "subs", ["alice"])
    run_batch(subs, subs / "graded", rubric, pool=object())
    report = run_batch(subs, subs / "graded", rubric, pool=object())
    assert [o.id for o in report.outcomes] == ["alice"]


def test_summary_is_self_contained_and_escapes(rubric: Rubric) -> None:
    checks = [_passed(cid, rc.points) for cid, rc in rubric.checks.items()]
    checks[1] = checks[1].model_copy(update={"status": "failed", "score": 0.0, "message": "<b>mask</b> leaks"})
    good = GradeResult(
        submission="a",
        seed=1,
        score=100,
        max_score=100,
        checks=checks[:1] + checks[2:] + checks[1:2],
        rubric=rubric.name,
        duration_s=1.0,
    )
    bad = good.model_copy(
        update={
            "checks": checks,
            "score": 85.0,
            "score_by_checks": 85.0,
            "diagnosis": [
                Diagnosis(id="no_mask", title="No causal mask", hint="mask the scores", cites="Definition 4.1")
            ],
        }
    )
    outcomes = [
        Outcome(
            "good",
            "good.py",
            "graded",
            good.model_copy(update={"checks": [_passed(c, r.points) for c, r in rubric.checks.items()]}),
        ),
        Outcome("bad@x", "bad.py", "graded", bad, submitters=("<script>alert(1)</script>",)),
        Outcome("bad2", "bad2.py", "raised_in_some_checks", bad),
    ]
    page = render_summary(outcomes, rubric, notes=["skipped notes.txt"])
    assert page == render_summary(list(reversed(outcomes)), rubric, notes=["skipped notes.txt"])  # pure
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "<b>mask" not in page
    assert page.count("<script") == 1 and SORT_SCRIPT_HASH in page  # the sorting script, pinned by its hash
    assert "http://" not in page and "https://" not in page and "<link" not in page  # self-contained
    assert 'href="bad@x/report.html"' in page and "No causal mask" in page
    assert "Score distribution" in page and "Most common failure patterns" in page
    (row, *_) = csv.DictReader(io.StringIO(grades_csv(outcomes, rubric)))
    assert list(row.values())[:5] == ["bad2", "85", "100", "checks", "85"]
    assert row["status"] == "raised_in_some_checks" and row["submission"] == "bad2"
    assert "raised in some checks" in page and "crashed" not in page


# -- a real batch ------------------------------------------------------------------------------------


def _notebook(source: str) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# My head"]},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": ["%matplotlib inline\n", *source.splitlines(keepends=True)],
        },
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.mark.slow
def test_real_batch_of_five(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    ref = reference_path().read_text()
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "correct.py").write_text(ref)
    (subs / "buggy").mkdir()
    (subs / "buggy" / "attention_head.py").write_text(
        next(h for h in known_heads("chaff") if h.id == "no_mask").source()
    )
    # The rubric's own limits for every submission (issue 36: under a tight budget, a busy machine timed the
    # honest heads out too). The hanging head hangs in a function with a small share of the budget, so its
    # timeout costs that share (14.4 s of 180 s), not the head's 90 s.
    (subs / "hanging.py").write_text(
        ref + "\n\ndef gaussian_positional_weights(T, bandwidth):\n    while True:\n        pass\n"
    )
    with zipfile.ZipFile(subs / "zipped.zip", "w") as zf:
        zf.writestr("handin/attention_head.py", ref)
    (subs / "notebook.ipynb").write_text(_notebook(ref))
    limits = rubric.limits
    share = limits.function_budget_share.seconds("gaussian_positional_weights", limits.per_submission_timeout_s)
    assert share < limits.per_call_timeout_s  # one wait spends the share: one hang, then refusals

    report = run_batch(subs, tmp_path / "out", rubric, jobs=2, pool=pool)
    by_id = {o.id: o for o in report.outcomes}
    assert {k: o.status for k, o in by_id.items()} == {
        "buggy": "graded",
        "correct": "graded",
        "hanging": "timeout",
        "notebook": "graded",
        "zipped": "graded",
    }
    for sid in ("correct", "zipped", "notebook"):
        assert {c.status for c in by_id[sid].result.checks} <= {"passed", "skipped"}, sid
    assert by_id["buggy"].result.score < by_id["buggy"].result.max_score
    reruns = {c.reproduce for c in by_id["buggy"].result.checks if c.reproduce}  # the student's file (issue 54)
    assert reruns and all(r.startswith("grade attention_head.py --only ") for r in reruns), reruns
    # the hanging one costs its function's share of the budget (plus the grader's work), not the whole budget
    assert by_id["hanging"].result.duration_s < limits.per_submission_timeout_s
    hung = {c.id for c in by_id["hanging"].result.checks if c.status == "timeout"}
    assert "gaussian_kernel" in hung and "causal_mask" not in hung
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "grades.csv").read_text())))
    assert {r["id"]: r["status"] for r in rows}["hanging"] == "timeout"
    summary = (tmp_path / "out" / "summary.html").read_text()
    assert all(f'href="{sid}/report.html"' in summary for sid in by_id)

    again = run_batch(subs, tmp_path / "out", rubric, jobs=2, pool=pool)
    assert again.resumed == 5 and again.graded == 0


@pytest.mark.slow
@pytest.mark.parametrize("own_uid", [False, True], ids=["sandbox uids", "own uid (laptop)"])
def test_a_snooping_classmate_sees_nothing_of_the_other(rubric: Rubric, own_uid: bool) -> None:
    """A batch of two in a world-readable folder: a head that looks everywhere (tests/hostile/snoop) and a
    correct classmate. The classmate keeps full marks, and nothing of theirs (nor of the instructor's
    files) reaches the snoop's report, its result or the class files. As root, once with a sandbox uid
    per slot, once with the workers on the grader's own uid, as on a laptop without root."""
    from secret_markers import SNOOPED, leaked

    loose = Path(tempfile.mkdtemp(prefix="step4-class-"))  # an instructor's folders, readable by anyone
    try:
        subs = loose / "submissions"
        shutil.copytree(Path(__file__).parent / "hostile" / "snoop", subs / "snoop")
        (subs / "zq9mate").mkdir()
        (subs / "zq9mate" / "attention_head.py").write_text(reference_path().read_text() + '\nMARK = "ZQ9-7f3a"\n')
        for p in [loose, *loose.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        off = rubric.checks["student_tests"].model_copy(update={"enabled": False})  # the classmate has no tests
        checks = {**rubric.checks, "student_tests": off}
        pool = WorkerPool(2, sandbox_uids=False, secret_paths=[subs, loose / "graded"]) if own_uid else None
        try:
            report = run_batch(subs, loose / "graded", rubric.model_copy(update={"checks": checks}), jobs=2, pool=pool)
        finally:
            if pool is not None:
                pool.close()
        by_id = {o.id: o for o in report.outcomes}
        assert by_id["zq9mate"].result.score >= by_id["zq9mate"].result.max_score  # full marks (and extra credit)
        assert SNOOPED in by_id["snoop"].result.output.text
        for name in ("snoop/result.json", "snoop/report.html", "summary.html", "grades.csv"):
            text = (loose / "graded" / name).read_text()
            assert leaked(text, "ZQ9-7f3a", str(subs / "zq9mate"), str(loose / "graded" / "zq9mate")) == [], name
        for name in ("snoop/result.json", "snoop/report.html"):
            assert "zq9mate" not in (loose / "graded" / name).read_text(), name
    finally:
        shutil.rmtree(loose)


# -- submission statuses ---------------------------------------------------------------------------


def _graded(rubric: Rubric, **statuses: tuple[str, str]) -> GradeResult:
    """Every enabled check passed, but those named: check id -> (status, message)."""
    checks = []
    for cid, rc in rubric.checks.items():
        if not rc.enabled:
            continue
        status, message = statuses.get(cid, ("passed", "ok"))
        points = rc.points if status == "passed" else 0.0
        checks.append(
            _passed(cid, rc.points).model_copy(update={"status": status, "score": points, "message": message})
        )
    return GradeResult(
        submission="s", seed=1, score=0.0, max_score=100.0, checks=checks, rubric=rubric.name, duration_s=1.0
    )


def test_submission_statuses_tell_how_the_code_raised(rubric: Rubric) -> None:
    from grader.checks import CHECKS
    from grader.checks._contract import NOT_IMPORTED

    stopped = ("error", "Your code did not complete this check: ValueError: oops")
    head_checks = [c for c in rubric.checks if "causal_self_attention" in CHECKS[c].needs]
    every_call = dict.fromkeys(head_checks, stopped) | {"forbidden_api": ("passed", "judged on the source")}
    no_import = {cid: stopped for cid in rubric.checks} | {"interface": ("failed", f"{NOT_IMPORTED} ValueError")}
    assert submission_status(_graded(rubric)) == "graded"
    assert submission_status(_graded(rubric, causal_mask=("failed", "leaks"))) == "graded"
    assert submission_status(_graded(rubric, determinism=stopped)) == "raised_in_some_checks"
    assert submission_status(_graded(rubric, **every_call)) == "raised_every_call"
    not_imported = _graded(rubric, **no_import)
    stop = Stop(kind="not_imported", text="ValueError")  # the evidence the status reads, not the words
    checks = [c.model_copy(update={"stopped": [stop]}) if c.id == "interface" else c for c in not_imported.checks]
    assert submission_status(not_imported) == "raised_every_call"
    assert submission_status(not_imported.model_copy(update={"checks": checks})) == "did_not_import"
    assert submission_status(_graded(rubric, **every_call | {"performance": ("timeout", "slow")})) == "timeout"
    assert set(SUBMISSION_STATUS_MEANING) == set(SUBMISSION_STATUSES) and "crashed" not in SUBMISSION_STATUSES


def test_submission_statuses_of_real_heads(rubric: Rubric, pool: WorkerPool, write_head: Any) -> None:
    """The three ways to raise, graded for real: the words come from the checks' own verdicts."""
    reference = reference_path().read_text(encoding="utf-8")
    heads = {
        "did_not_import": reference + "\nraise RuntimeError('cannot be imported')\n",
        "raised_every_call": reference
        + "\n\ndef causal_self_attention(*args, **kwargs):\n    raise ValueError('oops')\n",
        "raised_in_some_checks": reference.replace("def causal_self_attention(", "def _attention(", 1)
        + (
            "\n\ndef causal_self_attention(X, *args, **kwargs):\n"
            "    if X.dtype == torch.float32:\n        raise ValueError('float32 is not supported')\n"
            "    return _attention(X, *args, **kwargs)\n"
        ),
    }
    for word, source in heads.items():
        result = grader.runner.grade(write_head(source, word), rubric, pool=pool, visuals=False, parallel=False)
        assert submission_status(result) == word, [(c.id, c.status) for c in result.checks]
    interface = next(c for c in result.checks if c.id == "interface")
    assert interface.status == "error"  # the head raised on float32: not an import failure


def test_a_stored_crashed_status_is_classified_again(tmp_path: Path, fake: FakeGrade, rubric: Rubric) -> None:
    """An older grader wrote 'crashed' in .fingerprint: the stored result is read again, nothing regraded."""
    subs = _class(tmp_path / "subs", ["alice", "zed"])
    out = tmp_path / "out"
    run_batch(subs, out, rubric, pool=object())
    stopped = ("error", "Your code did not complete this check: ValueError: oops")
    (out / "alice" / "result.json").write_text(_graded(rubric, determinism=stopped).model_dump_json())
    state = json.loads((out / "alice" / ".fingerprint").read_text())
    (out / "alice" / ".fingerprint").write_text(json.dumps(state | {"status": "crashed"}))
    fake.calls.clear()
    report = run_batch(subs, out, rubric, pool=object())
    assert fake.calls == [] and report.resumed == 2
    assert {o.id: o.status for o in report.outcomes} == {"alice": "raised_in_some_checks", "zed": "graded"}
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text())))
    assert [r["status"] for r in rows] == ["raised_in_some_checks", "graded"]
    assert "raised in some checks" in (out / "summary.html").read_text()
