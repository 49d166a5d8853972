"""Agreement with PyTorch's fused kernel, and no borrowing of it (Aside 8.1 context)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from grader._syntax import parse
from grader.checks._base import CaseOutcome, Ctx, Verdict, by_case, case_call, check, failed, heatmaps_for, passed
from grader.compare import dtype_name, mismatch, tolerance
from grader.head import StudentFailure
from grader.inputs import FAMILIES, Case
from grader.models import SourceSpot

# Calls that reach the same kernels under other names; traced alongside the rubric's list and resolved in the source.
ALIASES = {
    "torch.nn.functional.scaled_dot_product_attention": ["torch._C._nn.scaled_dot_product_attention"],
    "torch.nn.MultiheadAttention": [
        "torch.nn.modules.MultiheadAttention",
        "torch.nn.modules.activation.MultiheadAttention",
    ],
}


def sdpa_reference(case: Case, causal: bool) -> torch.Tensor:
    """torch's fused scaled_dot_product_attention on the projected inputs, in the case's dtype."""
    Q, K, V = case.X @ case.W_Q, case.X @ case.W_K, case.X @ case.W_V  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
    return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)  # (B, T, d_v)


@check(
    "fused_kernel",
    title="outputs agree with torch's fused scaled_dot_product_attention on CPU",
    cites="Aside 8.1 (fused kernels compute the same function)",
)
def fused_kernel(ctx: Ctx) -> Verdict:
    """Aside 8.1: a fused kernel is an exact reorganisation of dense attention, so the head agrees with
    torch.nn.functional.scaled_dot_product_attention (is_causal=True and False) in float64 and float32.
    Partial credit: the fraction of (dtype, shape family, causal) cases that agree."""
    outcomes = [
        _fused_case(ctx, case, causal)
        for dtype in (torch.float64, torch.float32)
        for case in ctx.cases(FAMILIES[2:], dtype=dtype)
        for causal in (True, False)
    ]
    return by_case(outcomes, "Agreement with torch's scaled_dot_product_attention on CPU")


def _fused_case(ctx: Ctx, case: Case, causal: bool) -> CaseOutcome:
    dtype = case.X.dtype
    label = f"{dtype_name(dtype)} {'causal' if causal else 'unmasked'} T={case.shape.T}"
    outcome, call = case_call(ctx, case, causal, label)
    if call is None:
        return outcome
    tol = tolerance("reference", ctx.working_dtype(dtype))  # float32 arithmetic is charged once, by reference_match
    bad = mismatch(call.out, sdpa_reference(case, causal), tol, f"out vs SDPA (causal={causal})")
    if bad is not None:
        outcome.problem = (
            "your output differs from torch's fused scaled_dot_product_attention "
            f"(is_causal={causal}) on the same inputs.\n{bad.text()}"
        )
        outcome.heatmaps = heatmaps_for(call.weights, None, causal=causal)
        outcome.mismatch = bad
    return outcome


@dataclass(frozen=True)
class SourceUse:
    """A reference in the submission's source that resolves to a forbidden name."""

    name: str  # the rubric's dotted name it resolves to
    line: int  # 1-based line number
    text: str  # that source line, stripped

    def quote(self) -> str:
        return f"line {self.line}: `{self.text}`"


_Binding = tuple[int, str | None]  # (line, dotted name it resolves to, or None for the submission's own object)


@dataclass
class _Scope:
    node: ast.AST
    parent: _Scope | None
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # modules of `from M import *`

    def bind(self, name: str, line: int, dotted: str | None) -> None:
        self.bindings.setdefault(name, []).append((line, dotted))


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)  # nested scopes; the module is the root


class _Resolver:
    """Resolves names and attribute chains to dotted names through the module's imports and aliases.

    Scopes follow Python's: a name bound in a function (parameter, assignment, def, class, import) is
    local to it; a reference directly in a scope sees the binding made before it, a reference from an
    inner function sees the scope's last binding (functions run after the module is imported).
    """

    def __init__(self, tree: ast.Module) -> None:
        self.scope_of: dict[ast.AST, _Scope] = {}  # node -> the scope its code runs in
        self.module = _Scope(tree, None)
        self._collect(tree, self.module)

    def _collect(self, node: ast.AST, scope: _Scope) -> None:
        for child in ast.iter_child_nodes(node):
            self._visit(child, scope)

    def _visit(self, node: ast.AST, scope: _Scope) -> None:
        self.scope_of[node] = scope
        if not isinstance(node, _SCOPES):
            self._bind(node, scope)
            self._collect(node, scope)
            return
        if not isinstance(node, ast.Lambda):
            scope.bind(node.name, node.lineno, None)
        inner = _Scope(node, scope)
        outer: list[ast.expr] = [*getattr(node, "decorator_list", []), *getattr(node, "bases", [])]
        if not isinstance(node, ast.ClassDef):  # parameters are local; defaults run in the enclosing scope
            inner.bindings.update({a.arg: [(node.lineno, None)] for a in ast.walk(node.args) if isinstance(a, ast.arg)})
            outer += [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        for expr in outer:
            self._visit(expr, scope)
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            self._visit(stmt, inner)

    def _bind(self, node: ast.AST, scope: _Scope) -> None:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    scope.bind(a.asname, line, a.name)
                else:  # `import torch.nn.functional` binds `torch`
                    root = a.name.split(".", 1)[0]
                    scope.bind(root, line, root)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name == "*":
                    scope.stars.append(node.module)
                else:
                    scope.bind(a.asname or a.name, line, f"{node.module}.{a.name}")
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            # a simple alias `attn = F.scaled_dot_product_attention` keeps what it refers to
            alias = self.resolve(node.value, scope, line) if len(targets) == 1 else None
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        scope.bind(n.id, line, alias if isinstance(t, ast.Name) else None)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            if not any(b[0] == node.lineno for b in scope.bindings.get(node.id, [])):
                scope.bind(node.id, node.lineno, None)  # for/with/except targets, walrus, ...
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bind(node.name, line, None)

    def lookup(self, name: str, scope: _Scope, line: int) -> str | None:
        direct = True
        s: _Scope | None = scope
        while s is not None:
            if not (s is not scope and isinstance(s.node, ast.ClassDef)):  # class bodies do not enclose functions
                events = s.bindings.get(name)
                if events:
                    before = [d for ln, d in events if ln <= line] if direct else []
                    return before[-1] if before else events[-1][1]
                for module in reversed(s.stars):  # `from torch.nn.functional import *`, then a bare name
                    if module.split(".", 1)[0] == "torch":
                        return f"{module}.{name}"
            direct = False
            s = s.parent
        return None

    def resolve(self, node: ast.AST, scope: _Scope, line: int) -> str | None:
        """The dotted name an expression refers to, or None (a value, or something of the submission's own)."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id, scope, line)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, scope, line)
            return f"{base}.{node.attr}" if base else None
        if (  # getattr(F, "scaled_dot_product_attention")
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and self.lookup("getattr", scope, line) is None
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            base = self.resolve(node.args[0], scope, line)
            return f"{base}.{node.args[1].value}" if base else None
        return None


def _canonical(forbidden: list[str]) -> dict[str, str]:
    """Every dotted spelling of a forbidden name (its aliases included) -> the rubric's name."""
    names = {f: f for f in forbidden}
    for f in forbidden:
        names.update({alias: f for alias in ALIASES.get(f, [])})
    return names


def static_forbidden(source: str, forbidden: list[str]) -> list[SourceUse]:
    """References in the source that resolve to a forbidden dotted name (or one of its ALIASES).

    Names are resolved through the module's imports (``import torch as th``, ``import torch.nn.functional
    as F``, ``from torch.nn.functional import scaled_dot_product_attention as sdpa``, ...), simple aliases
    (``attn = F.scaled_dot_product_attention``) and attribute chains; the submission's own ``def``,
    ``class``, variables and methods of the same name are not uses. ``from M import *`` alone is not a
    use; a later bare reference to a forbidden name of ``M`` is. Returns one entry per line, in order.
    """
    try:
        tree = parse(source)
    except SyntaxError:
        return []
    names = _canonical(forbidden)
    resolver = _Resolver(tree)
    lines = source.splitlines()
    uses: dict[int, SourceUse] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name | ast.Attribute | ast.Call) or not isinstance(
            getattr(node, "ctx", ast.Load()), ast.Load
        ):
            continue
        scope = resolver.scope_of.get(node, resolver.module)
        dotted = resolver.resolve(node, scope, node.lineno)
        hit = next((names[n] for n in names if dotted and (dotted == n or dotted.startswith(n + "."))), None)
        if hit is not None and node.lineno not in uses:
            uses[node.lineno] = SourceUse(hit, node.lineno, lines[node.lineno - 1].strip())
    return sorted(uses.values(), key=lambda u: u.line)


@check(
    "forbidden_api",
    title="the head computes attention itself (no fused attention or MultiheadAttention)",
    cites="Exercise 2 (implement one head)",
)
def forbidden_api(ctx: Ctx) -> Verdict:
    """Exercise 2: the head is implemented from its definition; it neither refers to nor calls the
    rubric's forbidden functions. In the source, only references that resolve to them count (through
    imports, aliases such as `F` and `nn`, attribute chains on torch); a function or class of the
    student's own with the same name is fine. A traced forward pass catches calls the source hides."""
    forbidden = list(ctx.rubric.forbidden_calls)
    names = _canonical(forbidden)
    uses = static_forbidden(ctx.source, forbidden)
    case = next(ctx.cases(FAMILIES[2:3]))
    try:
        called = sorted({names.get(c, c) for c in ctx.head.traced_calls(case, list(names))})
    except StudentFailure as exc:
        if exc.status == "timeout" or exc.stub:
            raise  # a stub or a hang is not yet a head: nothing to judge
        # The head does not run (its own checks say why); the source alone still settles this property.
        called, untraced = [], f"Judged on your source alone: a traced call did not complete ({exc.message})."
    else:
        untraced = ""
    found = sorted({u.name for u in uses} | set(called))
    if found:
        lines = [
            f"Your head uses {', '.join(found)}. Exercise 2 asks you to implement the head from its "
            "definition: scores, mask, softmax, weighted sum of values."
        ]
        if uses:
            more = f" (and {len(uses) - 3} more)" if len(uses) > 3 else ""
            lines.append("In your source: " + "; ".join(u.quote() for u in uses[:3]) + more + ".")
        if called:
            lines.append(f"Called during a forward pass: {', '.join(called)}.")
        first = SourceSpot(line=uses[0].line, code=uses[0].text) if uses else None
        return failed("\n".join(lines + ([untraced] if untraced else [])), found_at=first)
    if untraced:
        return passed(f"No forbidden attention API is referred to in your source. {untraced}")
    return passed("No forbidden attention API is referred to or called.")
