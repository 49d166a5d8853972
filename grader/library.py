"""The instructor's heads: the reference, the known bugs (chaffs) and correct variants.

A chaff or variant file holds only the definitions it changes; the full module is the reference source
followed by those definitions (later definitions win). Metadata lives in each folder's catalog.toml.
"""

from __future__ import annotations

import importlib.util
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from grader._paths import bundled


def reference_path() -> Path:
    return bundled("reference") / "attention_head.py"


def reference_available() -> bool:
    """Whether this is the instructor's edition (the student kit holds no reference and no known heads)."""
    return reference_path().is_file()


@cache
def load_reference() -> ModuleType:
    """The trusted reference head, imported in the grader under a private module name."""
    spec = importlib.util.spec_from_file_location("_step4_reference_head", reference_path())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class KnownHead:
    """One entry of a catalog. A chaff that is a mutation of the diagnosis's error model names it
    (``mutation``) and carries no words of its own: its title, hint, citation, the checks it breaks and its
    price are the error model's (grader/diagnosis/causes.toml). Every other chaff carries them here."""

    id: str
    kind: str  # "chaff" or "variant"
    function: str
    title: str = ""
    mutation: str = ""
    cites: str = ""
    hint: str = ""
    missed_property: str = ""
    uses: str = ""  # an input the missed property's words say no test uses (grader.checks._student_tests.USES)
    missed_if_used: str = ""  # the words instead, when the student's tests are seen to use it
    caught_by: tuple[str, ...] = ()
    price: float | None = None

    @property
    def path(self) -> Path:
        return bundled("reference") / f"{self.kind}s" / f"{self.id}.py"

    def source(self) -> str:
        """The full module: reference followed by this head's overriding definitions."""
        return materialize(self.path.read_text(encoding="utf-8"))


# Checks whose verdict does not rest on the values a head computes: how long it took, which APIs it used.
VALUE_IDENTICAL = frozenset({"performance", "forbidden_api"})


def indistinguishable(chaff: KnownHead) -> bool:
    """A chaff that only the performance or forbidden-API checks catch computes the reference's values:
    neither a probe nor a student's property test can tell it from a correct head. (A mutation of the error
    model changes values by definition.)"""
    return not chaff.mutation and set(chaff.caught_by) <= VALUE_IDENTICAL


def materialize(override: str) -> str:
    return reference_path().read_text(encoding="utf-8") + "\n\n" + override


@cache
def known_heads(kind: str) -> tuple[KnownHead, ...]:
    """All chaffs (``kind="chaff"``) or variants (``kind="variant"``) in catalog order; none in the kit."""
    if not reference_available():
        return ()
    catalog = tomllib.loads((bundled("reference") / f"{kind}s" / "catalog.toml").read_text(encoding="utf-8"))
    heads = []
    for entry in catalog.get(kind, []):
        entry = dict(entry)
        entry["caught_by"] = tuple(entry.get("caught_by", ()))
        heads.append(KnownHead(kind=kind, **entry))
    return tuple(heads)
