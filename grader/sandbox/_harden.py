"""Lock a freshly started worker down before any student code is imported.

The steps run in the order of research/sandbox.md section 7.3, plus the file-system layer of
``_filesystem`` (Landlock, else a mount namespace as root) before seccomp. A step the platform does
not offer (macOS, non-root, a container without CAP_SYS_ADMIN) is skipped silently, and ``harden``
returns the list of protections that are actually active, which the worker reports to the grader;
with no file-system layer at all, the list says so.

Runs inside the worker: standard library and ctypes only; never imports ``grader``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import tempfile
from collections.abc import Iterable
from typing import Any

import _crashfilter  # type: ignore[import-not-found]  # served by the worker's bootstrap finder
import _filesystem  # type: ignore[import-not-found]
import _seccomp  # type: ignore[import-not-found]

try:  # imported here, in the zygote: a worker then loads no module before _pin_import_roots
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_MIB = 1024 * 1024


def harden(channel_fd: int | None, cfg: dict[str, Any]) -> list[str]:
    """Apply every available protection to this process; returns the ones now active.

    ``cfg`` holds ``limits`` (a SandboxLimits dump), ``uid`` (slot uid or None), ``src_dir``,
    ``work_dir``, ``pdeathsig``, ``expected_ppid``, and for the file system ``secret_paths``,
    ``guarded_paths`` and ``fs_isolation`` (see ``_filesystem``).
    """
    if sys.platform == "win32":
        return _harden_windows(cfg)
    assert channel_fd is not None
    limits: dict[str, Any] = cfg["limits"]
    uid: int | None = cfg.get("uid")
    active = ["separate process"]
    active += _close_fds(keep=(0, 1, 2, channel_fd))
    os.setsid()  # own session and process group: terminal signals and killpg never hit the grader
    active.append("own session")
    active += _oom_first()
    active += _rlimits(limits, dedicated_uid=uid is not None)
    mode = _filesystem.isolation_mode(cfg)
    # Landlock's rules name paths by open fds: opened now, while a root grader's worker can still
    # reach a Python installed under a root-only folder; enforced below, once the uid is dropped.
    ruleset = _filesystem.build_landlock(cfg) if mode == "auto" else None
    files: list[str] = []
    if uid is not None and os.geteuid() == 0:
        if not limits["network"]:
            active += _unshare_network()  # needs root, so before the uid drop
        active += _unshare_ipc()
        if ruleset is None and mode != "none":
            files = _filesystem.mount_namespace(cfg)  # the uid drop below takes the power to undo it
        _pin_import_roots()
        active += _drop_privileges(uid)
    if cfg.get("pdeathsig"):
        active += _parent_death_signal(cfg["expected_ppid"])  # after the uid drop, which clears it
    if ruleset is not None:
        _fill_import_caches()
    if ruleset is not None and ruleset.enforce():
        files = _filesystem.landlock_label(ruleset)
    active += files or [_filesystem.NONE_AVAILABLE]
    active += _seccomp.install(allow_network=bool(limits["network"]))
    active += _private_cwd(cfg["work_dir"])
    return active


def _harden_windows(cfg: dict[str, Any]) -> list[str]:
    """Windows: the Job Object the grader put this worker in holds the limits (see _winslot); here, no
    error dialog for a crash, and a private working folder, which is also where temporary files go."""
    active = ["separate process"]
    if _crashfilter.crash_ends_the_process():
        active.append("a crash ends the worker at once (no error dialog, no debugger)")
    for name in ("TEMP", "TMP", "USERPROFILE"):
        os.environ[name] = cfg["work_dir"]
    return active + [_filesystem.NONE_AVAILABLE] + _private_cwd(cfg["work_dir"])


def _close_fds(keep: Iterable[int]) -> list[str]:
    """Close every inherited descriptor except ``keep`` (the zygote's control socket, stray pipes)."""
    keep = set(keep)
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            open_fds = [int(name) for name in os.listdir(listing)]
            break
        except (OSError, ValueError):
            continue
    else:
        open_fds = list(range(os.sysconf("SC_OPEN_MAX")))
    for fd in open_fds:
        if fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own directory fd, already gone
                os.close(fd)
    return ["inherited fds closed"]


def _oom_first() -> list[str]:
    """Ask the kernel OOM killer to pick this worker before the grader."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        return []
    return ["oom_score_adj 1000"]


def _rlimits(limits: dict[str, Any], *, dedicated_uid: bool) -> list[str]:
    if resource is None:  # Windows
        return []
    # RLIMIT_AS would break torch (it reserves virtual memory per thread); DATA counts real allocations.
    # macOS accepts RLIMIT_DATA but does not enforce it, so only Linux claims it.
    wanted: list[tuple[str, int, int, str]] = [
        ("RLIMIT_CPU", limits["cpu_s"], limits["cpu_s"] + 5, f"rlimit cpu {limits['cpu_s']} s"),
        ("RLIMIT_FSIZE", limits["file_size_mb"] * _MIB, -1, f"rlimit fsize {limits['file_size_mb']} MiB"),
        ("RLIMIT_NOFILE", limits["open_files"], -1, f"rlimit nofile {limits['open_files']}"),
        ("RLIMIT_CORE", 0, -1, "rlimit core 0"),
    ]
    if _LINUX:
        wanted.insert(0, ("RLIMIT_DATA", limits["memory_mb"] * _MIB, -1, f"rlimit data {limits['memory_mb']} MiB"))
    if dedicated_uid:  # NPROC counts per real uid: meaningless (or harmful) on a shared uid, ignored for root
        wanted.append(("RLIMIT_NPROC", limits["max_processes"], -1, f"rlimit nproc {limits['max_processes']}"))
    active = []
    for name, soft, hard, label in wanted:
        if _set_rlimit(resource, name, soft, hard):
            active.append(label)
    return active


def _set_rlimit(resource: Any, name: str, soft: int, hard: int) -> bool:
    """Lower one limit; ``hard=-1`` means hard = soft. Never tries to raise an existing hard limit."""
    which = getattr(resource, name, None)
    if which is None:
        return False
    hard = soft if hard < 0 else hard
    _, old_hard = resource.getrlimit(which)
    if old_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, old_hard), min(hard, old_hard)
    try:
        resource.setrlimit(which, (soft, hard))
    except (OSError, ValueError):
        return False
    return True


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _unshare_network() -> list[str]:
    """An empty network namespace: even loopback is unreachable. Refused inside unprivileged Docker."""
    if not _LINUX or _libc().unshare(ctypes.c_int(_CLONE_NEWNET)) != 0:
        return []
    return ["network namespace"]


def _unshare_ipc() -> list[str]:
    """Own System V IPC objects: no shared memory or message queue left for another worker to find."""
    if not _LINUX or _libc().unshare(ctypes.c_int(_CLONE_NEWIPC)) != 0:
        return []
    return ["IPC namespace"]


def _pin_import_roots() -> None:
    """Keep the interpreter's own directories importable after the uid drop.

    A Python installed under a root-only directory (pyenv in a 0700 /root, say) is unreadable to the
    sandbox uid, so any module not imported yet would vanish. A directory fd opened while still root
    stays usable: ``/proc/self/fd/N/...`` resolves without re-checking the ancestors' permissions.
    One fd per sys.path root; loaded packages' ``__path__`` entries are rewritten under it.
    """
    if not _LINUX:
        return
    pinned: dict[str, str] = {}
    for entry in sys.path:
        if entry and os.path.isdir(entry) and not _world_readable(entry):
            fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
            pinned[entry] = f"/proc/self/fd/{fd}"
    if not pinned:
        return

    def moved(path: str) -> str:
        for old, new in pinned.items():
            if path == old or path.startswith(old + os.sep):
                return new + path[len(old) :]
        return path

    sys.path[:] = [moved(p) for p in sys.path]
    for paths in _package_paths():
        paths[:] = [moved(p) if isinstance(p, str) else p for p in paths]
    sys.path_importer_cache.clear()


# The __path__ list of every package loaded in the zygote when it forked, and how many modules were loaded
# then. A fresh fork that reads every module object (over a thousand with torch) copies the pages they live
# on: ~8 ms a worker, which noting them once in the zygote saves.
_forked: tuple[int, list[list[Any]]] | None = None


def note_packages() -> None:
    """In the zygote, just before it forks: remember the loaded packages for :func:`_package_paths`
    (again only when a module was loaded since the last time)."""
    global _forked
    if _forked is None or _forked[0] != len(sys.modules):
        _forked = (len(sys.modules), _scan_packages())


def _package_paths() -> list[list[Any]]:
    """The ``__path__`` list of every loaded package: the zygote's, while no module was loaded since it
    noted them (it loads what a worker uses before it is hardened); else found the slow way."""
    if _forked is not None and _forked[0] == len(sys.modules):
        return _forked[1]
    return _scan_packages()


def _scan_packages() -> list[list[Any]]:
    return [p for m in list(sys.modules.values()) if isinstance(p := getattr(m, "__path__", None), list)]


def _fill_import_caches() -> None:
    """List every import root into its finder's cache before Landlock applies. A folder that holds a
    secret (site-packages holding the grader) is granted entry by entry, so it cannot be listed after:
    without its listing, a package not imported yet (or any, after ``_pin_import_roots``) is not found."""
    from importlib.machinery import PathFinder

    for entry in list(sys.path):
        with contextlib.suppress(Exception):
            PathFinder.find_spec("_step4_fills_the_cache_", [entry])


def _world_readable(path: str) -> bool:
    """Whether any uid can list ``path``: o+rx on it and o+x on every ancestor (groups are dropped)."""
    real = os.path.realpath(path)
    if os.stat(real).st_mode & 0o005 != 0o005:
        return False
    parent = os.path.dirname(real)
    while True:
        if not os.stat(parent).st_mode & 0o001:
            return False
        if parent == os.path.dirname(parent):
            return True
        parent = os.path.dirname(parent)


def _drop_privileges(uid: int) -> list[str]:
    """Become the slot's uid/gid with no supplementary groups; a failure leaves the worker as it was."""
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)  # as root this sets real, effective and saved uid: no way back
    except OSError:
        return []
    if os.getuid() != uid or os.geteuid() != uid:
        return []
    return [f"uid {uid} (no groups)"]


def _parent_death_signal(expected_ppid: int) -> list[str]:
    """SIGKILL this worker if its parent dies (the parent *thread*: only set when that is safe)."""
    if not _LINUX:
        return []
    if _libc().prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        return []
    if os.getppid() != expected_ppid:  # the parent died before the prctl: nobody is left to serve
        os._exit(1)
    return ["parent-death signal"]


def _private_cwd(work_dir: str) -> list[str]:
    """Work in a private scratch directory, never in the submission or the grader's directory."""
    os.chdir(work_dir)
    os.environ["HOME"] = os.environ["TMPDIR"] = work_dir
    tempfile.tempdir = work_dir  # tempfile caches its choice; the zygote may have made it already
    return ["private work dir"]
