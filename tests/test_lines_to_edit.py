"""The line to edit, and honest words for it (issue 36 points 1 and 4; issue 35 points 2, 4, 10 and 12).

Each crash points at the line of the function that raised (a template stub, a module that does not import); a
number made on one line and used wrongly on another is pointed at where it is made, with the use in the words;
a clamp and a NaN made by 0 * -inf are described as what they are. The heads are small files in
tests/lines_to_edit/ (and the student template, and the reference with one stub put back).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grader.checks import CHECKS
from grader.diagnosis import diagnose
from grader.diagnosis._finding import SUM_OF_SCORES
from grader.head import Head
from grader.library import load_reference
from grader.models import FAILING, CheckResult, Diagnosis, GradeResult
from grader.oracle import LiveOracle
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import Sandbox, WorkerPool

REPO = Path(__file__).resolve().parent.parent
HEADS = REPO / "tests" / "lines_to_edit"
TEMPLATE = REPO / "student_template" / "attention_head.py"
STUBS = ("causal_self_attention", "gaussian_positional_weights", "gaussian_positional_qk", "score_scale_statistics")
Diagnose = Callable[..., list[Diagnosis]]


def failed(*ids: str) -> list[CheckResult]:
    return [
        CheckResult(
            id=c, title="t", cites="c", status="failed", score=0, max_score=1, message="m", seed=0, duration_s=0
        )
        for c in ids
    ]


def line_of(path: Path, text: str) -> int:
    """The 1-based number of the one line of ``path`` that contains ``text``."""
    [n] = [k for k, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return n


@pytest.fixture
def diagnosed(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> Iterator[Diagnose]:
    """The diagnosis of a head of tests/lines_to_edit/ that fails ``failing`` (by default: its float64 values)."""

    def run(name: str, failing: tuple[str, ...] = ("reference_match",)) -> list[Diagnosis]:
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(HEADS / f"{name}.py", folder / "attention_head.py")
        with Sandbox(folder, rubric.limits, pool=pool) as sandbox:
            return diagnose(failed(*failing), Head(sandbox, rubric.entry_points), LiveOracle(load_reference()))

    yield run


def _pointed(found: list[Diagnosis]) -> Diagnosis:
    [d] = [d for d in found if d.where is not None]
    return d


# ---- 1. each stub at its own line; a stub costs interface nothing (issue 36.1) ------------------------------


def test_each_stub_of_the_template_points_at_its_own_raise(rubric: Rubric, pool: WorkerPool) -> None:
    only = ["causal_mask", "gaussian_kernel", "gaussian_qk", "score_scale_experiment"]
    result = grade(TEMPLATE, rubric, pool=pool, only=only, visuals=False)
    crashes = {d.id.removeprefix("crash:"): d for d in result.diagnosis if d.kind == "crash"}
    assert set(crashes) == set(STUBS)
    for fn, d in crashes.items():
        assert d.where is not None, fn
        assert d.where.line == line_of(TEMPLATE, f'raise NotImplementedError("{fn}:'), fn
        assert d.where.code.startswith(f'raise NotImplementedError("{fn}:'), fn


def _reference_with(tmp_path: Path, old: str, new: str) -> Path:
    """The instructor reference with ``old`` (the body of one function) replaced by ``new``."""
    source = (REPO / "reference" / "attention_head.py").read_text()
    assert source.count(old) == 1
    path = tmp_path / "attention_head.py"
    path.write_text(source.replace(old, new), encoding="utf-8")
    return path


QK_BODY = """    pos = torch.arange(T, dtype=torch.float64)  # (T,)
    Q = math.sqrt(2.0) * torch.stack([pos, torch.ones_like(pos)], dim=-1) / bandwidth  # (T, 2)
    K = torch.stack([pos, -0.5 * pos**2], dim=-1) / bandwidth  # (T, 2)
    return Q, K
"""
QK_STUB = '    raise NotImplementedError("gaussian_positional_qk: write q_i and k_j from your derivation")\n'


def test_a_lone_stub_has_its_line_and_costs_interface_nothing(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    path = _reference_with(tmp_path, QK_BODY, QK_STUB)
    result = grade(path, rubric, pool=pool, only=["interface", "gaussian_qk"], visuals=False)
    by_id = {c.id: c for c in result.checks}
    interface = by_id["interface"]
    assert interface.status == "passed" and interface.score == interface.max_score, interface.message
    assert "`gaussian_positional_qk` (NotImplementedError" in interface.message  # said, not charged
    assert by_id["gaussian_qk"].status == "error"
    [d] = result.diagnosis
    assert d.id == "crash:gaussian_positional_qk" and d.explains == ["gaussian_qk"]
    assert d.where is not None and d.where.line == line_of(path, QK_STUB.strip())


def test_interface_still_fails_an_exercise_function_that_returns_the_wrong_thing(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    path = _reference_with(tmp_path, QK_BODY, "    return torch.zeros(T, 2, dtype=torch.float64)\n")
    result = grade(path, rubric, pool=pool, only=["interface"], visuals=False)
    [interface] = result.checks
    assert interface.status == "failed" and "must return a tuple of 2 tensors" in interface.message


# ---- 2. a number made on one line and used on another: where it is made (issue 36.4, 35.2) ------------------


def test_a_scale_read_off_the_wrong_width_points_where_d_k_is_made(diagnosed: Diagnose) -> None:
    d = _pointed(diagnosed("dk_of_model_width"))
    path = HEADS / "dk_of_model_width.py"
    assert d.where is not None and d.departure is not None
    assert (d.where.line, d.where.code) == (line_of(path, "d_k = X.shape[-1]"), "d_k = X.shape[-1]")
    use = line_of(path, "/ math.sqrt(d_k)")
    # the probe's width, said to be the probe's (issue 53: the checks' inputs had d = 4 and d = 48)
    assert f"`d_k` is set here (5 on the grader's probe) and used at line {use}" in d.departure.description
    assert "1/sqrt(d) = 0.4472" in d.departure.description
    assert d.where.context[d.where.line].strip() == "d_k = X.shape[-1]"


def test_a_fill_passed_to_a_helper_points_at_the_constant(diagnosed: Diagnose) -> None:
    d = _pointed(diagnosed("fill_through_helper", ("numerical_stability",)))  # exact at ordinary scores
    path = HEADS / "fill_through_helper.py"
    assert d.where is not None and d.departure is not None
    assert (d.where.line, d.where.code) == (line_of(path, "NEG = -1e6"), "NEG = -1e6")
    assert "filled with -1e+06 instead of -inf" in d.departure.description
    assert f"used at line {line_of(path, 'return scores.masked_fill(future, value)')}" in d.departure.description


def test_a_number_that_is_right_where_it_is_made_keeps_the_use(diagnosed: Diagnose) -> None:
    """T = X.shape[1] is T (the mask reads it too): the use, / math.sqrt(T), is the line to edit."""
    d = _pointed(diagnosed("sqrt_T_named"))
    path = HEADS / "sqrt_T_named.py"
    assert d.where is not None and d.where.line == line_of(path, "/ math.sqrt(T)")


# ---- 3, 4. a clamp is a clamp; NaN from 0 * -inf is said so (issue 35.4, 35.12) ------------------------------


def test_a_clamp_to_a_floor_of_1e_6_is_described_as_a_clamp(diagnosed: Diagnose) -> None:
    d = _pointed(diagnosed("clamped_floor"))
    assert d.where is not None and d.departure is not None
    assert d.where.line == line_of(HEADS / "clamped_floor.py", ".clamp(1e-6, 1.0)")
    assert d.departure.description == "a floor: entries below 1e-06 raised to 1e-06 (a clamp)"
    assert "float32" not in d.departure.description


def test_a_mask_multiplied_by_inf_is_described_as_nan_from_zero_times_inf(diagnosed: Diagnose) -> None:
    d = _pointed(diagnosed("keep_times_inf"))
    assert d.where is not None and d.departure is not None
    assert d.where.line == line_of(HEADS / "keep_times_inf.py", '(1 - keep) * float("-inf")')
    assert d.departure.description.startswith("NaN from 0 * -inf")
    assert "NaN in " in d.departure.description
    assert "filled with 0" not in d.departure.description and "clamp" not in d.departure.description


# ---- 5. an error at import time at the line that raised (issue 35.10) ----------------------------------------


def _module_crash(result: GradeResult) -> Diagnosis:
    [d] = [d for d in result.diagnosis if d.kind == "crash"]
    return d


@pytest.mark.parametrize(
    ("name", "code", "error"),
    [
        ("wrong_alias", "softmax = F.softmax", "NameError"),
        ("no_imports", "def causal_self_attention(X: torch.Tensor, W_Q, W_K, W_V, causal=True):", "NameError"),
    ],
)
def test_an_import_error_points_at_the_line_that_raised(
    name: str, code: str, error: str, rubric: Rubric, pool: WorkerPool
) -> None:
    result = grade(HEADS / f"{name}.py", rubric, pool=pool, only=["interface", "causal_mask"], visuals=False)
    d = _module_crash(result)
    assert error in d.title
    assert d.where is not None
    at = line_of(HEADS / f"{name}.py", code)
    assert (d.where.file, d.where.line, d.where.code) == ("attention_head.py", at, code)


def test_what_a_line_reads_is_read_defensively() -> None:
    """The worker's note of where a name got its value is untrusted: only well-formed entries are kept."""
    from grader.diagnosis._trace import Bound, _bounds

    good = {"var": "d_k", "file": "attention_head.py", "line": 10, "code": "d_k = X.shape[-1]", "value": 5.0}
    forged = [good, {**good, "line": "10"}, {**good, "value": "5"}, {**good, "value": float("nan")}, 7, None]
    assert _bounds(forged) == (Bound("d_k", "attention_head.py", 10, "d_k = X.shape[-1]", 5.0),)
    assert _bounds("not a list") == ()


def _graded(tmp_path: Path, rubric: Rubric, pool: WorkerPool, name: str) -> GradeResult:
    """``grade`` of a head of tests/lines_to_edit/ (every pass of the diagnosis, the widths' included)."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(HEADS / f"{name}.py", folder / "attention_head.py")
    return grade(folder, rubric, pool=pool, visuals=False)


# issue 35, item 1: a multi-head skeleton used with one head computes every stage with a (B, 1, T, *) head axis;
# the axis is a layout, each mistake is named at its own line (before: at matmul(weights, v), or at no line)
ONE_HEAD = {
    "one_head_diagonal_dropout": {
        "mask_excludes_diagonal": "device=x.device), diagonal=0)",
        "dropout_left_on": "attn = self.attn_dropout(attn)",
    },
    "one_head_fill": {"leaky_mask_fill": "scores = scores.masked_fill(future, -100.0)"},
    "one_head_unscaled": {"no_scaling": "scores = torch.matmul(q, k.transpose(-2, -1))  # (B, h, T, T)"},
}


@pytest.mark.parametrize("name", ONE_HEAD)
def test_a_head_axis_of_size_one_is_no_departure(name: str, tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    result = _graded(tmp_path, rubric, pool, name)
    said = {d.id: d for d in result.diagnosis if not d.id.startswith("missing:")}
    assert set(said) == set(ONE_HEAD[name]), said
    for cid, code in ONE_HEAD[name].items():
        where = said[cid].where
        assert where is not None and where.line == line_of(HEADS / f"{name}.py", code), (cid, where)
    assert not any(d.id.startswith("departure:") for d in result.diagnosis)


def test_queries_never_projected_are_one_cause_at_the_line_that_takes_x(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """Issue 35, item 5: ``q = X`` named as such where the projection belongs, and the crash its width makes
    where d_k != d is the same choice (before: a width crash at the scores line beside a departure)."""
    result = _graded(tmp_path, rubric, pool, "queries_never_projected")
    [d] = [d for d in result.diagnosis if not d.id.startswith("missing:")]
    assert d.id == "no_query_projection" and "`q = X`" in d.title, d
    assert d.where is not None and d.where.line == line_of(HEADS / "queries_never_projected.py", "q = X")
    assert {"reference_match", "score_scaling", "numerical_stability"} <= set(d.explains)


def test_values_never_projected_keep_their_line_beside_a_wrong_scale(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The scale's departure is the scale's alone: the values' mutation, which leaves the scores as they were, is
    pointed at ``v = X`` (before: at no line)."""
    result = _graded(tmp_path, rubric, pool, "values_never_projected_scaled_by_dk")
    said = {d.id: d for d in result.diagnosis if not d.id.startswith("missing:")}
    assert set(said) == {"scale_by_dk", "no_value_projection"}, said
    path = HEADS / "values_never_projected_scaled_by_dk.py"
    assert said["no_value_projection"].where is not None
    assert said["no_value_projection"].where.line == line_of(path, "v = X")
    assert said["scale_by_dk"].where is not None and "/ k.shape[-1]" in said["scale_by_dk"].where.code


# issue 35 (items 1 to 4 left by the first pass): each mistake of two, named at its own line. A -100 fill beside
# another mask mistake (the fill a slot of its own, read off the head's masked scores where no probe's output
# shows it); a function on one sequence called per batch element (its (T, T) values stacked into the batch's);
# a mask applied before an inverted scale (times sqrt(d_k), now a mutation of the error model); a NumPy head's
# values never projected (what its arrays read, taken from their lines)
TWO_MISTAKES = {
    "diagonal_filled_with_minus_100": {
        "mask_excludes_diagonal": "hidden = torch.triu(",
        "leaky_mask_fill": "scores = scores.masked_fill(hidden, -100.0)",
    },
    "unscaled_filled_with_minus_100": {
        "no_scaling": "scores = q @ k.transpose(-2, -1)",
        "leaky_mask_fill": "scores = scores.masked_fill(future, -100.0)",
    },
    "per_sequence_mask_and_scale": {
        "scale_by_dk": "scores = q @ k.T / k.shape[1]",
        "mask_leaks_by_one": "late = torch.triu(",
    },
    "masked_then_times_sqrt_dk": {
        "scale_times_sqrt_dk": "scores * keys.shape[-1] ** 0.5",
        "dropout_left_on": "weights = F.dropout(weights, p=0.1)",
    },
    "numpy_values_never_projected": {
        "no_scaling": "scores = q @ k.transpose(0, 2, 1)",
        "no_value_projection": "v = x",
    },
}
LEAVING_TORCH = {"computed_outside_torch", "no_autograd_graph"}  # a NumPy head's own contract causes


@pytest.mark.parametrize("name", TWO_MISTAKES)
def test_each_of_two_mistakes_is_named_at_its_own_line(
    name: str, tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    result = _graded(tmp_path, rubric, pool, name)
    said = {d.id: d for d in result.diagnosis if not d.id.startswith("missing:") and d.id not in LEAVING_TORCH}
    assert set(said) == set(TWO_MISTAKES[name]), said
    for cid, code in TWO_MISTAKES[name].items():
        where = said[cid].where
        assert where is not None and where.line == line_of(HEADS / f"{name}.py", code), (cid, where)


def test_a_softmax_over_the_sum_of_the_scores_is_said_to_be_one(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """Issue 35, item 4: exp(s) divided by the sum of the scores s, in a NumPy head's own softmax, is described as
    that, at the line that calls it (before: 'differs from the weights', at the helper's shift of the scores)."""
    result = _graded(tmp_path, rubric, pool, "numpy_softmax_over_score_sum")
    [d] = [d for d in result.diagnosis if d.departure is not None and d.departure.description == SUM_OF_SCORES]
    path = HEADS / "numpy_softmax_over_score_sum.py"
    assert d.where is not None and d.where.line == line_of(path, "weights = softmax(scores, axis=-1)"), d.where


# ---- issue 35: the operand that had to change, where it is made -------------------------------------------------


def test_keys_passed_as_the_queries_weight_point_at_the_call(diagnosed: Diagnose) -> None:
    """A helper correct as it stands, called with W_Q for its keys' weight: the call's argument is the line to
    edit, not ``k = x @ w_k`` (which reads a parameter nothing else reads)."""
    path = HEADS / "keys_passed_as_queries.py"
    [d] = [d for d in diagnosed("keys_passed_as_queries") if d.id == "keys_from_query_projection"]
    assert d.where is not None and d.where.line == line_of(path, "attend(x, W_Q, W_Q, W_V, causal)")
    assert d.departure is not None and "`w_k` is passed here and used at line" in d.departure.description


def test_a_scale_computed_on_its_own_line_points_at_that_line(diagnosed: Diagnose) -> None:
    """``scale = q.shape[-1] ** -1`` computes the factor there (a power, not a width read as it is)."""
    path = HEADS / "scale_made_elsewhere.py"
    [d] = [d for d in diagnosed("scale_made_elsewhere") if d.id == "scale_by_dk"]
    assert d.where is not None and d.where.line == line_of(path, "scale = q.shape[-1] ** -1")
    assert d.departure is not None and f"used at line {line_of(path, '* scale')}" in d.departure.description


def test_a_numpy_mask_and_weights_transposed_in_the_return_have_their_lines(diagnosed: Diagnose) -> None:
    """A NumPy head: the mask's pattern where it is made (the arrays a line reads, by name), and the weights
    transposed where the head returns them (no op records a value there)."""
    path = HEADS / "numpy_mask_and_return.py"
    found = {d.id: d for d in diagnosed("numpy_mask_and_return", ("reference_match", "causal_mask"))}
    mask, returned = found["mask_excludes_diagonal"].where, found["weights_transposed"].where
    assert mask is not None and mask.line == line_of(path, "hidden = np.triu(")
    assert returned is not None and returned.line == line_of(path, "weights.transpose(0, 2, 1)")


def test_a_weak_fill_beside_a_clamp_is_found_on_huge_scores(diagnosed: Diagnose) -> None:
    """The clamp shows on the ordinary probe; with it patched, the walk on scores about -1e6 shows the -1e4 fill
    (numerical_stability's case), each at its line."""
    path = HEADS / "weak_fill_beside_clamp.py"
    found = {d.id: d for d in diagnosed("weak_fill_beside_clamp", ("reference_match", "numerical_stability"))}
    fill, clamp = found["weak_mask_fill"], found["departure:weights"]
    assert fill.where is not None and fill.where.line == line_of(path, "-1e4)")
    assert clamp.where is not None and clamp.where.line == line_of(path, ".clamp(1e-6, 1.0)")
    assert "filled with -10000 instead of -inf" in (fill.departure.description if fill.departure else "")


def test_an_input_written_in_place_is_named_at_the_line_that_writes_it(diagnosed: Diagnose) -> None:
    """A scale folded into W_Q in place (``W_Q.mul_``) beside a softmax normalised before its mask: the failing
    interface check had no cause (the library's known bug matches only a head with no other mistake). It is named
    from the inputs the worker hands back after a call, at the line that wrote into one, and explains the
    gradients' check too: autograd refuses an in-place change of a leaf that requires grad."""
    failing = ("interface", "gradient_blocks", "reference_match", "row_stochastic")
    causes = diagnosed("scale_folded_into_wq_in_place", failing)
    [mine] = [c for c in causes if c.id == "inplace_input_mutation"]
    assert "W_Q" in mine.title and mine.where is not None, mine
    assert mine.where.line == line_of(HEADS / "scale_folded_into_wq_in_place.py", "W_Q = W_Q.mul_("), mine.where
    assert {"interface", "gradient_blocks"} <= set(mine.explains), mine.explains
    assert any(c.id == "mask_after_softmax_no_renorm" for c in causes), [c.id for c in causes]


def test_weights_returned_off_the_graph_point_where_they_left_it(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The walkthrough Head keeping ``self.last_attn = wei.detach()`` and returning it: the weights break the
    contract (no gradient), named at the line that cut them from the graph, not at the line that computes out."""
    result = _graded(tmp_path, rubric, pool, "weights_kept_detached")
    [breach] = [c for c in result.diagnosis if c.id == "one_value_breach"]
    assert breach.where is not None, breach
    assert breach.where.line == line_of(HEADS / "weights_kept_detached.py", "        self.last_attn = wei.detach()")


def test_a_scale_by_the_values_width_is_named(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> None:
    """``value.size(-1) ** 0.5`` (GPT-2's scale, where d_v = d_k): the probe's d_v = 3 was read as 'a fixed number',
    1/sqrt(3). It is the catalog's scale by sqrt(d_v), at the line that divides."""
    result = _graded(tmp_path, rubric, pool, "scale_by_the_values_width")
    [scale] = [c for c in result.diagnosis if c.id == "scale_by_sqrt_dv"]
    assert scale.where is not None, scale
    divides = line_of(HEADS / "scale_by_the_values_width.py", "attn_weights / torch.full(")
    assert scale.where.line == divides, scale.where
    assert [c.id for c in result.diagnosis if not c.id.startswith("missing:")] == ["scale_by_sqrt_dv"]


def test_a_head_cast_to_float32_is_pointed_at_the_cast_and_nothing_else_is(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """``X = X.float()`` and the weights cast likewise, beside a scale by d_k and a mask read off the scores' zeros:
    the cast input was taken for a departure (on a probe where d = d_v it has out's shape) and the scale was
    pointed at the cast. A cast of an input is handled on the way (its rounding shows at the first stage made of
    it), and a value off by float32 rounding alone goes to the float32 cause, never to another."""
    shutil.copy(HEADS / "everything_in_float32.py", tmp_path / "attention_head.py")
    # the head's own checks, as the generated bench grades a head: interface (float32 returned) would merge the
    # float32 softmax into computed_in_float32, which had its line; a head that casts back has no such merge
    only = [c for c, spec in CHECKS.items() if "causal_self_attention" in spec.needs and c != "performance"]
    result = grade(tmp_path, rubric, pool=pool, visuals=False, only=only)
    path = HEADS / "everything_in_float32.py"
    casts = {line_of(path, f"{name} = X @ W_{name}.float()") for name in "QKV"} | {line_of(path, "X = X.float()")}
    by_id = {c.id: c for c in result.diagnosis}
    [float32] = [c for c in result.diagnosis if c.id in ("computed_in_float32", "softmax_in_float32")]
    assert float32.where is not None and float32.where.line in casts, float32.where
    scale = by_id["scale_by_dk"]  # found behind the float32 values (the walk takes them to float32 accuracy)
    assert scale.where is not None and scale.where.line == line_of(path, "/ d_k"), scale.where


def test_projections_wrapped_in_parameters_are_cut_from_the_graph_at_the_wrapping(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """``nn.Parameter(w)`` for each given projection makes new leaves: out depends on W_Q, W_K and W_V, yet no
    gradient reaches them, and the failing gradients' check had no cause beside the head's wrong scale. It is
    named (out seen to change with each, none reached by a gradient) at the line that makes the copies."""
    result = _graded(tmp_path, rubric, pool, "weights_wrapped_in_parameters")
    [cut] = [c for c in result.diagnosis if c.id == "inputs_cut_from_graph"]
    assert "W_Q, W_K and W_V" in cut.title and cut.explains == ["gradient_blocks"], cut
    assert cut.where is not None and cut.where.line == line_of(
        HEADS / "weights_wrapped_in_parameters.py", "nn.Parameter(w)"
    )
    assert {c.id for c in result.diagnosis if not c.id.startswith("missing:")} == {
        "inputs_cut_from_graph",
        "scale_by_sqrt_T",
    }


@pytest.mark.parametrize(
    ("name", "returned"),
    [("scores_returned_as_weights", "    return out, att"), ("logits_returned_functional", "    return out, logits")],
)
def test_the_scores_returned_as_the_weights_are_named_at_the_return(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool, name: str, returned: str
) -> None:
    """``return out, att`` where ``att`` is what the softmax was given: out is right, the weights are the scores
    (-inf, or -1e9, where a key is hidden). Before, no cause (or 'non-finite outputs' for the -inf) and every check
    of the weights counted one by one; now the catalog's mistake, at the return, explaining the checks the
    non-finite weights left unobserved too (one mistake, one deduction)."""
    result = _graded(tmp_path, rubric, pool, name)
    [returned_cause] = [c for c in result.diagnosis if c.id == "scores_returned"]
    assert returned_cause.where is not None and returned_cause.where.line == line_of(HEADS / f"{name}.py", returned)
    assert {"reference_match", "row_stochastic", "causal_mask"} <= set(returned_cause.explains)
    others = {c.id for c in result.diagnosis if not c.id.startswith("missing:")} - {"scores_returned"}
    # the -1e9 fill does not fit in float16: numerical_stability's own cause, at the fill
    assert others == ({"weak_mask_fill"} if name == "scores_returned_as_weights" else set()), result.diagnosis
    failing = {c.id for c in result.checks if c.status in FAILING}
    assert failing <= {cid for c in result.diagnosis for cid in c.explains}  # every failure explained


def test_a_head_that_runs_in_float32_only_is_one_crash_and_its_scale_is_found_behind_it(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """A softmax taken in float32 and never cast back raises in every float64 check (and for float16): before, the
    crash was named three times (the function's crash, score_scaling's, and the dtype's) and the walk stopped at
    the float32 weights, which a patch in their own dtype cannot make float64, so the scale by sqrt(d_v) behind
    them had no cause. Now one crash, for the dtypes it raises in, at the line that made the float32 values, and
    the walk goes past the float32 weights (equal to the lecture's to float32 accuracy) to the scale, at the line
    that sets it."""
    result = _graded(tmp_path, rubric, pool, "softmax_float32_never_cast_back")
    path = HEADS / "softmax_float32_never_cast_back.py"
    ids = [c.id for c in result.diagnosis if not c.id.startswith("missing:")]
    assert ids.count("unsupported_dtype") == 1 and not any(c.startswith("crash:") for c in ids), ids
    [crash] = [c for c in result.diagnosis if c.id == "unsupported_dtype"]
    # at the line that makes the float32 weights the float64 values meet (the line to edit), not the product
    assert "float64" in crash.title and crash.where is not None
    assert crash.where.line == line_of(path, "attn = F.softmax("), crash.where
    [scale] = [c for c in result.diagnosis if c.id == "scale_by_sqrt_dv"]
    assert scale.where is not None and scale.where.line == line_of(path, "scale = 1.0 /"), scale.where
    missing = {x for c in result.diagnosis if c.id.startswith("missing:") for x in c.explains}
    failing = {c.id for c in result.checks if c.status in FAILING} - missing
    assert failing <= set(crash.explains)  # every check the crash stopped, charged once


# issue 35, item 2: the number that had to change, set as an attribute of the module (``self.scale`` in
# ``__init__``, read in ``forward``, or passed on to a function): the line that sets it, as for a local
HELD = {
    "scale_held_by_the_module": ("scale_times_sqrt_dk", "self.scale = W_Q.shape[1] ** 0.5"),
    "scaling_passed_from_the_module": ("scale_by_sqrt_d_model", "self.scaling = hidden_size**-0.5"),
}


@pytest.mark.parametrize("name", HELD)
def test_a_scale_held_by_the_module_points_where_the_module_sets_it(
    name: str, tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    cid, sets = HELD[name]
    result = _graded(tmp_path, rubric, pool, name)
    [scale] = [c for c in result.diagnosis if c.id == cid]
    assert scale.where is not None and scale.where.line == line_of(HEADS / f"{name}.py", sets), scale.where
    assert [c.id for c in result.diagnosis if not c.id.startswith("missing:")] == [cid]


def test_a_mask_read_off_zero_scores_and_a_softmax_without_dim_are_each_at_their_line(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """``F.softmax(wei)`` of a 3-D tensor is over the batch axis, which with -inf in the same place of every
    sequence makes NaN: the model's fill for a mask read off the values was -1e9 until a row with nothing left
    showed, so no combination matched and only 'non-finite outputs' was said. NaN where the mask hides, along any
    axis, is -inf. The value-made mask departs only where a score is exactly 0 (not on the traced probe): its line
    is the comparison that makes it."""
    result = _graded(tmp_path, rubric, pool, "mask_from_zero_scores_softmax_without_dim")
    path = HEADS / "mask_from_zero_scores_softmax_without_dim.py"
    by_id = {c.id: c for c in result.diagnosis if not c.id.startswith("missing:")}
    assert set(by_id) == {"mask_value_derived", "softmax_over_batch"}, by_id
    mask, softmax = by_id["mask_value_derived"].where, by_id["softmax_over_batch"].where
    assert mask is not None and mask.line == line_of(path, "wei == 0"), mask
    assert softmax is not None and softmax.line == line_of(path, "F.softmax(wei)"), softmax


def test_a_bias_made_in_float32_is_the_dtype_crash_at_the_line_that_makes_it(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The head runs in float64 and float32 and raises for float16: the crash had no line (the traced probe is
    float64, where nothing raises). Traced in the dtype that raises, it is at the line that made the value of
    another dtype the float16 ones meet (the bias of ``torch.full`` in the default dtype), not at the product."""
    result = _graded(tmp_path, rubric, pool, "bias_made_in_float32")
    [crash] = [c for c in result.diagnosis if c.id == "unsupported_dtype"]
    assert "float16" in crash.title and "float64" not in crash.title, crash.title
    path = HEADS / "bias_made_in_float32.py"
    assert crash.where is not None and crash.where.line == line_of(path, "torch.full((T, T)"), crash.where


def test_an_exp_without_the_max_in_a_row_by_row_loop_is_at_the_exp(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """Each row a vector of its own length (no stage's shape): the walk sees only the stacked rows, and the exp
    without the row's max was named with no line. It is at the exp of a value computed from the inputs."""
    result = _graded(tmp_path, rubric, pool, "row_by_row_exp")
    [exp] = [c for c in result.diagnosis if c.id == "unstable_softmax"]
    assert exp.where is not None and exp.where.line == line_of(HEADS / "row_by_row_exp.py", "torch.exp(s)"), exp
    assert [c.id for c in result.diagnosis if not c.id.startswith("missing:")] == ["unstable_softmax"]


def test_a_width_passed_on_under_its_own_name_is_wrong_where_it_is_used(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """``self.d_out = d_out`` only passes the value width on (rightly named): the scale by its square root is wrong
    at ``scores / self.d_out**0.5``. It was pointed at the attribute's line, as a module-held scale is."""
    result = _graded(tmp_path, rubric, pool, "width_attribute_used_as_scale")
    [scale] = [c for c in result.diagnosis if not c.id.startswith("missing:")]
    assert scale.id == "scale_by_sqrt_dv", scale.id
    path = HEADS / "width_attribute_used_as_scale.py"
    assert scale.where is not None and scale.where.line == line_of(path, "self.d_out**0.5"), scale.where


def test_a_broadcast_mask_made_by_a_helper_is_at_the_comparison(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """A (B, 1, T, T) mask made by a helper and applied by ``torch.where`` with the dtype's most negative number:
    the diagonal it hides too is at the comparison that made it (it was at the ``where``, and the finite fill was
    taken for a number to change: finfo.min hides at every scale)."""
    result = _graded(tmp_path, rubric, pool, "broadcast_mask_from_helper")
    [mask] = [c for c in result.diagnosis if not c.id.startswith("missing:")]
    assert mask.id == "mask_excludes_diagonal", mask.id
    path = HEADS / "broadcast_mask_from_helper.py"
    assert mask.where is not None and mask.where.line == line_of(path, "pos[:, :, None] > pos[:, None, :]"), mask


def test_scores_returned_beside_an_additive_fill_are_two_causes_that_explain_every_check(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """The weights the head returns are its scores with -1e4 added above the diagonal. The fill was fitted from the
    softmax of the returned scores, where exp(-1e4) is 0: nothing matched and the one cause said was the fill's,
    at the return line. Fitted from the scores themselves, the pair matches; the future leak of the returned
    scores (future_perturbation) takes both, so the grade is counted by mistakes. The scores returned are at the
    helper's ``return``, where they were handed back (it was the caller's, which passed them on)."""
    result = _graded(tmp_path, rubric, pool, "additive_mask_scores_returned")
    by_id = {c.id: c for c in result.diagnosis if not c.id.startswith("missing:")}
    assert set(by_id) == {"weak_mask_constant", "scores_returned"}, by_id
    path = HEADS / "additive_mask_scores_returned.py"
    fill, returned = by_id["weak_mask_constant"].where, by_id["scores_returned"].where
    assert fill is not None and fill.line == line_of(path, "return (1.0 - mask)"), fill
    # the helper's return that handed the scores back, not the caller's that passed them on
    assert returned is not None and returned.line == line_of(path, "return probs @ v, scores"), returned
    assert all(c.deduction is not None for c in result.diagnosis), result.diagnosis
    failing = {c.id for c in result.checks if c.status in FAILING}
    assert failing <= {x for c in result.diagnosis for x in c.explains}, failing


def test_a_mask_set_entry_by_entry_is_judged_after_its_last_write(
    tmp_path: Path, rubric: Rubric, pool: WorkerPool
) -> None:
    """``s[i, j] = -inf`` in a double loop that starts at the diagonal: each write's value is a mask half done, no
    stage. The walk took the first write for the departure ("hides 1 of the 49 entries"), passed it through and
    then found the softmax's input unmasked: a second cause (departure:weights) for the one mistake."""
    result = _graded(tmp_path, rubric, pool, "mask_set_entry_by_entry")
    [mask] = [c for c in result.diagnosis if not c.id.startswith(("missing:", "own:performance"))]  # loops: slow
    assert mask.id == "mask_excludes_diagonal", result.diagnosis
    path = HEADS / "mask_set_entry_by_entry.py"
    assert mask.where is not None and mask.where.line == line_of(path, 's[i, j] = float("-inf")'), mask.where
    assert mask.departure is not None and mask.departure.description.startswith("hides the diagonal too")
