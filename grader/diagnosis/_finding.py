"""What a departure found, as data (issue 51, item 1): a :class:`Finding` carries its kind and its fields (the stage
it leaves, a factor and the quantity it equals, the pattern a mask hides, a fill and whether it was written or
added, dropout's p, a clamp's bounds, the projection substituted, ...), and its words are made from them here, in
one place, by the kind that owns them (Ruff's ``Violation``). Whoever needs a fact reads a field: the catalog's
cause a finding names is :func:`catalog`, a lookup on fields, never a pattern over the words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal, get_args

from grader.diagnosis._causes import Seen, table

TITLES = {  # how a cause's title names the stage that departs
    "Q": "the queries",
    "K": "the keys",
    "V": "the values",
    "K^T": "K^T",
    "scores": "the scores",
    "premasked": "the masked scores before the scale",
    "scaled": "the scaled scores",
    "masked": "the masked scores",
    "weights": "the weights",
    "out": "the output",
}
NAMES = {
    "Q": "the queries Q = X W_Q",
    "K": "the keys K = X W_K",
    "V": "the values V = X W_V",
    "K^T": "K^T",
    "scores": "the scores Q K^T",
    "premasked": "the scores Q K^T masked before they are scaled",
    "scaled": "the scaled scores Q K^T / sqrt(d_k)",
    "masked": "the masked scores (-inf above the diagonal)",
    "weights": "the weights softmax(masked scores)",
    "out": "the output A V",
}
ALIKE = "made here (masked with a pattern of their own)"

Kind = Literal[
    "float32",  # equal to the stage to float32 accuracy only
    "factor",  # the stage times ``factor`` (a relation; said as "unscaled", "scaled_by" or "times")
    "transpose",  # the stage's transpose
    "causal_ignored",  # -inf above the diagonal at causal=False
    "masked_uncausal",  # the future keys masked with ``fill`` at causal=False
    "future_nan",  # NaN above the diagonal where the lecture has ``instead``
    "future_constant",  # ``fill`` above the diagonal where the lecture has ``instead``
    "future_kept",  # other values above the diagonal where the lecture has ``instead``
    "nan",  # NaN in ``count`` of ``total`` entries
    "rows",  # rows that do not sum to 1 (``axis``: what sums to 1 instead; else ``low`` to ``high``)
    "dropout",  # ``count`` entries zeroed, the rest scaled by ``factor``: dropout with ``p``
    "clamp",  # a ``floor`` and/or a ``ceiling``
    "substituted",  # ``source`` used where the projection ``role`` belongs
    "value_due",  # a value where ``stage`` is due
    "exp_without_max",  # exp of the scores without each row's max
    "sum_of_scores",  # exp of the scores divided by the sum of the scores
    "fill",  # the hidden entries (the future keys when ``future``) filled with ``fill`` (``added``: it was added)
    "fill_nan",  # NaN in the future keys
    "hides",  # a mask hiding ``pattern`` (or ``count`` of ``total`` entries where the lecture hides ``future_count``)
    "hides_other",  # a mask hiding other entries than the future keys
    "unscaled",  # the scores never divided by sqrt(d_k)
    "scaled_by",  # the scores times ``factor`` = ``quantity``
    "times",  # ``stage`` times ``factor``
    "not_masked",  # the future keys not masked
    "differs",  # differs from ``stage`` (by ``largest`` at most)
    "nan_constant",  # a constant holding NaN from 0 * -inf brought into ``stage`` what ``inner`` says
    "never_used",  # ``stage`` computed and never used
    "raises",  # it raises ``exception``; with ``stage`` in place the head goes on
]
Pattern = Literal["", "diagonal", "late", "past", "inverted"]
HIDES: dict[str, str] = {  # a mask's wrong pattern, in words
    "diagonal": "the diagonal too (j >= i): each query is kept from itself",
    "late": "only j > i + 1: key i + 1 leaks through (the mask starts one place late)",
    "past": "the past (j < i) instead of the future: the mask is transposed",
    "inverted": "everything the lecture keeps (j <= i): the mask is inverted",
}
SUBSTITUTIONS: dict[tuple[str, str], str] = {  # (role, source): a projection left out or swapped, in words
    ("QK", "X"): "X used where Q = X W_Q and K = X W_K belong: W_Q and W_K are never applied",
    ("Q", "X"): "X used where Q = X W_Q belongs: W_Q is never applied",
    ("K", "X"): "X used where K = X W_K belongs: W_K is never applied",
    ("K", "W_Q"): "X W_Q used where K = X W_K belongs: the keys come from the query projection",
    ("Q", "W_K"): "X W_K used where Q = X W_Q belongs: the queries come from the key projection",
    ("V", "X"): "X used where V = X W_V belongs: W_V is never applied",
}
ROWS = {
    "queries": "its columns sum to 1 (a softmax over dim=-2, the queries)",
    "batch": "it sums to 1 over the batch (dim=0)",
}
SUM_OF_SCORES = (
    "exp of the scores divided by the sum of the scores, not by the sum of their exps: the rows do not sum to 1 "
    "(Proposition 3.1)"
)


@dataclass(frozen=True)
class Note:
    """A clause after a finding: where the line to edit is, against the line the value was used at (``line``,
    ``code``). ``passed``: ``var`` is a helper's parameter passed here; ``set``: ``var`` = ``value`` is bound
    here; ``thrown``: this line computes from ``var`` and binds nothing; ``applied``: the mask is made here;
    ``made``: the wrong projection is made here; ``argument``: made at ``made_line`` of the argument passed here."""

    kind: Literal["passed", "set", "thrown", "applied", "made", "argument"]
    line: int
    code: str
    var: str = ""
    value: float = 0.0
    made_line: int = 0
    made_code: str = ""

    @property
    def words(self) -> str:
        at = f"line {self.line}: `{self.code}`"
        if self.kind == "passed":
            return f"; `{self.var}` is passed here and used at {at}"
        if self.kind == "set":
            # the value is the probe's (a width read off the probe's X), not the student's inputs' (issue 53)
            return f"; `{self.var}` is set here ({self.value:.6g} on the grader's probe) and used at {at}"
        if self.kind == "thrown":
            return (
                f"; this line computes from `{self.var}` and binds nothing, and line {self.line} reads `{self.var}` "
                f"as it was: `{self.code}` (assign the result where it is meant to change it)"
            )
        if self.kind == "applied":
            return f"; the mask is made here and applied at {at}"
        if self.kind == "made":
            return f"; it is made here and used at {at}"
        return (
            f"; it is made at line {self.made_line} (`{self.made_code}`) of the argument passed here, and used at {at}"
        )


@dataclass(frozen=True)
class Finding:
    """How a value differs from the lecture's stage, as fields; :attr:`words` says it."""

    kind: Kind
    stage: str = ""  # the stage it is said against (value_due, times, differs, nan_constant, never_used, raises)
    factor: float | None = None  # factor, scaled_by, times; dropout: what the kept entries were scaled by
    quantity: str = ""  # scaled_by: what the factor equals ("1/d_k", "1/sqrt(d)", "1/sqrt(16)"), "" when nothing
    fixed: bool = False  # scaled_by: ``quantity`` is a fixed number's square root, not a width's
    d_k: int = 0  # scaled_by: the probe's d_k
    rescaled: bool = False  # scaled_by: the line scales a value already scaled by 1/sqrt(d_k) (the lecture's stage)
    fill: float | None = None  # fill, future_constant, masked_uncausal: the constant written (or added)
    added: bool = False  # fill: the constant was added to the hidden entries, not written into them
    future: bool = True  # fill: the hidden entries are the future keys (else another pattern's)
    pattern: Pattern = ""  # hides: the pattern hidden ("" : ``count`` of ``total``)
    count: int = 0  # hides, nan, dropout: how many entries
    total: int = 0  # hides, nan: of how many
    future_count: int = 0  # hides: how many the lecture hides
    instead: str = ""  # future_*: what the lecture has above the diagonal ("-inf", "0", "other values")
    p: float | None = None  # dropout
    axis: str = ""  # rows: what sums to 1 instead ("queries", "batch"), "" when nothing does
    low: float | None = None  # rows: the least row sum; clamp: the floor
    high: float | None = None  # rows: the largest row sum; clamp: the ceiling
    role: str = ""  # substituted: the operand (Q, K, V, or QK for both)
    source: str = ""  # substituted: what took its place (X, W_Q, W_K)
    largest: float | None = None  # differs: the largest finite difference
    exception: str = ""  # raises: the exception's type
    raw: bool = False  # value_due: the stage said by its key, not its name
    alike: bool = False  # never_used: masked scores of another pattern than the lecture's
    masked_fill: bool = False  # never_used: a masked_fill's result thrown away
    inner: Finding | None = None  # nan_constant: what the value brought NaN into shows
    notes: tuple[Note, ...] = ()

    def noted(self, note: Note) -> Finding:
        return replace(self, notes=(*self.notes, note))

    @property
    def float32(self) -> bool:
        """Off by float32 rounding alone (or bringing NaN into a value that is)."""
        return self.kind == "float32" or (self.inner is not None and self.inner.float32)

    @property
    def operand(self) -> tuple[str, str]:
        """substituted: the operand of the product (Q, K or V) and what took its place."""
        return ("Q" if self.role == "QK" else self.role, self.source)

    def extends(self, other: Finding) -> bool:
        """This finding is ``other`` as shown, with ``other``'s notes and perhaps more (a difference from a stage
        that gives no largest difference and no note says less of the same: any difference from it extends it)."""
        if other.kind == "differs" and other.largest is None and not other.notes:
            return self.kind == "differs" and self.stage == other.stage
        return self._said() == other._said() and self.notes[: len(other.notes)] == other.notes

    @property
    def words(self) -> str:
        return self._said() + "".join(n.words for n in self.notes)

    def _said(self) -> str:
        k, name = self.kind, NAMES.get(self.stage, self.stage)
        if k == "float32":
            return "equal to it only to float32 accuracy (about 1e-7 relative): it was computed in float32"
        if k == "factor":
            return f"FACTOR:{self.factor!r}"
        if k == "transpose":
            return "its transpose: rows and columns (queries and keys) are swapped"
        if k == "causal_ignored":
            return (
                "-inf above the diagonal: the future keys are masked although causal=False asks for the unmasked head"
            )
        if k == "masked_uncausal":
            return f"the future keys masked (with {self.fill:.6g}) although causal=False asks for the unmasked head"
        if k == "future_nan":
            return "NaN above the diagonal where the lecture has " + self.instead
        if k == "future_constant":
            return f"{self.fill:.6g} above the diagonal (the future keys j > i) where the lecture has " + self.instead
        if k == "future_kept":
            return "the future keys (j > i) not masked: above the diagonal it holds values where the lecture has " + (
                self.instead
            )
        if k == "nan":
            return f"NaN in {self.count} of {self.total} entries where the lecture's values are finite"
        if k == "rows":
            if self.axis:
                return f"rows that do not sum to 1: {ROWS[self.axis]}"
            return f"rows that do not sum to 1 (they sum to {self.low:.4g} to {self.high:.4g})"
        if k == "dropout":
            return (
                f"{self.count} entries zeroed and the rest scaled by {self.factor:.4g}: dropout with p = {self.p:.3g} "
                "left on"
            )
        if k == "clamp":
            parts = [f"a floor: entries below {self.low:.4g} raised to {self.low:.4g}"] if self.low is not None else []
            if self.high is not None:
                parts.append(f"a ceiling: entries above {self.high:.4g} cut to {self.high:.4g}")
            return " and ".join(parts) + " (a clamp)"
        if k == "substituted":
            return SUBSTITUTIONS[(self.role, self.source)]
        if k == "value_due":
            return f"a value where {self.stage if self.raw else name} is due"
        if k == "exp_without_max":
            return (
                "exp of the scores without first subtracting each row's max: it overflows to inf at large "
                "scores (Proposition 5.1 allows the shift)"
            )
        if k == "sum_of_scores":
            return SUM_OF_SCORES
        if k == "fill":
            which = "the future keys" if self.future else "the entries it hides"
            if self.added:
                return f"{self.fill:.6g} added to {which} instead of -inf: at large scores it no longer hides them"
            return (
                f"{which} filled with {self.fill:.6g} instead of -inf: a finite fill hides them only while the "
                "scores stay small"
            )
        if k == "fill_nan":
            return "NaN in the future keys where the lecture has -inf (0 * -inf is NaN)"
        if k == "hides":
            if self.pattern:
                return f"hides {HIDES[self.pattern]}"
            return (
                f"hides {self.count} of the {self.total} entries of each batch element where the lecture hides the "
                f"{self.future_count} future ones"
            )
        if k == "hides_other":
            return "hides other entries than the future keys"
        if k == "unscaled":
            return "the scores Q K^T, never divided by sqrt(d_k) (Lemma 5.5)"
        if k == "scaled_by":
            again = (
                f": this line scales scores already scaled by 1/sqrt(d_k), by {self.factor * self.d_k**0.5:.4g} again"
                if self.rescaled and self.factor is not None
                else ""
            )
            return (
                f"the scores times {self._quantity()} where the lecture scales them by "
                f"1/sqrt(d_k) = {self.d_k**-0.5:.4g} (Lemma 5.5){again}"
            )
        if k == "times":
            return f"{name} times {self.factor:.6g}"
        if k == "not_masked":
            return "the future keys (j > i) are not masked: the scores enter the softmax unmasked"
        if k == "differs":
            return f"differs from {name}" + (
                f" (largest difference {self.largest:.3g})" if self.largest is not None else ""
            )
        if k == "nan_constant":
            inner = self.inner.words if self.inner is not None else ""
            return (
                "NaN from 0 * -inf: this constant holds NaN where a 0 was multiplied by -inf (an additive mask made "
                f"by multiplying by -inf, or -inf times a 0/1 mask), and it brings NaN into {name}: "
                f"{inner}. Build the mask with masked_fill or torch.where"
            )
        if k == "never_used":
            if self.alike:
                return f"{TITLES[self.stage]} {ALIKE} are never used: nothing after it reads the result"
            said = f"{name} computed here is never used: nothing after it reads the result"
            return said + (
                " (masked_fill returns a new tensor: assign it, or use masked_fill_)" if self.masked_fill else ""
            )
        assert k == "raises", k
        return (
            f"it raises {self.exception or 'an exception'} here; with {name} in place of this line's result the head "
            "goes on"
        )

    def _quantity(self) -> str:
        c = self.factor
        assert c is not None
        if self.quantity in ("1", "-1"):
            return self.quantity
        if self.fixed:
            return f"{self.quantity} = {c:.4g}, a fixed number (d_k = {self.d_k} here)"
        return f"{self.quantity} = {c:.4g}" if self.quantity else f"{c:.6g}"


# The catalog's causes a finding names (issue 35, item 4: the catalog names, the trace finds), by its fields: each
# kind's ``seen`` in causes.toml (issue 51: one registry of mistake kinds; recognising a new kind is an entry there).
CONTEXTS = ("never_used", "transposed", "float32")  # what an intervention's finding says beside any departure's
FIELDS = frozenset(f.name for f in dataclasses.fields(Finding))


@cache
def _seen() -> tuple[tuple[str, Seen], ...]:
    """(kind, the fields that name it), for every form of every kind causes.toml says the walk recognises; an entry
    no finding can ever hold (a kind, a stage, a pattern, a substitution, an axis, a field the walk never
    makes) is refused here, never silently matched by nothing."""
    out = tuple((cid, seen) for cid, c in table().items() for seen in c.seen)
    for cid, seen in out:
        where = f"causes.toml: {cid}'s seen {seen.model_dump(exclude_none=True)}"
        assert seen.kind in get_args(Kind), f"{where}: no finding is of this kind"
        assert set(seen.fields()) <= FIELDS, f"{where}: a finding has no field {set(seen.fields()) - FIELDS}"
        assert set(seen.stage or ()) <= set(TITLES), f"{where}: no such stage"
        assert seen.pattern is None or seen.pattern in HIDES, f"{where}: no such pattern"
        assert seen.axis is None or seen.axis in ROWS, f"{where}: no such axis"
        assert (seen.role is None and seen.source is None) or (seen.role, seen.source) in SUBSTITUTIONS, where
    return out


def _holds(f: Finding, seen: Seen, context: dict[str, bool]) -> bool:
    return (
        (seen.when is None or context[seen.when])
        and all(getattr(f, name) == value for name, value in seen.fields().items())
        and (seen.stage is None or f.stage in seen.stage)
        and (seen.noted is None or bool(f.notes) == seen.noted)
    )


def catalog(
    f: Finding, *, never_used: bool = False, transposed: bool = False, float32: bool = False
) -> tuple[str, float | None] | None:
    """The catalog's cause ``f`` names, with the number a fitted constant takes from it (as said: a fill to 6
    significant digits, p to 3), or None. Beside the causes any departure names: ``never_used``, a stage computed
    and never used (an intervention's finding); ``transposed``, the weights' transpose; ``float32``, float32
    rounding from the softmax's input on."""
    context = dict(zip(CONTEXTS, (never_used, transposed, float32), strict=True))
    named = [(cid, seen) for cid, seen in _seen() if _holds(f, seen, context)]
    assert len(named) <= 1, f"one finding names several kinds: {[cid for cid, _ in named]} ({f})"
    if not named:
        return None
    cid, seen = named[0]
    if seen.number is None:
        return cid, None
    number = getattr(f, seen.number)
    assert number is not None, f"{cid} is seen with its {seen.number}, and this finding has none ({f})"
    return cid, float(f"{number:.{seen.digits}g}")


def _named_by(kind: str, key: Callable[[Seen], Any]) -> dict[Any, str]:
    """What names each kind among the findings of ``kind`` (by ``key`` of its entry): the registry's, as a table."""
    return {key(seen): cid for cid, seen in _seen() if seen.kind == kind and seen.when is None}


SCALES = {  # the quantity of a scale applied once -> its kind ("1/d_k": scale_by_dk)
    q: cid for (q, again), cid in _named_by("scaled_by", lambda s: (s.quantity, s.rescaled)).items() if not again
}
PATTERNS = _named_by("hides", lambda s: s.pattern)  # a mask's pattern -> its kind
PROJECTIONS = _named_by("substituted", lambda s: (s.role, s.source))  # (role, source) -> its kind
UNUSED = {  # a stage never used -> its kind
    stage: cid for cid, seen in _seen() if seen.kind == "never_used" for stage in seen.stage or ()
}
