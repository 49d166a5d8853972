"""The error model's causes as data: ``causes.toml`` in this package, read and validated once.

Every cause the diagnosis names without the library of known bugs is described there, once: each mutation
of the error model, each breach of the calling contract, each crash that depends on the input, and the
patterns of the causes named per function or per check ("crash:*", "missing:*", "breach:*", "own:*"). Its
title, hint, citation, the checks it breaks and its default price live together; both editions of the grader
(the instructor's and the student kit) ship the same file, so both say the same words and charge the same
prices. The known bugs that need the library's code to be recognised are described in ``_bugs``.

It is the one registry of mistake kinds (issue 51): beside the words and the price, an entry holds what the code
acts on, as fields the code derives its tables from: the error model's slot and fitted constant (``_mutations``),
the fields of a finding that name the kind (``seen``: ``_finding.catalog``), the rules that find its line
(``line``: ``_pointing``), what a crash for some inputs only varies (``varies``: ``_where``), and the search's
mutation it refines. A value no code understands is refused when the file is read, never silently ignored.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

TABLE = Path(__file__).with_name("causes.toml")
PATTERN = ":*"  # an id ending so names a family: "crash:*" describes "crash:causal_self_attention"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Variant(_Strict):
    """Another title or hint for one observed form of the same change (a mask filled with -inf, say)."""

    title: str | None = None
    hint: str | None = None


READ = frozenset({"when", "stage", "noted", "number", "digits"})  # a Seen's fields read otherwise than a finding's own


class Seen(_Strict):
    """The fields of a departure's finding (``_finding.Finding``) that name a kind: each one given must hold (a
    ``stage`` list: one of them). ``when``: the context in which it names it (a stage never used, the weights'
    transpose, float32 from the softmax's input on: what an intervention found); ``noted``: whether the finding
    carries notes. ``number`` is the field the fitted constant is read from, as said (``digits`` significant)."""

    kind: str
    when: Literal["never_used", "transposed", "float32"] | None = None
    stage: tuple[str, ...] | None = None
    quantity: str | None = None
    fixed: bool | None = None
    rescaled: bool | None = None
    future: bool | None = None
    added: bool | None = None
    instead: str | None = None
    pattern: str | None = None
    role: str | None = None
    source: str | None = None
    axis: str | None = None
    alike: bool | None = None
    noted: bool | None = None
    number: Literal["fill", "p"] | None = None
    digits: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _digits_with_number(self) -> Seen:
        assert (self.number is None) == (self.digits is None), "a fitted number is read with its digits"
        return self

    def fields(self) -> dict[str, object]:
        """The finding's fields this entry asks for (``when``, ``stage``, ``noted``, ``number`` and ``digits`` are
        read otherwise)."""
        return self.model_dump(exclude_none=True, exclude=set(READ))


class Cause(_Strict):
    id: str
    kind: Literal["mutation", "contract", "crash", "own", "departure"]
    title: str = Field(min_length=1)
    hint: str = Field(min_length=1)
    cites: str = Field(min_length=1)
    breaks: tuple[str, ...] | None = None  # None: the cause explains the checks it stopped
    ruled_out_by: tuple[str, ...] = ()
    price: float | None = Field(default=None, ge=0)
    cap: float | None = Field(default=None, ge=0)  # unpriced: the most it costs, whatever it stopped (issue 30)
    phrases: dict[str, str] = Field(default_factory=dict)
    variants: dict[str, Variant] = Field(default_factory=dict)
    # the error model (issue 51): the slot of the reference head this mutation changes (``_mutations.SLOTS``; the
    # search tries a slot's mutations in the file's order), and the name of the constant it fits, where it has one
    slot: str | None = None
    fitted: str | None = None
    # the search's mutation whose values this kind makes too: the search names that one, and this kind takes its
    # place when its own rule holds: its ``seen``, at the line of the mutation's departure (the scale applied
    # twice); without one, the fit's (a fitted mask constant too small to mask: the "leaky" kinds)
    refines: str | None = None
    # how the walk of the student's computation recognises it: the fields of a finding that name it (issue 51)
    seen: tuple[Seen, ...] = ()
    # the line it points at, where the departure the search's model explains does not give it: the rules of
    # ``_pointing`` that find it (``leaves``: the ops a "leaving" rule looks for, in the order it looks)
    line: tuple[str, ...] = ()
    varies: str | None = None  # a crash for some inputs only: what the probes vary (``_where``'s rules)
    leaves: tuple[str, ...] = ()

    def words(self, variant: str | None = None, **fields: object) -> tuple[str, str, str]:
        """(title, hint, cites) with ``fields`` filled in (``variant``: one of ``variants``, when it applies)."""
        chosen = self.variants[variant] if variant else Variant()
        title, hint = chosen.title or self.title, chosen.hint or self.hint
        return title.format(**fields), hint.format(**fields), self.cites.format(**fields)

    def phrase(self, name: str, **fields: object) -> str:
        return self.phrases[name].format(**fields)


class _Table(_Strict):
    cause: list[Cause]


@cache
def table() -> dict[str, Cause]:
    """id -> cause, in the file's order."""
    causes = _Table.model_validate(tomllib.loads(TABLE.read_text(encoding="utf-8"))).cause
    out = {c.id: c for c in causes}
    assert len(out) == len(causes), "causes.toml: an id is described twice"
    for c in causes:
        assert (c.slot is not None) <= (c.kind == "mutation"), f"causes.toml: {c.id} has a slot but is no mutation"
        assert (c.fitted is not None) <= (c.slot is not None), f"causes.toml: {c.id} fits a constant but has no slot"
        assert bool(c.leaves) == ("leaving" in c.line), f"causes.toml: {c.id}'s leaves go with the rule leaving"
        refined = out.get(c.refines or "")
        assert c.refines is None or (refined is not None and refined.slot is not None and c.slot is None), (
            f"causes.toml: {c.id} refines {c.refines}, which is no mutation of the search (or it has a slot itself)"
        )
    return out


def cause(cid: str) -> Cause:
    """The description of ``cid``: its own entry, or its family's ("crash:*" for "crash:causal_self_attention")."""
    causes = table()
    if cid in causes:
        return causes[cid]
    return causes[cid.split(":", 1)[0] + PATTERN]


def model_cause_ids() -> frozenset[str]:
    """The ids the table names one by one (the families' ids are made per function or check)."""
    return frozenset(cid for cid in table() if not cid.endswith(PATTERN))


def slots(order: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Slot -> its mutations, in the file's order, the slots in ``order`` (each one named by some entry)."""
    out = {slot: tuple(cid for cid, c in table().items() if c.slot == slot) for slot in order}
    assert all(out.values()), f"causes.toml: a slot of the error model with no mutation: {out}"
    unknown = {c.slot for c in table().values() if c.slot is not None} - set(order)
    assert not unknown, f"causes.toml: slots the error model does not have: {unknown}"
    return out


def fitted() -> dict[str, str]:
    """Mutation -> the name of the constant the search fits for it."""
    return {cid: c.fitted for cid, c in table().items() if c.fitted is not None}


def refined(seen: bool = False) -> dict[str, str]:
    """The search's mutation -> the kind that takes its place when its rule holds: the fit's (a fitted constant
    too small to mask: the "leaky" kinds), or with ``seen`` the walk's (what its finding at the line shows)."""
    return {c.refines: cid for cid, c in table().items() if c.refines is not None and bool(c.seen) == seen}


def lined(rule: str, known: frozenset[str]) -> tuple[str, ...]:
    """The kinds whose line ``rule`` finds, in the file's order; every rule the file names must be ``known`` (the
    rules the code has), and ``rule`` must name some kind."""
    named = {r for c in table().values() for r in c.line}
    assert named <= known, f"causes.toml: line rules no code has: {sorted(named - known)}"
    out = tuple(cid for cid, c in table().items() if rule in c.line)
    assert rule in known and out, f"causes.toml: no kind's line is found by {rule!r}"
    return out


def varying(what: str, known: tuple[str, ...]) -> str:
    """The one crash kind that raises for some values of ``what`` only; every ``varies`` the file names must be
    ``known`` (what the code's probes vary)."""
    named = {c.varies for c in table().values() if c.varies is not None}
    assert named <= set(known), f"causes.toml: crashes varying what no probe varies: {sorted(named - set(known))}"
    [cid] = [cid for cid, c in table().items() if c.varies == what and c.kind == "crash"]
    return cid


def caps() -> dict[str, float]:
    """The causes that cost the checks they stopped, but never more than this (a crash where the head runs
    elsewhere hides at most one mistake: it never costs more than the dearest one would)."""
    return {cid: c.cap for cid, c in table().items() if c.cap is not None}


def default_prices() -> dict[str, float]:
    return {cid: c.price for cid, c in table().items() if c.price is not None}


@cache
def ruled_out_by() -> dict[str, tuple[str, ...]]:
    """Mutation -> the checks that, when they pass, rule it out (the search's pruning)."""
    return {cid: c.ruled_out_by for cid, c in table().items() if c.ruled_out_by}
