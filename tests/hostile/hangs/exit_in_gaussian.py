# gaussian_positional_weights ends its process (a stray sys.exit of a student script); the rest is the
# reference's. On a sidecar worker that is a crash of its own: the check is run again serially (issue 11).
import os as _os


def gaussian_positional_weights(T, bandwidth):
    _os._exit(3)
