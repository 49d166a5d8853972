"""Windows Job Objects through ctypes: what keeps a Windows worker's whole tree contained.

A worker is assigned to its own job as soon as it is started (before it runs any student code), and every
process it starts joins that job. The job is created with

- ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``: when the last handle to it closes (the grader closes it, or the
  grader dies, even by ``taskkill /f``), Windows kills every process in it: nothing outlives the grade;
- ``JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION``: an access violation ends the process at once instead of
  opening Windows Error Reporting's dialog and waiting for someone to close it;
- a per-process commit limit (``JOB_OBJECT_LIMIT_PROCESS_MEMORY``): an allocation over it fails in the
  worker (``MemoryError`` / torch's ``not enough memory``), as ``RLIMIT_DATA`` makes it fail on Linux;
- an active-process limit (``JOB_OBJECT_LIMIT_ACTIVE_PROCESS``): a process bomb cannot grow past it.

``TerminateJobObject`` kills the whole tree in one call (no ``os.kill``, no signals); the job's process list
(``JobObjectBasicProcessIdList``) is what the memory watchdog measures, wherever a daemon was reparented.

Imported only on Windows (``sys.platform == "win32"``).
"""

from __future__ import annotations

import ctypes
import sys
from ctypes import wintypes

if sys.platform != "win32":  # pragma: no cover - guarded by the callers
    raise ImportError("grader.sandbox._winjob is for Windows only")

_JobObjectBasicProcessIdList = 3
_JobObjectExtendedLimitInformation = 9

LIMIT_ACTIVE_PROCESS = 0x00000008
LIMIT_PROCESS_MEMORY = 0x00000100
LIMIT_JOB_MEMORY = 0x00000200
LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x00000400
LIMIT_KILL_ON_JOB_CLOSE = 0x00002000

# Process creation flags (subprocess has the first two as constants as well)
CREATE_NEW_PROCESS_GROUP = 0x00000200  # Ctrl-C at the student's console does not reach the worker
CREATE_NO_WINDOW = 0x08000000
CREATE_BREAKAWAY_FROM_JOB = 0x01000000

_PROCESS_SET_QUOTA = 0x0100
_PROCESS_TERMINATE = 0x0001


class _IoCounters(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_ulonglong)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class _BasicLimits(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", wintypes.DWORD),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", wintypes.DWORD),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", wintypes.DWORD),
        ("SchedulingClass", wintypes.DWORD),
    ]


class _ExtendedLimits(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


_MAX_LISTED = 1024


class _ProcessIdList(ctypes.Structure):
    _fields_ = [
        ("NumberOfAssignedProcesses", wintypes.DWORD),
        ("NumberOfProcessIdsInList", wintypes.DWORD),
        ("ProcessIdList", ctypes.c_size_t * _MAX_LISTED),
    ]


_k32 = ctypes.WinDLL("kernel32", use_last_error=True)
_k32.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
_k32.CreateJobObjectW.restype = wintypes.HANDLE
_k32.SetInformationJobObject.argtypes = [wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD]
_k32.SetInformationJobObject.restype = wintypes.BOOL
_k32.QueryInformationJobObject.argtypes = [
    wintypes.HANDLE,
    ctypes.c_int,
    ctypes.c_void_p,
    wintypes.DWORD,
    ctypes.POINTER(wintypes.DWORD),
]
_k32.QueryInformationJobObject.restype = wintypes.BOOL
_k32.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
_k32.AssignProcessToJobObject.restype = wintypes.BOOL
_k32.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
_k32.TerminateJobObject.restype = wintypes.BOOL
_k32.CloseHandle.argtypes = [wintypes.HANDLE]
_k32.CloseHandle.restype = wintypes.BOOL


class JobError(OSError):
    """A Job Object call failed: the containment it gives cannot be promised."""


def _check(ok: int, what: str) -> None:
    if not ok:
        err = ctypes.get_last_error()
        raise JobError(err, f"{what} failed: {ctypes.FormatError(err).strip()} (Windows error {err})")


class Job:
    """One Job Object; every process assigned to it (and everything they start) dies with it."""

    def __init__(self) -> None:
        handle = _k32.CreateJobObjectW(None, None)
        _check(bool(handle), "CreateJobObjectW")
        self._handle: int | None = handle
        self.memory_bytes: int | None = None
        self.max_processes: int | None = None
        self._apply()

    def _apply(self) -> None:
        info = _ExtendedLimits()
        flags = LIMIT_KILL_ON_JOB_CLOSE | LIMIT_DIE_ON_UNHANDLED_EXCEPTION
        if self.memory_bytes is not None:
            flags |= LIMIT_PROCESS_MEMORY
            info.ProcessMemoryLimit = self.memory_bytes
        if self.max_processes is not None:
            flags |= LIMIT_ACTIVE_PROCESS
            info.BasicLimitInformation.ActiveProcessLimit = self.max_processes
        info.BasicLimitInformation.LimitFlags = flags
        _check(
            _k32.SetInformationJobObject(
                self._handle, _JobObjectExtendedLimitInformation, ctypes.byref(info), ctypes.sizeof(info)
            ),
            "SetInformationJobObject",
        )

    def limit(self, *, memory_bytes: int | None, max_processes: int | None) -> None:
        """Cap each process's committed memory and the number of live processes (None: no cap)."""
        self.memory_bytes, self.max_processes = memory_bytes, max_processes
        self._apply()

    def limits(self) -> dict[str, int]:
        """The limits the job reports back (what Windows accepted), and its peak memory so far."""
        info = _ExtendedLimits()
        _check(
            _k32.QueryInformationJobObject(
                self._handle, _JobObjectExtendedLimitInformation, ctypes.byref(info), ctypes.sizeof(info), None
            ),
            "QueryInformationJobObject",
        )
        return {
            "flags": int(info.BasicLimitInformation.LimitFlags),
            "process_memory": int(info.ProcessMemoryLimit),
            "active_processes": int(info.BasicLimitInformation.ActiveProcessLimit),
            "peak_process_memory": int(info.PeakProcessMemoryUsed),
        }

    def assign(self, process_handle: int) -> None:
        _check(_k32.AssignProcessToJobObject(self._handle, process_handle), "AssignProcessToJobObject")

    def pids(self) -> list[int]:
        """The ids of the processes alive in the job now."""
        if self._handle is None:
            return []
        listing = _ProcessIdList()
        ok = _k32.QueryInformationJobObject(
            self._handle, _JobObjectBasicProcessIdList, ctypes.byref(listing), ctypes.sizeof(listing), None
        )
        if not ok and ctypes.get_last_error() != 234:  # ERROR_MORE_DATA: the first _MAX_LISTED are filled
            return []
        return [int(listing.ProcessIdList[i]) for i in range(min(listing.NumberOfProcessIdsInList, _MAX_LISTED))]

    def terminate(self, code: int = 1) -> None:
        """Kill every process in the job now (a call that returns before they are all gone)."""
        if self._handle is not None:
            _k32.TerminateJobObject(self._handle, code)

    def close(self) -> None:
        """Close the handle: with kill-on-close, whatever is still in the job is killed; idempotent."""
        if self._handle is not None:
            _k32.TerminateJobObject(self._handle, 1)
            _k32.CloseHandle(self._handle)
            self._handle = None
