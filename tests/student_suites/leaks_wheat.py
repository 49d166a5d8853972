"""Fails on the correct head in a way that carries the head's source out (MODE picks the channel).

The grader must quote none of it: not in the message, the test's name, the exception's type, a
"missing" module's name, the run's output or a forged report.
"""

import inspect
import os

import attention_head
import pytest

SOURCE = inspect.getsource(attention_head)
WORDS = "".join(c if c.isalnum() else "_" for c in SOURCE)[:200]
MODE = "MODE"


class Forger:
    def __init__(self, path):
        self.path = path

    def pytest_unconfigure(self, config):
        with open(self.path, "w") as f:
            f.write(f'<testsuite failures="{SOURCE[:300]!r}"><testcase name="{WORDS}"/></testsuite>')


@pytest.mark.parametrize("k", [0], ids=[SOURCE[:200]])
def test_leak(k, request):
    if MODE == "message":
        raise AssertionError(SOURCE)
    if MODE == "compared":
        assert SOURCE == ""
    if MODE == "type":
        raise type(WORDS[:80], (Exception,), {})()
    if MODE == "module":
        raise ModuleNotFoundError(f"No module named 'pytest.{WORDS[:80]}'")
    if MODE == "output":
        print(SOURCE, flush=True)
        os._exit(3)
    if MODE == "report":
        request.config.pluginmanager.register(Forger(request.config.option.xmlpath))
        raise AssertionError(SOURCE)
