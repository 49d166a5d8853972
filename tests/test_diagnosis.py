"""Diagnosis: every root cause of a failing head, named (issue 10, items 7 and 8).

The grader checks itself on its own library: each chaff is named as exactly itself (mask_minus_100 as the
weak mask constant it is, with its fitted value), no correct variant gets a cause, heads with two or three
bugs at once are decomposed into their changes, and the template's stubs give one crash cause each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from grader.diagnosis import Seen, attach_causes, caught_by, count_causes, diagnose, indistinguishable, same
from grader.diagnosis._causes import cause
from grader.head import Head
from grader.library import KnownHead, known_heads, load_reference, reference_path
from grader.models import CheckResult, Diagnosis, GradeResult, Stop
from grader.oracle import LiveOracle
from grader.rubric import Rubric
from grader.sandbox import Sandbox, WorkerPool

CHAFFS = known_heads("chaff")
VARIANTS = known_heads("variant")
NAMED_AS = {"mask_minus_100": "leaky_mask_constant"}  # the same bug, with its constant fitted (-100)
REPO = Path(__file__).resolve().parent.parent


def _check(cid: str, status: str = "failed", message: str = "m", raised: str | None = None) -> CheckResult:
    """A check's result; ``raised``: the failure of the student's code that stopped it (its evidence)."""
    stopped = [Stop(kind="raised", text=raised)] if raised is not None else []
    return CheckResult(
        id=cid, title="t", cites="c", status=status, score=0, max_score=1, message=message, seed=0, duration_s=0,
        stopped=stopped,
    )  # type: ignore[arg-type]  # fmt: skip


FAILED = [_check("reference_match")]
Diagnose = Callable[..., list[Diagnosis]]


@pytest.fixture
def head_of(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> Iterator[Diagnose]:
    """diagnose(checks, <head from source>) inside a fresh sandbox."""

    def run(source: str, checks: list[CheckResult] = FAILED) -> list[Diagnosis]:
        folder = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "attention_head.py").write_text(source, encoding="utf-8")
        with Sandbox(folder, rubric.limits, pool=pool) as sandbox:
            return diagnose(checks, Head(sandbox, rubric.entry_points), LiveOracle(load_reference()))

    yield run


def _head(body: str) -> str:
    """The reference module with ``causal_self_attention`` replaced by ``body`` (numpy, math, F imported)."""
    return (
        reference_path().read_text()
        + "\n\nimport numpy as np\nimport torch.nn.functional as F\n\n\n"
        + "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n"
        + "".join(f"    {line}\n" for line in body.strip().splitlines())
    )


def test_a_head_that_fails_nothing_is_never_probed() -> None:
    passing = [FAILED[0].model_copy(update={"status": "passed", "score": 1})]
    assert diagnose(passing, None, LiveOracle(load_reference())) == []  # type: ignore[arg-type]


def test_matching_compares_shapes_non_finite_patterns_and_values() -> None:
    t = torch.tensor([[1.0, float("nan")], [float("inf"), 0.5]], dtype=torch.float64)

    def seen(x: torch.Tensor) -> list[Seen]:
        return [Seen(values={"r0": x})]

    assert same(seen(t), seen(t + 1e-13))
    assert not same(seen(t), seen(t + 1e-6))
    assert not same(seen(t), seen(t.nan_to_num()))  # NaN is not a number close to anything
    assert not same(seen(t), seen(-t))  # +inf is not -inf
    assert not same(seen(t), seen(t.float()))
    assert not same(seen(t), seen(t[:1]))
    assert same([Seen(error=True)], [Seen(error=True)]) and not same([Seen(error=True)], seen(t))


def test_a_known_bug_is_named_with_its_hint_and_what_it_explains(head_of: Diagnose) -> None:
    """A chaff that is a mutation speaks the error model's words (causes.toml), one outside it its catalog's."""
    chaff = next(c for c in CHAFFS if c.id == "mask_after_softmax_no_renorm")
    assert chaff.mutation == chaff.id and not chaff.title  # its words live with the error model, not the library
    checks = [_check("reference_match"), _check("row_stochastic"), _check("determinism", "passed")]
    [d] = head_of(chaff.source(), checks)
    assert (d.id, (d.title, d.hint, d.cites), d.kind) == (chaff.id, cause(chaff.id).words(), "mutation")
    assert d.explains == ["reference_match", "row_stochastic"]
    linked = attach_causes(checks, [d])
    assert [c.causes for c in linked] == [[chaff.id], [chaff.id], []]
    outside = next(c for c in CHAFFS if c.id == "global_max_softmax")
    assert not outside.mutation
    [k] = head_of(outside.source(), [_check("future_perturbation"), _check("batch_independence", "passed")])
    assert (k.id, k.title, k.hint, k.cites, k.kind) == (outside.id, outside.title, outside.hint, outside.cites, "known")
    assert k.explains == ["future_perturbation"]


def test_a_bug_written_another_way_is_still_recognised(head_of: Diagnose) -> None:
    """no_scaling with einsum and a hand-made softmax: same numbers, other code."""
    student = _head("""
q, k, v = (torch.einsum("btd,de->bte", X, W) for W in (W_Q, W_K, W_V))
s = torch.einsum("bie,bje->bij", q, k)
if causal:
    s = s + torch.full(s.shape[-2:], float("-inf"), dtype=s.dtype).triu(1)
e = torch.exp(s - s.amax(-1, keepdim=True))
w = e / e.sum(-1, keepdim=True)
return w @ v, w
""")
    assert [d.id for d in head_of(student)] == ["no_scaling"]


def test_correct_heads_and_unknown_bugs_get_no_guess(head_of: Diagnose) -> None:
    assert head_of(reference_path().read_text()) == []
    assert head_of(next(v for v in VARIANTS if v.id == "einsum").source()) == []
    halved = _head("""
q, k, v = X @ W_Q, X @ W_K, X @ W_V
w = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(
    torch.ones(X.shape[1], X.shape[1], dtype=torch.bool).triu(1) & causal, float("-inf")), -1)
return 0.5 * (w @ v), w
""")
    # no named cause: the departure of its computation is the cause, at its line, in words (issue 28)
    [own] = head_of(halved)
    assert (own.id, own.kind) == ("departure:out", "departure")
    assert own.where is not None and own.where.code == "return 0.5 * (w @ v), w"
    assert own.departure is not None and own.departure.description == "the output A V times 0.5"
    assert own.title == "Your head leaves the lecture's computation at the output: the output A V times 0.5"


# ---- several bugs at once: the shapes public heads take --------------------------------------------

MULTI = {
    # the walkthrough Head: C**-0.5 with C the model width, dropout in train mode, always masks
    "walkthrough": (
        """
B, T, C = X.shape
k, q, v = X @ W_K, X @ W_Q, X @ W_V
wei = q @ k.transpose(-2, -1) * C**-0.5
wei = wei.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
wei = F.softmax(wei, dim=-1)
wei = F.dropout(wei, p=0.2, training=True)
return wei @ v, wei
""",
        {"scale_by_sqrt_d_model", "causal_flag_ignored", "dropout_left_on"},
    ),
    "sqrt_T_float32_softmax": (
        """
T = X.shape[1]
s = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(T)
if causal:
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
w = torch.softmax(s.float(), dim=-1).to(X.dtype)
return w @ (X @ W_V), w
""",
        {"scale_by_sqrt_T", "softmax_in_float32"},
    ),
    "hard_coded_64_wrong_axis": (
        """
T = X.shape[1]
s = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(64)
if causal:
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
w = torch.softmax(s, dim=1)
return w @ (X @ W_V), w
""",
        {"scale_constant", "softmax_wrong_axis"},
    ),
    "fill_plus_1e-15_swapped_qk": (
        """
T, d_k = X.shape[1], W_Q.shape[1]
s = (X @ W_K) @ (X @ W_Q).transpose(-2, -1) / math.sqrt(d_k)
if causal:
    s = s.masked_fill(torch.tril(torch.ones(T, T)) == 0, 1e-15)
w = torch.softmax(s, dim=-1)
return w @ (X @ W_V), w
""",
        {"leaky_mask_fill", "scores_transposed"},
    ),
    "value_mask_no_scale": (
        """
s = (X @ W_Q) @ (X @ W_K).transpose(-2, -1)
if causal:
    s = s.masked_fill(torch.tril(s) == 0, -1e9)
w = torch.softmax(s, dim=-1)
return w @ (X @ W_V), w
""",
        {"mask_value_derived", "no_scaling"},
    ),
    "inverted_mask_values_from_x_dk": (
        """
T, d_k = X.shape[1], W_Q.shape[1]
s = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / d_k
if causal:
    s = s.masked_fill(torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
w = torch.softmax(s, dim=-1)
return w @ X, w
""",
        {"mask_inverted", "no_value_projection", "scale_by_dk"},
    ),
}


@pytest.mark.parametrize("name", list(MULTI))
def test_heads_with_two_or_three_bugs_are_decomposed(name: str, head_of: Diagnose) -> None:
    body, expected = MULTI[name]
    causes = head_of(_head(body))
    assert {d.id for d in causes} == expected
    assert all(d.kind == "mutation" for d in causes)


def test_fitted_constants_are_named_with_their_value(head_of: Diagnose) -> None:
    [walk] = [d for d in head_of(_head(MULTI["walkthrough"][0])) if d.id == "dropout_left_on"]
    assert "p = 0.2" in walk.title
    [scale] = [d for d in head_of(_head(MULTI["hard_coded_64_wrong_axis"][0])) if d.id == "scale_constant"]
    assert "0.125 = 1/sqrt(64)" in scale.title and "Lemma 5.5" in scale.hint


def test_a_passing_check_prunes_the_search(head_of: Diagnose) -> None:
    """score_scaling passed, so no scale change may be named: the wrong-scale head then matches nothing."""
    body = MULTI["sqrt_T_float32_softmax"][0]
    found = head_of(_head(body), [_check("reference_match"), _check("score_scaling", "passed")])
    # no scale named; its departure says where (issue 28), both mistakes found by intervention (issue 35), and the
    # float32 softmax, which no passing check rules out, named by the catalog from the intervention's words
    assert [d.kind for d in found] == ["departure", "mutation"] and found[1].id == "softmax_in_float32"
    assert ["sqrt(T)" in d.title + (d.departure.description if d.departure else "") for d in found] == [True, False]
    assert found[1].departure is not None and "float32" in found[1].departure.description


def test_a_search_on_probes_an_earlier_one_began_with_skips_what_failed_there_and_finds_the_same() -> None:
    """Issue 51 (bounded time): a head the model does not reproduce was searched twice over every combination, on
    every probe and then on the ordinary ones alone, which begin alike. The second search skips the combinations
    that failed on the probes both begin with, and answers what a search from scratch answers."""
    import grader.diagnosis._search as search_module
    from grader.diagnosis._known import attention_probes
    from grader.diagnosis._mutations import Fit, forward

    probes = [p for p in attention_probes() if "grad" not in p.options]
    assert [p.huge for p in probes] == [False, False, True, True, False]  # ordinary ones first, then the huge

    def seen(combo: tuple[str, ...], probe: object) -> Seen:
        t = probe.tensors  # type: ignore[attr-defined]
        causal = bool(probe.options["kwargs"]["causal"]["v"])  # type: ignore[attr-defined]
        out_w = forward(t["X"], t["W_Q"], t["W_K"], t["W_V"], causal, combo, Fit({}))
        assert out_w is not None
        return Seen(values={"r0": out_w[0], "r1": out_w[1]})

    ordinary = [p for p in probes if not p.huge]
    runs = []
    original = search_module._matched

    def counted(*args: object, **kwargs: object) -> object:
        runs.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    for huge_differs in (False, True):  # the head leaves the model on the first probe; on a huge one only
        theirs = [seen(("scale_by_dk",), p) for p in probes]
        k = 2 if huge_differs else 0
        theirs[k] = Seen(values={"r0": theirs[k].values["r0"], "r1": torch.full_like(theirs[k].values["r1"], 0.5)})
        full, tried = search_module.searched(probes, theirs, set())
        assert full is None and tried.failed_at and set(tried.failed_at.values()) <= {0, 1, 2, 3, 4, 5}
        some = [theirs[n] for n, p in enumerate(probes) if not p.huge]
        fresh = search_module.search(ordinary, some, set())
        runs.clear()
        search_module._matched = counted  # type: ignore[assignment]
        try:
            again = search_module.search(ordinary, some, set(), tried)
        finally:
            search_module._matched = original
        assert again == fresh
        if huge_differs:  # the right combination failed past the shared probes: evaluated again, found
            assert again is not None and again[0] == ("scale_by_dk",) and runs
        else:  # every combination failed on the first probe, which both share: none evaluated again
            assert again is None and runs == []


# ---- crashes: one cause per failure, every stopped check pointing at it -----------------------------


def test_the_template_gives_one_crash_cause_per_stub(head_of: Diagnose) -> None:
    stub = "NotImplementedError: causal_self_attention: project, scale the scores, mask, softmax, average"
    said = f"Your code did not complete this check: {stub}"  # what the runner writes for the template's stub
    checks = [_check(c, "error", said, raised=stub) for c in ("interface", "causal_mask")]
    template = (REPO / "student_template" / "attention_head.py").read_text()
    causes = head_of(template, checks)
    [crash] = [d for d in causes if d.id == "crash:causal_self_attention"]
    assert crash.kind == "crash" and crash.explains == ["interface", "causal_mask"]
    assert crash.title == "`causal_self_attention` raises NotImplementedError — 2 checks could not run"
    assert crash.detail is not None and "project, scale the scores" in crash.detail
    assert [c.causes for c in attach_causes(checks, causes)] == [[crash.id], [crash.id]]
    assert {d.kind for d in causes} == {"crash"}  # the other stubs are crashes too, none of them guessed at


def test_one_error_shared_by_several_checks_is_one_cause(head_of: Diagnose) -> None:
    """A failure that only some inputs trigger (here T = 1 is never probed) is grouped by its message."""
    error = "IndexError: index 1 is out of bounds"
    msg = f"Your code did not complete this check: {error}"
    checks = [_check("causal_mask", "error", msg, error), _check("numerical_stability", "error", msg, error)]
    [crash] = head_of(reference_path().read_text(), checks)
    assert crash.kind == "crash" and crash.explains == ["causal_mask", "numerical_stability"]


def test_class_counts_count_causes_once_per_submission() -> None:
    d = Diagnosis(id="no_mask", title="t", hint="h", cites="c", kind="mutation")
    results = [
        GradeResult(submission=s, seed=0, score=0, max_score=1, checks=[], diagnosis=ds, rubric="r", duration_s=0)
        for s, ds in (("a", [d]), ("b", [d, d]), ("c", []))
    ]
    assert count_causes(results) == {"no_mask": 2}


# ---- the whole library ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("head", CHAFFS + VARIANTS, ids=[f"{h.kind}:{h.id}" for h in CHAFFS + VARIANTS])
def test_every_chaff_is_named_and_no_variant_is(head: KnownHead, head_of: Diagnose) -> None:
    """Diagnosed with the checks the chaff fails (a weak mask constant shows only when numerical_stability does)."""
    failing = [_check(c) for c in caught_by(head)] if head.kind == "chaff" else FAILED
    named = [NAMED_AS.get(head.id, head.id)] if head.kind == "chaff" else []
    if head.kind == "chaff" and indistinguishable(head):
        named = [f"own:{c.id}" for c in failing]  # its own check's cause: the values are the reference's
    assert [d.id for d in head_of(head.source(), failing)] == named


def test_benchmark_time_per_failing_submission(head_of: Diagnose, capsys: pytest.CaptureFixture[str]) -> None:
    """Not a timed test: prints the time of a full search that finds nothing (the worst case)."""
    head_of(reference_path().read_text())  # warm: the reference's probes, computed once per process
    t0 = time.perf_counter()
    assert head_of(next(c for c in CHAFFS if c.id == "future_leak_via_values").source()) != []
    with capsys.disabled():
        print(f"\n[benchmark] diagnosis of a head outside the error model: {time.perf_counter() - t0:.2f} s")


def test_missing_functions_and_a_wrong_return_are_contract_causes(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """A head alone (no Exercise functions) that returns out only: every failing check has a cause, each
    missing function one, the wrong return one (not one per check or per message)."""
    from grader.runner import grade

    (tmp_path / "attention_head.py").write_text(
        "import math, torch\n\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n"
        "    s = (X @ W_Q) @ (X @ W_K).transpose(-2, -1) / math.sqrt(W_Q.shape[1])\n"
        "    T = X.shape[1]\n"
        "    if causal:\n"
        "        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf'))\n"
        "    return torch.softmax(s, dim=-1) @ (X @ W_V)\n"
    )
    result = grade(tmp_path / "attention_head.py", rubric, pool=pool, visuals=False)
    failing = [c for c in result.checks if c.status in ("failed", "error", "timeout")]
    assert failing and all(c.causes for c in failing), [c.id for c in failing if not c.causes]
    assert {d.id for d in result.diagnosis} == {
        "missing:gaussian_positional_weights",
        "missing:gaussian_positional_qk",
        "missing:score_scale_statistics",
        "one_value_breach",  # out alone is judged (issue 30): the checks that need only out pass
    }
    assert all(d.kind == "contract" for d in result.diagnosis)
    gradient = next(c for c in result.checks if c.id == "gradient_blocks")
    assert "IndexError" not in gradient.message  # the worker judges what came back; it never raises itself
