"""Sandboxes over the folders of tests/hostile/, on the session's warm pool (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import FAKE_OPS, HOSTILE, OpenSandbox

from grader.sandbox import Sandbox, SandboxLimits, WorkerPool


@pytest.fixture
def open_sandbox(pool: WorkerPool) -> Iterator[OpenSandbox]:
    """``open_sandbox("exits", per_call_timeout_s=2)``: a sandbox on a hostile folder, closed afterwards."""
    opened: list[Sandbox] = []

    def make(name: str | Path, *, sandbox_pool: WorkerPool | None = None, **limits: Any) -> Sandbox:
        folder = name if isinstance(name, Path) else HOSTILE / name
        sb = Sandbox(folder, SandboxLimits(**limits), pool=sandbox_pool or pool, ops=FAKE_OPS)
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()
