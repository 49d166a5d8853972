"""One-shot GPU check of `fused_kernel_cuda`: run this once on a machine with a CUDA GPU.

    python benchmarks/cuda_check.py [--json FILE] [--seeds 3]

Prints, in about a minute:

1. the GPU, torch/CUDA versions and which SDPA backends torch has enabled;
2. in-process (no sandbox), for the reference and two known bugs (unstable_softmax, scale_by_dk): the
   error table per dtype (float16, bfloat16) and case: max abs error against the float64 golden of
   the head, the plain formula in that dtype and each SDPA backend (flash, mem-efficient, cuDNN,
   math), the allowed bound and the verdict;
3. calibration: over every correct variant in reference/variants and a few seeds, the largest factor
   each tensor needed (error minus rounding step, over the worst baseline), against FACTORS;
4. through the real grader and sandbox: `grade(..., device="cuda")` of the same three heads for
   fused_kernel_cuda (plus the CPU fused_kernel, streaming, KV cache and performance checks), with
   each verdict's message. A failure here but not in step 2 points at the sandbox (CUDA in the worker).

Exit status 0 when the reference passes and both bugs fail fused_kernel_cuda in steps 2 and 4.
``--cpu-dry-run`` runs the same code on CPU (float16 and bfloat16 there too) to test this script itself.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.checks import _cuda  # noqa: E402
from grader.compare import dtype_name  # noqa: E402
from grader.inputs import make_case  # noqa: E402
from grader.library import known_heads, load_reference, reference_path  # noqa: E402

BUGS = ("unstable_softmax", "scale_by_dk")
DEVICE = "cuda"
CHECKS = ["fused_kernel", "fused_kernel_cuda", "streaming_softmax", "kv_cache", "performance"]


def module(source: str) -> types.ModuleType:
    m = types.ModuleType("attention_head")
    exec(compile(source, "attention_head.py", "exec"), m.__dict__)
    return m


def heads() -> dict[str, str]:
    chaffs = {h.id: h for h in known_heads("chaff")}
    return {"reference": reference_path().read_text(), **{b: chaffs[b].source() for b in BUGS}}


def environment() -> dict[str, object]:
    env: dict[str, object] = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": DEVICE}
    if DEVICE == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, capability=f"{props.major}.{props.minor}")
    env.update(
        {
            "flash_sdp_enabled": torch.backends.cuda.flash_sdp_enabled(),
            "mem_efficient_sdp_enabled": torch.backends.cuda.mem_efficient_sdp_enabled(),
            "cudnn_sdp_enabled": torch.backends.cuda.cudnn_sdp_enabled(),
            "math_sdp_enabled": torch.backends.cuda.math_sdp_enabled(),
        }
    )
    for k, v in env.items():
        print(f"  {k}: {v}")
    return env


def table_runs(name: str, source: str, seed: int = 20417) -> tuple[bool, list[dict[str, object]]]:
    """Step 2: the check's own computation, with the head called in this process on the GPU."""
    head, ref = module(source), load_reference()
    ok, out = True, []
    for dtype in _cuda.DTYPES:
        for k, (shape, x_scale) in enumerate(_cuda.CASES):
            case = make_case(shape, seed=seed + k, x_scale=x_scale).to(dtype)
            g = torch.Generator().manual_seed(seed + 100 + k)
            u = torch.randn(shape.B, shape.T, shape.d_v, generator=g, dtype=torch.float64).to(dtype)
            on_gpu = {n: t.to(DEVICE) for n, t in case.tensors().items()}
            t0 = time.perf_counter()
            student = _cuda._with_grads(head.causal_self_attention, on_gpu, u.to(DEVICE))
            rows = _cuda.error_table(ref, case, u, DEVICE, student)
            passed = all(r.judge()[0] for r in rows)
            ok &= passed
            print(
                f"\n[{name}] {dtype_name(dtype)} {shape.as_dict()} x_scale={x_scale:g}: "
                f"{'PASS' if passed else 'FAIL'} ({time.perf_counter() - t0:.2f} s)"
            )
            print(_cuda.format_table(rows))
            out.append(
                {
                    "head": name,
                    "dtype": str(dtype),
                    "shape": shape.as_dict(),
                    "x_scale": x_scale,
                    "passed": passed,
                    "rows": [r.__dict__ for r in rows],
                }
            )
    return ok, out


def calibrate(seeds: int) -> dict[str, tuple[float, str]]:
    """Step 3: the largest factor a correct head needed, per dtype and tensor, and which head."""
    ref = load_reference()
    variants = {h.id: module(h.source()) for h in known_heads("variant") if h.function == "causal_self_attention"}
    variants["reference"] = ref
    worst: dict[str, tuple[float, str]] = {}
    for name, head in variants.items():
        for dtype in _cuda.DTYPES:
            for seed in range(seeds):
                for k, (shape, x_scale) in enumerate(_cuda.CASES):
                    case = make_case(shape, seed=1000 * seed + k, x_scale=x_scale).to(dtype)
                    g = torch.Generator().manual_seed(seed)
                    u = torch.randn(shape.B, shape.T, shape.d_v, generator=g, dtype=torch.float64).to(dtype)
                    on_dev = {n: t.to(DEVICE) for n, t in case.tensors().items()}
                    student = _cuda._with_grads(head.causal_self_attention, on_dev, u.to(DEVICE))
                    for r in _cuda.error_table(ref, case, u, DEVICE, student):
                        errs = [e for e in r.baselines.values() if isinstance(e, float) and math.isfinite(e)]
                        base = max(errs, default=0.0)
                        need = (r.student - r.atol) / base if base > 0 else 0.0
                        key = f"{dtype_name(dtype)} {r.tensor}"
                        if need > worst.get(key, (-math.inf, ""))[0]:
                            worst[key] = (need, name)
    for key, (need, name) in sorted(worst.items()):
        factor = _cuda.FACTORS["grad" if " grad" in key else key.split()[1]]
        print(f"  {key:22} needed {need:6.3f} (factor {factor:g}; worst head {name})")
    return worst


def graded(seed: int = 20417) -> tuple[bool, dict[str, dict[str, str]]]:
    """Step 4: the real grader, sandbox and worker, with --device cuda."""
    from grader.runner import checked_rubric, grade

    rubric = checked_rubric()
    ok, out = True, dict[str, dict[str, str]]()
    for name, source in heads().items():
        with tempfile.TemporaryDirectory() as d:
            Path(d).chmod(0o755)  # workers may run under their own uid
            (Path(d) / "attention_head.py").write_text(source)
            t0 = time.perf_counter()
            only = [c for c in CHECKS if c in rubric.checks]
            result = grade(Path(d), rubric, only=only, device=DEVICE, seed=seed, label=name)
            print(f"\n[{name}] graded with --device {DEVICE} in {time.perf_counter() - t0:.1f} s")
            out[name] = {c.id: c.status for c in result.checks}
            for c in result.checks:
                print(f"--- {c.id}: {c.status} ({c.duration_s} s)\n{c.message}")
            if name == "reference" and out[name].get("fused_kernel_cuda") != "passed":
                # Is it the worker's memory cap (RLIMIT_DATA) that stops CUDA from starting there?
                roomy = rubric.model_copy(update={"limits": rubric.limits.model_copy(update={"memory_mb": 65536})})
                again = grade(Path(d), roomy, only=["fused_kernel_cuda"], device=DEVICE, seed=seed, label=name)
                print(f"--- with limits.memory_mb = 65536: {again.checks[0].status}\n{again.checks[0].message}")
                out[name]["fused_kernel_cuda with memory_mb=65536"] = again.checks[0].status
        ok &= out[name].get("fused_kernel_cuda") == ("passed" if name == "reference" else "failed")
    return ok, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write everything measured to this file")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per variant in the calibration")
    parser.add_argument("--cpu-dry-run", action="store_true", help="run everything on CPU (tests this script)")
    args = parser.parse_args()
    global DEVICE
    if args.cpu_dry_run:
        DEVICE = _cuda.DEVICE = "cpu"
    reason = _cuda.unavailable_reason() if DEVICE == "cuda" else None
    if reason is not None:
        print(f"cuda_check: {reason}; run this on a machine with a CUDA GPU.", file=sys.stderr)
        return 2
    report: dict[str, object] = {}
    print("== 1. environment")
    report["environment"] = environment()
    print("\n== 2. error tables (in-process)")
    ok_tables, tables = True, []
    for name, source in heads().items():
        passed, rows = table_runs(name, source)
        ok_tables &= passed == (name == "reference")
        tables += rows
    report["tables"] = tables
    print("\n== 3. calibration over correct variants")
    report["calibration"] = calibrate(args.seeds)
    print("\n== 4. through the grader (--device cuda)")
    ok_graded, report["graded"] = graded()
    report["ok"] = ok_tables and ok_graded
    print(
        f"\ncuda_check: in-process verdicts {'as expected' if ok_tables else 'NOT as expected'}; "
        f"graded verdicts {'as expected' if ok_graded else 'NOT as expected'}"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
