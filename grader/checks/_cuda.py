"""Fused kernels on the GPU: float16/bfloat16 agreement with every SDPA backend (Aside 8.1 context).

The student's head runs in its worker on the GPU; the golden (float64) and the low-precision baselines
(the plain formula in the low dtype and each ``scaled_dot_product_attention`` backend, selected with
``torch.nn.attention.sdpa_kernel``) are computed here, in the grader, on the same rounded inputs.
The rule is FlashAttention's: your error may be a small factor times a trusted low-precision
implementation's own error, plus one rounding step (research/numerics.md §2).

Without CUDA the check is skipped, never failed; the rubric counts it as extra credit or disables it
(``cuda = "extra_credit" | "excluded"``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.checks._base import Ctx, Verdict, check, failed, passed, skipped
from grader.compare import dtype_name
from grader.head import HeadCall
from grader.inputs import Case, Shape, make_case
from grader.oracle import Oracle

# Test seam: the CPU tests set DEVICE = "cpu" and DTYPES = (torch.float32,) to run this whole path
# with float32 standing in for the half types.
DEVICE = "cuda"
DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)
# d_k = d_v (flash needs equal head sizes), multiples of 8, not powers of 4 (numerics.md §0); the
# second case's scores overflow exp in float16 unless the row max is subtracted.
CASES: tuple[tuple[Shape, float], ...] = ((Shape(2, 128, 64, 40, 40), 1.0), (Shape(2, 64, 48, 24, 24), 2.0))
BACKENDS: dict[str, SDPBackend] = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "mem-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cuDNN": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
PLAIN = "plain formula"
TENSORS = ("out", "weights", "grad X", "grad W_Q", "grad W_K", "grad W_V")
# FlashAttention asserts 2x (FA2) and 2x + one rounding step (FA3); measured on CPU a correct native
# half-precision head reached 2.02x the plain formula's forward error, so 3x; gradients pass through
# more operations whose rounding order differs between correct heads, so 5x.
FACTORS = {"out": 3.0, "weights": 3.0, "grad": 5.0}

Run = tuple[torch.Tensor, torch.Tensor | None, dict[str, torch.Tensor]]  # out, weights, grads by input name


def unavailable_reason() -> str | None:
    """Why no CUDA GPU can be used here, or None when one can."""
    if torch.version.cuda is None and torch.version.hip is None:
        return f"this torch build ({torch.__version__}) has no CUDA support"
    if not torch.cuda.is_available():
        return "no CUDA device is visible (torch.cuda.is_available() is False)"
    return None


def rule_allows(student: float, baselines: list[float], factor: float, atol: float) -> tuple[bool, float]:
    """FlashAttention-style rule: ``student <= factor * max(finite baselines) + atol``; NaN never passes."""
    finite = [e for e in baselines if math.isfinite(e)]
    allowed = factor * max(finite, default=0.0) + atol
    return math.isfinite(student) and student <= allowed, allowed


def rounding_step(golden: torch.Tensor, dtype: torch.dtype) -> float:
    """FA3's floor: twice the rounding noise of one add/sub at the golden's magnitude, in ``dtype``."""
    g = golden.to(dtype)
    return 2 * float(((g + 0.3) - 0.3 - g).abs().max())


@dataclass
class Row:
    """Max abs errors of one tensor against the float64 golden: yours and each baseline's."""

    tensor: str
    student: float
    baselines: dict[str, float | str]  # name -> error, or why that baseline did not run
    atol: float

    @property
    def factor(self) -> float:
        return FACTORS["grad" if self.tensor.startswith("grad") else self.tensor]

    def judge(self) -> tuple[bool, float]:
        errs = [e for e in self.baselines.values() if isinstance(e, float)]
        return rule_allows(self.student, errs, self.factor, self.atol)


def _err(got: torch.Tensor, golden: torch.Tensor) -> float:
    e = float((got.detach().to("cpu", torch.float64) - golden).abs().max())
    return math.inf if math.isnan(e) else e


def _with_grads(
    fn: Callable[..., tuple[torch.Tensor, torch.Tensor | None]],
    inputs: dict[str, torch.Tensor],
    u: torch.Tensor,
) -> Run:
    """``fn``'s out and weights on fresh leaves, and the gradients of <out, u> with respect to each input."""
    leaves = {k: t.detach().clone().requires_grad_(True) for k, t in inputs.items()}
    out, w = fn(*leaves.values())
    grads = torch.autograd.grad(out, list(leaves.values()), u.to(out.dtype))
    return out.detach(), None if w is None else w.detach(), dict(zip(leaves, grads, strict=True))


def _sdpa_head(backend: SDPBackend) -> Callable[..., tuple[torch.Tensor, None]]:
    def head(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor) -> tuple[torch.Tensor, None]:
        Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
        with sdpa_kernel([backend]):  # this backend only; raises when it cannot run these inputs
            # one head: (B, 1, T, d); CPU flash needs 4-D inputs
            out = F.scaled_dot_product_attention(Q[:, None], K[:, None], V[:, None], is_causal=True)
        return out[:, 0], None  # (B, 1, T, d_v) -> (B, T, d_v)

    return head


def error_table(ref: Oracle, case: Case, upstream: torch.Tensor, device: str, student: Run) -> list[Row]:
    """Errors of ``student`` and of every trusted low-precision run against the float64 golden.

    ``case`` holds the already-rounded low-precision inputs; ``upstream`` is the gradient fed back
    into ``out``. Baselines run on ``device`` in the case's dtype; a backend that cannot run there is
    listed with the reason instead of an error.
    """
    dtype = case.X.dtype
    plain = ref.head_function()
    gold = _with_grads(plain, {k: t.double() for k, t in case.tensors().items()}, upstream.double())
    on_device = {k: t.to(device) for k, t in case.tensors().items()}
    runs: dict[str, Run | str] = {PLAIN: _with_grads(plain, on_device, upstream.to(device))}
    for name, backend in BACKENDS.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                runs[name] = _with_grads(_sdpa_head(backend), on_device, upstream.to(device))
            except RuntimeError as exc:
                why = str(caught[0].message) if caught else str(exc)
                runs[name] = "unavailable: " + why.strip().splitlines()[0][:160]
    rows = []
    for tensor in TENSORS:

        def pick(run: Run, tensor: str = tensor) -> torch.Tensor | None:
            if tensor == "out":
                return run[0]
            if tensor == "weights":
                return run[1]
            return run[2][tensor.removeprefix("grad ")]

        golden = pick(gold)
        assert golden is not None
        baselines: dict[str, float | str] = {}
        for name, run in runs.items():
            if isinstance(run, str):
                baselines[name] = run
            else:
                got = pick(run)
                baselines[name] = "no weights" if got is None else _err(got, golden)
        mine = pick(student)
        assert mine is not None
        rows.append(Row(tensor, _err(mine, golden), baselines, rounding_step(golden, dtype)))
    return rows


def format_table(rows: list[Row]) -> str:
    """A fixed-width table: one row per tensor, one column per implementation, then the bound."""
    names = list(rows[0].baselines)
    head = f"{'':10} {'yours':>9} " + " ".join(f"{n:>13}" for n in names) + f" {'allowed':>9}  "
    lines = [head.rstrip()]
    for r in rows:
        ok, allowed = r.judge()
        cells = [f"{v:>13.3g}" if isinstance(v, float) else f"{'n/a':>13}" for v in (r.baselines[n] for n in names)]
        lines.append(
            f"{r.tensor:10} {r.student:>9.3g} " + " ".join(cells) + f" {allowed:>9.3g}  {'ok' if ok else 'TOO LARGE'}"
        )
    reasons = sorted(
        {f"{n}: {v}" for r in rows for n, v in r.baselines.items() if isinstance(v, str) and v != "no weights"}
    )
    return "\n".join(lines + reasons)


def student_run(call: HeadCall) -> Run:
    return call.out, call.weights, call.grads


@check(
    "fused_kernel_cuda",
    title="on a CUDA GPU, float16/bfloat16 results are as accurate as torch's fused attention kernels",
    cites="Aside 8.1 (fused kernels compute the same function)",
    needs=(),  # a missing head must not turn "no GPU here" into a failure
)
def fused_kernel_cuda(ctx: Ctx) -> Verdict:
    """Aside 8.1: a fused kernel is an exact reorganisation of the head, so on the GPU, in float16 and
    bfloat16, your outputs and gradients are within a small factor of the low-precision error of the
    plain formula and of each SDPA backend (flash, memory-efficient, cuDNN, math), measured against a
    float64 golden on the same rounded inputs."""
    verdict = _not_run(ctx)
    if verdict is not None:
        return verdict
    ctx.head.require("causal_self_attention")
    tables = []
    for dtype in DTYPES:
        for k, (shape, x_scale) in enumerate(CASES):
            case = make_case(shape, seed=ctx.seed(k), x_scale=x_scale).to(dtype)  # rounded first
            g = torch.Generator().manual_seed(ctx.seed(100 + k))
            u_out = torch.randn(shape.B, shape.T, shape.d_v, generator=g, dtype=torch.float64).to(dtype)
            u_w = torch.zeros(shape.B, shape.T, shape.T, dtype=dtype)  # SDPA returns no weights to compare
            call = ctx.head.attention(case, device=DEVICE, upstream=(u_out, u_w))
            rows = error_table(ctx.ref, case, u_out, DEVICE, student_run(call))
            bad = [r.tensor for r in rows if not r.judge()[0]]
            if bad:
                return failed(
                    _too_inaccurate(dtype, rows, bad),
                    counterexample=case.counterexample(ctx.base_seed, device=DEVICE, x_scale=x_scale),
                )
            tables.append(f"{dtype_name(dtype)} on {DEVICE}, {shape.as_dict()}, inputs x {x_scale:g}:")
            tables.append(format_table(rows))
    names = ", ".join(dtype_name(d) for d in DTYPES)
    return passed(
        f"Within the FlashAttention-style bound for {names} on {DEVICE}, forward and backward, against every "
        "SDPA backend available.\n" + "\n".join(tables)
    )


def _not_run(ctx: Ctx) -> Verdict | None:
    """Skipped without a GPU (an error when --device cuda demanded one) or when the rubric excludes it."""
    if ctx.rubric.cuda == "excluded":
        return skipped('The rubric excludes the CUDA comparison (cuda = "excluded"); not graded.')
    reason = unavailable_reason() if DEVICE == "cuda" else None
    if reason is None:
        return None
    if ctx.device == "cuda":
        return Verdict(
            "error",  # type: ignore[arg-type]
            f"--device cuda was requested, but {reason}; the GPU comparison could not run. Grade on a "
            "machine with a CUDA GPU, or without --device cuda.",
        )
    return skipped(
        f"Skipped: {reason}, so the GPU half of the fused-kernel comparison (float16 and bfloat16 against "
        "torch's flash, memory-efficient, cuDNN and math attention kernels) did not run. This does not "
        "count against you: the rubric makes this check extra credit. `grade --device cuda` on a machine "
        "with a GPU runs it; the CPU comparison is the fused_kernel check."
    )


def _too_inaccurate(dtype: torch.dtype, rows: list[Row], bad: list[str]) -> str:
    d = dtype_name(dtype)
    return (
        f"In {d} on {DEVICE} your {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} less accurate than "
        "torch's attention kernels allow: the rule is yours <= factor x (largest error of the plain formula "
        f"and the SDPA backends in {d}) + one rounding step, with factor {FACTORS['out']:g} for the forward "
        f"pass and {FACTORS['grad']:g} for gradients (FlashAttention's test rule). Max abs errors against a "
        f"float64 golden on the same inputs:\n{format_table(rows)}\n(Aside 8.1, Implementation aside 4.4)."
    )
