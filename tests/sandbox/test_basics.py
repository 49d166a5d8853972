"""A well-behaved submission through the sandbox: answers, errors, imports, output, protections."""

from __future__ import annotations

import time

import numpy
import pytest
import torch
from sandbox_helpers import IS_ROOT, OpenSandbox, call, head_inputs, reference_head

from grader.sandbox import Sandbox, SandboxLimits, WorkerPool
from grader.sandbox._filesystem import landlock_abi


def test_correct_head_answers_with_plain_tensors(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("good")
    inputs = head_inputs()
    reply = call(sb, "causal_self_attention", *inputs)
    assert reply.status == "ok", reply.message
    out, weights = reply.tensors["r0"], reply.tensors["r1"]
    assert type(out) is torch.Tensor and out.dtype == torch.float64
    torch.testing.assert_close(out, reference_head(*inputs), rtol=0, atol=0)
    assert weights.shape == (2, 5, 5)
    assert reply.duration_s < 5


def test_real_ops_module_serves_a_head(pool: WorkerPool) -> None:
    """Integration with the lead's grader/sandbox/_ops.py (the default ops)."""
    from sandbox_helpers import HOSTILE

    X, W_Q, W_K, W_V = head_inputs()
    with Sandbox(HOSTILE / "good", SandboxLimits(), pool=pool) as sb:
        params = {"fn": "causal_self_attention", "args": [{"t": n} for n in ("X", "Wq", "Wk", "Wv")]}
        reply = sb.request("call", params, {"X": X, "Wq": W_Q, "Wk": W_K, "Wv": W_V})
    assert reply.status == "ok", reply.message
    assert reply.header["result"]["kind"] == "tuple"
    torch.testing.assert_close(reply.tensors["r0"], reference_head(X, W_Q, W_K, W_V), rtol=0, atol=0)


def test_student_exception_is_an_error_reply_with_only_student_frames(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("good")
    reply = call(sb, "fail", head_inputs()[0])
    assert reply.status == "error"
    assert reply.message == "ValueError: shapes do not line up"
    tb = reply.header["traceback"]
    assert 'File "attention_head.py"' in tb and "in _helper" in tb and "in fail" in tb
    assert "fake_ops.py" not in tb and "_child.py" not in tb and "/tmp" not in tb
    assert call(sb, "causal_self_attention", *head_inputs()).status == "ok"  # the worker lives on


def test_inputs_are_copies_so_mutation_cannot_reach_the_grader(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("input_mutation")
    X = head_inputs()[0]
    before = X.clone()
    reply = call(sb, "mutate", X)
    assert reply.status == "ok"
    assert torch.equal(X, before)
    assert torch.count_nonzero(reply.tensors["r0"]) == 0


def test_sibling_helper_module_is_importable(open_sandbox: OpenSandbox) -> None:
    reply = call(open_sandbox("sibling_helper"), "causal_self_attention", *head_inputs())
    assert reply.status == "ok", reply.message
    assert torch.equal(reply.tensors["r0"], 2 * head_inputs()[0])


def test_submitted_torch_numpy_json_never_shadow_the_real_ones(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("shadowing")
    reply = call(sb, "which")
    assert reply.status == "ok", reply.message
    assert reply.tensors["r0"].tolist() == [True, True, True]
    assert "SHADOWED" not in sb.output.text


def test_grader_packages_cannot_be_imported(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("import_grader")
    for name in ("grader", "grader.sandbox", "reference", "reference.attention_head"):
        reply = call(sb, "try_import", name=name)
        assert reply.status == "error", name
        assert reply.message == "ImportError: the grader's own packages cannot be imported from a submission"


def test_monkeypatching_in_the_worker_does_not_reach_the_grader(open_sandbox: OpenSandbox) -> None:
    real = (torch.allclose, torch.equal, numpy.allclose, torch.Tensor.__eq__)
    sb = open_sandbox("monkeypatch")
    assert call(sb, "patched").header["values"]["r0"] is True  # patched in the worker...
    reply = call(sb, "causal_self_attention", *head_inputs())
    assert reply.status == "ok"
    assert (torch.allclose, torch.equal, numpy.allclose, torch.Tensor.__eq__) == real  # ...not here
    assert not torch.allclose(reply.tensors["r0"], reference_head(*head_inputs()))


def test_output_is_captured_and_never_parsed(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("fake_results")
    assert sb.start().status == "ok"
    sb.close()  # the pipe is drained to EOF once the worker is dead: before, output is "so far"
    out = sb.output
    assert '"score": 100' in out.text and "All tests passed" in out.text
    assert not out.truncated and out.bytes_dropped == 0


def test_worker_runs_isolated_with_one_thread_in_a_private_dir(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("good")
    reply = call(sb, "info")
    assert reply.status == "ok"
    uid, threads = reply.tensors["r0"].tolist()
    assert threads == 1
    cwd = reply.header["values"]["r1"]
    assert cwd.endswith("/work") and "hostile" not in cwd
    if IS_ROOT:
        assert uid >= SandboxLimits().sandbox_uid_base


def test_protections_are_reported(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("good")
    assert sb.protections == []  # nothing claimed before a worker exists
    assert sb.start().status == "ok"
    active = sb.protections
    for expected in (
        "separate process",
        "inherited fds closed",
        "own session",
        "private work dir",
        "isolated imports",
    ):
        assert expected in active
    assert any(p.startswith("time limits") for p in active)
    files = [p for p in active if p.startswith(("landlock (ABI", "mount namespace:", "file-system isolation: none"))]
    assert len(files) == 1, active  # exactly one file-system layer is named, or that there is none
    if landlock_abi() > 0:
        assert files[0].startswith("landlock (ABI")
    if IS_ROOT:
        assert any(p.startswith("uid ") for p in active)
        assert "rlimit nproc 64" in active and "rlimit data 2048 MiB" in active
        assert any(p.startswith("seccomp") for p in active)


def test_close_is_idempotent_and_final(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("good")
    assert sb.start().status == "ok"
    sb.close()
    sb.close()
    try:
        sb.request("echo", {}, {})
    except RuntimeError as exc:
        assert "closed" in str(exc)
    else:
        raise AssertionError("a closed sandbox accepted a request")


def test_many_forked_workers_run_parallel_ops_without_hanging(pool: WorkerPool) -> None:
    """Fork-after-OpenMP regression: 20 workers from one zygote, each using 2 torch threads."""
    from sandbox_helpers import FAKE_OPS, HOSTILE

    if pool.mode != "fork":
        pytest.skip("fork-safety regression: only meaningful with the warm zygote (Linux)")
    X = torch.randn(16, 128, 256)  # big enough for OpenMP to run the matmul in parallel
    t0 = time.monotonic()
    for _ in range(20):
        with Sandbox(HOSTILE / "good", SandboxLimits(threads=2, per_call_timeout_s=10), pool=pool, ops=FAKE_OPS) as sb:
            assert call(sb, "parallel_matmul", X).status == "ok"
    assert time.monotonic() - t0 < 20


def test_standard_library_stays_importable_after_the_uid_drop(open_sandbox: OpenSandbox) -> None:
    """Holds even where Python lives under a root-only directory (pyenv in /root, as on the CI machine)."""
    reply = call(open_sandbox("good"), "stdlib_imports")
    assert reply.status == "ok", reply.message
    assert reply.header["values"]["r0"] == 2


def test_begin_close_lets_the_zygote_exit_while_the_grader_works() -> None:
    """``begin_close`` only sends the exit; ``close`` collects the zygote; nothing may fork in between."""
    import psutil
    from sandbox_helpers import HOSTILE

    from grader.sandbox._slots import SlotError, ZygoteSlot

    with WorkerPool(1) as pool:
        if pool.mode != "fork":
            pytest.skip("zygotes only exist in fork mode")
        with Sandbox(HOSTILE / "good", SandboxLimits(), pool=pool) as sb:
            assert sb.start().status == "ok"
        slot = pool._slots[0]
        assert isinstance(slot, ZygoteSlot) and slot._proc is not None
        zygote = psutil.Process(slot._proc.pid)
        pool.begin_close()
        pool.begin_close()  # idempotent
        with pytest.raises(SlotError, match="closed"):
            slot.launch({}, -1, -1)
        zygote.wait(10)  # it exits on its own, before anyone waits for it
    assert slot._proc is None


def test_a_worker_launched_ahead_answers_the_first_request(open_sandbox: OpenSandbox) -> None:
    """launch() forks the worker without waiting; the first request reads its hello and import, once."""
    sb = open_sandbox("good")
    sb.launch()
    sb.launch()  # a worker is already launched: nothing more
    reply = call(sb, "causal_self_attention", *head_inputs())
    assert reply.status == "ok", reply.message
    assert sb.protections  # read from the hello, as a plain start reads them
    assert sb.start().status == "ok"  # started once
    sb.launch()  # running: nothing more
    assert call(sb, "causal_self_attention", *head_inputs()).status == "ok"


def test_a_worker_launched_ahead_and_never_asked_is_stopped_by_close(open_sandbox: OpenSandbox) -> None:
    sb = open_sandbox("good")
    sb.launch()
    sb.close()  # its hello and import never read: killed all the same
    with pytest.raises(RuntimeError, match="closed"):
        sb.launch()
