"""Source-level mutations of the generated heads (libcst), each with its ground truth: the cause and the line.

A mutation is written once, for every style, as a change of a pattern real code uses (a sqrt or a ``** -0.5``
beside the scores, an ``-inf`` constant, a ``tril``/``triu`` or a ``j > i`` mask, a softmax call, a dropout
probability, the tuple a head returns); a style's ``sites`` only say which occurrence to take where a head holds
two (a padding mask beside the causal one). Its ground truth is:

- ``causes``: the ids that name it exactly (``grader/diagnosis/causes.toml``, the chaff catalog, or
  ``departure:<stage>`` where no catalog entry fits);
- ``family``: the kind of mistake; a named cause of that kind finds it (:func:`families`);
- ``lines``: the lines that changed in the generated file (difflib against the head before this mutation, carried
  through the mutations applied after it): the lines a person edits to undo it.
"""

from __future__ import annotations

import difflib
import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from .styles import STYLES, Style

Apply = Callable[[cst.Module, Style], cst.Module | None]
Also = Callable[[cst.Module], set[int]]  # other lines of the finished head where the same edit undoes the mistake


@dataclass(frozen=True)
class Mutation:
    id: str
    family: str
    causes: tuple[str, ...]  # the ids that name it exactly
    site: str  # two mutations of one site are never applied together
    apply: Apply
    also: Also | None = None


@dataclass(frozen=True)
class Truth:
    """One mistake of a generated head: what it is, and the lines to edit."""

    mutation: str
    family: str
    causes: tuple[str, ...]
    lines: tuple[int, ...]


@dataclass(frozen=True)
class Generated:
    id: str
    style: str
    source: str
    truths: tuple[Truth, ...]  # empty: a correct head

    @property
    def contract_causes(self) -> frozenset[str]:
        return STYLES[self.style].contract_causes | STYLES[self.style].contract_alike


# -- finding nodes --------------------------------------------------------------------------------


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _replace(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> cst.Module:
    replaced = module.deep_replace(old, new)
    assert isinstance(replaced, cst.Module)
    return replaced


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


class _Collect(cst.CSTVisitor):
    def __init__(self, keep: Callable[[cst.CSTNode], bool]) -> None:
        self.keep, self.found = keep, []  # type: ignore[var-annotated]

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.keep(node):
            self.found.append(node)
        return True


def _find(module: cst.Module, keep: Callable[[cst.CSTNode], bool]) -> list[cst.CSTNode]:
    """The nodes ``keep`` accepts, in source order."""
    visitor = _Collect(keep)
    module.visit(visitor)
    return visitor.found


def _parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider))


def _call_name(node: cst.CSTNode) -> str | None:
    """``softmax`` for ``F.softmax(...)``, ``x.softmax(...)`` and ``softmax(...)``."""
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _is_method(call: cst.Call) -> bool:
    """``x.tril()`` / ``x.softmax(dim=-1)``: the receiver is the tensor (not a module such as torch or np)."""
    func = call.func
    return isinstance(func, cst.Attribute) and _code(func.value) not in {
        "torch",
        "F",
        "nn.functional",
        "torch.nn.functional",
        "np",
        "numpy",
    }


# -- the scale (Lemma 5.5) ------------------------------------------------------------------------

SQRTS = {"math.sqrt", "np.sqrt", "torch.sqrt", "sqrt"}


def _scale_factor(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call):
        return _code(node.func) in SQRTS
    return (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.Power)
        and _code(node.right) in {"0.5", "-0.5"}
    )


def _scale(kind: str) -> Apply:
    def apply(module: cst.Module, style: Style) -> cst.Module | None:
        found = _find(module, _scale_factor)
        if not found:
            return None
        factor = found[0]
        parent = _parents(module).get(factor)
        in_op = (
            isinstance(parent, cst.BinaryOperation)
            and parent.right is factor
            and isinstance(parent.operator, (cst.Divide, cst.Multiply))
        )
        if isinstance(factor, cst.Call):
            base, power = factor.args[0].value, None
        else:
            assert isinstance(factor, cst.BinaryOperation)
            base, power = factor.left, _code(factor.right)
        if kind == "none":
            if in_op:
                assert isinstance(parent, cst.BinaryOperation)
                return _replace(module, parent, parent.left)
            return _replace(module, factor, _expr("1.0"))
        if kind == "dk":
            new = base if power in (None, "0.5") else _expr(f"{_code(base)} ** -1")
            return _replace(module, factor, new)
        if kind == "d_model":
            if style.d_model is None:
                return None
            return _replace(module, base, _expr(style.d_model))
        if kind == "times":
            if power is not None:
                assert isinstance(factor, cst.BinaryOperation)
                flipped = "0.5" if power == "-0.5" else "-0.5"
                return _replace(module, factor, factor.with_changes(right=_expr(flipped)))
            if in_op and isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Divide):
                return _replace(module, parent, parent.with_changes(operator=cst.Multiply()))
            return None
        raise ValueError(kind)

    return apply


# -- the mask (Definition 4.1) --------------------------------------------------------------------

MINUS_INF = {
    'float("-inf")',
    "float('-inf')",
    '-float("inf")',
    "-float('inf')",
    "-torch.inf",
    "-math.inf",
    "-np.inf",
    "-numpy.inf",
}


def _fill(value: str) -> Apply:
    def apply(module: cst.Module, style: Style) -> cst.Module | None:
        found = _find(module, lambda n: isinstance(n, (cst.Call, cst.UnaryOperation)) and _code(n) in MINUS_INF)
        if len(found) <= style.fill_index:
            return None
        return _replace(module, found[style.fill_index], _expr(value))

    return apply


def _masking_statement(node: cst.CSTNode) -> bool:
    """``s = s.masked_fill(...)``, ``s = torch.where(m, s, ...)`` or ``s.masked_fill_(...)``."""
    if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
        return _call_name(node.value) == "masked_fill_"
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call)):
        return False
    target, call = node.targets[0].target, node.value
    if not isinstance(target, cst.Name):
        return False
    if _call_name(call) == "masked_fill" and isinstance(call.func, cst.Attribute):
        return _code(call.func.value) == target.value
    return _call_name(call) == "where" and any(_code(a.value) == target.value for a in call.args)


def _dropped(module: cst.Module, style: Style) -> cst.Module | None:
    """The mask computed and thrown away: the result not assigned (an in-place fill written out of place)."""
    found = _find(module, _masking_statement)
    if len(found) <= style.dropped_index:
        return None
    node = found[style.dropped_index]
    if isinstance(node, cst.Expr):
        call = node.value
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        return _replace(module, call.func, call.func.with_changes(attr=cst.Name("masked_fill")))
    assert isinstance(node, cst.Assign)
    return _replace(module, node, cst.Expr(node.value))


DIAGONAL_KEYWORDS = {"diagonal", "k"}


def _triangle(kind: str) -> Apply:
    """``tril``/``triu`` (functions or methods) and ``j > i`` comparisons: the diagonal moved or the triangle
    swapped. ``diag``: one diagonal more is masked; ``transposed``: the other triangle; ``leaks``: one less."""

    def apply(module: cst.Module, style: Style) -> cst.Module | None:
        found = _find(
            module,
            lambda n: (
                _call_name(n) in {"tril", "triu"}
                or (
                    isinstance(n, cst.Comparison)
                    and len(n.comparisons) == 1
                    and isinstance(n.left, cst.Name)
                    and isinstance(n.comparisons[0].comparator, cst.Name)
                    and isinstance(n.comparisons[0].operator, (cst.GreaterThan, cst.LessThanEqual))
                )
            ),
        )
        if not found:
            return None
        node = found[0]
        if isinstance(node, cst.Comparison):
            left, right = _code(node.left), _code(node.comparisons[0].comparator)
            masked = isinstance(node.comparisons[0].operator, cst.GreaterThan)  # j > i: the masked side
            new = {
                ("diag", True): f"{left} >= {right}",
                ("diag", False): f"{left} < {right}",
                ("transposed", True): f"{left} < {right}",
                ("transposed", False): f"{left} >= {right}",
                ("leaks", True): f"{left} > {right} + 1",
                ("leaks", False): f"{left} <= {right} + 1",
            }[(kind, masked)]
            return _replace(module, node, _expr(new))
        assert isinstance(node, cst.Call)
        name = _call_name(node) or "tril"
        method = _is_method(node)
        position = 0 if method else 1
        diagonal, keyword, args = 0, "k" if _code(node.func).startswith(("np.", "numpy.")) else "diagonal", []
        for k, arg in enumerate(node.args):
            if (arg.keyword is not None and arg.keyword.value in DIAGONAL_KEYWORDS) or (
                arg.keyword is None and k == position
            ):
                diagonal = int(_code(arg.value))
            else:
                args.append(arg)
        if kind == "diag":
            diagonal -= 1
        elif kind == "leaks":
            diagonal += 1
        else:
            name, diagonal = ("triu" if name == "tril" else "tril"), -diagonal
        if args:  # the argument before a removed diagonal keeps no trailing comma
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if diagonal:
            if method:
                args = [cst.Arg(_expr(str(diagonal)))]
            else:
                args.append(
                    cst.Arg(
                        _expr(str(diagonal)),
                        keyword=cst.Name(keyword),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                    )
                )
        func = node.func
        func = func.with_changes(attr=cst.Name(name)) if isinstance(func, cst.Attribute) else cst.Name(name)
        return _replace(module, node, node.with_changes(func=func, args=args))

    return apply


def _causal_ignored(module: cst.Module, style: Style) -> cst.Module | None:
    """The causal branch taken whatever the flag: ``if causal:`` unwrapped, ``m if causal else None`` -> ``m``."""
    found = _find(
        module,
        lambda n: isinstance(n, (cst.If, cst.IfExp)) and _code(n.test) in {"causal", "self.causal"},
    )
    if not found:
        return None
    node = found[0]
    if isinstance(node, cst.IfExp):
        return _replace(module, node, node.body)
    assert isinstance(node, cst.If) and isinstance(node.body, cst.IndentedBlock)

    class Unwrap(cst.CSTTransformer):
        def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement | cst.FlattenSentinel:
            if original is node:
                return cst.FlattenSentinel(updated.body.body)  # type: ignore[arg-type]
            return updated

    return module.visit(Unwrap())


# -- the softmax (Proposition 3.1, 5.1) ------------------------------------------------------------


def _softmax_call(module: cst.Module) -> cst.Call | None:
    found = _find(module, lambda n: _call_name(n) == "softmax")
    return found[0] if found else None  # type: ignore[return-value]


def _softmax_axis(module: cst.Module, style: Style) -> cst.Module | None:
    call = _softmax_call(module)
    if call is None:
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in {"dim", "axis"} and _code(arg.value) == "-1":
            return _replace(module, arg.value, _expr("-2"))
    return None


def _first_name(node: cst.CSTNode) -> str | None:
    names = _find(cst.Module(body=[cst.SimpleStatementLine([cst.Expr(node)])]), lambda n: isinstance(n, cst.Name))  # type: ignore[arg-type]
    return names[0].value if names else None  # type: ignore[attr-defined]


def _softmax_float32(module: cst.Module, style: Style) -> cst.Module | None:
    """The softmax computed in float32 and cast back (mixed-precision code)."""
    call = _softmax_call(module)
    if call is None:
        return None
    if _is_method(call):
        assert isinstance(call.func, cst.Attribute)
        operand = call.func.value
    else:
        operand = call.args[0].value
    ref = _first_name(operand)
    if ref is None:
        return None
    simple = isinstance(operand, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))
    text = _code(operand) if simple else f"({_code(operand)})"
    low, back = (".astype(np.float32)", f".astype({ref}.dtype)") if style.numpy else (".float()", f".to({ref}.dtype)")
    cast = _replace(module, operand, _expr(text + low))
    new_call = _softmax_call(cast)
    assert new_call is not None
    return _replace(cast, new_call, _expr(_code(new_call) + back))


def _clamp(module: cst.Module, style: Style) -> cst.Module | None:
    """The weights clamped to [1e-6, 1] after the softmax (to keep a later log finite)."""
    call = _softmax_call(module)
    if call is None:
        return None
    text = f"np.clip({_code(call)}, 1e-6, 1.0)" if style.numpy else f"{_code(call)}.clamp(1e-6, 1.0)"
    return _replace(module, call, _expr(text))


def _unstable(module: cst.Module, style: Style) -> cst.Module | None:
    """A hand-written softmax without the row max subtracted: ``exp(x - x_max)`` -> ``exp(x)``."""
    found = _find(
        module,
        lambda n: (
            isinstance(n, cst.BinaryOperation)
            and isinstance(n.operator, cst.Subtract)
            and isinstance(n.left, cst.Name)
            and "max" in _code(n.right)
        ),
    )
    if not found:
        return None
    node = found[0]
    assert isinstance(node, cst.BinaryOperation)
    return _replace(module, node, node.left)


def _max_exp(module: cst.Module) -> set[int]:
    """Where the exp reads the value the max was taken from (``e = np.exp(x)`` after ``x = x``): subtracting the
    row's max there undoes it as well as on the line the mutation emptied."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    names = {
        n.value.value
        for n in _find(wrapper.module, lambda n: isinstance(n, cst.Assign) and len(n.targets) == 1)
        if isinstance(n, cst.Assign)
        and isinstance(n.value, cst.Name)
        and isinstance(n.targets[0].target, cst.Name)
        and n.targets[0].target.value == n.value.value
    }
    calls = _find(
        wrapper.module,
        lambda n: (
            _call_name(n) == "exp" and any(isinstance(a.value, cst.Name) and a.value.value in names for a in n.args)
        ),  # type: ignore[attr-defined]
    )
    return {positions[c].start.line for c in calls}


QUERYISH = re.compile(r"\b(q|Q|query|queries)\b")
KEYISH = re.compile(r"\b(k|K|key|keys)\b")


def _scores_made(module: cst.Module) -> set[int]:
    """Where the scores Q K^T are made (``queries @ keys.transpose(1, 2)``, ``torch.matmul(q, k.T)``, an einsum):
    a scale that is missing altogether belongs there as well as where the mutation took it out (the lecture scales
    Q K^T; a mask before or after it is equivalent)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)

    def product(n: cst.CSTNode) -> bool:
        made = (isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.MatrixMultiply)) or _call_name(n) in {
            "matmul",
            "bmm",
            "einsum",
        }
        return made and bool(QUERYISH.search(_code(n))) and bool(KEYISH.search(_code(n)))

    return {positions[n].start.line for n in _find(wrapper.module, product)}


def _dropout_on(module: cst.Module, style: Style) -> cst.Module | None:
    """A dropout probability of 0.0 (an argument or a module constant named after dropout) set to 0.1."""
    parents = _parents(module)

    def named_drop(node: cst.CSTNode) -> bool:
        if not (isinstance(node, cst.Float) and node.value == "0.0"):
            return False
        parent = parents.get(node)
        if isinstance(parent, cst.Arg) and parent.keyword is not None:
            return "drop" in parent.keyword.value
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            return "drop" in _code(parent.targets[0].target)
        return False

    found = _find(module, named_drop)
    return _replace(module, found[0], _expr("0.1")) if found else None


def _dropout_applied(module: cst.Module) -> set[int]:
    """Where the dropout is applied (``self.dropout(w)``): deleting that call undoes it as well as p = 0 does."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    calls = _find(module, lambda n: isinstance(n, cst.Call) and "dropout" in (_call_name(n) or "").lower())
    return {positions[c].start.line for c in calls}


# -- what is multiplied and returned (Definition 2.2) -------------------------------------------------


def _values_unprojected(module: cst.Module, style: Style) -> cst.Module | None:
    if style.value_proj is None or style.value_input is None:
        return None
    found = _find(module, lambda n: isinstance(n, cst.BaseExpression) and _code(n) == style.value_proj)
    return _replace(module, found[0], _expr(style.value_input)) if found else None


def _keys_from_wq(module: cst.Module, style: Style) -> cst.Module | None:
    parents = _parents(module)
    found = _find(
        module, lambda n: isinstance(n, cst.Name) and n.value == "W_K" and not isinstance(parents.get(n), cst.Param)
    )
    return _replace(module, found[0], cst.Name("W_Q")) if found else None


def _pair_return(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Return) and isinstance(node.value, cst.Tuple) and len(node.value.elements) == 2


def _weights_transposed(module: cst.Module, style: Style) -> cst.Module | None:
    """The weights returned transposed: in the contract function's ``return out, w``, else the last such return."""
    head = _find(module, lambda n: isinstance(n, cst.FunctionDef) and n.name.value == "causal_self_attention")
    returns = _find(cst.Module(body=[head[0]]), _pair_return) if head else []  # type: ignore[list-item]
    returns = returns or _find(module, _pair_return)
    if not returns:
        return None
    weights = returns[-1].value.elements[1].value  # type: ignore[attr-defined]
    return _replace(module, weights, _expr(f"{_code(weights)}.transpose(-2, -1)"))


MUTATIONS: dict[str, Mutation] = {
    m.id: m
    for m in (
        Mutation("no_scaling", "scale", ("no_scaling",), "scale", _scale("none"), _scores_made),
        Mutation("scale_by_dk", "scale", ("scale_by_dk",), "scale", _scale("dk")),
        Mutation("scale_by_sqrt_d_model", "scale", ("scale_by_sqrt_d_model",), "scale", _scale("d_model")),
        Mutation("scale_times_sqrt_dk", "scale", ("scale_times_sqrt_dk", "departure:scaled"), "scale", _scale("times")),
        Mutation("fill_minus_1e4", "fill", ("weak_mask_fill", "weak_mask_constant"), "fill", _fill("-1e4")),
        Mutation(
            "fill_minus_100",
            "fill",
            ("leaky_mask_fill", "leaky_mask_constant", "mask_minus_100"),
            "fill",
            _fill("-100.0"),
        ),
        Mutation("fill_result_dropped", "mask", ("no_mask",), "fill", _dropped),
        Mutation("mask_excludes_diagonal", "mask", ("mask_excludes_diagonal",), "triangle", _triangle("diag")),
        Mutation("mask_transposed", "mask", ("mask_transposed",), "triangle", _triangle("transposed")),
        Mutation("mask_leaks_by_one", "mask", ("mask_leaks_by_one",), "triangle", _triangle("leaks")),
        Mutation("causal_flag_ignored", "causal_flag", ("causal_flag_ignored",), "branch", _causal_ignored),
        Mutation("softmax_wrong_axis", "softmax", ("softmax_wrong_axis",), "softmax_axis", _softmax_axis),
        Mutation(
            "softmax_in_float32",
            "precision",
            ("softmax_in_float32", "computed_in_float32"),
            "softmax_dtype",
            _softmax_float32,
        ),
        Mutation("weights_clamped", "weights", ("departure:weights",), "softmax_clamp", _clamp),
        Mutation("unstable_softmax", "stability", ("unstable_softmax",), "softmax_max", _unstable, _max_exp),
        Mutation("dropout_left_on", "dropout", ("dropout_left_on",), "dropout", _dropout_on, _dropout_applied),
        Mutation("no_value_projection", "values", ("no_value_projection",), "values", _values_unprojected),
        Mutation("keys_from_query_projection", "keys", ("keys_from_query_projection",), "keys", _keys_from_wq),
        Mutation("weights_transposed", "output", ("weights_transposed",), "return", _weights_transposed),
    )
}

# The kind of mistake each cause names (a cause of the mutation's family finds it). A departure names the stage
# its value left: any mistake made at that stage. Crashes, breaches and contract causes are symptoms or the
# style's own: they find no mutation.
FAMILIES: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        (
            "no_scaling",
            "scale_by_dk",
            "scale_by_sqrt_d_model",
            "scale_by_sqrt_T",
            "scale_by_sqrt_dv",
            "scale_times_sqrt_dk",
            "scale_constant",
            "scale_in_float32",
        ),
        frozenset({"scale"}),
    ),
    **dict.fromkeys(
        (
            "no_mask",
            "mask_transposed",
            "mask_excludes_diagonal",
            "mask_leaks_by_one",
            "mask_inverted",
            "mask_value_derived",
            "mask_after_softmax_no_renorm",
            "mask_after_softmax_renorm",
        ),
        frozenset({"mask"}),
    ),
    **dict.fromkeys(
        ("leaky_mask_constant", "weak_mask_constant", "leaky_mask_fill", "weak_mask_fill", "mask_minus_100"),
        frozenset({"fill"}),
    ),
    "causal_flag_ignored": frozenset({"causal_flag"}),
    "softmax_wrong_axis": frozenset({"softmax"}),
    "softmax_over_batch": frozenset({"softmax"}),
    "unstable_softmax": frozenset({"stability"}),
    "global_max_softmax": frozenset({"stability"}),
    "softmax_in_float32": frozenset({"precision"}),
    "computed_in_float32": frozenset({"precision"}),
    "dropout_left_on": frozenset({"dropout"}),
    "weights_transposed": frozenset({"output"}),
    "scores_returned": frozenset({"output"}),
    "scores_transposed": frozenset({"keys"}),
    "keys_from_query_projection": frozenset({"keys"}),
    "no_value_projection": frozenset({"values"}),
    "departure:Q": frozenset({"keys"}),
    "departure:K": frozenset({"keys"}),
    "departure:V": frozenset({"values"}),
    "departure:scores": frozenset({"keys", "scale"}),
    "departure:scaled": frozenset({"scale"}),
    "departure:masked": frozenset({"mask", "fill", "causal_flag"}),
    "departure:weights": frozenset({"softmax", "stability", "precision", "dropout", "weights"}),
    "departure:out": frozenset({"values", "output", "dropout"}),
}


def families(cause_id: str) -> frozenset[str]:
    """The kinds of mistake a cause of this id names (empty for a symptom: a crash, a breach, a contract cause). A
    second departure at one stage carries its line (``departure:weights:32``): the kinds of its stage."""
    stage = re.fullmatch(r"(departure:[^:]+):\d+", cause_id)
    return FAMILIES.get(stage[1] if stage else cause_id, frozenset())


# -- generating -----------------------------------------------------------------------------------


def _changed(before: str, after: str) -> tuple[set[int], Callable[[int], set[int]]]:
    """The 1-based lines of ``after`` that are new, and where each line of ``before`` went."""
    a, b = before.splitlines(), after.splitlines()
    changed: set[int] = set()
    moves: dict[int, set[int]] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                moves[i1 + k + 1] = {j1 + k + 1}
            continue
        new = set(range(j1 + 1, j2 + 1)) or {min(j1 + 1, len(b))}  # a deletion: the line after it
        if tag != "delete":
            changed |= new
        else:
            changed |= new
        for i in range(i1, i2):
            moves[i + 1] = new
    return changed, lambda line: moves.get(line, {line})


@functools.cache
def _parsed(style: str) -> cst.Module:
    return cst.parse_module(STYLES[style].source)  # libcst trees are immutable: one per style serves every mutation


def mutate(style: str, mutation_ids: tuple[str, ...], head_id: str | None = None) -> Generated | None:
    """The style's head with these mutations applied in order; None when one does not apply to the style, changes
    nothing, or two share a site."""
    st = STYLES[style]
    sites = [MUTATIONS[m].site for m in mutation_ids]
    if len(set(sites)) != len(sites):
        return None
    module, source = _parsed(style), st.source
    truths: list[tuple[str, set[int]]] = []
    for mid in mutation_ids:
        new = MUTATIONS[mid].apply(module, st)
        if new is None or new.code == source:
            return None
        changed, move = _changed(source, new.code)
        truths = [(t, set().union(*(move(line) for line in lines))) for t, lines in truths]
        truths.append((mid, changed))
        module, source = new, new.code
    compile(source, f"<{style}>", "exec")
    for k, (mid, lines) in enumerate(truths):
        also = MUTATIONS[mid].also
        if also is not None:
            truths[k] = (mid, lines | also(module))
    return Generated(
        id=head_id or "-".join((style, *mutation_ids)),
        style=style,
        source=source,
        truths=tuple(
            Truth(mid, MUTATIONS[mid].family, MUTATIONS[mid].causes, tuple(sorted(lines))) for mid, lines in truths
        ),
    )


@functools.cache
def applicable(style: str) -> tuple[str, ...]:
    """The mutations that apply to the style alone."""
    return tuple(m for m in MUTATIONS if mutate(style, (m,)) is not None)


def sample(n: int, seed: int, styles: tuple[str, ...] | None = None, *, correct_every: int = 6) -> list[Generated]:
    """``n`` heads, seeded: round-robin over ``styles``; every ``correct_every``-th head of a style is correct, the
    others carry 1 to 3 mutations of distinct sites, drawn uniformly from those that apply to the style."""
    rng = random.Random(seed)
    names = tuple(styles or STYLES)
    unknown = [s for s in names if s not in STYLES]
    if unknown:
        raise ValueError(f"unknown style {unknown[0]!r} (known: {', '.join(STYLES)})")
    pools = {s: applicable(s) for s in names}
    heads: list[Generated] = []
    for k in range(n):
        style = names[k % len(names)]
        rank = k // len(names)
        head_id = f"{k:05d}_{style}"
        if rank % correct_every == 0:
            heads.append(Generated(head_id, style, STYLES[style].source, ()))
            continue
        for _ in range(100):
            chosen = tuple(rng.sample(pools[style], rng.choice((1, 2, 3))))
            made = mutate(style, chosen, head_id)
            if made is not None:
                heads.append(made)
                break
        else:  # pragma: no cover - every style has single mutations that apply
            raise RuntimeError(f"no mutation applies to {style}")
    return heads
