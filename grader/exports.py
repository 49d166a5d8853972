"""Files the grader writes: JSON results and the exported JSON Schema. Pure functions of the model.

Writes are atomic (temporary file + rename) so that a reader never sees half a file, and they happen
only in the grader process, after every student process has ended.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from grader.models import GradeResult


def write_atomic(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def result_json(result: GradeResult) -> str:
    return result.model_dump_json(indent=2) + "\n"


def result_schema() -> str:
    """The JSON Schema of the ``--json`` output (generated from the pydantic model)."""
    return json.dumps(GradeResult.model_json_schema(), indent=2, sort_keys=True) + "\n"
