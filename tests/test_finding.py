"""Findings are data (issue 51, item 1): a departure's finding carries fields, its words are made from them in one
place, and the catalog's cause it names is a lookup on those fields, never a pattern over the words."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import get_args

import pytest
import torch

from grader.diagnosis._finding import (
    NAMES,
    PATTERNS,
    PROJECTIONS,
    ROWS,
    SCALES,
    SUBSTITUTIONS,
    TITLES,
    UNUSED,
    Finding,
    Kind,
    Note,
    Pattern,
    catalog,
)
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
            Finding("scaled_by", factor=1 / 6, quantity="1/d_k", d_k=6, rescaled=True),
            "the scores times 1/d_k = 0.1667 where the lecture scales them by 1/sqrt(d_k) = 0.4082 (Lemma 5.5): this "
            "line scales scores already scaled by 1/sqrt(d_k), by 0.4082 again",
            ("scale_applied_twice", None),  # issue 51's worked example: the same values, seen at the second division
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


# ---- the catalog is the registry's seen (issue 51 point 3): every finding named as the code named it ---------

# what _finding.catalog() was before it read causes.toml: the tables and the branches, as they were written
_SCALES = {"1/d_k": "scale_by_dk", "1/sqrt(d)": "scale_by_sqrt_d_model", "1/sqrt(T)": "scale_by_sqrt_T",
           "1/sqrt(d_v)": "scale_by_sqrt_dv", "sqrt(d_k)": "scale_times_sqrt_dk"}  # fmt: skip
_PATTERNS = {"diagonal": "mask_excludes_diagonal", "late": "mask_leaks_by_one", "past": "mask_transposed",
             "inverted": "mask_inverted"}  # fmt: skip
_PROJECTIONS = {("V", "X"): "no_value_projection", ("K", "W_Q"): "keys_from_query_projection",
                ("QK", "X"): "no_query_key_projection", ("Q", "X"): "no_query_projection",
                ("K", "X"): "no_key_projection"}  # fmt: skip
_UNUSED = {"masked": "no_mask", "premasked": "no_mask", "scaled": "no_scaling"}


def _written(
    f: Finding, *, never_used: bool = False, transposed: bool = False, float32: bool = False
) -> tuple[str, float | None] | None:
    k = f.kind
    if k == "fill" and f.future:
        return ("weak_mask_constant" if f.added else "weak_mask_fill"), float(f"{f.fill:.6g}")
    if k == "future_constant" and f.instead == "-inf":
        return "weak_mask_fill", float(f"{f.fill:.6g}")
    if k == "hides" and f.pattern:
        return _PATTERNS[f.pattern], None
    if k == "causal_ignored":
        return "causal_flag_ignored", None
    if k == "unscaled":
        return "no_scaling", None
    if k == "scaled_by" and not f.fixed and f.quantity in _SCALES:
        return _SCALES[f.quantity], None
    if k == "exp_without_max":
        return "unstable_softmax", None
    if k == "dropout" and not f.notes:
        return "dropout_left_on", float(f"{f.p:.3g}")
    if k == "rows" and f.axis:
        return ("softmax_wrong_axis" if f.axis == "queries" else "softmax_over_batch"), None
    if k == "substituted" and (f.role, f.source) in _PROJECTIONS:
        return _PROJECTIONS[(f.role, f.source)], None
    if never_used and k == "never_used" and f.alike and TITLES[f.stage] in (TITLES["masked"], TITLES["premasked"]):
        return "no_mask", None
    if never_used and k == "never_used" and not f.alike:
        named = {NAMES[s]: cid for s, cid in _UNUSED.items()}
        cid = named.get(NAMES.get(f.stage, f.stage))
        return (cid, None) if cid is not None else None
    if transposed and k == "transpose":
        return "weights_transposed", None
    if float32 and k == "float32":
        return "softmax_in_float32", None
    return None


def _findings() -> list[Finding]:
    """Every finding the old branches tell apart: each kind with each value of the fields they read."""
    note = Note("passed", 7, "k = x @ w", var="w")
    quantities = (*_SCALES, "1/sqrt(d_k)", "d_k", "1", "-1", "", "1/sqrt(16)")
    out = [Finding(k) for k in get_args(Kind)]  # every kind with no field set
    out += [Finding("fill", fill=c, added=a, future=fu) for c in (-1e9, -100.0, -123.456789) for a in (True, False)
            for fu in (True, False)]  # fmt: skip
    out += [Finding("future_constant", fill=-1e4, instead=i) for i in ("-inf", "0", "other values")]
    out += [Finding("hides", pattern=p, count=9, total=49, future_count=21) for p in get_args(Pattern)]
    out += [Finding("scaled_by", factor=0.5, quantity=q, fixed=x, d_k=6) for q in quantities for x in (True, False)]
    out += [Finding("scaled_by", factor=1 / 6, quantity="1/d_k", d_k=6).noted(note)]
    out += [Finding("dropout", count=3, factor=1.25, p=p) for p in (0.2, 0.123456)]
    out += [Finding("dropout", count=3, factor=1.25, p=0.2).noted(note)]
    out += [Finding("rows", axis=a, low=0.5, high=2.0) for a in ("", *ROWS)]
    out += [Finding("substituted", role=r, source=s) for r, s in SUBSTITUTIONS]
    out += [Finding("substituted", role="K", source="W_Q").noted(note)]
    out += [Finding("never_used", stage=s, alike=a, masked_fill=m) for s in TITLES for a in (True, False)
            for m in (True, False)]  # fmt: skip
    out += [Finding("nan_constant", stage="weights", inner=Finding("float32"))]
    out += [Finding(k, stage=s) for k in ("times", "differs", "value_due", "raises") for s in TITLES]
    return out


@pytest.mark.parametrize("context", list(itertools.product((False, True), repeat=3)))
def test_the_catalog_read_off_the_registry_names_what_the_code_named(context: tuple[bool, bool, bool]) -> None:
    flags = dict(zip(("never_used", "transposed", "float32"), context, strict=True))
    findings = _findings()
    assert len(findings) > 150
    assert {str(f): _answer(catalog, f, flags) for f in findings} == {
        str(f): _answer(_written, f, flags) for f in findings
    }


def _answer(named: Callable[..., object], f: Finding, flags: dict[str, bool]) -> object:
    """What ``named`` answers, or that it refuses (a fill named with no fill given: neither names it)."""
    try:
        return named(f, **flags)
    except (TypeError, AssertionError):
        return "refused"


def test_the_tables_the_catalog_was_are_derived_from_the_registry() -> None:
    assert (SCALES, PATTERNS, PROJECTIONS, UNUSED) == (_SCALES, _PATTERNS, _PROJECTIONS, _UNUSED)
