"""Data for the report's visualisation section (Project Step 4: attention on real text and on controlled
positional kernels), computed once per submission next to the reference (grader/oracle.py: the instructor's,
or the student kit's stored outputs and the lecture's formula).

Three parts, each computed on its own so that one broken student function never hides the others:

* the head on a short real sentence: fixed-seed token embeddings plus sinusoidal positions (Section 6.2);
* the masked Gaussian positional kernel for several bandwidths (Example 7.4, Exercise 7);
* the score-scale experiment: raw versus scaled score std and the typical largest weight (Exercise 3).

Student code is reached only through :class:`grader.head.Head`; the reference runs in-process.
:func:`collect_visuals` never raises: a part the student's code cannot produce is stored with a
``problem`` saying why ("could not be computed: ...").
"""

from __future__ import annotations

import functools
import json
import math
import threading
import traceback
from collections.abc import Callable
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TypeVar

import torch

from grader.checks._exercises import STAT_KEYS, STATS_DKS, STATS_SAMPLES, STATS_T, stats_seed
from grader.head import Head, StudentFailure
from grader.inputs import Case, Shape
from grader.models import Heatmap, KernelVisual, Panel, ScalePoint, ScaleVisual, SentenceVisual, Visuals
from grader.oracle import MEASURED_FILE, Oracle, measurement_key, source_sha256

SENTENCE_D, SENTENCE_DK, SENTENCE_DV = 16, 8, 8
MAX_TOKENS = 12
KERNEL_T = 8
BANDWIDTHS = (0.5, 1.0, 2.0, 4.0)
SCALE_DKS = (4, *STATS_DKS)  # Exercise 3 asks for 16, 64, 256; 4 shows the trend starting
# The check's own measurement (50 x 2080 causal scores: std to < 1%), reused here when it ran.
SCALE_T, SCALE_SAMPLES = STATS_T, STATS_SAMPLES


# ---- computing it ----------------------------------------------------------------------------------

_T = TypeVar("_T")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, StudentFailure):
        return f"could not be computed: {exc.message}"
    last = traceback.format_exception_only(exc)[-1].strip()
    return f"could not be computed: internal grader error ({last})"


def _attempt(fn: Callable[[], _T]) -> tuple[_T | None, str | None]:
    """``fn()`` or the reason it failed; student failures and grader bugs alike become data."""
    try:
        return fn(), None
    except Exception as exc:  # the boundary: a visual never takes the report down
        return None, _reason(exc)


def _rows(t: torch.Tensor) -> list[list[float | None]]:
    t = t.detach().to("cpu", torch.float64)
    return [[float(f"{v:.6g}") if math.isfinite(v) else None for v in row] for row in t.tolist()]


def _heatmap(title: str, w: torch.Tensor, causal: bool = True) -> Heatmap:
    return Heatmap(title=title, kind="weights", data=_rows(w), causal=causal)


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    d = (a.detach().cpu().double() - b.double()).abs().nan_to_num(float("inf"))
    return float(d.max()) if d.numel() else 0.0


def _panel(label: str, yours: Callable[[], torch.Tensor], reference: Callable[[], torch.Tensor]) -> Panel:
    ref, ref_problem = _attempt(reference)
    got, problem = _attempt(yours)
    if got is not None and ref is not None and tuple(got.shape) != tuple(ref.shape):
        problem = f"could not be computed: got shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
        got = None
    return Panel(
        label=label,
        yours=None if got is None else _heatmap("your weights", got),
        reference=None if ref is None else _heatmap("reference weights", ref),
        problem=problem or ref_problem,
        max_abs_diff=None if got is None or ref is None else _max_abs_diff(got, ref),
    )


def shipped_sentence() -> str:
    """The short real sentence shipped with the package (grader/report/data/sentence.txt)."""
    return resources.files("grader.report").joinpath("data/sentence.txt").read_text(encoding="utf-8").strip()


def sinusoidal_positions(T: int, d: int) -> torch.Tensor:
    """(T, d) fixed positions of Section 6.2: p[t, 2m] = sin(t / 10000^(2m/d)), p[t, 2m+1] = cos(same)."""
    t = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    p = torch.zeros(T, d, dtype=torch.float64)  # (T, d)
    p[:, 0::2] = torch.sin(t * freq)  # (T, d/2)
    p[:, 1::2] = torch.cos(t * freq)  # (T, d/2)
    return p


def sentence_case(tokens: list[str], seed: int) -> Case:
    """X = E[token] + p_t with E ~ N(0, 1) per distinct token; W ~ N(0, 1/d) (as the checks' inputs)."""
    d = SENTENCE_D
    g = torch.Generator().manual_seed(seed)
    vocab = sorted(set(tokens))
    E = torch.randn(len(vocab), d, generator=g, dtype=torch.float64)  # (V, d)
    ids = torch.tensor([vocab.index(tok) for tok in tokens])  # (T,)
    X = (E[ids] + sinusoidal_positions(len(tokens), d))[None]  # (1, T, d)
    std = 1 / math.sqrt(d)
    W_Q = torch.randn(d, SENTENCE_DK, generator=g, dtype=torch.float64) * std
    W_K = torch.randn(d, SENTENCE_DK, generator=g, dtype=torch.float64) * std
    W_V = torch.randn(d, SENTENCE_DV, generator=g, dtype=torch.float64) * std
    shape = Shape(1, len(tokens), d, SENTENCE_DK, SENTENCE_DV)
    return Case(X, W_Q, W_K, W_V, shape, seed, (("text", "sentence"),))


def sentence_visual(head: Head, ref: Oracle, seed: int) -> SentenceVisual:
    text = shipped_sentence()
    tokens = text.split()[:MAX_TOKENS]
    case = sentence_case(tokens, seed)

    def reference() -> torch.Tensor:
        return ref.attention(case)[1][0]

    panel = _panel("sentence", lambda: head.attention(case, no_grad=True).weights[0], reference)
    return SentenceVisual(text=text, tokens=tokens, shape=case.shape.as_dict(), seed=seed, panel=panel)


def kernel_visual(head: Head, ref: Oracle) -> KernelVisual:
    panels = []
    for h in BANDWIDTHS:
        panels.append(
            _panel(
                f"h = {h:g}",
                partial(head.gaussian_weights, KERNEL_T, h),
                partial(ref.gaussian_weights, KERNEL_T, h),
            )
        )
        if panels[-1].problem and panels[-1].yours is None and "timed out" in panels[-1].problem:
            break  # one timeout is enough; do not spend the submission's time budget on more
    return KernelVisual(T=KERNEL_T, panels=panels)


def _point(d_k: int, stats: dict[str, float]) -> ScalePoint:
    values = {k: float(stats[k]) for k in STAT_KEYS if k in stats and math.isfinite(float(stats[k]))}
    return ScalePoint(d_k=d_k, **values)


_REFERENCE_LOCK = threading.Lock()


def reference_scale(ref: Oracle, seed: int) -> tuple[ScalePoint, ...]:
    """The reference's points: the same for every submission graded with this seed, so computed once per
    process; thread-safe (the runner prefetches them while the worker runs)."""
    with _REFERENCE_LOCK:
        return _reference_scale(ref, seed)


@functools.lru_cache(maxsize=8)
def _reference_scale(ref: Oracle, seed: int) -> tuple[ScalePoint, ...]:
    return tuple(_point(d_k, ref.statistics(d_k, T=SCALE_T, n_samples=SCALE_SAMPLES, seed=seed)) for d_k in SCALE_DKS)


def scale_visual(head: Head, ref: Oracle, seed: int, measured: dict[str, object] | None = None) -> ScaleVisual:
    """Yours against the reference's; ``measured`` holds what the Exercise 3 check already asked the head
    (``statistics:<d_k>``, same arguments), so those points are not computed twice."""
    measured = measured or {}
    sseed = stats_seed(seed)
    reference = [p.model_copy() for p in reference_scale(ref, sseed)]
    yours: list[ScalePoint] = []
    problem = None
    for d_k in SCALE_DKS:
        known = measured.get(f"statistics:{d_k}")
        if isinstance(known, dict):
            yours.append(_point(d_k, known))
            continue
        got, problem = _attempt(partial(head.statistics, d_k, T=SCALE_T, n_samples=SCALE_SAMPLES, seed=sseed))
        if got is None:
            break  # stop at the first failure: the next d_k would fail the same way, only slower
        yours.append(_point(d_k, got))
    if problem is None:
        missing = sorted({k for p in yours for k in STAT_KEYS if getattr(p, k) is None})
        if missing:
            problem = f"could not be computed: no finite value for {', '.join(missing)}"
    return ScaleVisual(
        T=SCALE_T, n_samples=SCALE_SAMPLES, seed=sseed, yours=yours, reference=reference, problem=problem
    )


def collect_visuals(head: Head, ref: Oracle, seed: int, measured: dict[str, object] | None = None) -> Visuals:
    """The visualisation data for ``GradeResult.visuals``; never raises. ``measured``: see scale_visual."""
    visuals = Visuals()
    parts: tuple[tuple[str, Callable[[], object]], ...] = (
        ("sentence", lambda: sentence_visual(head, ref, seed)),
        ("kernels", lambda: kernel_visual(head, ref)),
        ("scale", lambda: scale_visual(head, ref, seed, measured)),
    )
    for name, build in parts:
        value, problem = _attempt(build)
        if value is not None:
            setattr(visuals, name, value)
        else:
            visuals.problems.append(f"{name}: {problem}")
    return visuals


def measure_ahead() -> Path:
    """Write the reference's Exercise 3 measurements at the default rubric's seed beside it, the points of the
    report's plot that every grade at that seed takes (:func:`grader.oracle.measured_ahead`)."""
    from grader import library
    from grader.rubric import load_rubric

    module = library.load_reference()
    source = Path(str(module.__file__))
    seed = stats_seed(load_rubric(None).seed)
    torch.set_num_threads(1)  # as the grader measures them: a std's last bits follow the reduction's order
    values = {
        measurement_key(d_k, SCALE_T, SCALE_SAMPLES, seed): dict(
            module.score_scale_statistics(d_k, T=SCALE_T, n_samples=SCALE_SAMPLES, seed=seed)
        )
        for d_k in SCALE_DKS
    }
    stored = {"source_sha256": source_sha256(source), "values": values}
    path = source.with_name(MEASURED_FILE)
    path.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(f"wrote {measure_ahead()}")
