"""What of the file system a worker may see: Landlock where the kernel has it, else a mount namespace.

The worker may read the Python installation and the installed packages (never the grader package, whose
data holds the reference), its own copy of the submission, and read and write its own work dir. Nothing
else: not the reference or the chaffs (wherever they are installed), not the instructor's checkout, not
another worker's copy, not a batch's output, not another process's /proc. Not even the worker's own code
(grader/sandbox): every module of it is loaded before the layer applies.

- **Landlock** (Linux >= 5.13, no privilege needed): an allowlist of paths, enforced by the kernel on
  this process and everything it starts. Landlock grants a whole directory tree, so a directory that
  holds a secret (site-packages holding ``grader``) is granted entry by entry, leaving the secret out.
- **A mount namespace** (root without Landlock): a tmpfs over every secret folder and over the usual
  places for people's files (/home, /root, /tmp, ...), with the paths the worker needs mounted back.
- Otherwise nothing: file permissions are all there is (private copies 0700, a sandbox uid as root),
  and the protections list says so.

Runs inside the worker: standard library and ctypes only; never imports ``grader``. The grader sends
``secret_paths`` (folders never granted, nor anything inside them), ``guarded_paths`` (never granted
as a whole: the checkout, whose virtual environment may be granted) and ``fs_isolation`` ("auto",
"mount" to skip Landlock, "none" to skip both: for tests) in the worker's config.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import stat
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_LINUX = sys.platform.startswith("linux")

# -- Landlock (include/uapi/linux/landlock.h) -------------------------------------------------------

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a rule on a file may grant
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = READ_FILE | READ_DIR | EXECUTE
DEVICE = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV
EVERYTHING = (1 << 16) - 1


def handled_rights(abi: int) -> int:
    """The file-system rights Landlock ABI ``abi`` knows; everything not granted of these is denied."""
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (not Linux, too old, disabled)."""
    if not _LINUX:
        return 0
    abi = _libc().syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(int(abi), 0)


@dataclass
class Ruleset:
    """A Landlock ruleset being built (while the worker can still open every path) and then enforced."""

    abi: int
    fd: int
    handled: int
    scoped: int
    granted: list[str] = field(default_factory=list)

    def grant(self, path: str, rights: int) -> bool:
        """Allow ``rights`` beneath ``path`` (a directory) or on it (a file); False if it cannot be opened."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if rights & ~_FILE_RIGHTS and not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= _FILE_RIGHTS  # a rule on a file may only grant file rights
            allowed = rights & self.handled
            if not allowed:
                return False
            attr = _PathBeneathAttr(allowed, fd)
            rc = _libc().syscall(
                ctypes.c_long(_SYS_ADD_RULE),
                ctypes.c_int(self.fd),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(attr),
                ctypes.c_uint32(0),
            )
        finally:
            os.close(fd)
        if rc == 0:
            self.granted.append(path)
        return rc == 0

    def enforce(self) -> bool:
        """Restrict this process (and whatever it starts) to the rules; irreversible."""
        libc = _libc()
        ul = ctypes.c_ulong
        try:
            if libc.prctl(_PR_SET_NO_NEW_PRIVS, ul(1), ul(0), ul(0), ul(0)) != 0:
                return False
            rc = libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(self.fd), ctypes.c_uint32(0))
        finally:
            os.close(self.fd)
        return rc == 0


def new_ruleset(abi: int) -> Ruleset | None:
    """An empty ruleset handling every right ``abi`` knows (and, from ABI 6, scoping signals and abstract
    unix sockets to the sandbox); None if the kernel refuses."""
    handled = handled_rights(abi)
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8  # the struct grew with the ABI; the tail is zero
    fd = _libc().syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if fd < 0:
        return None
    return Ruleset(abi, int(fd), handled, scoped)


# -- what the worker needs --------------------------------------------------------------------------

# Never granted whole, even if an import path names them (a .pth can add anything to sys.path): they
# hold other people's files, the grader's temp folders, or other processes.
_TOO_BROAD = (
    *("/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/proc", "/sys", "/run", "/home", "/root", "/mnt", "/media"),
    *("/srv", "/var", "/etc", "/usr", "/opt", "/work", "/autograder"),
)
_LIBRARY_DIRS = ("/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/usr/share/zoneinfo")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_SYSTEM_INFO = ("/sys/devices/system/cpu", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat")
# The mount-namespace fallback hides every top-level folder but the system's own (people's files may be
# anywhere: /home, /srv, /work, /autograder, ...) and these inside them, mounting back what the worker needs.
_SYSTEM_TOP = frozenset(
    {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys", "run", "var", "opt"}
    | {"nix", "gnu", "snap"}  # software stores: what a Python there loads may live anywhere inside
)
_PEOPLES_FILES = ("/var/tmp", "/dev/shm", "/run/user")


def _peoples_folders() -> list[str]:
    try:
        top = [os.path.join("/", name) for name in os.listdir("/") if name not in _SYSTEM_TOP]
    except OSError:
        top = ["/home", "/root", "/tmp", "/srv", "/mnt", "/media", "/opt"]
    folders = [p for p in top + list(_PEOPLES_FILES) if os.path.isdir(p) and not os.path.islink(p)]
    return [_real(p) for p in folders]


@dataclass
class Plan:
    """Paths and the rights the worker gets on them (before secrets are cut out)."""

    read: list[str]  # directories and files: read (and execute)
    devices: list[str]
    src: str
    work: str
    secrets: list[str]
    guarded: list[str]


def _real(path: str) -> str:
    return os.path.realpath(path)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def plan(cfg: dict[str, Any]) -> Plan:
    """The worker's allowlist: the interpreter, its standard library and packages, system libraries, its
    copy and work dir; ``secrets`` are the grader's (package data, checkout, private copies, outputs)."""
    candidates: list[str] = []
    paths = sysconfig.get_paths()
    candidates += [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        candidates.append(os.path.join(prefix, "lib"))  # libpython, a conda prefix's shared libraries
    candidates += [p for p in sys.path if p and os.path.isabs(p) and not p.startswith("/proc/")]
    # the interpreter as invoked (a virtual environment's bin/python is a link) and the venv's pyvenv.cfg,
    # which a child interpreter reads at start
    venv = [os.path.dirname(sys.executable), os.path.join(sys.prefix, "pyvenv.cfg")]
    candidates += [sys.executable, *venv, *_LIBRARY_DIRS, *_SYSTEM_FILES, *_SYSTEM_INFO]
    read = []
    broad = {_real(p) for p in _TOO_BROAD} | {_real(os.path.expanduser("~"))}
    for path in candidates:
        real = _real(path)
        if os.path.exists(real) and real not in broad and real not in read:
            read.append(real)
    secrets = sorted({_real(p) for p in cfg.get("secret_paths", []) if p})
    guarded = sorted({_real(p) for p in cfg.get("guarded_paths", []) if p})
    devices = [_real(d) for d in _DEVICES if os.path.exists(d)]
    return Plan(read, devices, _real(cfg["src_dir"]), _real(cfg["work_dir"]), secrets, guarded)


def cut_out(path: str, secrets: Sequence[str], guarded: Sequence[str] = ()) -> list[str]:
    """``path`` as a list of grants that leave out every secret and guarded folder: ``[path]`` when none
    lies beneath it; ``[]`` when it is inside a secret or is a guarded folder; else its entries,
    recursing into those that lead to one (a site-packages folder holding ``grader``: every other
    entry is granted). A folder strictly inside a guarded one is granted like any other."""
    if path in guarded or any(_within(path, s) for s in secrets):
        return []
    inside = [x for x in (*secrets, *guarded) if _within(x, path) and x != path]
    if not inside:
        return [path]
    if not os.path.isdir(path):
        return []
    grants: list[str] = []
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return []
    below = [x for x in secrets if _within(x, path)]
    for entry in entries:
        if entry.is_symlink():  # its target is granted (or not) on its own
            continue
        grants += cut_out(entry.path, below, [g for g in guarded if _within(g, path)])
    return grants


def _shared_grants(p: Plan) -> list[tuple[str, int]]:
    """The rules every worker of this zygote gets (all but its own copy and work dir), without the ones
    another read grant already covers."""
    reads: list[str] = []
    for path in p.read:
        reads += cut_out(path, p.secrets, p.guarded)
    wide = set(reads)
    covered = [g for g in dict.fromkeys(reads) if not any(a in wide for a in _ancestors(g))]
    rules = [(g, READ if os.path.isdir(g) else READ & _FILE_RIGHTS) for g in covered]
    rules += [(d, DEVICE) for d in p.devices]
    rules.append(("/proc/self", READ_FILE | READ_DIR))  # resolves to the worker's own /proc/<pid> when opened
    return rules


def _ancestors(path: str) -> list[str]:
    found = []
    while (parent := os.path.dirname(path)) != path:
        found.append(parent)
        path = parent
    return found


_cache: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple[str, int]]] = {}


def prepare(cfg: dict[str, Any]) -> None:
    """Work out the shared rules once, in the zygote, before it forks: a worker only opens and adds them
    (with a plain-pip install, site-packages alone is a few hundred entries, ~25 ms to list each time)."""
    if isolation_mode(cfg) == "auto" and landlock_abi() > 0:
        _grants(cfg)


def _grants(cfg: dict[str, Any]) -> list[tuple[str, int]]:
    key = (tuple(cfg.get("secret_paths", ())), tuple(cfg.get("guarded_paths", ())))
    if key not in _cache:
        _cache.clear()  # one grader, one set of secrets: keep one entry
        _cache[key] = _shared_grants(plan(cfg))
    own = [(_real(cfg["src_dir"]), READ_FILE | READ_DIR), (_real(cfg["work_dir"]), EVERYTHING)]
    return [*_cache[key], *own]


def build_landlock(cfg: dict[str, Any]) -> Ruleset | None:
    """The worker's Landlock ruleset, built now (while every path can still be opened: before the uid
    drop) and enforced later with :meth:`Ruleset.enforce`; None where Landlock is unavailable."""
    abi = landlock_abi()
    if abi < 1:
        return None
    ruleset = new_ruleset(abi)
    if ruleset is None:
        return None
    for path, rights in _grants(cfg):
        ruleset.grant(path, rights)
    return ruleset


def landlock_label(ruleset: Ruleset) -> list[str]:
    active = [f"landlock (ABI {ruleset.abi}): reads limited to Python, packages and own copy"]
    if ruleset.scoped:
        active.append("landlock scope: no signals or abstract sockets beyond the sandbox")
    return active


# -- the mount-namespace fallback (root only) -------------------------------------------------------

_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> bool:
    libc = _libc()
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    rc = libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3])
    return rc == 0


def mount_namespace(cfg: dict[str, Any]) -> list[str]:
    """Hide every secret folder and the usual places of people's files behind empty tmpfs mounts, then
    mount back what the worker needs; a private /proc shows only the worker's own processes. Root
    only (CAP_SYS_ADMIN), before the uid drop, which takes the power to undo it. [] if refused."""
    if not _LINUX or os.geteuid() != 0:
        return []
    p = plan(cfg)
    needed = [k for k in p.read if k not in p.guarded and not any(_within(k, s) for s in p.secrets)]
    keep = sorted({*needed, *p.devices, p.src, p.work})
    hide = {*p.secrets, *p.guarded, *_peoples_folders()}
    hide_order = sorted((h for h in hide if os.path.isdir(h) and h not in keep), key=lambda h: h.count(os.sep))
    if _libc().unshare(ctypes.c_int(_CLONE_NEWNS)) != 0:
        return []
    if not _mount(None, "/", None, _MS_REC | _MS_PRIVATE):  # nothing mounted here reaches the grader's view
        return []
    # what must come back, opened before anything is covered: bind mounts take these fds as sources
    held: dict[str, int] = {}
    for path in keep:
        if any(_within(path, h) for h in hide_order):
            with contextlib.suppress(OSError):
                held[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        covered = _cover(hide_order, held)
    finally:
        for fd in held.values():
            os.close(fd)
    if not covered:
        return []
    active = ["mount namespace: grader data, checkout, other copies and people's folders hidden"]
    if _procfs_per_mount() and _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "hidepid=2"):
        active.append("private /proc: other processes' entries hidden")
    return active


def _procfs_per_mount() -> bool:
    """Linux >= 5.8: each proc mount has its own options (before, hidepid would change the host's /proc)."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 8)


def _cover(hide: Sequence[str], held: dict[str, int]) -> int:
    """tmpfs over each folder of ``hide`` (shallowest first), then bind mounts back for the held paths
    whose nearest covering folder it is; returns how many folders were covered."""
    covered = 0
    for folder in hide:
        # a folder already under an earlier tmpfs is hidden as it is; what it must show is mounted back
        if os.path.isdir(folder):
            if not _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=64k,mode=0755"):
                continue
            covered += 1
        for path, fd in sorted(held.items(), key=lambda kv: kv[0].count(os.sep)):
            if max((h for h in hide if _within(path, h)), key=len) == folder:
                _mount_back(path, fd)
    return covered


def _mount_back(path: str, fd: int) -> None:
    is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
    try:
        if is_dir:
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.exists(path):
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
    except OSError:
        return
    _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)


# -- the layer that applies ------------------------------------------------------------------------


def isolation_mode(cfg: dict[str, Any]) -> str:
    mode = str(cfg.get("fs_isolation") or "auto")
    return mode if mode in ("auto", "mount", "none") else "auto"


NONE_AVAILABLE = "file-system isolation: none available on this platform (file permissions only)"
