"""Hangs forever at import time."""

while True:
    pass
