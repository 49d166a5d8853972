"""The known bugs that need the library's code to be recognised, in either edition of the grader.

A chaff of the library that *is* a mutation of the error model is named by the search (``_search``) and
described in ``causes.toml``. The others (a bug of another contract function, a softmax shifted by one global
max, values centred over the whole sequence, ...) are recognised by what they compute on the diagnosis's
fixed probes (``_known``). Two sources give the same answers:

* :class:`LiveBugs`, the instructor's grader: the chaffs' code from the library, run here on the probes;
* :class:`StoredBugs`, the student kit: what those chaffs (and the reference) computed on the same probes,
  numbers only, written by :func:`snapshot` when the kit was built, with each bug's words and price.

Only bugs whose answers differ from the reference's on some probe are stored: a head that answers like the
reference gets no known bug in either edition, so the others could never be named.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from grader.diagnosis._known import PROBES, Seen, chaff_module, grader_side, same
from grader.library import known_heads

if TYPE_CHECKING:
    from grader.oracle import Oracle

STORED = "diagnosis"  # the kit's snapshot keeps these answers under this prefix


@dataclass(frozen=True)
class Bug:
    """A known bug: what the diagnosis says when a head computes what it computes."""

    id: str
    function: str
    title: str
    hint: str
    cites: str
    breaks: tuple[str, ...]  # the checks whose property it breaks (the failing ones it explains)
    price: float | None = None  # its default price (the rubric's [mistakes] overrides it)


class Bugs(ABC):
    """The known bugs of one edition and their answers on the probes."""

    @abstractmethod
    def bugs(self) -> tuple[Bug, ...]: ...

    @abstractmethod
    def reference(self, function: str) -> tuple[Seen, ...] | None:
        """The correct answers on ``function``'s probes; None when this edition has none."""

    @abstractmethod
    def answers(self, bug: Bug) -> tuple[Seen, ...]: ...

    def of(self, function: str) -> list[Bug]:
        return [b for b in self.bugs() if b.function == function]

    @abstractmethod
    def warm(self, stop: Callable[[], bool]) -> None:
        """Compute now what the first diagnosis would, unless ``stop`` says to leave the rest for later."""


class LiveBugs(Bugs):
    """The instructor's edition: the library's chaffs that are not mutations, run here on the probes."""

    def __init__(self, reference: ModuleType) -> None:
        self.module = reference

    def bugs(self) -> tuple[Bug, ...]:
        return library_bugs()

    def reference(self, function: str) -> tuple[Seen, ...]:
        return grader_side(self.module, function)

    def answers(self, bug: Bug) -> tuple[Seen, ...]:
        return grader_side(chaff_module(_chaff(bug.id)), bug.function)

    def warm(self, stop: Callable[[], bool]) -> None:
        """Every chaff on its probes (about 0.2 s), kept for the process."""
        for function in PROBES:
            for module in [self.module, *(chaff_module(_chaff(b.id)) for b in self.of(function))]:
                if stop():
                    return
                grader_side(module, function)


@cache
def library_bugs() -> tuple[Bug, ...]:
    """The library's chaffs that the error model does not describe, with their catalog's words and price."""
    return tuple(
        Bug(c.id, c.function, c.title, c.hint, c.cites, c.caught_by, c.price)
        for c in known_heads("chaff")
        if not c.mutation
    )


def _chaff(cid: str) -> Any:
    return next(c for c in known_heads("chaff") if c.id == cid)


class StoredBugs(Bugs):
    """The student kit's edition: the answers the library's code gave when the kit was built. The words and
    prices come with the snapshot's header; the numbers are read when a diagnosis first needs them."""

    def __init__(self, meta: dict[str, Any], tensors: Callable[[], dict[str, torch.Tensor]]) -> None:
        self._meta, self._tensors = meta, tensors
        self._bugs = tuple(Bug(**{**b["bug"], "breaks": tuple(b["bug"]["breaks"])}) for b in meta["bugs"])

    def bugs(self) -> tuple[Bug, ...]:
        return self._bugs

    def reference(self, function: str) -> tuple[Seen, ...] | None:
        return self._answers()[0].get(function)

    def answers(self, bug: Bug) -> tuple[Seen, ...]:
        return self._answers()[1][bug.id]

    def warm(self, stop: Callable[[], bool]) -> None:
        self._answers()

    @cache  # noqa: B019 (one instance per oracle, kept for the process)
    def _answers(self) -> tuple[dict[str, tuple[Seen, ...]], dict[str, tuple[Seen, ...]]]:
        tensors, meta = self._tensors(), self._meta
        reference = {fn: _load(tensors, f"reference/{fn}", runs) for fn, runs in meta["reference"].items()}
        bugs = {b["bug"]["id"]: _load(tensors, f"bug/{b['bug']['id']}", b["runs"]) for b in meta["bugs"]}
        return reference, bugs


class NoBugs(Bugs):
    """An edition that knows no bugs (a kit built before the bugs were stored)."""

    def bugs(self) -> tuple[Bug, ...]:
        return ()

    def reference(self, function: str) -> None:
        return None

    def answers(self, bug: Bug) -> tuple[Seen, ...]:
        return ()

    def warm(self, stop: Callable[[], bool]) -> None:
        return


@cache
def bugs_of(ref: Oracle) -> Bugs:
    """The known bugs of the edition ``ref`` belongs to."""
    if ref.module is not None:
        return LiveBugs(ref.module)
    meta = ref.stored_meta(STORED)
    return StoredBugs(meta, lambda: ref.stored_tensors(STORED)) if meta else NoBugs()


# ---- the kit's copy: numbers and words, no code -----------------------------------------------------------


def snapshot(reference: ModuleType) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """What :class:`StoredBugs` reads, as the kit's snapshot stores it (tensors and metadata under
    :data:`STORED`): the reference's answers on every probe, and each library bug whose answers differ from
    them, with its words and price."""
    live = LiveBugs(reference)
    tensors: dict[str, torch.Tensor] = {}
    meta: dict[str, Any] = {"reference": {}, "bugs": []}
    for function in PROBES:
        correct = live.reference(function)
        meta["reference"][function] = _dump(correct, f"reference/{function}", tensors)
        for bug in live.of(function):
            theirs = live.answers(bug)
            if all(s.error for s in theirs) or same(theirs, correct):
                continue  # never named: a head answering like this is diagnosed as the reference or a crash
            meta["bugs"].append({"bug": asdict(bug), "runs": _dump(theirs, f"bug/{bug.id}", tensors)})
    return {f"{STORED}/{k}": t for k, t in tensors.items()}, {STORED: meta}


def stored_ids(reference: ModuleType) -> frozenset[str]:
    """The known bugs the kit built beside ``reference`` stores, hence names."""
    return frozenset(b["bug"]["id"] for b in snapshot(reference)[1][STORED]["bugs"])


def _dump(runs: tuple[Seen, ...], prefix: str, tensors: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    out = []
    for k, seen in enumerate(runs):
        for name, t in seen.values.items():
            tensors[f"{prefix}/{k}/{name}"] = t.detach().contiguous()
        out.append({"error": seen.error, "shape": seen.shape, "values": list(seen.values)})
    return out


def _load(tensors: dict[str, torch.Tensor], prefix: str, runs: list[dict[str, Any]]) -> tuple[Seen, ...]:
    return tuple(
        Seen(
            error=run["error"],
            values={name: tensors[f"{prefix}/{k}/{name}"] for name in run["values"]},
            shape=run["shape"],
        )
        for k, run in enumerate(runs)
    )
