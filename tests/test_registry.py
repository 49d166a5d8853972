"""One registry of mistake kinds (issue 51): every place that lists a kind by its id names one the registry defines.

The registry is what the diagnosis names and prices: the error model's causes (``grader/diagnosis/causes.toml``,
each with its words, price and the checks it breaks) and the known bugs of the library (their catalog). A kind's
id written anywhere else (the error model's mutations, the diagnosis's rules, the rubric's prices, the tests' and
the generator's lists, the README's table) must be one of those: a kind listed but never defined is a typo or a
kind half added, and fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pydantic
import pytest

import grader.diagnosis
from grader.diagnosis import _causes, _finding
from grader.diagnosis._causes import PATTERN, table
from grader.diagnosis._mutations import FITTED, MUTATIONS
from grader.diagnosis._naming import LEAKY
from grader.library import known_heads
from grader.rubric import load_rubric

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("crash:", "missing:", "breach:", "own:", "package:", "departure:")  # ids made per function or check

# the diagnosis's constants that hold kinds by id (wherever the rules that use them live)
ID_CONSTANTS = {
    "RETURNED_ONLY", "MADE_BY", "LEAVING", "TRACED", "FLOAT32_CAUSES", "FLOAT32_MADE", "RETURNING", "GRAPH_CUT",
    "NON_FINITE", "INPLACE", "OUTSIDE_TORCH", "IN_FLOAT32", "SCALE_TENSOR", "SIZE_CRASH", "FLAG_CRASH",
    "DTYPE_CRASH", "WIDTH_CRASH", "WIDTHS", "LEAKY", "SUBSTITUTED", "BREACHES",
}  # fmt: skip


def registry() -> set[str]:
    """Every id the registry defines: the error model's and contract's causes, and the library's known bugs."""
    return {cid for cid in table() if not cid.endswith(PATTERN)} | {h.id for h in known_heads("chaff")}


def defined(cid: str) -> bool:
    return cid in registry() or (cid.startswith(FAMILIES) and cid.split(":", 1)[0] + PATTERN in table())


def _ids(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {k for k in value if isinstance(k, str)}
    if isinstance(value, (tuple, list, set, frozenset)):
        return {x for x in value if isinstance(x, str)}
    return set()


def test_the_error_models_mutations_are_kinds_the_registry_defines_and_every_mutation_kind_has_one() -> None:
    mutations = {m for ms in MUTATIONS.values() for m in ms}
    assert {m for m in mutations if not defined(m)} == set()
    assert {m for m in FITTED if not defined(m)} == set()
    kinds = {cid for cid, c in table().items() if c.kind == "mutation"}
    # a fitted fill below 1000 takes the "leaky" name of the same change; the walk names what it sees (issue 51)
    renamed = set(LEAKY.values()) | set(_causes.refined(seen=True).values())
    assert kinds - mutations - renamed == set(), "a mutation kind with no change of the error model"


def test_the_diagnosis_rules_name_only_defined_kinds() -> None:
    found: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules(grader.diagnosis.__path__):
        module = importlib.import_module(f"grader.diagnosis.{info.name}")
        for name in ID_CONSTANTS & set(vars(module)):
            found[f"{info.name}.{name}"] = _ids(getattr(module, name))
    assert found, "the constants moved: update ID_CONSTANTS"
    assert {k: {c for c in v if not defined(c)} for k, v in found.items() if any(not defined(c) for c in v)} == {}


def test_the_rubric_prices_only_defined_kinds() -> None:
    assert {m for m in load_rubric().mistakes if not defined(m)} == set()


def test_the_tests_and_the_generator_list_only_defined_kinds() -> None:
    from tests.generated.mutations import MUTATIONS as GENERATED
    from tests.test_realistic_heads import CAUSES

    assert {c for c in CAUSES if not defined(c)} == set()
    from tests.generated.kinds import KINDS  # the bench of issue 52: each kind's truth, and each spelling's

    generated = {c for m in GENERATED.values() for c in m.causes}
    generated |= {c for k in KINDS.values() for c in (*k.causes, *(c for e in k.edits for c in e.causes))}
    assert {c for c in generated if not defined(c) and not c.startswith("departure:")} == set()
    for catalog in ("realistic", "lines_to_edit"):
        path = REPO / "tests" / catalog / "catalog.toml"
        if path.is_file():
            heads = tomllib.loads(path.read_text(encoding="utf-8")).get("head", [])
            listed = {c for h in heads for c in h.get("causes", [])}
            assert {c for c in listed if not defined(c)} == set(), catalog


def test_the_readme_names_only_defined_kinds() -> None:
    """A snake_case word the README writes in backticks is a kind the registry defines, a check, or a name the
    project's code or its tests use (a function, an option, a variable): never a kind that exists only in prose."""
    from grader.checks import CHECKS

    text = (REPO / "README.md").read_text(encoding="utf-8")
    words = set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", text))
    code = "\n".join(p.read_text(encoding="utf-8") for d in ("grader", "tests", "reference", "benchmarks")
                     for p in (REPO / d).rglob("*.py"))  # fmt: skip
    names = set(re.findall(r"[A-Za-z_]\w*", code)) | {"in_proj"}  # and torch's own (MultiheadAttention's in_proj)
    assert {w for w in words if not defined(w) and w not in CHECKS and w not in names} == set()


# ---- what is derived from the registry (issue 51 point 3): each constant is what causes.toml says -----------

# the error model as it was written in code before it was derived (the search's order within a slot may matter)
WRITTEN_MUTATIONS = {
    "scale": ("no_scaling", "scale_by_dk", "scale_by_sqrt_d_model", "scale_by_sqrt_T", "scale_by_sqrt_dv",
              "scale_times_sqrt_dk", "scale_constant"),
    "switch": ("causal_flag_ignored",),
    "mask": ("no_mask", "mask_transposed", "mask_excludes_diagonal", "mask_leaks_by_one", "mask_inverted",
             "mask_value_derived", "mask_after_softmax_no_renorm", "mask_after_softmax_renorm"),
    "fill": ("weak_mask_constant", "weak_mask_fill"),
    "softmax": ("softmax_wrong_axis", "softmax_over_batch", "unstable_softmax"),
    "dtype": ("softmax_in_float32", "scale_in_float32"),
    "randomness": ("dropout_left_on",),
    "projections": ("weights_transposed", "scores_transposed", "keys_from_query_projection", "scores_returned"),
    "values": ("no_value_projection",),
}  # fmt: skip
WRITTEN_FITTED = {
    "scale_constant": "scale", "weak_mask_constant": "mask", "weak_mask_fill": "mask", "dropout_left_on": "p",
    "scale_in_float32": "divides",
}  # fmt: skip


def test_the_error_model_is_derived_from_the_registry_and_equals_what_the_code_said() -> None:
    from grader.diagnosis._mutations import SLOT_OF, SLOTS

    assert list(MUTATIONS) == list(SLOTS) and MUTATIONS == WRITTEN_MUTATIONS  # the same slots, the same order
    assert {m: slot for slot, ms in WRITTEN_MUTATIONS.items() for m in ms} == SLOT_OF
    assert FITTED == WRITTEN_FITTED
    causes = table()
    assert {cid: c.slot for cid, c in causes.items() if c.slot is not None} == SLOT_OF
    assert {cid: c.fitted for cid, c in causes.items() if c.fitted is not None} == FITTED
    assert LEAKY == {"weak_mask_fill": "leaky_mask_fill", "weak_mask_constant": "leaky_mask_constant"}
    assert {c.refines: cid for cid, c in causes.items() if c.refines in FITTED} == LEAKY


# the line rules' ids and the crashes' as the code wrote them before they were derived (membership is all the code
# asks of the tuples; where the file's order differs from the written one, the sets are compared)
WRITTEN_LINES = {
    "TRACED": ("computed_in_float32", "non_finite_outputs", "scale_tensor_in_float32"),
    "FLOAT32_CAUSES": ("computed_in_float32", "scale_tensor_in_float32"),
    "FLOAT32_MADE": ("softmax_in_float32", "computed_in_float32"),
    "RETURNING": ("one_value_breach",),
    "RETURNED_ONLY": ("weights_transposed", "scores_returned"),
    "MADE_BY": ("mask_value_derived", "unstable_softmax"),
    "NON_FINITE": "non_finite_outputs",
    "GRAPH_CUT": "inputs_cut_from_graph",
    "LEAVING": {"computed_outside_torch": ("numpy", "tolist"), "no_autograd_graph": ("numpy", "tolist", "detach"),
                "inplace_input_mutation": ("inplace",)},
}  # fmt: skip
WRITTEN_CRASHES = {
    "SIZE_CRASH": "fixed_size_buffer", "FLAG_CRASH": "branch_crash", "DTYPE_CRASH": "unsupported_dtype",
    "WIDTH_CRASH": "width_crash",
}  # fmt: skip


def test_the_search_s_swapped_projections_are_what_their_seen_says() -> None:
    from grader.diagnosis._departure import SUBSTITUTED
    from grader.diagnosis._finding import Finding

    assert {
        "no_value_projection": Finding("substituted", role="V", source="X"),
        "keys_from_query_projection": Finding("substituted", role="K", source="W_Q"),
    } == SUBSTITUTED


def _line_constant(name: str) -> object:
    """A constant of the line rules, wherever it lives (the trace's lines in _lines, the walk's in _pointing)."""
    from grader.diagnosis import _lines, _pointing

    return getattr(_lines, name) if hasattr(_lines, name) else getattr(_pointing, name)


def test_the_lines_and_the_crashes_are_derived_from_the_registry_and_equal_what_the_code_said() -> None:
    from grader.diagnosis import _lines, _where

    for name, written in WRITTEN_LINES.items():
        derived = _line_constant(name)
        same = set(derived) == set(written) if name == "TRACED" else derived == written
        assert same, (name, derived, written)
    rules = {
        "TRACED": "traced", "FLOAT32_CAUSES": "float32_departure", "FLOAT32_MADE": "float32_made",
        "RETURNING": "returning", "RETURNED_ONLY": "returned_only", "MADE_BY": "made_by", "LEAVING": "leaving",
    }  # fmt: skip
    for name, rule in rules.items():  # each constant is what the registry's line says
        assert set(_line_constant(name)) == {cid for cid, c in table().items() if rule in c.line}, name  # type: ignore[call-overload]
    assert {c.leaves for c in table().values() if c.leaves} == set(_lines.LEAVING.values())
    assert {r for c in table().values() for r in c.line} == _lines.LINE_RULES  # no rule without a kind either
    for name, cid in WRITTEN_CRASHES.items():
        assert getattr(_where, name) == cid and table()[cid].varies is not None, name
    assert {c.varies for c in table().values() if c.varies} == set(_where.VARIED)


def test_an_entry_whose_slot_or_refinement_no_code_understands_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot the error model does not have, a constant fitted without a slot, a slot on a kind that is no
    mutation, a refinement of a kind the search never names, a ``seen`` that no finding can hold, a line rule or a
    leaving op no code has, or a crash varying what no probe varies is refused when causes.toml is read."""
    from grader.diagnosis import _lines, _where
    from grader.diagnosis._mutations import SLOTS

    text = _causes.TABLE.read_text(encoding="utf-8")
    bad = {
        'slot = "scale"\n': 'slot = "scales"\n',  # a slot no code has
        'slot = "randomness"\nfitted = "p"\n': 'fitted = "p"\n',  # fitted with no slot
        'refines = "weak_mask_fill"': 'refines = "no_such_kind"',
        'id = "output_dtype"\nkind = "contract"\n': 'id = "output_dtype"\nkind = "contract"\nslot = "scale"\n',
        # a seen no finding can hold: a kind, a field, a stage, a pattern the walk never makes; a number undigited
        '{kind = "unscaled"}': '{kind = "unscaled_twice"}',
        '{kind = "causal_ignored"}': '{kind = "causal_ignored", colour = "red"}',
        'stage = ["scaled"]': 'stage = ["rescaled"]',
        'pattern = "late"': 'pattern = "later"',
        'number = "p", digits = 3': 'number = "p"',
        # a line rule, a leaving op, or a varying input no code has
        'line = ["made_by"]': 'line = ["made_near"]',
        'leaves = ["inplace"]': 'leaves = ["inplace", "print"]',
        'line = ["graph_cut"]': 'line = ["graph_cut"]\nleaves = ["detach"]',
        'varies = "flag"': 'varies = "seed"',
    }
    for k, (old, new) in enumerate(bad.items()):
        assert old in text, old
        changed = tmp_path / f"causes{k}.toml"
        changed.write_text(text.replace(old, new, 1), encoding="utf-8")
        monkeypatch.setattr(_causes, "TABLE", changed)
        _causes.table.cache_clear()
        _finding._seen.cache_clear()
        try:
            with pytest.raises((AssertionError, pydantic.ValidationError)):
                _causes.slots(SLOTS)
                _finding._seen()
                _lines._leaves()
                for rule in _lines.LINE_RULES:
                    _causes.lined(rule, _lines.LINE_RULES)
                for varied in _where.VARIED:
                    _causes.varying(varied, _where.VARIED)
        finally:
            _causes.table.cache_clear()
            _finding._seen.cache_clear()
    monkeypatch.undo()
    assert _causes.slots(SLOTS) == MUTATIONS and _finding._seen() and _lines._leaves()  # the file itself reads


def test_what_a_seen_can_ask_is_what_a_finding_holds() -> None:
    """Each field a ``seen`` may ask for is a field of a finding, each context one the catalog is given."""
    import typing

    from grader.diagnosis._causes import READ, Seen

    assert set(Seen.model_fields) - READ <= _finding.FIELDS
    when = typing.get_args(Seen.model_fields["when"].annotation)
    assert {a for w in when for a in typing.get_args(w)} == set(_finding.CONTEXTS)
