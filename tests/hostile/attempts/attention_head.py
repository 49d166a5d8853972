"""A correct head whose own code tries what it does not own, at import and in a call (issue 54): the worker counts
each attempt (reads and writes outside its folders, commands, network) and the grader adds them up for the
instructor. Every attempt is caught here, so the head still answers correctly."""

import contextlib
import os
import socket
import subprocess
from pathlib import Path

import torch


def _try(action):
    with contextlib.suppress(Exception):
        action()


def snoop():
    _try(lambda: open("/etc/passwd").read(1))  # noqa: SIM115  (a read outside its folder)
    _try(lambda: os.listdir("/"))  # a listing outside it
    _try(lambda: Path("/usr/share/../../etc/hostname").read_text())  # through pathlib (standard library frames)
    _try(lambda: open("/tmp/step4-attempts-probe", "w").close())  # a write outside its work dir
    _try(lambda: os.remove("/tmp/step4-attempts-probe"))  # a removal outside it
    _try(lambda: os.system("true"))  # a command
    _try(lambda: subprocess.run(["true"], check=False))  # a program
    _try(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))  # the network
    _try(lambda: open("own_scratch.txt", "w").write("mine"))  # noqa: SIM115  (its own work dir: not counted)
    _try(lambda: torch.load("/nonexistent/weights.pt"))  # a library's own open: not the student's line


snoop()  # at import: 3 reads, 2 writes, 2 commands, 1 connection


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    _try(lambda: open("/etc/hostname").read(1))  # noqa: SIM115  (one more read, in a call)
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (B, T, d) x (d, d_k) -> (B, T, d_k)
    scores = Q @ K.transpose(-2, -1) / K.shape[-1] ** 0.5  # (B, T, T)
    if causal:
        T = X.shape[-2]
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
