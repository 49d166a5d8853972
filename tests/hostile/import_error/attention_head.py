"""Raises at import time."""

import torch  # noqa: F401

raise RuntimeError("this submission cannot be imported")
