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
    return bytes(buf) if _recv_into(sock, memoryview(buf), wait, wait_first) == n else None


def _recv_into(sock: socket.socket, view: memoryview, wait: Callable[[], None] | None, wait_first: bool) -> int:
    """Fill ``view`` (see :func:`recv_exact`); returns the bytes read, fewer than asked at end of stream."""
    n = len(view)
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
            return got
        got += k
        pending = False
    return got


def recv_frame(sock: socket.socket, max_bytes: int, wait: Callable[[], None] | None = None) -> bytes | None:
    """Read one frame, or None at end of stream; refuses to allocate more than ``max_bytes``."""
    head = recv_exact(sock, PREFIX.size, wait)
    if head is None:
        return None
    (n,) = PREFIX.unpack(head)
    if n > max_bytes:
        raise FrameTooLarge(f"frame of {n} bytes exceeds the cap of {max_bytes} bytes")
    return recv_exact(sock, n, wait, wait_first=False)  # the body follows its prefix: read before waiting


class FrameReader:
    """The frames of one stream socket, read with as few calls as can be.

    :func:`recv_frame` reads a frame's prefix, then its body: two calls. Here each read takes whatever has
    arrived, up to a frame of :data:`_ONE_CALL_BYTES` (which left in one send): prefix and body then come in
    one call. Where each call is a round trip to a server (Wine: 0.4 to 0.8 ms), that is one of the few of
    every request, on each side. Bytes read past a frame (the worker's import result behind its hello) are
    kept for the next one. A body larger than what came is read in place, to its exact end.
    ``wait`` as in :func:`recv_exact`: it is called only before a read, never while a whole frame is held.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._chunk = bytearray(PREFIX.size + _ONE_CALL_BYTES)
        self._held = b""

    def read(self, max_bytes: int, wait: Callable[[], None] | None = None) -> bytes | None:
        """One frame, or None at end of stream; refuses to allocate more than ``max_bytes``."""
        if not self._fill(PREFIX.size, wait):
            return None
        (n,) = PREFIX.unpack_from(self._held)
        if n > max_bytes:
            raise FrameTooLarge(f"frame of {n} bytes exceeds the cap of {max_bytes} bytes")
        end = PREFIX.size + n
        if len(self._held) >= end:
            blob, self._held = self._held[PREFIX.size : end], self._held[end:]
            return blob
        body = bytearray(n)
        have = len(self._held) - PREFIX.size
        body[:have] = self._held[PREFIX.size :]
        self._held = b""
        view = memoryview(body)[have:]
        return bytes(body) if _recv_into(self._sock, view, wait, False) == len(view) else None

    def _fill(self, n: int, wait: Callable[[], None] | None) -> bool:
        """Hold at least ``n`` bytes (False: the stream ended first); waits only before a read."""
        while len(self._held) < n:
            got = _recv_some(self._sock, memoryview(self._chunk), wait)
            if got == 0:
                return False
            self._held += self._chunk[:got]
        return True


def _recv_some(sock: socket.socket, view: memoryview, wait: Callable[[], None] | None) -> int:
    """Whatever has arrived, up to ``len(view)`` bytes, once there is some (0: end of stream); ``wait`` as in
    :func:`recv_exact`, called before the read."""
    while True:
        if wait is not None:
            wait()
        try:
            return sock.recv_into(view)
        except BlockingIOError:
            if wait is None:
                raise
