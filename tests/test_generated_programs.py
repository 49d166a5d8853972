"""The correct programs of the generated bench (issue 52): each is the lecture's head, and they are many and different.

Nothing here grades: the programs run in this process on the probe's cases (``tests/generated/probe.py``);
``tests/test_generated_graded.py`` grades a sample of them.
"""

from __future__ import annotations

import ast

import pytest
from generated import STYLES
from generated.probe import lecture_mismatches
from generated.programs import PROGRAMS


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_program_is_the_lecture_head(name: str) -> None:
    """float64 outputs, weights and gradients as the lecture's head, causal and not, at two sets of widths; the input's
    dtype kept in float32, float16 and bfloat16; nothing printed or written, no input changed, nothing raised."""
    assert lecture_mismatches(PROGRAMS[name].source) == []


def test_the_programs_are_many_and_each_its_own() -> None:
    assert len(PROGRAMS) >= 50
    shapes = {ast.dump(ast.parse(p.source)) for p in PROGRAMS.values()}
    assert len(shapes) == len(PROGRAMS)  # no two the same code (comments and docstrings aside they differ too)
    styles = {ast.dump(ast.parse(s.source)) for s in STYLES.values()}
    assert not shapes & styles  # none is a copy of the issue-35 bench's styles
    structures = {p.structure for p in PROGRAMS.values()}
    assert {"module", "functional", "einsum", "loop", "tiled", "multihead", "packed", "config", "class"} <= structures
    assert {p.library for p in PROGRAMS.values()} == {"torch", "numpy"}


def test_a_wrong_program_is_caught() -> None:
    """The check the programs pass can fail: a head without the scale leaves the lecture's in every float64 case."""
    broken = PROGRAMS["inline_steps"].source.replace("    scores = scores / math.sqrt(d_k)\n", "")
    problems = lecture_mismatches(broken)
    assert "float64: out" in problems and "float64 gradients: gradients" in problems
