"""Titles, hints and citations of causes, and which checks each mutation breaks.

Mutations that are also chaffs of the bug library take the catalog's title, hint and citation; the
others are named here, in the project's own words, citing lecture results by number. :func:`violates`
lists the checks a mutation breaks (what it ``explains``, once intersected with the checks that failed):
a chaff's catalog entry, pinned on the real checks by the library tests, or a static entry for the
mutations that are not chaffs. :data:`RULED_OUT_BY` lists the checks that, when they pass, rule a
mutation out (this prunes the search; a wrong entry costs a diagnosis, never a wrong one).
"""

from __future__ import annotations

import math
from functools import cache

from grader.diagnosis._mutations import FITTED, SLOT_OF
from grader.library import known_heads
from grader.models import Diagnosis

ORACLES = ("reference_match", "fused_kernel")
CONTRACT_CAUSES = ("output_dtype", "weights_dtype", "no_autograd_graph")
SIZE_CRASH = "fixed_size_buffer"  # a crash at some sequence lengths only: a buffer of fixed length
DTYPE_CRASH = "unsupported_dtype"  # a crash for some input dtypes only (NumPy has no bfloat16)
# A fitted mask constant of magnitude below this leaks at ordinary scores (float64's exp underflows only past
# -745): it gets the "leaky" id, priced as the broken mask it is; a larger one masks exactly at ordinary scores
# and fails only at huge scores or in low precision (the "weak" id of the search).
ORDINARY_SCORES = 1e3
FLOAT16_MAX, FLOAT32_MAX = 65504.0, 3.4028234663852886e38
LEAKY = {"weak_mask_fill": "leaky_mask_fill", "weak_mask_constant": "leaky_mask_constant"}


def model_cause_ids() -> frozenset[str]:
    """The ids the diagnosis names without the bug library (the student kit's): the error model's mutations,
    the contract breaches and the crashes that depend on the input."""
    return frozenset({*SLOT_OF, *LEAKY.values(), *CONTRACT_CAUSES, SIZE_CRASH, DTYPE_CRASH})


@cache
def cause_ids() -> frozenset[str]:
    """Every id a diagnosis may name apart from per-function ones ("crash:...", "missing:...", "breach:...",
    "own:..."): the rubric prices these. The library's chaffs count only where the library is installed."""
    return model_cause_ids() | {c.id for c in known_heads("chaff")}


_MASK = ("causal_mask", "convex_hull", "future_perturbation", "gradient_blocks")
_SCALE = (*ORACLES, "score_scaling")

# The mutations that are not chaffs of the library; a chaff's own entry is its catalog's caught_by, which
# the library tests pin on the real checks (see :func:`violates`).
_OWN_VIOLATES: dict[str, tuple[str, ...]] = {
    "scale_by_sqrt_T": _SCALE,
    "scale_constant": _SCALE,
    "mask_inverted": (*ORACLES, *_MASK, "row_stochastic", "numerical_stability"),
    "mask_value_derived": (*ORACLES, *_MASK, "numerical_stability"),
    # A constant too weak for ordinary scores leaks there (the mask checks: the "leaky" ids); one that masks
    # exactly at ordinary scores fails only at huge scores or in half precision (numerical_stability, whose
    # failure the diagnosis confirms by replaying the check on the error model).
    "leaky_mask_constant": (*ORACLES, *_MASK, "numerical_stability"),
    "leaky_mask_fill": (*ORACLES, *_MASK, "numerical_stability"),
    "weak_mask_constant": ("numerical_stability",),
    "weak_mask_fill": ("numerical_stability",),
}


def violates(mid: str) -> tuple[str, ...]:
    """The checks whose property mutation ``mid`` breaks (the failing ones among them it explains)."""
    if mid in _OWN_VIOLATES:
        return _OWN_VIOLATES[mid]
    chaff = next((c for c in known_heads("chaff") if c.id == mid), None)
    return chaff.caught_by if chaff else ()


_LEAKS = ("causal_mask", "future_perturbation")
# Checks that, when they pass, rule a mutation out: each must fail on every head with that mutation. (A
# weak mask constant fails either the mask checks or numerical_stability, so no single check rules it out.)
RULED_OUT_BY: dict[str, tuple[str, ...]] = {
    **{
        m: ("score_scaling",)
        for m in ("no_scaling", "scale_by_dk", "scale_by_sqrt_d_model", "scale_by_sqrt_T", "scale_constant")
    },
    **{m: _LEAKS for m in ("no_mask", "mask_transposed", "mask_leaks_by_one")},
    "mask_value_derived": ("causal_mask",),  # with -inf an all-zero row is NaN, which future_perturbation allows
    "mask_excludes_diagonal": ("causal_mask",),
    "mask_inverted": _LEAKS,
    "mask_after_softmax_no_renorm": ("row_stochastic",),
    "causal_flag_ignored": ("permutation_equivariance",),
    "softmax_wrong_axis": ("row_stochastic",),
    "softmax_over_batch": ("row_stochastic", "batch_independence"),
    "unstable_softmax": ("numerical_stability",),
    "mask_after_softmax_renorm": ("numerical_stability",),
    "dropout_left_on": ("determinism",),
}

# (title, hint, cites) of the mutations that are not chaffs of the library
OWN: dict[str, tuple[str, str, str]] = {
    "scale_by_sqrt_T": (
        "Scores divided by sqrt(T), the sequence length, instead of sqrt(d_k)",
        "Your scale changes with the number of tokens. Lemma 5.5 fixes it by the width of the query and key "
        "vectors: divide Q K^T by sqrt(d_k) = sqrt(W_Q.shape[1]), whatever T is.",
        "Lemma 5.5",
    ),
    "mask_inverted": (
        "Mask inverted: the past is hidden and the future kept",
        "Your mask hides keys j <= i and keeps j > i, the opposite of the causal mask (the last row then has "
        "no key left). Mask exactly the strict upper triangle, j > i (Definition 4.1).",
        "Definition 4.1",
    ),
    "mask_value_derived": (
        "Mask built from score values (scores == 0 treated as masked)",
        "Your mask is decided by the values of the scores (e.g. tril(scores) == 0), so a score that happens to "
        "be 0 (a zero token row) is masked and the future shows through. Build the mask from positions only, "
        "j > i, independent of the data (Definition 4.1).",
        "Definition 4.1",
    ),
}


_DIAGONAL_INF = (
    "Diagonal masked too (filled with -inf), so row 0 has no key left and is NaN",
    "Your mask hides j >= i instead of j > i: a token cannot attend to itself, and the first token has no key "
    "at all (its row is NaN). Mask exactly the strict upper triangle, j > i (Definition 4.1).",
    "Definition 4.1",
)


def _catalog(cid: str) -> tuple[str, str, str] | None:
    chaff = next((c for c in known_heads("chaff") if c.id == cid), None)
    return (chaff.title, chaff.hint, chaff.cites) if chaff else None


def _fitted(mid: str, value: float) -> tuple[str, str, str]:
    if mid == "scale_constant":
        width = 1 / value**2
        as_width = f" = 1/sqrt({round(width)})" if math.isclose(width, round(width), rel_tol=1e-6) else ""
        return (
            f"Scores multiplied by a fixed constant {value:.6g}{as_width}, not 1/sqrt(d_k)",
            f"Your scale is the same number ({value:.6g}{as_width}) whatever the widths of the projections: a "
            "hard-coded width. Read d_k from W_Q.shape[1] and divide the scores by sqrt(d_k) (Lemma 5.5).",
            "Lemma 5.5",
        )
    if mid == "dropout_left_on":
        _, hint, cites = _catalog("dropout_left_on") or ("", "", "Proposition 3.1")
        return f"Attention dropout (p = {value:.3g}) left on", hint, cites
    how = "added to" if mid == "weak_mask_constant" else "written into"
    constant = f"{value:.6g}" if abs(value) >= 1e-6 else "a constant near 0"
    named = f"the constant {constant}" if abs(value) >= 1e-6 else constant
    if abs(value) < ORDINARY_SCORES:
        why = "That is not negative enough to zero the future at ordinary scores (or not negative at all)."
    else:
        limits = [f"scores of size {abs(value):.3g} and beyond outweigh it"]
        if abs(value) > FLOAT16_MAX:
            kind = "float32 and bfloat16" if abs(value) > FLOAT32_MAX else "float16"
            limits.append(f"it does not fit in {kind} (filling such a tensor with it raises, or it rounds to -inf)")
        why = f"It masks exactly at ordinary scores, but {' and '.join(limits)}."
    return (
        f"Future scores masked with {constant} ({how} the scores) instead of -inf",
        f"Your mask uses {named}, {how} the future scores. {why} Use masked_fill with -inf (or "
        "torch.finfo(scores.dtype).min) before the softmax (Definition 4.1, Implementation aside 4.4).",
        "Implementation aside 4.4",
    )


def mutation_cause(mid: str, fitted: dict[str, float], failed: set[str]) -> Diagnosis:
    """The cause for mutation ``mid`` (constants named with their fitted value)."""
    if mid in FITTED and FITTED[mid] in fitted:
        title, hint, cites = _fitted(mid, fitted[FITTED[mid]])
    elif mid == "mask_excludes_diagonal" and fitted.get("hide_fill") == -math.inf:
        title, hint, cites = _DIAGONAL_INF
    else:
        title, hint, cites = OWN.get(mid) or _catalog(mid) or (mid.replace("_", " "), "", "")
    cid = mid
    if mid in LEAKY and abs(fitted.get("mask", -math.inf)) < ORDINARY_SCORES:
        cid = LEAKY[mid]
    explains = [c for c in violates(cid) if c in failed]
    return Diagnosis(id=cid, title=title, hint=hint, cites=cites, kind="mutation", explains=sorted(explains))


def contract_cause(cid: str, detail: str, explains: list[str]) -> Diagnosis:
    """A breach of the calling contract (Section 9.1), seen directly rather than searched for."""
    n = len(explains)
    checks = f"{n} check{'s' if n != 1 else ''}"
    if cid.startswith("missing:"):
        title = f"`{detail}` is not defined — {checks} could not run"
        hint = f"Define `{detail}` with the template's signature; the checks that need it will then run (Section 9.1)."
    elif cid.startswith("breach:"):
        title = f"What `causal_self_attention` returns breaks the contract — {checks} could not judge it"
        hint = f"{detail}. Return the tuple (out, weights) of shapes (B, T, d_v) and (B, T, T) (Section 9.1)."
    elif cid in ("output_dtype", "weights_dtype"):
        what = "out" if cid == "output_dtype" else "the weights"
        title = f"Returns {what} as {detail}"
        hint = (
            f"Return {what} in the dtype of X (cast back with .to(X.dtype); a NumPy head with "
            "torch.from_numpy(...).to(X.dtype)); the other checks judged your values cast to the input dtype "
            "(Section 9.1)."
        )
    else:
        title = "No autograd graph: the outputs do not depend on the inputs through torch operations"
        hint = (
            "Compute with torch operations on the input tensors (no .numpy(), .detach(), .item() or .data) so "
            "that gradients flow back to X, W_Q, W_K and W_V (Proposition 4.3 is checked on them)."
        )
    return Diagnosis(id=cid, title=title, hint=hint, cites="Section 9.1", kind="contract", explains=explains)


@cache
def known_cause(cid: str) -> Diagnosis:
    title, hint, cites = _catalog(cid) or (cid, "", "")
    return Diagnosis(id=cid, title=title, hint=hint, cites=cites, kind="known")


def known_explains(cid: str, failed: set[str]) -> list[str]:
    chaff = next((c for c in known_heads("chaff") if c.id == cid), None)
    return sorted(set(chaff.caught_by if chaff else ()) & failed)
