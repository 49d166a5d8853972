"""Memory bombs: one huge allocation, and a tree of processes that each take a share."""

import os
import time

import torch


def allocate_8gib(X):
    big = torch.ones(8 << 30, dtype=torch.uint8)  # 8 GiB, touched
    return big[:1].to(torch.int64)


def numpy_8gib(X):
    import numpy as np

    return torch.from_numpy(np.ones(1 << 30, dtype=np.float64)[:1])


def fork_hogs(X, n=6, mb=300):
    """Fork n children that each touch mb MiB and wait: no single process is over any limit."""
    for _ in range(n):
        if os.fork() == 0:
            hog = bytearray(mb << 20)
            for i in range(0, len(hog), 4096):
                hog[i] = 1
            time.sleep(60)
            os._exit(0)
    time.sleep(60)
    return X
