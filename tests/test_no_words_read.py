"""Findings are data (issue 51): no module recognises another's finding, cause or check by reading its words.

The grader's sentences (a check's message and notes, a cause's title, hint and detail, a departure's description,
a finding's words) are made for people, from fields. A consumer that needs a fact reads the field
(``CheckResult.stopped``, ``.unobserved``, ``.mismatch``, ``.found_at``; a finding's kind and numbers), never the
sentence: a test on the words breaks silently the day they are reworded. This test walks the grader's source and
fails on a regular expression, a substring test or a prefix test over one of those texts. Rendering them (printing a
message line by line) is what views do and is not a test of their words.
"""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[1] / "grader"
TEXTS = frozenset({"message", "title", "hint", "detail", "description", "words", "notes", "cites", "scoring_note"})
TESTS = frozenset({"startswith", "endswith", "removeprefix", "removesuffix", "find", "rfind", "index", "count"})
REGEX = frozenset({"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})

# Reading words that are no sentence of the grader's own, each with why it may stay.
ALLOWED = {
    # a view's layout: which lines of a check's own message state a comparison, to set them apart on the page
    ("report/wording.py", "comparison_lines"),
    ("report/wording.py", "explanation_lines"),
    # the boundary where a foreign text becomes data: the student's exception, or the allocator's, as the worker
    # reported it
    ("head.py", "stub"),
    ("head.py", "overflow"),
    ("head.py", "_send"),
    ("head.py", "_out_of_memory"),
    # pytest's report of the student's own test (its failure text), not a sentence of the grader's
    ("checks/_student_tests.py", "_wheat_verdict"),
}


def _texts(node: ast.AST) -> bool:
    """Whether ``node`` reads one of the grader's sentences (``c.message``, ``d.title``, ...)."""
    return any(isinstance(n, ast.Attribute) and n.attr in TEXTS for n in ast.walk(node))


def _reads_words(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
        return any(_texts(x) for x in node.comparators)
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    name, owner = node.func.attr, node.func.value
    if name in TESTS or (name in ("split", "partition") and node.args and not _newline(node.args[0])):
        return _texts(owner)
    if isinstance(owner, ast.Name) and owner.id == "re" and name in REGEX:
        return any(_texts(a) for a in node.args)
    if name in REGEX and not (isinstance(owner, ast.Name) and owner.id == "re"):  # a compiled pattern's method
        return bool(node.args) and _texts(node.args[0]) and not isinstance(owner, ast.Constant)
    return False


def _newline(arg: ast.expr) -> bool:
    return isinstance(arg, ast.Constant) and arg.value == "\n"


def _offences() -> list[str]:
    found = set()
    for path in sorted(GRADER.rglob("*.py")):
        rel = path.relative_to(GRADER).as_posix()
        if rel.startswith("report/compiled/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner: dict[int, str] = {}  # node -> its innermost function (walked outermost first)
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                owner.update({id(n): fn.name for n in ast.walk(fn)})
        for node in ast.walk(tree):
            name = owner.get(id(node), "<module>")
            if _reads_words(node) and (rel, name) not in ALLOWED:
                found.add(f"grader/{rel}:{getattr(node, 'lineno', 0)} in {name}: {ast.unparse(node)[:120]}")
    return sorted(found)


def test_no_module_reads_another_modules_words() -> None:
    assert _offences() == []


def test_the_walk_finds_what_it_forbids() -> None:
    """The test itself: each way of reading words is caught."""
    for code in (
        'c.message.startswith("Your code")',
        '"out has shape" in c.title',
        "PATTERN.search(d.description)",
        're.findall(r"W_[QKV]", c.title)',
        'c.message.split("Reproduce:")[0]',
        'c.notes[0].removeprefix("During")',
    ):
        tree = ast.parse(code)
        assert any(_reads_words(n) for n in ast.walk(tree)), code
    for code in ('c.message.split("\\n")', "text.splitlines()", "print(c.title)", "x in c.explains"):
        assert not any(_reads_words(n) for n in ast.walk(ast.parse(code))), code
