"""Generated heads (issue 52): correct programs with mistakes of the kinds written in, each with its proven truth.

A head is a program (``programs/``) with 0 to 3 edits of distinct kinds (``kinds/``) applied in turn, as a module or
as a notebook (its top-level statements in cells, a demo cell after them, as a notebook is handed in). Each mistake
carries its truth: the kind's catalog ids (or the departure's fields), and the lines to edit, the lines its edit
changed (carried through the edits after it) plus those of its fixes; in a notebook, as (cell, line in the cell), the
way the grader reports a line there.

:func:`prove` checks the truth mechanically on what the grader will grade (for a notebook, the module the grader's
own reduction makes of it): the head differs from its program in float64 (``probe.observe``); and each mistake,
reverted, restores the rest: the head made without it differs from the head only at the mistake's lines, and behaves
differently (the mistake is live: no other mistake hides it; a crash on every call counts as hiding only what it
hides). A head whose proof fails is never sampled.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import hashlib
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .kinds import KINDS, Edit, apply_change, apply_edit, site
from .probe import differences, observe
from .programs import PROGRAMS


@dataclass(frozen=True)
class Mistake:
    """One mistake of a head and its truth."""

    kind: str
    family: str
    causes: tuple[str, ...]  # a right diagnosis names one of these ids ...
    finding: tuple[tuple[str, str], ...]  # ... or, where there is none, a departure carrying these fields
    spelling: str
    site: str  # inline | helper | config (where the lines are in the module); the head says if it is a notebook
    lines: tuple[int, ...]  # the module's lines to edit
    where: tuple[tuple[int | None, int], ...]  # the same as the grader reports them: (cell or None, line)


@dataclass(frozen=True)
class Head:
    id: str
    program: str
    module: str  # the head as a module
    notebook: bool  # handed in as a notebook (``source`` is its JSON)
    source: str  # the file handed in
    mistakes: tuple[Mistake, ...]  # empty: a correct head
    picks: tuple[tuple[str, int], ...]  # (kind, edit index) in the order applied

    @property
    def filename(self) -> str:
        return "attention_head.ipynb" if self.notebook else "attention_head.py"


# -- where each edit applies ------------------------------------------------------------------------------


@functools.cache
def instances(kind: str) -> tuple[tuple[int, str], ...]:
    """(edit index, program) for every program each edit of ``kind`` applies to."""
    out = []
    for k, edit in enumerate(KINDS[kind].edits):
        for name in edit.programs or tuple(PROGRAMS):
            if apply_edit(edit, PROGRAMS[name].source) is not None:
                out.append((k, name))
    return tuple(out)


def _changed(before: str, after: str) -> tuple[set[int], Callable[[int], set[int]]]:
    """The 1-based lines of ``after`` an edit made (a deletion: the line before it), and where each line of
    ``before`` went."""
    a, b = before.splitlines(), after.splitlines()
    changed: set[int] = set()
    moves: dict[int, set[int]] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                moves[i1 + k + 1] = {j1 + k + 1}
            continue
        new = set(range(j1 + 1, j2 + 1)) or {max(j1, 1)}
        changed |= new
        for i in range(i1, i2):
            moves[i + 1] = new
    return changed, lambda line: moves.get(line, {line})


def _placed(lines: set[int], module: str) -> set[int]:
    """The lines that hold code (a blank line an edit added is no place to point at), unless none does."""
    text = module.splitlines()
    return {line for line in lines if line <= len(text) and text[line - 1].strip()} or lines


def _fixed_lines(edit: Edit, module: str) -> set[int] | None:
    """The lines of ``module`` an edit's fixes change (they are lines to edit as well); None where a fix no longer
    applies (another mistake of the head rewrote its text)."""
    lines: set[int] = set()
    for fix in edit.fixes:
        made = apply_change(fix, module)
        if made is None:
            return None
        lines |= _changed(module, made)[0]
    return lines


# -- notebooks ---------------------------------------------------------------------------------------------

DEMO = (
    "X = torch.randn(2, 5, 4)\n"
    "W_Q, W_K, W_V = torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 2)\n"
    "out, weights = causal_self_attention(X, W_Q, W_K, W_V)\n"
    "print(out.shape, weights.shape)"
)


def to_notebook(module: str) -> tuple[str, dict[int, tuple[int, int]]]:
    """The module as a notebook run top to bottom (the imports in one cell, each other top-level statement in its
    own, a demo cell last; execution counts 1, 2, ...), and each module line's (cell, line in the cell)."""
    tree = ast.parse(module)
    lines = module.splitlines()
    spans: list[list[int]] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]:
            continue  # the module's docstring: the notebook's markdown says it
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        end = node.end_lineno or node.lineno
        is_import = isinstance(node, (ast.Import, ast.ImportFrom))
        if spans and is_import and spans[-1][2]:
            spans[-1][1] = end
        else:
            spans.append([start, end, is_import])
    cells: list[dict[str, Any]] = [{"cell_type": "markdown", "metadata": {}, "source": ["# Project Step 4: one head"]}]
    where: dict[int, tuple[int, int]] = {}
    for count, (start, end, _) in enumerate(spans, start=1):
        text = "\n".join(lines[start - 1 : end])
        cells.append(_code_cell(text, count))
        for line in range(start, end + 1):
            where[line] = (count, line - start + 1)
    cells.append(_code_cell(DEMO, len(spans) + 1))
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}}}
    nb |= {"nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1) + "\n", where


def _code_cell(text: str, count: int) -> dict[str, Any]:
    source = [ln + "\n" for ln in text.split("\n")]
    source[-1] = source[-1].rstrip("\n")
    return {"cell_type": "code", "execution_count": count, "metadata": {}, "outputs": [], "source": source}


def graded_module(head: Head) -> str:
    """What the grader runs of the head: the module, or the module the grader's reduction makes of the notebook."""
    if not head.notebook:
        return head.module
    from grader._notebook import notebook_cells, reduce_cells

    cells, total = notebook_cells(head.source)
    return reduce_cells(cells, ["causal_self_attention"], total_cells=total).source


# -- making and proving -------------------------------------------------------------------------------------


def make(program: str, picks: Iterable[tuple[str, int]], *, notebook: bool = False, head_id: str = "") -> Head | None:
    """The program with these edits applied in order; None where one does not apply after the others."""
    picks = tuple(picks)
    module = PROGRAMS[program].source
    made: list[tuple[str, int, set[int]]] = []
    for kind, k in picks:
        new = apply_edit(KINDS[kind].edits[k], module)
        if new is None or new == module:
            return None
        changed, move = _changed(module, new)
        made = [(kd, e, set().union(*(move(line) for line in lines))) for kd, e, lines in made]
        made.append((kind, k, changed))
        module = new
    try:
        compile(module, program, "exec")
    except SyntaxError:
        return None
    where: dict[int, tuple[int, int]] = {}
    source = module
    if notebook:
        source, where = to_notebook(module)
    mistakes = []
    for kind, k, lines in made:
        edit = KINDS[kind].edits[k]
        fixed = _fixed_lines(edit, module)
        if fixed is None:
            return None
        lines = _placed(lines | fixed, module)
        if notebook and not all(line in where for line in lines):
            return None  # a line outside every cell (a docstring's): not a notebook of this head
        spot = tuple((*where[line],) if notebook else (None, line) for line in sorted(lines))
        mistakes.append(
            Mistake(
                kind=kind,
                family=KINDS[kind].family,
                causes=edit.causes or KINDS[kind].causes,
                finding=KINDS[kind].finding,
                spelling=edit.spelling,
                site=site(module, min(lines)),
                lines=tuple(sorted(lines)),
                where=spot,
            )
        )
    head_id = head_id or "-".join([program, *(f"{kd}.{e}" for kd, e in picks)]) + (".ipynb" if notebook else "")
    return Head(head_id, program, module, notebook, source, tuple(mistakes), picks)


_SEEN: dict[str, dict[str, Any]] = {}


def seen(module: str) -> dict[str, Any]:
    """``observe(module)``, remembered (generating a sample observes the same programs many times)."""
    key = hashlib.sha256(module.encode()).hexdigest()
    if key not in _SEEN:
        if len(_SEEN) > 4096:
            _SEEN.clear()
        _SEEN[key] = observe(module)
    return _SEEN[key]


def prove(head: Head) -> list[str]:
    """What is wrong with the head's truth (empty: it is proven). See the module's docstring."""
    problems: list[str] = []
    graded = graded_module(head)
    full = seen(graded)
    program = PROGRAMS[head.program].source
    if not head.mistakes:
        return (
            [] if not differences(full, seen(program)) else ["a correct head's notebook does not behave as its module"]
        )
    if not differences(full, seen(program)):
        problems.append("the head behaves as its program")
    crashes = [k for k, m in enumerate(head.mistakes) if m.family == "crash"]
    for k, mistake in enumerate(head.mistakes):
        without = make(head.program, head.picks[:k] + head.picks[k + 1 :], notebook=head.notebook)
        if without is None:
            problems.append(f"{mistake.kind}: the head cannot be made without it")
            continue
        changed = _placed(_changed(without.module, head.module)[0], head.module)
        if not changed <= set(mistake.lines):
            problems.append(f"{mistake.kind}: reverting it changes lines {sorted(changed - set(mistake.lines))} too")
        if differences(seen(graded_module(without)), full):
            continue
        others = [j for j in crashes if j != k]
        if others:  # a crash hides what it hides: judge the mistake with the crashes reverted
            keep = [p for j, p in enumerate(head.picks) if j not in others]
            bare = make(head.program, keep, notebook=head.notebook)
            alone = make(head.program, [p for p in keep if p != head.picks[k]], notebook=head.notebook)
            if bare and alone and differences(seen(graded_module(bare)), seen(graded_module(alone))):
                continue
        problems.append(f"{mistake.kind}: reverting it changes nothing the probe sees (another mistake hides it)")
    return problems


# -- sampling ---------------------------------------------------------------------------------------------------


def correct_heads(n: int, seed: int, *, notebook_every: int = 5) -> list[Head]:
    """``n`` correct heads: the programs in a seeded order, again and again; every ``notebook_every``-th a notebook."""
    order = sorted(PROGRAMS)
    random.Random(seed).shuffle(order)
    out = []
    for i in range(n):
        name = order[i % len(order)]
        notebook = i % notebook_every == notebook_every - 1
        head = make(name, (), notebook=notebook, head_id=f"{i:05d}_{name}{'.ipynb' if notebook else ''}")
        assert head is not None
        out.append(head)
    return out


def sample(
    n: int, seed: int, kinds: Iterable[str], *, correct_every: int = 6, notebook_every: int = 5, tries: int = 400
) -> list[Head]:
    """``n`` heads, seeded. Every ``correct_every``-th is a correct program (in a seeded order; 0: none); each other
    carries 1 to 3 mistakes of distinct kinds among ``kinds``: the first kind drawn uniformly, then one of its
    spellings, then a program that spelling applies to, then the other kinds among those with an edit on that program;
    about one in ``notebook_every`` is handed in as a notebook. A head is kept only when :func:`prove` proves it."""
    rng = random.Random(seed)
    kinds = sorted(set(kinds))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}")
    correct = iter(correct_heads(n, seed + 1, notebook_every=notebook_every))
    heads: list[Head] = []
    for i in range(n):
        if correct_every and i % correct_every == 0:
            head = next(correct)
            heads.append(dataclasses.replace(head, id=f"{i:05d}_{head.program}{'.ipynb' if head.notebook else ''}"))
            continue
        for _ in range(tries):
            made = _draw(rng, kinds, f"{i:05d}", notebook=rng.randrange(notebook_every) == 0)
            if made is not None and not prove(made):
                heads.append(made)
                break
        else:  # pragma: no cover - every kind has single edits that prove
            raise RuntimeError(f"no provable head after {tries} tries (head {i})")
    return heads


def _draw(rng: random.Random, kinds: list[str], prefix: str, *, notebook: bool) -> Head | None:
    first = rng.choice(kinds)
    spelling = rng.choice(KINDS[first].spellings)
    k, program = rng.choice([(k, p) for k, p in instances(first) if KINDS[first].edits[k].spelling == spelling])
    picks = [(first, k)]
    for _ in range(rng.choice((0, 1, 2))):
        others = [kd for kd in kinds if kd not in {p[0] for p in picks} and any(p == program for _, p in instances(kd))]
        if not others:
            break
        other = rng.choice(others)
        picks.append((other, rng.choice([e for e, p in instances(other) if p == program])))
    rng.shuffle(picks)
    suffix = ".ipynb" if notebook else ""
    return make(program, picks, notebook=notebook, head_id=f"{prefix}_{program}{suffix}")
