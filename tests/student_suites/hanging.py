"""A test that hangs and defends itself against the per-test alarm."""

import signal

import attention_head  # noqa: F401


def test_forever():
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        pass
