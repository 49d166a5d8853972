"""Windows: an unhandled exception (an access violation) ends this process at once, with the exception's code
as its exit code: no Windows Error Reporting dialog, no debugger.

Set by every worker (``_harden``) and by a standby before it imports torch (``_zygote``), so that the grader
sees a crash as an exit instead of waiting on a process a debugger holds; tests/windows_driver.py sets it in
its own process too. Standard library and ctypes only: served to workers by the bootstrap finder, and
importable as ``grader.sandbox._crashfilter``.
"""

from __future__ import annotations

import ctypes

# A top-level exception filter that answers EXCEPTION_EXECUTE_HANDLER (1): an unhandled exception (an access
# violation) then ends the process with the exception's code as its exit code, without Windows Error
# Reporting's dialog or a debugger (Wine starts winedbg otherwise, whatever the error mode). Machine code,
# not a ctypes callback: it runs on whichever thread crashed, with no interpreter state to rely on.
_RETURN_ONE = {"AMD64": b"\xb8\x01\x00\x00\x00\xc3", "ARM64": bytes.fromhex("20008052c0035fd6")}  # mov 1; ret


_filtered = False


def crash_ends_the_process() -> bool:
    """Set the filter above in this process (once); False where it could not be set (not Windows, an unknown
    machine, a call refused: a worker's job then still has its die-on-unhandled-exception flag)."""
    global _filtered
    if _filtered:
        return True
    try:
        import platform
        from ctypes import wintypes

        code = _RETURN_ONE[platform.machine().upper()]
        k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        # SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX
        k32.SetErrorMode(0x0001 | 0x0002 | 0x8000)
        k32.VirtualAlloc.restype = ctypes.c_void_p
        k32.VirtualAlloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, wintypes.DWORD, wintypes.DWORD]
        k32.VirtualProtect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, wintypes.DWORD, ctypes.c_void_p]
        k32.SetUnhandledExceptionFilter.argtypes = [ctypes.c_void_p]
        k32.SetUnhandledExceptionFilter.restype = ctypes.c_void_p
        page = k32.VirtualAlloc(None, 4096, 0x3000, 0x04)  # MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE
        if not page:
            return False
        ctypes.memmove(page, code, len(code))
        old = wintypes.DWORD()
        if not k32.VirtualProtect(page, 4096, 0x20, ctypes.byref(old)):  # PAGE_EXECUTE_READ
            return False
        k32.FlushInstructionCache(k32.GetCurrentProcess(), ctypes.c_void_p(page), ctypes.c_size_t(len(code)))
        k32.SetUnhandledExceptionFilter(page)
        _filtered = True
    except Exception:  # an unknown machine, or a call refused: the job's die-on-exception flag remains
        return False
    return True
