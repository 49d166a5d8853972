"""The CUDA fused-kernel check without a GPU: skip logic, rubric wiring and the tolerance rule.

The rule runs end to end on CPU with float32 (and CPU float16) standing in for the GPU's half types:
the whole path (worker, SDPA backends selected one at a time, float64 golden, table) is the one a GPU
run takes; only DEVICE and DTYPES differ.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from grader.checks import _cuda
from grader.library import known_heads, reference_path
from grader.models import CheckResult
from grader.report.wording import text
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import WorkerPool

CHAFFS = {h.id: h for h in known_heads("chaff")}
VARIANTS = {h.id: h for h in known_heads("variant")}
NO_CUDA = not torch.cuda.is_available()
_FOLDERS = itertools.count()


def _check(source: str, write_head, rubric: Rubric, pool: WorkerPool, device: str = "cpu") -> CheckResult:  # type: ignore[no-untyped-def]
    folder = write_head(source, name=f"sub{next(_FOLDERS)}")
    result = grade(folder, rubric, only=["fused_kernel_cuda"], pool=pool, device=device, label="attention_head.py")
    (check,) = result.checks
    return check


@pytest.fixture
def cpu_standin(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run the GPU path on CPU; returns a setter for the stand-in dtypes."""
    monkeypatch.setattr(_cuda, "DEVICE", "cpu")

    def use(*dtypes: torch.dtype) -> None:
        monkeypatch.setattr(_cuda, "DTYPES", dtypes)

    use(torch.float32)
    return use


# ---- the rule itself ---------------------------------------------------------------------------------


def test_rule_is_factor_times_worst_baseline_plus_rounding_step() -> None:
    assert _cuda.rule_allows(2.9e-3, [1e-3, 0.5e-3], 3.0, 0.0) == (True, 3e-3)
    ok, allowed = _cuda.rule_allows(3.2e-3, [1e-3, 0.5e-3], 3.0, 1e-4)
    assert not ok and allowed == pytest.approx(3.1e-3)
    assert _cuda.rule_allows(1e-7, [0.0], 3.0, 2e-7)[0]  # exact baselines: the rounding step is the floor


def test_rule_never_passes_nan_and_ignores_broken_baselines() -> None:
    assert not _cuda.rule_allows(math.inf, [1e-3], 3.0, 1e-3)[0]
    assert not _cuda.rule_allows(math.nan, [1e-3], 3.0, 1e-3)[0]
    assert _cuda.rule_allows(1e-3, [math.inf, 1e-3], 3.0, 0.0) == (True, 3e-3)


def test_rounding_step_matches_flash_attention_floor() -> None:
    golden = torch.linspace(-3, 3, 101, dtype=torch.float64)
    g = golden.to(torch.float16)
    assert _cuda.rounding_step(golden, torch.float16) == 2 * float(((g + 0.3) - 0.3 - g).abs().max())
    assert _cuda.rounding_step(golden, torch.float32) < 1e-6 < _cuda.rounding_step(golden, torch.bfloat16)


def test_row_uses_the_gradient_factor_for_gradients() -> None:
    row = _cuda.Row("grad W_Q", 4.9e-3, {"plain formula": 1e-3, "flash": "unavailable: x"}, 0.0)
    assert row.factor == _cuda.FACTORS["grad"] and row.judge() == (True, 5e-3)
    assert not _cuda.Row("out", 4.9e-3, {"plain formula": 1e-3}, 0.0).judge()[0]


# ---- skip logic and rubric wiring ----------------------------------------------------------------------


def test_rubric_counts_cuda_as_extra_credit(rubric: Rubric) -> None:
    assert rubric.cuda == "extra_credit"
    assert rubric.checks["fused_kernel_cuda"].extra_credit and rubric.checks["fused_kernel_cuda"].enabled


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA GPU")
def test_skipped_without_cuda_and_not_counted(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    folder = write_head(reference_path().read_text(), name="ref")
    result = grade(folder, rubric, only=["fused_kernel_cuda", "fused_kernel"], pool=pool)
    cuda = next(c for c in result.checks if c.id == "fused_kernel_cuda")
    assert cuda.status == "skipped" and cuda.score == 0 and cuda.extra_credit
    assert cuda.message.startswith(f"Skipped: {_cuda.unavailable_reason()}, so the GPU half of the fused-kernel")
    assert "This does not count against you: the rubric makes this check extra credit." in cuda.message
    assert result.max_score == rubric.checks["fused_kernel"].points  # the skipped GPU part adds nothing


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA GPU")
def test_forced_cuda_without_gpu_is_an_error(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    check = _check(reference_path().read_text(), write_head, rubric, pool, device="cuda")
    assert check.status == "error"
    assert check.message.startswith(f"--device cuda was requested, but {_cuda.unavailable_reason()};")


def test_excluded_by_rubric(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    excluded = rubric.model_copy(update={"cuda": "excluded"})
    check = _check(reference_path().read_text(), write_head, excluded, pool)
    assert check.status == "skipped" and "excludes the CUDA comparison" in check.message
    disabled = rubric.model_copy(deep=True)
    disabled.checks["fused_kernel_cuda"].enabled = False
    result = grade(
        write_head(reference_path().read_text(), name="disabled"),
        disabled,
        pool=pool,
        only=["fused_kernel_cuda"],
    )
    assert result.checks == []


# ---- the whole path on CPU, float32 standing in for the half types ------------------------------------


@pytest.mark.parametrize("source", ["reference", "scale_query_first", "manual_stable_softmax", "row_loop"])
def test_correct_heads_pass_the_rule(source: str, cpu_standin, write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    text = reference_path().read_text() if source == "reference" else VARIANTS[source].source()
    check = _check(text, write_head, rubric, pool)
    assert check.status == "passed", check.message
    if source == "reference":
        assert check.message.startswith(
            "Within the FlashAttention-style bound for float32 on cpu, forward and backward, against every "
            "SDPA "
            "backend available.\nfloat32 on cpu, {'B': 2, 'T': 128, 'd': 64, 'd_k': 40, 'd_v': 40}"
        )
        header = check.message.splitlines()[2].split()
        assert header == ["yours", "plain", "formula", "flash", "mem-efficient", "cuDNN", "math", "allowed"]
        assert "mem-efficient: unavailable: " in check.message  # CPU has only flash and math


def test_wrong_scale_fails_the_rule(cpu_standin, write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    check = _check(CHAFFS["scale_by_dk"].source(), write_head, rubric, pool)
    assert check.status == "failed"
    assert check.message.startswith(
        "In float32 on cpu your out, weights, grad X, grad W_Q, grad W_K, grad W_V are less accurate than "
        "torch's "
        "attention kernels allow: the rule is yours <= factor x (largest error of the plain formula and "
        "the SDPA "
        "backends in float32) + one rounding step, with factor 3 for the forward pass and 5 for gradients"
    )
    assert check.message.count("TOO LARGE") == 6
    assert "Smallest failing input: B=2, T=128, d=64, d_k=40, d_v=40, device=cpu, x_scale=1.0 (float32" in text(check)


def test_unstable_softmax_fails_in_float16(cpu_standin, write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    cpu_standin(torch.float16)  # CPU runs the same half-precision path; exp overflows without the max shift
    check = _check(CHAFFS["unstable_softmax"].source(), write_head, rubric, pool)
    assert check.status == "failed" and "In float16 on cpu your out" in check.message
    assert " inf " in check.message  # non-finite results show as an infinite error


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA GPU")
def test_reference_passes_on_the_gpu(write_head, rubric: Rubric, pool: WorkerPool) -> None:  # type: ignore[no-untyped-def]
    check = _check(reference_path().read_text(), write_head, rubric, pool, device="cuda")
    assert check.status == "passed", check.message
