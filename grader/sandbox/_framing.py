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


# A frame up to this size leaves in one send call with its length prefix: one system call, one packet
# (where each call costs a round trip to a server, as under Wine, the second call was a measurable share
# of every request). A larger frame is sent in two parts rather than copied.
_ONE_CALL_BYTES = 1 << 16


def _parts(blob: bytes) -> tuple[bytes, ...]:
    prefix = PREFIX.pack(len(blob))
    return (prefix + blob,) if len(blob) <= _ONE_CALL_BYTES else (prefix, blob)


def send_frame(sock: socket.socket, blob: bytes) -> None:
    """Send one frame; a blocking socket, or one with a timeout set by the caller."""
    for part in _parts(blob):
        sock.sendall(part)


def send_frame_within(sock: socket.socket, blob: bytes, writable: Callable[[], None]) -> None:
    """Send one frame on a non-blocking socket. ``writable`` is called whenever the socket can take no
    more for now: it blocks until it can, and raises when a deadline passes, so no send can hang."""
    for part in _parts(blob):
        view = memoryview(part)
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                writable()


def recv_exact(
    sock: socket.socket, n: int, wait: Callable[[], None] | None = None, *, wait_first: bool = True
) -> bytes | None:
    """Read exactly ``n`` bytes, or None when the peer closed the stream first.

    Without ``wait`` the socket blocks. With one (the grader's: its socket is non-blocking), ``wait``
    blocks until the socket is readable and raises when a deadline passes or the worker dies; it is
    called before the first read (unless ``wait_first`` is false: the bytes are likely there already)
    and whenever a read finds nothing buffered, so no read can hang past the deadline.
    """
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    pending = wait is not None and wait_first
    while got < n:
        if pending:
            assert wait is not None
            wait()
        try:
            k = sock.recv_into(view[got:], n - got)
        except BlockingIOError:
            if wait is None:
                raise
            pending = True
            continue
        if k == 0:
            return None
        got += k
        pending = False
    return bytes(buf)


def recv_frame(sock: socket.socket, max_bytes: int, wait: Callable[[], None] | None = None) -> bytes | None:
    """Read one frame, or None at end of stream; refuses to allocate more than ``max_bytes``."""
    head = recv_exact(sock, PREFIX.size, wait)
    if head is None:
        return None
    (n,) = PREFIX.unpack(head)
    if n > max_bytes:
        raise FrameTooLarge(f"frame of {n} bytes exceeds the cap of {max_bytes} bytes")
    return recv_exact(sock, n, wait, wait_first=False)  # the body follows its prefix: read before waiting
