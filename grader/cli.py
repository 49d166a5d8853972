"""The ``grade`` command: argument parsing and exit codes; all work happens in the runner.

    grade SUBMISSION [--rubric F] [--json F] [--html F] [--only ID ...] [--seed N] [--fail-under X]
    grade SUBMISSION --watch [...]    grade again on every save (grader/watch.py); Ctrl-C ends it with 0
    grade schema                      print the JSON Schema of --json output
    grade init [FOLDER]               write the student template there (attention_head.py, its starter tests, ...)
    grade --version                   the version, and which edition is installed
    grade student-kit --out DIR       the wheel students install: no reference, no chaffs (grader/kit.py)
    grade similarity OUT              instructor only: pairs of a graded class that share code (grader/similarity.py)
    grade gradebook OUT               instructor only: a graded class's grades in Canvas's or Moodle's columns

The instructor's commands (batch, gradebook, gradescope, gradescope-bundle, student-kit, similarity) are the
instructor's grader's: the student kit neither lists them in ``grade --help`` nor runs them (each says where it
lives and exits 2, having done nothing).

Exit status: 0 after grading, 1 when the score is under --fail-under, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import threading
import tomllib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from grader.models import GradeResult
    from grader.rubric import Rubric
    from grader.sandbox._pool import WorkerPool

USAGE_ERROR = 2
# What the instructor runs, and only the instructor's grader holds what they need (the reference, the hidden
# checks, the known heads); the student kit offers the others (README, "Two kits").
INSTRUCTOR_COMMANDS = ("batch", "gradebook", "gradescope", "gradescope-bundle", "student-kit", "similarity")


def _instructors() -> bool:
    """Whether this is the instructor's grader (the kit holds no reference); a file's presence, nothing imported."""
    from grader.library import reference_available

    return reference_available()


def _grade_parser() -> argparse.ArgumentParser:
    others = [c for c in SUBCOMMANDS if _instructors() or c not in INSTRUCTOR_COMMANDS]
    p = argparse.ArgumentParser(
        prog="grade",
        description="Grade a Project Step 4 attention head against the lecture's theorems.",
        epilog=f"Other commands: {' | '.join(f'grade {c}' for c in others)} (each with --help).",
    )
    p.add_argument("submission", type=Path, help="attention_head.py, a folder holding it, a .zip or a .ipynb")
    p.add_argument("--version", action="version", version=_version(), help="print the version and edition, then exit")
    p.add_argument("--rubric", type=Path, help="rubric TOML (default: the bundled rubrics/step4.toml)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write results as JSON (and the HTML report beside it)")
    p.add_argument("--html", type=Path, metavar="FILE", help="write the HTML feedback report")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML: one testcase per check (CI)")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these checks")
    p.add_argument("--seed", type=int, help="base seed (default: the rubric's); failures print the one to reuse")
    p.add_argument("--fail-under", type=float, metavar="PERCENT", help="exit 1 when the score is under this percentage")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to run the head (default cpu)")
    p.add_argument("--quiet", action="store_true", help="print only the score line")
    p.add_argument(
        "--watch",
        action="store_true",
        help="grade now and again on every save of the module, notebook or tests (Ctrl-C to stop)",
    )
    p.add_argument(
        "--definitions-only",
        action="store_true",
        help="grade a .py on its definitions only, as notebooks are: top-level demo code is not run",
    )
    return p


def _version() -> str:
    """'grade 0.1.0 (step4-grader-student, the student kit)': the version and the edition installed."""
    import grader
    from grader.packaging import STUDENT_KIT

    edition = "step4-grader, the instructor's grader" if _instructors() else f"{STUDENT_KIT}, the student kit"
    return f"grade {grader.__version__} ({edition})"


def _fail(message: str) -> int:
    from rich.console import Console

    # never reflowed: a pipe or a log keeps the message whole (a terminal wraps it itself)
    err = Console(stderr=True, highlight=False)
    err.print(f"[bold red]grade: error:[/] {message}", highlight=False, soft_wrap=True)
    return USAGE_ERROR


def unknown_check(typed: str, known: list[str]) -> str:
    """'unknown check 'causal-mask'; did you mean causal_mask? known checks: ...' (a hyphen, a capital or a
    typo: the closest id, as difflib finds it)."""
    import difflib

    spelled = typed.strip().lower().replace("-", "_").replace(" ", "_")
    close = [spelled] if spelled in known else difflib.get_close_matches(spelled, known, n=1, cutoff=0.6)
    meant = f" did you mean {close[0]}?" if close else ""
    return f"unknown check {typed!r};{meant} known checks: {', '.join(known)}"


def _uid_base(rubric_path: Path | None) -> int:
    """The rubric's limits.sandbox_uid_base, read without pydantic so that the sandbox starts first; the
    full validation follows (a bad value there is reported, and this pool is not used)."""
    from grader.sandbox._uids import DEFAULT_UID_BASE

    if rubric_path is None:
        return DEFAULT_UID_BASE
    try:
        value = tomllib.loads(rubric_path.read_text(encoding="utf-8")).get("limits", {}).get("sandbox_uid_base")
    except (OSError, tomllib.TOMLDecodeError, AttributeError):
        return DEFAULT_UID_BASE
    return value if isinstance(value, int) and not isinstance(value, bool) else DEFAULT_UID_BASE


def grade_main(argv: list[str]) -> int:
    args = _grade_parser().parse_args(argv)
    problem = _usage_problem(args)  # before the sandbox and torch start: a typo is refused at once
    if problem is not None:
        return _fail(problem)
    if not args.watch:
        return _grade(args)
    try:
        return _grade(args)
    except KeyboardInterrupt:  # Ctrl-C before the watch began (importing torch): the same clean end
        return 0


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments that needs no import to see (paths that are not there), or None."""
    if args.watch and args.fail_under is not None:
        return "--fail-under sets the exit status of one grade; --watch exits 0 on Ctrl-C"
    if not args.submission.exists():
        return f"{args.submission} does not exist"
    if args.rubric is not None and not args.rubric.is_file():
        return f"{args.rubric}: no such file (--rubric)"
    return None


def _grade(args: argparse.Namespace) -> int:
    from grader._timeline import mark
    from grader.sandbox._early import start_early

    # Two slots: the head's, and one for the student's own tests. The head's zygote starts first of all,
    # before the pool's own imports, so its torch import overlaps everything this process imports (the pool,
    # pydantic, rich, the checks, torch). A watch's grades take the two slots in turn.
    started = start_early(tests=args.watch)
    mark("arguments read")
    try:
        from grader.sandbox._pool import WorkerPool

        uid_base = _uid_base(args.rubric)
        # One grade keeps no standby behind its worker (Windows: grader/sandbox/_winslot.py); a watch grades again.
        pool = WorkerPool(2, uid_base=uid_base, lazy=True, spares=args.watch)
    except BaseException:
        if started is not None:
            started.discard()
        raise
    with pool:
        pool.prestart(1, tests=args.watch, started=started)
        mark("worker started")
        from grader.rubric import RubricError, load_rubric
        from grader.submission import SubmissionError

        try:
            rubric = load_rubric(args.rubric)  # pydantic only: the ids are matched once the checks are loaded
        except RubricError as exc:
            return _fail(str(exc))
        if rubric.limits.sandbox_uid_base != uid_base:  # the light read disagrees: never guess
            return _fail(f"{args.rubric}: limits.sandbox_uid_base could not be read")
        unknown = [c for c in args.only or [] if c not in rubric.checks]
        if unknown:
            return _fail(unknown_check(unknown[0], list(rubric.checks)))
        # the submission prepared and its worker launched before torch, closed on every way out: the grade
        # closes the sandbox, the prepared copy goes after it
        with contextlib.ExitStack() as early:
            if not args.watch and not args.only:  # every check runs: the head's worker is certainly needed
                try:
                    early_start = _launch_early(args, rubric, pool, early)
                except SubmissionError as exc:
                    return _fail(str(exc))
            else:
                early_start = {}
            from grader.runner import validate_ids

            try:
                validate_ids(rubric, args.rubric)
            except RubricError as exc:
                return _fail(str(exc))
            import torch

            mark("torch imported")
            if args.device == "cuda" and not torch.cuda.is_available():
                return _fail("--device cuda was given but torch sees no CUDA GPU on this machine")
            # The grader's own tensors are small: one thread leaves the other cores to the worker (on two
            # cores, a second intra-op thread here only contends with it).
            torch.set_num_threads(1)
            from grader.runner import grade

            report = args.html is not None or args.json is not None  # the visualisations are for the report
            threading.Thread(target=_prepare_output, args=(report,), name="output-warmup", daemon=True).start()
            grade_once = partial(
                grade,
                args.submission,
                rubric,
                seed=args.seed,
                only=args.only,
                device=args.device,
                pool=pool,
                tests_pool=pool,
                visuals=report,
                definitions_only=args.definitions_only,
            )
            if args.watch:
                return _watch(args, grade_once, pool)
            try:
                result = grade_once(**early_start)
            except SubmissionError as exc:
                return _fail(str(exc))
        # Every process the submission started is gone (the sandbox swept them); the zygote's own exit
        # now overlaps writing the files.
        pool.begin_close()
        mark("graded")
        _write_outputs(result, args.json, args.html, args.junit)
        mark("files written")
        _print(result, quiet=args.quiet, report=_report_path(args))
        mark("printed")
    mark("worker pool closed")
    if args.fail_under is not None and result.percent < args.fail_under:
        return 1
    return 0


def _watch(args: argparse.Namespace, grade_once: Callable[[], GradeResult], pool: WorkerPool) -> int:
    """``--watch``: grade now and on every save (grader/watch.py); each grade writes and prints what a
    cold grade does, then one line on what changed. Ends with 0 on Ctrl-C, every worker gone."""
    from rich.console import Console
    from rich.text import Text

    from grader.watch import Session, change_line, warm_up, watch

    def show(before: GradeResult | None, result: GradeResult) -> None:
        _write_outputs(result, args.json, args.html, args.junit)
        _print(result, quiet=args.quiet, report=_report_path(args))
        Console(stderr=False, highlight=False).print(Text(change_line(before, result), "dim"), soft_wrap=True)

    err = Console(stderr=True, highlight=False)
    err.print(Text(f"Watching {args.submission}: graded now and on every save (Ctrl-C to stop).", "dim"))
    outputs = tuple(p for p in (args.json, args.html, args.junit) if p is not None)
    return watch(args.submission, Session(grade_once, show, pool, warm_up=warm_up(pool)), ignore=outputs)


def _launch_early(
    args: argparse.Namespace, rubric: Rubric, pool: WorkerPool, stack: contextlib.ExitStack
) -> dict[str, Any]:
    """Prepare the submission and launch the head's worker before this process imports torch: the zygote
    forks it once its own import is done, and the worker imports the submission while this process still
    imports torch and the checks (issue 37). ``grade``'s ``prepared`` and ``sandbox``; the stack removes
    them on every way out (an error before the grade included)."""
    from grader.sandbox import Sandbox
    from grader.submission import contract_names, prepare

    sub = stack.enter_context(
        prepare(
            args.submission,
            rubric.entry_points.module,
            contract=contract_names(rubric.entry_points),
            packages=rubric.packages,
            definitions_only=args.definitions_only,
        )
    )
    sandbox = stack.enter_context(Sandbox(sub.dir, rubric.limits, pool=pool))
    sandbox.launch(background=True)
    return {"prepared": sub, "sandbox": sandbox}


def _prepare_output(report: bool) -> None:
    """Import the terminal view (rich) and, for a report, the report's modules and templates while the
    checks run (this process mostly waits for the workers then): about 0.1 s less after grading. The
    imported and included templates too: jinja compiles those at their first render otherwise."""
    import grader.report.terminal  # noqa: F401

    if not report:
        return
    from grader.report.html import jinja_environment

    env = jinja_environment()
    for name in ("_macros.j2", "_style.css.j2", "report.html.j2"):
        env.get_template(name)


def _write_outputs(
    result: GradeResult, json_path: Path | None, html_path: Path | None, junit_path: Path | None = None
) -> None:
    from grader.exports import result_json, write_atomic

    if junit_path is not None:
        from grader.report.junit import render_junit

        write_atomic(junit_path, render_junit(result))
    if json_path is not None:
        write_atomic(json_path, result_json(result))
        if html_path is None:
            html_path = json_path.with_suffix(".html")
    if html_path is not None:
        from grader.report.html import render_html

        write_atomic(html_path, render_html(result))


def _print(result: GradeResult, *, quiet: bool, report: Path | None = None) -> None:
    from grader.report.terminal import render_terminal, summary_console

    console = summary_console()

    if quiet:
        console.print(f"{result.score:g} / {result.max_score:g}")
    else:
        render_terminal(result, console, report=None if report is None else str(report))


def _report_path(args: argparse.Namespace) -> Path | None:
    """The HTML report a run writes (--html, or beside --json), or None."""
    return args.html if args.html is not None else args.json.with_suffix(".html") if args.json is not None else None


TEMPLATE_FILES = ("attention_head.py", "test_attention_head.py", "README.md", ".github/workflows/grade.yml")


def init_main(argv: list[str]) -> int:
    """``grade init [FOLDER]``: the student template the grader bundles, written into FOLDER (default: here). A
    file already there is kept (never overwritten) and named."""
    from grader._paths import bundled

    p = argparse.ArgumentParser(
        prog="grade init",
        description="Write the Project Step 4 template into a folder: attention_head.py (the functions to "
        "implement), test_attention_head.py (starter tests), README.md and the CI workflow. Files already there "
        "are kept.",
    )
    p.add_argument("folder", type=Path, nargs="?", default=Path("."), help="where to write (default: here)")
    args = p.parse_args(argv)
    if args.folder.exists() and not args.folder.is_dir():
        return _fail(f"{args.folder} is a file, not a folder")
    template = bundled("student_template")
    wrote, kept = [], []
    for name in TEMPLATE_FILES:
        target = args.folder / name
        if target.exists():
            kept.append(name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((template / name).read_bytes())
        wrote.append(name)
    where = "this folder" if args.folder == Path(".") else str(args.folder)
    if wrote:
        print(f"In {where}, wrote {', '.join(wrote)}.")
    if kept:
        print(f"Already there, kept {', '.join(kept)} (nothing overwritten).")
    go = "" if args.folder == Path(".") else f"cd {shlex.quote(str(args.folder))}, then "
    print(
        f"Next: {go}replace each raise NotImplementedError(...) in attention_head.py (README.md says what each "
        "function returns) and run `grade attention_head.py` after every change (or `grade attention_head.py "
        "--watch`, which grades on every save)."
    )
    return 0


def schema_main(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="grade schema", description="Print the JSON Schema of grade --json.").parse_args(argv)
    from grader.exports import result_schema

    sys.stdout.write(result_schema())
    return 0


def _batch_main(argv: list[str]) -> int:
    from grader.batch import batch_main
    from grader.similarity import BatchStage

    return batch_main(argv, BatchStage())


def _gradebook_main(argv: list[str]) -> int:
    from grader.batch import gradebook_main

    return gradebook_main(argv)


def _gradescope_main(argv: list[str]) -> int:
    from grader.gradescope import gradescope_main

    return gradescope_main(argv)


def _bundle_main(argv: list[str]) -> int:
    from grader.gradescope import bundle_main

    return bundle_main(argv)


def _similarity_main(argv: list[str]) -> int:
    from grader.similarity import similarity_main

    return similarity_main(argv)


def _kit_main(argv: list[str]) -> int:
    from grader.kit import kit_main

    return kit_main(argv)


SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "init": init_main,
    "schema": schema_main,
    "batch": _batch_main,
    "gradebook": _gradebook_main,
    "gradescope": _gradescope_main,
    "gradescope-bundle": _bundle_main,
    "student-kit": _kit_main,
    "similarity": _similarity_main,
}


def run() -> NoReturn:
    """The ``grade`` command: :func:`main`, then an immediate exit. Everything is written and every
    process the sandbox started is gone by then; skipping the interpreter's teardown (about 0.4 s with
    torch loaded) is pure waiting saved on every run."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    from grader._console import printable_streams

    printable_streams()  # a Windows pipe's code page: ✓ and a student's print never raise (grader/_console.py)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        if argv[0] in INSTRUCTOR_COMMANDS and not _instructors():
            return _fail(kit_refusal(argv[0]))
        return SUBCOMMANDS[argv[0]](argv[1:])
    return grade_main(argv)


def kit_refusal(command: str) -> str:
    """What the student kit says of an instructor's command, which it does not run."""
    from grader.packaging import STUDENT_KIT

    return (
        f"`grade {command}` is the instructor's: it lives in the instructor's grader (step4-grader, which holds "
        f"the reference), not in this student kit ({STUDENT_KIT}); nothing was done. To grade your head: "
        "`grade attention_head.py` (`grade --help` lists what the kit offers)."
    )


if __name__ == "__main__":
    run()
