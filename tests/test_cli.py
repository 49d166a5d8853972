"""The `grade` command: outputs, exit codes, --only/--seed reproduction, schema export."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import main
from grader.exports import result_schema
from grader.library import known_heads, reference_path
from grader.models import GradeResult

REPO = Path(__file__).resolve().parent.parent


def test_reference_full_marks_json_and_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.json"
    code = main([str(reference_path().parent), "--json", str(out), "--fail-under", "100"])
    assert code == 0
    result = GradeResult.model_validate_json(out.read_text())
    assert all(c.status in ("passed", "skipped") for c in result.checks)
    assert result.diagnosis_steps == []  # nothing failed: no diagnosis ran
    assert result.score >= result.max_score > 0  # full marks, plus any extra credit
    assert (tmp_path / "results.html").is_file()  # the report is written beside the JSON by default
    data = json.loads(out.read_text())
    assert {"score", "max_score", "checks", "seed"} <= data.keys()
    assert {"id", "status", "score", "max_score", "message", "counterexample", "duration_s"} <= data["checks"][0].keys()
    assert "interface" in capsys.readouterr().out


def test_fail_under_exits_one_and_only_reproduces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chaff = next(h for h in known_heads("chaff") if h.id == "no_mask")
    f = tmp_path / "attention_head.py"
    f.write_text(chaff.source())
    out = tmp_path / "r.json"
    assert main([str(f), "--json", str(out), "--fail-under", "90"]) == 1
    first = GradeResult.model_validate_json(out.read_text())
    failing = next(c for c in first.checks if c.status == "failed")
    assert failing.reproduce is not None
    # which passes of the diagnosis ran, what they did and cost (issue 51): the search named the mask, the walk
    # pointed it, the proof ran; every pass ran at least once and none raised
    steps = {s.name: s for s in first.diagnosis_steps}
    assert {"crashes", "search", "naming", "point", "prove"} <= set(steps), list(steps)
    assert steps["search"].changed == steps["naming"].changed == 1 and steps["point"].changed >= 1
    assert all(s.runs >= 1 and s.raised == 0 and 0 <= s.seconds <= first.duration_s for s in steps.values())
    # The printed reproduce command reruns that check alone, with the same verdict and message.
    out2 = tmp_path / "r2.json"
    argv = shlex.split(failing.reproduce)[1:]
    assert main([*argv, "--json", str(out2)]) == 0
    again = GradeResult.model_validate_json(out2.read_text())
    assert [c.id for c in again.checks] == [failing.id]
    assert again.checks[0].message == failing.message


def test_same_input_same_bytes(tmp_path: Path) -> None:
    chaff = next(h for h in known_heads("chaff") if h.id == "no_scaling")
    f = tmp_path / "attention_head.py"
    f.write_text(chaff.source())
    texts = []
    for k in range(2):
        out = tmp_path / f"r{k}.json"
        main([str(f), "--json", str(out), "--only", "score_scaling", "reference_match", "--quiet"])
        data = json.loads(out.read_text())
        for key in ("duration_s",):
            data.pop(key)
            for c in data["checks"]:
                c.pop(key)
        for step in data["diagnosis_steps"]:  # the diagnosis's passes' times, as the durations
            step.pop("seconds")
        texts.append(json.dumps(data))
    assert texts[0] == texts[1]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["does-not-exist.py"], "does not exist"),
        (["REF", "--only", "no_such_check"], "unknown check"),
        (["REF", "--rubric", "RUBRIC"], "checks.no_such_check"),
    ],
)
def test_usage_errors_exit_two(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric = tmp_path / "bad.toml"
    rubric.write_text('name = "x"\n[checks.no_such_check]\npoints = 1\n')
    argv = [str(reference_path()) if a == "REF" else str(rubric) if a == "RUBRIC" else a for a in argv]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_rubric_errors_name_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rubric = tmp_path / "bad.toml"
    rubric.write_text('name = "x"\nsurprise = 1\n[checks.interface]\npoints = -1\n')
    assert main([str(reference_path()), "--rubric", str(rubric)]) == 2
    err = capsys.readouterr().err
    assert str(rubric) in err and "surprise" in err and "checks.interface.points" in err


def test_cuda_without_gpu_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main([str(reference_path()), "--device", "cuda"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_exported_schema_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert printed == result_schema() == (REPO / "docs" / "result.schema.json").read_text()
    schema = json.loads(printed)
    assert schema["properties"]["checks"]["type"] == "array"


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["does-not-exist.py"], "does-not-exist.py does not exist"),
        (["does-not-exist.ipynb", "--watch"], "does-not-exist.ipynb does not exist"),
        (["REF", "--rubric", "no-such-rubric.toml"], "no-such-rubric.toml: no such file"),
    ],
)
def test_a_missing_path_is_refused_before_torch_is_imported(argv: list[str], needle: str, tmp_path: Path) -> None:
    """Issue 36.9: arguments that need no import to judge are judged first; refusing them starts no sandbox
    and imports no torch (what made a typo wait seconds). The modules are read, never the clock."""
    argv = [str(reference_path()) if a == "REF" else a for a in argv]
    code = (
        "import sys\nfrom grader.cli import main\n"
        f"code = main({argv!r})\n"
        "heavy = {m for m in sys.modules if m.split('.')[0] in ('torch', 'pydantic') or m == 'grader.sandbox'}\n"
        "print(code, sorted({m.split('.')[0] if m != 'grader.sandbox' else m for m in heavy}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "2 []", done.stderr
    assert needle in done.stderr


def test_a_syntax_error_names_the_graded_file_and_shows_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36.8: the grader's private copy is attention_head.py; the student graded syntax_error.py."""
    f = tmp_path / "syntax_error.py"
    f.write_text("import math\n\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    return (X for\n")
    out = tmp_path / "r.json"
    assert main([str(f), "--json", str(out), "--only", "interface", "causal_mask"]) == 0
    result = GradeResult.model_validate_json(out.read_text())
    [cause] = result.diagnosis
    assert cause.detail is not None and "attention_head.py" not in cause.detail
    assert cause.detail.endswith(
        "SyntaxError: '(' was never closed (syntax_error.py, line 5)\n    return (X for\n           ^"
    )
    printed = capsys.readouterr().out
    assert "(syntax_error.py, line 5)" in printed and "attention_head.py" not in printed


def test_the_student_kit_offers_only_what_a_student_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36.10: in the kit (no reference: grader.library.reference_available, as the kit's edition is known
    at run time), ``grade --help`` lists no instructor's command, and each one says where it lives and exits 2
    having done nothing: no results.json under --results, no batch folder."""
    import grader.library

    with pytest.raises(SystemExit):
        main(["--help"])
    assert "grade batch" in capsys.readouterr().out  # the instructor's grader lists them
    monkeypatch.setattr(grader.library, "reference_available", lambda: False)
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert "Other commands: grade init | grade schema (each with --help)." in " ".join(listed.split())
    commands = {
        "batch": ["batch", str(reference_path().parent), "--out", str(tmp_path / "graded")],
        "gradescope": ["gradescope", "--results", str(tmp_path / "results.json")],
        "gradescope-bundle": ["gradescope-bundle", "--out", str(tmp_path / "autograder.zip")],
        "student-kit": ["student-kit", "--out", str(tmp_path / "kit")],
        "similarity": ["similarity", str(tmp_path / "graded")],
    }
    for command, argv in commands.items():
        assert command not in listed.split("Other commands:")[1]
        assert main(argv) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"`grade {command}` is the instructor's: it lives in the instructor's grader" in err
        assert "not in this student kit (step4-grader-student); nothing was done" in err
        assert main([argv[0], "--help"]) == 2  # not even its help: the kit does not run it
        capsys.readouterr()
    assert list(tmp_path.iterdir()) == []


# ---- a student's first commands (issue 53.11) ------------------------------------------------------------


def test_version_names_the_edition(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``grade --version`` prints the version and which edition is installed; exit 0, not a usage error."""
    import grader
    import grader.library

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"grade {grader.__version__} (step4-grader, the instructor's grader)\n"
    monkeypatch.setattr(grader.library, "reference_available", lambda: False)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"grade {grader.__version__} (step4-grader-student, the student kit)\n"


def test_init_writes_the_template_and_keeps_what_is_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``grade init FOLDER`` writes the bundled template (the head's stubs, the starter tests, the README and the
    CI workflow); a file already there is kept and named, never overwritten."""
    template = REPO / "student_template"
    names = ["attention_head.py", "test_attention_head.py", "README.md", ".github/workflows/grade.yml"]
    folder = tmp_path / "step4"
    assert main(["init", str(folder)]) == 0
    for name in names:
        assert (folder / name).read_bytes() == (template / name).read_bytes(), name
    out = capsys.readouterr().out
    assert "attention_head.py" in out and "grade attention_head.py" in out
    (folder / "attention_head.py").write_text("# my work\n")
    (folder / "README.md").unlink()
    assert main(["init", str(folder)]) == 0
    assert (folder / "attention_head.py").read_text() == "# my work\n"
    assert (folder / "README.md").read_bytes() == (template / "README.md").read_bytes()
    said = " ".join(capsys.readouterr().out.split())
    assert "kept attention_head.py" in said and "wrote README.md" in said


@pytest.mark.parametrize(
    "typed, meant", [("causal-mask", "causal_mask"), ("casual_mask", "causal_mask"), ("Interface", "interface")]
)
def test_an_unknown_check_suggests_the_one_meant(typed: str, meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(reference_path()), "--only", typed]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"unknown check '{typed}'; did you mean {meant}?" in err
