"""The line to edit when it is not the departing value's own: where an operand took the wrong input, where a mask's
pattern was made, where a number that had to change was bound, where a constant brought NaN in."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import replace
from typing import Any

import torch

from grader.diagnosis._relations import _masking_of, describe_fit
from grader.diagnosis._stages import _stage_shaped
from grader.diagnosis._trace import PROBE_B, Bound, Record, Trace, _ancestors, _equal, _floating, _numpy_reads, where_of

# A fill this far below every score hides its entries at every scale the probes take (torch.finfo(dtype).min, as
# Hugging Face writes it): never the number that had to change, even where the pattern it fills is wrong.
HIDES = 1e30


def _scores_line(trace: Trace, r: Record, good: dict[int, str]) -> Record | None:
    """The record ``r`` was computed from that first holds the scores Q K^T (a scale forgotten altogether belongs
    where they are computed, ``q @ k.T / sqrt(d_k)``, not at a padding mask that left them as they were)."""
    found = [int(a[2:]) for a in _ancestors(trace, r) if good.get(int(a[2:])) == "scores"]
    if not found:
        return None
    by = {x.index: x for x in trace.records}
    return by.get(min(found))


def _operand_site(trace: Trace, tensors: dict[str, torch.Tensor], role: str, source: str) -> dict[str, Any] | None:
    """Where the operand ``role`` (Q, K or V) of the head's product took ``source`` (the input X, or the other
    projection) in place of its own projection: the first line of its chain that reads that input (``v =
    x.view(...)``, ``"k_proj.weight": W_Q.T``), the line binding a name to the input itself (``q = X``), or the
    product's own line when it reads the input there (``w @ X``)."""
    trace = _numpy_reads(trace)
    found = _product(trace, tensors, role, source)
    if found is None:
        return _named_array(trace, tensors, source, role)
    p, name = found
    wanted = "in:X" if source == "X" else f"in:{source}"
    if name.startswith("in:"):
        return _bound(trace, p, name, role == "Q") or where_of(p)
    by = {f"v:{x.index}": x for x in trace.records}
    if by[name].reads == (wanted,) and (bound := _bound(trace, p, wanted, role == "Q")) is not None:
        return bound  # one sequence of the input, bound to the operand's name (``v = x`` of ``x = X[b]``)
    if by[name].numpy:  # an array named for the operand (``v = x``), or the input's own array read there
        own = by[name]  # the input's own array is X converted on its line; ``k = x @ W_Q.numpy()`` converts W_Q
        converted = source == "X" and any(
            x.line == own.line and x.file == own.file and wanted in x.reads for x in trace.records
        )
        return where_of(p if converted else own)
    chain = [by[a] for a in (_ancestors(trace, by[name]) | {name}) if a in by]
    reading = sorted((x for x in chain if wanted in x.reads), key=lambda x: x.index)
    if not reading:
        return where_of(by[name])
    return _bound(trace, reading[0], wanted, role == "Q") or where_of(reading[0])


def _named_array(trace: Trace, tensors: dict[str, torch.Tensor], source: str, role: str = "V") -> dict[str, Any] | None:
    """A NumPy head's array bound to ``source``'s value (X, or X W_Q) under another name than the one its
    conversion from torch gave it (``v = x``), when no recorded product says which operand it became (``return
    torch.from_numpy(weights @ v)`` binds no array): the last such line. A projection's array (``k = x @
    W_Q.numpy()``, its product scaled wrongly besides) is its own line; of two such arrays read on one line (``q
    @ k.T``), the first in its code is the queries', the last the keys'."""
    X = tensors["X"]
    wrong = X if source == "X" else X @ tensors[source]
    wanted = "in:X" if source == "X" else f"in:{source}"
    named = [
        r
        for r in trace.records
        if r.numpy
        and r.value is not None
        and r.value.shape == wrong.shape
        and _equal(r.value, wrong)
        and (
            source != "X" or not any(x.line == r.line and x.file == r.file and wanted in x.reads for x in trace.records)
        )
    ]
    if len(named) > 1 and source != "X":
        ids = {f"v:{r.index}": r for r in named}
        for x in trace.records:
            both = [ids[n] for n in x.reads if n in ids]
            if len(both) > 1 and all(r.var for r in both):
                words = re.findall(r"\w+", x.code)
                ranked = sorted(both, key=lambda r: words.index(r.var) if r.var in words else len(words))
                return where_of(ranked[0] if role == "Q" else ranked[-1])
    return where_of(named[-1]) if named else None


def _thrown_away(trace: Trace, r: Record) -> Record | None:
    """In a NumPy head (the tracer sees arrays only as the locals they are bound to): a statement on a line of its
    own that calls something with an array ``r`` reads and binds nothing (``np.where(future, -np.inf, s)``),
    between the line that bound that array and ``r``'s: the line whose result was meant to change it. Its
    ``var`` is the array's name."""
    if not r.numpy:
        return None
    full = _numpy_reads(trace)
    by = {f"v:{x.index}": x for x in full.records}
    mine = next((x for x in full.records if x.index == r.index), r)
    lines = trace.context.get(r.file, {})
    for name in mine.reads:
        src = by.get(name)
        if src is None or not src.numpy or src.file != r.file or not src.var or src.line >= r.line:
            continue
        for n in range(src.line + 1, r.line):
            text = lines.get(n, "").split("#", 1)[0].strip()
            try:
                body = ast.parse(text).body if text else []
            except SyntaxError:  # a line of a statement written over several
                continue
            call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and not (isinstance(call.func, ast.Name) and call.func.id in ("print", "breakpoint"))
                and src.var in {x.id for x in ast.walk(call) if isinstance(x, ast.Name)}
            ):
                return replace(r, line=n, code=lines[n].strip(), var=src.var)
    return None


def _bound(trace: Trace, r: Record, name: str, first: bool) -> dict[str, Any] | None:
    """The line that bound a name ``r``'s line reads to input ``name`` itself (``k = X`` for ``q @ k.T``): of
    those it reads, the first in its code (the queries' operand) when ``first``, else the last."""
    words = re.findall(r"\w+", r.code)
    named = [
        a
        for a in trace.aliases
        if a.get("input") == name and str(a.get("var", "")) in words and (not a.get("param") or _sole(trace, r, a))
    ]
    if not named:
        return None
    at = sorted(named, key=lambda a: words.index(str(a.get("var", ""))))
    return at[0] if first else at[-1]


def _sole(trace: Trace, r: Record, alias: dict[str, Any]) -> bool:
    """Whether the parameter ``alias`` names (bound to an input where a caller passed it) is read at ``r``'s line
    alone among the recorded lines of its file: then the argument passed is what has to change, at the caller's
    line (``attention_2d(x, W_Q, W_Q, W_V)`` for ``k = x @ w_k``); a parameter read elsewhere too holds the right
    input, and the line that reads it is the one to edit (``out = wei @ x`` beside ``k = self.key(x)``)."""
    var = str(alias.get("var", ""))
    return not any(
        x.file == r.file and x.line != r.line and var in re.findall(r"\w+", x.code.split("#", 1)[0])
        for x in trace.records
    )


def _product(trace: Trace, tensors: dict[str, torch.Tensor], role: str, source: str) -> tuple[Record, str] | None:
    """The product that multiplies in operand ``role`` (the scores Q K^T for Q and K, A V for V) where that operand
    is ``source``'s (X, or X W_Q / X W_K), and the read that holds it."""
    X = tensors["X"]
    wrong = X if source == "X" else X @ tensors[source]
    by = {f"v:{x.index}": x for x in trace.records}
    T = X.shape[1]

    def value(name: str) -> torch.Tensor | None:
        v = tensors.get(name[3:]) if name.startswith("in:") else by[name].value if name in by else None
        return v.squeeze(1) if v is not None and v.dim() == 4 and v.shape[1] == 1 else v

    for p in trace.records:
        out = value(f"v:{p.index}")
        if len(p.reads) < 2 or out is None or out.dim() != 3 or out.shape[1] != T:
            continue
        first, last = value(p.reads[0]), value(p.reads[-1])
        if first is None or last is None:
            continue
        if role == "V":
            if tuple(first.shape[-2:]) != (T, T) or out.shape[-1] == T:
                continue
            got, name = last, p.reads[-1]
        else:
            if tuple(out.shape[-2:]) != (T, T):
                continue
            got, name = (first, p.reads[0]) if role == "Q" else (last, p.reads[-1])
        for form in (wrong, wrong.transpose(-2, -1)):
            if got.shape == form.shape and _equal(got, form):
                return p, name
    return None


def _mask_pattern(trace: Trace, r: Record, hidden: torch.Tensor) -> Record | None:
    """The (T, T) mask ``r`` read whose entries (or their complement) are the ``hidden`` pattern."""
    by = {f"v:{x.index}": x for x in trace.records}
    earlier = [x for x in trace.records if x.index < r.index] if r.numpy else [by[n] for n in r.reads if n in by]
    for x in reversed(earlier):
        if _same_pattern(x, hidden):
            return x
    return None


def _same_pattern(x: Record, hidden: torch.Tensor) -> bool:
    """Whether ``x``'s value, cut to (T, T) where it is larger (a buffer of the block size), is nonzero exactly on
    ``hidden`` or exactly off it."""
    v, T = _one_matrix(x.value), hidden.shape[-1]
    if v is None or v.shape[0] < T or v.shape[1] < T or v.dtype.is_complex:
        return False
    nz = v[:T, :T] != 0
    return bool(torch.equal(nz, hidden) or torch.equal(nz, ~hidden))


def _one_matrix(v: torch.Tensor | None) -> torch.Tensor | None:
    """``v`` as one matrix: a matrix itself, or a stack of equal ones (a mask of shape (B, 1, T, T) that Hugging Face
    and Flax code broadcast over the batch and the heads); None for anything else."""
    if v is None or v.dim() < 2:
        return None
    if v.dim() == 2:
        return v
    stack = v.reshape(-1, *v.shape[-2:])
    return stack[0] if bool((stack == stack[:1]).all()) else None


def _pattern_origin(trace: Trace, x: Record | None, T: int) -> Record | None:
    """The line that made the pattern of mask ``x``: back through the values it was computed from that hold the
    same pattern (``self.tril[:T, :T] == 0`` to ``torch.tril(torch.ones(block, block))``), the first."""
    if x is None or x.value is None:
        return x
    matrix = _one_matrix(x.value)
    if matrix is None:
        return x
    hidden = matrix[:T, :T] != 0
    by = {f"v:{y.index}": y for y in trace.records}
    while True:
        sources = [by[n] for n in x.reads if n in by and _same_pattern(by[n], hidden)]
        if len(sources) != 1 or len(x.reads) != 1:
            return x
        x = sources[0]


def _mask_source(trace: Trace, r: Record, stages: dict[str, torch.Tensor]) -> Record | None:
    """The line that built the mask a departing masked value was made with, when the mask is what is wrong: a
    constant added to the scores (``r`` = scaled + it), or the pattern a masked_fill or where applied."""
    if r.value is None or "scaled" not in stages or r.value.shape != stages["scaled"].shape:
        return None
    T = r.value.shape[-1]
    by = {f"v:{x.index}": x for x in trace.records}
    earlier = [x for x in trace.records if x.index < r.index] if r.numpy else [by[n] for n in r.reads if n in by]
    masks = [x for x in earlier if _square_mask(x, T) or _broadcast_mask(x, T)]
    s = stages["scaled"].double()
    for x in reversed(masks):
        assert x.value is not None
        m = x.value if x.value.dim() < 4 else _one_matrix(x.value)
        if m is not None and m.dtype.is_floating_point and _equal(r.value, s + m.double()):
            return x
    masking = _masking_of(r.value, stages)
    if masking is None or masking.kind != "hides":
        return None
    if r.numpy:  # the arrays the line reads by name (``np.where(future, -np.inf, scores)``), its only dataflow
        named = _numpy_reads(trace)
        reads = next((x.reads for x in named.records if x.index == r.index), ())
        masks = [x for x in masks if f"v:{x.index}" in reads]
    pattern = [x for x in masks if x.value is not None and x.value.dtype == torch.bool]
    return _pattern_origin(trace, pattern[-1], T) if pattern else None


def _square_mask(x: Record, T: int) -> bool:
    """A (T, T) value, or a stack of them that is not one per sequence (a (B, T, T) value is the scores' shape)."""
    v = x.value
    if v is None or tuple(v.shape[-2:]) != (T, T):
        return False
    return v.dim() == 2 or (v.dim() == 3 and v.shape[0] != PROBE_B)


def _broadcast_mask(x: Record, T: int) -> bool:
    """A (B, 1, T, T) mask, the same for every sequence (Hugging Face's, Flax's ``make_causal_mask``; a BERT-style
    additive ``(1.0 - mask) * -10000.0``)."""
    v = x.value
    return (
        v is not None and v.dim() == 4 and v.shape[-3] == 1 and v.shape[-2:] == (T, T) and (_one_matrix(v) is not None)
    )


def _applied_mask(trace: Trace, r: Record) -> Record | None:
    """Where the boolean (T, T) pattern ``r``'s line applies (a masked_fill's, a where's) was made (a torch head's;
    ``_pattern_origin``)."""
    if r.value is None or r.value.dim() < 2 or r.numpy:
        return None
    T = r.value.shape[-1]
    by = {f"v:{x.index}": x for x in trace.records}
    masks = [
        x
        for n in r.reads
        if (x := by.get(n)) is not None
        and x.value is not None
        and x.value.dtype == torch.bool
        and x.value.dim() >= 2
        and tuple(x.value.shape[-2:]) == (T, T)
    ]
    return _pattern_origin(trace, masks[-1], T) if masks else None


def _flag_site(trace: Trace, r: Record) -> Record | None:
    """Where the mask ``r``'s line applies whatever the flag was made, when the flag belongs there (``_flagged``)."""
    source = _applied_mask(trace, r)
    return source if source is not None and _flagged(source, r) else None


def _flagged(source: Record, use: Record) -> bool:
    """Whether the line that made a mask (``source``), not the line that applies it (``use``), is in a function
    with the causal flag in reach: a mask applied whatever the flag is then made where the flag belongs (``mask =
    tril(...)`` passed to a helper that has no flag), else it is applied where the flag belongs (a buffer made in
    ``__init__``, applied in ``forward(x, causal)``)."""
    return source.flag and not use.flag


Wrong = list[tuple[float, tuple[float, ...]]]  # a number a value was made with, and the numbers right for its role


def _wrong_numbers(
    r: Record, due: str, stages: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor], causal: bool
) -> Wrong:
    """The constants ``r`` was made with where the lecture has others, each with the numbers a name that made it
    holds rightly: the factor the scores were scaled by, where 1/sqrt(d_k) belongs (a name holding d_k, sqrt(d_k),
    1/d_k or 1/sqrt(d_k) is right, its use is not); the finite number the future keys were filled with or had
    added, where -inf belongs."""
    assert r.value is not None
    v, d_k = r.value.double(), tensors["W_Q"].shape[1]
    out: Wrong = []
    if due == "masked" and "masked" not in stages:
        due = "scaled"
    expected = stages.get(due)
    if due in ("scaled", "masked") and expected is not None and v.shape == expected.shape:
        said = describe_fit(v, expected)
        if said is not None and said.kind == "factor" and said.factor is not None:
            out.append((said.factor * d_k**-0.5, (d_k, d_k**0.5, 1 / d_k, d_k**-0.5)))
    if due in ("Q", "K") and expected is not None and v.shape == expected.shape:  # ``q = q * self.scale``: the
        said = describe_fit(v, expected)  # factor the queries (or keys) were scaled by, where 1/sqrt(d_k) belongs
        if said is not None and said.kind == "factor" and said.factor is not None:
            out.append((said.factor, (d_k, d_k**0.5, 1 / d_k, d_k**-0.5)))
    if due == "masked" and "scaled" in stages and v.shape == stages["scaled"].shape and v.dim() == 3:
        T = v.shape[-1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1).expand_as(v)
        for x in (v[future], (v - stages["scaled"].double())[future]):
            if x.numel() and bool(torch.isfinite(x).all()) and bool((x == x[0]).all()) and abs(x[0]) < HIDES:
                out.append((float(x[0]), ()))
    return out


def _made_elsewhere(trace: Trace, r: Record, numbers: Wrong) -> Bound | None:
    """The line that made the number ``r``'s line used where another belongs, when that is another line, it
    binds that name alone (``d_k = X.shape[-1]``, ``NEG = -1e6``, a helper's parameter from the call that passed
    it; not ``B, T, C = x.shape``, which names each axis rightly), and no other recorded line reads that value
    (a ``T`` that the mask reads too is right where it is made: the use is what is wrong), and it does not hold
    a number right for the role (``d_k = W_K.shape[-1]`` times ``math.sqrt(d_k)``: the use is wrong). A
    parameter is where the caller made the value it passed (the worker follows ``fill(s, NEG)`` to ``NEG = -1e6``)."""
    if not numbers:
        return None

    def fits(b: Bound) -> bool:  # 0 and ±1 are axes and identities more often than constants that were chosen,
        x = b.value  # but for a float written as one (``scale = 1.0``: a scale chosen there)
        forms: tuple[float, ...] = (x,) if abs(x) == 1.0 and _float_literal(b) else ()
        if abs(x) not in (0.0, 1.0):  # a 0 (``fill = 0.0``) is no chosen number, and has no reciprocal
            forms = (x, 1 / x, math.sqrt(abs(x)), 1 / math.sqrt(abs(x)))
        return any(
            any(math.isclose(n, f, rel_tol=1e-9) for f in forms)
            and (not any(math.isclose(x, y) for y in right) or _scaled(b))
            for n, right in numbers
        )

    return next(
        (b for b in r.defs if fits(b) and _alone(b) and not _passed_on(b) and not _read_elsewhere(trace, b, r)), None
    )


def _passed_on(b: Bound) -> bool:
    """Whether ``b``'s line only passes a value on under its own name (``self.d_out = d_out``, ``d_k =
    self.d_k``): no number is chosen there, so a wrong use of it is the use's (a width named rightly, used as
    the scale's) (issue 35: a book's ``attn_scores / self.d_out**0.5`` was pointed at ``self.d_out = d_out``)."""
    try:
        tree = ast.parse(b.code.split("#", 1)[0].strip())
    except (SyntaxError, ValueError):
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return False
    return _last_name(node.targets[0]) is not None and _last_name(node.targets[0]) == _last_name(node.value)


def _last_name(x: ast.expr) -> str | None:
    """``d_out`` of ``d_out`` and of ``self.d_out``; None for anything else."""
    return x.id if isinstance(x, ast.Name) else x.attr if isinstance(x, ast.Attribute) else None


def _float_literal(b: Bound) -> bool:
    """Whether ``b``'s line binds its name to a float written out (``scale = 1.0``)."""
    try:
        tree = ast.parse(b.code.split("#", 1)[0].strip())
    except (SyntaxError, ValueError):
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    value = node.value if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    return isinstance(value, ast.Constant) and isinstance(value.value, float)


def _scaled(b: Bound) -> bool:
    """Whether ``b``'s line computes its number with a power, a true division or a square root (``scale =
    d_k ** -1``: a factor chosen there, the line to edit when it is the wrong one), not a width read as it is
    (``d_k = q.shape[-1]``, right where it is made: its use is what is wrong)."""
    try:
        tree = ast.parse(b.code)
    except (SyntaxError, ValueError):
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or node.value is None:
        return False
    for x in ast.walk(node.value):
        if isinstance(x, ast.BinOp) and isinstance(x.op, (ast.Pow, ast.Div)):
            return True
        func = x.func if isinstance(x, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("sqrt", "rsqrt", "pow"):
            return True
    return False


def _alone(b: Bound) -> bool:
    """Whether ``b``'s line binds its name alone: ``name = ...``, ``name: T = ...``, ``name += ...``, or is a
    call that passes the parameter (any line that is no assignment to the name)."""
    try:
        tree = ast.parse(b.code)
    except (SyntaxError, ValueError):  # part of a statement over several lines; a null byte
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        return names == [b.var] * len(node.targets) or b.var not in _targets(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(node.target, ast.Name) and node.target.id == b.var
    return node is not None


def _targets(targets: list[ast.expr]) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _read_elsewhere(trace: Trace, b: Bound, r: Record) -> bool:
    """Whether a recorded line other than ``r``'s reads the value ``b`` bound (the same binding)."""
    key = (b.var, b.file, b.line)
    return any(
        (x.file, x.line) != (r.file, r.line) and any((d.var, d.file, d.line) == key for d in x.defs)
        for x in trace.records
    )


VIEWS = ("reshape", "view", "contiguous", "clone", "__getitem__", "to", "type_as", "float", "double", "squeeze")


def _viewed(trace: Trace, r: Record, T: int) -> Record | None:
    """For a reshape (a view, a copy) of a value of another shape, the line that computed that value."""
    if r.op not in VIEWS or len(r.reads) != 1:
        return None
    by = {f"v:{x.index}": x for x in trace.records}
    x = by.get(r.reads[0])
    if x is None or _stage_shaped(x, T) or not _floating(x):
        return None
    return x


def _nan_source(trace: Trace, r: Record, derived: set[str]) -> Record | None:
    """The constant (computed from no input) that brought NaN into ``r``, when ``r`` holds NaN."""
    if r.value is None or not r.value.dtype.is_floating_point or not bool(torch.isnan(r.value).any()):
        return None
    by = {f"v:{x.index}": x for x in trace.records}
    for name in r.reads:
        x = by.get(name)
        if x is not None and name not in derived and _floating(x) and bool(torch.isnan(x.value).any()):  # type: ignore[arg-type]
            return x
    return None
