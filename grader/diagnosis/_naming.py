"""Causes as the student reads them: titles, hints and citations filled in, and the checks each explains.

The words come from ``causes.toml`` (the error model's mutations, the contract breaches, the crashes; see
``_causes``) and, for a known bug that needs the library's code to be recognised, from the bug itself
(``_bugs``), whichever edition found it. :func:`violates` lists the checks a mutation breaks (what it
``explains``, once intersected with the checks that failed): the table's ``breaks``, pinned on the real
checks by the library tests.
"""

from __future__ import annotations

import math

from grader.diagnosis._bugs import Bug, bugs_of
from grader.diagnosis._causes import cause, model_cause_ids, refined
from grader.diagnosis._mutations import FITTED, ORDINARY_SCORES
from grader.models import Diagnosis
from grader.oracle import Oracle, load_oracle

FLOAT16_MAX, FLOAT32_MAX = 65504.0, 3.4028234663852886e38
# a fitted mask constant below ORDINARY_SCORES in magnitude takes the "leaky" kind that refines its mutation
LEAKY = refined()
# Checks whose property is theirs alone (another function's values, the APIs a head calls, its speed, the
# student's own tests): when no known bug matches, the failure is its own cause, charged its own points; and no
# departure of the head's values explains it (issue 28).
SELF_CONTAINED = (
    "gaussian_kernel",
    "gaussian_qk",
    "score_scale_experiment",
    "forbidden_api",
    "performance",
    "student_tests",
    "streaming_softmax",
    "kv_cache",
)


def cause_ids(ref: Oracle | None = None) -> frozenset[str]:
    """Every id a diagnosis of this edition may name apart from per-function ones ("crash:...", "missing:...",
    "breach:...", "own:..."): the rubric prices these. The known bugs are the edition's own (``ref``'s; the
    installed one by default): the library's in the instructor's grader, the stored ones in the student kit."""
    return model_cause_ids() | {b.id for b in bugs_of(ref or load_oracle()).bugs()}


def prices(overrides: dict[str, float], ref: Oracle) -> dict[str, float]:
    """Each cause's price: the rubric's ``overrides`` where it sets one, else the cause's default."""
    defaults = {cid: c.price for cid in model_cause_ids() if (c := cause(cid)).price is not None}
    defaults |= {b.id: b.price for b in bugs_of(ref).bugs() if b.price is not None}
    return defaults | overrides


def violates(mid: str) -> tuple[str, ...]:
    """The checks whose property mutation ``mid`` breaks (the failing ones among them it explains)."""
    return cause(mid).breaks or ()


def n_checks(n: int) -> str:
    return f"{n} check{'s' if n != 1 else ''}"


def _fitted(mid: str, value: float) -> dict[str, str]:
    """The fields of a fitted constant's title and hint: the value as a student wrote it, and what it does."""
    if mid == "scale_constant":
        if value == 0:  # every score alike (the "zero" variant's words): no width
            return {"value": "0", "as_width": ""}
        width = 1 / value**2
        as_width = f" = 1/sqrt({round(width)})" if math.isclose(width, round(width), rel_tol=1e-6) else ""
        return {"value": f"{value:.6g}", "as_width": as_width}
    if mid == "dropout_left_on":
        return {"p": f"{value:.3g}"}
    if mid == "scale_in_float32":
        return {"how": cause(mid).phrase("divides" if value else "multiplies")}
    entry = cause(LEAKY.get(mid, mid) if abs(value) < ORDINARY_SCORES else mid)
    constant = f"{value:.6g}" if abs(value) >= 1e-6 else "a constant near 0"
    fields = {
        "constant": constant,
        "named": f"the constant {constant}" if abs(value) >= 1e-6 else constant,
        "how": entry.phrase("how"),
    }
    if abs(value) >= ORDINARY_SCORES:
        limits = [entry.phrase("outweighed", size=f"{abs(value):.3g}")]
        if abs(value) > FLOAT16_MAX:
            dtypes = "float32 and bfloat16" if abs(value) > FLOAT32_MAX else "float16"
            limits.append(entry.phrase("overflow", dtypes=dtypes))
        fields["limits"] = " and ".join(limits)
    return fields


def mutation_cause(mid: str, fitted: dict[str, float], failed: set[str]) -> Diagnosis:
    """The cause for mutation ``mid`` (constants named with their fitted value)."""
    cid = mid
    if mid in LEAKY and abs(fitted.get("mask", -math.inf)) < ORDINARY_SCORES:
        cid = LEAKY[mid]
    fields = _fitted(mid, fitted[FITTED[mid]]) if mid in FITTED and FITTED[mid] in fitted else {}
    inf = mid == "mask_excludes_diagonal" and fitted.get("hide_fill") == -math.inf
    zero = mid == "scale_constant" and fitted.get("scale") == 0
    title, hint, cites = cause(cid).words("inf" if inf else "zero" if zero else None, **fields)
    explains = [c for c in violates(cid) if c in failed]
    return Diagnosis(id=cid, title=title, hint=hint, cites=cites, kind="mutation", explains=sorted(explains))


def contract_cause(cid: str, detail: str, explains: list[str]) -> Diagnosis:
    """A breach of the calling contract (Section 9.1), seen directly rather than searched for: ``detail`` is
    what was seen (the dtypes returned; the function not defined; what the head returned)."""
    name = cid.split(":", 1)[1] if ":" in cid else ""
    title, hint, cites = cause(cid).words(name=name, detail=detail, checks=n_checks(len(explains)))
    return Diagnosis(id=cid, title=title, hint=hint, cites=cites, kind="contract", explains=explains)


def known_cause(bug: Bug, failed: set[str]) -> Diagnosis:
    """A known bug the head matched on every probe, explaining the failing checks it breaks."""
    explains = sorted(set(bug.breaks) & failed)
    return Diagnosis(id=bug.id, title=bug.title, hint=bug.hint, cites=bug.cites, kind="known", explains=explains)
