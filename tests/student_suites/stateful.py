"""Keeps state between runs in a file: passes the first run and fails every later one."""

import os

import attention_head  # noqa: F401

MARKER = "/tmp/step4-stateful-TOKEN"


def test_first_run_only():
    first = not os.path.exists(MARKER)
    with open(MARKER, "w"):
        pass
    assert first
