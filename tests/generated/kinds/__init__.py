"""Mistake kinds (issue 52): each a mistake people make, written in several spellings at several sites, with its truth.

A kind is one definition: its id, what it is, and its truth, the catalog id(s) a right diagnosis names (any one of
them), or, where the catalog has no id for it, the fields a departure finding must carry (the stage it leaves and what
the student's value is). Its ``edits`` write it into the correct programs (``programs/``): each edit is a spelling of
the mistake, a few literal changes of a program's text, and applies to every program in which each changed text
occurs exactly once (or to the programs it names). The lines an edit changes are the lines to edit; an edit may name
``fixes``, other changes of the mutated head that make it right, whose lines are lines to edit as well (a scale
applied twice is undone at either place).

Where an edit lands is measured, not declared (``sites``): ``inline`` (the function or ``forward`` that computes the
head), ``helper`` (a function or method it calls, or the call handing it a wrong argument), ``config`` (a
constructor, a config object, a module-level constant, the arguments that build or configure a module), and ``cell``
(any of these in a notebook). How the truth is proven: ``heads.prove``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

Change = tuple[str, str] | Callable[[str], str | None]


@dataclass(frozen=True)
class Edit:
    spelling: str  # how the mistake is written; a kind has at least three
    changes: tuple[Change, ...]  # applied in order; a literal (old, new) applies where old occurs exactly once
    programs: tuple[str, ...] = ()  # only these programs (empty: every program each change applies to)
    fixes: tuple[tuple[str, str], ...] = ()  # other changes of the mutated head that make it right
    causes: tuple[str, ...] = ()  # the ids that name this spelling, where they are not the kind's


def E(
    spelling: str,
    *changes: Change,
    only: tuple[str, ...] | str = (),
    fix: tuple[tuple[str, str], ...] = (),
    causes: tuple[str, ...] = (),
) -> Edit:
    """An edit: ``E("spelling", (old, new), ..., only="program", fix=((old, new),))``."""
    return Edit(spelling, changes, (only,) if isinstance(only, str) else only, fix, causes)


@dataclass(frozen=True)
class Kind:
    id: str
    family: str  # the kind of mistake, for the loose judge (a cause of this family finds it)
    what: str  # the mistake, in a few words
    causes: tuple[str, ...]  # the catalog ids that name it (empty: no id; ``finding`` says what names it)
    edits: tuple[Edit, ...]
    finding: tuple[tuple[str, str], ...] = ()  # the fields a departure finding must carry, where no id names it

    @property
    def spellings(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.spelling for e in self.edits))


def apply_change(change: Change, source: str) -> str | None:
    """``source`` with the change made, or None where it does not apply (its text absent or not unique)."""
    if callable(change):
        return change(source)
    old, new = change
    return source.replace(old, new) if source.count(old) == 1 else None


def apply_edit(edit: Edit, source: str) -> str | None:
    for change in edit.changes:
        made = apply_change(change, source)
        if made is None:
            return None
        source = made
    return source


def unwrap(test: str) -> Callable[[str], str | None]:
    """A change that takes the body of the one ``if <test>:`` block out of it (the branch taken whatever the flag)."""

    def change(source: str) -> str | None:
        lines = source.splitlines(keepends=True)
        found = [k for k, ln in enumerate(lines) if ln.strip() == f"if {test}:"]
        if len(found) != 1:
            return None
        k = found[0]
        indent = len(lines[k]) - len(lines[k].lstrip())
        body_end = k + 1
        while body_end < len(lines) and (
            not lines[body_end].strip() or len(lines[body_end]) - len(lines[body_end].lstrip()) > indent
        ):
            body_end += 1
        if any(ln.strip().startswith(("else", "elif")) for ln in lines[body_end : body_end + 1]):
            return None
        body = [ln[4:] if ln.strip() else ln for ln in lines[k + 1 : body_end]]
        return "".join(lines[:k] + body + lines[body_end:])

    change.__name__ = f"unwrap({test})"
    return change


# -- where a line is ----------------------------------------------------------------------------------

MAIN = {"causal_self_attention", "forward", "__call__"}


def site(source: str, line: int) -> str:
    """``inline``, ``helper`` or ``config``: where line ``line`` of ``source`` is (see the module's docstring)."""
    tree = ast.parse(source)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    chain: list[ast.AST] = []
    node: ast.AST = tree
    while True:
        inner = [
            c
            for c in ast.iter_child_nodes(node)
            if isinstance(c, ast.stmt) and c.lineno <= line <= (c.end_lineno or c.lineno)
        ]
        if not inner:
            break
        node = inner[0]
        chain.append(node)
    defs = [n for n in chain if isinstance(n, ast.FunctionDef)]
    if not defs or defs[-1].name == "__init__":
        return "config"  # module level, a class body (a dataclass's fields), a constructor
    if defs[-1].name not in MAIN:
        return "helper"
    statement = chain[-1]
    calls = [c for c in ast.walk(statement) if isinstance(c, ast.Call)]
    names = {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "") for c in calls}
    if names & classes or any(isinstance(n, ast.Dict) for n in ast.walk(statement)):
        return "config"  # builds a module, a config, or binds its weights and options
    if names & functions - MAIN:
        return "helper"  # hands a helper of the program its arguments
    return "inline"


from ._contract import CONTRACT  # noqa: E402
from ._mask import MASK  # noqa: E402
from ._scale import SCALE  # noqa: E402
from ._softmax import SOFTMAX  # noqa: E402
from ._values import VALUES  # noqa: E402
from ._variants import VARIANTS  # noqa: E402

KINDS: dict[str, Kind] = {k.id: k for k in (*SCALE, *MASK, *SOFTMAX, *VALUES, *CONTRACT, *VARIANTS)}

__all__ = ["KINDS", "Edit", "Kind", "apply_change", "apply_edit", "site", "unwrap"]
