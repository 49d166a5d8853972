"""The student kit (issue 17): the reference's stored outputs stand in for the reference, and the kit's
verdicts equal the instructor's on every check both grade.

These tests grade in this process with a :class:`SnapshotOracle` over snapshots written here, exactly as
the installed kit does; ``test_kit_install.py`` builds the real wheel and installs it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import torch
from agreement import REALISTIC, differences, library_heads

from grader.checks._exercises import KERNEL_CASES, QK_CASES
from grader.inputs import FAMILIES, family_cases
from grader.kit import kit_rubric, write_snapshots
from grader.library import known_heads, reference_path
from grader.oracle import LiveOracle, Oracle, SnapshotOracle, load_oracle
from grader.rubric import Rubric, load_rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

BUNDLED_RUBRIC = reference_path().parents[1] / "rubrics" / "step4.toml"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, rubric: Rubric) -> SnapshotOracle:
    path = tmp_path_factory.mktemp("kit") / "step4.safetensors"
    write_snapshots(path, rubric, load_oracle())
    return SnapshotOracle(path)


@pytest.fixture(scope="module")
def live() -> Oracle:
    oracle = load_oracle()
    assert isinstance(oracle, LiveOracle) and oracle.edition == "instructor"
    return oracle


def test_snapshots_hold_the_references_outputs_on_the_public_cases(kit: SnapshotOracle, live: Oracle, rubric: Rubric):
    assert kit.module is None and kit.edition == "student"
    seed, public = kit.public_cases("reference_match") or (0, [])
    assert seed == rubric.seed
    drawn = list(family_cases(rubric.seed, "reference_match", FAMILIES))
    assert len(public) == len(FAMILIES)
    for stored, case in zip(public, drawn, strict=True):  # the inputs the instructor's grader draws by default
        assert stored.shape == case.shape and stored.seed == case.seed
        assert all(torch.equal(a, b) for a, b in zip(stored.tensors().values(), case.tensors().values(), strict=True))
        for causal in (True, False):
            for got, exp in zip(kit.expected(stored, causal), live.expected(case, causal), strict=True):
                assert torch.equal(got, exp)
    for T, h in (*KERNEL_CASES, *QK_CASES):
        assert torch.equal(kit.gaussian_weights(T, h), live.gaussian_weights(T, h))
    with pytest.raises(LookupError):
        kit.gaussian_weights(7, 0.25)
    assert live.public_cases("reference_match") is None


def test_the_kits_formula_is_the_reference_on_any_case(kit: SnapshotOracle, live: Oracle) -> None:
    """Pictures and the KV-cache rows use Definition 2.2 as the error model states it: the reference's values."""
    for case in family_cases(7, "anything", FAMILIES):
        for causal in (True, False):
            for a, b in zip(kit.attention(case, causal), live.attention(case, causal), strict=True):
                assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)


def test_a_case_that_is_not_stored_is_refused(kit: SnapshotOracle) -> None:
    _, public = kit.public_cases("reference_match") or (0, [])
    other = next(iter(family_cases(1, "reference_match", FAMILIES)))
    moved = type(other)(other.X + 1, other.W_Q, other.W_K, other.W_V, other.shape, public[0].seed)
    with pytest.raises(LookupError):
        kit.expected(moved, True)


def test_the_kits_rubric_has_no_hidden_checks(tmp_path: Path) -> None:
    text = (reference_path().parents[1] / "rubrics" / "step4.toml").read_text(encoding="utf-8")
    text = text.replace(
        "[checks.gaussian_qk]\npoints = 4\n", '[checks.gaussian_qk]\npoints = 4\nvisibility = "hidden"\n'
    )
    text = text.replace("[checks.determinism]\n", '[checks.determinism]\nvisibility = "hidden"\n')
    cut = kit_rubric(text)
    checks = tomllib.loads(cut)["checks"]
    assert "gaussian_qk" not in checks and "determinism" not in checks and "gaussian_kernel" in checks
    (tmp_path / "kit.toml").write_text(cut, encoding="utf-8")
    assert load_rubric(tmp_path / "kit.toml").checks.keys() == tomllib.loads(text)["checks"].keys() - {
        "gaussian_qk",
        "determinism",
    }
    assert kit_rubric(cut) == cut  # nothing hidden: unchanged
    # issue 53.1: their points stay in the kit's total, pending, with why
    from grader.runner import hidden_pending

    assert load_rubric(tmp_path / "kit.toml").pending == {"gaussian_qk": 4, "determinism": 3}
    shown = hidden_pending("gaussian_qk", 4, 1)
    assert shown.max_score == 4 and shown.score == 0 and shown.pending and "hidden checks" in shown.pending


def test_the_kits_rubric_keeps_every_price_of_a_cause_the_kit_names() -> None:
    """The kit names the error model's causes and the known bugs it stores, so a price the rubric sets for any
    of them stays; a bug that computes the reference's values (a slow loop) is named by neither edition, and
    its price would only list a bug the students' tests are graded on."""
    from grader.diagnosis import kit_cause_ids

    text = (
        BUNDLED_RUBRIC.read_text(encoding="utf-8") + "no_scaling = 2\nglobal_max_softmax = 9\npython_double_loop = 3\n"
    )
    assert {"no_scaling", "global_max_softmax", "gaussian_kernel_wrong_width"} <= kit_cause_ids()
    assert "python_double_loop" not in kit_cause_ids()
    assert tomllib.loads(kit_rubric(text))["mistakes"] == {"no_scaling": 2, "global_max_softmax": 9}


def test_the_kit_gives_a_correct_head_full_marks(kit: SnapshotOracle, rubric: Rubric, pool: WorkerPool) -> None:
    """Every check the kit grades passes; the score is out of the course's total, student_tests's points shown as
    pending with their reason (issue 53.1), and the tests ran on the head and on mutations of it."""
    from grader.report import render_html, wording

    result = grade(reference_path().parent, rubric, pool=pool, oracle=kit)
    counted = [c for c in result.checks if c.max_score > 0 and not c.extra_credit and c.pending is None]
    assert all(c.status == "passed" for c in counted), {c.id: c.message for c in counted if c.status != "passed"}
    tests = next(c for c in result.checks if c.id == "student_tests")
    assert tests.status == "passed" and tests.max_score == 9 and tests.score == 0 and tests.pending
    assert "pass on your own head" in tests.message
    own = tests.own_tests
    assert own is not None and own.passed > 0 and own.failed == 0 and own.failing == []
    assert own.mutants > 0 and own.caught + len(own.survived) == own.mutants, own
    assert f"catch {own.caught} of {own.mutants} mutations of your head" in tests.message
    total = sum(rc.points for rc in rubric.checks.values() if not rc.extra_credit)
    assert result.max_score == total == 100
    assert result.score == total - 9 + sum(c.score for c in result.checks if c.extra_credit)
    assert result.pending_points == 9
    line = wording.score_line(result)
    assert line.startswith(f"Score: {result.score:g} / 100 ("), line
    assert "9 points pending" in line
    said = wording.pending_line(result)
    assert said is not None and said.startswith("Pending, 9 points: student_tests is graded when you submit"), said
    page = render_html(result)  # the report shows the pending points and what the mutants found
    assert "9 pending" in page and "Pending, 9 points" in page and "Mutation testing: your tests catch" in page
    assert any("student kit" in n for n in result.notes)
    match = next(c for c in result.checks if c.id == "reference_match")
    assert any("another seed moves only the property checks" in n for n in match.notes)
    for cid in ("gaussian_kernel", "gaussian_qk"):
        assert any("stored kernels" in n for n in next(c for c in result.checks if c.id == cid).notes), cid


def test_the_kit_keeps_its_public_cases_under_another_seed(
    kit: SnapshotOracle, rubric: Rubric, pool: WorkerPool, write_head: Any
) -> None:
    """--seed moves the property checks only: reference_match grades the stored cases whatever the seed."""
    chaff = next(h for h in known_heads("chaff") if h.id == "scale_by_dk")
    folder = write_head(chaff.source())
    a, b = (grade(folder, rubric, pool=pool, oracle=kit, seed=s, only=["reference_match"]) for s in (rubric.seed, 7))
    assert a.checks[0].status == b.checks[0].status == "failed"
    assert a.checks[0].message == b.checks[0].message and a.checks[0].reproduce != b.checks[0].reproduce


# ---- the kit agrees with the instructor's grader -------------------------------------------------------


HEADS = library_heads()


@pytest.fixture(scope="module")
def kit_rules(tmp_path_factory: pytest.TempPathFactory) -> Rubric:
    """The rubric as the kit ships it."""
    path = tmp_path_factory.mktemp("kit-rubric") / "step4.toml"
    path.write_text(kit_rubric(BUNDLED_RUBRIC.read_text(encoding="utf-8")), encoding="utf-8")
    return load_rubric(path)


@pytest.mark.slow
@pytest.mark.parametrize("name, source", HEADS, ids=[n for n, _ in HEADS])
def test_the_kit_agrees_with_the_instructors_grader(
    name: str,
    source: str,
    kit: SnapshotOracle,
    live: Oracle,
    rubric: Rubric,
    kit_rules: Rubric,
    pool: WorkerPool,
    write_head: Any,
) -> None:
    """Every variant, chaff and realistic head: the same verdicts on every check both grade, the same causes
    in the same words, explaining the same checks at the same prices, the same scoring and total
    (tests/agreement.py; the notes say which edition graded, and a timed check quotes its timings)."""
    folder = write_head(source)
    full = grade(folder, rubric, pool=pool, oracle=live, visuals=False, parallel=False)
    ours = grade(folder, kit_rules, pool=pool, oracle=kit, visuals=False, parallel=False)
    graded_here = {c.id for c in ours.checks if c.max_score > 0 and c.pending is None}  # student_tests: pending
    assert graded_here == {c.id for c in full.checks} - {"student_tests"}
    assert differences(full, ours) == [], name


def test_every_library_head_is_compared() -> None:
    variants, chaffs = known_heads("variant"), known_heads("chaff")
    assert len(HEADS) == 1 + len(variants) + len(chaffs) + len(list(REALISTIC.glob("*.py"))) > 60


def test_the_template_installs_the_kit_without_a_token() -> None:
    root = reference_path().parents[1] / "student_template"
    workflow = (root / ".github" / "workflows" / "grade.yml").read_text(encoding="utf-8")
    assert "STUDENT_KIT_URL" in workflow and "git+" not in workflow and "secrets." not in workflow
    assert "step4_grader_student" in (root / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
@pytest.mark.parametrize("causal", [True, False])
def test_the_lecture_formula_is_the_error_model_with_no_change(dtype: torch.dtype, causal: bool) -> None:
    """The oracle writes Definition 2.2 out (it must not import the diagnosis); it is the diagnosis' error
    model with no change, to the bit, gradients included."""
    from grader.diagnosis._mutations import Fit, forward
    from grader.oracle import lecture_formula

    g = torch.Generator().manual_seed(3)
    X, W_Q, W_K, W_V = (torch.randn(*s, generator=g).to(dtype) for s in ((2, 5, 4), (4, 3), (4, 3), (4, 2)))
    X.requires_grad_()
    mine = lecture_formula(X, W_Q, W_K, W_V, causal)
    theirs = forward(X, W_Q, W_K, W_V, causal, (), Fit())
    assert theirs is not None
    assert all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    grads = [torch.autograd.grad(out[0].sum(), X)[0] for out in (mine, theirs)]
    assert torch.equal(*grads)


@pytest.mark.parametrize("head", ["reference", "scale_by_dk"])
def test_the_kits_cuda_baseline_is_the_lecture_formula(
    head: str, kit: SnapshotOracle, live: Oracle, rubric: Rubric, pool: WorkerPool, write_head: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """fused_kernel_cuda's plain baseline (float32 on CPU standing in for the GPU, as in test_cuda_logic):
    the kit's differentiable formula gives the instructor's verdict."""
    from grader.checks import _cuda

    monkeypatch.setattr(_cuda, "DEVICE", "cpu")
    monkeypatch.setattr(_cuda, "DTYPES", (torch.float32,))
    source = (
        reference_path().read_text()
        if head == "reference"
        else next(h for h in known_heads("chaff") if h.id == head).source()
    )
    folder = write_head(source)
    full, ours = (grade(folder, rubric, pool=pool, oracle=o, only=["fused_kernel_cuda"]) for o in (live, kit))
    assert full.checks[0].status == ours.checks[0].status == ("passed" if head == "reference" else "failed")


def test_the_install_note_makes_a_virtual_environment_on_every_os() -> None:
    """Issue 53.11: INSTALL.md gives the venv commands of macOS and Linux as well as Windows', says where
    attention_head.py comes from (``grade init``), and explains the CI workflow's kit URL."""
    from grader.kit import install_note

    note = install_note("step4_grader_student-0.1.0-py3-none-any.whl")
    assert "python3 -m venv .venv" in note and "source .venv/bin/activate" in note
    assert "py -m venv .venv" in note and ".venv\\Scripts\\activate" in note
    assert "grade init" in note
    assert "STUDENT_KIT_URL" in note


def test_the_kits_template_workflow_gets_the_kits_url() -> None:
    """Issue 53.11: ``grade student-kit --url`` puts the wheel's address in the template's CI workflow the kit
    bundles; a folder's address gets the wheel's name; a kit built without one keeps the placeholder."""
    from grader.kit import PLACEHOLDER_URL, workflow_with_url

    root = reference_path().parents[1] / "student_template"
    text = (root / ".github" / "workflows" / "grade.yml").read_text(encoding="utf-8")
    assert PLACEHOLDER_URL in text
    wheel = "step4_grader_student-0.1.0-py3-none-any.whl"
    filled = workflow_with_url(text, "https://course.example/step4/", wheel)
    assert f'STUDENT_KIT_URL: "https://course.example/step4/{wheel}"' in filled and PLACEHOLDER_URL not in filled
    assert workflow_with_url(text, f"https://x.example/{wheel}", wheel).count(f"https://x.example/{wheel}") == 1
