"""One decision that shows in several ways, named once (issue 24, family 5; issue 35): computing outside torch,
a scale held in a float32 tensor, computing in float32, a projection left out and the width it leaves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from grader.diagnosis._causes import cause
from grader.diagnosis._direct import Slips, _slipped
from grader.diagnosis._where import (
    DTYPE_CRASH,
    first_line,
)
from grader.models import (
    Diagnosis,
)

if TYPE_CHECKING:
    pass


OUTSIDE_TORCH = "computed_outside_torch"
IN_FLOAT32 = "computed_in_float32"


def _one_choice(causes: list[Diagnosis], slips: Slips, bad: str) -> list[Diagnosis]:
    """One decision that shows in several ways, named once (issue 24, family 5): computing outside torch (no
    autograd graph beside NumPy's float64 results for float32 inputs or a dtype it cannot take), a scale held in
    a float32 tensor (its rounding in float64 beside the float16 it cannot take, issue 35), or computing in
    float32 (a float32 softmax beside float32 results for float64 inputs). ``bad``: the dtypes the head raised
    for. Run again once the causes have their lines (the walk may name a part)."""
    ids = {c.id for c in causes}
    returned = {k: [r for r, _ in s] for k, s in slips.items()}
    if "no_autograd_graph" in ids and (torch.float64 in returned["r0"] + returned["r1"] or DTYPE_CRASH in ids):
        parts = ["no_autograd_graph", "output_dtype", "weights_dtype", DTYPE_CRASH]
        said = ["no autograd graph"] + _dtype_slips(slips) + ([f"no {bad} inputs"] if DTYPE_CRASH in ids else [])
        return _merged(causes, OUTSIDE_TORCH, parts, said)
    causes = _width_of_values(causes)
    crash = next((c for c in causes if c.id == DTYPE_CRASH), None)
    if "scale_in_float32" in ids and crash is not None and _float32_met(crash, bad):
        said = ["float32 rounding in float64 results", f"no {bad} inputs ({first_line(crash.detail or '')})"]
        return _merged(causes, SCALE_TENSOR, ["scale_in_float32", DTYPE_CRASH], said)
    if "softmax_in_float32" in ids and torch.float32 in returned["r0"] + returned["r1"]:
        said = ["float32 accuracy in float64 results", *_dtype_slips(slips)]
        return _merged(causes, IN_FLOAT32, ["softmax_in_float32", "output_dtype", "weights_dtype"], said)
    return causes


BREACHES = ("one_value_breach", "breach:causal_self_attention")


def _width_of_values(causes: list[Diagnosis]) -> list[Diagnosis]:
    """Values never projected and the breach of out's width they make, one cause (issue 35, item 11): the checks
    that stopped on out's shape are the projection's, charged once at its price."""
    values = next((c for c in causes if c.id == "no_value_projection"), None)
    breach = next((c for c in causes if c.id in BREACHES and c.fact("shape_of") == "out"), None)
    if values is None or breach is None:
        return causes
    explains = sorted({*values.explains, *breach.explains})
    return [c.model_copy(update={"explains": explains}) if c is values else c for c in causes if c is not breach]


# a projection left out (named from the trace, after the crashes and breaches): the width it leaves, per id
WIDTHS = {
    "no_query_projection": "d_k",
    "no_key_projection": "d_k",
    "no_query_key_projection": "d_k",
    "no_value_projection": "d_v",
}


def _projection_widths(causes: list[Diagnosis]) -> list[Diagnosis]:
    """A projection left out and what its width does, one cause (issue 35, item 5): the crash of a head that runs
    only where that width equals d (Q K^T of X and X W_K), and the breach of out's width (values never
    projected), are the projection's: their checks are its, charged once at its price, at its line."""
    causes = _width_of_values(causes)
    for cid, width in WIDTHS.items():
        own = next((c for c in causes if c.id == cid), None)
        crash = next((c for c in causes if c.id == "width_crash" and width in _widths(c)), None)
        if own is None or crash is None:
            continue
        explains = sorted({*own.explains, *crash.explains})
        causes = [c.model_copy(update={"explains": explains}) if c is own else c for c in causes if c is not crash]
    return causes


SCALE_TENSOR = "scale_tensor_in_float32"


def _widths(crash: Diagnosis) -> tuple[str, ...]:
    """The widths a width crash says must equal d for the head to run (``_where.by_width``)."""
    widths = crash.fact("equal_d")
    return tuple(str(w) for w in widths) if isinstance(widths, tuple) else ()


def _float32_met(crash: Diagnosis, bad: str) -> bool:
    """Whether a crash for narrower dtypes only (float16, bfloat16) is float32 meeting them: what a scale held in
    a float32 tensor with an axis does there (it takes part in type promotion, and the float32 scores meet the
    float16 values), beside the float32 rounding it leaves in a float64 head (issue 35, item 11)."""
    narrow = bool(bad) and all(d.strip() in ("float16", "bfloat16") for d in bad.split(" and "))
    return narrow and crash.fact("float32_met") is True


def _dtype_slips(slips: Slips) -> list[str]:
    """'out and the weights returned as float64 for float32 inputs', or each on its own."""
    if slips["r0"] and slips["r0"] == slips["r1"]:
        return [f"out and the weights returned as {_slipped(slips['r0'])}"]
    what = {"r0": "out", "r1": "the weights"}
    return [f"{what[k]} returned as {_slipped(s)}" for k, s in slips.items() if s]


def _merged(causes: list[Diagnosis], cid: str, parts: list[str], said: list[str]) -> list[Diagnosis]:
    """``causes`` with ``parts`` replaced by the one cause ``cid`` where the first of them stood, at the line of the
    first part that has one (none has before the causes are pointed)."""
    mine = [c for c in causes if c.id in parts]
    explains = sorted({x for c in mine for x in c.explains})
    detail = next((c.detail for c in mine if c.detail), None)
    title, hint, cites = cause(cid).words(consequences=", ".join(said))
    where = next((c.where for c in mine if c.where is not None), None)
    one = Diagnosis(
        id=cid, title=title, hint=hint, cites=cites, kind="contract", explains=explains, detail=detail, where=where
    )
    at = causes.index(mine[0])
    return [c for c in causes[:at] if c.id not in parts] + [one] + [c for c in causes[at:] if c.id not in parts]
