"""forbidden_api resolves names (issue 10, item 4): pure unit tests of the resolver on source strings."""

from __future__ import annotations

import textwrap

import pytest

from grader.checks._kernels import static_forbidden
from grader.rubric import Rubric

FORBIDDEN = list(Rubric.model_fields["forbidden_calls"].default)
SDPA = "torch.nn.functional.scaled_dot_product_attention"
MHA = "torch.nn.MultiheadAttention"
MHA_FORWARD = "torch.nn.functional.multi_head_attention_forward"


def uses(source: str) -> list[tuple[str, int]]:
    return [(u.name, u.line) for u in static_forbidden(textwrap.dedent(source), FORBIDDEN)]


USES = {
    "module attribute": ("import torch\ny = torch.nn.functional.scaled_dot_product_attention(q, k, v)", SDPA, 2),
    "import as": ("import torch as th\ny = th.nn.functional.multi_head_attention_forward(q)", MHA_FORWARD, 2),
    "F alias": ("import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)", SDPA, 2),
    "from import as F": ("from torch.nn import functional as F\nF.scaled_dot_product_attention(q, k, v)", SDPA, 2),
    "from import name": (
        "from torch.nn.functional import scaled_dot_product_attention as sdpa\n\ny = sdpa(q, k, v)",
        SDPA,
        3,
    ),
    "from torch import nn": ("from torch import nn\nm = nn.MultiheadAttention(4, 1)", MHA, 2),
    "import torch.nn as nn": ("import torch.nn as nn\nm = nn.MultiheadAttention(4, 1)", MHA, 2),
    "dotted import": ("import torch.nn.functional\ntorch.nn.functional.scaled_dot_product_attention(q, k, v)", SDPA, 2),
    "private binding": ("import torch\ny = torch._C._nn.scaled_dot_product_attention(q, k, v)", SDPA, 2),
    "module alias": ("import torch.nn.functional as F\nattn = F.scaled_dot_product_attention\n", SDPA, 2),
    "getattr": ('import torch.nn.functional as F\nf = getattr(F, "scaled_dot_product_attention")', SDPA, 2),
    "import inside the function": (
        "def f(q, k, v):\n    import torch.nn.functional as F\n    return F.scaled_dot_product_attention(q, k, v)",
        SDPA,
        3,
    ),
    "method of the class": ("from torch import nn\nf = nn.MultiheadAttention.forward", MHA, 2),
    "module path": ("import torch\nm = torch.nn.modules.activation.MultiheadAttention(4, 1)", MHA, 2),
    "star import then call": (
        "from torch.nn.functional import *\n\ndef f(q, k, v):\n    return scaled_dot_product_attention(q, k, v)",
        SDPA,
        4,
    ),
}


@pytest.mark.parametrize("source, name, line", USES.values(), ids=list(USES))
def test_resolved_uses_are_found(source: str, name: str, line: int) -> None:
    assert (name, line) in uses(source)


def test_alias_is_followed_to_its_call() -> None:
    source = """\
    import torch.nn.functional as F

    attn = F.scaled_dot_product_attention


    def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
        return attn(X @ W_Q, X @ W_K, X @ W_V, is_causal=causal)
    """
    assert uses(source) == [(SDPA, 3), (SDPA, 7)]


NOT_USES = {
    "own CS336-style function": """\
        import math

        import torch


        def softmax(x, dim):
            e = torch.exp(x - x.max(dim=dim, keepdim=True).values)
            return e / e.sum(dim=dim, keepdim=True)


        def scaled_dot_product_attention(Q, K, V, mask=None):
            scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return softmax(scores, dim=-1) @ V


        def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
            return scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V), None
        """,
    "own class": """\
        import torch.nn as nn


        class MultiheadAttention(nn.Module):
            pass


        m = MultiheadAttention()
        """,
    "method on self": """\
        import torch.nn.functional as F


        class Head:
            def scaled_dot_product_attention(self, q, k, v):
                return F.softmax(q @ k.T, dim=-1) @ v

            def forward(self, q, k, v):
                return self.scaled_dot_product_attention(q, k, v)
        """,
    "variable": """\
        scaled_dot_product_attention = None
        y = scaled_dot_product_attention
        """,
    "parameter shadows the import": """\
        from torch.nn.functional import scaled_dot_product_attention


        def run(scaled_dot_product_attention, q):
            return scaled_dot_product_attention(q)
        """,
    "import alone": "from torch.nn.functional import scaled_dot_product_attention as sdpa\nimport torch.nn as nn\n",
    "star import alone": "from torch.nn.functional import *\n\ny = softmax(x, dim=-1)\n",
    "star import, own definition": """\
        from torch.nn.functional import *


        def scaled_dot_product_attention(q, k, v):
            return softmax(q @ k.T, dim=-1) @ v


        y = scaled_dot_product_attention(q, k, v)
        """,
    "star import of something else": "from numpy import *\n\ny = scaled_dot_product_attention(q, k, v)\n",
    "comment and string": (
        "import torch.nn.functional as F\n# F.scaled_dot_product_attention would do it in one line\n"
        'NOTE = "torch.nn.functional.scaled_dot_product_attention"\n'
    ),
    "other torch names": "import torch\nfrom torch import nn\nlin = nn.Linear(4, 4)\ny = torch.softmax(x, -1)\n",
    "other module's attribute": "import mylib\ny = mylib.scaled_dot_product_attention(q, k, v)\n",
    "redefined after the import": """\
        from torch.nn.functional import scaled_dot_product_attention


        def scaled_dot_product_attention(q, k, v):
            return (q @ k.T).softmax(-1) @ v


        def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
            return scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)
        """,
    "syntax error": "def f(:\n",
}


@pytest.mark.parametrize("source", NOT_USES.values(), ids=list(NOT_USES))
def test_own_names_and_other_references_are_not_uses(source: str) -> None:
    assert uses(source) == []


def test_use_quotes_the_line() -> None:
    source = """\
    import torch.nn.functional as F


    def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
        q, k, v = X @ W_Q, X @ W_K, X @ W_V
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal), None
    """
    (use,) = static_forbidden(textwrap.dedent(source), FORBIDDEN)
    assert use.quote() == "line 6: `return F.scaled_dot_product_attention(q, k, v, is_causal=causal), None`"


def test_redefinition_after_use_keeps_the_earlier_module_level_use() -> None:
    source = """\
    from torch.nn.functional import scaled_dot_product_attention

    y = scaled_dot_product_attention(q, k, v)


    def scaled_dot_product_attention(q, k, v):
        return q
    """
    assert uses(source) == [(SDPA, 3)]
