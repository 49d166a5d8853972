"""What a worker computes for the grader: one function per request kind, no judging.

Runs inside the worker, next to the student's module. Every op takes plain tensors and JSON
parameters and returns a JSON header plus plain tensors; it reports *what happened* (the types and
shapes the student returned, which forbidden APIs were called, how long calls took) and leaves every
decision to the grader. Exceptions raised by student code propagate; the serve loop turns them into
error replies. This module must not import ``grader``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import _wire  # type: ignore[import-not-found]  # served by the worker's bootstrap finder (never import grader here)
import torch

MAX_RETURN_ELEMENTS = 1 << 24  # 16M elements: far above any shape the grader asks for

Header = dict[str, Any]
Tensors = dict[str, torch.Tensor]


def dispatch(module: ModuleType, op: str, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """Run one request ``op`` against the imported student ``module``."""
    handler = _OPS.get(op)
    if handler is None:
        raise ValueError(f"unknown op {op!r}")
    return handler(module, params, tensors)


# ----------------------------------------------------------------------------------------------
# describing what the student returned


def _describe(value: Any, name: str, out: Tensors) -> Header:
    """Describe one returned value; plain tensors are shipped under ``name``, anything else is named."""
    if type(value) is torch.Tensor:
        if value.layout != torch.strided:
            return {"type": "tensor", "problem": f"{value.layout} layout"}
        if value.dtype not in _wire.ALLOWED_DTYPES:  # not sent (complex, int8, ...): the caller judges it (issue 30)
            return {"type": "tensor", "problem": f"dtype {str(value.dtype).removeprefix('torch.')}"}
        if value.numel() > MAX_RETURN_ELEMENTS:
            return {
                "type": "tensor",
                "problem": f"{value.numel()} elements (over the {MAX_RETURN_ELEMENTS} cap)",
            }
        out[name] = value.detach().to("cpu")
        return {"type": "tensor", "name": name}
    if isinstance(value, torch.Tensor):
        return {"type": f"tensor subclass {type(value).__name__}"}
    if isinstance(value, bool):
        return {"type": "bool"}
    if isinstance(value, (int, float)):
        return {"type": "number", "value": float(value)}
    return {"type": type(value).__name__}


def _flatten(result: Any, out: Tensors) -> Header:
    """Describe a whole return value: a tensor, a tuple/list of values, a dict of values, or other."""
    if isinstance(result, (tuple, list)):
        items = [_describe(v, f"r{i}", out) for i, v in enumerate(result)]
        return {"kind": type(result).__name__, "items": items}
    if isinstance(result, dict):
        entries = {str(k): _describe(v, f"k:{k}", out) for k, v in result.items()}
        return {"kind": "dict", "entries": entries}
    return {"kind": "single", "items": [_describe(result, "r0", out)]}


def _outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


# ----------------------------------------------------------------------------------------------
# building arguments


def _arg(spec: Any, inputs: Tensors) -> Any:
    """An argument spec is ``{"t": name}`` for an input tensor or ``{"v": json_value}``."""
    if isinstance(spec, dict) and "t" in spec:
        return inputs[spec["t"]]
    if isinstance(spec, dict) and "v" in spec:
        return spec["v"]
    raise ValueError(f"bad argument spec {spec!r}")


def _prepare_inputs(params: Header, tensors: Tensors) -> Tensors:
    device = params.get("device", "cpu")
    wrt = set((params.get("grad") or {}).get("wrt", []))
    jac = params.get("jacobian_rows")
    if jac:
        wrt.add(jac["wrt"])
    inputs = {}
    for name, t in tensors.items():
        t = t.to(device).clone()
        inputs[name] = t.requires_grad_(True) if name in wrt else t
    return inputs


@contextlib.contextmanager
def _tracing(names: list[str], seen: list[str]) -> Iterator[None]:
    """Temporarily wrap each dotted attribute so that a call to it is recorded in ``seen``."""
    restore: list[tuple[Any, str, Any]] = []
    for dotted in names:
        owner_path, _, attr = dotted.rpartition(".")
        try:
            owner = importlib.import_module(owner_path)
        except ImportError:
            continue
        original = getattr(owner, attr, None)
        if original is None:
            continue

        def recorder(*a: Any, _orig: Callable[..., Any] = original, _name: str = dotted, **k: Any) -> Any:
            seen.append(_name)
            return _orig(*a, **k)

        setattr(owner, attr, recorder)
        restore.append((owner, attr, original))
    try:
        yield
    finally:
        for owner, attr, original in reversed(restore):
            setattr(owner, attr, original)


# ----------------------------------------------------------------------------------------------
# ops


def op_attrs(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """Which of the requested names the module defines, and whether each is callable."""
    found = {}
    for name in params.get("names", []):
        if hasattr(module, name):
            found[name] = "callable" if callable(getattr(module, name)) else type(getattr(module, name)).__name__
    return {"found": found}, {}


def _seed_all(seed: int, device: str = "cpu") -> None:
    """Seed every global generator a head may draw from (torch, numpy, ``random``), so that a head with
    randomness left in (dropout) draws the same numbers on both calls of a paired comparison."""
    import random
    import sys

    if device == "cpu":
        torch.default_generator.manual_seed(seed)  # torch.manual_seed also seeds lazy accelerators: 0.4 ms
    else:
        torch.manual_seed(seed)
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % (1 << 32))


def _global_rng_states() -> dict[str, bytes]:
    """The state of every global generator a function may seed or draw from (torch's CPU generator, NumPy's
    legacy one when NumPy is imported, ``random``), as bytes to compare."""
    import pickle
    import random
    import sys

    states = {"torch": bytes(torch.default_generator.get_state().numpy()), "random": pickle.dumps(random.getstate())}
    np = sys.modules.get("numpy")
    if np is not None:
        kind, keys, pos, gauss, cached = np.random.get_state(legacy=True)
        states["numpy"] = bytes(keys) + pickle.dumps((kind, pos, gauss, cached))
    return states


def op_call(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """Call ``module.<fn>(*args, **kwargs)``, optionally timing, tracing and differentiating it.

    Options (all optional): ``seed`` (seed torch, numpy and ``random`` just before the call),
    ``repeat`` (call n times, report each wall time), ``no_grad``, ``trace`` (dotted names whose calls
    are recorded), ``return_inputs`` (ship the input tensors back after the call, to detect mutation),
    ``grad`` (``{"wrt": [...], "upstream": {"0": name, ...}}``:
    gradients of sum_i <output_i, upstream_i> w.r.t. the named inputs) and ``jacobian_rows``
    (``{"wrt": name, "output": 0, "upstream": name}``: for every (b, i), the gradient of
    <out[b, i], u[b, i]> w.r.t. the input, stacked into a (B, T, *input.shape) tensor).
    """
    fn = getattr(module, params["fn"])
    inputs = _prepare_inputs(params, tensors)
    args = [_arg(s, inputs) for s in params.get("args", [])]
    kwargs = {k: _arg(s, inputs) for k, s in params.get("kwargs", {}).items()}
    if params.get("seed") is not None:
        _seed_all(int(params["seed"]), params.get("device", "cpu"))
    rng = _global_rng_states() if params.get("watch_rng") else None  # after the seeding: the call's own draws
    seen: list[str] = []
    times: list[float] = []
    grad_ctx = torch.no_grad() if params.get("no_grad") else contextlib.nullcontext()
    with _tracing(params.get("trace", []), seen), grad_ctx:
        for _ in range(max(1, int(params.get("repeat", 1)))):
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            if params.get("device", "cpu") == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    out: Tensors = {}
    header: Header = {"result": _flatten(result, out), "times": times, "traced": sorted(set(seen))}
    if rng is not None:  # which global generators the call seeded or drew from (the grader judges)
        header["global_rng"] = [name for name, state in _global_rng_states().items() if state != rng.get(name)]
    # Jacobian rows first: they keep the graph alive (retain_graph) for the gradients after them.
    if params.get("jacobian_rows"):
        header["jacobian"] = _jacobian_rows(_outputs(result), inputs, params["jacobian_rows"], out)
    if params.get("grad"):
        header["grads"] = _grads(_outputs(result), inputs, params["grad"], out)
    if params.get("return_inputs"):
        for name, t in inputs.items():
            out[f"in:{name}"] = t.detach().to("cpu")
    return header, out


def _grads(outputs: list[Any], inputs: Tensors, spec: Header, out: Tensors) -> Header:
    wrt = [inputs[n] for n in spec["wrt"]]
    loss = None
    for idx, up_name in spec["upstream"].items():
        if int(idx) >= len(outputs):  # what the head returned is judged by the caller; no IndexError of ours
            return {"problem": f"it returned {len(outputs)} value{'s' if len(outputs) != 1 else ''}, not {idx} + 1"}
        y, up = outputs[int(idx)], inputs[up_name]
        if not isinstance(y, torch.Tensor):  # what the head returned breaks the contract: the caller says so
            return {"problem": f"output {idx} is no tensor ({type(y).__name__})"}
        if not y.dtype.is_floating_point or not y.requires_grad:
            return {"problem": f"output {idx} is not differentiable (no autograd graph)"}
        if y.shape != up.shape:
            return {"problem": f"output {idx} has shape {tuple(y.shape)}, expected {tuple(up.shape)}"}
        term = (y * up.to(y.dtype)).sum()
        loss = term if loss is None else loss + term
    if loss is None:
        return {"problem": "no upstream gradient given"}
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    missing: list[str] = []
    for name, g in zip(spec["wrt"], grads, strict=True):
        if g is None:
            missing.append(name)
        else:
            out[f"g:{name}"] = g.detach().to("cpu")
    return {"missing": missing}


def _jacobian_rows(outputs: list[Any], inputs: Tensors, spec: Header, out: Tensors) -> Header:
    k = int(spec.get("output", 0))
    y = outputs[k] if k < len(outputs) else None
    x = inputs[spec["wrt"]]
    u = inputs[spec["upstream"]]
    if not isinstance(y, torch.Tensor) or not y.dtype.is_floating_point or not y.requires_grad or y.dim() != 3:
        return {"problem": "output is not a differentiable (B, T, d_v) tensor"}
    if y.shape != u.shape:  # what the head returned is judged by the caller; no error of ours (issue 30)
        return {"problem": f"output {k} has shape {tuple(y.shape)}, expected {tuple(u.shape)}"}
    u = u.to(y.dtype)
    rows = []
    B, T = y.shape[0], y.shape[1]
    for b in range(B):
        for i in range(T):
            (g,) = torch.autograd.grad((y[b, i] * u[b, i]).sum(), x, retain_graph=True, allow_unused=True)
            rows.append(torch.zeros_like(x) if g is None else g.detach())
    out["jac"] = torch.stack(rows).reshape(B, T, *x.shape).to("cpu")
    return {}


def op_kv_cache(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """Feed X one position at a time through ``cached_attention_step`` with a fresh ``KVCache``."""
    X, W_Q, W_K, W_V = (tensors[k] for k in ("X", "W_Q", "W_K", "W_V"))
    cache = module.KVCache()
    out: Tensors = {}
    steps = []
    lengths = []
    with torch.no_grad():
        for t in range(X.shape[1]):
            y = module.cached_attention_step(X[:, t].clone(), cache, W_Q, W_K, W_V)
            steps.append(_describe(y, f"step:{t}", out))
            lengths.append(len(cache))
        keys, values = cache.keys, cache.values
    if isinstance(keys, (list, tuple)):
        keys = torch.stack(list(keys), dim=1)
    if isinstance(values, (list, tuple)):
        values = torch.stack(list(values), dim=1)
    header = {
        "steps": steps,
        "lengths": lengths,
        "keys": _describe(keys, "keys", out),
        "values": _describe(values, "values", out),
    }
    return header, out


def op_call_each(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """``call`` once per input set, in order: tensors named ``<k>:<name>`` for k < ``count``, the same
    options (seed included) for every call. Saves a round trip per call; the replies are the same."""
    headers: list[Header] = []
    out: Tensors = {}
    for k in range(int(params["count"])):
        mine = {name.split(":", 1)[1]: t for name, t in tensors.items() if name.startswith(f"{k}:")}
        header, result = op_call(module, params, mine)
        headers.append(header)
        out.update({f"{k}:{name}": t for name, t in result.items()})
    return {"each": headers}, out


_OPS: dict[str, Callable[[ModuleType, Header, Tensors], tuple[Header, Tensors]]] = {
    "attrs": op_attrs,
    "call": op_call,
    "call_each": op_call_each,
    "kv_cache": op_kv_cache,
}


# ----------------------------------------------------------------------------------------------
# generation extensions: peak memory and timing against the plain formula (appended ops)


def _dense_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """The plain formula softmax(Q K^T / sqrt(d_k)) V, masked: the worker-side baseline."""
    T = Q.shape[1]
    s = (Q @ K.transpose(-2, -1)) / (Q.shape[-1] ** 0.5)  # (B, T, d_k) x (B, d_k, T) -> (B, T, T)
    if causal:
        future = torch.ones(T, T, dtype=torch.bool, device=Q.device).triu(1)  # (T, T)
        s = s.masked_fill(future, float("-inf"))  # (B, T, T)
    return torch.softmax(s, dim=-1) @ V  # (B, T, T) x (B, T, d_v) -> (B, T, d_v)


def _dense_head(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor) -> torch.Tensor:
    return _dense_attention(X @ W_Q, X @ W_K, X @ W_V)  # (B, T, d_v)


class _PeakBytes:
    """Peak bytes of the torch storages that ops create while active (inputs already alive are free).

    A dispatch mode sees every aten op's outputs; each new storage is counted until Python frees it
    (a finalizer). Deterministic, unlike RSS, and needs neither fork nor /proc. Memory that student
    code allocates outside torch (numpy, lists) is not seen.
    """

    def __init__(self, existing: list[torch.Tensor]) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        meter = self
        self.live: dict[int, int] = {t.untyped_storage().data_ptr(): 0 for t in existing}
        self.current = 0
        self.peak = 0

        class _Mode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False  # True would wrap the hook in a torch._dynamo guard: a 4 s import per worker

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                result = func(*args, **(kwargs or {}))
                for t in tree_leaves(result):
                    if isinstance(t, torch.Tensor):
                        meter._count(t)
                return result

        self._mode = _Mode()

    def _count(self, t: torch.Tensor) -> None:
        import weakref

        storage = t.untyped_storage()
        key, size = storage.data_ptr(), storage.nbytes()
        if size == 0 or key in self.live:
            return  # a view, an in-place result or an input: no new memory
        self.live[key] = size
        self.current += size
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)

    def __enter__(self) -> _PeakBytes:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def op_peak_memory(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """Peak bytes allocated by torch during one ``module.<fn>(*args, **kwargs)`` call under no_grad.

    With ``dense`` (``[q, k, v]`` input names), also the peak of the plain masked formula on them, so the
    grader can see that the meter works and compare. Reports bytes; the grader judges.
    """
    inputs = _prepare_inputs({"device": params.get("device", "cpu")}, tensors)
    fn = getattr(module, params["fn"])
    args = [_arg(s, inputs) for s in params.get("args", [])]
    kwargs = {k: _arg(s, inputs) for k, s in params.get("kwargs", {}).items()}
    header: Header = {}
    with torch.no_grad():
        if params.get("dense"):
            q, k, v = (inputs[n] for n in params["dense"])
            with _PeakBytes(list(inputs.values())) as meter:
                dense = _dense_attention(q, k, v)
            header["dense_peak_bytes"] = meter.peak
            del dense
        with _PeakBytes(list(inputs.values())) as meter:
            result = fn(*args, **kwargs)
        header["peak_bytes"] = meter.peak
    out: Tensors = {}
    header["result"] = _flatten(result, out)
    return header, out


def op_time_head(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """Times of ``module.<fn>(X, W_Q, W_K, W_V)`` and of the plain formula, interleaved.

    Up to ``rounds`` rounds of (``baseline_repeats`` baseline calls, one student call) on the same
    inputs under no_grad; stops early once the student's calls have used ``budget_s`` seconds. Reports
    wall and process CPU seconds per call; the grader takes the ratio.
    """
    device = params.get("device", "cpu")
    inputs = _prepare_inputs({"device": device}, tensors)
    fn = getattr(module, params["fn"])
    X, W_Q, W_K, W_V = (inputs[k] for k in ("X", "W_Q", "W_K", "W_V"))
    clocks = ("student_s", "baseline_s", "student_cpu_s", "baseline_cpu_s")
    times: dict[str, list[float]] = {k: [] for k in clocks}

    def timed(call: Callable[[], Any], who: str) -> None:
        c0, t0 = time.process_time(), time.perf_counter()
        call()
        if device == "cuda":
            torch.cuda.synchronize()
        times[f"{who}_s"].append(time.perf_counter() - t0)
        times[f"{who}_cpu_s"].append(time.process_time() - c0)

    returned: list[Any] = []

    def student() -> None:
        returned[:] = [fn(X, W_Q, W_K, W_V)]

    with torch.no_grad():
        for _ in range(max(1, int(params.get("rounds", 5)))):
            for _ in range(max(1, int(params.get("baseline_repeats", 1)))):
                timed(lambda: _dense_head(X, W_Q, W_K, W_V), "baseline")
            timed(student, "student")
            if sum(times["student_s"]) > float(params.get("budget_s", 2.0)):
                break
    return {**times, "returned": _shapes(returned[0])}, {}


def _shapes(result: Any) -> Header:
    """What a call returned, without its values: the kind (a tuple, a list, one value) and each item's type, and a
    tensor's shape (the grader judges whether a timed call computed what the contract asks)."""
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    kind = type(result).__name__ if isinstance(result, (tuple, list)) else "single"
    described = [
        {"type": "tensor", "shape": [int(n) for n in v.shape]}
        if isinstance(v, torch.Tensor)
        else {"type": type(v).__name__}
        for v in items[:8]
    ]
    return {"kind": kind, "items": described, "length": len(items)}


_OPS["peak_memory"] = op_peak_memory
_OPS["time_head"] = op_time_head


# ----------------------------------------------------------------------------------------------
# appended: replayable calls (diagnosis) and the student's own tests (Exercise 2)

JUNIT_CAP = 1 << 20  # bytes of JUnit XML shipped back; the grader rejects anything longer


def preload_pytest() -> None:
    """Import pytest and its built-in plugins (~0.3 s). A zygote whose workers may run a student's tests
    calls this once, which saves that time in every such worker; nothing else imports pytest early (a
    fresh interpreter per worker, on macOS, would pay it for every worker, tests or not)."""
    try:
        import _pytest.config

        for name in _pytest.config.default_plugins:
            importlib.import_module(f"_pytest.{name}")
    except ImportError:  # a grader without pytest still grades heads
        pass


def op_seeded_call(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """``call`` after ``torch.manual_seed(params["seed"])``, so that a head drawing from the global
    generator (dropout, ``torch.randn`` without a generator) can be replayed exactly in the grader."""
    return op_call(module, {**params, "seed": int(params["seed"])}, tensors)


def op_pytest(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """Run the student's test files with pytest, in this worker, against ``module`` (an instructor head).

    Params: ``tests`` (file names beside the module), ``test_timeout_s`` (an alarm per test phase),
    ``exitfirst`` (default true: stop at the first failure, as a chaff is caught by one; false runs every
    test, so the counts are pytest's own) and ``observe`` (names of ``module``'s functions whose calls by
    the tests are recorded, :func:`_observe`).
    Only those files and the folder's own conftest.py are read: no ini file, no cache, no plugin
    autoloading, no conftest above the folder. Returns pytest's exit code, the JUnit XML it wrote
    (``xml``: None when none was written, at most ``JUNIT_CAP + 1`` bytes) and the observed ``calls``;
    the grader judges.
    """
    import gc
    import os

    import pytest

    src = os.path.dirname(os.path.abspath(str(module.__file__)))
    files = [os.path.join(src, name) for name in params["tests"] if os.path.basename(name) == name]
    xml_path = os.path.join(os.getcwd(), "junit.xml")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    gc.freeze()  # pytest collects garbage at exit; with torch loaded a full sweep costs ~0.4 s per run
    _skip_dtensor_import()
    _hypothesis_profile(files)
    calls = _observe(module, [str(n) for n in params.get("observe", ())])
    args = [
        *files,
        "-q",
        *(["-x"] if params.get("exitfirst", True) else []),
        "--tb=short",
        "-p", "no:cacheprovider",
        "-c", os.devnull,
        "--rootdir", src,
        "--confcutdir", src,
        "--junitxml", xml_path,
        "-o", "junit_family=xunit2",
        "-o", "junit_logging=no",
    ]  # fmt: skip
    code = int(pytest.main(args, plugins=[_test_alarm(float(params["test_timeout_s"]))]))
    try:
        with open(xml_path, "rb") as f:
            data: bytes | None = f.read(JUNIT_CAP + 1)
    except OSError:
        data = None
    xml = None if data is None else data.decode("utf-8", "replace")
    return {"exit_code": code, "xml": xml, "calls": calls}, {}


OBSERVED_CALLS = 64  # distinct calls recorded per run; the rest are not


def _observe(module: ModuleType, names: list[str]) -> list[Header]:
    """Record how the tests call ``names``: each distinct call's arguments, a tensor by its shape, a bool,
    an int or None by its value, anything else as None. Only calls from outside ``module`` count (not the
    head calling itself). The functions are replaced before the tests import them, alike for every head."""
    import functools
    import json
    import sys

    calls: list[Header] = []
    seen: set[str] = set()
    own = getattr(module, "__file__", None)

    def plain(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return [int(n) for n in value.shape]
        return value if value is None or isinstance(value, bool | int) else None

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def observed(*args: Any, **kwargs: Any) -> Any:
            if len(calls) < OBSERVED_CALLS and sys._getframe(1).f_code.co_filename != own:
                record = {
                    "name": name,
                    "args": [plain(a) for a in args],
                    "kwargs": {k: plain(v) for k, v in kwargs.items()},
                }
                key = json.dumps(record, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    calls.append(record)
            return fn(*args, **kwargs)

        return observed

    for name in names:
        fn = getattr(module, name, None)
        if callable(fn) and not isinstance(fn, type):
            setattr(module, name, wrap(name, fn))
    return calls


def _hypothesis_profile(files: list[str]) -> None:
    """Suites written with Hypothesis run the same examples in every run (``derandomize``: the wheat and
    each chaff meet the same inputs), with no deadline (a loaded grading machine is not the suite's
    fault) and no example database (nothing carried from one run to the next)."""
    import os

    def mentions(path: str) -> bool:
        try:
            with open(path, "rb") as f:
                return b"hypothesis" in f.read(1 << 20)
        except OSError:
            return False

    if not any(mentions(path) for path in files):
        return  # importing Hypothesis costs ~0.2 s; most suites never use it
    try:
        from hypothesis import settings
    except ImportError:  # the suite's own import then fails, and the grader names the package
        return
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(os.getcwd(), ".hypothesis")  # the private work dir
    settings.register_profile("step4-grader", derandomize=True, deadline=None, database=None, print_blob=False)
    settings.load_profile("step4-grader")


def _skip_dtensor_import() -> None:
    """``torch.testing.assert_close`` imports torch.distributed.tensor on its first call (~0.6 s, in
    every fresh worker) only to unwrap DTensors, which no head returns; tell it there are none."""
    import sys

    comparison = sys.modules.get("torch.testing._comparison")
    if comparison is not None and isinstance(getattr(comparison, "_HAS_DTENSOR", None), bool):
        setattr(comparison, "_HAS_DTENSOR", False)  # noqa: B010  (a private flag; absent, nothing happens)


def _test_alarm(seconds: float) -> Any:
    """A pytest plugin: each setup, call and teardown phase of a test gets ``seconds`` (SIGALRM)."""
    import signal

    import pytest

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"this test did not finish within {seconds:g} s")

    def timed() -> Any:
        if not hasattr(signal, "SIGALRM"):  # Windows
            return (yield from _timed_by_thread(seconds))
        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    class TestAlarm:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_setup(self, item: Any) -> Any:
            return (yield from timed())

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_call(self, item: Any) -> Any:
            return (yield from timed())

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_teardown(self, item: Any, nextitem: Any) -> Any:
            return (yield from timed())

    return TestAlarm()


def _timed_by_thread(seconds: float) -> Any:
    """Windows has no SIGALRM: a timer thread raises the same TimeoutError in the test's thread (between
    two bytecodes, so a test stuck inside one C call is stopped by the grader's wall clock instead)."""
    import ctypes
    import threading

    class TestTimedOut(TimeoutError):
        def __init__(self, *args: object) -> None:
            super().__init__(*(args or (f"this test did not finish within {seconds:g} s",)))

    target = threading.get_ident()
    lock = threading.Lock()
    done = False

    def fire() -> None:
        with lock:
            if not done:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(TestTimedOut))

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        return (yield)
    finally:
        with lock:
            done = True
        timer.cancel()


_OPS["seeded_call"] = op_seeded_call
_OPS["pytest"] = op_pytest


# ----------------------------------------------------------------------------------------------
# appended: one traced call, for pointing at the line where a head leaves the lecture (issue 28)

FLAG = "causal"  # the entry point's flag (a parameter of causal_self_attention)


def _flag_in_reach(frame: Any) -> bool:
    """Whether ``frame``'s function can read the causal flag: a local of that name, or an attribute of its ``self``
    (``self.causal``, set in ``__init__``; read from the instance's own ``__dict__``, no attribute hook runs)."""
    code = frame.f_code
    if FLAG in code.co_varnames or FLAG in code.co_freevars:
        return True
    if "self" not in code.co_varnames:
        return False
    try:
        own = object.__getattribute__(frame.f_locals["self"], "__dict__")
        return isinstance(own, dict) and FLAG in own
    except Exception:
        return False


SLICING = frozenset({"__getitem__", "select", "unbind", "__iter__"})  # ops that take one sequence of an input
TRACE_RECORDS = 400  # records kept per traced call; the rest are counted, not kept
TRACE_ELEMENTS = 1 << 15  # elements of one recorded value shipped back (a probe's (B, T, T) is 98; at T = 128, 32768)
TRACE_EXITS = 64  # returns of the submission's frames recorded per traced call (the innermost first)
TRACE_TOTAL = 1 << 20  # elements of all recorded values together (8 MB of float64 at most)
_WIRE_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)


class _Trace:
    """What one call computed, op by op: each torch function's result (or, for a NumPy head, each array a
    local variable takes), the first frame in the submission's own files that made it, and which earlier
    results and inputs it read. Records only; the grader compares."""

    def __init__(self, src_dir: str, inputs: Tensors, light: bool = False) -> None:
        import os

        self.light = light  # the records alone (their sites, to count them): no values, no numbers' lines
        self.prefix = os.path.join(os.path.realpath(src_dir), "")
        self.records: list[Header] = []
        self.values: Tensors = {}
        self.dropped = 0
        self.total = 0
        self.keep: list[Any] = []  # every recorded object stays alive, so that no id is reused meanwhile
        self.by_id: dict[int, str] = {id(t): f"in:{name}" for name, t in inputs.items()}
        self.by_storage: dict[tuple[Any, ...], str] = {_storage_key(t): f"in:{n}" for n, t in inputs.items()}
        self.own: dict[Any, bool] = {}  # code object -> whether it is the submission's
        self.left: dict[str, Header] = {}  # "numpy", "detach": the first line that left torch or its graph
        self.aliases: list[Header] = []  # locals bound to an input tensor itself, where
        # frame -> local -> (the object it holds, line and code where it was last bound): the line tracer's
        # record of where each name a recorded line reads got its value (a constant made on another line)
        self.bound: dict[int, dict[str, tuple[Any, int, str, str]]] = {}  # (number, line, file, name bound there)
        # object -> attribute -> the same, for the numbers a method's ``self`` holds (``self.scale = d ** -0.5`` in
        # ``__init__``, read as ``q * self.scale`` in ``forward``); the objects are kept (``keep``): no id reused
        self.attrs: dict[int, dict[str, tuple[Any, int, str, str]]] = {}
        self.real: dict[str, str] = {}  # file -> its real path
        self.frame: Any = None  # the submission's frame of the last site() found
        self.module_lines: dict[str, dict[str, int]] = {}  # file -> global -> its top-level line
        self.returned_at: Header | None = None  # where the call's own frame returned (its ``return`` line)
        # every return of a submission's frame that handed back recorded tensors, in order (innermost first): the
        # line that returned a value (a helper's ``return out, scores``), where the caller passed it on unchanged
        self.exits: list[Header] = []
        self.failing: Header | None = None  # the last torch op that raised (``_failing``)

    def mine(self, code: Any) -> bool:
        import os

        known = self.own.get(code)
        if known is None:
            name = code.co_filename
            path = name if not name.startswith("<") else ""
            known = bool(path) and os.path.realpath(path).startswith(self.prefix)
            known = known and code.co_name != "__torch_function__"  # a mode of the submission's own
            self.own[code] = known
        return known

    def site(self) -> tuple[str, int, str] | None:
        """(file relative to the submission, line, source text) of the innermost frame in its own files."""
        import linecache
        import os
        import sys

        f: Any = sys._getframe(2)
        while f is not None and not self.mine(f.f_code):
            f = f.f_back
        if f is None:
            return None
        self.frame = f
        path = f.f_code.co_filename
        code = linecache.getline(path, f.f_lineno).strip()[:300] if not self.light else ""
        if path not in self.real:
            self.real[path] = os.path.realpath(path)
        return self.real[path][len(self.prefix) :], f.f_lineno, code

    def source(self, value: Any) -> str | None:
        if isinstance(value, torch.Tensor):
            return self.by_id.get(id(value)) or self.by_storage.get(_storage_key(value))
        return None

    def add(self, op: str, where: tuple[str, int, str], value: Any, reads: list[str], var: str = "") -> None:
        if len(self.records) >= TRACE_RECORDS:
            self.dropped += 1
            return
        k = len(self.records)
        name = f"v:{k}"
        record: Header = {"op": op[:80], "file": where[0], "line": where[1], "code": where[2], "reads": reads}
        if var:
            record["var"] = var[:80]
        if self.light:  # counted only (a patch names the nth value of its line)
            self.records.append(record)
            if isinstance(value, torch.Tensor):
                self.keep.append(value)
                self.by_id[id(value)] = name
            return
        if self.frame is not None and _flag_in_reach(self.frame):
            record["flag"] = True  # the function computing it has the causal flag in reach (a line to consult it)
        try:  # what a line reads is a note beside the record: a failure to read it must not reach the head
            defs = self.defs(where)
        except Exception:
            defs = []
        if defs:
            record["defs"] = defs
        t = value.detach() if isinstance(value, torch.Tensor) else torch.from_numpy(value.copy())
        record["shape"] = list(t.shape)
        record["dtype"] = str(t.dtype).removeprefix("torch.")
        n = t.numel()
        if t.layout == torch.strided and n <= TRACE_ELEMENTS and self.total + n <= TRACE_TOTAL:
            if t.dtype not in _WIRE_DTYPES:
                t = t.to(torch.float64 if t.dtype.is_floating_point or t.dtype.is_complex else torch.int64)
            if t.dtype.is_complex:
                t = t.real
            self.values[name] = t.to("cpu").clone()
            self.total += n
            record["value"] = name
        self.records.append(record)
        if isinstance(value, torch.Tensor):
            self.keep.append(value)
            self.by_id[id(value)] = name
            self.by_storage[_storage_key(value)] = name

    def defs(self, where: tuple[str, int, str]) -> list[Header]:
        """The numbers the recorded line reads by name and where each got its value, when that is another
        line: a local of the submission's frame (its last binding; a parameter: the caller's line in the
        submission, ``helper(x, value=-1e6)``) or a module-level name (its top-level assignment)."""
        import linecache
        import os

        f = self.frame
        if f is None:
            return []
        bound = self.bound.get(id(f), {})
        out: list[Header] = []
        names = _names(where[2])[:DEFS_PER_RECORD]
        for name in (*names, *_attributes(where[2])[:DEFS_PER_RECORD]):
            value: Any = None
            line, path, shown = 0, f.f_code.co_filename, name
            if name in bound:
                value, line, path, shown = bound[name]
            elif "." in name:
                value, line, path, shown = self.attribute(f, name) or (None, 0, path, name)
            elif name in f.f_globals and name not in f.f_code.co_varnames:
                value, line = f.f_globals[name], self.module_line(path, name)
            if path not in self.real:
                self.real[path] = os.path.realpath(path)
            real = self.real[path]
            if not line or not real.startswith(self.prefix) or (line == where[1] and path == f.f_code.co_filename):
                continue
            if not _number(value):
                continue
            try:
                number = float(value)
            except (OverflowError, TypeError, ValueError):  # an int past float's range, a Real that refuses
                continue
            code = linecache.getline(path, line).strip()[:300]
            out.append(
                {"var": shown[:80], "file": real[len(self.prefix) :], "line": line, "code": code, "value": number}
            )
        return out

    def attribute(self, frame: Any, name: str) -> tuple[Any, int, str, str] | None:
        """Where ``obj.attr`` (``name``) of a local object of ``frame`` got the number it holds, if it was seen."""
        obj, _, attr = name.partition(".")
        held = self.attrs.get(id(frame.f_locals.get(obj)), {}).get(attr) if obj in frame.f_locals else None
        return (held[0], held[1], held[2], name) if held is not None else None

    def passed(self, caller: Any, value: Any) -> tuple[int, str, str]:
        """(line, file, name) where the object ``value`` a call passed got bound in the calling frame of the
        submission: the binding of the caller's name holding it, or its module-level assignment; else the
        call's own line (a literal argument)."""
        import linecache

        path = caller.f_code.co_filename
        bound = self.bound.get(id(caller), {})
        code = linecache.getline(path, caller.f_lineno)
        for name in _attributes(code):  # ``f(q, self.scaling)``: where the attribute got it
            held = self.attribute(caller, name)
            if held is not None and held[0] is value and held[1]:
                return held[1], held[2], name
        for name in _names(code):
            if name in bound and bound[name][0] is value and bound[name][1]:
                return bound[name][1:]
            if name not in bound and caller.f_globals.get(name, None) is value:
                line = self.module_line(path, name)
                if line:
                    return line, path, name
        return caller.f_lineno, path, ""

    def module_line(self, path: str, name: str) -> int:
        """The line of the last top-level assignment to ``name`` in the submission's file ``path``."""
        import ast
        import linecache

        if path not in self.module_lines:
            found: dict[str, int] = {}
            try:
                tree = ast.parse("".join(linecache.getlines(path)))
            except (SyntaxError, ValueError):
                tree = ast.Module(body=[], type_ignores=[])
            for node in tree.body:
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                for t in targets if isinstance(node, (ast.Assign, ast.AnnAssign)) else []:
                    if isinstance(t, ast.Name):
                        found[t.id] = node.lineno
            self.module_lines[path] = found
        return self.module_lines[path].get(name, 0)


DEFS_PER_RECORD = 16  # names of one line looked up
ATTRS_PER_OBJECT = 64  # attributes of a method's ``self`` watched for the numbers they hold


@functools.lru_cache(maxsize=1024)
def _names(code: str) -> tuple[str, ...]:
    """The names a line of source reads, in order (not those in its comment or strings; a line that is part of
    a statement over several lines: up to where it stops making sense alone)."""
    import io
    import keyword
    import tokenize

    out: dict[str, None] = {}
    try:
        for t in tokenize.generate_tokens(io.StringIO(code).readline):
            if t.type == tokenize.NAME and not keyword.iskeyword(t.string):
                out[t.string] = None
    except (tokenize.TokenError, SyntaxError):
        pass
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _attributes(code: str) -> tuple[str, ...]:
    """The attributes of a name a line of source reads (``self.scale``), in order."""
    import io
    import tokenize

    out: dict[str, None] = {}
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type != tokenize.NL]
    except (tokenize.TokenError, SyntaxError):
        return ()
    for a, dot, b in zip(tokens, tokens[1:], tokens[2:], strict=False):
        if a.type == b.type == tokenize.NAME and dot.string == ".":
            out[f"{a.string}.{b.string}"] = None
    return tuple(out)


def _number(value: Any) -> bool:
    """A Python number (not a bool): a constant no torch op records."""
    import numbers

    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__module__ != "torch"


def _storage_key(t: torch.Tensor) -> tuple[Any, ...]:
    try:
        return (t.untyped_storage().data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype)
    except Exception:  # a tensor without storage (meta, a subclass)
        return (id(t),)


def _reads(trace: _Trace, args: Any, kwargs: Any) -> list[str]:
    """Where each tensor an op reads came from (``in:X``, ``v:3``), those the trace knows."""
    from torch.utils._pytree import tree_leaves

    leaves = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    return [s for s in (trace.source(x) for x in leaves) if s is not None]


def _failing(trace: _Trace, name: str, args: Any, kwargs: Any) -> Header | None:
    """The op that raised, at its site: its name, what it read and, for a reshape, the shape it was asked for
    (``x.view(B, T, h, d_v)`` on X of width d: the walk puts a stage of that shape in its place)."""
    try:  # a note beside the exception: a failure to take it must never replace the head's own exception
        where = trace.site()
        if where is None:
            return None
        failing: Header = {"file": where[0], "line": where[1], "op": name[:80]}
        failing["reads"] = _reads(trace, args, kwargs)[:8]
        sizes: Any = tuple(args[1:]) if name in ("view", "reshape") else ()
        sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
        if sizes and all(type(n) is int for n in sizes):
            failing["shape"] = [int(n) for n in sizes][:8]
        return failing
    except Exception:
        return None


def _torch_recorder(trace: _Trace) -> Any:
    """A TorchFunctionMode recording each torch function the submission calls, at the submission's line."""
    from torch.overrides import TorchFunctionMode

    class _Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", None) or type(func).__name__
            try:
                result = func(*args, **kwargs)
            except Exception:  # the op that raises: what it read and the shape it was asked for, for the walk
                trace.failing = _failing(trace, name, args, kwargs)
                raise
            if name in ("numpy", "detach", "tolist") and name not in trace.left:
                at = trace.site()
                if at is not None:
                    trace.left[name] = {"file": at[0], "line": at[1], "code": at[2]}
            if not isinstance(result, (torch.Tensor, tuple, list)) and not (result is None and args):
                return result  # .shape, .dim(), .item(): nothing computed
            where = trace.site()
            if where is None:
                return result
            # a light trace counts the values only (a patch names the nth value recorded at its line): no reads
            reads = [] if trace.light else _reads(trace, args, kwargs)
            first = args[0] if args else None
            if isinstance(result, torch.Tensor) and result is not first:
                trace.add(name, where, result, reads)
            elif isinstance(first, torch.Tensor) and (result is None or result is first):
                if str(trace.source(first)).startswith("in:") and "inplace" not in trace.left:
                    trace.left["inplace"] = {"file": where[0], "line": where[1], "code": where[2]}  # an input written
                trace.add(name, where, first, reads)  # in place (masked_fill_, +=, x[...] = ...): its new value
            elif isinstance(result, (tuple, list)):
                for item in result:
                    if isinstance(item, torch.Tensor):
                        trace.add(name, where, item, reads)
            return result

    return _Recorder()


def _array_tracer(trace: _Trace) -> Any:
    """A sys.settrace function following the submission's own frames only: each NumPy array a local variable
    takes, at the line that gave it (the line executed just before the change was seen), and each local bound
    to an input tensor itself (``q = X``)."""
    np = __import__("sys").modules.get("numpy")
    if np is None:
        import types

        np = types.SimpleNamespace(ndarray=type("NoArray", (), {}), array_equal=lambda *a, **k: True)  # aliases only
    state: dict[int, tuple[int, dict[str, Any]]] = {}
    known: dict[int, dict[str, str]] = {}  # frame -> the locals bound to an input tensor, as last seen

    def snapshot(frame: Any) -> dict[str, Any]:
        return {k: v for k, v in frame.f_locals.items() if isinstance(v, np.ndarray) and v.dtype.kind in "fcbiu"}

    def input_of(v: Any) -> str | None:
        """The input ``v`` is (``in:X``), or one sequence of it taken by indexing (``X[b]``, passed to a
        per-sequence helper: its ``x`` is the input as far as that helper goes), with where it was taken
        (``in:X@file:line``); None for any other value."""
        name = trace.by_id.get(id(v), "")
        if name.startswith("in:"):
            return name
        if name.startswith("v:") and (k := int(name[2:])) < len(trace.records):
            r = trace.records[k]
            reads = r.get("reads", [])
            if r.get("op") in SLICING and len(reads) == 1 and str(reads[0]).startswith("in:"):
                return f"{reads[0]}@{r['file']}:{r['line']}"
        return None

    def aliases(frame: Any) -> dict[str, str]:
        """Locals that are one of the call's input tensors themselves (``q = X``), or one sequence of it (``v =
        x`` of ``x = X[b]``): no op records them. A sequence carries where it was taken (``in:X@file:line``):
        binding it there makes it, not an alias."""
        return {k: name for k, v in frame.f_locals.items() if (name := input_of(v)) is not None}

    def rebound(frame: Any, line: int, caller: Any = None) -> None:
        """Where each local got the object it now holds: ``line`` for one bound since the last event. At a
        call, a parameter got it where the caller's argument did (``helper(s, NEG)``: ``NEG = -1e6``; a
        literal, ``helper(s, -1e6)``: the caller's line); 0 when called from outside the submission."""
        seen = trace.bound.setdefault(id(frame), {})
        for var, v in frame.f_locals.items():
            old = seen.get(var)
            if old is not None and old[0] is v:
                continue
            if not _number(v):  # only numbers are looked up (a tensor is a record of its own)
                if old is not None:
                    del seen[var]
                continue
            if caller is None:
                seen[var] = (v, line, frame.f_code.co_filename, var)
            else:
                at, path, name = trace.passed(caller, v)
                seen[var] = (v, at, path, name or var)
        me = frame.f_locals.get("self")
        attrs = vars(me) if me is not None and hasattr(me, "__dict__") else None
        if isinstance(attrs, dict):  # a method's object: where each number it holds was set
            if id(me) not in trace.attrs:
                trace.keep.append(me)  # once per object
            held = trace.attrs.setdefault(id(me), {})
            for name, v in list(attrs.items())[:ATTRS_PER_OBJECT]:
                old = held.get(name)
                if old is not None and old[0] is v:
                    continue
                if _number(v) and isinstance(name, str):
                    held[name] = (v, line, frame.f_code.co_filename, name)
                else:
                    held.pop(name, None)

    def passed_inputs(frame: Any, bound: dict[str, str]) -> None:
        """The parameters a call bound to an input tensor itself, each as an alias made where the caller (the
        nearest frame of the submission up the stack) passed it: the line binding the caller's name to that input
        (``v = X`` before ``attention(q, k, v)``), else the call's own line (``attention_2d(x, W_Q, W_Q, W_V)``),
        marked ``param``."""
        import linecache
        import os

        up = frame.f_back
        while up is not None and not trace.mine(up.f_code):
            up = up.f_back
        if up is None or not bound or len(trace.aliases) >= TRACE_RECORDS:
            return
        path = os.path.realpath(up.f_code.co_filename)[len(trace.prefix) :]
        code = linecache.getline(up.f_code.co_filename, up.f_lineno).strip()[:300]
        names = _names(code)
        for var, name in bound.items():
            name = name.partition("@")[0]
            at = next(
                (a for a in reversed(trace.aliases) if a["file"] == path and a["input"] == name and a["var"] in names),
                {"line": up.f_lineno, "code": code},
            )
            entry = {"var": var[:80], "input": name, "file": path, "line": at["line"], "code": at["code"]}
            trace.aliases.append({**entry, "param": True})

    def noted(note: Callable[..., None], *args: Any) -> None:
        """Where names got their values is a note for the grader: an error in taking it (a local whose
        comparison raises) must never reach the head's own code."""
        try:
            note(*args)
        except Exception:
            trace.bound.pop(id(args[0]), None)

    def changes(frame: Any) -> None:
        line, before = state.get(id(frame), (frame.f_lineno, {}))
        noted(rebound, frame, line)
        bound = aliases(frame)
        for var, name in bound.items():
            if known.get(id(frame), {}).get(var) != name:
                code = __import__("linecache").getline(frame.f_code.co_filename, line).strip()[:300]
                path = __import__("os").path.realpath(frame.f_code.co_filename)[len(trace.prefix) :]
                name, _, taken = name.partition("@")
                if taken != f"{path}:{line}":  # a sequence bound where it is taken (``x = X[b]``) is made there
                    trace.aliases.append({"var": var[:80], "input": name, "file": path, "line": line, "code": code})
        known[id(frame)] = bound
        now = snapshot(frame)
        for var, arr in now.items():
            old = before.get(var)
            if old is None or old[0] is not arr or not np.array_equal(old[1], arr, equal_nan=True):
                code = __import__("linecache").getline(frame.f_code.co_filename, line).strip()[:300]
                path = __import__("os").path.realpath(frame.f_code.co_filename)[len(trace.prefix) :]
                trace.frame = frame  # the frame whose locals the line read
                trace.add("=", (path, line, code), arr, [], var=var)
        state[id(frame)] = (frame.f_lineno, {k: (v, v.copy()) for k, v in now.items()})

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event in ("line", "return"):
            with torch._C.DisableTorchFunction():  # the recorder's own copies are not the head's ops
                changes(frame)
            if event == "return":
                state.pop(id(frame), None)
                known.pop(id(frame), None)
                trace.bound.pop(id(frame), None)
                exited(frame, arg)
                up = frame.f_back
                if arg is not None and (up is None or not trace.mine(up.f_code)):  # the call itself returned
                    noted(returned, frame)
        return local

    def at_line(frame: Any) -> Header:
        """The frame's file (relative to the submission), line and source text."""
        import linecache
        import os

        path = frame.f_code.co_filename
        code = linecache.getline(path, frame.f_lineno).strip()[:300]
        return {"file": os.path.realpath(path)[len(trace.prefix) :], "line": frame.f_lineno, "code": code}

    def exited(frame: Any, arg: Any) -> None:
        """A return of the submission's frame that hands back recorded tensors: its line and their names (``one``:
        it returned one value, not a tuple or list of them)."""
        one = not isinstance(arg, (tuple, list))
        items = (arg,) if one else arg
        names = [(trace.by_id.get(id(x)) or "") if isinstance(x, torch.Tensor) else "" for x in items[:8]]
        if any(names) and len(trace.exits) < TRACE_EXITS:
            trace.exits.append({**at_line(frame), "names": names, "one": one})

    def returned(frame: Any) -> None:
        """Where the call returned: its own frame's last line (the last frame of the submission to return)."""
        trace.returned_at = at_line(frame)

    def glob(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and trace.mine(frame.f_code):
            with torch._C.DisableTorchFunction():  # the arguments it was given are not its own results
                state[id(frame)] = (frame.f_lineno, {k: (v, v.copy()) for k, v in snapshot(frame).items()})
                known[id(frame)] = aliases(frame)
                caller = frame.f_back
                noted(rebound, frame, 0, caller if caller is not None and trace.mine(caller.f_code) else None)
                noted(passed_inputs, frame, known[id(frame)])
            return local
        return None

    return glob


def op_trace(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """One ``module.<fn>(*args, **kwargs)`` call (after seeding, as ``call`` does), traced: ``records`` lists,
    in order, each tensor a torch function returned in the submission's own code (the op, the submission's
    file, line and source text, the earlier records and inputs it read, its shape and dtype) and each NumPy
    array a local variable of the submission's frames took; the values (``v:<k>``, each at most
    ``TRACE_ELEMENTS`` elements) come back as tensors, and the call's result as ``call`` returns it."""
    return _traced_call(module, params, tensors)


def _traced_call(
    module: ModuleType,
    params: Header,
    tensors: Tensors,
    table: dict[tuple[str, int, int, str], torch.Tensor | None] | None = None,
) -> tuple[Header, Tensors]:
    """The ``trace`` op's call, with the ``intervene`` op's patches (``table``) applied when given. Under
    ``no_grad`` unless the request says ``"no_grad": false`` (a proof's call as a check makes it, autograd
    recording on); ``"values": false`` sends back the call's result alone, not the values recorded on the way
    (nor the records, aliases and context that describe them)."""
    import os
    import sys

    fn = getattr(module, params["fn"])
    inputs = _prepare_inputs({"device": "cpu"}, tensors)
    args = [_arg(s, inputs) for s in params.get("args", [])]
    kwargs = {k: _arg(s, inputs) for k, s in params.get("kwargs", {}).items()}
    if params.get("seed") is not None:
        _seed_all(int(params["seed"]))
    src = os.path.dirname(os.path.abspath(str(getattr(module, "__file__", "") or ".")))
    trace = _Trace(src, inputs, light=not params.get("values", True))
    # ``"arrays": false`` (a torch head's light call): no line tracer, so no NumPy local is recorded nor patched
    arrays = params.get("arrays", True) or any(var for *_, var in (table or {}))
    inner = _array_tracer(trace) if arrays else None
    tracer = inner if table is None else _patching_tracer(trace, inner, table)
    patching = contextlib.nullcontext() if table is None else _patcher(trace, table)
    previous = sys.gettrace()
    raised: Header | None = None
    result: Any = None
    grad = torch.no_grad() if params.get("no_grad", True) else contextlib.nullcontext()
    with grad, patching, _torch_recorder(trace):
        if tracer is not None:
            sys.settrace(tracer)
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # where the submission raised: its own innermost frame
            raised = _raised_at(trace, exc)
            failing = trace.failing or {}
            if (failing.get("file"), failing.get("line")) == (raised.get("file"), raised.get("line")):
                raised.update({k: failing[k] for k in ("op", "reads", "shape") if k in failing})  # that line's op
        finally:
            if tracer is not None:
                sys.settrace(previous)
    if not params.get("values", True):  # the result alone (with where it raised)
        out: Tensors = {}
        header: Header = {"result": _flatten(result, out), "records": []}
        if raised is not None:
            header["raised"] = raised
        return header, out
    out = dict(trace.values)
    header = {"result": _flatten(result, out), "records": trace.records, "dropped": trace.dropped}
    if raised is not None:
        header["raised"] = raised
    header["left"] = trace.left
    header["aliases"] = trace.aliases[:TRACE_RECORDS]
    if trace.returned_at is not None:
        header["returned_at"] = trace.returned_at
    header["exits"] = trace.exits
    header["context"] = _context(trace, raised)
    return header, out


def _raised_at(trace: _Trace, exc: BaseException) -> Header:
    """The exception's type and the innermost frame of its traceback in the submission's own files."""
    import linecache
    import os

    site: Header = {"type": type(exc).__name__[:200]}
    tb = exc.__traceback__
    while tb is not None:
        if trace.mine(tb.tb_frame.f_code):
            path = tb.tb_frame.f_code.co_filename
            site.update(
                file=os.path.realpath(path)[len(trace.prefix) :],
                line=tb.tb_lineno,
                code=linecache.getline(path, tb.tb_lineno).strip()[:300],
            )
        tb = tb.tb_next
    return site


def _context(trace: _Trace, raised: Header | None = None, around: int = 3) -> dict[str, dict[str, str]]:
    """The source lines within ``around`` of every recorded line, per file (for showing a line in place)."""
    import linecache

    wanted: dict[str, set[int]] = {}
    defs = [d for r in trace.records for d in r.get("defs", ())]  # a constant's line, shown as the line to edit
    ends = [x for x in (raised, trace.returned_at) if x and "line" in x]  # where it raised, or returned
    for r in [*trace.records, *defs, *ends]:
        wanted.setdefault(r["file"], set()).update(range(max(1, r["line"] - around), r["line"] + around + 1))
    out: dict[str, dict[str, str]] = {}
    for name, lines in wanted.items():
        path = trace.prefix + name
        text = {str(n): linecache.getline(path, n).rstrip()[:300] for n in sorted(lines)[:2000]}
        out[name] = {n: t for n, t in text.items() if t or linecache.getline(path, int(n))}
    return out


_OPS["trace"] = op_trace


# ----------------------------------------------------------------------------------------------
# appended: one traced call with some of its values replaced, for finding every mistake by intervention (issue 35)
#
# A patch names a recorded value by its site: ``file`` and ``line`` in the submission, ``nth`` (the nth value
# recorded at that line in this call, counted as the ``trace`` op numbers them) and, for a NumPy head, ``var``
# (the local the line assigned). It replaces that value with the tensor ``value`` names (a stage of the lecture,
# in the recorded value's layout), or, when ``value`` is absent, with the op's input (pass-through: dropout, a
# cast, a clamp). Torch ops are replaced by a TorchFunctionMode below the recorder, so the recorder sees (and
# records) the replacement; an op whose result is replaced is not run at all, so a crash there is walked past.
# NumPy locals are replaced from the line tracer, before the recorder reads them (``_write_local``).

PATCHES_MAX = 64  # patches one call accepts


def _patch_table(params: Header, tensors: Tensors) -> dict[tuple[str, int, int, str], torch.Tensor | None]:
    """``(file, line, nth, var)`` -> the replacement (None: pass-through), from the request's ``patches``."""
    table: dict[tuple[str, int, int, str], torch.Tensor | None] = {}
    for p in list(params.get("patches") or [])[:PATCHES_MAX]:
        key = (str(p["file"]), int(p["line"]), int(p["nth"]), str(p.get("var", "")))
        table[key] = tensors[str(p["value"])] if p.get("value") is not None else None
    return table


def _patcher(trace: _Trace, table: dict[tuple[str, int, int, str], torch.Tensor | None]) -> Any:
    """A TorchFunctionMode entered below the recorder: it sees each op after the recorder let it through, and
    returns the patch for the op whose site and count a patch names."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves

    lines = {(f, n) for f, n, _, var in table if not var}
    busy = [0]  # the recorder's own bookkeeping (its copies, storage keys) passes through this mode too

    def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any, **k: Any) -> Any:
            busy[0] += 1
            try:
                return method(*a, **k)
            finally:
                busy[0] -= 1

        return call

    for name in ("add", "source", "site"):
        setattr(trace, name, guarded(getattr(trace, name)))

    class _Patcher(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if busy[0] or not lines:
                return func(*args, **kwargs)
            where = trace.site()
            if where is None or (where[0], where[1]) not in lines:
                return func(*args, **kwargs)
            nth = sum(1 for r in trace.records if r["file"] == where[0] and r["line"] == where[1])
            key = (where[0], where[1], nth, "")
            if key not in table:
                return func(*args, **kwargs)
            first = args[0] if args else None
            new = table[key]
            keep = first.clone() if new is None and isinstance(first, torch.Tensor) else None
            crashed = False
            try:
                result = func(*args, **kwargs)
            except Exception:  # a crash is a departure too: the patch stands for the value it did not make
                if new is None:
                    raise
                result, crashed = None, True
            made = isinstance(result, torch.Tensor) and result is not first
            inplace = isinstance(first, torch.Tensor) and (result is None or result is first) and not crashed
            if not (made or inplace or crashed):
                return result  # .shape, .item(): not a value the recorder counts
            if new is None:  # pass-through: the op's input, unchanged (an in-place op's target restored)
                if inplace and keep is not None and isinstance(first, torch.Tensor):
                    first.copy_(keep)
                    return result
                source = next((x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)), None)
                return source.clone() if source is not None else result
            name = getattr(func, "__name__", "")
            inplace = inplace or (crashed and (name == "__setitem__" or name.endswith("_") and name[:1] != "_"))
            if isinstance(first, torch.Tensor) and inplace and first.shape == new.shape:
                first.copy_(new.to(dtype=first.dtype))  # in place (masked_fill_, x[...] = ...): into its target
                return None if name == "__setitem__" else first
            if isinstance(result, torch.Tensor) and result.dtype.is_floating_point:
                return new.to(dtype=result.dtype, device=result.device).clone()
            if crashed:  # the value it did not make, in the dtype of what it read (a float16 call's stage is float16)
                read = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
                floating = next((x for x in read if x.dtype.is_floating_point), None)
                if floating is not None:
                    return new.to(dtype=floating.dtype, device=floating.device).clone()
            return new.clone()

    return _Patcher()


def _write_local(frame: Any, name: str, value: Any) -> None:
    """Bind local ``name`` of ``frame`` (a frame being traced) to ``value``. On 3.13 ``f_locals`` writes through;
    before, it is a snapshot that the next read of ``f_locals`` refreshes from the frame, so it is copied back
    into the frame's fast locals at once with ``PyFrame_LocalsToFast`` (the C API the trace trampoline uses)."""
    import sys

    frame.f_locals[name] = value
    if sys.version_info < (3, 13):
        import ctypes

        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def _patching_tracer(trace: _Trace, inner: Any, table: dict[tuple[str, int, int, str], torch.Tensor | None]) -> Any:
    """``inner`` (the array tracer) with the patched NumPy locals written into their frames first: each patch
    is applied at the first line event after its line assigned (or changed) its local."""
    import os

    np = __import__("sys").modules.get("numpy")
    wanted = {(f, n): (k, var) for f, n, k, var in table if var}
    if np is None or not wanted:
        return inner
    last: dict[int, int] = {}  # frame -> the line that ran last
    seen: dict[tuple[int, str], Any] = {}  # (frame, var) -> (the array, a copy), as last seen

    def patch(frame: Any) -> None:
        path = os.path.realpath(frame.f_code.co_filename)[len(trace.prefix) :]
        line = last.get(id(frame))
        hits = [(k, var) for (f, n), (k, var) in wanted.items() if f == path and n == line]
        for _, var in hits:
            now = frame.f_locals.get(var)
            old = seen.get((id(frame), var))
            if not isinstance(now, np.ndarray) or (
                old is not None and old[0] is now and np.array_equal(old[1], now, equal_nan=True)
            ):
                continue
            nth = sum(1 for r in trace.records if r["file"] == path and r["line"] == line and r.get("var") == var)
            key = (path, line, nth, var)
            if key in table and table[key] is not None:
                new = table[key].numpy().astype(now.dtype if now.dtype.kind == "f" else "float64")  # type: ignore[union-attr]
                _write_local(frame, var, new)
                now = new
            seen[(id(frame), var)] = (now, now.copy())

    def wrap(local: Any) -> Any:
        def traced(frame: Any, event: str, arg: Any) -> Any:
            if event in ("line", "return"):
                with torch._C.DisableTorchFunction():
                    patch(frame)
            last[id(frame)] = frame.f_lineno
            out = local(frame, event, arg)
            return traced if out is not None else None

        return traced

    def glob(frame: Any, event: str, arg: Any) -> Any:
        local = inner(frame, event, arg)
        if local is None:
            return None
        last[id(frame)] = frame.f_lineno
        return wrap(local)

    return glob


def op_intervene(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """The ``trace`` op's call with ``patches`` applied (their tensors come as ``patch:<k>``, apart from the
    call's inputs): the records, the values and the call's result, as ``trace`` returns them."""
    patches = {k: v for k, v in tensors.items() if k.startswith("patch:")}
    tensors = {k: v for k, v in tensors.items() if not k.startswith("patch:")}
    return _traced_call(module, params, tensors, _patch_table(params, patches))


_OPS["intervene"] = op_intervene


def op_intervene_each(module: ModuleType, params: Header, tensors: Tensors) -> tuple[Header, Tensors]:
    """``intervene`` once per input set, in order (as ``call_each`` does ``call``): tensors named ``<k>:<name>``
    (a patch's ``<k>:patch:<j>``), call k's patches in ``patches_each[k]``, the other options the same for every
    call."""
    headers: list[Header] = []
    out: Tensors = {}
    for k, patches in enumerate(list(params.get("patches_each") or [])):
        mine = {name.split(":", 1)[1]: t for name, t in tensors.items() if name.startswith(f"{k}:")}
        header, result = op_intervene(module, {**params, "patches": patches}, mine)
        headers.append(header)
        out.update({f"{k}:{name}": t for name, t in result.items()})
    return {"each": headers}, out


_OPS["intervene_each"] = op_intervene_each
