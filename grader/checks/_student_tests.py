"""Exercise 2: the student's own tests, graded with wheats and chaffs (the Examplar method).

The suite runs with pytest against instructor heads, never against the student's head: once against
the reference (the *wheat*), which it must pass, and once against every known bug in scope (a *chaff*),
each of which it should reject (some test fails). The score is the fraction of chaffs caught; a missed
chaff is reported as the property a test should have checked, never as code.

Every run gets a fresh sandboxed worker (same limits and protections as a submission's head) whose
folder holds only the student's files and one head as ``attention_head.py``. Heads are disguised
alike (:func:`disguised_head`) and the pytest arguments never change, so a suite can tell the heads
apart only by how they behave. The wheat runs first (a suite that fails on a correct head stops
there) and again at a random place among the chaffs, so a suite that keeps state between runs
cannot learn which run is the correct head from the order. The verdict is read from the JUnit XML
that pytest writes inside the worker, treated as untrusted data (:func:`parse_junit`) and
cross-checked with pytest's exit code. A suite that hangs, exits or leaves no valid report is
treated like a hostile head: 0 points, and the message says what happened.

Nothing a run computed is quoted back: the worker holds an instructor's head, and a suite can put its
source (``inspect.getsource``) into any message, test name or output. Of a chaff run only whether it
was caught counts. Of a failure on the wheat a student sees the failing test's name, the line of their
own file that failed (read from the grader's copy), the exception type and their own message, each
checked against their files (:func:`_shown`); never values, reprs, tracebacks or output. What a run
reports of itself beyond that (whether a test was skipped; which inputs its tests called the head with,
observed in the worker as :class:`Call` records, never read from the source, so a helper such as the
template's ``make_inputs`` is seen through) only chooses among the grader's fixed words: no count or
value of it is quoted. The student kit runs the suite on the student's own head instead, every test
(no ``-x``), and says what pytest says: its counts (:class:`Tally`) and the first failure as pytest
shows it (:func:`_excerpt`).

Course code earns nothing (issue 54): a test function the student template ships, kept as it is, is not run for
points (it is renamed out of pytest's sight in the suite's copy, lines unchanged), and a module that does not import
earns nothing for its tests (the check stops on the import error, as every other check does).

Scope: the chaffs of ``causal_self_attention`` (the head Exercise 2 asks to test) always count; the
chaffs of another contract function count only when the test files mention its name, so a suite is
graded on the functions it tests. Chaffs that only the ``performance`` or ``forbidden_api`` checks
catch compute the reference's values; no property test can reject them, and they are left out.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import random
import re
import shlex
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

from grader._paths import bundled
from grader._syntax import parse
from grader.checks._base import Ctx, Verdict, check, failed, passed, skipped
from grader.checks._mutants import mutations
from grader.library import KnownHead, indistinguishable, known_heads, reference_path
from grader.models import FAILING, CheckResult, Mutant, OwnTests
from grader.rubric import EntryPoints, Rubric
from grader.sandbox import Reply, Sandbox, SandboxLimits, WorkerPool
from grader.sandbox._private import PrivateDir
from grader.submission import is_test_file

ALWAYS_IN_SCOPE = ("causal_self_attention",)
XML_CAP = 1 << 20  # bytes; the worker ships at most one byte more
TEST_SHARE = 0.25  # one test phase may use this share of a call's time limit, so a slow test is named
TEXT_CAP = 600  # characters of a failure message quoted back
SANDBOX_PATH = re.compile(r"[^\s'\"(]*/(?:step4-)?sandbox-[^/\s]+/(?:src|work)/")
OWN_SLOTS = 2  # a private pool runs two suites at once (the grading machines have two cores)
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")

NO_TESTS = (
    "Your submission has no test files (test_*.py beside the file with your head, or in a tests/ folder there). "
    "Exercise 2 asks you to test your head; start from test_attention_head.py in the student template."
)

Outcome = Literal["passed", "failed", "empty", "broken", "timeout"]


@dataclass(frozen=True)
class Reported:
    id: str  # "test_file.py::test_name"
    outcome: Literal["passed", "failed", "error", "skipped"]
    message: str = ""  # as the worker reported it: quote it only for a run on the student's own head
    exc_type: str = ""  # the exception's name, as reported (checked before it is shown)
    where: tuple[str, int] | None = None  # the last (file name, line) of the traceback, as reported
    excerpt: str = ""  # the failure as pytest prints it (:func:`_excerpt`): quote it only for the student's own head


@dataclass(frozen=True)
class Tally:
    """A run's tests counted as pytest counts them (its summary line): the one count every message uses.

    A test skipped by ``pytest.skip`` (the template's TODOs) is skipped, never passed; an expected failure
    (``xfail``) is reported as skipped by pytest's JUnit XML and counted so."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0

    @classmethod
    def of(cls, cases: Sequence[Reported]) -> Tally:
        count = {o: sum(c.outcome == o for c in cases) for o in ("passed", "failed", "error", "skipped")}
        return cls(count["passed"], count["failed"], count["error"], count["skipped"])

    def words(self) -> str:
        """Pytest's summary in its order and words: "2 failed, 1 passed, 5 skipped"."""
        parts = [(self.failed, "failed"), (self.passed, "passed"), (self.skipped, "skipped")]
        said = [f"{n} {word}" for n, word in parts if n]
        if self.errors:
            said.append(f"{self.errors} error{'s' if self.errors > 1 else ''}")
        return ", ".join(said) or "no tests ran"

    def skip_advice(self) -> str:
        """A line for a suite with skipped tests (empty without): they check nothing. (Of a run on the
        student's own head only: a count from a run on an instructor's head is not quoted.)"""
        if not self.skipped:
            return ""
        which = "A skipped test checks" if self.skipped == 1 else f"The {self.skipped} skipped tests check"
        return f"{which} nothing: replace each pytest.skip(...) with a real test."


@dataclass(frozen=True)
class Call:
    """One distinct call the tests made of a contract function, as the worker observed it (the run can forge
    it: it only chooses the words of advice to the suite's own author). A tensor is its shape."""

    function: str  # the name called (the rubric's entry point)
    args: tuple[object, ...]
    kwargs: dict[str, object]


@dataclass
class Run:
    """What one pytest session against one head came to."""

    outcome: Outcome
    cases: list[Reported] = field(default_factory=list)
    detail: str = ""  # why a run is broken, timed out or empty (may quote the run's own output)
    duration_s: float = 0.0
    reason: str = ""  # the same, in the grader's words only: safe for a run on an instructor's head
    calls: list[Call] = field(default_factory=list)  # how the tests called the observed functions (untrusted)

    @property
    def failures(self) -> list[Reported]:
        return [c for c in self.cases if c.outcome in ("failed", "error")]


# ---- the student's files -------------------------------------------------------------------------


def suite_files(submission_dir: Path, module: str) -> tuple[dict[str, bytes], list[str]]:
    """The files a suite folder gets (flat: top level first, then tests/), and notes about any dropped.

    The student's own ``<module>.py`` is never copied: the head under test takes its place.
    """
    files: dict[str, bytes] = {}
    notes: list[str] = []
    for folder in (submission_dir, submission_dir / "tests"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.py")):
            if path.name == "__init__.py" or (folder == submission_dir and path.name == f"{module}.py"):
                continue  # the suite folder is flat: no packages, and never the student's own head
            if path.name in files:
                notes.append(f"tests/{path.name} was not run: a file of the same name is at the top level.")
                continue
            files[path.name] = path.read_bytes()
    return files, notes


@cache
def _shipped_tests() -> frozenset[str]:
    """The test functions the student template ships written (their syntax trees, positions left out); not its
    ``pytest.skip`` stubs, which earn nothing anyway and whose skips the verdict advises on."""
    found: set[str] = set()
    for path in sorted(bundled("student_template").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found |= {
            ast.dump(n)
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test") and not _skips(n)
        }
    return frozenset(found)


def _skips(node: ast.FunctionDef) -> bool:
    return any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "skip" for c in ast.walk(node)
    )


def without_course_tests(files: dict[str, bytes]) -> tuple[dict[str, bytes], list[str]]:
    """``files`` with every test function the template ships, unchanged, renamed so that pytest does not collect it
    (``_shipped_<name>``, on its own line: every other line stays where it was), and a note naming each."""
    kept: dict[str, bytes] = {}
    notes: list[str] = []
    for name, data in files.items():
        kept[name] = data
        if not is_test_file(name):
            continue
        try:
            text = data.decode("utf-8")
            tree = ast.parse(text)
        except (UnicodeDecodeError, SyntaxError, ValueError):
            continue  # run as it is: the run says what is wrong with it
        shipped = [n for n in tree.body if isinstance(n, ast.FunctionDef) and ast.dump(n) in _shipped_tests()]
        if not shipped:
            continue
        lines = text.splitlines(keepends=True)
        for node in shipped:
            at = node.lineno - 1
            lines[at] = re.sub(rf"\bdef\s+{node.name}\b", f"def _shipped_{node.name}", lines[at], count=1)
            notes.append(
                f"{name}::{node.name} is the student template's own example, unchanged: it earns no points and was "
                "not run (write tests of your own)."
            )
        kept[name] = "".join(lines).encode("utf-8")
    return kept, notes


def in_scope(chaffs: tuple[KnownHead, ...], test_sources: str, entry: EntryPoints) -> list[KnownHead]:
    """The chaffs a suite is graded on (see the module docstring)."""

    def mentioned(function: str) -> bool:
        return re.search(rf"\b{re.escape(getattr(entry, function))}\b", test_sources) is not None

    return [c for c in chaffs if not indistinguishable(c) and (c.function in ALWAYS_IN_SCOPE or mentioned(c.function))]


# ---- the heads a suite meets ---------------------------------------------------------------------


def disguised_head(override: str | None, entry: EntryPoints | None = None) -> str:
    """The module a suite imports: the reference with ``override``'s definitions put in their place.

    Comments are dropped, the reference's docstrings and annotations are kept on replaced definitions,
    and an override's extra imports move into the function that uses them, so the wheat and every
    chaff share one layout, one set of module names and one signature per function. Renamed entry
    points (rubric) get aliases.
    """
    module = parse(reference_path().read_text(encoding="utf-8"))
    if override is not None:
        _put_in_place(module, parse(override))
    for name, alias in (entry or EntryPoints()).model_dump().items():
        if name != "module" and alias != name:
            module.body.append(parse(f"{alias} = {name}").body[0])
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


_Def = ast.FunctionDef | ast.ClassDef


def _put_in_place(module: ast.Module, override: ast.Module) -> None:
    known = {ast.unparse(n) for n in module.body if isinstance(n, ast.Import | ast.ImportFrom)}
    imports = [n for n in override.body if isinstance(n, ast.Import | ast.ImportFrom) and ast.unparse(n) not in known]
    defs = {n.name: n for n in override.body if isinstance(n, _Def)}
    stray = [n for n in override.body if not isinstance(n, ast.Import | ast.ImportFrom | _Def)]
    if stray:
        raise ValueError(f"a known head may only define functions and classes; found {ast.unparse(stray[0])!r}")
    for i, node in enumerate(module.body):
        if isinstance(node, _Def) and node.name in defs:
            module.body[i] = _dressed_like(defs.pop(node.name), node, imports)
    if defs:
        raise ValueError(f"a known head may only redefine reference names; {sorted(defs)} are new")


def _dressed_like(new: _Def, old: _Def, imports: Sequence[ast.stmt]) -> _Def:
    doc = ast.get_docstring(old, clean=False)
    body = [s for s in new.body if s is not _docstring_node(new)]
    new.body = ([ast.Expr(ast.Constant(doc))] if doc is not None else []) + list(imports) + body
    if isinstance(new, ast.FunctionDef) and isinstance(old, ast.FunctionDef):
        annotations = {a.arg: a.annotation for a in old.args.args + old.args.kwonlyargs}
        for a in new.args.args + new.args.kwonlyargs:
            a.annotation = annotations.get(a.arg, a.annotation)
        new.returns = old.returns
    return new


def _docstring_node(node: _Def) -> ast.stmt | None:
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


# ---- one run -------------------------------------------------------------------------------------


def run_suite(
    files: dict[str, bytes],
    head: str,
    limits: SandboxLimits,
    pool: WorkerPool,
    module: str = "attention_head",
    *,
    exitfirst: bool = True,
    observe: Sequence[str] = (),
) -> Run:
    """Run the test files with pytest in a fresh worker whose folder holds them and ``head``.

    ``exitfirst``: stop at the first failing test (enough to catch a chaff); False runs them all, so that
    the run's :class:`Tally` is the one pytest prints. ``observe``: the functions whose calls by the tests
    are recorded (:attr:`Run.calls`); pass the same in every run of a suite, so the heads stay alike.

    The folder is private (0700, grader only; the worker gets its own copy of it, readable by its uid
    alone) and holds nothing else: no other head, no catalog, nothing of the reference's package.
    """
    t0 = time.perf_counter()
    with PrivateDir("suite") as folder:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        (folder / f"{module}.py").write_text(head, encoding="utf-8")
        params = {
            "tests": sorted(n for n in files if is_test_file(n)),
            "test_timeout_s": limits.per_call_timeout_s * TEST_SHARE,
            "exitfirst": exitfirst,
            "observe": list(observe),
        }
        with Sandbox(folder, limits, pool=pool, module=module) as sandbox:
            reply = sandbox.request("pytest", params, {}, timeout_s=limits.per_call_timeout_s)
    run = judge_reply(reply)
    run.duration_s = time.perf_counter() - t0
    return run


def judge_reply(reply: Reply) -> Run:
    """A run's outcome from the worker's reply: pytest's exit code and its JUnit XML, cross-checked.

    ``detail`` may quote the run (its output, an error's message); ``reason`` says the same in the
    grader's own words, with nothing the run chose beyond a number."""
    if reply.status in ("timeout", "budget"):  # the grader's own message
        return Run("timeout", detail=reply.message, reason=reply.message)
    if reply.status in ("import_error", "import_timeout"):  # the head is the instructor's: the grader's failure
        raise RuntimeError(f"an instructor head failed to import in the sandbox: {reply.message}")
    if reply.status != "ok":
        return Run("broken", detail=reply.message, reason=_safe_reason(reply))
    code = reply.header.get("exit_code")
    code = code if type(code) is int else None  # the whole header is the run's to forge
    parsed = parse_junit(reply.header.get("xml"))
    if isinstance(parsed, str):
        why = f"{parsed} (pytest exit code {code})"
        return Run("broken", detail=why, reason=why)
    cases = parsed
    calls = _calls(reply.header.get("calls"))
    bad = [c for c in cases if c.outcome in ("failed", "error")]
    ran = [c for c in cases if c.outcome == "passed"]
    if code == 0 and not bad:
        if ran:
            return Run("passed", cases, calls=calls)
        return Run("empty", cases, "every test was skipped", reason="every test was skipped")
    if code in (1, 2) and bad:  # 1: tests failed; 2: interrupted, e.g. a test file failed to import
        return Run("failed", cases, calls=calls)
    if code == 5 and not cases:
        why = "pytest collected no tests (test functions are named test_...)"
        return Run("empty", cases, why, reason=why)
    why = f"pytest exit code {code} does not agree with its report ({len(bad)} failures)"
    return Run("broken", cases, why, reason=why)


MAX_CALLS = 64  # distinct calls read from a reply (the worker records no more)


def _calls(value: object) -> list[Call]:
    """The observed calls of a reply's header, each value checked: an int, a bool, None or a shape (a short
    list of ints); anything else reads as None, and a malformed record is dropped."""

    def plain(v: object) -> object:
        if v is None or type(v) in (bool, int):
            return v
        if type(v) is list and len(v) <= 8 and all(type(n) is int for n in v):
            return tuple(v)
        return None

    calls: list[Call] = []
    for record in value[:MAX_CALLS] if type(value) is list else []:
        if type(record) is not dict:
            continue
        name, args, kwargs = record.get("name"), record.get("args"), record.get("kwargs")
        if type(name) is str and type(args) is list and type(kwargs) is dict and len(args) + len(kwargs) <= 16:
            named = {k: plain(v) for k, v in kwargs.items() if type(k) is str}
            calls.append(Call(name, tuple(plain(a) for a in args), named))
    return calls


def _shape(bound: dict[str, object], name: str) -> tuple[int, ...]:
    value = bound.get(name)
    return value if isinstance(value, tuple) and value else ()


def _widths_differ(bound: dict[str, object], a: str, b: str) -> bool:
    left, right = _shape(bound, a), _shape(bound, b)
    return bool(left and right) and left[-1] != right[-1]


# Inputs a suite is seen to use, by condition on one call's arguments (named as in the reference; a tensor
# is its shape): the catalog's ``uses`` names one, and its ``missed_if_used`` words replace the
# ``missed_property`` that says no test uses it.
USES: dict[str, Callable[[dict[str, object]], bool]] = {
    "d != d_k": lambda bound: _widths_differ(bound, "X", "W_Q"),
    "d_v != d": lambda bound: _widths_differ(bound, "W_V", "X"),
    "causal=False": lambda bound: bound.get("causal") is False,
    "B >= 2": lambda bound: len(_shape(bound, "X")) == 3 and _shape(bound, "X")[0] >= 2,
}


@cache
def _parameters(function: str) -> list[tuple[str, object]]:
    """The reference's parameters of ``function``: (name, literal default or a marker for none)."""
    tree = parse(reference_path().read_text(encoding="utf-8"))
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if node is None:
        return []
    args = node.args.posonlyargs + node.args.args
    defaults: list[ast.expr | None] = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
    pairs = list(zip(args, defaults, strict=True)) + list(zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True))

    def literal(d: ast.expr | None) -> object:
        if d is None:
            return _NO_DEFAULT
        try:
            return ast.literal_eval(d)
        except ValueError:
            return _NO_DEFAULT

    return [(a.arg, literal(d)) for a, d in pairs]


_NO_DEFAULT = object()


def used_inputs(calls: Sequence[Call], entry: EntryPoints) -> set[tuple[str, str]]:
    """(contract function, condition of :data:`USES`) for every condition some observed call meets, its
    arguments bound to the reference's parameters (a call that cannot bind counts for nothing)."""
    contract = {alias: name for name, alias in entry.model_dump().items() if name != "module"}
    found: set[tuple[str, str]] = set()
    for call in calls:
        function = contract.get(call.function)
        parameters = _parameters(function) if function is not None else []
        names = [n for n, _ in parameters]
        if (
            function is None
            or not names
            or len(call.args) > len(names)
            or not set(call.kwargs) <= set(names[len(call.args) :])
        ):
            continue
        bound = {n: d for n, d in parameters if d is not _NO_DEFAULT}
        bound.update(zip(names, call.args, strict=False))
        bound.update(call.kwargs)
        found |= {(function, condition) for condition, holds in USES.items() if holds(bound)}
    return found


_DEATH = re.compile(
    r"(the worker (exited with code -?\d+|was killed by SIG[A-Z0-9]+ \([\w ]+\)|ended \(exit status unknown\))"
    r"|memory limit \(\d+ MiB\) exceeded) while running 'pytest'(: its processes used \d+ MiB)?"
)


def _safe_reason(reply: Reply) -> str:
    """Why a run broke, without its output or its error's message (they may hold the head's source)."""
    if reply.status == "crash":
        first = reply.message.split("\n", 1)[0]
        return first if _DEATH.fullmatch(first) else "the worker running the tests stopped without a valid reply"
    return "the test run ended with an error instead of a report"


def parse_junit(text: object) -> list[Reported] | str:
    """The test cases of a JUnit XML report, or why the report cannot be used.

    The XML comes from a process that ran student code: it is size-capped, must not hold a DTD or
    entities, and its per-suite counts must agree with the test cases it lists.
    """
    if not isinstance(text, str):
        return "pytest wrote no report"
    if len(text.encode("utf-8", "replace")) > XML_CAP:
        return f"the test report is larger than {XML_CAP} bytes"
    if re.search(r"<!(DOCTYPE|ENTITY)", text, re.IGNORECASE):
        return "the test report declares a DTD or entities"
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return "the test report is not valid XML"
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite") if root.tag == "testsuites" else []
    if not suites:
        return "the test report has no <testsuite>"
    cases: list[Reported] = []
    for suite in suites:
        testcases = suite.findall("testcase")
        for key, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            n = sum(len(tc.findall(tag)) for tc in testcases)
            if suite.get(key, "0") != str(n):  # the report's own words are not quoted: they are the run's
                return f"the test report's count of {key} does not match the {n} it lists"
        cases += [_case(tc) for tc in testcases]
    return cases


def _case(tc: ET.Element) -> Reported:
    module, _, cls = (tc.get("classname") or "").partition(".")
    name = tc.get("name") or "?"
    test_id = (f"{module}.py::" + (f"{cls}::" if cls else "") + name if module else f"file {name}.py")[:200]
    for tag, outcome in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
        el = tc.find(tag)
        if el is None:
            continue
        message = _SHORTENED.sub("", (el.get("message") or "").strip())  # pytest's note on its attribute: jargon
        lines = [re.sub(r"^E\s+", "", ln).strip() for ln in (el.text or "").splitlines() if ln.strip()]
        if lines and lines[-1] not in message:  # e.g. "collection failure" + the ImportError line
            message = f"{message}: {lines[-1]}" if message else lines[-1]
        message = SANDBOX_PATH.sub("", message)  # the worker's private folders mean nothing to a student
        typed = _E_LINE.search(el.text or "") or _E_LINE.match("E " + (el.get("message") or ""))
        exc_type = typed.group(1) if typed else ""
        where = None
        for m in _TB_LINE.finditer(el.text or ""):
            where = (m.group(1).rsplit("/", 1)[-1], int(m.group(2)))
        excerpt = _excerpt(el.text or "") if outcome != "skipped" else ""
        return Reported(test_id, outcome, message[:TEXT_CAP], exc_type[:100], where, excerpt)  # type: ignore[arg-type]
    return Reported(test_id, "passed")


EXCERPT_LINES = 12  # lines of a failure quoted back to the student (their own head's run only)
EXCERPT_WIDTH = 160  # characters per line


def _excerpt(text: str) -> str:
    """A failure as a student reads it in pytest's short traceback: each frame as "file, line N, in name"
    with its source line, then the error's lines (pytest's "E" prefix dropped, real newlines), at most
    ``EXCERPT_LINES`` lines; what is left out is counted, and pytest shows it all."""
    shown: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        frame = _TB_LINE.match(line + " ")
        if frame is not None:
            name = line[frame.end() :].strip()
            shown.append(f"{frame.group(1).rsplit('/', 1)[-1]}, line {frame.group(2)}, in {name}")
        elif line.startswith("E"):
            said = re.sub(r"^E {0,3}", "", line).rstrip()
            shown += [said] if said else []
        else:
            shown.append("  " + line.strip())
    shown = [_within(SANDBOX_PATH.sub("", line)) for line in shown]
    if len(shown) > EXCERPT_LINES:
        rest = len(shown) - EXCERPT_LINES + 1
        shown = [*shown[: EXCERPT_LINES - 1], f"... ({rest} more lines: run pytest on this test to see them)"]
    return "\n".join(shown)


def _within(line: str) -> str:
    """A line of at most ``EXCERPT_WIDTH`` characters, cut at a space (never inside a token) and marked."""
    if len(line) <= EXCERPT_WIDTH:
        return line
    cut = line.rfind(" ", 0, EXCERPT_WIDTH - 2)
    return line[: cut if cut > EXCERPT_WIDTH // 2 else EXCERPT_WIDTH - 2].rstrip() + " …"


_SHORTENED = re.compile(r"\n?\[(?:\+\d+ more lines?|truncated); full report in element text\]$")
_E_LINE = re.compile(r"^E\s+([A-Za-z_][\w.]*)(?::|$)", re.MULTILINE)  # "E   AssertionError: ..." (the first one)
_TB_LINE = re.compile(r"^(\S+\.py):(\d{1,6}): in ", re.MULTILINE)  # --tb=short: "test_x.py:18: in test_y"


# ---- the whole suite -----------------------------------------------------------------------------


@contextlib.contextmanager
def _pool_for(pool: WorkerPool | None, limits: SandboxLimits, jobs: int | None) -> Iterator[tuple[WorkerPool, int]]:
    """The caller's pool (one run at a time unless told), or a private pool of ``OWN_SLOTS`` slots."""
    if pool is not None:
        yield pool, jobs or 1
        return
    with WorkerPool(jobs or OWN_SLOTS, uid_base=limits.sandbox_uid_base) as own:
        yield own, jobs or OWN_SLOTS


def grade_suite(
    submission_dir: Path,
    rubric: Rubric,
    *,
    pool: WorkerPool | None = None,
    jobs: int | None = None,
    rng: random.Random | None = None,
) -> Verdict:
    """The student_tests verdict for the suite in ``submission_dir`` (see the module docstring).

    ``pool``: where the runs get workers (default: a private pool); ``jobs``: runs at once (default 1
    on a given pool, whose other slots may be busy); ``rng``: the run order (default: unpredictable).
    """
    entry, limits = rubric.entry_points, rubric.limits
    files, notes = suite_files(submission_dir, entry.module)
    tests = [n for n in files if is_test_file(n)]
    if not tests:
        return skipped(NO_TESTS)
    files, shipped = without_course_tests(files)
    notes += shipped
    sources = "\n".join(files[n].decode("utf-8", "replace") for n in tests)
    chaffs = in_scope(known_heads("chaff"), sources, entry)
    functions = sorted({getattr(entry, c.function) for c in chaffs if c.function not in ALWAYS_IN_SCOPE})
    if functions:
        notes.append(f"Your tests mention {', '.join(functions)}, so the known bugs of those functions count too.")
    rng = rng or random.SystemRandom()
    order: list[KnownHead | None] = list(chaffs)
    rng.shuffle(order)
    order.insert(rng.randrange(len(order) + 1), None)  # the second wheat run, somewhere among the chaffs
    deadline = time.monotonic() + limits.per_submission_timeout_s
    with _pool_for(pool, limits, jobs) as (active, width):
        active.keep_spares()  # one run after another (a one-shot grade's pool keeps none otherwise: Windows)
        observe = [getattr(entry, f) for f in ALWAYS_IN_SCOPE]  # the same in every run: the heads stay alike

        def run(head: KnownHead | None) -> Run | None:
            if time.monotonic() > deadline:
                return None
            override = None if head is None else head.path.read_text(encoding="utf-8")
            return run_suite(files, disguised_head(override, entry), limits, active, entry.module, observe=observe)

        first = run(None)
        assert first is not None
        if first.outcome != "passed":
            return _wheat_verdict(first, files, first=True, notes=notes)
        runs = _run_all(order, run, width)
    missed: list[KnownHead] = []
    for head, result in zip(order, runs, strict=True):
        if result is None:
            continue
        if head is None and result.outcome != "passed":
            return _wheat_verdict(result, files, first=False, notes=notes)
        if result.outcome in ("broken", "timeout"):
            return _misbehaved(result, "one of the instructor's buggy heads", notes)
        if head is not None and result.outcome != "failed":
            missed.append(head)
    unrun = [h for h, r in zip(order, runs, strict=True) if r is None and h is not None]
    used = used_inputs(first.calls, entry)  # of the first wheat run: the tests on a correct head
    if unrun:
        return _out_of_time(chaffs, missed, unrun, limits, notes, used)
    return _score(chaffs, missed, notes, Tally.of(first.cases).skipped > 0, used)


def _run_all(
    order: list[KnownHead | None], run: Callable[[KnownHead | None], Run | None], jobs: int
) -> list[Run | None]:
    """Run every head (``jobs`` at a time); after a run that hangs or breaks, start no more."""
    results: list[Run | None] = [None] * len(order)
    with ThreadPoolExecutor(max_workers=jobs) as executor:
        futures = {executor.submit(run, head): k for k, head in enumerate(order)}
        for future in as_completed(futures):
            results[futures[future]] = result = future.result()
            if result is not None and result.outcome in ("broken", "timeout"):
                for other in futures:
                    other.cancel()
    return results


def _score(
    chaffs: list[KnownHead],
    missed: list[KnownHead],
    notes: list[str],
    skipped: bool = False,
    used: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
) -> Verdict:
    """The verdict of a suite that passed on the wheat. ``skipped``: some test was skipped there; ``used``:
    the inputs its tests were seen to use (:func:`used_inputs`). Both only choose among the grader's words:
    the run computed them, so no count of theirs is quoted."""
    caught = len(chaffs) - len(missed)
    fraction = caught / len(chaffs) if chaffs else 1.0
    head = (
        f"Your tests pass on a correct head and catch {caught} of {len(chaffs)} known bugs "
        f"({100 * fraction:.0f}%); a bug is caught when at least one test fails on it."
    )
    advice = [SKIPPED_ON_WHEAT] if skipped else []
    if not missed:
        return passed("\n".join([head, *advice]), fraction=fraction, notes=notes)
    lines = [head, "Properties no test checked yet (add a test for each):"]
    ordered = sorted(missed, key=chaffs.index)  # catalog order: the same suite gives the same message
    said = [_missed_words(c, used) for c in ordered]
    lines += [f"- {words[:1].upper()}{words[1:]}." for words in said]
    return failed("\n".join([*lines, *advice]), fraction=fraction, notes=notes)


SKIPPED_ON_WHEAT = (
    "Some of your tests were skipped (pytest.skip) and a skipped test checks nothing: replace each "
    "pytest.skip(...) with a real test."
)


def _missed_words(chaff: KnownHead, used: set[tuple[str, str]]) -> str:
    """What a suite that missed ``chaff`` did not check; never that no test uses an input it was seen to use."""
    if chaff.uses and (chaff.function, chaff.uses) in used:
        return chaff.missed_if_used
    return chaff.missed_property


def _wheat_verdict(run: Run, files: dict[str, bytes], *, first: bool, notes: list[str]) -> Verdict:
    if run.outcome in ("broken", "timeout"):
        return _misbehaved(run, "a correct head", notes)
    if run.outcome == "empty":
        return Verdict("skipped", f"No test of yours ran on a correct head: {run.reason}.", notes=notes)
    known = _Known.of(files)
    case = run.failures[0]  # pytest stops at the first failure (-x)
    test = known.test_name(case)
    quoted = "".join(f"\n  {line}" for line in _shown(case, known))
    missing = MISSING_MODULE.search(case.message)
    package = missing.group(1) if missing is not None else ""
    if first and package and package.split(".")[0] in known.imports and known.named(package):  # not a wrong test
        whole_file = case.id.startswith("file ")  # a collection failure: the import is at the top of the file
        return failed(
            f"Your test {test} imports {package}, which is not installed where the grader runs your tests "
            f"(nor is it one of your files){', so no test of that file could run' if whole_file else ''}:"
            f"{quoted}\nUse torch, pytest, hypothesis or the Python standard library instead of {package}, "
            "or ask your instructor to add it to the course packages.",
            notes=notes,
        )
    if first:
        lead = f"Your test {test} fails on a correct head, so it would reject a right answer:"
        advice = "This check gives no points until every test passes on a correct head. " + (
            "Tests may rely only on what the contract promises (names, shapes, dtypes in the README)."
            if case.outcome == "error"
            else "Check the assertion against the lecture result it cites, and the tolerance it allows."
        )
    else:
        lead = f"Your test {test} passed on a correct head once and failed on it in a later run:"
        advice = (
            "A test's result must not depend on chance or on earlier runs: seed every random input "
            "(torch.Generator().manual_seed(...)) and keep no state between runs."
        )
    hidden = f"\n{NOT_SHOWN}" if case.outcome == "failed" else ""  # an assertion: its values are the head's
    return failed(f"{lead}{quoted}{hidden}\n{advice}", notes=notes)


NOT_SHOWN = (
    "(Values your test computed from the correct head, and what it printed, are not shown: run your tests "
    "on your own head with pytest to see them.)"
)
_LIBRARY_MESSAGES = frozenset(  # fixed first lines of common assertion helpers: nothing of the head in them
    {"Tensor-likes are not close!", "Tensor-likes are not equal!", "Scalars are not close!", "Scalars are not equal!"}
)
_TEMPLATES = (  # Python's own wording around names; each name must be one of the student's
    (re.compile(r"cannot import name '(?P<a>\w+)' from '(?P<b>[\w.]+)'.*"), "cannot import name '{a}' from '{b}'"),
    (re.compile(r"No module named '(?P<a>[\w.]+)'"), "No module named '{a}'"),
    (re.compile(r"name '(?P<a>\w+)' is not defined"), "name '{a}' is not defined"),
    (re.compile(r"module '(?P<a>[\w.]+)' has no attribute '(?P<b>\w+)'"), "module '{a}' has no attribute '{b}'"),
)


@dataclass(frozen=True)
class _Known:
    """What the grader knows of the student's test files, from its own copy: the only text it quotes."""

    lines: dict[str, list[str]]  # file name -> its lines
    defined: dict[str, set[str]]  # file name -> names of the functions and classes it defines
    names: frozenset[str]  # every identifier in the files
    imports: frozenset[str]  # top-level names of the modules they import
    literals: frozenset[str]  # their string constants, stripped

    @classmethod
    def of(cls, files: dict[str, bytes]) -> _Known:
        lines: dict[str, list[str]] = {}
        defined: dict[str, set[str]] = {}
        names: set[str] = set()
        imports: set[str] = set()
        literals: set[str] = set()
        for file, data in files.items():
            text = data.decode("utf-8", "replace")
            lines[file] = text.splitlines()
            defined[file] = set()
            try:
                tree = parse(text)
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    defined[file].add(node.name)
                    names.add(node.name)
                elif isinstance(node, ast.Name):
                    names.add(node.id)
                elif isinstance(node, ast.Attribute):
                    names.add(node.attr)
                elif isinstance(node, ast.alias):
                    names.update(node.name.split("."))
                    imports.add(node.name.split(".")[0])
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names.update(node.module.split("."))
                    imports.add(node.module.split(".")[0])
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    literals.add(node.value.strip())
        return cls(lines, defined, frozenset(names), frozenset(imports), frozenset(literals))

    def named(self, dotted: str) -> bool:
        """Whether every part of ``dotted`` is a name in the student's files."""
        return all(part in self.names or part in self.imports for part in dotted.split("."))

    def test_name(self, case: Reported) -> str:
        """The test's id if the student's files define it; a parametrized case's id (which the run made
        up, from anything) is left out."""
        if case.id.startswith("file "):
            file = case.id[len("file ") :]
            return f"file {file}" if file in self.lines else "file (one of your test files)"
        file, _, rest = case.id.partition("::")
        parts = rest.split("::")
        parts[-1], bracket, _ = parts[-1].partition("[")
        if file not in self.defined or not all(part in self.defined[file] for part in parts):
            return "(one of your tests)"
        return f"{file}::{'::'.join(parts)}" + (" (one of its parametrized cases)" if bracket else "")


def _shown(case: Reported, known: _Known) -> list[str]:
    """What of a failure on an instructor's head may be quoted: the line of the student's own file that
    failed (from the grader's copy), the exception's name, and its message when the student wrote it
    (a string in their files, or Python's wording around their names). A run can forge any of these:
    it then picks among the student's own lines and strings, and shows no text of the head."""
    shown: list[str] = []
    if case.where is not None:
        file, number = case.where
        lines = known.lines.get(file, [])
        if 1 <= number <= len(lines) and lines[number - 1].strip():
            shown.append(f"{file}, line {number}: {lines[number - 1].strip()[:TEXT_CAP]}")
    name = case.exc_type.rsplit(".", 1)[-1]
    builtin = isinstance(getattr(builtins, name, None), type) and issubclass(getattr(builtins, name), BaseException)
    if not (builtin or name in known.names or name == "Failed"):
        return shown + (["(an exception of a type your files do not name)"] if case.exc_type else [])
    prefix = "collection failure: " if case.id.startswith("file ") else ""
    said = _said(case, name, known)
    shown.append(f"{prefix}{name}: {said}" if said else f"{prefix}{name}")
    return shown


def _said(case: Reported, name: str, known: _Known) -> str:
    """The exception's message (its first line) if the student wrote it, else ''."""
    text = case.message
    if text.startswith("collection failure: "):
        text = text[len("collection failure: ") :]
    first = text.split("\n", 1)[0]
    if not first.startswith(f"{name}:"):
        return ""
    first = first[len(name) + 1 :].strip()
    if first in known.literals or first in _LIBRARY_MESSAGES:
        return first
    for template, wording in _TEMPLATES:
        m = template.fullmatch(first)
        if m and all(known.named(v) for v in m.groupdict().values()):
            return wording.format(**m.groupdict())
    return ""


def _misbehaved(run: Run, against: str, notes: list[str]) -> Verdict:
    what = "did not finish" if run.outcome == "timeout" else "did not complete a test run"
    message = f"Your tests {what} against {against}: {run.reason}. Tests must run to the end and report."
    return Verdict("timeout" if run.outcome == "timeout" else "error", message, notes=notes)  # type: ignore[arg-type]


def _out_of_time(
    chaffs: list[KnownHead], missed: list[KnownHead], unrun: list[KnownHead], limits: SandboxLimits,
    notes: list[str], used: set[tuple[str, str]],
) -> Verdict:  # fmt: skip
    verdict = _score(chaffs, missed + unrun, notes, used=used)
    verdict.status = "timeout"  # type: ignore[assignment]
    verdict.message = (
        f"Your tests took more than {limits.per_submission_timeout_s:g} s over all the instructor's heads; "
        f"{len(unrun)} heads were not run and count as missed. Keep tests small (T <= 16).\n" + verdict.message
    )
    return verdict


# ---- the check -----------------------------------------------------------------------------------


@check(
    "student_tests",
    title="your own tests pass on a correct head and catch known bugs",
    cites="Exercise 2",
    needs=(),
)
def student_tests(ctx: Ctx) -> Verdict:
    """Exercise 2: the student's tests pass on the reference and fail on each known buggy head."""
    if ctx.submission_dir is None:
        return skipped("This grading run has no submission folder, so your tests could not be run.")
    if ctx.ref.module is None:  # the student kit: no correct head and no known bugs to run the suite on
        ran = ctx.own_run if isinstance(ctx.own_run, Run) else None
        return own_head_suite(ctx.submission_dir, ctx.source, ctx.rubric, pool=ctx.pool, ran=ran)
    if any(is_test_file(name) for name in suite_files(ctx.submission_dir, ctx.rubric.entry_points.module)[0]):
        ctx.head.found()  # a module that does not import earns nothing for its tests: its ImportFailure stops here
    return grade_suite(ctx.submission_dir, ctx.rubric, pool=ctx.pool)


PENDING = (
    "student_tests is graded when you submit: your tests are run on a correct head, which they must pass, and on "
    "the instructor's known buggy heads, of which they should catch as many as possible; this kit has neither, so "
    "here they run on your own head and on mutations of it."
)


def own_head_suite(
    submission_dir: Path, head: str, rubric: Rubric, *, pool: WorkerPool | None = None, ran: Run | None = None
) -> Verdict:
    """The student kit's student_tests: the suite on the student's own head, then on mutations of it (see
    grader/checks/_mutants.py); its points are pending (graded on submission), its status what the kit saw.
    ``ran``: the suite as a pytest session already ran it on this head (``pytest --step4``), not run again."""
    entry, limits = rubric.entry_points, rubric.limits
    files, notes = suite_files(submission_dir, entry.module)
    tests = [n for n in files if is_test_file(n)]
    if not tests:
        return Verdict("skipped", NO_TESTS, notes=notes, pending=PENDING)
    shown = shown_names(submission_dir, files)
    with _pool_for(pool, limits, 1) as (active, _):
        run = ran or run_suite(files, head, limits, active, entry.module, exitfirst=False)
        tally = Tally.of(run.cases)
        failing = [shown_id(c.id, shown) for c in run.failures]
        asserts = _docstring(files, run.failures[0].id) if run.failures else ""
        own = OwnTests(
            passed=tally.passed,
            failed=tally.failed + tally.errors,
            skipped=tally.skipped,
            failing=failing,
            asserts=asserts,
        )
        if run.outcome == "passed":
            sources = "\n".join(files[n].decode("utf-8", "replace") for n in tests)
            own = _mutation_tested(own, files, head, sources, rubric, active)
    status = "passed" if run.outcome == "passed" else "timeout" if run.outcome == "timeout" else "failed"
    if run.outcome == "empty":
        status = "skipped"
    verdict = Verdict(status, _own_run_message(run, own, shown), notes=notes, pending=PENDING, own_tests=own)  # type: ignore[arg-type]
    if run.failures:
        verdict.reproduce = "pytest " + " ".join(shlex.quote(t) for t in failing[:1])
    return verdict


def session_run(seen: dict[str, tuple[str, str]]) -> Run:
    """A pytest session's run of the student's tests (node id -> outcome, pytest's failure text) as a :class:`Run`:
    what ``pytest --step4`` saw, which the kit's student_tests then takes (the tests are not run twice)."""
    cases = [
        Reported(node, outcome, text.strip().splitlines()[-1] if text.strip() else "", excerpt=_tail(text))  # type: ignore[arg-type]
        for node, (outcome, text) in seen.items()
    ]
    bad = any(c.outcome in ("failed", "error") for c in cases)
    ran = any(c.outcome == "passed" for c in cases)
    outcome: Outcome = "failed" if bad else "passed" if ran else "empty"
    return Run(outcome, cases, "" if ran or bad else "every test was skipped")


def _tail(text: str) -> str:
    """The last lines of pytest's own failure text (its E lines and where), at most ``EXCERPT_LINES``."""
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-EXCERPT_LINES:])


def _mutation_tested(
    own: OwnTests, files: dict[str, bytes], head: str, sources: str, rubric: Rubric, pool: WorkerPool
) -> OwnTests:
    """``own`` with the suite run on each mutant of the head (a mutant is caught when the run does not pass)."""
    entry = rubric.entry_points
    names = {getattr(entry, f) for f in ALWAYS_IN_SCOPE}
    contract = {alias for name, alias in entry.model_dump().items() if name != "module"}
    mentioned = {n for n in contract if re.search(rf"\b{re.escape(n)}\b", sources)}
    helpers = _helpers(head, contract)  # the head's own helpers and classes: what the contract's functions call
    made = mutations(head, sorted(names | mentioned | helpers))
    found: list[Mutant] = []
    for m in made:
        run = run_suite(files, m.source, rubric.limits, pool, entry.module)
        found.append(Mutant(file=f"{entry.module}.py", line=m.line, before=m.before, after=m.after,
                            caught=run.outcome != "passed"))  # fmt: skip
    caught = sum(m.caught for m in found)
    survived = [m for m in found if not m.caught]
    return own.model_copy(update={"mutants": len(found), "caught": caught, "survived": survived})


def _docstring(files: dict[str, bytes], test_id: str) -> str:
    """The first line of the docstring of test ``file.py::name`` (a class's method too), or ''."""
    file, _, rest = test_id.partition("::")
    parts = [p.partition("[")[0] for p in rest.split("::")] if rest else []
    try:
        nodes: list[ast.stmt] = list(parse(files[file].decode("utf-8", "replace")).body)
    except (KeyError, SyntaxError, ValueError):
        return ""
    found: ast.AST | None = None
    for part in parts:
        found = next((n for n in nodes if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == part), None)
        if found is None:
            return ""
        nodes = list(getattr(found, "body", []))
    doc = ast.get_docstring(found) if isinstance(found, ast.FunctionDef | ast.ClassDef) else None
    return doc.strip().split("\n", 1)[0].strip() if doc else ""


def _helpers(head: str, contract: set[str]) -> set[str]:
    """The top-level functions and classes of ``head`` that are not contract names (a helper, an nn.Module)."""
    try:
        tree = parse(head)
    except (SyntaxError, ValueError):
        return set()
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {n.name for n in tree.body if isinstance(n, defs) and n.name not in contract}


def shown_names(submission_dir: Path, files: dict[str, bytes]) -> dict[str, str]:
    """Each suite file's name as the student knows it: ``tests/test_x.py`` for one taken from the tests/ folder
    (the suite folder is flat)."""
    top = {p.name for p in submission_dir.glob("*.py")}
    return {name: name if name in top else f"tests/{name}" for name in files}


def shown_id(test_id: str, shown: dict[str, str]) -> str:
    """A test's id with its file as the student knows it (``tests/test_x.py::test_y``)."""
    file, sep, rest = test_id.partition("::")
    if test_id.startswith("file "):
        name = test_id[len("file ") :]
        return f"file {shown.get(name, name)}"
    return f"{shown.get(file, file)}{sep}{rest}"


SHOWN_SURVIVORS = 5  # mutations that survived, listed by line (the rest counted)


def _own_run_message(run: Run, own: OwnTests, shown: dict[str, str]) -> str:
    """The kit's words on the student's tests on their own head: pytest's counts, the first failure as pytest
    shows it (the head is the student's, so all of it may be quoted), and what the mutants showed."""
    tally = Tally.of(run.cases)
    advice = "".join(f"\n{line}" for line in (tally.skip_advice(),) if line)
    if run.outcome == "passed":
        return f"Your tests pass on your own head: {tally.words()}.{_mutants_words(own)}{advice}"
    if run.outcome in ("broken", "timeout", "empty"):
        what = {"timeout": "did not finish", "empty": "ran no test", "broken": "did not complete"}[run.outcome]
        counted = f" ({tally.words()})" if run.cases else ""
        return f"Your tests {what} on your own head: {run.detail}{counted}.{advice}"
    case = run.failures[0]
    excerpt = _shown_files(case.excerpt or case.message, shown)
    quoted = "  " + excerpt.replace("\n", "\n  ")
    first = "" if len(run.failures) == 1 else "; the first failure is shown"
    return f"Your test {own.failing[0]} fails on your own head ({tally.words()}{first}):\n{quoted}{advice}"


def _shown_files(text: str, shown: dict[str, str]) -> str:
    """An excerpt's frames with each suite file named as the student knows it."""
    for name, known in shown.items():
        if known != name:
            text = re.sub(rf"(?m)^{re.escape(name)}, line ", f"{known}, line ", text)
    return text


def _mutants_words(own: OwnTests) -> str:
    if not own.mutants:
        return ""
    said = (
        f"\nMutation testing: your tests catch {own.caught} of {own.mutants} mutations of your head (one small change "
        "of your code at a time, as mutmut makes them; a mutation is caught when some test fails on it)."
    )
    if own.survived:
        said += " No test failed on these (add a test that would):"
        for m in own.survived[:SHOWN_SURVIVORS]:
            said += f"\n- {m.file}:{m.line}: {m.before}  ->  {m.after}"
        if len(own.survived) > SHOWN_SURVIVORS:
            said += f"\n- ... and {len(own.survived) - SHOWN_SURVIVORS} more."
    return said


def uncovered(check: CheckResult, others: list[CheckResult]) -> CheckResult:
    """The kit's student_tests with a test failing on the student's head, told what the other checks say: where
    every graded check passes, the test asserts a property no check covers (its own words, its docstring); where
    some fail, those tell which property the head breaks."""
    own = check.own_tests
    if own is None or not own.failing or check.status not in FAILING:
        return check
    graded = [c for c in others if c.id != check.id and c.pending is None and c.max_score > 0 and not c.extra_credit]
    if graded and all(c.status == "passed" for c in graded):
        asserts = f" ({own.asserts.rstrip('.')})" if own.asserts else ""
        said = (
            f"Every check of the grader passes on your head, so {own.failing[0]} asserts a property no check "
            f"covers{asserts}. Check it against the lecture result it cites: on submission your tests must pass on a "
            "correct head."
        )
    else:
        said = "The failing checks tell which property your head breaks; fix those first, then run the test again."
    head, sep, rest = check.message.partition("\n")
    return check.model_copy(update={"message": f"{head}\n{said}{sep}{rest}"})
