"""The student kit: the grader as a wheel that holds no solution (``grade student-kit``).

    grade student-kit --out DIR [--rubric FILE] [--url URL]
        DIR/step4_grader_student-<version>-py3-none-any.whl   what students pip install
        DIR/INSTALL.md                                         the short note for the course page

``--url`` is where the wheel will be published (its address, or its folder's ending in ``/``): the template's CI
workflow that the kit bundles (``grade init`` writes it) installs the kit from there. Without it the workflow keeps
its placeholder, and INSTALL.md says so.

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
WORKFLOW = "grader/_student_template/.github/workflows/grade.yml"  # the template's CI workflow, inside the kit
PLACEHOLDER_URL = "https://YOUR-COURSE.example/step4/step4_grader_student-0.1.0-py3-none-any.whl"
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
    points = {cid: data["checks"][cid].get("points", 0) for cid in sorted(hidden)}
    shown = {cid: p for cid, p in points.items() if not data["checks"][cid].get("extra_credit")}
    if shown:  # their points stay in the kit's total, pending (issue 53.1)
        result = (
            result.rstrip("\n")
            + "\n\n# The instructor's hidden checks: graded on submission, pending here.\n[pending]\n"
        )
        result += "".join(f"{cid} = {p}\n" for cid, p in shown.items())
    parsed = tomllib.loads(result)
    left = set(parsed.get("checks", {}))
    assert not left & hidden, f"hidden checks left in the kit's rubric: {sorted(left & hidden)}"
    assert not set(parsed.get("mistakes", {})) & library, "causes the kit cannot name left in the kit's rubric"
    return result


def workflow_with_url(text: str, url: str, wheel: str) -> str:
    """The template's CI workflow installing the kit from ``url`` (a folder's address, ending in ``/``, gets the
    wheel's name)."""
    if PLACEHOLDER_URL not in text:
        raise KitError(f"the template's CI workflow has no placeholder {PLACEHOLDER_URL} to replace")
    return text.replace(PLACEHOLDER_URL, url + wheel if url.endswith("/") else url)


def wheel_name(version: str) -> str:
    """The kit's wheel file, as pip names it."""
    return f"{DISTRIBUTION.replace('-', '_')}-{version}-py3-none-any.whl"


def build_kit(out: Path, rubric_path: Path | None = None, url: str | None = None) -> Path:
    """Write the kit's wheel and install note into ``out``; returns the wheel's path. ``url``: where the wheel
    will be published, for the template's CI workflow (see the module docstring)."""
    import grader
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
        if url is not None:
            workflow = (stage / WORKFLOW).read_text(encoding="utf-8")
            written[WORKFLOW] = workflow_with_url(workflow, url, wheel_name(grader.__version__)).encode()
        for name, data in written.items():
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            (stage / name).write_bytes(data)
        (stage / "grader/_snapshots").mkdir()
        write_snapshots(stage / "grader/_snapshots" / SNAPSHOT_FILE, rubric, oracle)
        tree = sorted({name for name, _ in files} | set(written)) + [f"grader/_snapshots/{SNAPSHOT_FILE}"]
        (stage / "pyproject.toml").write_text(pyproject([(n, None) for n in tree], DISTRIBUTION), encoding="utf-8")
        wheel = _wheel(stage, Path(tmp) / "dist")
        target = out / wheel.name
        shutil.copyfile(wheel, target)
    if target.name != wheel_name(grader.__version__):
        raise KitError(f"pip named the kit's wheel {target.name}, not {wheel_name(grader.__version__)}")
    (out / "INSTALL.md").write_text(install_note(target.name, url), encoding="utf-8")
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


def install_note(wheel: str, url: str | None = None) -> str:
    """The kit's INSTALL.md: a virtual environment on every OS, torch's CPU build, the kit, the template, and what
    the template's CI workflow installs (``url``: where the instructor publishes the wheel, if told)."""
    from importlib import metadata

    torch_version = metadata.version("torch").split("+", 1)[0]
    torch_line = f'pip install "torch=={torch_version}" --index-url https://download.pytorch.org/whl/cpu'
    if url is None:
        ci = (
            "The template's `.github/workflows/grade.yml` grades every push of your repository on GitHub. It installs "
            "the kit from `STUDENT_KIT_URL`, which still holds a placeholder "
            f"(`{PLACEHOLDER_URL}`): put the address of this wheel on your course page there (your instructor's "
            "template may have it already), or the workflow stops at its install step."
        )
    else:
        address = url + wheel if url.endswith("/") else url
        ci = (
            "The template's `.github/workflows/grade.yml` grades every push of your repository on GitHub; it installs "
            f"this kit from `{address}` (`STUDENT_KIT_URL`), so it needs no token."
        )
    return f"""# Project Step 4: the grader for your own machine

It runs on Linux, macOS or Windows (Python 3.11 or later, CPU; no root, no Docker, no WSL). Install it in a
virtual environment, the CPU build of PyTorch first, then write the template into a new folder and grade it.

On macOS or Linux (a terminal):

```bash
python3 -m venv .venv
source .venv/bin/activate
{torch_line}
pip install {wheel}
grade init step4
cd step4
grade attention_head.py --html report.html
```

On Windows (PowerShell or cmd):

```
py -m venv .venv
.venv\\Scripts\\activate
{torch_line}
pip install {wheel}
grade init step4
cd step4
grade attention_head.py --html report.html
```

`grade init step4` writes the template the kit bundles into the folder `step4`: `attention_head.py`, the
functions you implement (each raises NotImplementedError until you do), `test_attention_head.py`, starter tests
for Exercise 2, `README.md`, what to implement and how you are graded, and the CI workflow. It never
overwrites a file that is there. Open a new terminal later? Activate the environment again
(`source .venv/bin/activate`, or `.venv\\Scripts\\activate` on Windows). `grade --version` says which grader
is installed.

This is the student kit. It runs the same checks as the grader your submission meets, with two
differences: `reference_match` and the Gaussian checks compare with the reference's stored outputs on
fixed public cases (so `--seed` moves only the property checks), and `student_tests` runs your tests on
your own head and on mutations of it; its points are graded on submission, against a correct head and known
buggy ones, and are shown as pending here. The kit holds no solution.

{ci}
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
    p.add_argument(
        "--url",
        help="where the wheel will be published (its address, or its folder's ending in /): the template's CI "
        "workflow in the kit installs the kit from there",
    )
    args = p.parse_args(argv)
    try:
        wheel = build_kit(args.out, args.rubric, args.url)
    except (RubricError, KitError) as exc:
        print(f"grade student-kit: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {wheel} and {args.out / 'INSTALL.md'}: put both on the course page (students pip install the wheel).")
    if args.url is None:
        print(
            "The template's CI workflow in the kit still installs the kit from a placeholder address (INSTALL.md "
            "says so): pass --url with the wheel's address once you know where it will be published."
        )
    return 0
