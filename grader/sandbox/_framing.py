"""Length-prefixed frames on a stream socket, shared by the grader and the worker.

Imported on both sides (as ``grader.sandbox._framing`` and, inside the worker, as ``_framing``), so
it uses the standard library only and no relative imports.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

PREFIX = struct.Struct("!Q")


class FrameTooLarge(Exception):
    """The peer announced a frame above the size cap; the stream cannot be trusted any further."""


def send_frame(sock: socket.socket, blob: bytes) -> None:
    """Send one frame; a blocking socket, or one with a timeout set by the caller."""
    sock.sendall(PREFIX.pack(len(blob)))
    sock.sendall(blob)


def recv_exact(sock: socket.socket, n: int, wait: Callable[[], None] | None = None) -> bytes | None:
    """Read exactly ``n`` bytes, or None when the peer closed the stream first.

    ``wait`` is called before every read; the grader uses it to block until the socket is readable
    and to raise when a deadline passes or the worker dies, so no read can hang past them.
    """
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if wait is not None:
            wait()
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return None
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket, max_bytes: int, wait: Callable[[], None] | None = None) -> bytes | None:
    """Read one frame, or None at end of stream; refuses to allocate more than ``max_bytes``."""
    head = recv_exact(sock, PREFIX.size, wait)
    if head is None:
        return None
    (n,) = PREFIX.unpack(head)
    if n > max_bytes:
        raise FrameTooLarge(f"frame of {n} bytes exceeds the cap of {max_bytes} bytes")
    return recv_exact(sock, n, wait)
