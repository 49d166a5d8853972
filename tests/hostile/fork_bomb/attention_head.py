"""Forks up to 200 sleeping children and reports how many it got."""

import os
import time


def bomb(X):
    started = 0
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        started += 1
    return started
