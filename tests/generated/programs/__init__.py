"""Correct heads written as people write them (issue 52): the programs the mutation kinds break.

Each program is a complete ``attention_head.py`` that defines ``causal_self_attention(X, W_Q, W_K, W_V, causal=True)``
and computes the lecture's head exactly (float64 agreement with it is a test), in one of many shapes: ``nn.Module``
heads driven through ``torch.func.functional_call`` or holding the tensors they are given, functional heads with and
without helpers, a copy of the docs' SDPA reference, einsum, NumPy-built masks, per-sequence and per-query loops,
Python double loops, a tiled online softmax, ``vmap``, multi-head skeletons used with one head, packed QKV, configs
(a dataclass, ``**kwargs``, a module-level dict, ``functools.partial``). None is a copy of ``styles.py``'s sources.

A program's ``structure`` says what it is built as; its ``library`` the array library its computation uses.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Program:
    name: str
    structure: str  # module | functional | einsum | loop | tiled | multihead | packed | config | class
    library: str  # torch | numpy (NumPy builds a mask or a bias; the computation stays in torch)
    source: str


from ._functional import FUNCTIONAL  # noqa: E402
from ._loops import LOOPS  # noqa: E402
from ._misc import MISC  # noqa: E402
from ._modules import MODULES  # noqa: E402

PROGRAMS: dict[str, Program] = {p.name: p for p in (*MODULES, *FUNCTIONAL, *LOOPS, *MISC)}

__all__ = ["PROGRAMS", "Program"]
