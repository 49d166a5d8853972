"""Submissions that hang, die, flood, exhaust memory or lie on the wire: each becomes a clean Reply."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sandbox_helpers import IS_ROOT, OpenSandbox, call, head_inputs

from grader.sandbox import Sandbox, WorkerPool

X = head_inputs()[0]


# -- import time -----------------------------------------------------------------------------------


def test_import_hang_is_killed_at_the_import_timeout(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("import_hang", import_timeout_s=1.5)
    reply = sb.start()
    assert reply.status == "import_timeout"  # a hang is named a hang, not an import error
    assert reply.message == (
        "importing your module (attention_head.py) took more than 1.5 s: "
        'move demo code under `if __name__ == "__main__":`; the worker was stopped'
    )
    assert 1.5 <= reply.duration_s < 4  # measured from hello: worker start-up is not the student's time
    again = call(sb, "anything")  # final: not retried
    assert again.status == "import_timeout" and again.duration_s == 0


def test_import_exception_reports_the_student_traceback(open_sandbox: OpenSandbox) -> None:
    reply = open_sandbox("import_error").start()
    assert reply.status == "import_error"
    assert reply.message == "RuntimeError: this submission cannot be imported"
    assert 'File "attention_head.py", line 5, in <module>' in reply.header["traceback"]


def test_syntax_error_is_an_import_error(open_sandbox: OpenSandbox, tmp_path: Path) -> None:
    (tmp_path / "attention_head.py").write_text("def causal_self_attention(X)\n    return X\n")
    reply = open_sandbox(tmp_path).start()
    assert reply.status == "import_error"
    assert reply.message.startswith("SyntaxError:")
    assert 'File "attention_head.py", line 1' in reply.header["traceback"]
    assert str(tmp_path) not in reply.message + reply.header["traceback"]


def test_missing_module_is_an_import_error(open_sandbox: OpenSandbox, tmp_path: Path) -> None:
    reply = open_sandbox(tmp_path).start()
    assert reply.status == "import_error"
    assert reply.message == "FileNotFoundError: the submission has no attention_head.py"


def test_exit_during_import_is_an_import_error(open_sandbox: OpenSandbox) -> None:
    reply = open_sandbox("import_exit").start()
    assert reply.status == "import_error"
    assert reply.message.startswith("the worker exited with code 0 while importing attention_head.py")


# -- calls -----------------------------------------------------------------------------------------


def test_hanging_call_times_out_and_the_next_call_gets_a_fresh_worker(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("call_hang", per_call_timeout_s=1)
    reply = call(sb, "hang", X)
    assert reply.status == "timeout"
    assert reply.message == "'call' did not finish within 1 s; the worker was stopped"
    assert 1 <= reply.duration_s < 3  # the timeout plus killing the tree
    fast = call(sb, "fast", X)
    assert fast.status == "ok" and torch.equal(fast.tensors["r0"], 2 * X)


def test_per_call_timeout_can_be_overridden(open_sandbox: OpenSandbox) -> None:
    reply = call(open_sandbox("call_hang"), "hang", X, timeout_s=0.5)
    assert reply.status == "timeout" and "within 0.5 s" in reply.message


def test_budget_bounds_a_head_that_hangs_on_every_call(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("call_hang", per_call_timeout_s=1, per_submission_timeout_s=2.5)
    replies = [call(sb, "hang", X) for _ in range(6)]
    assert [r.status for r in replies[:2]] == ["timeout", "timeout"]
    assert replies[2].status == "budget"  # cut short by the budget, not by its own timeout
    assert [r.status for r in replies[3:]] == ["budget"] * 3  # later requests are refused without running
    assert all(r.duration_s == 0 for r in replies[3:])
    assert sum(r.duration_s for r in replies) < 2.5 + 3 * 0.5  # the budget, plus killing three trees
    assert sb.budget_left_s == 0


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        ("os_exit", "the worker exited with code 0 while running 'call'"),
        ("sys_exit", "the worker exited with code 0 while running 'call'"),
        ("keyboard_interrupt", "the worker exited with code 1 while running 'call'"),
        ("segfault", "the worker was killed by SIGSEGV"),
        ("abort", "the worker was killed by SIGABRT"),
    ],
)
def test_dying_worker_is_a_crash_and_the_next_call_restarts(open_sandbox: OpenSandbox, fn: str, expected: str) -> None:
    sb = open_sandbox("exits")
    reply = call(sb, fn, X)
    assert reply.status == "crash"
    assert reply.message.startswith(expected), reply.message
    if fn == "keyboard_interrupt":
        assert "KeyboardInterrupt" in reply.message
    if fn == "segfault":
        assert "Fatal Python error: Segmentation fault" in reply.message  # faulthandler's traceback
    after = call(sb, "fine", X)
    assert after.status == "ok" and torch.equal(after.tensors["r0"], X + 1)


def test_huge_allocation_fails_cleanly_and_the_grader_survives(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("memory", memory_mb=1024)
    for fn in ("allocate_8gib", "numpy_8gib"):
        reply = call(sb, fn, X)
        if "rlimit data 1024 MiB" in sb.protections:  # Linux: the allocation itself is refused
            assert reply.status == "error", reply.message
            assert reply.header["exc_type"] in ("RuntimeError", "MemoryError"), reply.message
        else:  # elsewhere the watchdog kills the worker
            assert reply.status == "crash" and reply.message.startswith("memory limit (1024 MiB) exceeded")


@pytest.mark.slow
def test_memory_watchdog_kills_a_tree_that_is_too_big_in_total(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("memory", memory_mb=1024, per_call_timeout_s=30)
    reply = call(sb, "fork_hogs", X, n=6, mb=300)  # 1.8 GiB in all; every process is far below 1 GiB
    assert reply.status == "crash"
    assert reply.message.startswith("memory limit (1024 MiB) exceeded while running 'call'"), reply.message
    assert reply.duration_s < 20
    assert call(sb, "numpy_8gib", X).status in ("error", "crash")  # a fresh worker still answers


def test_output_flood_is_capped_without_stalling(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("output_flood", output_cap_kb=64)
    reply = call(sb, "flood", X)
    assert reply.status == "ok"
    assert reply.duration_s < 15
    sb.close()  # the output is complete once every writer is dead (the reply may come before the pipe is read)
    out = sb.output
    assert out.truncated and len(out.text.encode()) == 64 * 1024
    assert out.bytes_dropped == 50_000 * 1000 - 64 * 1024


# -- lies on the wire --------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["returns_list", "returns_none", "returns_subclass", "returns_pickle", "returns_int32"])
def test_non_tensor_results_become_error_replies(open_sandbox: OpenSandbox, fn: str) -> None:
    sb = open_sandbox("bad_returns")
    params = {"fn": fn, "args": ["a0"], "raw": True}
    reply = sb.request("call", params, {"a0": X})
    assert reply.status == "error"
    assert reply.message.startswith(f"{reply.header['exc_type']}: the result could not be sent back"), reply.message
    assert reply.tensors == {}


def test_pickle_on_the_channel_is_never_unpickled(open_sandbox: OpenSandbox, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    sb = open_sandbox("wire_forgery")
    reply = call(sb, "send_pickle", X, marker=str(marker))
    assert reply.status == "crash"
    assert reply.message.startswith("bad reply format")
    assert not marker.exists()


@pytest.mark.parametrize("fn", ["send_garbage", "send_huge_frame"])
def test_garbage_or_oversized_frames_are_bad_replies(open_sandbox: OpenSandbox, fn: str) -> None:
    sb = open_sandbox("wire_forgery")
    reply = call(sb, fn, X)
    assert reply.status == "crash"
    assert reply.message.startswith("bad reply format"), reply.message


def test_killing_the_zygote_is_refused_or_survived(open_sandbox: OpenSandbox, pool: WorkerPool) -> None:
    if pool.mode != "fork":
        pytest.skip("without a zygote the worker's parent is the grader itself")
    sb = open_sandbox("exits", per_call_timeout_s=10)
    reply = call(sb, "kill_parent", X)
    if IS_ROOT:  # the worker's uid may not signal the root zygote
        assert reply.status == "error" and reply.header["exc_type"] == "PermissionError"
    else:  # same uid: the zygote dies, the worker with it (parent-death signal); a new zygote takes over
        assert reply.status == "crash", reply.message
        assert reply.duration_s < 5
    after = call(sb, "fine", X)
    assert after.status == "ok", after.message


# -- a sidecar worker beside the sandbox's own ------------------------------------------------------


def _sidecar_or_skip(sb: Sandbox) -> Sandbox:
    side = sb.sidecar()
    if side is None:
        pytest.skip("sidecars exist only where workers fork from a zygote")
    return side


def test_sidecar_hang_stops_only_the_sidecar_worker(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("call_hang", per_call_timeout_s=1)
    assert call(sb, "fast", X).status == "ok"
    side = _sidecar_or_skip(sb)
    assert call(side, "fast", X).status == "ok"
    main_pid = sb._live.worker.pid if sb._live else None
    reply = call(side, "hang", X)
    assert reply.status == "timeout"  # the call's own: not an interruption
    assert side.interruptions == 0 and sb.interruptions == 0
    assert sb._live is not None and sb._live.worker.pid == main_pid  # never swept
    assert call(sb, "fast", X).status == "ok"
    assert call(side, "fast", X).status == "ok"  # a fresh sidecar worker
    assert 0 < sb.budget_left_s <= sb.limits.per_submission_timeout_s - 1  # the sidecar's hang was charged
    side.close()
    assert call(sb, "fast", X).status == "ok"


def test_a_sweep_of_the_sandbox_interrupts_its_sidecar(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("call_hang", per_call_timeout_s=1)
    assert call(sb, "fast", X).status == "ok"
    side = _sidecar_or_skip(sb)
    assert call(side, "fast", X).status == "ok"
    assert call(sb, "hang", X).status == "timeout"  # the sweep kills every worker of the slot
    reply = call(side, "fast", X)
    assert reply.status == "crash" and side.interruptions == 1  # the caller repeats it serially
    assert call(side, "fast", X).status == "ok"


def test_closing_the_sandbox_closes_its_sidecar(open_sandbox: OpenSandbox) -> None:
    import psutil

    sb = open_sandbox("good")
    assert sb.start().status == "ok"
    side = _sidecar_or_skip(sb)
    assert side.start().status == "ok"
    assert side._live is not None
    pid = side._live.worker.pid
    assert sb._live is not None
    # each worker's memory watchdog counts its own processes: the sandbox's tree leaves the sidecar out
    main_tree = {p.pid for p in sb._slot.tree(sb._live.worker, exclude=sb._sidecar_pids())}
    assert sb._live.worker.pid in main_tree and pid not in main_tree
    sb.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(RuntimeError, match="closed"):
        side.request("echo", {}, {})


@pytest.mark.slow
def test_a_sidecar_memory_bomb_is_the_sidecars_alone(open_sandbox: OpenSandbox) -> None:
    """Each worker's watchdog counts its own processes: the sidecar's tree is killed, the sandbox's
    worker is neither counted nor touched."""
    sb = open_sandbox("memory", memory_mb=1024, per_call_timeout_s=30)
    assert sb.request("echo", {}, {"x": X}).status == "ok"
    side = _sidecar_or_skip(sb)
    assert sb._live is not None
    main_pid = sb._live.worker.pid
    reply = call(side, "fork_hogs", X, n=5, mb=300)  # 1.5 GiB in the sidecar's tree
    assert reply.status == "crash" and reply.message.startswith("memory limit (1024 MiB) exceeded"), reply.message
    assert side.interruptions == 1 and sb.interruptions == 0
    assert sb._live is not None and sb._live.worker.pid == main_pid
    assert sb.request("echo", {}, {"x": X}).status == "ok"


def test_an_import_failure_of_a_worker_launched_ahead_is_final(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("import_error")
    sb.launch()
    reply = sb.start()
    assert reply.status == "import_error"
    sb.launch()  # the import failed: nothing is launched again
    again = call(sb, "anything")
    assert again.status == "import_error" and again.duration_s == 0
