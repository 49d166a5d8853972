"""Attempts to outlive, reach out of, or write past the sandbox."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sandbox_helpers import FAKE_OPS, HOSTILE, IS_ROOT, OpenSandbox, call, head_inputs, needs_root

from grader.sandbox import Sandbox, SandboxLimits, WorkerPool, fork_supported, kill_leftovers
from grader.sandbox._reaper import processes_of
from grader.sandbox._workspace import remove_tree

X = head_inputs()[0]
REPO = Path(__file__).resolve().parents[2]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_setsid_daemon_is_gone_after_close(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("daemon")
    reply = call(sb, "spawn_daemon", X)
    assert reply.status == "ok", reply.message
    pid = int(reply.tensors["r0"])
    daemon = psutil.Process(pid)
    assert daemon.is_running() and daemon.ppid() != os.getpid()
    if IS_ROOT:
        assert daemon.uids().real >= SandboxLimits().sandbox_uid_base
    sb.close()
    assert gone(pid)


def test_timeout_also_kills_the_daemons_of_that_worker(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("daemon", per_call_timeout_s=1)
    reply = call(sb, "spawn_daemon_and_hang", X)
    assert reply.status == "timeout"
    match = re.search(r"daemon pid (\d+)", sb.output.text)
    assert match, sb.output.text
    assert gone(int(match.group(1)))  # before close(): the timeout swept the whole tree


def test_fork_bomb_is_bounded_and_cleaned_up(open_sandbox: OpenSandbox, pool: WorkerPool) -> None:
    sb = open_sandbox("fork_bomb")
    reply = call(sb, "bomb", X)
    assert reply.status == "ok", reply.message
    started = reply.header["values"]["r0"]
    if IS_ROOT:
        assert started < SandboxLimits().max_processes  # RLIMIT_NPROC on the slot's own uid
    sb.close()
    if IS_ROOT:
        assert processes_of(pool.uids) == []
    assert kill_leftovers(pool.uids) == 0


@pytest.fixture
def results_file() -> Iterator[Path]:
    """A grader-owned results.json in a directory the sandbox uid can enter but not write."""
    folder = Path(tempfile.mkdtemp(prefix="step4-results-"))
    folder.chmod(0o755)
    path = folder / "results.json"
    path.write_text(json.dumps({"score": 0}))
    path.chmod(0o644)
    yield path
    path.unlink()
    folder.rmdir()


@needs_root
def test_forged_results_file_cannot_be_written_now_or_later(open_sandbox: OpenSandbox, results_file: Path) -> None:
    sb = open_sandbox("fake_results")
    reply = call(sb, "overwrite", X, path=str(results_file))
    assert reply.status == "error"
    assert reply.header["exc_type"] == "PermissionError"
    sb.close()  # kills the straggler that keeps retrying
    time.sleep(0.3)
    assert json.loads(results_file.read_text()) == {"score": 0}


@needs_root
def test_grader_memory_environment_and_private_files_are_unreadable(open_sandbox: OpenSandbox, tmp_path: Path) -> None:
    secret = tmp_path / "reference.py"
    secret.write_text("SECRET_REFERENCE = 1\n")
    secret.chmod(0o600)
    sb = open_sandbox("read_grader")
    for what in ("environ", "mem", "maps"):
        reply = call(sb, "read_proc", pid=os.getpid(), what=what)
        assert reply.status == "error" and reply.header["exc_type"] == "PermissionError", (
            what,
            reply.message,
        )
    reply = call(sb, "read_file", path=str(secret))
    assert reply.status == "error" and reply.header["exc_type"] == "PermissionError"


def test_network_is_blocked_when_reported(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("network")
    assert sb.start().status == "ok"
    if not any(p == "network namespace" or (p.startswith("seccomp") and "inet" in p) for p in sb.protections):
        pytest.skip(f"no network protection on this platform: {sb.protections}")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.2)
        reply = call(sb, "connect", port=listener.getsockname()[1])
        assert reply.status == "error"
        assert reply.header["exc_type"] in ("PermissionError", "OSError"), reply.message
        with pytest.raises(TimeoutError):
            listener.accept()
    assert call(sb, "unix_socketpair").status == "ok"  # AF_UNIX still works


def test_network_can_be_allowed(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("network", network=True)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        reply = call(sb, "connect", port=listener.getsockname()[1])
        assert reply.status == "ok", reply.message
    assert not any("inet" in p or p == "network namespace" for p in sb.protections)


_ORPHAN_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from grader.sandbox import Sandbox, SandboxLimits, WorkerPool
    import torch
    pool = WorkerPool(1)
    sb = Sandbox(Path(sys.argv[1]), SandboxLimits(), pool=pool, ops=Path(sys.argv[2]))
    r = sb.request("call", {"fn": "spawn_daemon", "args": ["x"]}, {"x": torch.zeros(1)})
    print(int(r.tensors["r0"]), pool._slots[0]._proc.pid, sb._workspace.root, flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not fork_supported(), reason="needs the zygote: a fresh worker's daemons outlive a killed grader")
def test_killing_the_grader_takes_zygote_worker_and_daemons_with_it() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, str(HOSTILE / "daemon"), str(FAKE_OPS)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        daemon_pid, zygote_pid, workspace = proc.stdout.readline().split()
        daemon, zygote = int(daemon_pid), int(zygote_pid)
        assert not gone(daemon) and not gone(zygote)
        proc.send_signal(signal.SIGKILL)  # no close(), no atexit: the zygote must notice on its own
        proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (gone(daemon) and gone(zygote)):
        time.sleep(0.05)
    assert gone(daemon) and gone(zygote)
    remove_tree(Path(workspace))  # the grader died before close(): its private copy is left behind


@pytest.mark.slow
def test_spawn_mode_without_fork_gives_the_same_guarantees(open_sandbox: OpenSandbox) -> None:
    with WorkerPool(1, fork=False) as spawn_pool:
        sb = open_sandbox("daemon", sandbox_pool=spawn_pool, per_call_timeout_s=30)
        reply = call(sb, "spawn_daemon", X)
        assert reply.status == "ok", reply.message
        assert "fresh interpreter" in sb.protections and "forked from warm zygote" not in sb.protections
        pid = int(reply.tensors["r0"])
        sb.close()
        assert gone(pid)
        crash = open_sandbox("exits", sandbox_pool=spawn_pool, per_call_timeout_s=30)
        assert call(crash, "os_exit", X).status == "crash"
        assert call(crash, "fine", X).status == "ok"


def test_step4_no_fork_selects_spawn_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEP4_NO_FORK", "1")
    assert not fork_supported()
    with WorkerPool(1) as spawn_pool:  # no zygote is started in spawn mode, so this is cheap
        assert spawn_pool.mode == "spawn"


def test_workers_of_two_pools_never_share_a_uid(pool: WorkerPool) -> None:
    with WorkerPool(2) as other:
        if not IS_ROOT:
            assert other.uids == [] and pool.uids == []
            return
        assert len(set(other.uids + pool.uids)) == 3


def test_sandbox_without_a_pool_owns_and_closes_one() -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with Sandbox(HOSTILE / "good", SandboxLimits(), ops=FAKE_OPS) as sb:
        assert call(sb, "info").status == "ok"
        helpers = {p.pid for p in psutil.Process().children(recursive=True)} - before
        assert helpers  # its own zygote (or, in spawn mode, its worker)
    assert all(gone(pid) for pid in helpers)
