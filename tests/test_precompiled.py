"""The report templates compiled ahead (grader/report/_precompiled.py, issue 37): used only while they are what
jinja makes of today's sources, and an edited template is compiled from its source."""

from __future__ import annotations

import importlib
from pathlib import Path

import jinja2
import pytest

from grader.report import _precompiled
from grader.report._precompiled import PACKAGE, PrecompiledLoader, compiled_source, module_name
from grader.report.html import jinja_environment

TEMPLATES = sorted(jinja_environment().list_templates(extensions=["j2"]))


@pytest.mark.parametrize("name", TEMPLATES)
def test_the_compiled_module_is_what_jinja_makes_of_the_template_today(name: str) -> None:
    module = importlib.import_module(f"{PACKAGE}.{module_name(name)}")
    assert module.__file__ is not None
    shipped = Path(module.__file__).read_text(encoding="utf-8")
    assert shipped == compiled_source(jinja_environment(), name), (
        f"{name} changed since it was compiled: run `python -m grader.report.compiled`"
    )


def test_a_template_is_rendered_from_its_compiled_module() -> None:
    template = jinja_environment().get_template("_style.css.j2")
    assert template.filename is not None and Path(template.filename).parent.name == "compiled"


def test_an_edited_template_is_compiled_from_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_precompiled, "fingerprint", lambda environment, source: "another source")
    env = jinja2.Environment(loader=PrecompiledLoader("grader.report", "templates"), trim_blocks=True)
    template = env.get_template("_style.css.j2")
    assert template.filename is not None and template.filename.endswith("_style.css.j2")
    assert "pre.source" in template.render()
