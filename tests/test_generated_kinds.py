"""The mistake kinds of the generated bench (issue 52) and their truth, proven mechanically (nothing here grades).

Every kind has at least three spellings and lands at two sites or more; each spelling's first instance is proven
(``heads.prove``: the head differs from its program in float64, reverting the mistake touches only its lines, and it
is live), as a module and, for one instance per kind, as a notebook; a fix an edit names makes the head right; the
ids a kind expects exist in the catalogs; the sample is seeded and proven.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import pytest
from generated.heads import instances, make, prove, sample, seen
from generated.kinds import KINDS, apply_change
from generated.probe import unlike
from generated.programs import PROGRAMS

REPO = Path(__file__).resolve().parent.parent


@functools.cache
def _catalog_ids() -> frozenset[str]:
    ids = set()
    for path in (REPO / "grader/diagnosis/causes.toml", REPO / "reference/chaffs/catalog.toml"):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        ids |= {c["id"] for c in data.get("cause", []) + data.get("chaff", [])}
    return frozenset(ids)


def test_at_least_forty_kinds_each_in_three_spellings() -> None:
    assert len(KINDS) >= 40
    few = {k.id: k.spellings for k in KINDS.values() if len(k.spellings) < 3}
    assert not few, few
    assert all(instances(kid) for kid in KINDS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_spelling_is_proven_and_the_kind_lands_at_two_sites(kind: str) -> None:
    sites, proven = set(), set()
    for k, program in instances(kind):
        head = make(program, [(kind, k)])
        assert head is not None
        sites.add(head.mistakes[0].site)
        spelling = KINDS[kind].edits[k].spelling
        if spelling not in proven:
            assert prove(head) == [], (kind, k, program, prove(head))
            proven.add(spelling)
    notebooks = (make(p, [(kind, k)], notebook=True) for k, p in instances(kind))
    if any(h is not None and not prove(h) for h in notebooks):
        sites.add("cell")
    assert proven == set(KINDS[kind].spellings)
    assert len(sites) >= 2, sites


def test_fixes_make_the_head_right() -> None:
    """An edit's fixes (a second place to edit, as either scale of a scale applied twice) restore the program."""
    checked = 0
    for kid, kind in KINDS.items():
        for k, program in instances(kid):
            for fix in kind.edits[k].fixes:
                head = make(program, [(kid, k)])
                assert head is not None
                fixed = apply_change(fix, head.module)
                assert fixed is not None
                assert unlike(seen(fixed), seen(PROGRAMS[program].source)) == [], (kid, k, program)
                checked += 1
    assert checked >= 5


def test_truth_names_catalog_ids_or_a_finding() -> None:
    for kind in KINDS.values():
        ids = {c for e in kind.edits for c in e.causes} | set(kind.causes)
        assert bool(ids) != bool(kind.finding), kind.id  # an id, or (where there is none) a finding's fields
        unknown = {c for c in ids if c not in _catalog_ids() and not c.startswith("crash:")}
        assert not unknown, (kind.id, unknown)
        if kind.finding:
            assert dict(kind.finding).keys() == {"stage", "what"}, kind.id


def test_a_mistake_another_hides_is_never_sampled() -> None:
    """A mask thrown away hides how it was built: the transposed triangle there is no mistake of the head."""
    [(k1, program)] = [(k, p) for k, p in instances("mask_discarded") if p == "inline_steps"]
    k2 = next(k for k, p in instances("mask_transposed") if p == "inline_steps")
    head = make(program, [("mask_transposed", k2), ("mask_discarded", k1)])
    assert head is not None
    assert any("mask_transposed" in p and "hides" in p for p in prove(head))


def test_the_sample_is_seeded_and_proven() -> None:
    a, b = sample(14, 7, KINDS), sample(14, 7, KINDS)
    assert [(h.id, h.source, h.mistakes) for h in a] == [(h.id, h.source, h.mistakes) for h in b]
    assert not a[0].mistakes and all(1 <= len(h.mistakes) <= 3 for h in a[1:6])
    assert all(prove(h) == [] for h in a)
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        sample(2, 0, ["nope"])


def test_the_held_out_list_is_the_recorded_draw() -> None:
    """The held-out kinds are what the recorded seed draws from the recorded kinds, every one still a kind; kinds added
    since are tuned; a kind moved to the tuned list (a fix made for it) stays listed as drawn."""
    import random

    drawn = tomllib.loads((REPO / "tests/generated/held_out_kinds.toml").read_text(encoding="utf-8"))
    population = drawn["drawn_from"]
    assert population == sorted(population) and set(population) <= set(KINDS)
    assert drawn["held_out"] == sorted(random.Random(drawn["seed"]).sample(population, len(population) // 3))
    assert set(drawn["moved"]) <= set(drawn["held_out"]) and set(drawn["tuned_in_issue_35"]) <= set(population)
