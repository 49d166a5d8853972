"""Connects to a listener on the grader's loopback (exfiltration)."""

import socket


def connect(port=0):
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"hidden tests, please")
    return True


def unix_socketpair():
    a, b = socket.socketpair()
    a.close()
    b.close()
    return True
