"""Root causes of a failing head: crashes, changes to the correct head, and known bugs (issue 10).

Three kinds of cause, each explaining some of the failing checks:

* ``crash``: the same student failure stopped several checks ("causal_self_attention raises
  NotImplementedError — 15 checks could not run"); found by probing every contract function once.
* ``mutation``: the head behaves exactly like the reference with one to three changes of the error model
  (``_mutations``), found by a search over combinations (``_search``) on fixed probes.
* ``known``: a known bug that the head matches on every probe (``_known``, ``_bugs``), for the other
  contract functions, and for attention bugs outside the error model: a chaff of the library, run here in
  the instructor's grader, or what it computed on the same probes, stored in the student kit.
* ``contract``: a breach of the calling contract seen directly: outputs in another dtype than the
  inputs, or no autograd graph at all (a NumPy head); the values may well be right.

How they are found (issue 51): one state and rules run to a fixpoint. ``_examine`` gives the engine (``_engine``)
the check results and the head as the state's given slots; each rule of ``_rules`` (a crash's place, a width, the
flag, a dtype, the search, the known bugs, the causes seen directly, one decision named once, the walk, the
proof) declares the slots it reads and the slots it writes, every slot has one writer, and its proposal goes
through one acceptance point (``Engine.accept``). The engine runs a rule whose reads are settled until none is
due, so the causes do not depend on the order the rules are listed in; each run is recorded
(``GradeResult.diagnosis_steps``), and a rule that raises, or a budget that ends, is the result's
``diagnosis_error``, never silent. A grade runs the rules once: those that find where the head runs first
(``Engine.run(wanted)``), then the same state goes on after the checks a length stopped ran again there
(``Engine.resumed``: only the rules that read what changed run again)::

    given: head, checks, failing ... --> rule(reads) --proposal--> Engine.accept --> slots(writes) --> ...
    causes_crashed -> causes_absorbed -> causes_found -> ... -> causes_pointed -> causes_proved -> causes

Every cause's words, the checks it breaks and its default price live in ``causes.toml`` (or, for a known
bug, with the bug): both editions name and price the same causes alike. The package reaches student code
only through :class:`grader.head.Head`. A correct head and a head that matches nothing get no cause: a
wrong guess is worse than none.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.diagnosis._bugs import snapshot as stored_bugs
    from grader.diagnosis._causes import model_cause_ids
    from grader.diagnosis._examine import (
        Examination,
        attach_causes,
        caught_by,
        count_causes,
        count_diagnoses,
        diagnose,
        examine,
        kit_cause_ids,
        warm_diagnosis,
    )
    from grader.diagnosis._known import Seen, indistinguishable, same
    from grader.diagnosis._naming import cause_ids, prices

# Exports resolve on first use: the engine (_examine, _engine and the rules it runs) is imported only for a head that
# fails something, while the grader reads the catalog's ids and prices from the light modules (issue 37).
_EXPORTS = {
    "Examination": "_examine",
    "Seen": "_known",
    "attach_causes": "_examine",
    "cause_ids": "_naming",
    "caught_by": "_examine",
    "count_causes": "_examine",
    "count_diagnoses": "_examine",
    "diagnose": "_examine",
    "examine": "_examine",
    "indistinguishable": "_known",
    "kit_cause_ids": "_examine",
    "model_cause_ids": "_causes",
    "prices": "_naming",
    "same": "_known",
    "stored_bugs": "_bugs",
    "warm_diagnosis": "_examine",
}
_RENAMED = {"stored_bugs": "snapshot"}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grader.diagnosis' has no attribute {name!r}")
    return getattr(importlib.import_module(f"grader.diagnosis.{_EXPORTS[name]}"), _RENAMED.get(name, name))


__all__ = [
    "Examination",
    "Seen",
    "attach_causes",
    "cause_ids",
    "caught_by",
    "count_causes",
    "count_diagnoses",
    "diagnose",
    "examine",
    "indistinguishable",
    "kit_cause_ids",
    "model_cause_ids",
    "prices",
    "same",
    "stored_bugs",
    "warm_diagnosis",
]
