"""Where a head leaves the lecture's computation (issue 28): the worker's trace, the departure, its words and line.

The heads here are small modules written for these tests; each mistake is one the error model has no mutation
for (or one whose line is not where the value first goes wrong), so the departure itself must find it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from grader.diagnosis import diagnose
from grader.head import Head
from grader.library import load_reference
from grader.models import CheckResult, Diagnosis
from grader.oracle import LiveOracle
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import Sandbox, WorkerPool

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "grader" / "sandbox"))  # the worker's own modules, as the worker imports them
import _ops  # type: ignore[import-not-found]  # noqa: E402

Diagnose = Callable[[str], list[Diagnosis]]
FAILED = [
    CheckResult(id=c, title="t", cites="c", status="failed", score=0, max_score=1, message="m", seed=0, duration_s=0)
    for c in ("reference_match",)
]
HEADER = "import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n\n\n"


@pytest.fixture
def head_of(tmp_path: Path, rubric: Rubric, pool: WorkerPool) -> Iterator[Diagnose]:
    def run(source: str) -> list[Diagnosis]:
        folder = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "attention_head.py").write_text(HEADER + source, encoding="utf-8")
        with Sandbox(folder, rubric.limits, pool=pool) as sandbox:
            return diagnose(FAILED, Head(sandbox, rubric.entry_points), LiveOracle(load_reference()))

    yield run


def _one(found: list[Diagnosis]) -> Diagnosis:
    [d] = [d for d in found if d.where is not None]
    return d


CASES = {
    "clamp": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1).clamp(max=0.9)
    return w @ v, w
""",
        "w = torch.softmax(s, dim=-1).clamp(max=0.9)",
        "a ceiling: entries above 0.9 cut to 0.9 (a clamp)",
    ),
    "nan_mask": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
    upper = torch.ones(T, T, dtype=X.dtype).triu(1) * -math.inf
    w = torch.softmax(s + upper if causal else s, dim=-1)
    return w @ v, w
""",
        "upper = torch.ones(T, T, dtype=X.dtype).triu(1) * -math.inf",
        "NaN in",
    ),
    "no_projections": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    queries = X
    keys = X
    s = queries @ keys.transpose(-2, -1) / math.sqrt(W_K.shape[1])
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ (X @ W_V), w
""",
        "queries = X",
        "X used where Q = X W_Q and K = X W_K belong: W_Q and W_K are never applied",
    ),
    "dropped_masked_fill": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
    if causal:
        s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w
""",
        's.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))',
        "never used",
    ),
    "times_sqrt_dk": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = (q @ k.transpose(-2, -1)) * math.sqrt(k.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w
""",
        "s = (q @ k.transpose(-2, -1)) * math.sqrt(k.shape[-1])",
        "the scores times sqrt(d_k)",
    ),
    "numpy_sqrt_T": (
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    x, wq, wk, wv = (t.detach().numpy() for t in (X, W_Q, W_K, W_V))
    T = x.shape[1]
    s = (x @ wq) @ np.swapaxes(x @ wk, -1, -2) / np.sqrt(T)
    if causal:
        s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    w = e / e.sum(-1, keepdims=True)
    return torch.from_numpy(w @ (x @ wv)), torch.from_numpy(w)
""",
        "s = (x @ wq) @ np.swapaxes(x @ wk, -1, -2) / np.sqrt(T)",
        "1/sqrt(T)",
    ),
    "module_transposed_weights": (
        """
class Head(torch.nn.Module):
    def __init__(self, W_Q, W_K, W_V):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(*W.shape, bias=False) for W in (W_Q, W_K, W_V))
        for lin, W in zip((self.q, self.k, self.v), (W_Q, W_K, W_V)):
            lin.weight = torch.nn.Parameter(W.T.clone())

    def forward(self, x, causal):
        T = x.shape[1]
        s = self.q(x) @ self.k(x).transpose(-2, -1) / math.sqrt(self.k.weight.shape[0])
        if causal:
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        w = F.softmax(s, dim=-1)
        return w @ self.v(x), w.transpose(-2, -1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    return Head(W_Q, W_K, W_V)(X, causal)
""",
        "return w @ self.v(x), w.transpose(-2, -1)",
        "its transpose",
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_the_departure_is_found_at_its_line_with_fitting_words(name: str, head_of: Diagnose) -> None:
    source, code, words = CASES[name]
    d = _one(head_of(source))
    assert d.where is not None and d.departure is not None
    assert d.where.code == code, d.where
    assert words in d.departure.description, d.departure.description
    lines = (HEADER + source).splitlines()
    assert lines[d.where.line - 1].strip() == code and d.where.file == "attention_head.py"
    assert d.where.context[d.where.line] == lines[d.where.line - 1]


def test_a_named_cause_carries_the_line_of_its_departure(head_of: Diagnose) -> None:
    """no_scaling found by the error model, at the line that computes the scores, where the scale belongs (issue
    35: not the mask's line, where the unscaled scores are first used)."""
    [d] = head_of(
        """
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    T = X.shape[1]
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    s = q @ k.transpose(-2, -1)
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w
"""
    )
    assert (d.id, d.kind) == ("no_scaling", "mutation")
    assert d.where is not None and d.where.code == "s = q @ k.transpose(-2, -1)"
    assert d.departure is not None and "never divided by sqrt(d_k)" in d.departure.description
    assert d.departure.expected is not None and d.departure.produced is not None


def _module(tmp_path: Path, source: str) -> object:
    path = tmp_path / "attention_head.py"
    path.write_text(HEADER + source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("attention_head", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_trace_op_records_at_the_submissions_lines_and_caps_what_it_ships(tmp_path: Path) -> None:
    module = _module(tmp_path, CASES["clamp"][0])
    g = torch.Generator().manual_seed(0)
    T = 200  # (2, 200, 200) scores: 80000 elements, over the cap of one value
    tensors = {"X": torch.randn(2, T, 4, generator=g, dtype=torch.float64)}
    tensors |= {n: torch.randn(4, 3, generator=g, dtype=torch.float64) for n in ("W_Q", "W_K", "W_V")}
    args = [{"t": n} for n in ("X", "W_Q", "W_K", "W_V")]
    header, values = _ops.op_trace(module, {"fn": "causal_self_attention", "args": args}, tensors)
    records = header["records"]
    assert {r["file"] for r in records} == {"attention_head.py"}
    lines = (HEADER + CASES["clamp"][0]).splitlines()
    assert all(lines[r["line"] - 1].strip() == r["code"] for r in records)
    assert any(r["op"] == "clamp" for r in records)
    big = [r for r in records if r["shape"] == [2, T, T]]
    assert big and all("value" not in r for r in big)  # recorded, not shipped
    assert all(t.numel() <= _ops.TRACE_ELEMENTS for n, t in values.items() if n.startswith("v:"))
    assert sum(t.numel() for n, t in values.items() if n.startswith("v:")) <= _ops.TRACE_TOTAL


def test_a_notebook_cause_names_its_cell_and_the_line_in_it(rubric: Rubric, pool: WorkerPool) -> None:
    result = grade(REPO / "tests" / "notebooks" / "buggy_among_plots.ipynb", rubric, pool=pool, visuals=False)
    [d] = [d for d in result.diagnosis if d.id == "no_mask"]
    assert d.where is not None
    assert (d.where.file, d.where.cell, d.where.line) == ("buggy_among_plots.ipynb", 2, 4)
    assert d.where.code == "weights = torch.softmax(scores, dim=-1)  # TODO mask?"
    assert d.where.context[4] == "    weights = torch.softmax(scores, dim=-1)  # TODO mask?"


def test_every_surface_shows_the_line(rubric: Rubric, pool: WorkerPool) -> None:
    """Terminal, HTML, JUnit and JSON of one graded head all carry the student's line (issue 28)."""
    import io
    import json

    from rich.console import Console

    from grader.exports import result_schema
    from grader.models import GradeResult
    from grader.report.html import render_html
    from grader.report.junit import render_junit
    from grader.report.terminal import render_terminal

    result = grade(REPO / "tests" / "realistic" / "times_sqrt_dk.py", rubric, pool=pool, visuals=False)
    [d] = result.diagnosis
    assert d.where is not None and d.where.line == 15
    code = "scores = (Q @ K.transpose(-2, -1)) * math.sqrt(d_k)"
    buf = io.StringIO()
    render_terminal(result, Console(file=buf, width=200, color_system=None))
    assert f"At attention_head.py:15: {code}" in buf.getvalue()
    page = render_html(result)
    assert '<span class="src-line src-hl">  15' in page and 'class="matrix' in page
    xml = render_junit(result)
    assert 'file="attention_head.py" line="15"' in xml
    data = json.loads(result.model_dump_json())
    assert data["diagnosis"][0]["where"]["line"] == 15 and data["diagnosis"][0]["where"]["code"] == code
    assert GradeResult.model_validate(data) == result
    assert '"where"' in result_schema() and "SourceLine" in result_schema()


def test_a_forged_trace_is_read_defensively() -> None:
    """Student code runs beside the worker's recorder: whatever its header says, the grader neither raises nor
    believes a malformed entry."""
    from grader.diagnosis._trace import probe, traced

    class Forged:
        def probe(self, *args: object, **kwargs: object) -> tuple[dict[str, object], dict[str, torch.Tensor]]:
            header = {
                "records": [{"line": "7; rm -rf"}, {"line": True}, 3, {"line": 5, "file": "a.py", "reads": "v:0"}],
                "context": {"a.py": {"x": 1, "5": "y"}},
                "raised": {"type": 1, "line": -1},
                "left": {"numpy": {"line": 2.5}},
                "aliases": "none",
                "result": [],
            }
            return header, {"v:0": torch.zeros(2)}

    trace = traced(Forged(), probe(), True)  # type: ignore[arg-type]
    assert trace is not None
    assert [(r.file, r.line, r.reads) for r in trace.records] == [("a.py", 5, ())]
    assert trace.context == {"a.py": {5: "y"}}
    assert trace.raised == {"type": "1"} and trace.left == {} and trace.aliases == [] and trace.returned == set()
