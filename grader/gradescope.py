"""Gradescope: the ``results.json`` view of a result, the ``grade gradescope`` run, and the upload bundle.

    /autograder/submission -> locate -> grade (pool of one; every student process dead when it closes)
        -> results.json (atomic), whatever happened

Spec: https://gradescope-autograders.readthedocs.io/en/latest/specs/ . One test per check with the
rubric's visibility (visible | after_due_date | after_published | hidden map 1:1). A hidden check's
output names the property and the outcome only: its message, counterexample and seed would reveal the
hidden inputs. What the student's code printed goes to the run's stdout, which Gradescope shows to
instructors (``stdout_visibility`` hidden by default), never into results a student reads.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import shlex
import signal
import stat
import sys
import time
import traceback
import zipfile
from pathlib import Path
from typing import Any

from grader.models import CheckResult, GradeResult, Heatmap
from grader.packaging import package_files, pyproject
from grader.report import wording

ROOT_VAR = "STEP4_AUTOGRADER_ROOT"  # tests point the default paths at a fake /autograder tree
# Gradescope's default container has 768 MB. The grader and the warm zygote take about 450 MB (PSS,
# measured); a 384 MiB cap on the student's worker keeps a memory bomb at about 580 MB in all, where
# it fails cleanly instead of getting the whole container killed. Every correct head needs far less.
WORKER_MEMORY_MB = 384
_MAX_CELLS = 12  # heatmaps larger than this are left to the HTML report


def autograder_root() -> Path:
    return Path(os.environ.get(ROOT_VAR, "/autograder"))


# -- results.json: a pure function of the result ---------------------------------------------------


def _status(c: CheckResult) -> str:
    """The test's status: "passed" for a check that passed, "failed" for every other, a skipped one included.

    Gradescope's spec (https://gradescope-autograders.readthedocs.io/en/latest/specs/, "Test case status"): a
    test's optional ``status`` is "passed" or "failed" and decides how it is shown (a green or a red test);
    without it, a test counts as passed when its score reaches its max_score. There is no third state, so a
    skipped check that costs points (no test files: 0 of 9) is "failed", its name ends "(skipped)" and its
    output says why. A skipped check that costs nothing (an extension not attempted, a GPU part on a machine
    without one) is no test at all: listed as either colour it would say something untrue, so the overall
    output names it under "Not graded" (:func:`_not_graded`)."""
    return "passed" if c.status == "passed" else "failed"


def _costs_nothing(c: CheckResult) -> bool:
    """A check whose points are not part of the grade (extra credit, or worth 0 here) that came to no verdict:
    skipped, or stopped before it could judge (a submission that timed out or could not be read stops the
    extra-credit and GPU checks too: they were never failed, issue 54)."""
    return c.status in ("skipped", "error", "timeout") and (c.extra_credit or c.max_score == 0)


def _not_graded(result: GradeResult) -> list[str]:
    """The overall output's line for the skipped checks that cost nothing, with each one's reason."""
    skipped = [c for c in result.checks if _costs_nothing(c)]
    if not skipped:
        return []
    lines = ["Not graded here (these cost nothing, so they are not listed as tests):"]
    for c in skipped:
        reason = c.message.splitlines()[0] if c.message and c.visibility != "hidden" else "skipped"
        lines.append(f"    {c.id}: {reason}")
    return lines


def _name(c: CheckResult) -> str:
    """'student_tests: the student's tests catch known bugs (skipped)': what Gradescope lists."""
    marks = [m for m, on in (("extra credit", c.extra_credit), ("skipped", c.status == "skipped")) if on]
    return f"{c.id}: {c.title}" + (f" ({', '.join(marks)})" if marks else "")


def _heatmap_table(hm: Heatmap) -> str:
    """A small heatmap as an HTML table (Gradescope strips style sheets but keeps inline styles)."""
    rows = []
    for i, row in enumerate(hm.data):
        cells = []
        for j, v in enumerate(row):
            masked = hm.causal and j > i
            if v is None:
                cells.append('<td style="background:#eee">–</td>')
                continue
            shade = min(abs(v), 1.0)
            red = hm.kind == "difference" or (masked and v != 0)  # a weight the mask forbids
            colour = f"rgba({'180,35,24' if red else '31,100,168'},{0.15 + 0.7 * shade:.2f})"
            cells.append(f'<td style="background:{colour};padding:2px 5px;text-align:right">{v:.3g}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<p><strong>{html.escape(hm.title)}</strong></p><table>{''.join(rows)}</table>"


def _test(number: int, c: CheckResult) -> dict[str, Any]:
    label = wording.STATUS_LABEL[c.status]
    test: dict[str, Any] = {
        "name": _name(c),
        "number": str(number),
        "score": c.score,
        "max_score": c.max_score,
        "status": _status(c),
        "visibility": c.visibility,
        "tags": [c.status] + (["extra_credit"] if c.extra_credit else []),
    }
    if c.visibility == "hidden":
        # Only the property and the outcome: the message, counterexample and seed describe hidden inputs.
        test["output"] = f"{label}. {c.title} ({c.cites}). Details of hidden checks are not shown."
        test["output_format"] = "text"
        return test
    text = f"{label}: {wording.text(c)}" if c.message else label
    maps = [hm for hm in c.heatmaps if len(hm.data) <= _MAX_CELLS]
    if maps and wording.is_problem(c):
        test["output"] = f"<pre>{html.escape(text)}</pre>" + "".join(_heatmap_table(hm) for hm in maps)
        test["output_format"] = "html"
    else:
        test["output"] = text
        test["output_format"] = "text"
    return test


def results_json(
    result: GradeResult, *, execution_time: float | None = None, stdout_visibility: str = "hidden"
) -> dict[str, Any]:
    """Gradescope's results.json for ``result`` (a dict; ``json.dumps`` it)."""
    lines = [wording.score_line(result)]
    failed = wording.diagnosis_error_line(result)
    if failed:  # the grader's own error is never silent (issue 35)
        lines.append(failed)
    counted = wording.scoring_line(result)
    if counted:
        lines.append(counted)
    lines += _causes(result)
    proven = wording.diagnosis_complete_line(result) if result.diagnosis else None
    lines += [proven] if proven else []  # the diagnosis's proof that it is complete (issue 35)
    lines += _not_graded(result)
    lines += result.notes
    withheld = sum(c.visibility == "hidden" for c in result.checks)
    if withheld:
        lines.append(f"{withheld} hidden check(s) show only their outcome.")
    if result.output.text:
        lines.append("What your code printed while being graded is shown to instructors only.")
    if any(wording.is_problem(c) for c in result.checks if c.visibility != "hidden"):
        lines.append("Each failure ends with a command that reproduces it on your machine.")
    data: dict[str, Any] = {
        "score": result.score,
        "execution_time": round(result.duration_s if execution_time is None else execution_time, 2),
        "output": "\n".join(lines),
        "output_format": "text",
        "stdout_visibility": stdout_visibility,
        # numbered as listed: 1, 2, 3, ... with no gap where a check that costs nothing is left out
        "tests": [_test(k, c) for k, c in enumerate((c for c in result.checks if not _costs_nothing(c)), start=1)],
        "extra_data": {"rubric": result.rubric, "seed": result.seed, "max_score": result.max_score},
    }
    return data


def _causes(result: GradeResult) -> list[str]:
    """Every root cause with its price, where it shows and its full text (a crash's error: a SyntaxError
    with its file and line), as the terminal lists them. A cause that explains hidden checks only keeps
    its heading: its text could describe their inputs."""
    lines = []
    hidden = {c.id for c in result.checks if c.visibility == "hidden"}
    for d in result.diagnosis:
        lines.append(wording.cause_heading(result, d.id))
        if not set(d.explains) <= hidden or not d.explains:
            where = wording.where_line(d)
            lines += [f"    {ln}" for ln in ([where] if where else []) + (d.detail or "").splitlines() if ln.strip()]
    return lines


def error_results(summary: str, detail: str, *, execution_time: float) -> dict[str, Any]:
    """results.json when the grader itself failed: zero points, a clear note, details for instructors."""
    return {
        "score": 0.0,
        "execution_time": round(execution_time, 2),
        "output": "The autograder failed while grading this submission; this is not a problem with your "
        "code. Your instructor can see the details and will rerun it.\n" + summary,
        "output_format": "text",
        "stdout_visibility": "hidden",
        "tests": [
            {
                "name": "Autograder error (visible to instructors only)",
                "number": "0",
                "score": 0.0,
                "max_score": 0.0,
                "status": "failed",
                "visibility": "hidden",
                "output": detail,
                "output_format": "text",
            }
        ],
    }


# -- the run ---------------------------------------------------------------------------------------


class _Terminated(BaseException):
    """SIGTERM (the platform's timeout): stop grading, still write results."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated(f"received signal {signum}")


def _metadata_line(path: Path | None) -> str:
    if path is None or not path.is_file():
        return f"no submission metadata at {path}"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        users = ", ".join(u.get("name") or u.get("email") or str(u.get("id")) for u in meta.get("users", []))
        title = (meta.get("assignment") or {}).get("title", "?")
        when = meta.get("created_at", "?")
        return f"submission {meta.get('id', '?')} by {users or '?'} for {title!r} at {when}"
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        return f"unreadable submission metadata {path}: {exc}"


def run_gradescope(
    submission: Path,
    results: Path,
    *,
    rubric_path: Path | None = None,
    metadata: Path | None = None,
    stdout_visibility: str = "hidden",
    memory_mb: int | None = WORKER_MEMORY_MB,
    out: Any = sys.stdout,
) -> dict[str, Any]:
    """Grade the submission and write ``results``; never raises for anything short of a dead process.

    ``memory_mb`` caps the rubric's worker memory limit (None: the rubric's own).
    """
    from grader.exports import write_atomic

    started = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if _main_thread() else None
    interrupted = False
    print(f"step4-grader: {_metadata_line(metadata)}", file=out)
    try:
        data = _grade(submission, rubric_path, memory_mb, out)
        data["stdout_visibility"] = stdout_visibility
        data["execution_time"] = round(time.monotonic() - started, 2)
    except BaseException as exc:  # the grader's failure (or SIGTERM): zero points, stated plainly
        detail = "".join(traceback.format_exception(exc)).rstrip()
        print(f"step4-grader: INTERNAL ERROR\n{detail}", file=out)
        data = error_results(f"{type(exc).__name__}: {exc}", detail, execution_time=time.monotonic() - started)
        interrupted = isinstance(exc, KeyboardInterrupt)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    # Every student process is gone here: the pool closed before _grade returned or raised.
    write_atomic(results, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(f"step4-grader: wrote {results} (score {data['score']:g})", file=out)
    if interrupted:
        raise KeyboardInterrupt
    return data


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _grade(submission: Path, rubric_path: Path | None, memory_mb: int | None, out: Any) -> dict[str, Any]:
    from grader.batch import locate, unreadable_result
    from grader.runner import checked_rubric, grade
    from grader.sandbox import WorkerPool
    from grader.submission import SubmissionError

    rubric = checked_rubric(rubric_path)
    if memory_mb is not None and memory_mb < rubric.limits.memory_mb:
        limits = rubric.limits.model_copy(update={"memory_mb": memory_mb})
        rubric = rubric.model_copy(update={"limits": limits})
    target = locate(submission, rubric.entry_points.module)
    label = target.name if target.is_file() else f"{rubric.entry_points.module}.py"
    try:
        # One slot for the head, a lazily started one for the student's own tests (as the CLI does).
        # Workers may read nothing of /autograder but the grader's virtual environment: not the source
        # (reference, rubric), the original submission or the results.
        root = autograder_root()
        secrets = [root / "source", root / "results", submission]
        with WorkerPool(
            2, uid_base=rubric.limits.sandbox_uid_base, lazy=True, secret_paths=secrets, guarded_paths=[root]
        ) as pool:
            pool.prestart(1, tests=False)  # the head holds this slot throughout
            result = grade(target, rubric, pool=pool, tests_pool=pool, label=label)
        # the pool is closed: its zygote swept every process the submission started
    except SubmissionError as exc:
        result = unreadable_result(label, rubric, f"Your submission could not be read: {exc}")
    _log(result, out)
    return results_json(result)


def _log(result: GradeResult, out: Any) -> None:
    """The instructors' view on stdout: every message in full, and what the student's code printed."""
    print(wording.score_line(result), file=out)
    for c in result.checks:
        print(f"  [{c.visibility}] {wording.status_line(c)}", file=out)
    print(f"protections: {'; '.join(result.protections) or 'none'}", file=out)
    if result.output.text:
        more = f" (+{result.output.bytes_dropped} bytes dropped)" if result.output.truncated else ""
        print(f"---- submission output{more} ----\n{result.output.text.rstrip()}\n---- end ----", file=out)


def _parse_with_memory_option(p: argparse.ArgumentParser, argv: list[str], what: str) -> argparse.Namespace:
    """Both Gradescope commands take --memory-mb, with the same default and floor."""
    p.add_argument(
        "--memory-mb",
        type=int,
        default=WORKER_MEMORY_MB,
        metavar="MIB",
        help=f"{what} (default %(default)s: fits Gradescope's default 768 MB container; raise it together "
        "with the container's memory)",
    )
    args = p.parse_args(argv)
    if args.memory_mb < 256:
        p.error(f"--memory-mb must be at least 256, got {args.memory_mb}")
    return args


def gradescope_main(argv: list[str]) -> int:
    """``grade gradescope``: always writes results.json; exit 0 unless writing it failed."""
    root = autograder_root()
    p = argparse.ArgumentParser(
        prog="grade gradescope",
        description="Grade a Gradescope submission and write results.json (what run_autograder calls).",
    )
    p.add_argument("--submission", type=Path, default=root / "submission", help="default: %(default)s")
    p.add_argument("--results", type=Path, default=root / "results" / "results.json", help="default: %(default)s")
    p.add_argument("--metadata", type=Path, default=root / "submission_metadata.json", help="default: %(default)s")
    p.add_argument("--rubric", type=Path, help="rubric TOML (default: the bundled rubrics/step4.toml)")
    p.add_argument(
        "--stdout-visibility",
        choices=["hidden", "visible", "after_due_date", "after_published"],
        default="hidden",
        help="who sees this run's log, which includes what the student's code printed (default hidden)",
    )
    args = _parse_with_memory_option(p, argv, "cap on the student's worker memory, below the rubric's if lower")
    run_gradescope(
        args.submission,
        args.results,
        rubric_path=args.rubric,
        metadata=args.metadata,
        stdout_visibility=args.stdout_visibility,
        memory_mb=args.memory_mb,
    )
    return 0


# -- the upload bundle -------------------------------------------------------------------------------

_EPOCH = (1980, 1, 1, 0, 0, 0)

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, while building the autograder image (network available).
# Generated by `grade gradescope-bundle`: rebuild the bundle instead of editing this file.
set -euo pipefail
# STEP4_AUTOGRADER_ROOT exists only to try this script outside Gradescope (as run_autograder's does).
ROOT="${STEP4_AUTOGRADER_ROOT:-/autograder}"
SRC="$ROOT/source"
VENV="$ROOT/venv"

# 1. A Python >= 3.11 (Ubuntu 22.04 images ship 3.10, 24.04 ships 3.12).
PY=""
for c in python3.13 python3.12 python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        PY="$(command -v "$c")"; break
    fi
done
if [ -z "$PY" ]; then
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
    PY="$(command -v python3.11)"
fi
"$PY" -m venv "$VENV" || {
    apt-get install -y --no-install-recommends "python3-venv" "$(basename "$PY")-venv" || true
    "$PY" -m venv "$VENV"
}
"$VENV/bin/python" -m pip install --quiet --upgrade pip

# 2. The CPU build of torch first: the default wheel pulls gigabytes of CUDA libraries.
"$VENV/bin/python" -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu "torch=={torch}"

# 3. The grader itself (non-editable) and its other dependencies, then the course packages the rubric
#    allows (its `packages` list), so notebooks that import them are graded in full.
"$VENV/bin/python" -m pip install --quiet "$SRC/step4-grader"
{course_packages}

# 4. The unprivileged side. Student code runs as numeric sandbox uids ({uid_base} and up, one per
#    worker) that deliberately have no account: the grader leases a uid only if no passwd entry uses
#    it, so no login, home or file can belong to it. Make sure none of those uids has an account, and
#    that the reference solution, the rubric and this source are readable by root only.
if getent passwd {uid_base} >/dev/null; then
    echo "setup.sh: uid {uid_base} has an account; the sandbox will skip it and lease the next free uid" >&2
fi
chmod 700 "$SRC"
"$VENV/bin/python" - <<'EOF'
import os
from grader._paths import bundled
for name in ("reference", "rubrics"):
    for top, dirs, files in os.walk(bundled(name)):
        for entry in dirs + files:
            os.chmod(os.path.join(top, entry), 0o700 if entry in dirs else 0o600)
    os.chmod(bundled(name), 0o700)
EOF

# 5. Smoke test: the command run_autograder uses.
"$VENV/bin/python" -P -m grader gradescope --help >/dev/null
echo "setup.sh: step4-grader ready in $VENV"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this as root for every submission, in /autograder. Generated by `grade gradescope-bundle`.
# STEP4_AUTOGRADER_ROOT and STEP4_PYTHON exist only to test the bundle outside Gradescope.
set -u
ROOT="${STEP4_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${STEP4_PYTHON:-$ROOT/venv/bin/python}"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
chmod 755 "$ROOT/results" 2>/dev/null || true   # writable by root only: not by the sandbox uids
rm -f "$RESULTS"

# -P: never import from the working directory. The grader writes results.json itself, only after
# every student process is dead.
"$PYTHON" -P -m grader gradescope \\
    --submission "$ROOT/submission" \\
    --results "$RESULTS" \\
    --metadata "$ROOT/submission_metadata.json" \\
    --rubric "$ROOT/source/rubric.toml" \\
    --memory-mb {memory_mb}
status=$?

# If the grader could not even start, Gradescope still gets a results.json that says so.
if [ ! -s "$RESULTS" ]; then
    cat > "$RESULTS" <<EOF
{"score": 0.0, "stdout_visibility": "hidden", "tests": [],
 "output": "The autograder failed to start (exit status $status); this is not a problem with your code. \\
Your instructor can see the details."}
EOF
fi
exit 0
"""


def _add(zf: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def _course_packages_line(packages: list[str]) -> str:
    """setup.sh's install line for the rubric's course packages (validated requirements, quoted anyway)."""
    if not packages:
        return "# (the rubric lists no course packages)"
    return '"$VENV/bin/python" -m pip install --quiet ' + " ".join(shlex.quote(p) for p in packages)


def build_bundle(out: Path, rubric_path: Path | None = None, *, memory_mb: int = WORKER_MEMORY_MB) -> list[str]:
    """Write the Gradescope upload zip (same inputs, same bytes); returns the names it holds."""
    from importlib import metadata

    from grader._paths import bundled
    from grader.runner import checked_rubric

    rubric_file = rubric_path or bundled("rubrics") / "step4.toml"
    rubric = checked_rubric(rubric_file)  # refuse to bundle a rubric that would fail on every submission
    torch_version = metadata.version("torch").split("+", 1)[0]
    setup = SETUP_SH.replace("{torch}", torch_version).replace("{uid_base}", str(rubric.limits.sandbox_uid_base))
    setup = setup.replace("{course_packages}", _course_packages_line(rubric.packages))
    files = package_files()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _add(zf, "setup.sh", setup.encode(), 0o755)
        run = RUN_AUTOGRADER.replace("{memory_mb}", str(memory_mb))
        _add(zf, "run_autograder", run.encode(), 0o755)
        _add(zf, "rubric.toml", Path(rubric_file).read_bytes())
        _add(zf, "step4-grader/pyproject.toml", pyproject(files).encode())
        for name, path in files:
            _add(zf, f"step4-grader/{name}", path.read_bytes())
        names = zf.namelist()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, out)
    return names


def bundle_main(argv: list[str]) -> int:
    """``grade gradescope-bundle``: 0 on success, 2 on a bad rubric."""
    from grader.rubric import RubricError

    p = argparse.ArgumentParser(
        prog="grade gradescope-bundle",
        description="Build autograder.zip for Gradescope: setup.sh and run_autograder at the root, "
        "the rubric, and the grader's source (installed by setup.sh after the CPU build of torch).",
    )
    p.add_argument("--out", type=Path, default=Path("autograder.zip"), help="default: %(default)s")
    p.add_argument("--rubric", type=Path, help="rubric TOML (default: the bundled rubrics/step4.toml)")
    args = _parse_with_memory_option(p, argv, "student worker memory cap passed to `grade gradescope`")
    try:
        names = build_bundle(args.out, args.rubric, memory_mb=args.memory_mb)
    except RubricError as exc:
        print(f"grade gradescope-bundle: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(names)} files). Upload it under Configure Autograder -> Zip file upload.")
    return 0
