"""Measure the sandbox: cold start, warm spawn, request round trip and memory of the process tree.

    python benchmarks/sandbox_bench.py [--n 20] [--spawn]

--spawn measures the fallback used on macOS / with STEP4_NO_FORK=1 (a fresh interpreter per worker).
Self-contained: it writes a small submission and an echo ops module into a temporary directory.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.sandbox import Sandbox, SandboxLimits, WorkerPool  # noqa: E402

HEAD = """
import torch

def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    s = Q @ K.transpose(-2, -1) / K.shape[-1] ** 0.5
    T = X.shape[-2]
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ V, w
"""

ECHO_OPS = """
def dispatch(module, op, params, tensors):
    return {"n": len(tensors)}, dict(tensors)
"""


class TreeMemory:
    """Peak RSS and PSS of this process plus all its descendants, sampled on demand."""

    def __init__(self) -> None:
        self.peak_rss = self.peak_pss = 0

    def sample(self) -> None:
        me = psutil.Process()
        procs = [me] + me.children(recursive=True)
        rss = pss = 0
        for p in procs:
            try:
                full = p.memory_full_info()
            except psutil.Error:
                continue
            rss += full.rss
            pss += getattr(full, "pss", full.uss)
        self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def row(what: str, seconds: list[float]) -> str:
    med = statistics.median(seconds)
    p90 = sorted(seconds)[int(0.9 * (len(seconds) - 1))]
    unit, scale = ("s", 1.0) if med >= 1 else ("ms", 1e3)
    return f"{what:<46}{med * scale:>9.1f} {unit:<3}{p90 * scale:>9.1f} {unit:<3}{len(seconds):>5}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20, help="repetitions of each warm measurement")
    parser.add_argument("--spawn", action="store_true", help="measure the no-fork fallback instead")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
    (tmp / "sub").mkdir()
    (tmp / "sub" / "attention_head.py").write_text(textwrap.dedent(HEAD))
    ops = tmp / "echo_ops.py"
    ops.write_text(textwrap.dedent(ECHO_OPS))
    limits = SandboxLimits()
    mem = TreeMemory()
    g = torch.Generator().manual_seed(0)
    tensors = {f"t{i}": torch.randn(64, 64, generator=g, dtype=torch.float64) for i in range(50)}
    rows = []

    t0 = time.perf_counter()
    with WorkerPool(1, fork=not args.spawn) as pool:
        with Sandbox(tmp / "sub", limits, pool=pool, ops=ops) as sb:
            assert sb.start().status == "ok"
            rows.append(row(f"cold start ({pool.mode}: pool + first worker ready)", [time.perf_counter() - t0]))
            mem.sample()
            trips = timed(lambda: sb.request("echo", {}, tensors), args.n * 5)
            mem.sample()
            protections = sb.protections

        def start_only() -> None:
            with Sandbox(tmp / "sub", limits, pool=pool, ops=ops) as s:
                t = time.perf_counter()
                assert s.start().status == "ok"
                starts.append(time.perf_counter() - t)
                mem.sample()

        starts: list[float] = []
        whole = timed(start_only, args.n)
        rows.append(row(f"worker start ({pool.mode}: launch, harden, import)", starts))
        rows.append(row("whole submission (open, start, close)", whole))
        rows.append(row("round trip, 50 tensors 64x64 float64 (1.6 MB)", trips))

    print(f"{'':<46}{'median':>13}{'p90':>13}{'n':>5}")
    print("\n".join(rows))
    print(f"peak memory of grader + zygote + worker: RSS {mem.peak_rss >> 20} MiB, PSS {mem.peak_pss >> 20} MiB")
    print("protections:", ", ".join(protections))


if __name__ == "__main__":
    main()
