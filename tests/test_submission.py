"""Reading submissions: folders, .py, .zip (zip-slip and links refused), notebooks."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from grader.submission import SubmissionError, notebook_code, prepare

HEAD = "def causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    return X, X\n"


def test_py_file_is_copied_under_the_module_name(tmp_path: Path) -> None:
    f = tmp_path / "my_head.py"
    f.write_text(HEAD)
    with prepare(f) as sub:
        assert sub.module_path.name == "attention_head.py" and sub.source == HEAD
    assert not sub.dir.exists()  # private copy removed afterwards


def test_folder_keeps_tests_and_helpers_but_not_other_files(tmp_path: Path) -> None:
    (tmp_path / "attention_head.py").write_text(HEAD)
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_head.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "link.py").symlink_to("/etc/passwd")
    with prepare(tmp_path) as sub:
        names = sorted(p.relative_to(sub.dir).as_posix() for p in sub.dir.rglob("*") if p.is_file())
    assert names == ["attention_head.py", "helper.py", "tests/test_head.py"]


def test_zip_refuses_slip_and_links(tmp_path: Path) -> None:
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("attention_head.py", HEAD)
        zf.writestr("../escaped.py", "x = 1\n")
        link = zipfile.ZipInfo("evil.py")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/work/reference/attention_head.py")
    with prepare(z) as sub:
        assert (sub.dir / "attention_head.py").read_text() == HEAD
        assert not (sub.dir / "evil.py").exists()
        assert any("unsafe path" in n for n in sub.notes) and any("symbolic link" in n for n in sub.notes)
    assert not (tmp_path / "escaped.py").exists()


def test_zip_of_one_folder_is_unwrapped(tmp_path: Path) -> None:
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("alice/attention_head.py", HEAD)
    with prepare(z) as sub:
        assert sub.source == HEAD


def test_notebook_keeps_code_cells_without_magics() -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Title"]},
            {"cell_type": "code", "source": ["%matplotlib inline\n", "import torch\n", "!pip install x\n"]},
            {"cell_type": "code", "source": "x = 1\n  %time y = 2\n"},
        ]
    }
    assert notebook_code(json.dumps(nb)) == "import torch\n\nx = 1\n"


@pytest.mark.parametrize("name", ["missing.py", "notes.txt"])
def test_bad_paths_are_usage_errors(tmp_path: Path, name: str) -> None:
    if name == "notes.txt":
        (tmp_path / name).write_text("x")
    with pytest.raises(SubmissionError), prepare(tmp_path / name):
        pass


def test_folder_without_head_is_explained(tmp_path: Path) -> None:
    with pytest.raises(SubmissionError, match="holds no attention_head.py"), prepare(tmp_path):
        pass
