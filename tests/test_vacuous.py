"""Issue 53.2: every check observes what it credits. A promise of the template's docstring that no case tried (h = 0
gives the identity), a head timed while it returned None, and an experiment drawn from the global generator, which
the README forbids, each passed their check; now each fails it, saying what was seen."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from grader.library import reference_path
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

REFERENCE = reference_path().read_text(encoding="utf-8")


def _replaced(function: str, body: str) -> str:
    """The reference with ``function`` redefined at the end of the module (the later definition wins)."""
    assert f"def {function}(" in REFERENCE
    return REFERENCE + "\n\n" + body.strip() + "\n"


NAIVE_KERNEL = _replaced(
    "gaussian_positional_weights",
    """
def gaussian_positional_weights(T, bandwidth):
    i = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    j = torch.arange(T, dtype=torch.float64)[None, :]  # (1, T)
    w = torch.exp(-((i - j) ** 2) / (2 * bandwidth**2)) * (j <= i)  # (T, T): 0 / 0 on the diagonal at h = 0
    return w / w.sum(-1, keepdim=True)  # (T, T)
""",
)
RETURNS_NONE = _replaced(
    "causal_self_attention",
    """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    return None
""",
)
GLOBAL_RNG = _replaced(
    "score_scale_statistics",
    """
def score_scale_statistics(d_k, T=64, n_samples=200, seed=0):
    torch.manual_seed(seed)  # the global generator: reproducible, and forbidden by the README
    Q = torch.randn(n_samples, T, d_k, dtype=torch.float64)  # (n, T, d_k)
    K = torch.randn(n_samples, T, d_k, dtype=torch.float64)  # (n, T, d_k)
    raw = Q @ K.transpose(-2, -1)  # (n, T, T)
    scaled = raw / math.sqrt(d_k)  # (n, T, T)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)

    def max_weight(S):
        A = torch.softmax(S.masked_fill(~allowed, float("-inf")), dim=-1)  # (n, T, T)
        return A.amax(dim=-1).median().item()

    return {
        "raw_std": raw[:, allowed].std().item(),
        "scaled_std": scaled[:, allowed].std().item(),
        "raw_max_weight": max_weight(raw),
        "scaled_max_weight": max_weight(scaled),
    }
""",
)


def _graded(write_head: Callable[[str], Path], source: str, check: str, rubric: Rubric, pool: WorkerPool):  # type: ignore[no-untyped-def]
    result = grade(write_head(source), rubric, pool=pool, only=[check], visuals=False)
    [found] = result.checks
    return found


def test_h_zero_gives_the_identity_as_the_docstring_promises(
    write_head: Callable[[str], Path], rubric: Rubric, pool: WorkerPool
) -> None:
    found = _graded(write_head, NAIVE_KERNEL, "gaussian_kernel", rubric, pool)
    assert found.status == "failed", found.message
    assert found.message.startswith("At bandwidth h=0 your kernel should be the identity"), found.message
    assert "both limits hold" not in found.message


def test_a_head_returning_none_is_not_timed_as_fast(
    write_head: Callable[[str], Path], rubric: Rubric, pool: WorkerPool
) -> None:
    found = _graded(write_head, RETURNS_NONE, "performance", rubric, pool)
    assert found.status == "failed" and found.score == 0, found.message
    assert "must return a tuple of 2 tensors" in found.message, found.message  # what other checks say of it


def test_the_experiment_may_not_draw_from_the_global_generator(
    write_head: Callable[[str], Path], rubric: Rubric, pool: WorkerPool
) -> None:
    found = _graded(write_head, GLOBAL_RNG, "score_scale_experiment", rubric, pool)
    assert found.status == "failed", found.message
    assert re.search(r"global random (generator|state)", found.message) and "torch.Generator()" in found.message


def test_the_reference_passes_all_three(write_head: Callable[[str], Path], rubric: Rubric, pool: WorkerPool) -> None:
    result = grade(
        write_head(REFERENCE), rubric, pool=pool, only=["gaussian_kernel", "performance", "score_scale_experiment"]
    )
    assert [c.status for c in result.checks] == ["passed"] * 3, [c.message for c in result.checks]


def test_a_test_failing_where_every_check_passes_asserts_what_no_check_covers() -> None:
    """Issue 53.2: the kit's student_tests with a test failing on the head. Where every graded check passes, the
    test asserts a property no check covers (its docstring quoted), never 'either the head or the test is wrong';
    where a check fails, that check tells which property the head breaks."""
    from grader.checks._student_tests import uncovered
    from grader.models import CheckResult, OwnTests

    def check(cid: str, status: str, **more: object) -> CheckResult:
        return CheckResult(
            id=cid, title=cid, cites="", status=status, score=0, max_score=9, message="Head line.\nrest", seed=1,
            duration_s=0, **more,
        )  # type: ignore[arg-type]  # fmt: skip

    own = OwnTests(passed=0, failed=1, skipped=0, failing=["t.py::test_zero"], asserts="Proposition 9.9: out is 0")
    tests = check("student_tests", "failed", pending="graded on submission", own_tests=own)
    said = uncovered(tests, [check("causal_mask", "passed"), tests]).message
    assert said.splitlines()[0] == "Head line."
    assert said.splitlines()[1] == (
        "Every check of the grader passes on your head, so t.py::test_zero asserts a property no check covers "
        "(Proposition 9.9: out is 0). Check it against the lecture result it cites: on submission your tests must "
        "pass on a correct head."
    )
    assert "either the head or the test" not in said
    other = uncovered(tests, [check("causal_mask", "failed"), tests]).message
    assert "no check covers" not in other and "The failing checks tell which property your head breaks" in other
