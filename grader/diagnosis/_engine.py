"""The diagnosis's engine (issue 51): one state of named slots, rules that read some slots and propose values for
others, one acceptance point, and a loop that runs the rules until nothing changes.

* :class:`Rule`: a name, the slots it ``reads``, the slots it ``writes``, its function (of a :class:`View` of the
  slots it reads, answering a proposal: ``{slot: value}``), and the ``default`` it answers when it raises (what it
  answers when it finds nothing), as a pass of the diagnosis always did (issue 35).
* Every slot has one writer: the caller (the given slots) or exactly one rule. A rule reads only the slots it
  declares (its view refuses the others) and proposes only those it writes (:meth:`Engine.accept` refuses the
  others): a rule is a function of its reads, so the rules' order is data, not the order they are listed in.
* :meth:`Engine.run`: a rule is due when it never ran or a slot it reads changed since it last ran; of the due
  rules it runs the first whose reads are settled (no other due rule writes one of them), so each rule of an
  acyclic set runs once, after its writers, in any listed order. It stops when no rule is due, or when its
  budget (rule runs, seconds) is spent: then the rules left are said (:attr:`Engine.unfinished`) and recorded as
  the diagnosis's own error, never silently.

Each run is recorded as a :class:`grader.models.DiagnosisStep` (through :class:`Passes`), with its time and
whether it answered something else than its default.
"""

from __future__ import annotations

import copy
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar, cast

from grader.models import DiagnosisError, DiagnosisStep

T = TypeVar("T")


@dataclass
class Passes:
    """The record of one examination's rules: each run counted with its time, and the grader's own exception in one
    recorded (the rule then answers its default, so that the others keep their causes: issue 35, a grader bug costs
    the advice it would have given, never silently the grade)."""

    raised: list[tuple[str, BaseException]] = field(default_factory=list)
    steps: dict[str, DiagnosisStep] = field(default_factory=dict)

    def count(self, name: str, *, changed: bool, raised: bool, started: float, says: str = "") -> None:
        """One run of pass ``name`` (doing what ``says``), begun at ``started`` (``time.perf_counter``), in
        :attr:`steps`."""
        seconds = round(time.perf_counter() - started, 4)
        this = DiagnosisStep(name=name, says=says, runs=1, changed=changed, raised=raised, seconds=seconds)
        self.steps[name] = self.steps[name].plus(this) if name in self.steps else this

    def record(self, name: str, exc: BaseException) -> None:
        """One pass's exception (the single place every one of them goes through: tests/conftest.py watches it)."""
        self.raised.append((name, exc))

    def error(self) -> DiagnosisError | None:
        """The result model's account of what raised: the first exception, and every pass that raised."""
        if not self.raised:
            return None
        exc = self.raised[0][1]
        frames = [ln.rstrip() for ln in traceback.format_exception(exc)[-6:]]
        return DiagnosisError(
            type=type(exc).__name__,
            message=str(exc)[:500],
            passes=list(dict.fromkeys(name for name, _ in self.raised)),
            traceback=frames,
        )


def same(answer: object, default: object) -> bool:
    """Whether two values are the same (a value holding tensors is compared by identity only: never the same
    as another)."""
    if answer is default:
        return True
    try:
        return bool(answer == default)
    except (RuntimeError, TypeError, ValueError):  # tensors compared elementwise: an answer of its own
        return False


@dataclass(frozen=True)
class Slot:
    """A rule's default that is the value of one of the slots it reads (a rule that passes its input on)."""

    name: str


@dataclass(frozen=True)
class Rule:
    """One step of the diagnosis: ``fn`` of the slots ``reads`` proposes values for the slots ``writes``; when it
    raises, ``default`` is proposed instead (a value, or :class:`Slot` for the value of a slot it reads)."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    fn: Callable[[View], Mapping[str, object]]
    default: Mapping[str, object]
    says: str = ""  # what it does, in words (the report's "how these causes were found")

    def __post_init__(self) -> None:
        if set(self.default) != set(self.writes):
            raise ValueError(f"rule {self.name}: its default must give every slot it writes, {self.writes}")
        stray = [s.name for s in self.default.values() if isinstance(s, Slot) and s.name not in self.reads]
        if stray:
            raise ValueError(f"rule {self.name}: its default reads {stray}, which it does not declare")


class View:
    """What a rule sees of the state: the slots it declared it reads, by attribute, and :meth:`part`."""

    def __init__(self, engine: Engine, rule: Rule) -> None:
        self._engine, self._rule = engine, rule

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._rule.reads:
            raise AttributeError(f"rule {self._rule.name} reads {name}, which it does not declare")
        return self._engine.values[name]

    def part(self, default: object, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` run on its own inside the rule: when it raises, the exception is recorded under the
        rule's name and ``default`` stands for that part alone (a probe of one contract function)."""
        try:
            return fn(*args)
        except Exception as exc:
            self._engine.passes.record(self._rule.name, exc)
            return cast(T, default)


class BudgetSpent(RuntimeError):
    """The engine's budget ended before every rule ran: the rules left are named."""


@dataclass
class Engine:
    """The state (``values``: slot -> value, ``versions``: slot -> how often it changed) and the rules over it."""

    rules: list[Rule]
    given: Mapping[str, object]
    passes: Passes = field(default_factory=Passes)
    max_runs: int | None = None  # default: 4 runs per rule
    max_seconds: float | None = None
    values: dict[str, object] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # the rules in the order they ran
    unfinished: tuple[str, ...] = ()
    ran_at: dict[str, dict[str, int]] = field(default_factory=dict)  # rule -> the versions of its reads when it ran

    def __post_init__(self) -> None:
        writer: dict[str, str] = dict.fromkeys(self.given, "the caller")
        for rule in self.rules:
            for slot in rule.writes:
                if slot in writer:
                    raise ValueError(f"slot {slot} has two writers: {writer[slot]} and rule {rule.name}")
                writer[slot] = f"rule {rule.name}"
        unread = sorted({s for r in self.rules for s in r.reads} - set(writer))
        if unread:
            raise ValueError(f"slots read and never written: {unread}")
        if len({r.name for r in self.rules}) != len(self.rules):
            raise ValueError("two rules share a name")
        self.values = dict(self.given)
        self.versions = dict.fromkeys(writer, 0)

    @classmethod
    def resumed(cls, previous: Engine, given: Mapping[str, object], passes: Passes | None = None) -> Engine:
        """The state ``previous`` reached, with the given slots as ``given`` says now: a given slot whose value
        changed gets a new version, so that :meth:`run` runs again only the rules that read what changed and
        those downstream of them (issue 51: a head examined again where it runs, after its checks stopped by a
        length ran again there, does not pay the search and the walk twice when their inputs are the same)."""
        engine = cls(previous.rules, given, passes or Passes(), previous.max_runs, previous.max_seconds)
        engine.values, engine.versions = dict(previous.values), dict(previous.versions)
        engine.ran_at = {name: dict(versions) for name, versions in previous.ran_at.items()}
        for slot, value in given.items():
            if slot not in previous.values or not same(value, previous.values[slot]):
                engine.values[slot] = value
                engine.versions[slot] = previous.versions.get(slot, 0) + 1
        return engine

    def accept(self, rule: Rule, proposal: Mapping[str, object]) -> list[str]:
        """The one place the state changes: ``rule``'s proposal set, refusing a slot it does not write; each slot
        whose value changed gets a new version. Answers the slots that changed."""
        stray, lacking = sorted(set(proposal) - set(rule.writes)), sorted(set(rule.writes) - set(proposal))
        if stray or lacking:
            raise ValueError(f"rule {rule.name} proposed {stray} beyond the slots it writes, and lacks {lacking}")
        changed = []
        for slot, value in proposal.items():
            if slot not in self.values or not same(value, self.values[slot]):
                self.values[slot] = value
                self.versions[slot] += 1
                changed.append(slot)
        return changed

    def run(self, wanted: Iterable[str] | None = None) -> dict[str, object]:
        """The rules run until none is due (or the budget is spent): the final values. ``wanted``: only the rules
        those slots need (their writers, and the writers of what those read), the others left for a later run of
        the same state (:meth:`resumed`)."""
        rules = self.rules if wanted is None else _upstream(self.rules, set(wanted))
        seen = self.ran_at  # rule -> the versions of its reads when it last ran
        budget = 4 * len(rules) if self.max_runs is None else self.max_runs
        started = time.perf_counter()
        while True:
            due = [r for r in rules if r.name not in seen or _moved(r, seen[r.name], self.versions)]
            if not due:
                return self.values
            spent = len(self.order) >= budget
            late = self.max_seconds is not None and time.perf_counter() - started > self.max_seconds
            if spent or late:
                self.unfinished = tuple(r.name for r in due)
                why = f"{len(self.order)} rule runs" if spent else f"{self.max_seconds:g} s"
                left = ", ".join(self.unfinished)
                self.passes.record("engine", BudgetSpent(f"the budget of {why} ended before these rules ran: {left}"))
                return self.values
            rule = next((r for r in due if _settled(r, due)), due[0])
            seen[rule.name] = {s: self.versions[s] for s in rule.reads}
            self.step(rule)

    def step(self, rule: Rule) -> None:
        """``rule`` run once on the state, its proposal (or, when it raised, its default) accepted and counted."""
        started, raised = time.perf_counter(), False
        view = View(self, rule)
        default = {k: self.values[v.name] if isinstance(v, Slot) else _fresh(v) for k, v in rule.default.items()}
        try:
            proposal = rule.fn(view)
            self.accept(rule, proposal)
        except Exception as exc:
            self.passes.record(rule.name, exc)
            proposal, raised = default, True
            self.accept(rule, proposal)
        changed = not raised and not all(same(proposal.get(k), default[k]) for k in rule.writes)
        self.passes.count(rule.name, changed=changed, raised=raised, started=started, says=rule.says)
        self.order.append(rule.name)


def _upstream(rules: list[Rule], wanted: set[str]) -> list[Rule]:
    """The rules that ``wanted`` slots need: their writers and, in turn, the writers of what those read."""
    needed, grew = set(wanted), True
    while grew:
        more = {s for r in rules if set(r.writes) & needed for s in r.reads} - needed
        needed, grew = needed | more, bool(more)
    return [r for r in rules if set(r.writes) & needed]


def _moved(rule: Rule, versions: Mapping[str, int], now: Mapping[str, int]) -> bool:
    """Whether a slot ``rule`` reads changed since it last ran."""
    return any(now[s] != versions[s] for s in rule.reads)


def _settled(rule: Rule, due: Iterable[Rule]) -> bool:
    """Whether no other due rule writes a slot ``rule`` reads."""
    return not any(set(other.writes) & set(rule.reads) for other in due if other is not rule)


def _fresh(value: object) -> object:
    """A default's own copy (a rule's default is shared by every run, and a rule's answer may be filled later)."""
    return copy.deepcopy(value)
