"""The report templates compiled ahead: jinja compiles a template at its first render (about 0.1 s of CPU for the
report's two, in every cold ``grade --json``, issue 37); the package carries each one's compiled code in
``grader/report/compiled/``, and :class:`PrecompiledLoader` uses it only for the very source, jinja version and
options it was compiled from. An edited template is compiled from its source as before, and a test fails until
the compiled code is made again:

    python -m grader.report.compiled
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from typing import Any

import jinja2

PACKAGE = "grader.report.compiled"
_HEADER = (
    "# Made by `python -m grader.report.compiled` from grader/report/templates/{name}: do not edit.\n"
    'FINGERPRINT = "{fingerprint}"\n'
)


def module_name(template: str) -> str:
    """The compiled module of ``template`` ("report.html.j2" -> "t_report_html_j2")."""
    return "t_" + re.sub(r"\W", "_", template)


def fingerprint(environment: jinja2.Environment, source: str) -> str:
    """What the compiled code depends on: the source, jinja's version and the environment's syntax options."""
    options = (
        jinja2.__version__,
        environment.trim_blocks,
        environment.lstrip_blocks,
        environment.keep_trailing_newline,
        environment.newline_sequence,
        environment.autoescape,
        environment.block_start_string,
        environment.variable_start_string,
        environment.comment_start_string,
    )
    return hashlib.sha256(repr(options).encode() + source.encode()).hexdigest()


class PrecompiledLoader(jinja2.PackageLoader):
    """A package loader that takes a template's compiled module when it was made from this very source."""

    def load(self, environment: jinja2.Environment, name: str, globals: Any = None) -> jinja2.Template:
        source, _, _ = self.get_source(environment, name)
        try:
            module = importlib.import_module(f"{PACKAGE}.{module_name(name)}")
        except ImportError:
            return super().load(environment, name, globals)
        sys.modules.pop(module.__name__, None)  # its namespace is this template's alone (jinja sets its environment)
        if getattr(module, "FINGERPRINT", None) != fingerprint(environment, source):
            return super().load(environment, name, globals)
        return environment.template_class.from_module_dict(environment, module.__dict__, globals or {})


def compiled_source(environment: jinja2.Environment, name: str) -> str:
    """The module text of ``name`` compiled in ``environment``."""
    assert environment.loader is not None
    source, filename, _ = environment.loader.get_source(environment, name)
    code = environment.compile(source, name, filename, raw=True, defer_init=True)
    return _HEADER.format(name=name, fingerprint=fingerprint(environment, source)) + str(code)
