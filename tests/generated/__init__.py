"""Generated heads: correct heads with mistakes written in, each with its ground truth (the cause and the line to edit).

Issue 52's bench (``programs/``, ``kinds/``, ``heads.py``, ``probe.py``): 57 correct programs and 63 mistake kinds,
each in three spellings or more at two sites or more, the truth proven mechanically. Issue 35's (``styles.py``,
``mutations.py``, ``judge.py``): 8 styles and 19 single-token mutations, kept for its regression heads and its
figures. ``benchmarks/diagnosis_bench.py`` grades either; ``tests/test_generated_*.py`` test them."""

from .judge import Scored, match, score, summary
from .mutations import FAMILIES, MUTATIONS, Generated, Mutation, Truth, applicable, families, mutate, sample
from .styles import HELD_OUT, STYLES, TUNE, Style

__all__ = [
    "FAMILIES",
    "HELD_OUT",
    "MUTATIONS",
    "STYLES",
    "TUNE",
    "Generated",
    "Mutation",
    "Scored",
    "Style",
    "Truth",
    "applicable",
    "families",
    "match",
    "mutate",
    "sample",
    "score",
    "summary",
]
