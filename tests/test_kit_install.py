"""The student kit as students get it (issue 17): built by ``grade student-kit``, pip-installed into a fresh
virtual environment, it holds no solution and grades a correct head to full marks.

One slow test: the fresh environment installs torch and the grader's dependencies from the package index,
and the kit grades every library head, compared with the instructor's grader head by head.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from agreement import differences, library_heads

from grader.cli import main
from grader.library import known_heads, reference_path
from grader.models import GradeResult

pytestmark = pytest.mark.slow


def function_bodies(source: str) -> dict[str, str]:
    """Each function's (and method's) body, docstring left out, as a normalised AST dump -> its name."""
    bodies = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if len(body) > 1 or len(ast.unparse(body[0] if body else ast.Pass())) > 40:  # not `return self._k`
                bodies[ast.dump(ast.Module(body=body, type_ignores=[]))] = node.name
    return bodies


def secret_bodies() -> dict[str, str]:
    """The function bodies of the reference, every chaff and every variant."""
    secret = {body: f"reference.{name}" for body, name in function_bodies(reference_path().read_text()).items()}
    for head in (*known_heads("chaff"), *known_heads("variant")):
        for body, name in function_bodies(head.path.read_text(encoding="utf-8")).items():
            secret.setdefault(body, f"{head.kind} {head.id}.{name}")
    return secret


def test_function_bodies_see_through_docstrings_and_layout() -> None:
    a = 'def f(x):\n    """doc"""\n    y = x + 1\n    return y * 2\n'
    b = "def g(x):\n    y = (x +\n         1)  # comment\n    return y * 2\n"
    assert function_bodies(a).keys() == function_bodies(b).keys() != set()
    assert function_bodies("def h(self):\n    return self._k\n") == {}  # too small to be a solution
    assert "reference.causal_self_attention" in secret_bodies().values()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(cmd: list[str | Path], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=900)
    if check:
        assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@dataclass(frozen=True)
class Kit:
    """The student kit written by ``grade student-kit`` and pip-installed into a fresh virtual environment."""

    out: Path  # the kit's folder: the wheel and INSTALL.md
    wheel: Path
    venv: Path
    python: Path
    grade: Path


KIT_URL = "https://course.example/step4/"  # where the walk's instructor publishes the kit (grade student-kit --url)


def install_kit(tmp: Path, *extra: str) -> Kit:
    """Build the kit into ``tmp/kit`` (published at ``KIT_URL``) and install it, after this torch (the CPU build)
    and with ``extra`` packages, into a fresh venv ``tmp/venv``, as a student does from the kit's INSTALL.md."""
    out = tmp / "kit"
    assert main(["student-kit", "--out", str(out), "--url", KIT_URL]) == 0
    [wheel] = out.glob("*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp)
    py, grade = venv / "bin" / "python", venv / "bin" / "grade"
    torch = f"torch=={metadata.version('torch').split('+', 1)[0]}"
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", torch, wheel, *extra], tmp)
    return Kit(out, wheel, venv, py, grade)


def test_the_kit_installs_holds_no_solution_and_grades_a_correct_head(tmp_path: Path) -> None:
    kit = install_kit(tmp_path)
    out, wheel, venv, py, grade = kit.out, kit.wheel, kit.venv, kit.python, kit.grade
    assert wheel.stat().st_size < 2**20  # under 1 MB: the snapshots are numbers of small probes
    assert (out / "INSTALL.md").is_file() and wheel.name in (out / "INSTALL.md").read_text()
    names = zipfile.ZipFile(wheel).namelist()
    leaked = [n for n in names if any(w in n for w in ("_reference", "chaff", "variant", "catalog.toml"))]
    assert leaked == [] and "grader/_snapshots/step4.safetensors" in names and "grader/_rubrics/step4.toml" in names

    where = _run([py, "-c", "import grader, os; print(os.path.dirname(grader.__file__))"], tmp_path).stdout.strip()
    installed = Path(where)
    assert installed.is_relative_to(venv), installed

    # No solution: no reference folder, and no function whose body is one of the reference's, a chaff's or a
    # variant's (the check reads every Python file of the installed package).
    assert not (installed / "_reference").exists()
    assert _run([py, "-c", "import grader._reference"], tmp_path, check=False).returncode != 0
    secret = secret_bodies()
    found = {}
    for path in sorted(installed.rglob("*.py")):
        for body, name in function_bodies(path.read_text(encoding="utf-8")).items():
            if body in secret:
                found[f"{path.relative_to(installed)}:{name}"] = secret[body]
    assert found == {}
    files = sorted(p.relative_to(installed).as_posix() for p in installed.rglob("*") if p.is_file())
    data = [f for f in files if not f.endswith((".py", ".pyc", ".j2", ".txt", ".typed", ".md", ".yml", ".toml"))]
    assert data == ["_snapshots/step4.safetensors"], data

    # A correct head (the reference submission: the head and its tests) gets full marks on every check the
    # kit grades; student_tests runs on the head and is left to the grading on submission.
    sub = tmp_path / "submission"
    sub.mkdir()
    for name in ("attention_head.py", "test_attention_head.py"):
        shutil.copyfile(reference_path().parent / name, sub / name)
    _run([grade, sub, "--json", tmp_path / "result.json"], tmp_path)
    result = json.loads((tmp_path / "result.json").read_text())
    graded = {c["id"]: c for c in result["checks"] if c["max_score"] > 0 and not c["extra_credit"] and not c["pending"]}
    assert graded and all(c["status"] == "passed" for c in graded.values()), {
        k: c["message"] for k, c in graded.items() if c["status"] != "passed"
    }
    pending = sum(c["max_score"] for c in result["checks"] if c["pending"] and not c["extra_credit"])
    assert pending == 9 and result["score"] >= result["max_score"] - pending > 0  # issue 53.1: out of the course's
    tests = next(c for c in result["checks"] if c["id"] == "student_tests")
    assert tests["pending"] and tests["max_score"] == 9 and "pass on your own head" in tests["message"]

    # pytest --step4 in the student's folder: one item per check beside the student's own tests, as the kit grades.
    listed = _run([py, "-m", "pytest", "--step4", "-q", "-p", "no:cacheprovider", "-rA"], sub, check=False)
    assert listed.returncode == 0, listed.stdout[-3000:]
    assert "attention_head.py::causal_mask" in listed.stdout and "Score:" in listed.stdout

    # Every library head, graded by the installed kit and by the instructor's grader (`grade batch` in both):
    # the same result head by head, as tests/test_kit.py finds in-process (tests/agreement.py).
    heads = tmp_path / "heads"
    heads.mkdir()
    for name, source in library_heads():
        (heads / f"{name.replace(':', '__')}.py").write_text(source, encoding="utf-8")
    # The kit's `grade` does not run `grade batch` (the instructor's): its batch code, called as the command would.
    batch = "import sys\nfrom grader.batch import batch_main\nfrom grader.similarity import BatchStage\n"
    batch += "sys.exit(batch_main(sys.argv[1:], BatchStage()))"
    _run([py, "-c", batch, heads, "--out", tmp_path / "by_kit", "--quiet"], tmp_path)
    assert main(["batch", str(heads), "--out", str(tmp_path / "by_instructor"), "--quiet"]) == 0
    differ = {}
    for folder in sorted(p for p in (tmp_path / "by_instructor").iterdir() if p.is_dir()):
        full, ours = (
            GradeResult.model_validate_json((tmp_path / side / folder.name / "result.json").read_text())
            for side in ("by_instructor", "by_kit")
        )
        if found := differences(full, ours):
            differ[folder.name] = found
    assert len(list((tmp_path / "by_kit").glob("*/result.json"))) == len(library_heads())
    assert differ == {}

    # The instructor's commands are neither offered nor run by the kit (issue 36.10): each says where it lives.
    offered = " ".join(_run([grade, "--help"], tmp_path).stdout.split())
    assert "Other commands: grade init | grade schema (each with --help)." in offered
    instructors: list[list[str | Path]] = [
        ["student-kit", "--out", tmp_path / "again"],
        ["gradescope-bundle", "--out", tmp_path / "a.zip"],
        ["batch", heads, "--out", tmp_path / "by_kit_cli"],
        ["gradescope", "--results", tmp_path / "results" / "results.json"],
    ]
    for command in instructors:
        refused = _run([grade, *command], tmp_path, check=False)
        assert refused.returncode == 2 and "the instructor's grader" in refused.stderr, refused.stderr
    assert not (tmp_path / "by_kit_cli").exists() and not (tmp_path / "results").exists()
