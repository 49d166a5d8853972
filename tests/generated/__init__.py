"""Generated heads (issue 35): correct heads in several styles of real code, and source-level mutations of them,
each with its ground truth (the cause and the line to edit). ``benchmarks/diagnosis_bench.py`` grades them;
``tests/test_generated_heads.py`` grades a seeded sample."""

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
