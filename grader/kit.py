"""The student kit: the grader as a wheel that holds no solution (``grade student-kit``).

    grade student-kit --out DIR [--rubric FILE]
        DIR/step4_grader_student-<version>-py3-none-any.whl   what students pip install
        DIR/INSTALL.md                                         the short note for the course page

Built from the same source as the instructor's grader. It holds the grader's code, the rubric without
its hidden checks, the student template, and ``grader/_snapshots/step4.safetensors``: the reference's
outputs on the public cases (``reference_match``'s inputs at the rubric's seed, the Gaussian kernels at
the checks' fixed bandwidths, the Exercise 3 points of the report's plot) and what the reference and each
known bug outside the error model compute on the diagnosis's fixed probes, with those bugs' words and
prices (so the kit names and prices every cause as the instructor's grader does), numbers and never code.
It leaves out ``grader/_reference``: the reference, the chaffs, the variants and their catalogs. In the
kit, :func:`grader.oracle.load_oracle` finds no reference and reads the snapshots instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import torch

from grader._paths import bundled
from grader.checks._exercises import KERNEL_CASES, QK_CASES, stats_seed
from grader.oracle import SNAPSHOT_FILE, Oracle, case_key, causal_name, gaussian_key, public_case_list
from grader.packaging import STUDENT_KIT, package_files, pyproject
from grader.rubric import Rubric
from grader.visuals import BANDWIDTHS, KERNEL_T, SCALE_DKS, SCALE_SAMPLES, SCALE_T

DISTRIBUTION = STUDENT_KIT
LEFT_OUT = ("reference", "rubrics", "snapshots")  # the rubric and the snapshots are written for the kit


def write_snapshots(path: Path, rubric: Rubric, oracle: Oracle) -> None:
    """The reference's outputs on every public case, and the diagnosis's answers of the reference and the known
    bugs on its probes, as one safetensors file (see :class:`SnapshotOracle` and ``grader.diagnosis._bugs``)."""
    from safetensors.torch import save_file

    from grader.diagnosis import stored_bugs

    tensors: dict[str, torch.Tensor] = {}
    cases = public_case_list(rubric.seed)
    for k, case in enumerate(cases):
        for name, t in case.tensors().items():
            tensors[case_key(k, name)] = t.double()
        for causal in (True, False):
            out, w = oracle.expected(case, causal)
            tensors[case_key(k, f"out_{causal_name(causal)}")] = out.double()
            tensors[case_key(k, f"w_{causal_name(causal)}")] = w.double()
    for T, h in sorted({*KERNEL_CASES, *QK_CASES, *((KERNEL_T, h) for h in BANDWIDTHS)}):
        tensors[gaussian_key(T, h)] = oracle.gaussian_weights(T, h).double()
    seed = stats_seed(rubric.seed)
    measured = {d_k: oracle.statistics(d_k, T=SCALE_T, n_samples=SCALE_SAMPLES, seed=seed) for d_k in SCALE_DKS}
    values = {str(d_k): {k: float(v) for k, v in stats.items()} for d_k, stats in measured.items()}
    assert oracle.module is not None
    bug_tensors, bug_meta = stored_bugs(oracle.module)
    tensors |= bug_tensors
    meta = {
        "seed": rubric.seed,
        "families": [c.shape.as_dict() for c in cases],
        "case_seeds": [c.seed for c in cases],
        "statistics": {"T": SCALE_T, "n_samples": SCALE_SAMPLES, "seed": seed, "values": values},
        **bug_meta,
    }
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), {k: json.dumps(v) for k, v in meta.items()})


def kit_rubric(text: str) -> str:
    """The rubric's text without its hidden checks (their tables are cut out; comments elsewhere stay) and
    without the prices of causes the kit cannot name (a known bug that computes the reference's values, which
    the instructor's grader cannot name either): every price of a cause the kit names stays."""
    from grader.diagnosis import kit_cause_ids

    data = tomllib.loads(text)
    hidden = {cid for cid, entry in data.get("checks", {}).items() if entry.get("visibility") == "hidden"}
    library = set(data.get("mistakes", {})) - kit_cause_ids()
    out: list[str] = []
    keep, section = True, ""
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[\s*checks\.([A-Za-z0-9_]+)\s*\]", line)
        if header or re.match(r"\s*\[", line):
            keep = not (header and header.group(1) in hidden)
            section = line.strip()
        price = re.match(r"\s*([A-Za-z0-9_]+)\s*=", line)
        if keep and not (section == "[mistakes]" and price and price.group(1) in library):
            out.append(line)
    result = "".join(out)
    parsed = tomllib.loads(result)
    left = set(parsed.get("checks", {}))
    assert not left & hidden, f"hidden checks left in the kit's rubric: {sorted(left & hidden)}"
    assert not set(parsed.get("mistakes", {})) & library, "causes the kit cannot name left in the kit's rubric"
    return result


def build_kit(out: Path, rubric_path: Path | None = None) -> Path:
    """Write the kit's wheel and install note into ``out``; returns the wheel's path."""
    from grader.oracle import load_oracle

    oracle = load_oracle()
    if oracle.edition != "instructor":
        raise KitError("this is the student kit: a kit is built from the instructor's grader")
    rubric_file = rubric_path or bundled("rubrics") / "step4.toml"
    from grader.runner import checked_rubric

    rubric = checked_rubric(rubric_file)  # refuse a rubric that would fail on every submission
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="step4-kit-") as tmp:
        stage = Path(tmp) / "src"
        files: list[tuple[str, Path]] = package_files(leave_out=LEFT_OUT)
        for name, path in files:
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, stage / name)
        written = {"grader/_rubrics/step4.toml": kit_rubric(Path(rubric_file).read_text(encoding="utf-8")).encode()}
        for name, data in written.items():
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            (stage / name).write_bytes(data)
        (stage / "grader/_snapshots").mkdir()
        write_snapshots(stage / "grader/_snapshots" / SNAPSHOT_FILE, rubric, oracle)
        tree = [name for name, _ in files] + list(written) + [f"grader/_snapshots/{SNAPSHOT_FILE}"]
        (stage / "pyproject.toml").write_text(pyproject([(n, None) for n in tree], DISTRIBUTION), encoding="utf-8")
        wheel = _wheel(stage, Path(tmp) / "dist")
        target = out / wheel.name
        shutil.copyfile(wheel, target)
    (out / "INSTALL.md").write_text(install_note(target.name), encoding="utf-8")
    return target


class KitError(RuntimeError):
    """The kit cannot be built here; the message says why."""


def _wheel(stage: Path, dist: Path) -> Path:
    """pip's wheel of the staged tree (setuptools from this environment when it has one: no download)."""
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "-w", str(dist), str(stage)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dist.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise KitError(f"pip could not build the kit's wheel:\n{done.stderr.strip() or done.stdout.strip()}")
    return wheels[0]


def install_note(wheel: str) -> str:
    from importlib import metadata

    torch_version = metadata.version("torch").split("+", 1)[0]
    return f"""# Project Step 4: the grader for your own machine

It runs on Linux, macOS or Windows (Python 3.11 or later, CPU; no root, no Docker, no WSL). Install it
where you run your head (a virtual environment is best), CPU build of PyTorch first:

```bash
pip install "torch=={torch_version}" --index-url https://download.pytorch.org/whl/cpu
pip install {wheel}
grade attention_head.py --html report.html
```

On Windows (PowerShell or cmd), the same lines in a virtual environment:

```
py -m venv .venv
.venv\\Scripts\\activate
pip install "torch=={torch_version}" --index-url https://download.pytorch.org/whl/cpu
pip install {wheel}
grade attention_head.py --html report.html
```

This is the student kit. It runs the same checks as the grader your submission meets, with two
differences: `reference_match` and the Gaussian checks compare with the reference's stored outputs on
fixed public cases (so `--seed` moves only the property checks), and `student_tests` runs your tests on
your own head; on submission they are graded against a correct head and known buggy ones. The kit holds
no solution.
"""


def kit_main(argv: list[str]) -> int:
    """``grade student-kit``: 0 on success, 2 when the kit cannot be built."""
    from grader.rubric import RubricError

    p = argparse.ArgumentParser(
        prog="grade student-kit",
        description="Build the student kit: a wheel of the grader with the reference's outputs on the public "
        "cases instead of the reference, chaffs and variants, and a short install note.",
    )
    p.add_argument("--out", type=Path, default=Path("student-kit"), help="folder to write into (default: %(default)s)")
    p.add_argument("--rubric", type=Path, help="rubric TOML (default: the bundled rubrics/step4.toml)")
    args = p.parse_args(argv)
    try:
        wheel = build_kit(args.out, args.rubric)
    except (RubricError, KitError) as exc:
        print(f"grade student-kit: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {wheel} and {args.out / 'INSTALL.md'}: put both on the course page (students pip install the wheel).")
    return 0
