"""Every way of ending the process from inside a call."""

import ctypes
import os
import sys


def os_exit(X):
    os._exit(0)


def sys_exit(X):
    sys.exit(0)


def keyboard_interrupt(X):
    raise KeyboardInterrupt


def segfault(X):
    return ctypes.string_at(0)


def abort(X):
    os.abort()


def fine(X):
    return X + 1


def kill_parent(X):
    """SIGKILL the process that forked this worker (the zygote), then linger."""
    import signal
    import time

    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(5)
    return X
