"""The error model describes itself (issue 23): causes.toml holds every cause the diagnosis names without
the library, and the student kit's stored known bugs answer exactly as the library's code does."""

from __future__ import annotations

import math
import re

import pytest

from grader.checks import CHECKS
from grader.diagnosis import stored_bugs
from grader.diagnosis._bugs import STORED, LiveBugs, StoredBugs, library_bugs
from grader.diagnosis._causes import PATTERN, cause, model_cause_ids, refined, table
from grader.diagnosis._known import same
from grader.diagnosis._mutations import FITTED, SLOT_OF
from grader.diagnosis._naming import LEAKY, _fitted
from grader.library import indistinguishable, known_heads, load_reference

RESULTS = "Definition|Lemma|Proposition|Theorem|Corollary|Remark|Example|Exercise|Section|Aside|Implementation aside"
CITATION = re.compile(rf"^({RESULTS}) ")


def test_every_mutation_is_described_once_and_nothing_else_is_called_one() -> None:
    mutations = {cid for cid, c in table().items() if c.kind == "mutation"}
    assert mutations == set(SLOT_OF) | set(LEAKY.values()) | set(refined(seen=True).values())
    assert {
        "output_dtype",
        "weights_dtype",
        "no_autograd_graph",
        "fixed_size_buffer",
        "branch_crash",
        "unsupported_dtype",
    } <= set(model_cause_ids())
    assert {cid for cid in table() if cid.endswith(PATTERN)} == {
        "crash:*",
        "missing:*",
        "breach:*",
        "package:*",
        "own:*",
        "departure:*",
    }
    assert cause("crash:gaussian_positional_qk") is cause("crash:*")


@pytest.mark.parametrize("cid", list(table()))
def test_a_cause_says_what_it_is_in_its_own_words(cid: str) -> None:
    c = table()[cid]
    assert c.title.strip() and c.hint.strip()
    assert c.title.lower() != cid.replace("_", " ").lower()
    assert c.cites == "{cites}" or CITATION.match(c.cites), c.cites  # own:* cites its check's result
    if c.breaks is not None:
        assert c.breaks and set(c.breaks) <= set(CHECKS), c.breaks
        assert set(c.ruled_out_by) <= set(c.breaks)  # a check that passes on a head with it cannot rule it out
    if c.kind == "mutation":
        assert c.breaks, "a mutation explains the checks whose property it breaks"
        assert c.price is not None, "every mutation has a default price"


@pytest.mark.parametrize("mid", sorted(set(SLOT_OF) | set(LEAKY.values())))
def test_a_mutations_words_are_complete_with_what_the_search_fits(mid: str) -> None:
    """A fitted constant's fields fill its title and hint; any other mutation's words ask for none."""
    base = next((k for k, v in LEAKY.items() if v == mid), mid)
    fits = {"scale_constant": [0.125, 0.3], "dropout_left_on": [0.2], "scale_in_float32": [1.0, 0.0]}
    values = fits.get(base, [-1e9, -1e4, -100.0, 1e-15, -1e40])
    for value in values if base in FITTED else [math.nan]:
        fields = _fitted(base, value) if base in FITTED else {}
        entry = cause(LEAKY[base] if base in LEAKY and abs(value) < 1e3 else base)
        title, hint, _ = entry.words(**fields)
        assert "{" not in title + hint
        for variant in entry.variants:
            assert "{" not in "".join(entry.words(variant, **fields))


def test_the_kit_stores_every_bug_it_could_ever_name_and_its_answers_are_the_librarys() -> None:
    """Stored: each library chaff outside the error model that answers differently from the reference on its
    probes; the stored numbers are what the chaff computes, the words and prices its catalog's."""
    reference = load_reference()
    tensors, meta = stored_bugs(reference)
    stored = StoredBugs(meta[STORED], lambda: {k.removeprefix(f"{STORED}/"): t for k, t in tensors.items()})
    live = LiveBugs(reference)
    assert stored.bugs() and set(stored.bugs()) <= set(library_bugs())
    for bug in library_bugs():
        if bug in stored.bugs():
            assert same(stored.answers(bug), live.answers(bug))
        else:  # never named by either edition: it answers like the reference
            assert same(live.answers(bug), live.reference(bug.function)), bug.id
            assert indistinguishable(next(c for c in known_heads("chaff") if c.id == bug.id)), bug.id
    for function in meta[STORED]["reference"]:
        assert same(stored.reference(function) or (), live.reference(function))
    assert sum(t.numel() * t.element_size() for t in tensors.values()) < 200_000  # the wheel stays small
