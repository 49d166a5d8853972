"""A minimal stand-in for grader/sandbox/_ops.py, so these tests do not depend on the real ops.

Loaded inside the worker by path (``Sandbox(..., ops=FAKE_OPS)``); standard library and torch only.

    call   params {"fn": name, "args": [tensor names], "kwargs": {...}, "raw": bool}
           -> tensors r0, r1, ... for tensor results; header "values" for JSON scalars and strings.
           With "raw", whatever the function returned is handed to the encoder as the tensor dict,
           to show that a non-tensor result becomes a clean error reply.
    echo   -> the params and tensors, unchanged
"""

from __future__ import annotations

from typing import Any

import torch


def dispatch(module: Any, op: str, params: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Any:
    if op == "echo":
        return {"params": params}, dict(tensors)
    if op != "call":
        raise ValueError(f"unknown op {op!r}")
    fn = getattr(module, params["fn"])
    result = fn(*[tensors[name] for name in params.get("args", [])], **params.get("kwargs", {}))
    if params.get("raw"):
        return {"raw": True}, result
    items = result if isinstance(result, tuple) else (result,)
    out = {f"r{i}": v for i, v in enumerate(items) if type(v) is torch.Tensor}
    values = {f"r{i}": v for i, v in enumerate(items) if isinstance(v, (bool, int, float, str))}
    return {"n": len(items), "values": values}, out
