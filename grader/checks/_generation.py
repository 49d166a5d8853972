"""Generation and cost: the streaming softmax (Aside 8.1), the KV cache (Section 8.1) and speed (Section 8).

The two extensions are optional: a submission without them (or with the template's stubs, which raise
NotImplementedError) is skipped, never passed. The worker only reports outputs, bytes and seconds;
every comparison and bound is applied here.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from grader.checks._base import Ctx, Verdict, check, failed, passed, skipped
from grader.compare import dtype_name, mismatch, tolerance
from grader.head import NotAttempted, PeakMemory, Timing
from grader.inputs import FAMILIES, Case, Shape, make_case
from grader.models import Counterexample

# ---- streaming softmax (Aside 8.1) --------------------------------------------------------------------

# (B, T, d_k, d_v), smallest first; the first failing one is the reported counterexample.
STREAM_SHAPES = ((1, 1, 1, 1), (1, 2, 1, 1), (2, 5, 3, 4), (2, 12, 6, 9))
# Key k's scores grow by RAMP * k / sqrt(d_k) or more, so the running max rises in every block: an
# accumulator that is not rescaled is off by factors up to e^RAMP.
RAMP = 3.0
MEM_T, MEM_DK, MEM_BLOCK = 1024, 16, 32
# A dense head holds at least one T x T matrix (measured: two, scores and weights, 18 MB at T = 1024
# in float64); a streaming one holds a few (B, T, block) blocks (reference: 1.2 MB, the reverse-block
# variant 1.3 MB). Half of one T x T matrix in the input dtype (4.2 MB) separates them and still allows
# a T x T boolean mask. T / block_size = 32 as at the former (2048, 64), so every term that grows like
# T x T or T x block keeps its ratio to the bound (a correct head's margin: 3.4x, was 3.6x), in a quarter
# of the time (0.05 s).
MEM_FRACTION = 0.5


def block_sizes(T: int) -> list[int]:
    """1, T, a size above T, and small sizes that do not divide T (ragged last block)."""
    return sorted({1, T, T + 3} | {b for b in (2, 3, 5, 7) if b < T and T % b})


def make_qkv(
    B: int, T: int, d_k: int, d_v: int, *, seed: int, ramp: float = 0.0, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Projected Q, K (B, T, d_k) and V (B, T, d_v) ~ N(0, 1); with ``ramp``, later keys score higher."""
    g = torch.Generator().manual_seed(seed)
    Q = torch.randn(B, T, d_k, generator=g, dtype=torch.float64)  # (B, T, d_k)
    K = torch.randn(B, T, d_k, generator=g, dtype=torch.float64)  # (B, T, d_k)
    V = torch.randn(B, T, d_v, generator=g, dtype=torch.float64)  # (B, T, d_v)
    if ramp:
        Q[..., 0] = Q[..., 0].abs() + 1  # (B, T), every query leans towards feature 0
        K[..., 0] += ramp * torch.arange(T, dtype=torch.float64)  # (B, T), which grows along the keys
    return Q.to(dtype), K.to(dtype), V.to(dtype)


def dense_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """The golden: softmax(Q K^T / sqrt(d_k)) V in float64, masked as in Definition 4.1."""
    Q, K, V = Q.double(), K.double(), V.double()
    T = Q.shape[1]
    s = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])  # (B, T, d_k) x (B, d_k, T) -> (B, T, T)
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))  # (B, T, T)
    return torch.softmax(s, dim=-1) @ V  # (B, T, T) x (B, T, d_v) -> (B, T, d_v)


def _rows_golden(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Causal golden for selected query rows only: (B, len(rows), d_v), cheap at long T."""
    Q, K, V = Q.double(), K.double(), V.double()
    s = (Q[:, rows] @ K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])  # (B, r, d_k) x (B, d_k, T) -> (B, r, T)
    future = torch.arange(K.shape[1])[None, :] > rows[:, None]  # (r, T)
    return torch.softmax(s.masked_fill(future, float("-inf")), dim=-1) @ V  # (B, r, d_v)


def _stream_example(Q: torch.Tensor, V: torch.Tensor, seed: int, **params: float | int | bool | str) -> Counterexample:
    B, T, d_k = Q.shape
    return Counterexample(
        shape={"B": B, "T": T, "d_k": d_k, "d_v": V.shape[-1]},
        dtype=dtype_name(Q.dtype),
        seed=seed,
        params=params,
    )


@check(
    "streaming_softmax",
    title="optional streaming_attention equals dense attention for every block size, in O(T) memory",
    cites="Aside 8.1 (streaming softmax)",
    needs=("streaming_attention",),
    optional=True,
)
def streaming_softmax(ctx: Ctx) -> Verdict:
    """Aside 8.1: streaming the keys in blocks with a running max, rescaling the old denominator and
    numerator whenever the max grows, is an exact reorganisation of dense attention; it never needs a
    T x T matrix."""
    runs: list[
        tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], int, bool, dict[str, float | int | bool | str]]
    ] = []
    for k, (B, T, d_k, d_v) in enumerate(STREAM_SHAPES):
        for ramp in (0.0, RAMP):
            qkv = make_qkv(B, T, d_k, d_v, seed=ctx.seed(k), ramp=ramp)
            runs += [(qkv, b, True, {"score_ramp": ramp}) for b in block_sizes(T)]
    B, T, d_k, d_v = STREAM_SHAPES[-1]
    qkv32 = make_qkv(B, T, d_k, d_v, seed=ctx.seed(20), ramp=RAMP, dtype=torch.float32)
    runs += [(qkv32, 5, True, {"score_ramp": RAMP})]
    qkv_free = make_qkv(B, T, d_k, d_v, seed=ctx.seed(21), ramp=RAMP)
    runs += [(qkv_free, b, False, {"score_ramp": RAMP}) for b in (1, 5)]
    try:
        for n, (qkv, block, causal, params) in enumerate(runs):
            out = ctx.head.streaming(*qkv, block, causal=causal, stub_ok=n == 0)
            verdict = _compare_stream(ctx, qkv, out, block, causal, params)
            if verdict is not None:
                return verdict
        Q, K, V = make_qkv(1, MEM_T, MEM_DK, MEM_DK, seed=ctx.seed(30))
        probe = ctx.head.streaming_memory(Q, K, V, MEM_BLOCK)
    except NotAttempted as exc:
        return skipped(f"Optional extension not attempted: {exc.message}; not graded.")
    verdict = _judge_memory(ctx, (Q, K, V), probe)
    if verdict is not None:
        return verdict
    sizes = sorted({b for _, b, _, _ in runs})
    return passed(
        f"Equals dense attention (causal and unmasked, float64 and float32) for block sizes {sizes}, "
        "including sizes that do not divide T and scores whose max grows in every block; at T = "
        f"{MEM_T} it allocated {_mb(probe.peak_bytes)} at most (block_size {MEM_BLOCK}), against "
        f"{_mb(MEM_T * MEM_T * 8)} for one T x T float64 matrix and {_mb(probe.dense_peak_bytes or 0)} for "
        "the dense formula."
    )


def _compare_stream(
    ctx: Ctx,
    qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    out: torch.Tensor,
    block: int,
    causal: bool,
    params: dict[str, float | int | bool | str],
) -> Verdict | None:
    Q, K, V = qkv
    tol = tolerance("reference", Q.dtype)
    gold = dense_attention(Q, K, V, causal)
    bad = mismatch(out, gold, tol, f"out (block_size={block}, causal={causal})")
    if bad is None:
        return None
    T = Q.shape[1]
    row = bad.abs_index[1]
    blocks = math.ceil(T / block)
    if causal and not torch.equal(out[:, 0], V[:, 0]):
        # row 0 may read key 0 only, so its output is v_0 exactly unless later keys leaked in
        advice = (
            "Row 0 should equal v_0 exactly but reads later keys: mask each block with the keys' positions "
            "in the whole sequence (block start + offset), not their index inside the block (Definition 4.1)."
        )
    elif blocks > 1:
        advice = (
            "When a block raises a row's running max m, multiply the old denominator and numerator by "
            "exp(m_old - m_new) before adding the block's terms."
        )
    else:
        advice = "With a single block this is plain attention: compare with softmax(Q K^T / sqrt(d_k)) V."
    return failed(
        f"streaming_attention differs from dense attention (Aside 8.1: streaming is an exact reorganisation) "
        f"with block_size = {block} ({blocks} block{'s' if blocks > 1 else ''} for T = {T}); worst at query "
        f"row {row}.\n{bad.text()}\n{advice}",
        counterexample=_stream_example(Q, V, ctx.base_seed, block_size=block, causal=causal, **params),
        mismatch=bad,
    )


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _judge_memory(ctx: Ctx, qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor], probe: PeakMemory) -> Verdict | None:
    """Peak allocation at long T against one T x T matrix; also spot-checks the first and last rows."""
    Q, K, V = qkv
    square = MEM_T * MEM_T * Q.element_size()
    if probe.dense_peak_bytes is None or probe.dense_peak_bytes < square:
        raise RuntimeError(f"the memory meter saw only {probe.dense_peak_bytes} bytes for the dense formula")
    example = _stream_example(Q, V, ctx.base_seed, block_size=MEM_BLOCK, causal=True)
    rows = torch.cat([torch.arange(64), torch.arange(MEM_T - 64, MEM_T)])  # (128,)
    bad = mismatch(probe.result[:, rows], _rows_golden(Q, K, V, rows), tolerance("reference", Q.dtype), "out rows")
    if bad is not None:
        return failed(
            f"At T = {MEM_T} with block_size = {MEM_BLOCK}, streaming_attention differs from dense attention "
            f"(first 64 and last 64 query rows compared; Aside 8.1).\n{bad.text()}",
            counterexample=example,
            mismatch=bad,
        )
    allowed = MEM_FRACTION * square
    if probe.peak_bytes > allowed:
        return failed(
            f"streaming_attention materialises a T x T matrix: at T = {MEM_T} (B = 1, d_k = d_v = "
            f"{MEM_DK}, float64, block_size = {MEM_BLOCK}) torch allocated up to {_mb(probe.peak_bytes)} at "
            f"once during your call, but one T x T float64 matrix is {_mb(square)} and at most "
            f"{_mb(allowed)} is allowed (the dense formula peaked at {_mb(probe.dense_peak_bytes)} in the "
            "same worker). Aside 8.1 keeps only a running max, denominator and numerator per query plus "
            "one (B, T, block_size) block of scores: do not build the full score matrix or a T x T mask of "
            "floats.",
            counterexample=example,
        )
    return None


# ---- KV cache (Section 8.1) ---------------------------------------------------------------------------

KV_FAMILIES = FAMILIES[1:]  # T >= 2: with one position every cache bug is invisible


@check(
    "kv_cache",
    title="optional KV-cached decoding reproduces the causal head row by row and caches exactly the past",
    cites="Section 8.1 (autoregressive inference and the key-value cache)",
    needs=("KVCache", "cached_attention_step"),
    optional=True,
)
def kv_cache(ctx: Ctx) -> Verdict:
    """Section 8.1: feeding positions one at a time, each step's output equals that row of the full causal
    head, and after t steps the cache holds exactly the t keys and values seen (len(cache) == t)."""
    cases = [make_case(s, seed=ctx.seed(k)) for k, s in enumerate(KV_FAMILIES)]
    cases.append(make_case(KV_FAMILIES[-1], seed=ctx.seed(10), dtype=torch.float32))
    try:
        for n, case in enumerate(cases):
            verdict = _check_decode(ctx, case, stub_ok=n == 0)
            if verdict is not None:
                return verdict
    except NotAttempted as exc:
        return skipped(f"Optional extension not attempted: {exc.message}; not graded.")
    return passed(
        f"On {len(cases)} inputs (T = 2 to {KV_FAMILIES[-1].T}, float64 and float32) every decoding step "
        "equals the matching row of the full causal head, and the cache holds exactly the keys and values "
        "seen."
    )


def _check_decode(ctx: Ctx, case: Case, *, stub_ok: bool) -> Verdict | None:
    dec = ctx.head.kv_decode(case, stub_ok=stub_ok)
    s, dtype = case.shape, case.X.dtype
    tol = tolerance("reference", dtype)
    example = case.counterexample(ctx.base_seed)
    expected_lengths = list(range(1, s.T + 1))
    if dec.lengths != expected_lengths:
        t = next(i for i, (a, b) in enumerate(zip(dec.lengths, expected_lengths, strict=True)) if a != b)
        return failed(
            f"len(cache) after each of the {s.T} steps was {dec.lengths}, expected {expected_lengths}: "
            f"after step {t} (positions 0..{t} fed) the cache should hold {t + 1} position(s) but holds "
            f"{dec.lengths[t]}. cached_attention_step must append the new position's key and value to the "
            "cache (Section 8.1).",
            counterexample=example,
        )
    ref_out, _ = ctx.ref.attention(case)
    bad = mismatch(dec.steps, ref_out, tol, "step outputs stacked as (B, T, d_v)")
    if bad is not None:
        t = bad.abs_index[1]
        first = min(i for i in range(s.T) if mismatch(dec.steps[:, i], ref_out[:, i], tol, "") is not None)
        return failed(
            f"Decoding step {first} (the new position attends to positions 0..{first}, itself included) "
            f"differs from row {first} of the full causal head{'; step 0 matches' if first > 0 else ''} "
            "(Section 8.1: the cache only avoids recomputation, it does not change the result). Worst at "
            f"step {t}:\n{bad.text()}\nAppend the new key and value first, then score the query against all "
            "cached keys, scaled by 1/sqrt(d_k).",
            counterexample=example,
            mismatch=bad,
        )
    for what, got, kind, W in (
        ("keys", dec.keys, dec.keys_type, case.W_K),
        ("values", dec.values, dec.values_type, case.W_V),
    ):
        expected = case.X.double() @ W.double()  # (B, T, d_k) or (B, T, d_v)
        if got is None:
            kind = "None" if kind == "NoneType" else f"a {kind}"
            return failed(
                f"After {s.T} steps cache.{what} is {kind}, expected a (B, t, ·) tensor or a list of t "
                "(B, ·) tensors (Section 8.1).",
                counterexample=example,
            )
        if tuple(got.shape) != tuple(expected.shape):
            return failed(
                f"After {s.T} steps cache.{what} has shape {tuple(got.shape)}, expected "
                f"{tuple(expected.shape)}: exactly the {s.T} positions seen (Section 8.1).",
                counterexample=example,
            )
        bad = mismatch(got, expected, tol, f"cache.{what} vs X @ W_{what[0].upper()}")
        if bad is not None:
            return failed(
                f"After {s.T} steps cache.{what} does not hold the {what} x_t @ W_{what[0].upper()} of the "
                f"positions seen, in order (Section 8.1).\n{bad.text()}",
                counterexample=example,
                mismatch=bad,
            )
    return None


# ---- speed (Section 8) -----------------------------------------------------------------------------

# Measured with 1 thread, as the worker runs (busy 2-core machine, two runs of every head in the library and
# tests/realistic). At PERF_SHAPE: the reference and every correct variant 0.3-3.6x the worker's plain formula,
# a row loop 8.4-8.5x. At PROBE_SHAPE: the reference 1.0-1.4x, a row loop 20-27x (its Python overhead grows
# like T and the arithmetic like T^2, so it looks worst at small T and B), a double loop over (i, j)
# 900-2000x; at PERF_SHAPE that loop would need ~10 s per call, so it is judged at the probe.
# One sequence, not two: at B = 2 every (B, T, T) temporary is 8 MB, and the allocator's fresh pages made the
# formula itself 3.8x slower than at B = 1 (28 ms against 7.5 ms a call), which understated every ratio (the
# row loop read 3.3x) and cost a grade 85 ms; the verdict of every head in the library is the same at both.
PERF_SHAPE = Shape(1, 1024, 64, 48, 64)
PROBE_SHAPE = Shape(1, 256, 64, 48, 64)
LIMIT = 20.0  # at PERF_SHAPE
PROBE_LIMIT = 100.0  # at PROBE_SHAPE: 4x above a row loop, 9x below a double loop
ROUNDS, BUDGET_S = 5, 3.0  # rounds of (formula x REPEATS, yours once); stop once yours used the budget
PROBE_ROUNDS, PROBE_BUDGET_S = 3, 1.0
REPEATS = 3  # the formula is cheap: more of its calls make its fastest time a steady reference


def slowdown(t: Timing) -> tuple[float, float, float, str]:
    """(ratio, student seconds, baseline seconds, clock): the fastest call of each, on the clock that
    gives the smaller ratio.

    Other load on the machine only ever adds time, so the fastest call is the least disturbed. CPU time
    leaves out the time the worker was not scheduled; wall time leaves out threads spinning idle. Each
    only inflates, so the smaller of the two ratios is the fairer one.
    """
    best = []
    for clock, s, b in (
        ("CPU time", t.student_cpu_s, t.baseline_cpu_s),
        ("wall clock", t.student_s, t.baseline_s),
    ):
        best.append((min(s) / max(min(b), 1e-9), min(s), min(b), clock))
    return min(best)


@check(
    "performance",
    title="the head is not many times slower than the plain batched formula at T = 1024",
    cites="Section 8 (computational cost)",
    timed=True,
)
def performance(ctx: Ctx) -> Verdict:
    """Section 8: the head costs O(T^2 d_k) arithmetic done in a few batched products; a Python loop over
    entries is hundreds of times slower than the same formula written with matrix products."""
    how = "fastest of alternating calls with the plain masked formula in the same worker, float32"
    probe = make_case(PROBE_SHAPE, seed=ctx.seed(0), dtype=torch.float32)
    ratio, s, b, clock, _ = _timed(ctx, probe, PROBE_ROUNDS, PROBE_BUDGET_S, PROBE_LIMIT)
    if ratio > PROBE_LIMIT:
        detail = (
            f"yours {_ms(s)}, formula {_ms(b)}, {clock}; {how}. At T = {PERF_SHAPE.T}, where at most {LIMIT:g}x is "
            f"allowed, yours would take about {s * (PERF_SHAPE.T / PROBE_SHAPE.T) ** 2:.3g} s per call"
        )
        return failed(
            too_slow(ratio, PROBE_LIMIT, PROBE_SHAPE.T, detail, already=True)
            + "\nCompute all scores with one batched product Q K^T and the output with one product A V; no Python "
            "loop over positions (Section 8).",
            counterexample=probe.counterexample(ctx.base_seed),
        )
    case = make_case(PERF_SHAPE, seed=ctx.seed(1), dtype=torch.float32)
    ratio, s, b, clock, rounds = _timed(ctx, case, ROUNDS, BUDGET_S, LIMIT)
    detail = f"yours {_ms(s)}, formula {_ms(b)}, {clock}; {how}, {rounds} round{'s' if rounds > 1 else ''}"
    if ratio > LIMIT:
        return failed(
            too_slow(ratio, LIMIT, PERF_SHAPE.T, detail)
            + "\nReplace Python loops over positions with batched matrix products (Section 8).",
            counterexample=case.counterexample(ctx.base_seed),
        )
    return passed(
        f"{ratio:.2f}x the time of the plain batched formula at T = {PERF_SHAPE.T} ({detail}; up to "
        f"{LIMIT:g}x allowed)."
    )


# A first round whose ratio is below limit / CERTAIN_MARGIN (or above limit * CERTAIN_MARGIN) settles the
# verdict: more rounds only lower both fastest calls, and one of them would have to fall this many times
# more than the other for the verdict to change. Closer to the limit, every round is run.
CERTAIN_MARGIN = 4.0


def _timed(ctx: Ctx, case: Case, rounds: int, budget_s: float, limit: float) -> tuple[float, float, float, str, int]:
    """:func:`slowdown` of the head on ``case`` and the number of rounds run: one round first, the rest
    only when its answer is not already certain."""
    timing = ctx.head.time_head(case, rounds=1, budget_s=budget_s, baseline_repeats=REPEATS)
    ratio = slowdown(timing)[0]
    if rounds > 1 and limit / CERTAIN_MARGIN < ratio < limit * CERTAIN_MARGIN:
        left = max(budget_s - sum(timing.student_s), 0.0)
        more = ctx.head.time_head(case, rounds=rounds - 1, budget_s=left, baseline_repeats=REPEATS)
        timing = Timing(*(getattr(timing, f.name) + getattr(more, f.name) for f in dataclasses.fields(Timing)))
    return (*slowdown(timing), len(timing.student_s))


def too_slow(ratio: float, limit: float, T: int, detail: str, *, already: bool = False) -> str:
    """The failure's headline, one short sentence (what a cause made of it is titled by), then how it was timed."""
    times = f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.1f}x"
    at = f"already at T = {T}" if already else f"at T = {T}"
    return f"Your head is {times} slower than the plain batched formula {at} (at most {limit:g}x).\nTimed: {detail}."


def _ms(t: float) -> str:
    return f"{t * 1e3:.3g} ms"
