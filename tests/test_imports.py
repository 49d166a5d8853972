"""The import graph of the grader package, read statically (ast): layers that must not loop.

Every ``import grader...`` counts, at module level or inside a function (a deferred import still ties the
two modules together), except those under ``if TYPE_CHECKING:``, which never run. Importing
``grader.a.b`` imports the packages ``grader`` and ``grader.a`` too, so those are edges as well.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

import grader

ROOT = Path(grader.__file__).parent
VIEWS = ("grader.report", "grader.exports")  # pure functions of a GradeResult
GRADESCOPE_VIEWS = ("_status", "_heatmap_table", "_test", "results_json", "error_results")  # its rendering


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST) -> Iterable[ast.AST]:
    """Every node under ``node``, leaving out ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking_only(child):
            yield from (n for stmt in child.orelse for n in (stmt, *_walk(stmt)))
            continue
        yield child
        yield from _walk(child)


def _targets(node: ast.AST, importer: str) -> set[str]:
    """The grader modules one import statement loads (packages on the way included)."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        found = {a.name for a in node.names}
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: from the importer's package
            package = importer if modules()[importer].name == "__init__.py" else importer.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        found = {base} | {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules()}
    out = set()
    for name in found:
        parts = name.split(".")
        out |= {".".join(parts[:k]) for k in range(1, len(parts) + 1)}
    return {m for m in out if m in modules() and m != importer}


def imports_in(name: str, node: ast.AST | None = None) -> set[str]:
    """The grader modules that module ``name`` (or ``node`` within it) imports, at any depth of its code."""
    tree = node if node is not None else ast.parse(modules()[name].read_text(encoding="utf-8"))
    return {t for n in _walk(tree) for t in _targets(n, name)}


def _module_level(name: str) -> ast.Module:
    tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
    body = [s for s in tree.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    return ast.Module(body=body, type_ignores=[])


@cache
def graph() -> dict[str, frozenset[str]]:
    """Module -> the grader modules it imports. The facade ``grader/__init__.py`` counts at module level only:
    its lazy exports (``grader.grade``) load the API for a user, and every ``grader.x`` import runs it."""
    out = {name: frozenset(imports_in(name)) for name in modules()}
    out["grader"] = frozenset(imports_in("grader", _module_level("grader")))
    return out


def reachable(start: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += graph()[m]
    return seen


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def path_between(start: str, goal: str) -> list[str]:
    """One chain of imports from ``start`` to a module of ``goal`` (for the failure message)."""
    parents: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        m = todo.pop(0)
        if in_package(m, goal) and m != start:
            chain = [m]
            while parents[chain[-1]] is not None:
                chain.append(parents[chain[-1]])  # type: ignore[arg-type]
            return chain[::-1]
        for n in sorted(graph()[m]):
            if n not in parents:
                parents[n] = m
                todo.append(n)
    return []


def test_the_graph_sees_both_kinds_of_import() -> None:
    assert "grader.checks._base" in graph()["grader.checks._student_tests"]  # module level
    assert "grader.batch" in graph()["grader.gradescope"]  # inside a function (the `grade gradescope` run)
    assert "grader.checks" in graph()["grader.checks._base"] or "grader" in graph()["grader.checks._base"]
    assert "grader.rubric" not in graph()["grader.submission"]  # only under TYPE_CHECKING
    assert graph()["grader"] == frozenset()  # the facade's lazy exports are not the grader's own imports


def test_checks_and_diagnosis_do_not_import_each_other() -> None:
    """A check may use what the diagnosis knows only through a lower layer (grader.library), and the
    diagnosis reads check results, never check code: either way round, not both."""
    checks = [m for m in modules() if in_package(m, "grader.checks")]
    diagnosis = [m for m in modules() if in_package(m, "grader.diagnosis")]
    to_diagnosis = next((m for m in checks if any(in_package(r, "grader.diagnosis") for r in reachable([m]))), None)
    to_checks = next((m for m in diagnosis if any(in_package(r, "grader.checks") for r in reachable([m]))), None)
    assert to_diagnosis is None or to_checks is None, (
        f"import cycle: {' -> '.join(path_between(to_diagnosis, 'grader.diagnosis'))} and "
        f"{' -> '.join(path_between(to_checks, 'grader.checks'))}"
    )
    assert to_diagnosis is None, " -> ".join(path_between(to_diagnosis, "grader.diagnosis"))


def names_used(name: str) -> set[str]:
    """Every name, attribute and imported name module ``name`` mentions."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(modules()[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.name.rpartition(".")[2])
    return out


def cycles(edges: Mapping[str, frozenset[str]] | None = None) -> list[set[str]]:
    """The strongly connected components of ``edges`` (the grader's graph by default) with more than one module
    (Tarjan's algorithm, iteratively)."""
    edges = graph() if edges is None else edges
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        m = stack.pop()
                        component.add(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        out.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return out


def test_no_import_cycle_leaves_a_package() -> None:
    """Modules import each other in a circle only inside one package, where its face (``__init__``) re-exports
    what its own modules define. The rubric is a schema below the checks and the diagnosis: matching its ids
    against both is the runner's, which loads both."""
    for component in cycles():
        packages = {m if modules()[m].name == "__init__.py" else m.rpartition(".")[0] for m in component}
        assert len(packages) == 1, sorted(component)


def test_the_cycle_finder_sees_a_circle() -> None:
    """The rubric validating ids itself (as it once did, late) would tie it, the checks and the head together."""
    circle = dict(graph()) | {"grader.rubric": graph()["grader.rubric"] | {"grader.checks"}}
    assert any({"grader.rubric", "grader.head", "grader.checks"} <= c for c in cycles(circle))


def test_views_never_import_the_batch_runner() -> None:
    """The report, the exports and Gradescope's results.json are pure functions of a result: the batch
    imports them, never the other way round."""
    views = [m for m in modules() if any(in_package(m, v) for v in VIEWS)]
    for m in views:
        assert "grader.batch" not in reachable([m]), " -> ".join(path_between(m, "grader.batch"))
    tree = ast.parse(modules()["grader.gradescope"].read_text(encoding="utf-8"))
    rendering = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name in GRADESCOPE_VIEWS]
    assert {s.name for s in rendering} == set(GRADESCOPE_VIEWS)
    start = imports_in("grader.gradescope", _module_level("grader.gradescope"))
    start |= {t for f in rendering for t in imports_in("grader.gradescope", f)}
    assert "grader.batch" not in reachable(start), sorted(start)
