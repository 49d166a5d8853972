"""A small seccomp-BPF filter for the worker, written with ctypes (no libseccomp needed).

It denies, with an errno rather than a kill so that student code sees an ordinary ``OSError``:
- ``socket(AF_INET | AF_INET6 | AF_PACKET)`` (unless the network is allowed): EACCES;
- ``ptrace``, ``process_vm_readv``, ``process_vm_writev``: EPERM (reading other processes' memory);
- ``io_uring_*``: ENOSYS, because io_uring can open sockets without calling ``socket``;
- any syscall of a foreign ABI (i386 ``int 0x80``, x32), which would bypass the numbers below.

Runs inside the worker: standard library and ctypes only.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import sys

# classic BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

# offsets into struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little-endian low word)
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16

_AF_INET, _AF_INET6, _AF_PACKET = 2, 10, 17

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1

# per-architecture: audit arch, syscall numbers, and the seccomp(2) syscall itself
_ARCHES: dict[str, dict[str, int]] = {
    "x86_64": {
        "audit_arch": 0xC000003E,
        "socket": 41,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "seccomp": 317,
    },
    "aarch64": {
        "audit_arch": 0xC00000B7,
        "socket": 198,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "seccomp": 277,
    },
}
_IO_URING = (425, 426, 427)  # io_uring_setup/enter/register: the same numbers on both architectures
_X32_BIT = 0x40000000


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def build_program(arch: str, *, allow_network: bool) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for ``arch`` ("x86_64" or "aarch64")."""
    nr = _ARCHES[arch]
    deny_nosys = (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)
    prog = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 1, 0, nr["audit_arch"]),
        deny_nosys,
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if arch == "x86_64":  # x32 ABI syscalls carry this bit and have their own numbering
        prog += [(_JGE_K, 0, 1, _X32_BIT), deny_nosys]
    denied = [(nr[name], errno.EPERM) for name in ("ptrace", "process_vm_readv", "process_vm_writev")]
    denied += [(n, errno.ENOSYS) for n in _IO_URING]
    for number, err in denied:
        prog += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, _RET_ERRNO | err)]
    if not allow_network:
        prog += [
            (_JEQ_K, 0, 5, nr["socket"]),  # not socket(): jump to the final allow
            (_LD_W_ABS, 0, 0, _OFF_ARG0),  # the address family
            (_JEQ_K, 2, 0, _AF_INET),
            (_JEQ_K, 1, 0, _AF_INET6),
            (_JEQ_K, 0, 1, _AF_PACKET),
            (_RET_K, 0, 0, _RET_ERRNO | errno.EACCES),
        ]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def install(*, allow_network: bool) -> list[str]:
    """Set no_new_privs and load the filter on every thread; returns the protections now active.

    Returns an empty list where seccomp is unavailable (not Linux, unknown architecture, kernel or
    container refuses it); the caller records what is missing.
    """
    arch = _machine()
    if not sys.platform.startswith("linux") or arch not in _ARCHES:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    ul = ctypes.c_ulong  # prctl/syscall are variadic: pass full-width words, never C ints
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ul(1), ul(0), ul(0), ul(0)) != 0:
        return []
    active = ["no_new_privs"]
    prog = build_program(arch, allow_network=allow_network)
    array = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), array)
    # seccomp(2) with TSYNC covers threads that libraries may already have started; prctl does not
    nr_seccomp = ul(_ARCHES[arch]["seccomp"])
    rc = libc.syscall(nr_seccomp, ul(_SECCOMP_SET_MODE_FILTER), ul(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
    if rc != 0:
        rc = libc.prctl(_PR_SET_SECCOMP, ul(_SECCOMP_MODE_FILTER), ctypes.byref(fprog), ul(0), ul(0))
    if rc != 0:
        return active
    blocked = "ptrace, process_vm_*, io_uring" + ("" if allow_network else ", inet sockets")
    return active + [f"seccomp: no {blocked}"]
