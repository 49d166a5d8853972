"""Prints 50 MB, on stdout and stderr, hoping to stall or overflow the grader."""

import sys

LINE = "x" * 999


def flood(X):
    for i in range(50_000):
        print(LINE, file=sys.stdout if i % 2 else sys.stderr)
    return X
