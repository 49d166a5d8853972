"""A class an instructor runs from first upload to the gradebook (issue 54), with a stand-in for the grading itself
(tests/batch_helpers.py): nothing dropped without a word, one student one grade, regrading what needs it, the
gradebook an LMS takes with the instructor's overrides, the students to look at first, and the class files written
as the run goes."""

from __future__ import annotations

import csv
import html
import io
import json
import os
from datetime import datetime
from pathlib import Path

import pytest
from batch_helpers import FakeGrade, _class

from grader.batch import BatchUsageError, Outcome, run_batch
from grader.cli import main
from grader.entries import LayoutError, survey
from grader.gradebook import OverrideError, build, export, read_overrides
from grader.models import Diagnosis
from grader.report.summary import causes
from grader.rubric import Rubric

EXPORT_YML = """\
---
submission_101:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2026-02-01 10:00:00.000000000 -08:00
submission_102:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2026-02-02 09:30:00.000000000 -08:00
submission_103:
  :submitters:
  - :name: Alan Turing
    :sid: '1912'
    :email: alan@example.edu
  :created_at: 2026-02-03 23:59:59.000000000 -08:00
"""


def _rows(path: Path) -> dict[str, dict[str, str]]:
    return {r["id"]: r for r in csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))}


def _export(root: Path, scores: dict[str, int]) -> Path:
    """A Gradescope export: Ada handed in twice (101, then 102), Alan once (103), each ``score=N``."""
    export = root / "assignment_7_export"
    export.mkdir(parents=True)
    (export / "submission_metadata.yml").write_text(EXPORT_YML)
    for sub, score in scores.items():
        (export / sub).mkdir()
        (export / sub / "attention_head.py").write_text(f"# score={score}\n")
    return export


# -- 1. nothing dropped without a word ------------------------------------------------------------------------


def test_an_export_beside_other_submissions_is_a_usage_error(
    tmp_path: Path, fake: FakeGrade, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today's grader graded the export's and dropped the three others without a word, with exit status 0."""
    subs = tmp_path / "class"
    _export(subs, {"submission_101": 90, "submission_103": 80})
    for name in ("u1.py", "u2.py", "u3.py"):
        (subs / name).write_text("# score=70\n")
    (subs / ".DS_Store").write_text("")
    with pytest.raises(LayoutError, match=r"beside 3 other entries \(u1.py, u2.py, u3.py\)"):
        run_batch(subs, tmp_path / "out", fake.rubric, pool=object())
    assert main(["batch", str(subs), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "grade the export by itself" in capsys.readouterr().err
    assert fake.calls == []
    _export(tmp_path / "two", {"submission_101": 90})
    (tmp_path / "two" / "again").mkdir()
    (tmp_path / "two" / "assignment_7_export").rename(tmp_path / "two" / "again" / "assignment_7_export")
    _export(tmp_path / "two", {"submission_103": 90})
    (tmp_path / "two" / "again" / "assignment_7_export").rename(tmp_path / "two" / "assignment_8_export")
    (tmp_path / "two" / "again").rmdir()
    with pytest.raises(LayoutError, match="holds 2 Gradescope exports"):
        survey(tmp_path / "two")
    assert len(survey(tmp_path / "class" / "assignment_7_export").entries) == 2  # the export alone: graded


def test_every_entry_is_graded_or_listed_with_its_reason(
    tmp_path: Path, fake: FakeGrade, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = _class(tmp_path / "class", ["alice", "bob"])
    (subs / "notes.txt").write_text("my notes")
    (subs / ".carol.py").write_text("# hidden\n")
    (subs / ".DS_Store").write_text("")
    (subs / "__MACOSX").mkdir()
    out = tmp_path / "out"
    assert main(["batch", str(subs), "--out", str(out), "--quiet"]) == 0
    said = capsys.readouterr().out
    assert "not graded: notes.txt: not a folder, .py, .zip or .ipynb" in said
    assert "not graded: .carol.py: hidden (its name starts with a dot)" in said
    assert "ignored 2 entries an operating system left" in said
    rows = _rows(out / "grades.csv")
    assert {k: r["status"] for k, r in rows.items()} == {
        ".carol.py": "not_graded",
        "alice": "graded",
        "bob": "graded",
        "notes.txt": "not_graded",
    }
    assert rows["notes.txt"]["note"] == "not a folder, .py, .zip or .ipynb" and rows["notes.txt"]["score"] == ""
    page = (out / "summary.html").read_text()
    assert "notes.txt" in page and "hidden (its name starts with a dot)" in page


# -- 4. one student, one grade --------------------------------------------------------------------------------


def test_one_student_one_grade_by_the_latest_file_time(tmp_path: Path, fake: FakeGrade) -> None:
    """u1901 handed in a .py and a .zip; U1902 and u1902 differ by case: two submissions each, one grade each."""
    subs = _class(tmp_path / "class", {"u1901": "score=60", "U1902": "score=95", "u1902": "score=40"})
    (subs / "u1901.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # the fake grades it at 100
    for name, when in (("u1901.py", 1_700_000_000), ("u1901.zip", 1_700_000_500), ("U1902.py", 1_700_000_900)):
        os.utime(subs / name, (when, when))
    os.utime(subs / "u1902.py", (1_700_000_100, 1_700_000_100))
    out = tmp_path / "out"
    report = run_batch(subs, out, fake.rubric, pool=object(), jobs=1)
    assert sorted(o.id for o in report.outcomes) == ["U1902", "u1901", "u1901-2", "u1902-2"]  # all graded
    rows = _rows(out / "grades.csv")
    assert sorted(rows) == ["u1901", "u1902"]  # one row per student
    assert (rows["u1901"]["submission"], rows["u1901"]["score"]) == ("u1901-2", "100")  # the later .zip
    assert (rows["u1902"]["submission"], rows["u1902"]["score"]) == ("U1902", "95")  # the later U1902.py
    superseded = list(csv.DictReader(io.StringIO((out / "superseded.csv").read_text())))
    assert {(r["submission"], r["counted_instead"], r["dated_by"]) for r in superseded} == {
        ("u1901", "u1901-2", "file time"),
        ("u1902-2", "U1902", "file time"),
    }
    page = (out / "summary.html").read_text()
    assert "Superseded submissions" in page and 'href="u1902-2/report.html"' in page
    best = run_batch(subs, out, fake.rubric, pool=object(), pick="best")
    assert best.resumed == 4  # choosing another submission regrades nothing
    assert _rows(out / "grades.csv")["u1901"]["submission"] == "u1901-2"
    assert _rows(out / "grades.csv")["u1902"]["score"] == "95"


def test_a_gradescope_student_id_twice_counts_the_later_created_at(tmp_path: Path, fake: FakeGrade) -> None:
    export = _export(tmp_path / "class", {"submission_101": 90, "submission_102": 30, "submission_103": 80})
    os.utime(export / "submission_101" / "attention_head.py", (2_000_000_000, 2_000_000_000))  # newer file, older date
    out = tmp_path / "out"
    run_batch(tmp_path / "class", out, fake.rubric, pool=object(), jobs=1)
    rows = _rows(out / "grades.csv")
    assert sorted(rows) == ["1815", "1912"]
    assert (rows["1815"]["submission"], rows["1815"]["score"]) == ("1815-2", "30")  # created 2026-02-02
    assert rows["1815"]["submitted_at"] == "2026-02-02T17:30:00+00:00"
    run_batch(tmp_path / "class", out, fake.rubric, pool=object(), pick="best")
    assert _rows(out / "grades.csv")["1815"]["score"] == "90"


# -- 5. the overview says each student's own error ------------------------------------------------------------


def test_the_overview_shows_each_students_own_words(fake: FakeGrade, tmp_path: Path) -> None:
    """One cause id, two wordings (a SyntaxError, a NameError): today's overview put both under the first's words."""
    subs = _class(
        tmp_path / "class",
        {
            "ann": "cause=crash:module:Importing_your_module_raises_NameError",
            "ben": "cause=crash:module:Importing_your_module_raises_SyntaxError",
            "cal": "cause=crash:module:Importing_your_module_raises_NameError",
        },
    )
    report = run_batch(subs, tmp_path / "out", fake.rubric, pool=object(), jobs=1)
    found = {(c.id, c.title): [sid for sid, _ in c.examples] for c in causes(report.outcomes)}
    assert found == {
        ("crash:module", "Importing your module raises NameError"): ["ann", "cal"],
        ("crash:module", "Importing your module raises SyntaxError"): ["ben"],
    }
    page = (tmp_path / "out" / "summary.html").read_text()
    assert "raises SyntaxError" in page and "raises NameError" in page


# -- 6. regrade what needs it ---------------------------------------------------------------------------------


def test_regrade_one_student_retry_timeouts_and_list_what_is_provisional(
    tmp_path: Path, fake: FakeGrade, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = _class(tmp_path / "class", {"alice": "", "bob": "timeout=gaussian_kernel score=91", "carol": ""})
    out = tmp_path / "out"
    assert main(["batch", str(subs), "--out", str(out), "--quiet", "--jobs", "1"]) == 0
    said = capsys.readouterr().out
    assert "1 provisional grade(s)" in said and "--regrade bob" in said
    page = (out / "summary.html").read_text()
    assert 'id="provisional"' in page and "--regrade bob" in page
    fake.calls.clear()
    run_batch(subs, out, fake.rubric, pool=object())
    assert fake.calls == []  # a timeout is kept until asked
    run_batch(subs, out, fake.rubric, pool=object(), retry=["timeouts"])
    assert fake.calls == ["bob"]
    fake.calls.clear()
    run_batch(subs, out, fake.rubric, pool=object(), regrade=["ALICE"])
    assert fake.calls == ["alice"]
    with pytest.raises(BatchUsageError, match="--regrade dave"):
        run_batch(subs, out, fake.rubric, pool=object(), regrade=["dave"])
    assert main(["batch", str(subs), "--out", str(out), "--quiet", "--regrade", "dave"]) == 2


def test_a_package_added_regrades_only_who_lacked_one(tmp_path: Path, fake: FakeGrade, rubric: Rubric) -> None:
    subs = _class(tmp_path / "class", {"alice": "", "bob": "cause=package:einops:`f`_uses_einops", "carol": ""})
    out = tmp_path / "out"
    run_batch(subs, out, rubric, pool=object(), jobs=1)
    fake.calls.clear()
    more = rubric.model_copy(update={"packages": ["einops"]})
    run_batch(subs, out, more, pool=object(), jobs=1)
    assert fake.calls == ["bob"]
    fake.calls.clear()
    exported = more.model_copy(update={"gradebook": more.gradebook.model_copy(update={"decimals": 0})})
    run_batch(subs, out, exported, pool=object(), jobs=1)
    assert fake.calls == []  # how grades are exported changes no grade
    run_batch(subs, out, rubric, pool=object(), jobs=1)
    assert fake.calls == ["bob"]  # a package removed: whoever was graded with it (alice and carol never were)


# -- 8. a gradebook an LMS takes --------------------------------------------------------------------------------


def test_gradebook_exports_with_overrides_applied_everywhere(tmp_path: Path, fake: FakeGrade, rubric: Rubric) -> None:
    _export(tmp_path / "class", {"submission_101": 90, "submission_102": 30, "submission_103": 80})
    (tmp_path / "class" / "assignment_7_export" / "submission_103" / "attention_head.py").write_text(
        "# score=106.456\n"  # extra credit
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "overrides.csv").write_text(
        "student,check,points,reason\n1815,causal_mask,0,copied the mask from a classmate\n"
        "1912,total,100,regrade request\nnobody,total,5,typo\n"
    )
    due = rubric.gradebook.model_copy(
        update={"due": datetime.fromisoformat("2026-02-03T12:00:00-08:00"), "decimals": 1}
    )
    book_rubric = rubric.model_copy(update={"gradebook": due})
    report = run_batch(tmp_path / "class", out, book_rubric, pool=object(), jobs=1)
    rows = _rows(out / "grades.csv")
    mask = rubric.checks["causal_mask"].points
    assert rows["1815"]["score"] == f"{30 - mask:g}" and rows["1815"]["causal_mask"] == "0"
    assert "override of causal_mask: copied the mask from a classmate" in rows["1815"]["note"]
    assert rows["1912"]["score"] == "100"
    plain = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text())))
    assert [(r["name"], r["email"], r["sid"], r["score"], r["max_score"], r["late"], r["status"]) for r in plain] == [
        ("Ada Lovelace", "ada@example.edu", "1815", f"{30 - mask:.1f}".rstrip("0").rstrip("."), "100", "no", "graded"),
        ("Alan Turing", "alan@example.edu", "1912", "100", "100", "yes", "graded"),
    ]
    assert report.book is not None
    canvas = export(report.book, book_rubric, "canvas").splitlines()
    assert canvas[0] == f"Student,ID,SIS User ID,SIS Login ID,Section,{book_rubric.name}"
    assert canvas[1] == "Points Possible,,,,,100" and canvas[3] == "Alan Turing,,1912,alan@example.edu,,100"
    moodle = export(report.book, book_rubric, "moodle").splitlines()
    assert moodle[0] == f"Full name,ID number,Email address,{book_rubric.name},Feedback"
    assert moodle[2] == "Alan Turing,1912,alan@example.edu,100,late"
    page = (out / "summary.html").read_text()
    assert 'id="overrides"' in page and "copied the mask from a classmate" in page and "regrade request" in page
    assert "names no student of this class ('nobody')" in html.unescape(page)  # never dropped silently
    # rounding and capping as the rubric says, with no override
    capped = rubric.gradebook.model_copy(update={"extra_credit": "cap", "decimals": 0})
    plain_book = build(report.outcomes, rubric.model_copy(update={"gradebook": capped}))
    lines = export(plain_book, rubric.model_copy(update={"gradebook": capped}), "plain").splitlines()
    assert any(",1912,100,100," in line for line in lines)  # 106.456 capped at the maximum
    kept = build(report.outcomes, rubric)
    assert any(",1912,106.46,100," in line for line in export(kept, rubric, "plain").splitlines())
    # and `grade gradebook OUT` writes the same from what the batch stored
    assert main(["gradebook", str(out), "--format", "canvas", "--out", str(tmp_path / "canvas.csv")]) == 0
    assert (tmp_path / "canvas.csv").read_text().splitlines()[3].startswith("Alan Turing,,1912,")


def test_an_override_file_with_a_mistake_names_its_line(tmp_path: Path, rubric: Rubric, fake: FakeGrade) -> None:
    bad = tmp_path / "overrides.csv"
    bad.write_text("student,check,points,reason\nalice,causal_msk,3,typo in the check\n")
    with pytest.raises(OverrideError, match=r"line 2: check 'causal_msk' is neither 'total' nor a check"):
        read_overrides(bad, rubric)
    bad.write_text("student,check,points,reason\nalice,total,ten,x\n")
    with pytest.raises(OverrideError, match="line 2: points must be a number"):
        read_overrides(bad, rubric)
    subs = _class(tmp_path / "class", ["alice"])
    assert main(["batch", str(subs), "--out", str(tmp_path / "o"), "--overrides", str(bad), "--quiet"]) == 2
    assert fake.calls == []


# -- 9. who needs help ----------------------------------------------------------------------------------------


def test_the_students_to_look_at_first(tmp_path: Path, fake: FakeGrade, rubric: Rubric) -> None:
    names = {f"t{k:02d}": f"score={50 + 4 * k}" for k in range(12)}
    names |= {"low": "score=13", "hostile": "score=91 reads=20 commands=4 writes=4", "slow": "timeout=kv_cache"}
    report = run_batch(_class(tmp_path / "class", names), tmp_path / "out", rubric, pool=object(), jobs=1)
    page = (tmp_path / "out" / "summary.html").read_text()
    table = page[page.index('id="help-table"') : page.index("</table>", page.index('id="help-table"'))]
    listed = [
        line.split('data-student="', 1)[1].split('"', 1)[0] for line in table.splitlines() if "data-student" in line
    ]
    assert listed[0] == "low" and "hostile" in listed and "slow" in listed
    assert len([s for s in listed if s.startswith("t")]) == 9  # the 10 lowest: low and 9 of the others
    assert 'href="low/report.html"' in table and "hostile attempts: 20 reads outside its folder, 4 writes" in table
    assert "provisional: timeout" in table
    hostile = next(o for o in report.outcomes if o.id == "hostile")
    assert hostile.result.attempts.total == 28
    for sid in ("hostile", "t00"):  # the student's report, or a classmate's, never says it (the overview does)
        assert "reads outside" not in (tmp_path / "out" / sid / "report.html").read_text()


# -- 12. the class files as the run goes ----------------------------------------------------------------------


def test_class_files_are_written_as_the_run_goes(tmp_path: Path, fake: FakeGrade, rubric: Rubric) -> None:
    """Today an interrupted run left no grades.csv or overview until a re-run finished."""
    subs = _class(tmp_path / "class", ["amy", "bea", "cyd", "dot"])
    out = tmp_path / "out"
    seen: dict[str, dict[str, str]] = {}

    def look(name: str) -> None:
        seen.update({k: r["status"] for k, r in _rows(out / "grades.csv").items()})  # type: ignore[misc]

    def stop(name: str) -> None:
        raise KeyboardInterrupt

    fake.before = {"cyd": look, "dot": stop}
    with pytest.raises(KeyboardInterrupt):
        run_batch(subs, out, rubric, pool=object(), jobs=1)
    assert seen["amy"] == "graded" and seen["cyd"] == "pending" and seen["dot"] == "pending"  # type: ignore[comparison-overlap]
    rows = _rows(out / "grades.csv")  # what the interrupted run graded, the rest pending
    assert {k: r["status"] for k, r in rows.items()} == {
        "amy": "graded",
        "bea": "graded",
        "cyd": "graded",
        "dot": "pending",
    }
    assert "Not graded yet" in (out / "summary.html").read_text()
    state = json.loads((out / ".batch.json").read_text())
    assert state["entries"]["amy"]["dated_by"] == "file time"


def test_outcomes_carry_the_student() -> None:
    o = Outcome("U1902", "U1902.py", "graded", _result())
    assert o.student == "u1902"


def _result():  # type: ignore[no-untyped-def]
    from grader.models import GradeResult

    return GradeResult(
        submission="x",
        seed=1,
        score=1,
        max_score=1,
        checks=[],
        rubric="r",
        duration_s=0.0,
        diagnosis=[Diagnosis(id="a", title="A", hint="", cites="")],
    )


# -- 11. reports meant for students name the student's file ----------------------------------------------------


def test_reports_name_the_students_file_never_the_instructors_path(tmp_path: Path, fake: FakeGrade) -> None:
    """Today: "Submission class/u1002" and "Reproduce: grade class/u1002 --only ...", which no student can run."""
    subs = _class(tmp_path / "class", ["bob"])
    (subs / "u1002").mkdir()
    (subs / "u1002" / "attention_head.py").write_text("# score=50\n")
    (subs / "u1003").mkdir()
    (subs / "u1003" / "my_notebook.ipynb").write_text("{}")
    (subs / "u1004.ipynb").write_text("{}")
    report = run_batch(subs, tmp_path / "out", fake.rubric, pool=object(), jobs=1)
    assert {o.id: o.result.submission for o in report.outcomes} == {
        "bob": "attention_head.py",
        "u1002": "attention_head.py",
        "u1003": "my_notebook.ipynb",
        "u1004": "u1004.ipynb",
    }
    page = (tmp_path / "out" / "u1002" / "report.html").read_text()
    assert str(subs) not in page and "class/u1002" not in page
