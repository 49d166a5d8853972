"""Pickle-free messages between the grader and a worker: one safetensors blob per message.

A message is a JSON header (carried in the safetensors metadata under ``"header"``) plus named plain
tensors. Decoding never runs code: safetensors validates offsets and shapes, and we additionally
cap the size and whitelist dtypes. This module is imported on both sides, so it must not import
``grader`` (the worker never sees the grader package).
"""

from __future__ import annotations

import json
import struct
import sys
from typing import Any

import torch
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

ALLOWED_DTYPES = frozenset({torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool})


class WireError(ValueError):
    """A message that is malformed, oversized or holds something other than plain tensors."""


# safetensors' names for the dtypes we ship (its header format: https://github.com/huggingface/safetensors)
_ST_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.bool: "BOOL",
}


def encode(header: dict[str, Any], tensors: dict[str, torch.Tensor]) -> bytes:
    """Pack ``header`` (JSON-serialisable) and ``tensors`` into one safetensors blob.

    The blob is written here directly (an 8-byte header length, the JSON header, the raw little-endian
    bytes): ``safetensors.torch.save`` spends about 0.1 ms per message on numpy/ctypes bookkeeping, and a
    grade sends hundreds of small messages each way. Decoding, where the bytes come from student code,
    stays with the safetensors library.
    """
    plain = {}
    for name, t in tensors.items():
        if type(t) is not torch.Tensor:  # subclasses could carry behaviour; we ship data only
            raise WireError(f"{name!r} is a {type(t).__name__}, not a plain torch.Tensor")
        if t.dtype not in ALLOWED_DTYPES:
            raise WireError(f"{name!r} has dtype {t.dtype}, which is not transferred")
        if name == "__metadata__":
            raise WireError("'__metadata__' is a reserved name in a safetensors header")
        plain[name] = t if _plain(t) else t.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
    text = json.dumps(header, allow_nan=True)
    if sys.byteorder != "little":  # pragma: no cover - the format is little-endian; the library swaps
        return _st_save({k: t.clone() for k, t in plain.items()}, metadata={"header": text})
    entries: dict[str, Any] = {"__metadata__": {"header": text}}
    chunks: list[bytes] = []
    offset = 0
    for name, t in plain.items():
        data = (t.view(torch.int16) if t.dtype is torch.bfloat16 else t).numpy().tobytes()  # C order: the layout
        entries[name] = {
            "dtype": _ST_DTYPES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    head = json.dumps(entries, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # safetensors pads its header to a multiple of 8 with spaces
    return b"".join([struct.pack("<Q", len(head)), head, *chunks])


def _plain(t: torch.Tensor) -> bool:
    """Whether ``t`` can be read as it is (a CPU tensor, contiguous, no autograd, no conjugate or negative bit):
    most tensors sent are, and the five tests cost a fifth of the copy chain that makes one so."""
    return t.is_cpu and not t.requires_grad and t.is_contiguous() and not t.is_neg() and not t.is_conj()


def decode(blob: bytes, *, max_bytes: int) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Unpack a blob made by :func:`encode`, refusing anything that is not exactly that."""
    if len(blob) > max_bytes:
        raise WireError(f"message of {len(blob)} bytes exceeds the cap of {max_bytes} bytes")
    if len(blob) < 8:
        raise WireError("message too short to be a safetensors blob")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise WireError("header length points past the end of the message")
    try:
        raw_header = json.loads(blob[8 : 8 + n])
        header = json.loads(raw_header.get("__metadata__", {}).get("header", "null"))
        tensors = _st_load(blob)
    except Exception as exc:  # any parse failure is the sender's fault, never ours to propagate
        raise WireError(f"bad message format: {type(exc).__name__}: {exc}") from None
    if not isinstance(header, dict):
        raise WireError("message has no JSON object header")
    for name, t in tensors.items():
        if type(t) is not torch.Tensor or t.dtype not in ALLOWED_DTYPES:
            raise WireError(f"tensor {name!r} has unsupported type or dtype {t.dtype}")
    return header, tensors
