"""Mutation testing of the student's own head, as mutmut does it: one small change at a time (an operator, a
comparison, a number, a truth value, a condition), and the student's tests run on each changed head. A change some
test fails on is caught; one no test notices is a property the tests leave unchecked. The student kit has no correct
head or known bugs to run a suite on; the student's own head and its mutants reveal nothing of the solution.

    head source -> sites (ast, in the functions in scope) -> at most MAX_MUTANTS, spread over the sites
                -> one module text per mutant (ast.unparse) -> the suite on each (grader.checks._student_tests)
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from grader._syntax import parse

MAX_MUTANTS = 8  # a grade runs the suite on at most this many (spread over the head): each costs one pytest run
SHOWN_CHARS = 90  # characters of code quoted for a mutation

_SWAPPED_OPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.Div,
    ast.Pow: ast.Mult,
}
_SWAPPED_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


@dataclass(frozen=True)
class Mutation:
    """One change of the head: where, the code as written and as changed, and the whole module changed."""

    line: int
    before: str
    after: str
    source: str


def mutations(source: str, functions: Sequence[str], limit: int = MAX_MUTANTS) -> list[Mutation]:
    """At most ``limit`` mutants of ``source``, each one change inside a top-level function or class whose name is
    in ``functions`` (or that is none of ``contract``'s other names: a helper), spread evenly over the sites in
    line order; [] when the source does not parse."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return []
    sites = [
        (("body", k, *path), change)
        for k, node in enumerate(tree.body)
        if _in_scope(node, functions)
        for path, change in _sites(node)
    ]
    if len(sites) > limit:
        sites = [sites[k * len(sites) // limit] for k in range(limit)]
    made = []
    for path, change in sites:
        mutant = copy.deepcopy(tree)
        original = ast.unparse(_shown(tree, path))
        change(_at(mutant, path))
        changed = ast.unparse(_shown(mutant, path))
        if original != changed:
            line = getattr(_at(tree, path), "lineno", 0)
            text = ast.unparse(ast.fix_missing_locations(mutant)) + "\n"
            made.append(Mutation(line, _cut(original), _cut(changed), text))
    return made


def _in_scope(node: ast.stmt, functions: Sequence[str]) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name in functions


Path = tuple[object, ...]  # field names and indices from the module down to a node


def _sites(root: ast.AST) -> Iterator[tuple[Path, Callable[[ast.AST], None]]]:
    """(path to the node, the change) of every mutation site under ``root``, in line order; docstrings, decorators,
    annotations and default values are left alone."""
    found: list[tuple[tuple[int, int], Path, Callable[[ast.AST], None]]] = []

    def walk(node: ast.AST, path: Path) -> None:
        for name, value in ast.iter_fields(node):
            if name in ("decorator_list", "returns", "annotation", "args", "type_comment") and not isinstance(
                node, ast.Call
            ):
                continue
            items = value if isinstance(value, list) else [value]
            for k, child in enumerate(items):
                if not isinstance(child, ast.AST) or _is_docstring(node, name, k):
                    continue
                where = (*path, name, k) if isinstance(value, list) else (*path, name)
                for change in _changes(child):
                    found.append(((getattr(child, "lineno", 0), getattr(child, "col_offset", 0)), where, change))
                walk(child, where)

    walk(root, ())
    found.sort(key=lambda f: f[0])
    for _, path, change in found:
        yield path, change


def _is_docstring(node: ast.AST, field: str, k: int) -> bool:
    body = getattr(node, "body", None)
    return (
        field == "body"
        and k == 0
        and isinstance(body, list)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )


def _changes(node: ast.AST) -> list[Callable[[ast.AST], None]]:
    """The mutations of one node (mutmut's: swap an operator or a comparison, a number n -> n + 1, True <-> False,
    and <-> or; and a condition negated)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _SWAPPED_OPS:
        swapped = _SWAPPED_OPS[type(node.op)]
        return [lambda n: setattr(n, "op", swapped())]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SWAPPED_COMPARE:
        other = _SWAPPED_COMPARE[type(node.ops[0])]
        return [lambda n: setattr(n, "ops", [other()])]
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return [lambda n: setattr(n, "value", n.value + 1)]  # type: ignore[attr-defined]
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        return [lambda n: setattr(n, "value", not n.value)]  # type: ignore[attr-defined]
    if isinstance(node, ast.BoolOp):
        flipped = ast.Or if isinstance(node.op, ast.And) else ast.And
        return [lambda n: setattr(n, "op", flipped())]
    if isinstance(node, ast.If | ast.While | ast.IfExp):
        return [lambda n: setattr(n, "test", ast.UnaryOp(ast.Not(), n.test))]  # type: ignore[attr-defined]
    return []


def _at(tree: ast.AST, path: Path) -> ast.AST:
    node: object = tree
    for step in path:
        node = node[step] if isinstance(step, int) else getattr(node, str(step))  # type: ignore[index]
    assert isinstance(node, ast.AST)
    return node


def _shown(tree: ast.AST, path: Path) -> ast.AST:
    """What a mutation is shown as: the changed expression, or its parent for a bare number (``1`` -> ``2`` means
    little; ``.triu(1)`` -> ``.triu(2)`` shows where), and a condition's test for a negated branch."""
    node = _at(tree, path)
    if isinstance(node, ast.If | ast.While | ast.IfExp):
        return node.test
    while isinstance(node, ast.Constant | ast.UnaryOp) and len(path) > 1:
        path = path[:-2] if isinstance(path[-1], int) else path[:-1]
        node = _at(tree, path)
    return node


def _cut(code: str) -> str:
    code = " ".join(code.split())
    return code if len(code) <= SHOWN_CHARS else code[: SHOWN_CHARS - 3] + "..."
