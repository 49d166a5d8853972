"""Classes of submissions for the similarity tests and benchmarks/similarity_bench.py.

A class is built from heads written apart (tests/realistic, tests/lines_to_edit, the reference's chaffs and
variants), heads that fill in a public skeleton or retype a tutorial (written here: the skeleton is shared
code, the student's part is their own, and a student retyping it changes a line here and there), short
textbook heads of 5 to 9 lines, and rings: one head and renamed, recommented copies of it.

Everything is seeded (``random.Random(seed)``): the same arguments give the same class. The skeletons marked
``held_out`` and the ring sources of :data:`HELD_OUT_POOLS` are kept for measuring, never for tuning.
"""

from __future__ import annotations

import io
import keyword
import random
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
POOLS = ("realistic", "lines_to_edit", "chaff", "variant")
HELD_OUT_POOLS = ("lines_to_edit",)  # ring sources for the held-out measure
# tests/lines_to_edit holds one head three times, each with another mistake (one_head_*: 97% of their normalised
# code alike): written once, so a class holds one of them
SAME_HEAD = {"one_head_fill", "one_head_unscaled"}


@dataclass(frozen=True)
class Head:
    id: str
    text: str
    origin: str  # where it came from: a pool, a skeleton's name, "textbook", or the id a copy was made of


@dataclass
class Class:
    heads: list[Head]
    rings: list[list[str]] = field(default_factory=list)  # the ids of each ring, its source first

    def texts(self) -> dict[str, str]:
        return {h.id: h.text for h in self.heads}


def pool(name: str) -> list[Head]:
    """The heads written apart, one pool: realistic, lines_to_edit, chaff or variant. A chaff or variant is the
    reference's text with one change; a student who writes the same head writes their own names and comments,
    so it enters a class renamed and recommented (as the reference itself it would be a leak, which the
    verbatim pass is there to find)."""
    if name in ("realistic", "lines_to_edit"):
        files = sorted(f for f in (TESTS / name).glob("*.py") if f.stem not in SAME_HEAD)
        return [Head(f.stem, f.read_text(encoding="utf-8"), name) for f in files]
    from grader.library import known_heads

    return [Head(f"{name}_{h.id}", renamed_copy(h.source(), random.Random(h.id)), name) for h in known_heads(name)]


# -- the student's own part: one idiom per step, as students write them ---------------------------

SCHEMES = (  # q, k, v, scores, weights, out
    ("q", "k", "v", "att", "att", "y"),
    ("Q", "K", "V", "S", "A", "out"),
    ("query", "key", "value", "scores", "probs", "output"),
    ("queries", "keys", "values", "logits", "attn", "context"),
    ("q", "k", "v", "wei", "wei", "out"),
    ("qs", "ks", "vs", "energy", "alpha", "res"),
    ("Qm", "Km", "Vm", "sc", "w", "o"),
)
LENGTH = ("T = X.shape[1]", "B, T, _ = X.shape", "T = X.size(1)", "_, T, _ = X.shape", "T = X.shape[-2]")
PROJECT = (
    "{q} = X @ W_Q\n{k} = X @ W_K\n{v} = X @ W_V",
    "{q}, {k}, {v} = X @ W_Q, X @ W_K, X @ W_V",
    "{q} = torch.matmul(X, W_Q)\n{k} = torch.matmul(X, W_K)\n{v} = torch.matmul(X, W_V)",
    '{q} = torch.einsum("btd,dk->btk", X, W_Q)\n{k} = torch.einsum("btd,dk->btk", X, W_K)\n'
    '{v} = torch.einsum("btd,dv->btv", X, W_V)',
    "{q} = X.matmul(W_Q)\n{k} = X.matmul(W_K)\n{v} = X.matmul(W_V)",
)
DK = ("d_k = {q}.shape[-1]", "d_k = {k}.size(-1)", "dk = {q}.size(-1)", "head_dim = {k}.shape[2]")
INLINE_DK = ("{q}.shape[-1]", "{k}.size(-1)", "{q}.size(2)")
SCORES = (
    "{q} @ {k}.transpose(-2, -1)",
    "{q} @ {k}.transpose(1, 2)",
    "torch.matmul({q}, {k}.transpose(-2, -1))",
    "torch.bmm({q}, {k}.transpose(1, 2))",
    'torch.einsum("bid,bjd->bij", {q}, {k})',
    "{q} @ {k}.mT",
    "{q}.matmul({k}.permute(0, 2, 1))",
)
SCALE = (  # (a line before the scores or "", the factor written after them)
    ("", " / math.sqrt({dk})"),
    ("", " * {dk} ** -0.5"),
    ("", " / {dk} ** 0.5"),
    ("scale = 1.0 / math.sqrt({dk})", " * scale"),
    ("", " / torch.sqrt(torch.tensor({dk}, dtype=X.dtype))"),
    ("", " / np.sqrt({dk})"),
    ("", " / ({dk} ** 0.5)"),
)
MASK = (  # (the mask, how it is applied): True where allowed unless the name says future
    (
        "mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device))",
        '{s} = {s}.masked_fill(~mask, float("-inf"))',
    ),
    ("mask = torch.ones(T, T).tril()", '{s} = {s}.masked_fill(mask == 0, float("-inf"))'),
    (
        "future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)",
        "{s} = {s}.masked_fill(future, -torch.inf)",
    ),
    ("mask = torch.arange(T)[:, None] >= torch.arange(T)[None, :]", '{s} = torch.where(mask, {s}, float("-inf"))'),
    ("mask = torch.tril(torch.ones(T, T)) == 1", "{s} = {s}.masked_fill(~mask, -float('inf'))"),
    ("future = torch.ones(T, T, dtype=torch.bool).triu(1)", '{s}[:, future] = float("-inf")'),
)
SOFTMAX = (
    "{w} = torch.softmax({s}, dim=-1)",
    "{w} = F.softmax({s}, dim=-1)",
    "{w} = {s}.softmax(dim=-1)",
    "{w} = torch.nn.functional.softmax({s}, -1)",
    "{s} = {s} - {s}.max(dim=-1, keepdim=True).values\n{w} = torch.exp({s})\n{w} = {w} / {w}.sum(dim=-1, keepdim=True)",
    "{w} = torch.exp({s} - {s}.amax(-1, keepdim=True))\n{w} = {w} / {w}.sum(-1, keepdim=True)",
)
OUTPUT = (
    "{o} = {w} @ {v}",
    "{o} = torch.matmul({w}, {v})",
    "{o} = torch.bmm({w}, {v})",
    '{o} = torch.einsum("bij,bjd->bid", {w}, {v})',
)
IMPORTS = "import math\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
COMMENTS = (
    "# attention scores",
    "# scaled dot product",
    "# hide the future",
    "# normalise each row",
    "# weighted sum of the values",
    "# (B, T, T)",
    "# causal mask",
    "# TODO check shapes",
    "# from the lecture",
    "# softmax over keys",
)


def own_head(
    rng: random.Random, *, project: bool = True, inp: str = "X", qkv: tuple[str, str, str] | None = None
) -> list[str]:
    """The body of one head as one student writes it: ``inp`` (and W_Q, W_K, W_V when ``project``) and
    ``causal`` in scope, or the projections already named ``qkv``; returns out, weights."""
    q, k, v, s, w, o = rng.choice(SCHEMES)
    if qkv:
        q, k, v = qkv
    names = {"q": q, "k": k, "v": v, "s": s, "w": w, "o": o}
    before, factor = rng.choice(SCALE)
    lines: list[str] = []
    if project:
        lines += rng.choice(PROJECT).format(**names).replace("X", inp).splitlines()
    lines.append(rng.choice(LENGTH).replace("X", inp))
    if rng.random() < 0.5:
        dk = rng.choice(INLINE_DK).format(**names)
    else:
        dk_line = rng.choice(DK).format(**names)
        dk = dk_line.split(" = ")[0]
        lines.append(dk_line)
    if before:
        lines.append(before.format(dk=dk))
    lines.append(f"{s} = " + rng.choice(SCORES).format(**names) + factor.format(dk=dk).replace("X", inp))
    make, apply = rng.choice(MASK)
    if rng.random() < 0.8:
        lines += ["if causal:", "    " + make.replace("X", inp), "    " + apply.format(s=s)]
    else:
        lines += [make.replace("X", inp), apply.format(s=s)]
    lines += rng.choice(SOFTMAX).format(s=s, w=w).splitlines()
    if rng.random() < 0.5:
        lines += [rng.choice(OUTPUT).format(o=o, w=w, v=v), f"return {o}, {w}"]
    else:
        lines.append("return " + rng.choice(OUTPUT).format(o=o, w=w, v=v).split(" = ")[1] + f", {w}")
    return [_commented(rng, line) for line in lines]


def _commented(rng: random.Random, line: str) -> str:
    if rng.random() < 0.25 and not line.rstrip().endswith(":"):
        return f"{line}  {rng.choice(COMMENTS)}"
    return line


def textbook_head(rng: random.Random) -> str:
    """A short head of 5 to 9 statements, a function and its imports, as a textbook writes it."""
    body = own_head(rng)
    return IMPORTS + "\n\ndef causal_self_attention(X, W_Q, W_K, W_V, causal=True):\n" + _indent(body, 1) + "\n"


def _indent(lines: list[str], depth: int) -> str:
    pad = "    " * depth
    return "\n".join(pad + line if line else "" for line in "\n".join(lines).splitlines())


# -- public skeletons and tutorials: shared code around each student's own part -------------------


@dataclass(frozen=True)
class Skeleton:
    """A public skeleton (or a tutorial retyped): ``text`` with ``{body}`` where the student writes the head,
    and ``[[a||b||...]]`` where a student may write a line otherwise (a keeps the skeleton's line, with
    probability 1 - ``vary``; the space after ``||`` is not part of an option, so one may start a line)."""

    name: str
    text: str
    vary: float
    held_out: bool
    project: bool  # whether the student writes the projections (the skeleton's own layers otherwise)
    depth: int  # indentation of {body}
    inp: str = "X"  # the input's name where the body goes


LAB = Skeleton(
    "lab_module",
    '''"""Attention lab, part 2: a causal self-attention head.

Fill in forward(). Do not use nn.MultiheadAttention.
"""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalHead(nn.Module):
    """A single causal self-attention head with separate query, key and value maps."""

    def __init__(self, d_model: int, d_k: int, d_v: int, dropout: float = 0.0):
        super().__init__()
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_v, bias=False)
        [[self.drop = nn.Dropout(dropout)||self.drop = nn.Dropout(p=dropout)||self.drop = nn.Identity()]]

    def forward(self, X: torch.Tensor, causal: bool = True):
        """X: (B, T, d_model) -> (out (B, T, d_v), weights (B, T, T))."""
        [[W_Q, W_K, W_V = self.W_q.weight.T, self.W_k.weight.T, self.W_v.weight.T||W_Q = self.W_q.weight.T
        W_K = self.W_k.weight.T
        W_V = self.W_v.weight.T]]
{body}


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    [[d_model, d_k = W_Q.shape||d_model = W_Q.shape[0]
    d_k = W_Q.shape[1]]]
    head = CausalHead(d_model, d_k, W_V.shape[1])
    [[params = {"W_q.weight": W_Q.T, "W_k.weight": W_K.T, "W_v.weight": W_V.T}||
        params = dict(zip(["W_q.weight", "W_k.weight", "W_v.weight"], [W_Q.T, W_K.T, W_V.T]))]]
    return torch.func.functional_call(head, params, (X, causal))
''',
    vary=0.1,
    held_out=False,
    project=True,
    depth=2,
)

CS_FUNCTIONS = Skeleton(
    "cs_functions",
    '''"""Assignment 1, problem 3: scaled dot-product attention from scratch.

Implement softmax and scaled_dot_product_attention; causal_self_attention is given.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor


def softmax(x: Tensor, dim: int) -> Tensor:
    """Softmax of x along dim, stable for large inputs (subtract the maximum first)."""
    [[x_max = x.max(dim=dim, keepdim=True).values||
        x_max = torch.max(x, dim=dim, keepdim=True)[0]||
        x_max = x.amax(dim=dim, keepdim=True)]]
    [[e = torch.exp(x - x_max)||e = (x - x_max).exp()]]
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(X: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, causal: bool = True):
    """X: (..., T, d_model); W_Q, W_K: (d_model, d_k); W_V: (d_model, d_v). Returns (out, weights)."""
{body}


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    [[return scaled_dot_product_attention(X, W_Q, W_K, W_V, causal=causal)||
        out, weights = scaled_dot_product_attention(X, W_Q, W_K, W_V, causal)
    return out, weights]]
''',
    vary=0.15,
    held_out=False,
    project=True,
    depth=1,
)

TUTORIAL = Skeleton(  # retyped from a video, not handed out: lines differ more often
    "tutorial_head",
    '''[["""Self-attention head from the GPT-from-scratch video."""||"""My attention head."""||]]

import math

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

[[dropout = 0.0||dropout = 0.1||dropout = 0.2]]


class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, n_embd, head_size, value_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, value_size, bias=False)
        [[self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))||
            self.register_buffer("tril", torch.ones(block_size, block_size).tril())]]
        [[self.dropout = nn.Dropout(dropout)||]]

    def forward(self, x, causal=True):
        B, T, C = x.shape
        [[k = self.key(x)||k = self.key(x)  # (B,T,hs)]]
        [[q = self.query(x)||q = self.query(x)  # (B,T,hs)]]
        [[v = self.value(x)||v = self.value(x)  # (B,T,vs)]]
{body}


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    B, T, C = X.shape
    head = Head(C, W_Q.shape[1], W_V.shape[1], T)
    [[params = {"query.weight": W_Q.T, "key.weight": W_K.T, "value.weight": W_V.T}||
        params = {"key.weight": W_K.T, "query.weight": W_Q.T, "value.weight": W_V.T}]]
    return torch.func.functional_call(head, params, (X, causal))
''',
    vary=0.35,
    held_out=False,
    project=False,
    depth=2,
    inp="x",
)

MULTI_HEAD = Skeleton(  # held out: a multi-head module used with one head
    "multi_head_course",
    '''"""Homework 4: multi-head causal attention (use n_heads=1 for the grader)."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, H * d) -> (B * H, T, d)"""
    B, T, D = x.shape
    [[return x.view(B, T, n_heads, D // n_heads).transpose(1, 2).reshape(B * n_heads, T, D // n_heads)||
        return x.reshape(B, T, n_heads, -1).permute(0, 2, 1, 3).reshape(B * n_heads, T, -1)]]


def merge_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B * H, T, d) -> (B, T, H * d)"""
    BH, T, d = x.shape
    [[return x.view(BH // n_heads, n_heads, T, d).transpose(1, 2).reshape(BH // n_heads, T, n_heads * d)||
        return x.reshape(-1, n_heads, T, d).permute(0, 2, 1, 3).reshape(-1, T, n_heads * d)]]


class MultiHeadCausalAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int, d_v: int, n_heads: int = 1):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_v, bias=False)

    def attend(self, X, W_Q, W_K, W_V, causal=True):
        """One head's attention on (B, T, d_model) inputs; returns (out, weights)."""
{body}

    def forward(self, x, causal=True):
        [[out, weights = self.attend(x, self.q_proj.weight.T, self.k_proj.weight.T, self.v_proj.weight.T, causal)||
            W = (self.q_proj.weight.T, self.k_proj.weight.T, self.v_proj.weight.T)
        out, weights = self.attend(x, *W, causal)]]
        return merge_heads(split_heads(out, self.n_heads), self.n_heads), weights


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    model = MultiHeadCausalAttention(W_Q.shape[0], W_Q.shape[1], W_V.shape[1])
    params = {"q_proj.weight": W_Q.T, "k_proj.weight": W_K.T, "v_proj.weight": W_V.T}
    return torch.func.functional_call(model, params, (X, causal))
''',
    vary=0.1,
    held_out=True,
    project=True,
    depth=2,
)

SKELETONS = (LAB, CS_FUNCTIONS, TUTORIAL, MULTI_HEAD)
_CHOICE = re.compile(r"\[\[(.*?)\]\](?!\])", re.S)


def skeleton_head(skeleton: Skeleton, rng: random.Random) -> str:
    """One student's submission on ``skeleton``: its lines (each written otherwise with probability ``vary``)
    around a head of the student's own."""

    def choose(m: re.Match[str]) -> str:
        options = re.split(r"\|\|\s*", m.group(1))  # an option may start on a line of its own
        return options[0] if rng.random() >= skeleton.vary or len(options) == 1 else rng.choice(options[1:])

    text = _CHOICE.sub(choose, skeleton.text)
    qkv = None if skeleton.project else ("q", "k", "v")
    body = _indent(own_head(rng, project=skeleton.project, inp=skeleton.inp, qkv=qkv), skeleton.depth)
    return text.replace("{body}", body)


# -- copies ---------------------------------------------------------------------------------------

FRESH = [
    *("alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa", "lam", "mu", "nu", "xi"),
    *("omicron", "rho", "sigma", "tau", "ups", "phi", "chi", "psi", "omega", "acc", "tmp", "buf", "val", "res"),
    *("aux", "cur", "nxt", "prev", "item", "elem", "node", "part", "piece", "blob", "data", "thing", "stuff", "box"),
]
KEEP = {"self", "cls", "super", "torch", "nn", "F", "np", "math", "Tensor", "X", "W_Q", "W_K", "W_V", "causal"}
CONTRACT = {"causal_self_attention", "gaussian_positional_weights", "gaussian_positional_qk", "score_scale_statistics"}


def renamed_copy(text: str, rng: random.Random, *, edits: int = 0) -> str:
    """``text`` as a copier hands it in: every name it binds renamed (the contract's names kept), its
    comments and docstrings rewritten or dropped, its layout kept, and ``edits`` small changes
    (:func:`edited`). Normalised, the same code but for the edits; verbatim, little in common."""
    import ast
    import builtins

    if edits:
        text = edited(text, rng, edits)
    tree = ast.parse(text)
    defined: set[str] = set()
    keywords: set[tuple[int, int]] = set()  # where a call's keyword argument is named (dim=...): kept
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.keyword) and node.arg:
            keywords.add((node.lineno, node.col_offset))
    kept = KEEP | CONTRACT | set(dir(builtins)) | set(keyword.kwlist)
    names = sorted(n for n in defined - kept if n != "forward" and not n.startswith("__"))
    fresh = rng.sample(FRESH, len(FRESH))
    mapping = {name: f"{fresh[i % len(fresh)]}{i // len(fresh) or ''}" for i, name in enumerate(names)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in mapping:
            mapping[node.name] = mapping[node.name].capitalize()
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (row, start col, end col, new text), one line each
    previous: tokenize.TokenInfo | None = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        (row, col), (end_row, end_col) = tok.start, tok.end
        after_dot = previous is not None and previous.string == "."
        if tok.type == tokenize.NAME and tok.string in mapping and (row, col) not in keywords:
            if not after_dot:  # an attribute keeps its name (a module's parameters are named by it)
                edits.append((row, col, end_col, mapping[tok.string]))
        elif tok.type == tokenize.COMMENT:
            if rng.random() < 0.5:
                edits.append((row, col, end_col, f"# {rng.choice(COMMENTS)[2:]}"))
            elif lines[row - 1].strip() == tok.string:
                edits.append((row, 0, len(lines[row - 1]), ""))  # a comment line dropped
            else:
                edits.append((row, col, end_col, ""))
        elif tok.type == tokenize.STRING and row == end_row and _statement_start(previous):
            edits.append((row, col, end_col, f'"""{rng.choice(DOCSTRINGS)}"""'))
        elif tok.type == tokenize.STRING and _statement_start(previous):  # a docstring over several lines
            lines[row - 1] = lines[row - 1][:col] + f'"""{rng.choice(DOCSTRINGS)}"""\n'
            for r in range(row, end_row):
                lines[r] = ""
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok
    for row, col, end_col, new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end_col:]
    return "".join(line.rstrip() + "\n" if line.strip() else ("\n" if line else "") for line in lines)


INSERTED = (
    'assert X.dim() == 3, "expects (B, T, d)"',
    "X = X.contiguous()",
    "B = X.shape[0]",
    "assert W_Q.shape == W_K.shape",
    "device = X.device",
)


def edited(text: str, rng: random.Random, edits: int) -> str:
    """``text`` with ``edits`` small changes a copier makes to hide: two neighbouring statements that do not
    read each other swapped, or a harmless line of their own added to the head."""
    import ast

    lines = text.splitlines()
    func = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "causal_self_attention")
    for _ in range(edits):
        tree = ast.parse("\n".join(lines))
        swaps = [pair for node in ast.walk(tree) for pair in _swappable(getattr(node, "body", None))]
        if swaps and rng.random() < 0.6:
            a, b = rng.choice(swaps)
            lines[a.lineno - 1], lines[b.lineno - 1] = lines[b.lineno - 1], lines[a.lineno - 1]
        else:
            first = func.body[0]
            indent = lines[first.lineno - 1][: first.col_offset]
            at = first.lineno - 1 if not isinstance(first, ast.Expr) else first.end_lineno or first.lineno
            lines.insert(at, indent + rng.choice(INSERTED))
            func = next(
                n
                for n in ast.parse("\n".join(lines)).body
                if isinstance(n, ast.FunctionDef) and n.name == "causal_self_attention"
            )
    return "\n".join(lines) + "\n"


def _swappable(body: object) -> list[tuple[object, object]]:
    """Neighbouring one-line assignments in ``body`` where neither reads or writes what the other writes."""
    import ast

    if not isinstance(body, list):
        return []
    out = []
    for a, b in zip(body, body[1:], strict=False):
        if not all(isinstance(s, ast.Assign) and s.lineno == s.end_lineno for s in (a, b)):
            continue
        wa = {n.id for t in a.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        wb = {n.id for t in b.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        ra = {n.id for n in ast.walk(a.value) if isinstance(n, ast.Name)}
        rb = {n.id for n in ast.walk(b.value) if isinstance(n, ast.Name)}
        if not (wa & (rb | wb) or wb & ra):
            out.append((a, b))
    return out


DOCSTRINGS = ("My solution.", "Attention.", "Step 4 code.", "Head.", "Causal attention head.")


def _statement_start(previous: tokenize.TokenInfo | None) -> bool:
    return previous is None or previous.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE)


# -- a class --------------------------------------------------------------------------------------


def build_class(
    n: int,
    *,
    ring: int = 0,
    edits: int = 0,
    seed: int = 0,
    held_out: bool = False,
    skeleton_share: float = 0.3,
    textbook_share: float = 0.15,
) -> Class:
    """``n`` submissions: about ``skeleton_share`` on the skeletons (the held-out one only when ``held_out``),
    ``textbook_share`` short textbook heads, the rest drawn from the pools (then more textbook heads when
    the pools run out); with ``ring`` > 1, one of them (from the held-out pools when ``held_out``) and
    ``ring - 1`` renamed copies of it replace as many others, each with ``edits`` small changes of its own."""
    rng = random.Random(seed)
    skeletons = [s for s in SKELETONS if s.held_out == held_out]
    written = [h for name in POOLS for h in pool(name)]
    rng.shuffle(written)
    n_skeleton = round(skeleton_share * n)
    n_textbook = round(textbook_share * n)
    n_written = min(len(written), n - n_skeleton - n_textbook)
    heads = written[:n_written]
    weights = [3, 2, 1][: len(skeletons)]  # one widely followed skeleton, others by fewer students
    for k in range(n_skeleton):
        sk = rng.choices(skeletons, weights=weights)[0]
        heads.append(Head(f"{sk.name}_{k:03d}", skeleton_head(sk, rng), sk.name))
    while len(heads) < n:
        heads.append(Head(f"textbook_{len(heads):03d}", textbook_head(rng), "textbook"))
    rings: list[list[str]] = []
    if ring > 1:
        sources = [h for h in heads if h.origin in (HELD_OUT_POOLS if held_out else ("realistic",))]
        source = rng.choice(sources)
        others = [h for h in heads if h is not source]
        rng.shuffle(others)
        dropped = {h.id for h in others[: ring - 1]}
        heads = [h for h in heads if h.id not in dropped]
        copies = [
            Head(f"copier_{j}_{source.id}", renamed_copy(source.text, rng, edits=edits), source.id)
            for j in range(ring - 1)
        ]
        heads += copies
        rings.append([source.id] + [c.id for c in copies])
    rng.shuffle(heads)
    return Class(heads, rings)
