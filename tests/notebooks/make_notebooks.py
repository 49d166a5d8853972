"""Write the realistic student notebooks of this folder (run: python tests/notebooks/make_notebooks.py).

Each notebook is what a student hands in after working in Colab or Jupyter: markdown, installs,
magics, plots, experiments and outputs around the contract functions. The .ipynb files are committed;
this script is how they were made (nbformat 4, no dependency needed).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

HEAD = '''\
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    """softmax(Q K^T / sqrt(d_k)) V with the causal mask (Definition 2.2, 4.1)."""
    Q = X @ W_Q  # (B, T, d_k)
    K = X @ W_K  # (B, T, d_k)
    V = X @ W_V  # (B, T, d_v)
    d_k = Q.shape[-1]
    scores = Q @ K.transpose(1, 2) / math.sqrt(d_k)  # (B, T, T)
    if causal:
        T = X.shape[1]
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=X.device))
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
'''

NO_MASK_HEAD = """\
def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    weights = torch.softmax(scores, dim=-1)  # TODO mask?
    return weights @ V, weights
"""

AUX = """\
def gaussian_positional_weights(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)
    lag = pos[:, None] - pos[None, :]
    logit = torch.where(lag == 0, 0.0, -0.5 * (lag / bandwidth) ** 2)
    logit = logit.masked_fill(lag < 0, float("-inf"))
    return torch.softmax(logit, dim=-1)


def gaussian_positional_qk(T, bandwidth):
    pos = torch.arange(T, dtype=torch.float64)
    Q = math.sqrt(2.0) * torch.stack([pos, torch.ones_like(pos)], dim=-1) / bandwidth
    K = torch.stack([pos, -0.5 * pos**2], dim=-1) / bandwidth
    return Q, K
"""

STATS = """\
def score_scale_statistics(d_k, T=64, n_samples=200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Q = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)
    K = torch.randn(n_samples, T, d_k, generator=gen, dtype=torch.float64)
    raw = Q @ K.transpose(-2, -1)
    scaled = raw / math.sqrt(d_k)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()

    def max_weight(S):
        A = torch.softmax(S.masked_fill(~allowed, float("-inf")), dim=-1)
        return torch.quantile(A.amax(dim=-1).flatten(), 0.5).item()

    return {
        "raw_std": raw[:, allowed].std().item(),
        "scaled_std": scaled[:, allowed].std().item(),
        "raw_max_weight": max_weight(raw),
        "scaled_max_weight": max_weight(scaled),
    }
"""

DEMO = """\
torch.manual_seed(0)
X = torch.randn(1, 6, 8)
W_Q, W_K, W_V = torch.randn(8, 4), torch.randn(8, 4), torch.randn(8, 5)
out, weights = causal_self_attention(X, W_Q, W_K, W_V)
print(out.shape, weights.shape)
"""

PLOT = """\
plt.figure(figsize=(4, 4))
plt.imshow(weights[0].detach(), cmap="viridis")
plt.colorbar()
plt.title("causal attention weights")
plt.show()
"""


def md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(keepends=True)}


def code(text: str, *outputs: dict, n: int | None = None) -> dict:
    return {
        "cell_type": "code",
        "execution_count": n,
        "metadata": {},
        "outputs": list(outputs),
        "source": text.rstrip("\n").splitlines(keepends=True),
    }


def stream(text: str) -> dict:
    return {"name": "stdout", "output_type": "stream", "text": text.splitlines(keepends=True)}


def image() -> dict:
    return {
        "data": {"image/png": PNG, "text/plain": ["<Figure size 400x400 with 2 Axes>"]},
        "metadata": {},
        "output_type": "display_data",
    }


def error(ename: str, evalue: str) -> dict:
    return {"ename": ename, "evalue": evalue, "output_type": "error", "traceback": [f"{ename}: {evalue}"]}


def notebook(*cells: dict, colab: bool = False) -> dict:
    meta: dict = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.11.8"},
    }
    if colab:
        meta["colab"] = {"provenance": [], "toc_visible": True}
        meta["accelerator"] = "GPU"
    return {"cells": list(cells), "metadata": meta, "nbformat": 4, "nbformat_minor": 0 if colab else 5}


IMPORTS = "import math\nimport torch\n"

NOTEBOOKS: dict[str, dict] = {
    # !pip, %matplotlib, matplotlib imported at the top, a plot of the weights
    "plots_and_magics": notebook(
        md("# Project Step 4: one causal attention head\nName: A. Student"),
        code("!pip install -q matplotlib", n=1),
        code("%matplotlib inline\nimport math\nimport torch\nimport matplotlib.pyplot as plt", n=2),
        md("## The head (Definition 2.2)"),
        code(HEAD, n=3),
        code(AUX + "\n\n" + STATS, n=4),
        code(DEMO, stream("torch.Size([1, 6, 5]) torch.Size([1, 6, 6])\n"), n=5),
        code(PLOT, image(), n=6),
        code("%timeit causal_self_attention(X, W_Q, W_K, W_V)", stream("41.2 µs ± 1.1 µs per loop\n"), n=7),
    ),
    # Colab: Drive mounted, pandas/tqdm/seaborn for the Exercise 3 experiment
    "colab_drive_pandas_tqdm_seaborn": notebook(
        code(
            "from google.colab import drive\ndrive.mount('/content/drive')", stream("Mounted at /content/drive\n"), n=1
        ),
        code(
            "import math\nimport torch\nimport numpy as np\nimport pandas as pd\nimport seaborn as sns\n"
            "import matplotlib.pyplot as plt\nfrom tqdm.auto import tqdm",
            n=2,
        ),
        code(HEAD, n=3),
        code(AUX, n=4),
        code(STATS, n=5),
        md("## Exercise 3: the scale\nRaw scores grow like sqrt(d_k) (Lemma 5.5)."),
        code(
            "rows = []\nfor d_k in tqdm([4, 16, 64, 256]):\n    s = score_scale_statistics(d_k)\n"
            "    rows.append({'d_k': d_k, **s})\ndf = pd.DataFrame(rows)\ndf",
            n=6,
        ),
        code("sns.lineplot(data=df, x='d_k', y='raw_std')\nplt.xscale('log')", image(), n=7),
        code("df.to_csv('/content/drive/MyDrive/step4/scale.csv')", n=8),
    ),
    # a first head without the mask, tried, then fixed in a later cell
    "buggy_then_fixed": notebook(
        code(IMPORTS, n=1),
        md("First attempt"),
        code(NO_MASK_HEAD, n=2),
        code(DEMO + "print(weights[0])", stream("tensor([[0.2, 0.1, ...]])\n"), n=3),
        md("Oops: the upper triangle is not zero. Fixed version:"),
        code(HEAD, n=4),
        code(DEMO + "assert (weights[0].triu(1) == 0).all()", n=5),
        code(AUX + "\n\n" + STATS, n=6),
    ),
    # the head calls helpers that are defined further down the notebook
    "helper_in_later_cell": notebook(
        code(IMPORTS, n=1),
        code(
            """def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = project(X, W_Q, W_K, W_V)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        scores = scores.masked_fill(future_mask(X.shape[1], X.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights""",
            n=2,
        ),
        code(AUX + "\n\n" + STATS, n=3),
        md("Helpers"),
        code(
            '''def project(X, W_Q, W_K, W_V):
    return X @ W_Q, X @ W_K, X @ W_V


def future_mask(T, device=None):
    """True above the diagonal: the positions a query may not read (Definition 4.1)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)''',
            n=4,
        ),
        code(DEMO, n=5),
    ),
    # a long training demo (over a minute), a cell that raises, and a half-written cell
    "slow_training_and_raise": notebook(
        code(IMPORTS + "import time", n=1),
        code(HEAD, n=2),
        code(AUX + "\n\n" + STATS, n=3),
        md("## Training a tiny model with the head (takes a few minutes on CPU)"),
        code(
            """torch.manual_seed(0)
X_train = torch.randn(64, 128, 32)
W_Q = torch.randn(32, 16, requires_grad=True)
W_K = torch.randn(32, 16, requires_grad=True)
W_V = torch.randn(32, 32, requires_grad=True)
opt = torch.optim.Adam([W_Q, W_K, W_V], lr=1e-2)
start = time.time()
for step in range(20000):
    out, _ = causal_self_attention(X_train, W_Q, W_K, W_V)
    loss = ((out[:, :-1] - X_train[:, 1:]) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 2000 == 0:
        print(step, loss.item(), time.time() - start)""",
            stream("0 1.93 0.01\n2000 0.97 14.2\n"),
            n=4,
        ),
        code("print(attention_weights.shape)", error("NameError", "name 'attention_weights' is not defined"), n=5),
        code("def plot_attention(w):\n    plt.imshow(w", n=None),
    ),
    # the head sits in a %%time cell; %%capture and %timeit elsewhere
    "time_magic_head": notebook(
        code("%%capture\n!pip install torch", n=1),
        code(IMPORTS, n=2),
        code("%%time\n" + HEAD + "\n" + DEMO, stream("CPU times: user 3.1 ms\nWall time: 3.3 ms\n"), n=3),
        code("%%time\n" + AUX + "\n\n" + STATS, n=4),
        code("%timeit causal_self_attention(X, W_Q, W_K, W_V)", n=5),
        code("causal_self_attention?", n=6),
    ),
    # module constants, aliases and `from` imports used by the functions
    "constants_and_aliases": notebook(
        code(
            "import math as m\nimport torch as th\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n"
            'NEG_INF = float("-inf")\nDTYPE = th.float64\nSOFTMAX_DIM = -1',
            n=1,
        ),
        code(
            """def causal_self_attention(X: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, causal: bool = True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ K.transpose(-2, -1) / m.sqrt(Q.shape[-1])
    if causal:
        T = X.shape[-2]
        scores = scores.masked_fill(th.ones(T, T, dtype=th.bool).triu(1), NEG_INF)
    weights = F.softmax(scores, dim=SOFTMAX_DIM)
    return weights @ V, weights


def gaussian_positional_weights(T: int, bandwidth: float) -> Tensor:
    pos = th.arange(T, dtype=DTYPE)
    lag = pos[:, None] - pos[None, :]
    logit = th.where(lag == 0, 0.0, -0.5 * (lag / bandwidth) ** 2)
    return F.softmax(logit.masked_fill(lag < 0, NEG_INF), dim=SOFTMAX_DIM)


def gaussian_positional_qk(T, bandwidth):
    pos = th.arange(T, dtype=DTYPE)
    Q = m.sqrt(2.0) * th.stack([pos, th.ones_like(pos)], dim=-1) / bandwidth
    K = th.stack([pos, -0.5 * pos**2], dim=-1) / bandwidth
    return Q, K""",
            n=2,
        ),
        code("torch = th\nmath = m\n" + STATS, n=3),
        code("d_k = 64\nX = th.randn(2, 8, 16)\nprint(score_scale_statistics(d_k))", n=4),
    ),
    # a head without the mask among plots: a buggy submission, graded on its definitions
    "buggy_among_plots": notebook(
        code("%matplotlib inline\nimport math\nimport torch\nimport matplotlib.pyplot as plt", n=1),
        code(NO_MASK_HEAD, n=2),
        code(DEMO, n=3),
        code(PLOT, image(), n=4),
        code(AUX + "\n\n" + STATS, n=5),
        code("plt.plot([score_scale_statistics(d)['raw_std'] for d in (4, 16, 64)])", image(), n=6),
    ),
    # the head needs einops, which the grader does not provide; the other functions do not
    "einops_head": notebook(
        code("!pip install einops", n=1),
        code("import math\nimport torch\nfrom einops import rearrange", n=2),
        code(
            """def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ rearrange(K, "b t d -> b d t") / math.sqrt(Q.shape[-1])
    if causal:
        T = X.shape[1]
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights""",
            n=3,
        ),
        code(AUX + "\n\n" + STATS, n=4),
        code(DEMO, n=5),
    ),
}


def main() -> None:
    for name, nb in NOTEBOOKS.items():
        (HERE / f"{name}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
