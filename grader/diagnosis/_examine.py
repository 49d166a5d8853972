"""The diagnosis's entry: from a head's check results to its root causes (see the package's face,
``grader.diagnosis``, for the kinds of cause and where their words live).

``examine`` gives the engine (``_engine``) the check results and the head, runs the diagnosis's rules (``_rules``:
the probes, the crashes and what they depend on, the error model's search, the known bugs, the causes seen directly,
one decision named once, the line to edit, the proof) until nothing changes, and reads the causes from its state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from grader.diagnosis import _rules
from grader.diagnosis._bugs import bugs_of, stored_ids
from grader.diagnosis._causes import model_cause_ids
from grader.diagnosis._direct import _explained
from grader.diagnosis._engine import Engine, Passes
from grader.diagnosis._naming import violates
from grader.diagnosis._where import Where
from grader.head import Head
from grader.library import KnownHead, load_reference
from grader.models import (
    FAILING,
    CheckResult,
    Diagnosis,
    DiagnosisError,
    DiagnosisProof,
    DiagnosisStep,
    GradeResult,
)

if TYPE_CHECKING:
    from grader.oracle import Oracle
    from grader.rubric import Rubric


@dataclass(frozen=True)
class Examination:
    """What a diagnosis found: the causes, and where the head runs (its checks stopped by a length it cannot
    take, ``stopped``, can be run again at ``where.length``)."""

    causes: list[Diagnosis]
    where: Where = Where()
    stopped: tuple[str, ...] = ()
    error: DiagnosisError | None = None  # the grader's own exception in a pass (issue 35): the causes may be partial
    proof: DiagnosisProof | None = None  # the walk's changes make every property check pass (``_proof``)
    steps: list[DiagnosisStep] = field(default_factory=list)  # what each rule did and cost
    unfinished: tuple[str, ...] = ()  # the rules the engine's budget left unrun (also recorded in ``error``)
    order: tuple[str, ...] = ()  # the rules in the order the engine ran them
    engine: Engine | None = field(default=None, repr=False, compare=False)  # its state, for an examination again


def diagnose(
    checks: Iterable[CheckResult], head: Head, ref: Oracle, rubric: Rubric | None = None, seed: int | None = None
) -> list[Diagnosis]:
    """Every root cause of the failing checks, each with the checks it explains; [] when none failed.
    ``rubric`` and ``seed`` let a check be replayed on the error model (see ``_replay``)."""
    return examine(checks, head, ref, rubric, seed).causes


def examine(
    checks: Iterable[CheckResult],
    head: Head,
    ref: Oracle,
    rubric: Rubric | None = None,
    seed: int | None = None,
    previous: Examination | None = None,
    *,
    where_only: bool = False,
) -> Examination:
    """:func:`diagnose`, and where the head runs. Never raises for the grader's own error (issue 35): each pass
    runs on its own, one that raises leaves its part out and the others keep theirs, and the exception is
    recorded in ``Examination.error``. ``previous``: an examination of the same head (and reference) on earlier
    check results, whose rules run again only where what they read changed. ``where_only``: only the rules that
    find where the head runs (the lengths, the flag, the widths: ``where`` and ``stopped``), no cause yet; an
    examination with it as ``previous`` goes on from there."""
    passes = Passes()
    try:
        return _examine(list(checks), head, ref, rubric, seed, passes, previous, WHERE if where_only else None)
    except Exception as exc:  # outside every pass (the glue between them): nothing found is kept
        passes.record("examine", exc)
        return Examination([], error=passes.error(), steps=list(passes.steps.values()))


def _examine(
    checks: list[CheckResult],
    head: Head,
    ref: Oracle,
    rubric: Rubric | None,
    seed: int | None,
    passes: Passes,
    previous: Examination | None = None,
    wanted: tuple[str, ...] | None = None,
) -> Examination:
    failing = [c for c in checks if c.status in FAILING]
    if not failing:
        return Examination([])
    given = {
        "head": head,
        "ref": ref,
        "rubric": rubric,
        "seed": seed,
        "checks": checks,
        "failing": failing,
        "failed": {c.id for c in failing},
        "passed": {c.id for c in checks if c.status == "passed"},
    }
    before = previous.engine if previous is not None else None
    engine = Engine.resumed(before, given, passes) if before is not None else Engine(_rules.RULES, given, passes)
    s = engine.run(wanted)
    where, size, width = cast(Where, s.get("where", Where())), s.get("size"), s.get("width")
    stopped = tuple(size.explains if isinstance(size, Diagnosis) else ())
    stopped += tuple(width.explains if isinstance(width, Diagnosis) and where.square else ())
    causes = _explained(cast(list[Diagnosis], s.get("causes", [])), failing)
    proof = cast(DiagnosisProof | None, s.get("proof"))
    steps = list(passes.steps.values())
    return Examination(
        causes, where, stopped, passes.error(), proof, steps, engine.unfinished, tuple(engine.order), engine
    )


WHERE = ("where", "size", "width")  # the slots that say where the head runs, and what its lengths stopped


def warm_diagnosis(ref: Oracle, stop: Callable[[], bool] = lambda: False) -> None:
    """Compute now what the first diagnosis of a process computes and keeps (the reference's and every
    known bug's answers on the probes: about 0.2 s), unless ``stop`` says to leave the rest for later."""
    bugs_of(ref).warm(stop)


def kit_cause_ids() -> frozenset[str]:
    """The ids the student kit built from this grader names: the error model's and the known bugs it stores."""
    return model_cause_ids() | stored_ids(load_reference())


def caught_by(chaff: KnownHead) -> tuple[str, ...]:
    """The checks a chaff of the library breaks: its mutation's (causes.toml), or its catalog's own."""
    return violates(chaff.mutation) if chaff.mutation else chaff.caught_by


def attach_causes(checks: list[CheckResult], diagnosis: list[Diagnosis]) -> list[CheckResult]:
    """Each failing check with the ids of the causes that explain it."""
    out = []
    for c in checks:
        ids = [d.id for d in diagnosis if c.id in d.explains] if c.status in FAILING else []
        out.append(c.model_copy(update={"causes": ids}) if ids else c)
    return out


def count_causes(results: Iterable[GradeResult]) -> Counter[str]:
    """How many submissions each root cause was found in (for a class summary)."""
    return Counter(d.id for r in results for d in {d.id: d for d in r.diagnosis}.values())


count_diagnoses = count_causes
