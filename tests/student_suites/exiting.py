"""A test that ends the process before pytest can report."""

import os

import attention_head  # noqa: F401


def test_exit():
    os._exit(0)
