"""``python -m grader.report.compiled``: write every report template's compiled module
(grader/report/_precompiled.py)."""

from pathlib import Path

from grader.report._precompiled import compiled_source, module_name
from grader.report.html import jinja_environment

folder = Path(__file__).resolve().parent
environment = jinja_environment()
for old in folder.glob("t_*.py"):
    old.unlink()
for name in environment.list_templates(extensions=["j2"]):
    (folder / f"{module_name(name)}.py").write_text(compiled_source(environment, name), encoding="utf-8")
    print(f"compiled {name}")
