"""Issue 25: ``check()`` inside a notebook grades the cells its kernel ran, as ``grade`` grades them.

The fast tests cover the pieces: a kernel's history as a notebook (cells named In [n]), the inline
display's two views, a clear error outside a notebook, and that ``from grader import check`` imports
nothing heavy. The slow ones run real notebooks in real ipykernel kernels (nbclient, jupyter_client):
a buggy head, ``check()``, the head redefined, ``check()`` again, both results against ``grade`` on the same
definitions; and the grader's processes after the kernel is shut down, restarted, interrupted mid-grade
and killed with SIGKILL mid-grade. Every wait is bounded and generous; nothing asserts how fast anything is.
"""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from processes import alive, survivors

from grader.checks import CHECKS
from grader.library import known_heads, reference_path
from grader.models import GradeResult
from grader.notebook import CheckError, check, kernel_notebook
from grader.report import wording
from grader.report.html import render_html
from grader.report.inline import FRAME_STYLE, mimebundle, plain_summary
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool, fork_supported
from grader.submission import prepare

REPO = Path(__file__).resolve().parent.parent
REFERENCE = reference_path().read_text(encoding="utf-8")
CHAFFS = {h.id: h for h in known_heads("chaff")}
HANGING_HEAD = """import time


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    while True:
        time.sleep(60)
"""
forking = pytest.mark.skipif(not fork_supported(), reason="the warm zygote (and its cleanup) is Linux's")


# -- the pieces --------------------------------------------------------------------------------------


def test_a_kernel_history_is_graded_as_a_notebook_of_those_cells(tmp_path: Path) -> None:
    """IPython's history (entry 0 empty) becomes a notebook whose cells keep their In [n]: the reduction is
    the notebook's (magics blanked, a cell that does not parse left out, a later definition winning) and the
    notes name cells as the notebook shows them."""
    history = [
        "",
        "import torch\nimport matplotlib.pyplot as plt",
        "%matplotlib inline",
        REFERENCE.replace("def causal_self_attention(", "def old_name(", 1),
        "def broken(:\n    pass",
        REFERENCE,
        "from grader import check\ncheck()",
    ]
    path = tmp_path / "notebook.ipynb"
    path.write_text(kernel_notebook(history), encoding="utf-8")
    with prepare(path) as sub:
        notes, source = sub.notes, sub.source
    assert (
        notes[0]
        == "Graded the cells this kernel ran, in the order it ran them (In [1] to In [6]), on their definitions."
    )
    assert "Not run by the grader, which needs only your definitions: In [2] and In [6]." in notes
    # In [5] is the reference whole: only its docstring is not run, which is no statement (issue 53, point 12)
    assert any(n.startswith("From In [1] and In [3] only what your definitions need was kept") for n in notes)
    assert "In [4] was left out: it is not valid Python (line 1: invalid syntax)." in notes
    assert not any("markdown" in n for n in notes)  # a history has no cells of a file to count
    assert "# ---- cell 5 ----" in source and "matplotlib" not in source and "check" not in source
    assert "def old_name" not in source  # In [3] bound only a name the contract does not need


def test_the_inline_display_holds_the_report_and_the_plain_summary(rubric: Rubric, pool: WorkerPool) -> None:
    result = grade(CHAFFS["no_scaling"].path, rubric, pool=pool, visuals=False)
    bundle = mimebundle(result)
    assert bundle["text/plain"] == plain_summary(result)
    assert bundle["text/plain"].splitlines()[-1] == wording.score_line(result)
    assert "\x1b[" not in bundle["text/plain"]  # plain text, even in a kernel that sets FORCE_COLOR
    frame = re.fullmatch(
        r'<iframe title="[^"]*" sandbox srcdoc="([^"]*)" style="([^"]*)"></iframe>', bundle["text/html"]
    )
    assert frame is not None and frame.group(2) == FRAME_STYLE
    assert html.unescape(frame.group(1)) == render_html(result)  # the report itself, byte for byte


def test_check_outside_a_notebook_says_what_to_run_instead() -> None:
    with pytest.raises(CheckError, match=r"grade attention_head\.py"):
        check()


def test_importing_check_imports_nothing_heavy() -> None:
    code = (
        "import sys\nfrom grader import check\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'pydantic', 'IPython', 'rich', 'jinja2'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


# -- real kernels ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A kernel spec that runs ipykernel on this interpreter (the default spec's argv names `python`, which
    is whatever comes first on PATH), as a KernelSpecManager."""
    for extra in ("nbclient", "nbformat", "ipykernel"):
        pytest.importorskip(extra, reason="the test extra is not installed: pip install '.[test]' (as .ci/run does)")
    return kernel_specs(tmp_path_factory.mktemp("kernels"), sys.executable)


def kernel_specs(root: Path, python: str | Path, env: dict[str, str] | None = None) -> Any:
    """A KernelSpecManager whose kernel "step4" runs ipykernel on ``python`` (the installed kit's in
    tests/test_first_hour.py), with ``env`` added to the kernel's environment."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = root / "step4" / "kernel.json"
    spec.parent.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    fields = {"argv": argv, "display_name": "step4", "language": "python", "env": env or {}}
    spec.write_text(json.dumps(fields), encoding="utf-8")
    return KernelSpecManager(kernel_dirs=[str(root)])


def _kernel_manager(kernels: Any) -> Any:
    from jupyter_client.manager import KernelManager

    return KernelManager(kernel_name="step4", kernel_spec_manager=kernels)


def _comparable(result: GradeResult) -> dict[str, Any]:
    """What ``check()`` and ``grade`` must agree on: the score, how it was counted, the causes, and every
    check's verdict, points and message (the Reproduce line, which names check(...) or grade FILE, is a field
    of its own; a timed check's measured times are not compared)."""
    checks = []
    for c in result.checks:
        message = None if CHECKS[c.id].timed else c.message
        checks.append((c.id, c.status, c.score, c.max_score, message, c.causes))
    causes = [(d.id, d.deduction) for d in result.diagnosis]
    return {
        "score": (result.score, result.max_score, result.scoring, result.score_by_checks),
        "checks": checks,
        "causes": causes,
    }


def _descendants(pid: int) -> dict[int, float]:
    try:
        return {p.pid: p.create_time() for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


@forking
@pytest.mark.slow
def test_check_in_a_notebook_gives_what_grade_gives(
    kernels: Any, tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """A notebook as a student runs it in Jupyter: a buggy head, ``check()``, the head redefined, ``check()``
    again, then two checks. Each result is what ``grade`` gives on a notebook of the cells run so far; the
    first cell's output holds the inline report of its result, the second shows its result once though the
    cell ends on it; the student's torch state is as it was; and once the kernel is shut down, no process
    of the grader is left."""
    import nbformat
    from nbclient import NotebookClient

    sources = [
        CHAFFS["no_scaling"].source(),
        "from grader import check\nr1 = check()",
        REFERENCE,
        "r2 = check()\nr2",
        'r3 = check(["causal_mask", "interface"])',
        "import torch\n"  # the student's torch state, as it was: the generator's stream, the thread count
        "torch.manual_seed(1); threads = torch.get_num_threads(); expected = torch.rand(4)\n"
        "torch.manual_seed(1); check('interface', show=False)\n"
        "kept = torch.equal(torch.rand(4), expected) and torch.get_num_threads() == threads",
        "from pathlib import Path\n"
        "for k, r in enumerate((r1, r2, r3), 1):\n"
        "    Path(f'r{k}.json').write_text(r.model_dump_json())\n"
        "Path('kept.json').write_text(str(kept).lower())",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    km = _kernel_manager(kernels)
    client = NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(tmp_path)}})
    seen: dict[int, float] = {}
    with client.setup_kernel(cleanup_kc=True):  # and then shut it down, as closing the notebook does
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
            seen |= _descendants(km.provisioner.pid)
    assert not km.is_alive()
    assert len(seen) >= 1  # the zygotes were there, so "no survivor" means something
    assert survivors(seen, timeout=60) == []
    errors = [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert errors == [], errors
    r1, r2, r3 = (GradeResult.model_validate_json((tmp_path / f"r{k}.json").read_text()) for k in (1, 2, 3))
    assert (tmp_path / "kept.json").read_text() == "true"
    assert nb.cells[5].outputs == []  # show=False

    def graded(cells: int, **options: Any) -> GradeResult:
        """``grade`` on a notebook file of the first ``cells`` cells."""
        path = tmp_path / f"first_{cells}.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources[:cells]]), path)
        return grade(path, rubric, pool=pool, visuals=False, **options)

    assert r1.score < r1.max_score and r2.score > r1.score  # the premise: the fix shows
    assert _comparable(r1) == _comparable(graded(2))
    assert _comparable(r2) == _comparable(graded(4))
    assert _comparable(r3) == _comparable(graded(5, only=["causal_mask", "interface"]))
    failing = next(c for c in r1.checks if c.reproduce)
    assert failing.reproduce == f'check(only="{failing.id}", seed={r1.seed})'  # check()'s own terms (issue 36.7)
    assert r1.submission == "this notebook"  # nbclient tells the kernel no file name: none is made up

    [first] = [o for o in nb.cells[1].outputs if o.output_type == "display_data"]
    frame = re.search(r'srcdoc="([^"]*)"', first.data["text/html"])
    assert frame is not None and html.unescape(frame.group(1)) == render_html(r1)  # the inline report
    assert first.data["text/plain"].splitlines()[-1] == wording.score_line(r1)
    [cause] = [d for d in r1.diagnosis if d.id == "no_scaling"]  # issue 28: the cell as the kernel numbers it
    assert cause.where is not None and cause.where.cell == 1 and cause.where.cell_label == "In [1]"
    assert sources[0].splitlines()[cause.where.line - 1].strip() == cause.where.code
    assert f"At this notebook, In [1], line {cause.where.line}: {cause.where.code}" in first.data["text/plain"]
    second = nb.cells[3].outputs
    assert [o.output_type for o in second] == ["display_data", "stream"]  # shown once, then the change line
    assert second[1].text.startswith("Since the last run: ") and "-> passed" in second[1].text


@forking
@pytest.mark.slow
def test_check_speaks_of_the_notebook_as_the_student_sees_it(
    kernels: Any, tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """Issue 36.7, in a real kernel started as Jupyter Server starts one (``JPY_SESSION_NAME``, which ipykernel
    puts in ``__session__``): ``check()`` names the notebook by its file name, numbers its cells as the editor
    shows them (In [n], markdown cells between them), and says how to rerun in check()'s terms, never with a
    command-line flag. ``grade homework.ipynb`` on the notebook as saved after the run names the same cell."""
    import nbformat
    from nbclient import NotebookClient

    path = tmp_path / "homework.ipynb"
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Project Step 4"),
            nbformat.v4.new_code_cell(CHAFFS["no_scaling"].source()),
            nbformat.v4.new_markdown_cell("Now the grader:"),
            nbformat.v4.new_code_cell(
                "from pathlib import Path\nfrom grader import check\n"
                "r = check()\nPath('r.json').write_text(r.model_dump_json())"
            ),
        ]
    )
    km = _kernel_manager(kernels)
    client = NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel(cleanup_kc=True, env={**os.environ, "JPY_SESSION_NAME": str(path)}):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    assert [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"] == []
    nbformat.write(nb, path)  # as the editor saves it: In [1] and In [2] beside the code cells
    checked = GradeResult.model_validate_json((tmp_path / "r.json").read_text())
    [shown] = [o for o in nb.cells[3].outputs if o.output_type == "display_data"]
    text, page = shown.data["text/plain"], html.unescape(shown.data["text/html"])

    assert checked.submission == "homework.ipynb" and "Step 4 feedback for homework.ipynb" in page
    [cause] = [d for d in checked.diagnosis if d.id == "no_scaling"]
    assert cause.where is not None and (cause.where.file, cause.where.cell_label) == ("homework.ipynb", "In [1]")
    assert f"At homework.ipynb, In [1], line {cause.where.line}: {cause.where.code}" in text
    failing = [c for c in checked.checks if c.reproduce]
    assert failing and all(c.reproduce == f'check(only="{c.id}", seed={checked.seed})' for c in failing)
    for shown_text in (text, page):
        assert "--seed" not in shown_text and "--only" not in shown_text and "notebook.ipynb" not in shown_text

    graded = grade(path, rubric, pool=pool, visuals=False)  # the same cell, named the same way
    [again] = [d for d in graded.diagnosis if d.id == "no_scaling"]
    assert again.where == cause.where
    assert wording.where_line(again) == wording.where_line(cause)


@forking
@pytest.mark.slow
def test_no_grader_process_outlives_its_kernel(kernels: Any, tmp_path: Path) -> None:
    """The grader's processes in a kernel's life: a restart leaves none of the old kernel's; an interrupt
    during a grade that would hang for minutes abandons it (its workers gone at once, the zygotes kept
    warm for the next check); SIGKILL of the kernel in the middle of such a grade leaves none."""
    rubric_path = tmp_path / "slow.toml"  # a call would hang 200 s: only the interrupt or the kill ends it
    text = (REPO / "rubrics" / "step4.toml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^per_call_timeout_s = .*$", "per_call_timeout_s = 200", text)
    rubric_path.write_text(re.sub(r"(?m)^per_submission_timeout_s = .*$", "per_submission_timeout_s = 600", text))
    km = _kernel_manager(kernels)
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        _run(kc, REFERENCE + "\nfrom grader import check\nr = check('interface')")
        before = _descendants(km.provisioner.pid)
        assert before  # the zygote
        km.restart_kernel(now=False)
        kc.wait_for_ready(timeout=120)
        assert survivors(before, timeout=60) == []

        _run(kc, f"{HANGING_HEAD}\nfrom grader import check")
        kc.execute(f"check(rubric={str(rubric_path)!r})")
        hung = _hung_worker(km.provisioner.pid)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=120)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        assert survivors(hung, timeout=60) == []
        zygotes = {p: t for p, t in _descendants(km.provisioner.pid).items() if alive(p, t)}
        assert zygotes  # still warm

        kc.execute(f"check(rubric={str(rubric_path)!r})")
        _hung_worker(km.provisioner.pid)
        seen = _descendants(km.provisioner.pid)
        os.kill(km.provisioner.pid, signal.SIGKILL)
        assert survivors(seen, timeout=60) == []
        assert set(zygotes) <= set(seen)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _run(kc: Any, code: str) -> None:
    reply = kc.execute_interactive(code, timeout=300, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]


def _hung_worker(kernel_pid: int, timeout: float = 180) -> dict[int, float]:
    """A worker under the kernel's zygotes (a grandchild of the kernel) that has lived a second or more
    (the head sleeps in every call), as pid -> create time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for zygote in psutil.Process(kernel_pid).children():
            for worker in _safe_children(zygote):
                created = worker.create_time()
                if time.time() - created > 1.0:
                    return {worker.pid: created}
        time.sleep(0.05)
    raise AssertionError("no worker ran the hanging head")


def _safe_children(proc: psutil.Process) -> Iterator[psutil.Process]:
    try:
        yield from proc.children()
    except psutil.Error:
        return
