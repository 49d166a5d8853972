"""Pieces of the sandbox that can be checked without starting a worker."""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from sandbox_helpers import IS_ROOT, needs_root

import grader.sandbox
from grader.sandbox import SandboxLimits, _wire
from grader.sandbox._framing import FrameReader, FrameTooLarge, recv_frame, send_frame, send_frame_within
from grader.sandbox._reaper import describe_exit
from grader.sandbox._seccomp import _ARCHES, build_program
from grader.sandbox._slots import poll_in
from grader.sandbox._uids import lease_uid
from grader.sandbox._workspace import MAX_FILE_BYTES, Workspace


def test_public_api_is_small_and_pinned() -> None:
    assert grader.sandbox.__all__ == [
        "CapturedOutput",
        "Reply",
        "Sandbox",
        "SandboxLimits",
        "SlotError",
        "Status",
        "WorkerPool",
        "fork_supported",
        "kill_leftovers",
    ]


# -- limits ------------------------------------------------------------------------------------------


def test_limits_defaults_and_strictness() -> None:
    limits = SandboxLimits()
    assert (limits.per_call_timeout_s, limits.per_submission_timeout_s, limits.import_timeout_s) == (
        20,
        180,
        20,
    )
    assert (limits.memory_mb, limits.file_size_mb, limits.open_files, limits.max_processes) == (
        2048,
        16,
        64,
        64,
    )
    assert (limits.output_cap_kb, limits.max_reply_mb, limits.threads) == (64, 64, 1)
    assert limits.network is False and limits.sandbox_uid_base == 64000
    with pytest.raises(ValidationError, match="memory_gb"):
        SandboxLimits(memory_gb=2)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="sandbox_uid_base"):
        SandboxLimits(sandbox_uid_base=0)  # never run student code as root or a system account


def test_every_limit_is_described() -> None:
    for name, info in SandboxLimits.model_fields.items():
        assert info.description, f"SandboxLimits.{name} has no description"


# -- seccomp -----------------------------------------------------------------------------------------


def run_bpf(prog: list[tuple[int, int, int, int]], nr: int, arch: int, arg0: int = 0) -> int:
    """A tiny classic-BPF interpreter for the instructions the filter uses."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35):
            hit = acc == k if code == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


ALLOW = 0x7FFF0000


def errno_of(errno_value: int) -> int:
    return 0x00050000 | errno_value


@pytest.mark.parametrize("arch", sorted(_ARCHES))
def test_seccomp_program_decisions(arch: str) -> None:
    nr = _ARCHES[arch]
    audit = nr["audit_arch"]
    prog = build_program(arch, allow_network=False)
    assert run_bpf(prog, nr["socket"], audit, socket.AF_INET) == errno_of(errno.EACCES)
    assert run_bpf(prog, nr["socket"], audit, socket.AF_INET6) == errno_of(errno.EACCES)
    assert run_bpf(prog, nr["socket"], audit, 17) == errno_of(errno.EACCES)  # AF_PACKET
    assert run_bpf(prog, nr["socket"], audit, socket.AF_UNIX) == ALLOW
    assert run_bpf(prog, nr["ptrace"], audit) == errno_of(errno.EPERM)
    assert run_bpf(prog, nr["process_vm_readv"], audit) == errno_of(errno.EPERM)
    assert run_bpf(prog, 425, audit) == errno_of(errno.ENOSYS)  # io_uring_setup
    assert run_bpf(prog, 0, audit) == ALLOW
    assert run_bpf(prog, nr["socket"], 0x40000003, socket.AF_UNIX) == errno_of(errno.ENOSYS)  # i386 ABI
    if arch == "x86_64":
        assert run_bpf(prog, 0x40000000 | 41, audit, socket.AF_INET) == errno_of(errno.ENOSYS)  # x32 ABI
    open_net = build_program(arch, allow_network=True)
    assert run_bpf(open_net, nr["socket"], audit, socket.AF_INET) == ALLOW
    assert run_bpf(open_net, nr["ptrace"], audit) == errno_of(errno.EPERM)


# -- framing -----------------------------------------------------------------------------------------


def test_frames_round_trip_and_refuse_oversized_announcements() -> None:
    a, b = socket.socketpair()
    with a, b:
        blob = os.urandom(300_000)  # larger than the socket buffer: needs a concurrent reader
        sender = threading.Thread(target=send_frame, args=(a, blob))
        sender.start()
        assert recv_frame(b, 1 << 20) == blob
        sender.join()
        a.sendall(struct.pack("!Q", 1 << 40))
        with pytest.raises(FrameTooLarge):
            recv_frame(b, 1 << 20)
        a.close()
        assert recv_frame(b, 1 << 20) is None


class _Deadline(Exception):
    pass


def test_the_grader_side_of_a_frame_never_blocks_past_its_wait() -> None:
    """The grader's socket is non-blocking: its sends and reads wait only in the callbacks it passes,
    which raise at the deadline, whatever the worker does (never reads, stops mid-frame)."""
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        waits: list[str] = []

        def give_up(what: str) -> None:
            waits.append(what)
            if len(waits) > 3:
                raise _Deadline

        # the peer never reads: the send fills the buffers, then waits, then gives up
        with pytest.raises(_Deadline):
            send_frame_within(a, os.urandom(4 << 20), lambda: give_up("send"))
        assert set(waits) == {"send"}
        waits.clear()
        # a reply cut off after its prefix and part of its body: the read waits, never blocks
        c, d = socket.socketpair()
        with c, d:
            c.setblocking(False)
            d.sendall(struct.pack("!Q", 100) + b"x" * 40)
            with pytest.raises(_Deadline):
                recv_frame(c, 1 << 20, lambda: give_up("read"))
            assert set(waits) == {"read"}
            # a whole frame already buffered: one wait before its prefix, none for its body
            waits.clear()
            e, f = socket.socketpair()
            with e, f:
                e.setblocking(False)
                send_frame(f, b"y" * 1000)
                assert recv_frame(e, 1 << 20, lambda: waits.append("read")) == b"y" * 1000
                assert waits == ["read"]


def test_a_small_frame_leaves_in_one_call() -> None:
    """Prefix and body in one send for a small frame (one round trip to the server where each call is
    one, as under Wine); a large one in two parts, not copied."""

    class Counting:
        def __init__(self) -> None:
            self.calls: list[int] = []

        def sendall(self, data: bytes) -> None:
            self.calls.append(len(data))

    small, large = Counting(), Counting()
    send_frame(small, b"z" * 1000)  # type: ignore[arg-type]
    send_frame(large, b"z" * (1 << 20))  # type: ignore[arg-type]
    assert small.calls == [1008]
    assert large.calls == [8, 1 << 20]


def test_a_frame_reader_reads_a_small_frame_in_one_call_and_keeps_what_follows() -> None:
    """Prefix and body of a small frame in one read (a round trip under Wine, on each side of every request);
    a second frame read with the first (a hello, then the import's result) is kept for the next read, which
    waits for nothing; a large frame and one cut off at the end of the stream read as recv_frame reads them."""

    class Counting:
        def __init__(self, sock: socket.socket) -> None:
            self.sock, self.reads = sock, 0

        def recv_into(self, view: memoryview, n: int = 0) -> int:
            self.reads += 1
            return self.sock.recv_into(view, n)

    a, b = socket.socketpair()
    with a, b:
        b.setblocking(False)
        counted = Counting(b)
        frames = FrameReader(counted)  # type: ignore[arg-type]
        waits: list[str] = []
        send_frame(a, b"hello")
        send_frame(a, b"ready" * 100)
        assert frames.read(1 << 20, lambda: waits.append("read")) == b"hello"
        assert frames.read(1 << 20, lambda: waits.append("read")) == b"ready" * 100
        assert counted.reads == 1 and waits == ["read"]
        blob = os.urandom(300_000)
        sender = threading.Thread(target=send_frame, args=(a, blob))
        sender.start()
        assert frames.read(1 << 20, lambda: poll_in([b.fileno()], 5)) == blob
        sender.join()
        a.sendall(struct.pack("!Q", 1 << 40))
        with pytest.raises(FrameTooLarge):
            frames.read(1 << 20, lambda: None)
    c, d = socket.socketpair()
    with c, d:
        d.sendall(struct.pack("!Q", 100) + b"x" * 40)
        d.close()
        assert FrameReader(c).read(1 << 20) is None


def test_wire_round_trips_every_dtype_and_layout_and_the_library_reads_it() -> None:
    from safetensors.torch import load

    g = torch.Generator().manual_seed(0)
    tensors = {
        "f64": torch.randn(3, 4, generator=g, dtype=torch.float64),
        "scalar": torch.tensor(1.5),
        "empty": torch.zeros(0, 3),
        "transposed": torch.randn(4, 5, generator=g).t(),
        "expanded": torch.randn(1, 3, generator=g).expand(4, 3),
        "negated_view": torch.randn(3, generator=g)._neg_view(),
        "bf16": torch.randn(2, 3, generator=g).bfloat16(),
        "f16": torch.tensor([float("inf"), float("nan"), -0.0]).half(),
        "bool": torch.tensor([True, False, True]),
        "i64": torch.arange(5),
    }
    header = {"op": "call", "values": [1, float("nan"), "x"]}
    blob = _wire.encode(header, tensors)
    got_header, got = _wire.decode(blob, max_bytes=1 << 20)
    assert got_header["op"] == "call" and got_header["values"][2] == "x"
    for library in (got, load(blob)):  # our decoder and the safetensors library itself
        assert set(library) == set(tensors)
        for name, t in tensors.items():
            assert library[name].dtype == t.dtype and library[name].shape == t.shape, name
            bits = library[name].reshape(-1).view(torch.uint8)  # bitwise: NaN and -0.0 included
            assert torch.equal(bits, t.resolve_neg().contiguous().reshape(-1).view(torch.uint8)), name


def test_wire_refuses_what_it_must_not_ship() -> None:
    class Sub(torch.Tensor):
        pass

    with pytest.raises(_wire.WireError, match="not a plain"):
        _wire.encode({}, {"t": torch.zeros(2).as_subclass(Sub)})
    with pytest.raises(_wire.WireError, match="dtype"):
        _wire.encode({}, {"t": torch.zeros(2, dtype=torch.int8)})
    with pytest.raises(_wire.WireError, match="reserved"):
        _wire.encode({}, {"__metadata__": torch.zeros(2)})
    blob = _wire.encode({"a": 1}, {"t": torch.zeros(4)})
    with pytest.raises(_wire.WireError):  # one byte short: the offsets no longer fit
        _wire.decode(blob[:-1], max_bytes=1 << 20)


def test_exit_descriptions() -> None:
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(-11) == "was killed by SIGSEGV (Segmentation fault)"
    assert describe_exit(None) == "ended (exit status unknown)"


# -- workspace ---------------------------------------------------------------------------------------


def test_workspace_copies_only_regular_files_read_only(tmp_path: Path) -> None:
    (tmp_path / "attention_head.py").write_text("x = 1\n")
    (tmp_path / "helpers.py").write_text("y = 2\n")
    (tmp_path / "secret_link.py").symlink_to("/etc/passwd")
    (tmp_path / "folder").mkdir()
    (tmp_path / "huge.bin").write_bytes(b"\0" * (MAX_FILE_BYTES + 1))
    ws = Workspace(tmp_path, uid=None)
    try:
        assert sorted(p.name for p in ws.src.iterdir()) == ["attention_head.py", "helpers.py"]
        assert sorted(ws.skipped) == ["folder", "huge.bin", "secret_link.py"]
        assert (ws.src / "attention_head.py").stat().st_mode & 0o777 == 0o400  # the grader's own uid: see test_files
        assert ws.work.is_dir() and not ws.work.is_relative_to(tmp_path)
    finally:
        ws.remove()
    assert not ws.root.exists()


@needs_root
def test_uid_leases_are_exclusive() -> None:
    a = lease_uid(64500)
    b = lease_uid(64500)
    try:
        assert a.uid != b.uid and {a.uid, b.uid} <= set(range(64500, 64500 + 4096))
    finally:
        a.release()
        b.release()
    c = lease_uid(64500)  # released uids are handed out again
    assert c.uid == min(a.uid, b.uid)
    c.release()
    assert IS_ROOT


@needs_root
def test_the_uid_sweep_finds_what_psutil_finds_and_no_zombie() -> None:
    """The sweep's pass over /proc (grader/sandbox/_reaper.py) sees the processes of a uid as psutil's listing
    does, a zombie excepted, and kill_leftovers leaves none behind."""
    import subprocess
    import time

    import psutil

    from grader.sandbox._reaper import kill_leftovers, processes_of

    lease = lease_uid(64500)
    running = subprocess.Popen(["sleep", "30"], user=lease.uid)
    dead = subprocess.Popen(["true"], user=lease.uid)
    try:
        while psutil.Process(dead.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not reaped: a zombie
            time.sleep(0.01)
        assert [p.pid for p in processes_of([lease.uid])] == [running.pid]
        mine = {os.getuid()}

        def by_psutil() -> set[int]:
            return {
                p.pid
                for p in psutil.process_iter(["uids", "status"])
                if p.pid != os.getpid()
                and p.info["status"] != psutil.STATUS_ZOMBIE
                and mine & {p.info["uids"].real, p.info["uids"].effective, p.info["uids"].saved}
            }

        before = by_psutil()
        swept = {p.pid for p in processes_of(mine)}
        after = by_psutil()  # other processes come and go meanwhile: those alive throughout are in all three
        assert before & after <= swept <= before | after
        assert running.pid not in swept and dead.pid not in swept
        assert kill_leftovers([lease.uid]) == 1
        assert running.wait(5) == -9 and processes_of([lease.uid]) == []
    finally:
        for proc in (running, dead):
            proc.kill()
            proc.wait()
        lease.release()


@pytest.mark.skipif(not grader.sandbox.fork_supported(), reason="a zygote forks workers on Linux only")
def test_a_zygote_started_ahead_is_adopted_or_stopped() -> None:
    """`grade` starts its first zygote before importing the pool (grader/sandbox/_early.py): the pool's first
    slot adopts it when it is of the kind asked for, and stops it otherwise; closing the pool ends it."""
    from grader.sandbox._early import start_early

    ahead = start_early(tests=False)
    assert ahead is not None
    with grader.sandbox.WorkerPool(1, lazy=True) as pool:
        pool.prestart(1, tests=False, started=ahead)
        assert pool._slots[0]._proc is ahead.proc  # type: ignore[union-attr]
    assert ahead.proc.poll() is not None

    other = start_early(tests=False)
    assert other is not None
    with grader.sandbox.WorkerPool(1, lazy=True) as pool:
        pool.prestart(1, tests=True, started=other)  # a zygote whose workers may run tests was asked for
        assert other.proc.poll() is not None and other.ctl.fileno() == -1
        assert pool._slots[0]._proc is not None and pool._slots[0]._proc is not other.proc  # type: ignore[union-attr]
