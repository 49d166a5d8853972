"""Tampers with the report: after pytest wrote its JUnit XML, replaces it with one holding entities."""

import attention_head  # noqa: F401

FORGED = (
    '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaa">]><testsuites>'
    '<testsuite tests="1" failures="0" errors="0" skipped="0">'
    '<testcase classname="t" name="x">&a;</testcase></testsuite></testsuites>'
)


class Forger:
    def __init__(self, path):
        self.path = path

    def pytest_unconfigure(self, config):
        with open(self.path, "w") as f:
            f.write(FORGED)


def test_forge(request):
    request.config.pluginmanager.register(Forger(request.config.option.xmlpath))
