"""Reading submissions: folders, .py, .zip (zip-slip and links refused), notebooks."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from grader.batch import locate
from grader.submission import MAX_FILE_BYTES, SubmissionError, prepare

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


def test_a_zip_with_backslash_names_is_read_as_on_windows(tmp_path: Path) -> None:
    """Windows PowerShell's Compress-Archive writes `my_step4\\attention_head.py`; a drive or a climb stays unsafe."""
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr(zipfile.ZipInfo("my_step4\\attention_head.py"), HEAD.replace("\n", "\r\n"))
        zf.writestr(zipfile.ZipInfo("my_step4\\tests\\test_head.py"), "def test_x():\n    pass\n")
        zf.writestr(zipfile.ZipInfo("..\\escaped.py"), "x = 1\n")
        zf.writestr(zipfile.ZipInfo("C:\\evil.py"), "x = 1\n")
    with prepare(z) as sub:
        names = sorted(p.relative_to(sub.dir).as_posix() for p in sub.dir.rglob("*") if p.is_file())
        assert names == ["attention_head.py", "tests/test_head.py"]
        assert (sub.dir / "attention_head.py").read_bytes() == HEAD.replace("\n", "\r\n").encode()  # CRLF kept
        assert sum("unsafe path" in n for n in sub.notes) == 2, sub.notes


def test_zip_of_one_folder_is_unwrapped(tmp_path: Path) -> None:
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("alice/attention_head.py", HEAD)
    with prepare(z) as sub:
        assert sub.source == HEAD


def test_notebook_keeps_the_definitions_without_magics(tmp_path: Path) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Title"]},
            {"cell_type": "code", "source": ["%matplotlib inline\n", "import torch\n", "!pip install x\n"]},
            {"cell_type": "code", "source": HEAD + "  %time y = 2\nprint(causal_self_attention(1, 2, 3, 4))\n"},
        ]
    }
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    with prepare(tmp_path / "nb.ipynb") as sub:
        assert sorted(p.name for p in sub.dir.iterdir()) == ["attention_head.py"]
        assert HEAD in sub.source and "print(" not in sub.source and "import torch" not in sub.source
        assert sub.dropped_cells == [2]
        assert sub.notes[0].startswith("1 code cell was not run: the grader needs only your definitions (cell 2 of 3")


@pytest.mark.parametrize("name", ["missing.py", "notes.txt"])
def test_bad_paths_are_usage_errors(tmp_path: Path, name: str) -> None:
    if name == "notes.txt":
        (tmp_path / name).write_text("x")
    with pytest.raises(SubmissionError), prepare(tmp_path / name):
        pass


def test_folder_without_head_is_explained(tmp_path: Path) -> None:
    with pytest.raises(SubmissionError, match="holds no attention_head.py"), prepare(tmp_path):
        pass


# -- archives and folders as students make them ------------------------------------------------------

TEST = "def test_x():\n    pass\n"


def _files(sub_dir: Path) -> dict[str, str]:
    return {p.relative_to(sub_dir).as_posix(): p.read_text() for p in sorted(sub_dir.rglob("*")) if p.is_file()}


def _plain(tmp_path: Path) -> dict[str, str]:
    d = tmp_path / "plain"
    (d / "tests").mkdir(parents=True)
    (d / "attention_head.py").write_text(HEAD)
    (d / "tests" / "test_head.py").write_text(TEST)
    with prepare(d) as sub:
        return _files(sub.dir)


def test_a_finder_zip_is_read_like_a_plain_folder(tmp_path: Path) -> None:
    z = tmp_path / "Project Step 4.zip"
    with zipfile.ZipFile(z, "w") as zf:  # what macOS Finder's "Compress" writes
        zf.writestr("Project Step 4/", "")
        zf.writestr("Project Step 4/attention_head.py", HEAD)
        zf.writestr("Project Step 4/tests/test_head.py", TEST)
        zf.writestr("Project Step 4/.DS_Store", b"\0\0\0\1Bud1")
        zf.writestr("__MACOSX/Project Step 4/._attention_head.py", b"\0\5\26\7AppleDouble")
        zf.writestr("__MACOSX/Project Step 4/tests/._test_head.py", b"\0\5\26\7AppleDouble")
        zf.writestr("__MACOSX/._Project Step 4", b"\0\5\26\7")
    with prepare(z) as sub:
        assert _files(sub.dir) == _plain(tmp_path) and sub.notes == []


def test_a_folder_inside_a_folder_is_read_like_a_plain_folder(tmp_path: Path) -> None:
    outer = tmp_path / "handin"
    inner = outer / "Project Step 4"
    (inner / "tests").mkdir(parents=True)
    (inner / "attention_head.py").write_text(HEAD)
    (inner / "tests" / "test_head.py").write_text(TEST)
    (inner / "._attention_head.py").write_bytes(b"\0\5\26\7")
    (outer / ".DS_Store").write_bytes(b"Bud1")
    (outer / "Thumbs.db").write_bytes(b"\xd0\xcf")
    (inner / ".ipynb_checkpoints").mkdir()
    (inner / ".ipynb_checkpoints" / "attention_head-checkpoint.py").write_text("old = 1\n")
    expected = _plain(tmp_path)
    with prepare(outer) as sub:
        assert _files(sub.dir) == expected and sub.notes == []
    with prepare(locate(outer)) as sub:  # batch and Gradescope locate first, then prepare: the same files
        assert _files(sub.dir) == expected


def test_several_candidates_the_shallowest_is_graded_and_named(tmp_path: Path) -> None:
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("b/old/attention_head.py", "old = 1\n")
        zf.writestr("b/attention_head.py", HEAD)
        zf.writestr("a/attention_head.py", HEAD + "# a\n")
    with prepare(z) as sub:
        assert sub.source == HEAD + "# a\n"
        assert sub.notes == [
            "Graded `a/attention_head.py` (the shallowest of 3 candidates); not graded: "
            "`b/attention_head.py`, `b/old/attention_head.py`."
        ]


def test_a_notebook_in_a_zip_is_graded_on_its_definitions(tmp_path: Path) -> None:
    nb = {"cells": [{"cell_type": "code", "source": "import matplotlib.pyplot as plt\n" + HEAD + "plt.show()\n"}]}
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("handin/step4.ipynb", json.dumps(nb))
        zf.writestr("handin/test_head.py", TEST)
    with prepare(z) as sub:
        assert sorted(_files(sub.dir)) == ["attention_head.py", "test_head.py"]
        assert HEAD in sub.source and "plt" not in sub.source


def test_zip_still_refuses_oversized_files(tmp_path: Path) -> None:
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Project Step 4/attention_head.py", HEAD)
        zf.writestr("Project Step 4/helper.py", "x = 1\n" * (MAX_FILE_BYTES // 6 + 1))
    with pytest.raises(SubmissionError, match="larger files are refused"), prepare(z):
        pass


def test_junk_only_folder_is_explained(tmp_path: Path) -> None:
    (tmp_path / "__MACOSX").mkdir()
    (tmp_path / "__MACOSX" / "._attention_head.py").write_bytes(b"\0\5")
    (tmp_path / ".DS_Store").write_bytes(b"Bud1")
    with pytest.raises(SubmissionError, match="holds no attention_head.py"), prepare(tmp_path):
        pass


# -- issue 36.8: what cannot be graded is said in the student's own file names -----------------------


def test_a_folder_without_the_head_names_the_python_files_it_holds(tmp_path: Path) -> None:
    (tmp_path / "my_head.py").write_text(HEAD)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SubmissionError) as raised, prepare(tmp_path):
        pass
    assert str(raised.value) == (
        f"{tmp_path} holds no attention_head.py (the file with your head); it holds `my_head.py`: "
        f"rename `my_head.py` to attention_head.py, or grade it by name: `grade {tmp_path / 'my_head.py'}`"
    )
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("my_head.py", HEAD)
        zf.writestr("helper.py", "X = 1\n")
    with pytest.raises(SubmissionError) as raised, prepare(z):
        pass
    assert str(raised.value).endswith(  # a zip's file is not graded by name: renaming is the fix
        "holds no attention_head.py (the file with your head); it holds `helper.py` and `my_head.py`: "
        "rename the one with your head to attention_head.py"
    )


def test_a_broken_notebook_is_named(tmp_path: Path) -> None:
    nb = tmp_path / "homework.ipynb"
    nb.write_text("{broken", encoding="utf-8")
    with pytest.raises(SubmissionError, match=r"^homework\.ipynb is not a Jupyter notebook \(Expecting"), prepare(nb):
        pass


@pytest.mark.parametrize("name", ["syntax_error.py", "attention_head.py"])
def test_a_syntax_error_is_shown_on_the_students_file_with_its_line_and_caret(tmp_path: Path, name: str) -> None:
    """The worker imports a copy named attention_head.py; the error names the file the student graded."""
    f = tmp_path / name
    f.write_text("import math\n\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n    return (X for\n")
    with prepare(f) as sub:
        assert sub.syntax_error == (
            f"SyntaxError: '(' was never closed ({name}, line 5)\n    return (X for\n           ^"
        )
    if name == "attention_head.py":
        with prepare(tmp_path) as sub:  # a folder: its attention_head.py, as the student named it
            assert sub.syntax_error is not None and "(attention_head.py, line 5)" in sub.syntax_error
    f.write_text(HEAD)
    with prepare(f) as sub:
        assert sub.syntax_error is None
