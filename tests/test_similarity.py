"""The class similarity report: copies found, honest heads left alone.

A class of independent heads (the library's realistic heads, the notebooks' heads, the known bugs and correct
variants) with two planted copies of one of them (tests/similarity/: names renamed, statements reordered,
comments rewritten). The similarity stage reads a graded folder; grading 100 heads takes many minutes, so most
tests build that folder from the catalog (each realistic head's result.json holds the causes and score
tests/test_realistic_heads.py asserts the grader gives it). Two tests grade for real: `grade batch
--similarity` end to end on a small class, and a submission changed after grading.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import tomllib
from itertools import combinations
from pathlib import Path

import pytest

from grader.cli import main
from grader.library import known_heads
from grader.models import CheckResult, Diagnosis, GradeResult
from grader.similarity import Boilerplate, Code, boilerplate_sources, compare_class, write_similarity

HERE = Path(__file__).resolve().parent
REALISTIC = HERE / "realistic"
NOTEBOOKS = HERE / "notebooks"
PLANTED = HERE / "similarity"
ORIGINAL = "gpt_walkthrough_head"  # the head the planted copies were made from
COPIES = {ORIGINAL, "planted_copy_1", "planted_copy_2"}
# tests/notebooks/make_notebooks.py puts one HEAD in these four notebooks among other cells: copies of one code
NOTEBOOK_RING = {"colab_drive_pandas_tqdm_seaborn", "plots_and_magics", "slow_training_and_raise", "time_magic_head"}
HEAD_TOO = "buggy_then_fixed"  # holds that HEAD as well, after a buggy head of its own: half of it, no copy
CATALOG = {h["id"]: h for h in tomllib.loads((REALISTIC / "catalog.toml").read_text())["head"]}


def _result(name: str, head: dict) -> GradeResult:
    check = CheckResult(
        id="reference_match",
        title="t",
        cites="",
        status="passed",
        score=1,
        max_score=1,
        message="",
        seed=1,
        duration_s=0.0,
    )
    return GradeResult(
        submission=name,
        seed=1,
        score=head["score"],
        max_score=100,
        checks=[check],
        rubric="Project Step 4",
        duration_s=1.0,
        diagnosis=[Diagnosis(id=c, title=c.replace("_", " "), hint="", cites="") for c in head["causes"]],
    )


def build_class(tmp: Path) -> tuple[Path, Path]:
    """SUBMISSIONS (realistic heads, notebooks, the known bugs and correct variants as the grader runs them,
    planted copies) and OUT, the realistic heads graded as the catalog says (the others are compared on
    their code alone)."""
    subs, out = tmp / "subs", tmp / "out"
    subs.mkdir()
    for kind in ("chaff", "variant"):
        for head in known_heads(kind):
            (subs / f"{kind}_{head.id}.py").write_text(head.source())
    for f in REALISTIC.glob("*.py"):
        shutil.copy(f, subs / f.name)
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(nb, subs / nb.name)
    for f in PLANTED.glob("planted_copy_*.py"):
        shutil.copy(f, subs / f.name)
    for f in subs.glob("*.py"):
        head = CATALOG.get(ORIGINAL if f.stem.startswith("planted") else f.stem)
        if head is None:
            continue
        (out / f.stem).mkdir(parents=True)
        (out / f.stem / "result.json").write_text(_result(f.name, head).model_dump_json())
        (out / f.stem / "report.html").write_text("<!doctype html><title>report</title>")
    return subs, out


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    subs, out = build_class(tmp_path_factory.mktemp("class"))
    report = write_similarity(out, subs)
    return subs, out, report


def test_planted_copies_rank_first_and_are_flagged_and_no_independent_pair_is(graded) -> None:
    subs, out, report = graded
    assert report.submissions == len(list(subs.iterdir())) >= 100
    planted = {frozenset((p.a, p.b)) for p in report.pairs[:3]}
    assert planted == {
        frozenset(pair)
        for pair in [(ORIGINAL, "planted_copy_1"), (ORIGINAL, "planted_copy_2"), ("planted_copy_1", "planted_copy_2")]
    }
    flagged = [p for p in report.pairs if p.flagged]
    ring = {frozenset(pair) for pair in combinations(sorted(NOTEBOOK_RING), 2)}
    assert {frozenset((p.a, p.b)) for p in flagged} == planted | ring, [(p.a, p.b, p.similarity, p.z) for p in flagged]
    # the notebooks holding one HEAD are one group of copies, however many hold it; the planted copies,
    # reordered as well, are flagged as pairs
    assert [g.members for g in report.groups] == [sorted(NOTEBOOK_RING)]
    assert all(p.copies and p.group == 1 for p in flagged if frozenset((p.a, p.b)) in ring)
    # far out: each planted pair lies well past the cut-off, the best independent pair well inside it
    independent = [p for p in report.pairs if not ({p.a, p.b} <= COPIES or {p.a, p.b} <= NOTEBOOK_RING | {HEAD_TOO})]
    assert min(p.z for p in flagged if frozenset((p.a, p.b)) in planted) > 2 * report.z_flag
    assert max((p.evidence for p in independent), default=0) < report.z_flag - 0.5


def test_the_copies_match_on_the_head_not_on_the_shared_helpers(graded) -> None:
    """The helpers every realistic head shares verbatim are common to the class, so nobody's: the
    matching lines of a planted pair are its head's, above `def gaussian_positional_weights`."""
    subs, _, report = graded
    pair = next(p for p in report.pairs if {p.a, p.b} == {ORIGINAL, "planted_copy_1"})
    for sid, lines in ((pair.a, pair.lines_a), (pair.b, pair.lines_b)):
        text = (subs / f"{sid}.py").read_text().splitlines()
        helpers = next(i for i, line in enumerate(text, 1) if line.startswith("def gaussian_positional_weights"))
        # a last fingerprint may run into the next definition's first line or two (a k-gram's tail)
        assert lines and all(last <= helpers + 2 for _, last in lines), (sid, lines, helpers)
    assert report.common_dropped > 0


def test_csv_has_one_row_per_pair_above_the_floor(graded) -> None:
    _, out, report = graded
    rows = list(csv.DictReader(io.StringIO((out / "similarity.csv").read_text())))
    assert list(rows[0]) == ["a", "b", "similarity", "flagged", "rare_causes", "lines_a", "lines_b", "group"]
    assert len(rows) == len(report.pairs) < report.pairs_total
    flagged = sum(p.flagged for p in report.pairs)
    assert [r["flagged"] for r in rows] == ["true" if p.flagged else "false" for p in report.pairs] and flagged == 9
    assert [r["group"] for r in rows].count("1") == 6 and {r["group"] for r in rows} == {"", "1"}
    assert all(0 <= float(r["similarity"]) <= 1 for r in rows)
    assert rows[0]["lines_a"] and all(part.replace("-", "").isdigit() for part in rows[0]["lines_a"].split(";"))


def test_page_draws_the_distribution_and_the_flagged_pairs_side_by_side(graded) -> None:
    _, out, report = graded
    page = (out / "similarity.html").read_text()
    assert page.count('class="pair flagged"') == 9 and page.count('class="group"') == 1
    assert 'id="group-1"' in page and page.count('href="#group-1"') == 6
    assert f'href="{ORIGINAL}/report.html"' in page and 'href="planted_copy_1/report.html"' in page
    assert "<mark>" in page and "scale by sqrt d model" in page  # the causes beside the code
    assert "<script" not in page and "http" not in page.split("<footer")[0].replace("http-equiv", "")
    assert page.count("<rect") == len(report.histogram)


def test_students_folders_are_untouched(graded) -> None:
    """Privacy: nothing of the report is written into a student's folder (their report and results)."""
    _, out, _ = graded
    for folder in (p for p in out.iterdir() if p.is_dir()):
        assert sorted(f.name for f in folder.iterdir()) == ["report.html", "result.json"]
        assert "similar" not in (folder / "report.html").read_text().lower()


@pytest.fixture(scope="module")
def ring_class() -> tuple[object, object]:
    """A class of 60 (tests/similarity/classes.py, seed 2): heads written apart, skeleton and tutorial
    followers, short textbook heads, and a ring of five: a lines-to-edit-length realistic head and four
    renamed, recommented copies of it."""
    from similarity.classes import build_class as build

    cls = build(60, ring=5, seed=2)
    report = compare_class([Code(h.id, h.text) for h in cls.heads], {}, course=boilerplate_sources())
    return cls, report


def test_a_ring_of_five_renamed_copies_is_one_group_and_every_pair_is_flagged(ring_class) -> None:
    """Issue 54.2: each of the ring's passages is in five submissions, more than --common: they counted as
    nobody's and the ring hid itself (0 of its 10 pairs flagged). Copies of one code count once."""
    cls, report = ring_class
    ring = cls.rings[0]
    assert [g.members for g in report.groups] == [sorted(ring)]
    inside = [p for p in report.pairs if {p.a, p.b} <= set(ring)]
    assert len(inside) == 10 and all(p.flagged and p.copies and p.group == 1 for p in inside)


def test_a_ring_of_ten_copies_of_a_short_head_others_partly_share_is_one_group() -> None:
    """Issue 54.2: ten renamed copies of a short head (tests/similarity/classes.py, held-out class 1001, since
    tuned on) whose lines one to four other heads also hold: each passage was in 11 to 14 submissions, more
    than the 10 that make a passage the class's, so the head's own code was 29 characters, too little to call
    them copies, and the ring was missed (0 of its 45 pairs). Copies of one code are one holder of a passage."""
    from similarity.classes import build_class as build

    cls = build(60, ring=10, seed=1001, held_out=True)
    report = compare_class([Code(h.id, h.text) for h in cls.heads], {}, course=boilerplate_sources())
    ring = sorted(cls.rings[0])
    assert [g.members for g in report.groups] == [ring]
    flagged = [(p.a, p.b) for p in report.pairs if p.flagged]
    assert len(flagged) == 45 and all({a, b} <= set(ring) for a, b in flagged)


def test_short_heads_and_skeleton_followers_are_not_flagged(ring_class) -> None:
    """Issue 54.3: two short heads of 5 to 9 lines that share a few of them, and students filling one public
    skeleton, were flagged; the skeleton is learned from the class (more than two independent submissions
    hold it), and a head shorter than the class's median is measured on that median."""
    cls, report = ring_class
    origin = {h.id: h.origin for h in cls.heads}
    short = {"lines_to_edit", "textbook"}
    followers = {"lab_module", "cs_functions", "tutorial_head"}
    assert [(p.a, p.b) for p in report.pairs if p.flagged and not p.copies] == []
    assert report.floor > 0
    # not for want of such pairs: the class has short heads and followers that share passages
    kinds = {frozenset((origin[p.a], origin[p.b])) for p in report.pairs}
    assert any(k <= short for k in kinds) or any(len(k) == 1 and k <= followers for k in kinds)


def test_a_notebook_is_compared_on_the_definitions_the_grader_kept(tmp_path: Path) -> None:
    """A copy of a head pasted into a notebook among demo cells matches the original; the demo cells the
    grader drops (here a long plotting loop copied into both) do not count."""
    import nbformat

    head = (REALISTIC / "sqrt_T_scale.py").read_text()
    demo = "\n".join(f"for step in range({k}):\n    print('epoch', step, {k} * step)" for k in range(12))
    subs = tmp_path / "subs"
    subs.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(head), nbformat.v4.new_code_cell(demo)])
    (subs / "copier.ipynb").write_text(nbformat.writes(nb))
    other = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell((REALISTIC / "einsum_head.py").read_text()), nbformat.v4.new_code_cell(demo)]
    )
    (subs / "honest.ipynb").write_text(nbformat.writes(other))
    shutil.copy(REALISTIC / "sqrt_T_scale.py", subs / "original.py")
    out = tmp_path / "out"
    out.mkdir()
    report = write_similarity(out, subs)
    by_pair = {frozenset((p.a, p.b)): p for p in report.pairs}
    copy = by_pair[frozenset(("copier", "original"))]
    assert copy.similarity > 0.3
    assert frozenset(("copier", "honest")) not in by_pair or by_pair[frozenset(("copier", "honest"))].similarity < 0.1
    assert any("no result" in n for n in report.notes)  # not graded yet: compared on its code alone


def test_a_leaked_reference_handed_in_twice_is_found_by_the_verbatim_pass() -> None:
    """Two students hand in the reference itself (one with a comment changed): the normalised pass removes it
    as the course's code (an honest head may normalise to it); the verbatim pass, which removes only what
    students are given, sees the same text twice. A correct head written independently is not flagged."""
    from grader.library import reference_path

    ref = reference_path().read_text()
    honest = [Code(f.stem, f.read_text()) for f in sorted(REALISTIC.glob("*.py"))[:16]]
    codes = [*honest, Code("x1", ref.replace("# (B, T, T)", "# shapes")), Code("x2", ref)]
    report = compare_class(codes, {}, course=boilerplate_sources())
    top = report.pairs[0]
    assert {top.a, top.b} == {"x1", "x2"} and top.flagged
    assert top.verbatim > 0.5 and top.normalised < 0.1
    assert [p for p in report.pairs if p.flagged] == [top]
    # without the instructor's code among the boilerplate at all, the normalised pass sees it too
    plain = compare_class(codes, {}, course=Boilerplate(given=boilerplate_sources().given))
    assert plain.pairs[0].normalised > 0.5


def test_rare_shared_mistake_is_named_with_its_count() -> None:
    """The same rare cause in both heads lifts a pair and is said in words beside the code."""
    codes = [Code(f.stem, f.read_text()) for f in sorted(REALISTIC.glob("*.py"))]
    results = {c.id: _result(c.id, CATALOG.get(c.id, {"score": 100, "causes": []})) for c in codes}
    report = compare_class(codes, results, course=boilerplate_sources())
    sharing = [p for p in report.pairs if p.rare_causes]
    assert sharing, "the library has pairs that share a rare cause"
    p = sharing[0]
    assert p.evidence == pytest.approx(p.z + report.rare_bonus, abs=0.02)
    n = sum(1 for r in results.values() if set(p.rare_causes) <= {d.id for d in r.diagnosis})
    assert p.rare_words.endswith(f"; {n} of {len(codes)} heads do") and 2 <= n <= report.rare_max
    title = p.rare_causes[0].replace("_", " ")
    assert p.rare_words.startswith(f"Both: {title}")


def test_command_on_a_graded_folder_and_its_errors(graded, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    subs, out, _ = graded
    assert main(["similarity", str(out), "--submissions", str(subs)]) == 0
    assert "9 flagged, 1 group of copies" in capsys.readouterr().out
    assert main(["similarity", str(tmp_path / "nowhere")]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["similarity", str(out), "--common", "0"])
    assert exc.value.code == 2 and "at least 1" in capsys.readouterr().err
    empty = tmp_path / "graded"
    empty.mkdir()
    assert main(["similarity", str(empty)]) == 2  # no record of its submissions
    assert "--submissions" in capsys.readouterr().err


def test_gradescope_export_is_read_with_its_ids(tmp_path: Path) -> None:
    export = tmp_path / "assignment_1_export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(
        "---\nsubmission_1:\n  :submitters:\n  - :name: A\n    :sid: '101'\n"
        "submission_2:\n  :submitters:\n  - :name: B\n    :sid: '102'\n"
    )
    sources = {"submission_1": REALISTIC / f"{ORIGINAL}.py", "submission_2": PLANTED / "planted_copy_2.py"}
    for k, f in enumerate(sorted(REALISTIC.glob("*.py"))[:10]):
        sources[f"submission_{k + 3}"] = f
    for name, f in sources.items():
        (export / name).mkdir()
        shutil.copy(f, export / name / "attention_head.py")
    out = tmp_path / "out"
    out.mkdir()
    report = write_similarity(out, tmp_path)
    assert {report.pairs[0].a, report.pairs[0].b} == {"101", "102"} and report.pairs[0].flagged


def test_an_export_beside_other_entries_is_a_usage_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 54.1: grade batch refuses a Gradescope export beside other entries (exit 2); grade similarity on the
    same folder printed the LayoutError's traceback. It says the same words and exits 2."""
    subs = tmp_path / "class"
    export = subs / "assignment_1_export"
    export.mkdir(parents=True)
    (export / "submission_metadata.yml").write_text("---\nsubmission_1:\n  :submitters:\n  - :sid: '101'\n")
    (export / "submission_1").mkdir()
    shutil.copy(REALISTIC / f"{ORIGINAL}.py", export / "submission_1" / "attention_head.py")
    (subs / "u1001").mkdir()
    shutil.copy(PLANTED / "planted_copy_2.py", subs / "u1001" / "attention_head.py")
    out = tmp_path / "out"
    out.mkdir()
    assert main(["similarity", str(out), "--submissions", str(subs)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert "Gradescope export" in captured.err


def test_course_notebook_given_as_boilerplate_is_nobodys(tmp_path: Path) -> None:
    """A starter notebook's given cell, pasted by two students, is the course's (--boilerplate NB): without
    it the pair is flagged for that cell; with it, what is left is the joins around the pasted cell. A third
    student who holds the cell too makes it the class's common code, learned without --boilerplate."""
    import nbformat

    given = (REALISTIC / "d2l_masked_softmax_dropout.py").read_text().split("def causal_self_attention")[0]
    starter = tmp_path / "starter.ipynb"
    starter.write_text(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(given)])))
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, f in (("s1", "einsum_head.py"), ("s2", "sqrt_T_scale.py")):
        head = (REALISTIC / f).read_text()
        (subs / f"{name}.py").write_text(head.replace("import torch\n", "import torch\n" + given, 1))
    source = REALISTIC / "d2l_masked_softmax_dropout.py"  # the cell's own head: a third holder
    for f in [f for f in sorted(REALISTIC.glob("*.py")) if f != source][:6]:
        shutil.copy(f, subs / f.name)
    out = tmp_path / "out"
    out.mkdir()

    def pair(report) -> float:
        return next((p.similarity for p in report.pairs if {p.a, p.b} == {"s1", "s2"}), 0.0)

    without, given = write_similarity(out, subs), write_similarity(out, subs, boilerplate=[starter])
    assert pair(without) > 0.3 and any(p.flagged for p in without.pairs)
    assert pair(given) < pair(without) / 3 and not any(p.flagged for p in given.pairs)
    shutil.copy(source, subs / source.name)
    learned = write_similarity(out, subs)
    assert pair(learned) < pair(without) / 3 and not any(p.flagged for p in learned.pairs)


@pytest.mark.slow
def test_grade_batch_with_similarity_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`grade batch DIR --out OUT --similarity` grades, then writes the report beside grades.csv; the
    students' reports say nothing of it; `grade similarity OUT` later finds the submissions on its own."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in (ORIGINAL, "sqrt_T_scale", "einsum_head", "softmax_dim1"):
        shutil.copy(REALISTIC / f"{name}.py", subs / f"{name}.py")
    (subs / "copier").mkdir()
    shutil.copy(PLANTED / "planted_copy_1.py", subs / "copier" / "attention_head.py")
    out = tmp_path / "out"
    assert main(["batch", str(subs), "--out", str(out), "--jobs", "2", "--quiet", "--similarity"]) == 0
    printed = capsys.readouterr().out
    assert "1 flagged" in printed and "similarity.html" in printed
    rows = list(csv.DictReader(io.StringIO((out / "similarity.csv").read_text())))
    assert {rows[0]["a"], rows[0]["b"]} == {ORIGINAL, "copier"} and rows[0]["flagged"] == "true"
    assert [r["flagged"] for r in rows].count("true") == 1
    page = (out / "similarity.html").read_text()
    assert 'href="copier/report.html"' in page and "73 / 100" in page  # the original's score, beside its code
    for sid, other in ((ORIGINAL, "copier"), ("copier", ORIGINAL)):
        for name in ("report.html", "result.json"):
            text = (out / sid / name).read_text()
            assert "similarity.html" not in text and "Class similarity" not in text and other not in text
    (out / "similarity.html").unlink()
    assert main(["similarity", str(out)]) == 0
    assert (out / "similarity.html").is_file()


@pytest.mark.slow
@pytest.mark.browser
def test_page_in_a_real_browser(graded, tmp_path: Path) -> None:
    """Headless Debian Chromium opens the page offline: no console message (no script error, blocked load
    or CSP violation), the flagged pairs side by side with their highlighted passages, and a drawn screenshot."""
    from test_browser import CHROMIUM, PNG_SIGNATURE, chromium, console_messages

    if CHROMIUM is None:
        pytest.skip("Debian chromium is not installed here (apt-get install chromium); CI runs this test")
    _, out, report = graded
    page = out / "similarity.html"
    shot = tmp_path / "similarity.png"
    run = chromium(page, tmp_path, f"--screenshot={shot}", size="1300,2000")
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_messages(run.stderr) == []
    png = shot.read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 20_000
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert dom.count('class="pair flagged"') == 9 and dom.count("<mark>") >= 18
    assert dom.count('class="group"') == 1 and all(f"<code>{m}</code>" in dom for m in NOTEBOOK_RING)
    assert dom.count("<rect") == len(report.histogram) and "<script" not in dom.lower()
    if os.environ.get("STEP4_SCREENSHOT_DIR"):
        dest = Path(os.environ["STEP4_SCREENSHOT_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "similarity.png")


def test_nothing_a_student_or_gradescope_runs_reaches_the_similarity_stage() -> None:
    """Privacy by construction: grading, the student's report and Gradescope's results never import the
    similarity stage (only the `grade batch` and `grade similarity` commands of grader/cli.py do), and its
    view never imports the batch runner."""
    from test_imports import reachable

    for m in ("grader.batch", "grader.runner", "grader.gradescope", "grader.report.html", "grader.exports"):
        assert "grader.similarity" not in reachable([m]), m
    assert "grader.batch" not in reachable(["grader.report.similarity"])


@pytest.mark.slow
def test_a_submission_changed_since_grading_is_named(tmp_path: Path, rubric) -> None:
    """Its code is compared as it is now; a note says its causes are the earlier grade's."""
    from grader.batch import run_batch

    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("sqrt_T_scale", "einsum_head"):
        shutil.copy(REALISTIC / f"{name}.py", subs / f"{name}.py")
    out = tmp_path / "out"
    run_batch(subs, out, rubric, jobs=1)
    assert not any("changed since" in n for n in write_similarity(out).notes)
    (subs / "einsum_head.py").write_text((REALISTIC / "einsum_head.py").read_text() + "\n# later\n")
    notes = write_similarity(out).notes
    assert any("1 submission has changed since" in n and n.endswith(": einsum_head") for n in notes), notes


def test_hostile_code_is_shown_as_text_and_unreadable_entries_are_named(tmp_path: Path) -> None:
    """A copied head carrying markup is drawn as text on the page; an entry the grader cannot read is left
    out with a note, never silently."""
    hostile = '# </pre><script>alert("x")</script><img src="https://example.com/x.png">\n'
    head = (REALISTIC / "d2l_masked_softmax_dropout.py").read_text()
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "one.py").write_text(hostile + head)
    (subs / "two.py").write_text(hostile + head.replace("valid_lens", "lengths"))
    for f in sorted(REALISTIC.glob("*.py"))[10:18]:  # the d2l head itself is not among them
        shutil.copy(f, subs / f.name)
    (subs / "empty").mkdir()
    (subs / "empty" / "notes.txt").write_text("nothing here")
    out = tmp_path / "out"
    out.mkdir()
    report = write_similarity(out, subs)
    assert {report.pairs[0].a, report.pairs[0].b} == {"one", "two"} and report.pairs[0].flagged
    assert any(n.startswith("empty left out: ") for n in report.notes), report.notes
    page = (out / "similarity.html").read_text()
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
