"""Writes its own frames on the worker's channel (fd 3) instead of returning."""

import os
import pickle
import struct

CHANNEL = 3


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):  # runs in whoever unpickles this
        return (open, (self.marker, "w"))


def _frame(blob):
    os.write(CHANNEL, struct.pack("!Q", len(blob)) + blob)


def send_pickle(X, marker=""):
    _frame(pickle.dumps(Payload(marker)))
    return X


def send_garbage(X):
    _frame(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}" + os.urandom(64))
    return X


def send_huge_frame(X):
    os.write(CHANNEL, struct.pack("!Q", 1 << 40))  # announce 1 TiB, hoping the grader allocates it
    return X
