"""Where the grader points (issue 28): the share of library heads whose pointed line is a line to edit, and
what tracing costs a cold grade.

    python benchmarks/localisation_bench.py [--runs 3] [--no-timing] [--no-share]

Share, by kind:

- realistic heads (tests/realistic/): the lines a person would edit are the catalog's ``[lines]`` (read off the
  code by hand);
- chaffs (reference/chaffs/, each the reference with one function overridden): the lines of the override of
  ``causal_self_attention`` that differ from the reference's (difflib), or the lines beside a deletion; a chaff
  that overrides another function (the statistics, the kernels, the cache) has no attention line to trace and is
  counted apart;
- variants (reference/variants/, correct heads): no line may be pointed at.

A head "points right" when every line its causes point at is a line to edit and there is at least one. Timing:
cold ``python -m grader HEAD --json`` processes, run in alternation, medians of ``--runs``: a failing head
(gpt_walkthrough_head) and a passing one (the reference), each as it is and with the tracing step switched off
(``grader.diagnosis._rules.point`` replaced by the identity before the grade starts). Goal: at most +10% on the
failing head, nothing on the passing one (it is never traced: no check fails).
"""

from __future__ import annotations

import argparse
import difflib
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.library import known_heads, materialize, reference_path  # noqa: E402
from grader.models import GradeResult  # noqa: E402
from grader.rubric import load_rubric  # noqa: E402
from grader.runner import grade  # noqa: E402
from grader.sandbox import WorkerPool  # noqa: E402

REALISTIC = REPO / "tests" / "realistic"
ATTENTION = "causal_self_attention"


def _function(lines: list[str], name: str) -> tuple[int, int] | None:
    """(first, end) 0-based line span of the top-level ``def name`` in ``lines``."""
    start = next((k for k, ln in enumerate(lines) if ln.startswith(f"def {name}(")), None)
    if start is None:
        return None
    end = next((k for k in range(start + 1, len(lines)) if lines[k] and not lines[k][0].isspace()), len(lines))
    return start, end


def _code(line: str) -> str:
    return line.split("#", 1)[0].strip()


def chaff_lines(override: str) -> set[int] | None:
    """The lines of the materialized chaff (reference, then the override) a person would edit: those of its
    causal_self_attention that differ from the reference's, or beside what it deleted; None when the chaff does
    not override causal_self_attention."""
    ref = reference_path().read_text(encoding="utf-8").splitlines()
    mine = override.splitlines()
    theirs_span, mine_span = _function(ref, ATTENTION), _function(mine, ATTENTION)
    if theirs_span is None or mine_span is None:
        return None
    a = [_code(x) for x in ref[theirs_span[0] : theirs_span[1]]]
    b = [_code(x) for x in mine[mine_span[0] : mine_span[1]]]
    a = [x for x in a if x and not x.startswith(('"""', "Args", "Returns"))]
    keep = [k for k, x in enumerate(b) if x]
    b_kept = [b[k] for k in keep]
    offset = (materialize("").count("\n")) + mine_span[0] + 1  # the override's line n is the module's offset + n
    out: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=a, b=b_kept, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out |= {offset + keep[j] for j in range(j1, j2)}
        elif tag == "delete":
            out |= {offset + keep[j] for j in (j1 - 1, j1) if 0 <= j < len(keep)}
    return out


def pointed(result: GradeResult) -> set[int]:
    return {d.where.line for d in result.diagnosis if d.where is not None}


def share() -> None:
    rubric = load_rubric()
    table = tomllib.loads((REALISTIC / "catalog.toml").read_text(encoding="utf-8"))
    heads: list[tuple[str, str, str, set[int] | None]] = []  # kind, id, source, lines to edit
    for entry in table["head"]:
        source = (REALISTIC / f"{entry['id']}.py").read_text(encoding="utf-8")
        heads.append(("realistic", entry["id"], source, set(table["lines"][entry["id"]])))
    for h in known_heads("chaff"):
        heads.append(("chaff", h.id, h.source(), chaff_lines(h.path.read_text(encoding="utf-8"))))
    for h in known_heads("variant"):
        heads.append(("variant", h.id, h.source(), set()))
    tally: dict[str, list[str]] = {}
    with WorkerPool(2) as pool, tempfile.TemporaryDirectory() as tmp:
        for kind, hid, source, lines in heads:
            folder = Path(tmp) / f"{kind}-{hid}"
            folder.mkdir()
            (folder / "attention_head.py").write_text(source, encoding="utf-8")
            result = grade(folder, rubric, pool=pool, visuals=False)
            at = pointed(result)
            if lines is None:
                verdict = "another function" + (f" (points at {sorted(at)})" if at else "")
                tally.setdefault(f"{kind} (other function)", []).append(hid)
            elif not lines:
                verdict = "right (no line)" if not at else f"WRONG: points at {sorted(at)} in a correct head"
            elif at and at <= lines:
                verdict = "right"
            elif not at:
                unexplained = [
                    c.id for c in result.checks if c.status in ("failed", "error", "timeout") and not c.causes
                ]
                verdict = f"no line (causes {[d.id for d in result.diagnosis]}; unexplained {unexplained})"
            else:
                verdict = f"WRONG: points at {sorted(at)}, to edit {sorted(lines)}"
            if lines is not None:
                tally.setdefault(kind, []).append(verdict)
            print(f"{kind:9} {hid:34} {verdict}", flush=True)
    print()
    for kind, verdicts in tally.items():
        if kind.endswith("(other function)"):
            print(f"{kind}: {len(verdicts)} heads, not traced ({', '.join(verdicts)})")
            continue
        right = sum(v.startswith("right") for v in verdicts)
        print(f"{kind}: {right} / {len(verdicts)} point right ({100 * right / len(verdicts):.0f}%)")


# Both runs import the diagnosis before the grade starts (so that the import order, which decides how much of
# the worker's start overlaps the grader's own torch import, is the same); one then switches tracing off, the
# other times it.
PATCHED = "import grader.diagnosis._rules as d; d.point = lambda head, causes, *a, **k: causes; "
TIMED = (
    "import sys, time, atexit, grader.diagnosis._rules as d; _p = d.point; _t = [0.0]\n"
    "def _timed(*a, **k):\n t0 = time.perf_counter(); r = _p(*a, **k); _t[0] += time.perf_counter() - t0; return r\n"
    "d.point = _timed; atexit.register(lambda: sys.stderr.write(f'TRACE {_t[0]:.3f}\\n'))\n"
)


def timing(runs: int) -> None:
    failing, passing = REALISTIC / "gpt_walkthrough_head.py", reference_path()
    cases = {
        "failing, traced": (TIMED, failing),
        "failing, not traced": (PATCHED, failing),
        "passing, traced": (TIMED, passing),
        "passing, not traced": (PATCHED, passing),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    traced: dict[str, list[float]] = {k: [] for k in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):
            for name, (patch, head) in cases.items():
                argv = [str(head), "--json", f"{tmp}/r.json"]
                call = f"from grader.cli import main; raise SystemExit(main({argv!r}))"
                t0 = time.perf_counter()
                done = subprocess.run([sys.executable, "-c", patch + call], cwd=REPO, capture_output=True, check=False)
                times[name].append(time.perf_counter() - t0)
                said = [ln for ln in done.stderr.decode().splitlines() if ln.startswith("TRACE ")]
                if said:
                    traced[name].append(float(said[-1].split()[1]))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        step = f"; the tracing step itself {statistics.median(traced[k]):.3f} s" if traced[k] else ""
        print(f"{k:22} {v:6.2f} s (median of {runs}){step}")
    for kind in ("failing", "passing"):
        extra = med[f"{kind}, traced"] / med[f"{kind}, not traced"] - 1
        step = statistics.median(traced[f"{kind}, traced"]) if traced[f"{kind}, traced"] else 0.0
        print(
            f"{kind} head: cold grade {100 * extra:+.1f}% with tracing (noise included); the tracing step is "
            f"{100 * step / med[f'{kind}, not traced']:.1f}% of the untraced cold grade"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--no-share", action="store_true")
    args = parser.parse_args()
    if not args.no_share:
        share()
    if not args.no_timing:
        timing(args.runs)


if __name__ == "__main__":
    main()
