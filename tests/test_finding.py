"""Findings are data (issue 51, item 1): a departure's finding carries fields, its words are made from them in one
place, and the catalog's cause it names is a lookup on those fields, never a pattern over the words."""

from __future__ import annotations

import pytest
import torch

from grader.diagnosis._finding import Finding, Note, catalog
from grader.diagnosis._relations import _clamp, _dropout, _factor, _float32, _future, _masking, _rows


@pytest.mark.parametrize(
    ("finding", "words", "named"),
    [
        (
            Finding("fill", fill=-1e9),
            "the future keys filled with -1e+09 instead of -inf: a finite fill hides them only while the scores "
            "stay small",
            ("weak_mask_fill", -1e9),
        ),
        (
            Finding("fill", fill=-100.0, added=True),
            "-100 added to the future keys instead of -inf: at large scores it no longer hides them",
            ("weak_mask_constant", -100.0),
        ),
        (
            Finding("fill", fill=-100.0, future=False),
            "the entries it hides filled with -100 instead of -inf: a finite fill hides them only while the scores "
            "stay small",
            None,
        ),
        (
            Finding("future_constant", fill=-10000.0, instead="-inf"),
            "-10000 above the diagonal (the future keys j > i) where the lecture has -inf",
            ("weak_mask_fill", -10000.0),
        ),
        (
            Finding("hides", pattern="diagonal"),
            "hides the diagonal too (j >= i): each query is kept from itself",
            (
                "mask_excludes_diagonal",
                None,
            ),
        ),
        (
            Finding("hides", count=9, total=49, future_count=21),
            "hides 9 of the 49 entries of each batch element where the lecture hides the 21 future ones",
            None,
        ),
        (Finding("unscaled"), "the scores Q K^T, never divided by sqrt(d_k) (Lemma 5.5)", ("no_scaling", None)),
        (
            Finding("scaled_by", factor=1 / 6, quantity="1/d_k", d_k=6),
            "the scores times 1/d_k = 0.1667 where the lecture scales them by 1/sqrt(d_k) = 0.4082 (Lemma 5.5)",
            ("scale_by_dk", None),
        ),
        (
            Finding("scaled_by", factor=0.25, quantity="1/sqrt(16)", fixed=True, d_k=6),
            "the scores times 1/sqrt(16) = 0.25, a fixed number (d_k = 6 here) where the lecture scales them by "
            "1/sqrt(d_k) = 0.4082 (Lemma 5.5)",
            None,
        ),
        (
            Finding("dropout", count=12, factor=1 / 0.9, p=0.1),
            "12 entries zeroed and the rest scaled by 1.111: dropout with p = 0.1 left on",
            ("dropout_left_on", 0.1),
        ),
        (
            Finding("substituted", role="K", source="W_Q").noted(Note("passed", 7, "k = x @ w", var="w")),
            "X W_Q used where K = X W_K belongs: the keys come from the query projection; `w` is passed here and "
            "used at line 7: `k = x @ w`",
            ("keys_from_query_projection", None),
        ),
        (
            Finding("never_used", "masked", masked_fill=True),
            "the masked scores (-inf above the diagonal) computed here is never used: nothing after it reads the "
            "result (masked_fill returns a new tensor: assign it, or use masked_fill_)",
            None,  # named so only where an intervention found it
        ),
        (
            Finding("scaled_by", factor=0.5, quantity="", d_k=6).noted(Note("set", 9, "s = q @ k.T * c", "c", 0.5)),
            "the scores times 0.5 where the lecture scales them by 1/sqrt(d_k) = 0.4082 (Lemma 5.5); `c` is set "
            "here (0.5 on the grader's probe) and used at line 9: `s = q @ k.T * c`",
            None,
        ),
    ],
)
def test_a_finding_says_its_fields_and_names_its_cause_by_them(
    finding: Finding, words: str, named: tuple[str, float | None] | None
) -> None:
    assert finding.words == words
    assert catalog(finding) == named


def test_what_only_an_intervention_names_is_asked_for() -> None:
    unused = Finding("never_used", "scaled")
    assert catalog(unused) is None and catalog(unused, never_used=True) == ("no_scaling", None)
    alike = Finding("never_used", "premasked", alike=True)
    assert alike.words == (
        "the masked scores before the scale made here (masked with a pattern of their own) are never used: nothing "
        "after it reads the result"
    )
    assert catalog(alike, never_used=True) == ("no_mask", None)
    assert catalog(Finding("transpose"), transposed=True) == ("weights_transposed", None)
    assert catalog(Finding("float32"), float32=True) == ("softmax_in_float32", None)
    nan = Finding("nan_constant", stage="weights", inner=Finding("float32"))
    assert nan.float32 and catalog(nan, float32=True) is None  # words inside words name nothing


def test_the_relations_return_findings_with_their_numbers() -> None:
    torch.manual_seed(0)
    e = torch.randn(2, 4, 4, dtype=torch.float64)
    assert _factor(e * 0.25, e) == Finding("factor", factor=0.25)
    assert _float32(e.float().double(), e) == Finding("float32")
    clamped = _clamp(e.clamp(min=-0.5), e)
    assert clamped is not None and clamped.kind == "clamp" and clamped.low == -0.5 and clamped.high is None
    future = torch.ones(4, 4, dtype=torch.bool).triu(1)
    unmasked = e.masked_fill(future, float("-inf"))
    assert _future(unmasked, e) == Finding("causal_ignored")
    filled = _masking(e.masked_fill(future, -1e4), e)
    assert filled == Finding("fill", fill=-1e4)
    assert _masking(e.masked_fill(future.T, float("-inf")), e) == Finding("hides", pattern="past")
    w = torch.softmax(e, dim=-1)
    assert _rows(torch.softmax(e, dim=-2), w) == Finding("rows", axis="queries")
    keep = torch.rand(2, 4, 4, generator=torch.Generator().manual_seed(1)) > 0.5
    dropped = _dropout(w * keep / 0.5, w)
    assert dropped is not None and dropped.p == pytest.approx(0.5) and dropped.count == int((~keep).sum())
