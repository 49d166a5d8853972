"""Definitions only: a notebook (or a module) reduced to what the contract names need, with ``ast``.

A notebook is graded on its definitions, not run top to bottom: starting from the contract names, the
top-level statements that bind them are kept, then those that bind any name these reference, and so
on (helpers from any cell, constants, aliases such as ``import torch as th``). Every binding statement
of a needed name is kept, in notebook order, so a later redefinition wins as it does in the notebook.
Everything else is dropped: plots, demos, training loops, mounts, installs, ``if __name__ ==
"__main__":`` blocks, cells that raise or do not parse.

A kept top-level import of a package the grader cannot import (``importlib.util.find_spec``, which
runs no student code) sinks only the definitions that need it; :attr:`Reduction.unavailable` says, for
each contract name that was dropped that way, which package it needed.

Nothing here executes student code; names are resolved with :mod:`symtable` (exact Python scoping:
a function's local variables never pull in a top-level statement of the same name).
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import json
import re
import symtable
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

from grader._syntax import parse

# Cell magics whose body is not Python run in the kernel: the whole cell is dropped.
_FOREIGN_CELLS = {
    "bash", "sh", "script", "html", "HTML", "javascript", "js", "latex", "markdown", "svg", "perl", "ruby",
    "writefile", "file", "python2", "pypy", "sx", "system",
}  # fmt: skip
_SHELL_OR_MAGIC = re.compile(r"^\s*[%!]")
_ASSIGNED_MAGIC = re.compile(r"^\s*[\w.,\s()]+=\s*[%!]")  # files = !ls ; t = %timeit -o f()
_HELP = re.compile(r"^\s*(\?\??[\w.]+|[\w.]+\?\??)\s*$")  # torch.softmax?  ??causal_self_attention

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

# What to use instead, per package a head is tempted to use.
_ADVICE = {
    "einops": "use torch operations (`.transpose`, `.reshape`, `.permute`)",
    "numpy": "use torch operations (`torch.tensor`, `@`, `torch.softmax`)",
    "scipy": "use torch operations (`torch.softmax`, `torch.special`)",
}


# Metadata key of a notebook written from a kernel's history (``check()``, grader/notebook.py): its cells are
# what the kernel ran, in that order, each numbered by its execution count (In [n]).
KERNEL_HISTORY = "step4_kernel_history"


@dataclass
class Cell:
    """One code cell, numbered as the student's editor labels it (README, "Notebooks"): by its execution count,
    In [n], which Jupyter, JupyterLab, VS Code and Colab show beside a cell that ran; a notebook whose code cells
    do not all carry distinct counts (some never ran, or its outputs were cleared) numbers every cell by its
    place instead, counting from 1, markdown included (VS Code's "Cell 4 of 8")."""

    number: int  # the execution count (``counted``), else the place among all the notebook's cells
    code: str  # magics and shell lines blanked out (line numbers kept)
    counted: bool = False  # numbered by its execution count, In [n]
    history: bool = False  # a cell of a kernel's history (KERNEL_HISTORY): cells in the order they ran

    @property
    def label(self) -> str:
        """How the student finds the cell: 'In [7]' or 'cell 4'."""
        return cell_label(self.number, self.counted)


def cell_label(number: int, counted: bool) -> str:
    return f"In [{number}]" if counted else f"cell {number}"


@dataclass
class Reduction:
    source: str
    unavailable: dict[str, str] = field(default_factory=dict)  # contract name -> package it needs
    dropped_cells: list[int] = field(default_factory=list)  # code cells of which nothing was kept
    broken_cells: list[int] = field(default_factory=list)  # code cells that do not parse
    notes: list[str] = field(default_factory=list)
    # the module's line -> (cell number, line in that cell) of the text it was copied from (issue 28: a cause's
    # line is shown where the student wrote it)
    lines: dict[int, tuple[int, int]] = field(default_factory=dict)
    counted: bool = False  # cells numbered by their execution counts, In [n] (see Cell)


@dataclass
class _Stmt:
    cell: int
    node: ast.stmt
    text: str
    binds: frozenset[str]
    refs: frozenset[str]
    missing: str | None  # a plain top-level import of a package that is not installed
    annotating: frozenset[str] = frozenset()  # the refs read only in annotations (jaxtyping's Float, issue 35)


class NotANotebook(ValueError):
    pass


def advice(package: str, provided: Sequence[str] = ()) -> str:
    """What to use instead of ``package``, and what the grader provides (``provided``: the course's packages,
    the rubric's ``packages``)."""
    instead = _ADVICE.get(package.split(".")[0], "use torch and the Python standard library instead")
    course = f", and the course's packages {', '.join(provided)}" if provided else ""
    return (
        f"{instead} (the grader provides torch, numpy and the Python standard library{course}; an instructor "
        "allows another package by listing it in the rubric's `packages`)"
    )


def missing_imports(text: str, local_modules: Iterable[str] = ()) -> list[str]:
    """The packages a module's plain top-level imports need and the grader lacks (nothing runs: the module is
    parsed, and each package looked up); [] when it does not parse (its SyntaxError is a verdict of its own)."""
    try:
        tree = parse(text)
    except SyntaxError:
        return []
    local = frozenset(local_modules)
    return [p for node in tree.body if (p := _missing_package(node, local)) is not None]


# ---- cells -----------------------------------------------------------------------------------------


def notebook_cells(text: str) -> tuple[list[Cell], int]:
    """The code cells of a notebook, cleaned of IPython syntax, and the number of cells in all.

    Each cell is numbered as the notebook shows it (:class:`Cell`): by its execution count (In [7]) when every
    code cell that holds code has a distinct one, as in a kernel's history (``KERNEL_HISTORY``) and a notebook
    run and saved; else every cell by its place."""
    try:
        nb = json.loads(text)
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
        history = bool(nb.get("metadata", {}).get(KERNEL_HISTORY))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise NotANotebook(f"not a Jupyter notebook ({exc})") from None
    code = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        count = cell.get("execution_count")
        text = "".join(src) if isinstance(src, list) else str(src)
        code.append((number, count if isinstance(count, int) and not isinstance(count, bool) else None, text))
    counts = [count for _, count, text in code if text.strip()]
    counted = bool(counts) and None not in counts and len(set(counts)) == len(counts)
    out = [
        Cell(count if counted and count is not None else number, clean_cell(text), counted, history)
        for number, count, text in code
        if not counted or text.strip()  # an empty cell, numbered by nothing, holds nothing to name
    ]
    return out, len(cells)


def clean_cell(src: str) -> str:
    """Cell text with IPython-only lines blanked: ``%magic``, ``!shell``, ``x = !cmd``, ``name?``.

    A cell magic (``%%time``) loses only its first line, since its body is ordinary Python; a cell
    magic whose body is not Python (``%%bash``, ``%%writefile``) loses the whole cell.
    """
    lines = src.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split(maxsplit=1)
        if not magic or magic[0] in _FOREIGN_CELLS:
            return ""
        lines[0] = ""
    kept = ["" if _SHELL_OR_MAGIC.match(ln) or _ASSIGNED_MAGIC.match(ln) or _HELP.match(ln) else ln for ln in lines]
    return "\n".join(kept) + "\n"


# ---- statements ------------------------------------------------------------------------------------


def _is_main_block(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.ops) != 1:
        return False
    sides = [node.test.left, *node.test.comparators]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    consts = {s.value for s in sides if isinstance(s, ast.Constant)}
    return isinstance(node.test.ops[0], ast.Eq) and names == {"__name__"} and consts == {"__main__"}


def _names(node: ast.stmt) -> tuple[set[str], set[str]]:
    """Names a top-level statement binds (assigns, imports, defines, mutates) and module-level names it
    reads, directly or from inside its functions, classes and comprehensions."""
    table = symtable.symtable(ast.unparse(node), "<cell>", "exec")
    binds = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    refs = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        refs |= {s.get_name() for s in child.get_symbols() if s.is_global()}
        stack += child.get_children()
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    for target in targets:  # config["scale"] = 2 and obj.attr = 1 change a needed name too
        for sub in ast.walk(target):
            if isinstance(sub, ast.Attribute | ast.Subscript):
                base = sub.value
                while isinstance(base, ast.Attribute | ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name):
                    binds.add(base.id)
    return binds, refs


def _annotating(node: ast.stmt) -> frozenset[str]:
    """The names ``node`` reads only in annotations (of arguments, returns and annotated assignments)."""
    notes: list[ast.expr] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.arg) and sub.annotation is not None:
            notes.append(sub.annotation)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and sub.returns is not None:
            notes.append(sub.returns)
        elif isinstance(sub, ast.AnnAssign):
            notes.append(sub.annotation)
    in_notes = {id(n) for note in notes for n in ast.walk(note)}
    noted = {n.id for note in notes for n in ast.walk(note) if isinstance(n, ast.Name)}
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in in_notes}
    return frozenset(noted - used)


@cache
def _installed(module: str) -> bool:
    """Whether ``module`` can be imported here, found on the path without importing anything (a name
    in a student's import never runs a package's ``__init__`` in the grader)."""
    parts = module.split(".")
    if parts[0] in sys.stdlib_module_names:
        return True
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level lookup imports nothing
        for k in range(2, len(parts) + 1):
            if spec is None or not spec.submodule_search_locations:
                break
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:k]), list(spec.submodule_search_locations))
        else:
            return spec is not None
        if spec is not None and parts[0] in sys.modules:  # e.g. torch.<module set up at import>: already loaded
            return importlib.util.find_spec(module) is not None
        return False
    except (ImportError, ValueError):
        return False


def _missing_package(node: ast.stmt, local: frozenset[str]) -> str | None:
    """The package a plain top-level import needs and the grader lacks; None when all are there."""
    if isinstance(node, ast.Import):
        modules = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        modules = [node.module]
    else:
        return None
    for module in modules:
        parts = module.split(".")
        if parts[0] in local:
            continue
        for k in range(1, len(parts) + 1):
            prefix = ".".join(parts[:k])
            if not _installed(prefix):
                return "google.colab" if module.startswith("google.colab") else prefix
    return None


def _segment(lines: list[str], node: ast.stmt, shared: set[int]) -> str:
    """The statement's own lines (comments kept); unparsed when it shares a line with another."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    end = node.end_lineno or node.lineno
    if start in shared or end in shared or node.col_offset != 0:
        return ast.unparse(node)
    return "\n".join(lines[start - 1 : end])


def _statements(cells: Sequence[Cell], local: frozenset[str]) -> tuple[list[_Stmt], list[str], list[int], list[str]]:
    """Top-level statements in order, the ``__future__`` imports, and the cells that do not parse."""
    stmts: list[_Stmt] = []
    future: list[str] = []
    broken: list[int] = []
    problems: list[str] = []
    for cell in cells:
        try:
            tree = parse(cell.code)
        except SyntaxError as exc:
            broken.append(cell.number)
            problems.append(f"line {exc.lineno}: {exc.msg}")
            continue
        lines = cell.code.splitlines()
        seen: dict[int, int] = {}
        for node in tree.body:
            for ln in {node.lineno, node.end_lineno or node.lineno}:
                seen[ln] = seen.get(ln, 0) + 1
        shared = {ln for ln, n in seen.items() if n > 1}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                future.append(ast.unparse(node))
                continue
            if _is_main_block(node):
                continue
            binds, refs = _names(node)
            text = _segment(lines, node, shared)
            stmts.append(
                _Stmt(
                    cell.number,
                    node,
                    text,
                    frozenset(binds),
                    frozenset(refs),
                    _missing_package(node, local),
                    _annotating(node),
                )
            )
    return stmts, future, broken, problems


# ---- the closure -----------------------------------------------------------------------------------


def _closure(stmts: list[_Stmt], contract: Iterable[str]) -> set[int]:
    binders: dict[str, list[int]] = {}
    for i, s in enumerate(stmts):
        for name in s.binds:
            binders.setdefault(name, []).append(i)
    kept: set[int] = set()
    todo = [n for n in contract if n in binders]
    seen = set(todo)
    while todo:
        for i in binders[todo.pop()]:
            if i in kept:
                continue
            kept.add(i)
            for ref in stmts[i].refs:
                if ref in binders and ref not in seen:
                    seen.add(ref)
                    todo.append(ref)
    return kept


def _poisoned(stmts: list[_Stmt], kept: set[int]) -> dict[int, str]:
    """Kept statements that cannot run for want of a package: the import itself, and whatever reads a
    name whose last kept binding is poisoned (the notebook's final value of that name), transitively."""
    last: dict[str, int] = {}
    for i in sorted(kept):
        for name in stmts[i].binds:
            last[name] = i
    poison = {i: p for i in kept if (p := stmts[i].missing) is not None}
    changed = True
    while changed:
        changed = False
        for i in sorted(kept):
            if i in poison:
                continue
            # a package the code calls names the loss before one read only in annotations (issue 35)
            for ref in sorted(stmts[i].refs, key=lambda r: (r in stmts[i].annotating, r)):
                j = last.get(ref)
                if j is not None and j != i and j in poison:
                    poison[i] = poison[j]
                    changed = True
                    break
    return poison


def reduce_cells(
    cells: Sequence[Cell],
    contract: Sequence[str],
    *,
    local_modules: Iterable[str] = (),
    origin: str = "notebook",
    total_cells: int | None = None,
    provided: Sequence[str] = (),
) -> Reduction:
    """The module made of what ``contract`` needs from ``cells``, and what was left out.

    ``local_modules``: module names the submission itself provides (its other files), never "missing".
    ``origin``: "notebook" (notes count cells) or a file name (notes count top-level statements).
    """
    stmts, future, broken, problems = _statements(cells, frozenset(local_modules))
    kept = _closure(stmts, contract)
    poison = _poisoned(stmts, kept)
    final = sorted(kept - poison.keys())
    defined = {n for i in final for n in stmts[i].binds}
    unavailable: dict[str, str] = {}
    for name in contract:
        if name not in defined:
            culprit = [poison[i] for i in sorted(poison) if name in stmts[i].binds]
            if culprit:
                unavailable[name] = culprit[-1]
    body: list[str] = []
    current: int | None = None
    for i in final:
        s = stmts[i]
        if origin == "notebook" and s.cell != current:
            body.append(f"\n# ---- cell {s.cell} ----")
            current = s.cell
        body.append(s.text + ("\n" if isinstance(s.node, _DEFS) else ""))
    header = f"# Made by the grader from {origin}: only the definitions the contract names need.\n"
    source = header + "".join(f"{f}\n" for f in future) + "\n".join(body).lstrip("\n") + "\n"
    red = Reduction(source, unavailable, broken_cells=broken, lines=_line_map(header, future, body, stmts, final))
    red.counted = bool(cells) and cells[0].counted
    used_cells = {stmts[i].cell for i in final}
    if origin == "notebook":
        red.dropped_cells = [c.number for c in cells if c.number not in used_cells]
        red.notes = _notebook_notes(cells, stmts, final, red, problems, total_cells)
    else:
        dropped = [s for i, s in enumerate(stmts) if i not in set(final) and not _inert(s.node)]
        if dropped:
            where = _ranges([s.node.lineno for s in dropped])
            one = len(dropped) == 1
            red.notes.append(
                f"Definitions only: {len(dropped)} top-level statement{'' if one else 's'} of {origin} "
                f"{'was' if one else 'were'} not run (line{'' if one else 's'} {where}); the grader needs only your "
                "definitions."
            )
    for name, package in unavailable.items():
        red.notes.append(f"`{name}` uses {package}, which the grader does not install; {advice(package, provided)}.")
    return red


def _line_map(
    header: str, future: list[str], body: list[str], stmts: list[_Stmt], final: list[int]
) -> dict[int, tuple[int, int]]:
    """The reduced module's line -> (cell, line in the cell) for each statement copied verbatim."""
    joined = "\n".join(body)
    lead = len(joined) - len(joined.lstrip("\n"))
    first = 1 + header.count("\n") + len(future)  # the module line where the body starts
    out: dict[int, tuple[int, int]] = {}
    offset = 0
    texts = iter(final)
    for piece in body:
        if not piece.startswith("\n# ---- cell "):
            s = stmts[next(texts)]
            start = min([s.node.lineno, *(d.lineno for d in getattr(s.node, "decorator_list", []))])
            at = first + joined.count("\n", 0, offset) - lead
            n = (s.node.end_lineno or s.node.lineno) - start + 1
            if s.text.count("\n") + 1 >= n:  # copied line for line (not unparsed)
                for t in range(n):
                    out[at + t] = (s.cell, start + t)
        offset += len(piece) + 1
    return out


def _notebook_notes(
    cells: Sequence[Cell],
    stmts: list[_Stmt],
    final: list[int],
    red: Reduction,
    problems: list[str],
    total: int | None,
) -> list[str]:
    if cells and cells[0].history:
        return _history_notes(cells, stmts, final, red, problems)
    counted = bool(cells) and cells[0].counted
    notes = []
    not_run = [n for n in red.dropped_cells if n not in red.broken_cells]
    if not_run:
        count = f"{len(not_run)} of your {len(cells)} code cells were" if len(not_run) > 1 else "1 code cell was"
        where = _runs(not_run) if counted else f"{_cells(not_run)}{f' of {total}' if total else ''}, " + _PLACES
        notes.append(f"{count} not run: the grader needs only your definitions ({where}).")
    partial = _partly_kept(stmts, final, red)
    if partial:
        notes.append(
            f"From {_runs(partial) if counted else _cells(partial)} only what your definitions need was "
            "kept; the rest there (unused imports, prints, plots, experiments) was not run."
        )
    for number, problem in zip(red.broken_cells, problems, strict=True):
        label = cell_label(number, counted)
        notes.append(f"{label[0].upper()}{label[1:]} was left out: it is not valid Python ({problem}).")
    return notes


_PLACES = "counting every cell from 1, markdown included"  # how a notebook's cells are numbered without counts


def _cells(numbers: Sequence[int]) -> str:
    return f"cell{'s' if len(numbers) > 1 else ''} {_list(numbers)}"


def _history_notes(
    cells: Sequence[Cell], stmts: list[_Stmt], final: list[int], red: Reduction, problems: list[str]
) -> list[str]:
    """The notes on a kernel's history, cells named as the notebook shows them (In [7]): the same facts as
    a file's notes, and which runs were graded (a cell run twice is two runs; the later one wins)."""
    first, last = cells[0].number, cells[-1].number
    runs = f"In [{first}]" if first == last else f"In [{first}] to In [{last}]"
    notes = [f"Graded the cells this kernel ran, in the order it ran them ({runs}), on their definitions."]
    not_run = [n for n in red.dropped_cells if n not in red.broken_cells]
    if not_run:
        notes.append(f"Not run by the grader, which needs only your definitions: {_runs(not_run)}.")
    partial = _partly_kept(stmts, final, red)
    if partial:
        notes.append(
            f"From {_runs(partial)} only what your definitions need was kept; the rest there (unused imports, "
            "prints, plots, experiments) was not run."
        )
    for number, problem in zip(red.broken_cells, problems, strict=True):
        notes.append(f"In [{number}] was left out: it is not valid Python ({problem}).")
    return notes


def _partly_kept(stmts: list[_Stmt], final: list[int], red: Reduction) -> list[int]:
    keep = set(final)
    left = {s.cell for i, s in enumerate(stmts) if i not in keep and not _inert(s.node)}
    return sorted(left - set(red.dropped_cells))


def _inert(node: ast.stmt) -> bool:
    """A bare string (a docstring, a note between definitions): it runs nothing, so leaving it out is no
    statement 'not run'."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _runs(numbers: Sequence[int]) -> str:
    return _list([f"In [{n}]" for n in numbers])


def _list(numbers: Sequence[int | str]) -> str:
    items = [str(n) for n in numbers]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _ranges(numbers: Sequence[int]) -> str:
    return _list(sorted(set(numbers)))
