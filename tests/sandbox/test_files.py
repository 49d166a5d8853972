"""File-system isolation: a worker reads Python, its packages and its own copy, and nothing else.

Secrets are laid out as a careless machine would leave them (world-readable), so that what stops the
worker is the file-system layer under test, not file permissions: Landlock where the kernel has it, a
mount namespace as root (forced with STEP4_FS_ISOLATION=mount), and, with neither, private copies that
only their owner (the slot's uid, as root) can read.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import HOSTILE, IS_ROOT, OpenSandbox, call, head_inputs, needs_root
from secret_markers import SNOOPED, leaked

import grader
from grader import _paths
from grader.exports import result_json
from grader.library import known_heads, reference_path
from grader.report.html import render_html
from grader.rubric import Rubric
from grader.runner import grade
from grader.sandbox import Sandbox, WorkerPool
from grader.sandbox._filesystem import NONE_AVAILABLE, READ, cut_out, landlock_abi, new_ruleset
from grader.sandbox._private import PrivateDir, private_root, sweep_stale
from grader.submission import prepare

LANDLOCK = landlock_abi() > 0
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="the kernel has no Landlock (Linux >= 5.13, enabled)")
SANDBOX_CODE = Path(grader.__file__).parent / "sandbox"


@pytest.fixture(scope="module")
def own_uid_pool() -> Iterator[WorkerPool]:
    """Workers on the grader's own uid even as root: what a laptop (no root) gets."""
    with WorkerPool(1, sandbox_uids=False) as p:
        yield p


@pytest.fixture
def secrets() -> Iterator[dict[str, Path]]:
    """What no worker may read, world-readable where the test can make it so."""
    loose = Path(tempfile.mkdtemp(prefix="step4-loose-"))  # a careless instructor's folders in /tmp
    loose.chmod(0o755)
    classmate = loose / "submissions" / "classmate"
    classmate.mkdir(parents=True)
    (classmate / "attention_head.py").write_text("CLASSMATE = 1\n")
    old_copy = loose / "step4-sub-old" / "submission"  # a copy as the grader used to leave them
    old_copy.mkdir(parents=True)
    (old_copy / "attention_head.py").write_text("CLASSMATE_COPY = 1\n")
    (loose / "graded" / "classmate").mkdir(parents=True)
    (loose / "graded" / "classmate" / "result.json").write_text('{"score": 100}')
    (loose / "graded" / "grades.csv").write_text("id,score\n")
    for p in [loose, *loose.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    private = PrivateDir("sub")  # another grading's private copy
    (private.path / "attention_head.py").write_text("PRIVATE_COPY = 1\n")
    chaff = known_heads("chaff")[0]
    found = {
        "reference": reference_path(),
        "chaff": chaff.path,
        "catalog": chaff.path.with_name("catalog.toml"),
        "rubric": _paths.bundled("rubrics") / "step4.toml",
        "grader code": Path(grader.__file__).with_name("runner.py"),
        "sandbox code": SANDBOX_CODE / "_ops.py",  # no secret, but loaded before the layer: not needed after
        "checkout": Path(_paths._PACKAGE.parent) / "pyproject.toml",
        "classmate": classmate / "attention_head.py",
        "classmate folder": classmate,
        "old copy": old_copy / "attention_head.py",
        "private copy": private.path / "attention_head.py",
        "private root": private_root(),
        "batch output": loose / "graded" / "classmate" / "result.json",
        "grades": loose / "graded" / "grades.csv",
        "grader cmdline": Path(f"/proc/{os.getpid()}/cmdline"),
        "grader environ": Path(f"/proc/{os.getpid()}/environ"),
        "init cmdline": Path("/proc/1/cmdline"),
    }
    yield {k: v for k, v in found.items() if v.exists()}
    private.remove()
    shutil.rmtree(loose)


def needed(sb: Sandbox) -> dict[str, str]:
    """What a head (and pytest in the worker) must still read: modules by the paths the worker loaded
    them from (as root, a Python in a root-only folder is reached through pinned fds), its own copy."""
    reply = call(sb, "needed")
    assert reply.status == "ok", reply.message
    got = dict(line.rsplit("=", 1) for line in reply.header["values"]["r0"].splitlines())
    return got | probe(sb, {"own copy": Path("../src/attention_head.py")})


def probe(sb: Sandbox, paths: dict[str, Path], write: dict[str, str] | None = None) -> dict[str, str]:
    """name -> "read", "listed", "written" or the exception's name, as the worker saw it."""
    names = {str(p): k for k, p in paths.items()} | {w: k for k, w in (write or {}).items()}
    reply = call(sb, "outcomes", paths=[str(p) for p in paths.values()], write=list((write or {}).values()))
    assert reply.status == "ok", reply.message
    pairs = [line.rsplit("=", 1) for line in reply.header["values"]["r0"].splitlines()]
    return {names[p]: outcome for p, outcome in pairs}


def unread(outcomes: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in outcomes.items() if v in ("read", "listed", "written")}


@needs_landlock
def test_landlock_keeps_every_secret_out_of_reach(open_sandbox: OpenSandbox, secrets: dict[str, Path]) -> None:
    sb = open_sandbox("read_grader")
    assert sb.start().status == "ok"
    assert any(p.startswith(f"landlock (ABI {landlock_abi()}): reads limited to") for p in sb.protections)
    got = probe(sb, secrets, write={"classmate write": str(secrets["classmate"]), "tmp": "/tmp/step4-written"})
    assert unread(got) == {}, got
    assert all(v == "PermissionError" for v in got.values()), got  # Landlock denies: EACCES
    assert set(needed(sb).values()) == {"read"}
    assert probe(sb, {}, write={"work": "scratch.txt"}) == {"work": "written"}


@needs_landlock
def test_landlock_without_a_sandbox_uid_as_on_a_laptop(
    open_sandbox: OpenSandbox, own_uid_pool: WorkerPool, secrets: dict[str, Path]
) -> None:
    """No uid of its own, so file permissions protect nothing here: Landlock alone does."""
    sb = open_sandbox("read_grader", sandbox_pool=own_uid_pool)
    assert sb.start().status == "ok"
    assert "private copies 0700" in sb.protections and not any(p.startswith("uid ") for p in sb.protections)
    assert unread(probe(sb, secrets)) == {}
    assert set(needed(sb).values()) == {"read"}
    assert call(sb, "run_python").header["values"]["r0"] == "3.141592653589793"  # the interpreter still runs
    if landlock_abi() >= 6:  # scoped: not even the grader's own uid's processes can be signalled
        assert "landlock scope: no signals or abstract sockets beyond the sandbox" in sb.protections


@needs_root
def test_mount_namespace_hides_secrets_where_landlock_is_missing(
    open_sandbox: OpenSandbox, secrets: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEP4_FS_ISOLATION", "mount")
    sb = open_sandbox("read_grader")
    assert sb.start().status == "ok"
    assert "mount namespace: grader data, checkout, other copies and people's folders hidden" in sb.protections
    assert not any(p.startswith("landlock") for p in sb.protections)
    got = probe(sb, {k: v for k, v in secrets.items() if k != "private root"}, write={"tmp": "/tmp/step4-written"})
    assert unread(got) == {}, got
    mine = sb._workspace.root.name  # the folder of copies shows the worker's own copy and nothing else
    assert call(sb, "list_names", path=str(secrets["private root"])).header["values"]["r0"] == mine
    assert set(needed(sb).values()) == {"read"}
    assert probe(sb, {}, write={"work": "scratch.txt"}) == {"work": "written"}
    sb.close()
    good = open_sandbox("good")  # modules nobody imported yet still load from the folders mounted back
    reply = call(good, "stdlib_imports")
    assert reply.status == "ok", reply.message


def test_with_no_file_system_layer_the_report_says_so(
    open_sandbox: OpenSandbox, secrets: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last layer (macOS, an old kernel without root): the report says no isolation is available,
    and only the permissions of the private copies (0700, or the slot's own group) keep them from
    other uids; as root, the worker's uid is one of those."""
    monkeypatch.setenv("STEP4_FS_ISOLATION", "none")
    sb = open_sandbox("read_grader")
    assert sb.start().status == "ok"
    assert NONE_AVAILABLE in sb.protections
    assert not any(p.startswith(("landlock", "mount namespace")) for p in sb.protections)
    if not (IS_ROOT and sb._slot.uid is not None):
        assert "private copies 0700" in sb.protections  # same uid as the grader: permissions stop nobody here
        return
    assert "private copies readable only by the sandbox uid" in sb.protections
    got = probe(sb, {k: secrets[k] for k in ("private copy", "private root", "grader environ")})
    assert unread(got) == {}, got
    assert probe(sb, {"old world-readable copy": secrets["old copy"]}) == {"old world-readable copy": "read"}


# -- private copies ---------------------------------------------------------------------------------


def test_private_copies_are_private_and_removed(open_sandbox: OpenSandbox, write_head) -> None:  # type: ignore[no-untyped-def]
    root = private_root()
    assert root.stat().st_mode & 0o777 == 0o711 and root.stat().st_uid == os.geteuid()
    with prepare(write_head("x = 1\n")) as sub:
        copy = sub.dir.parent
        assert copy.parent == root and copy.stat().st_mode & 0o777 == 0o700
        assert all(p.stat().st_mode & 0o077 == 0 for p in copy.rglob("*"))
    assert not copy.exists()
    sb = open_sandbox("good")
    assert sb.start().status == "ok"
    ws = sb._workspace
    uid = sb._slot.uid
    modes = {p.name: (p.stat().st_mode & 0o777, p.stat().st_uid, p.stat().st_gid) for p in (ws.root, ws.src, ws.work)}
    head = (ws.src / "attention_head.py").stat()
    if IS_ROOT and uid is not None:
        assert modes[ws.root.name] == (0o750, 0, uid)  # the slot enters; no other uid does
        assert modes["src"] == (0o550, 0, uid) and (head.st_mode & 0o777, head.st_gid) == (0o440, uid)
        assert modes["work"] == (0o700, uid, uid)
    else:
        me = os.geteuid()
        assert modes[ws.root.name][:2] == (0o700, me) and modes["src"][:2] == (0o500, me)
        assert modes["work"][:2] == (0o700, me) and head.st_mode & 0o777 == 0o400
    sb.close()
    assert not ws.root.exists()


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from grader.sandbox._private import PrivateDir
    d = PrivateDir(sys.argv[1])
    (d.path / "attention_head.py").write_text("x = 1\\n")
    print(d.path, flush=True)
    time.sleep(120)
    """
)


def test_stale_copies_are_swept_at_the_next_start_and_live_ones_kept() -> None:
    live = subprocess.Popen([sys.executable, "-c", _HOLDER, "sandbox"], stdout=subprocess.PIPE, text=True)
    killed = subprocess.Popen([sys.executable, "-c", _HOLDER, "sub"], stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None and killed.stdout is not None
        live_dir, stale_dir = Path(live.stdout.readline().strip()), Path(killed.stdout.readline().strip())
        killed.send_signal(signal.SIGKILL)  # kill -9: no cleanup ran
        killed.wait()
        assert stale_dir.is_dir() and live_dir.is_dir()
        # the next grader to start sweeps (private_root() does, once per process)
        subprocess.run(
            [sys.executable, "-c", "from grader.sandbox._private import private_root; private_root()"], check=True
        )
        assert not stale_dir.exists()
        assert (live_dir / "attention_head.py").is_file()  # a concurrent grader's copy is left alone
    finally:
        for holder in (live, killed):
            holder.kill()
            holder.wait()
            assert holder.stdout is not None
            holder.stdout.close()
    sweep_stale()
    assert not live_dir.exists()  # now its holder is gone too


# -- the allowlist ----------------------------------------------------------------------------------


def _installed_tree(tmp_path: Path) -> Path:
    """A site-packages as plain ``pip install`` leaves it: the grader's data beside other packages."""
    site = tmp_path / "site-packages"
    for rel, text in {
        "grader/__init__.py": "",
        "grader/_reference/attention_head.py": "def causal_self_attention(): ...\n",
        "grader/_snapshots/step4.safetensors": "tensors",
        "grader/sandbox/_ops.py": "ops = 1\n",
        "torch/__init__.py": "torch = 1\n",
        "six.py": "six = 1\n",
    }.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    return site


def test_a_site_packages_holding_the_grader_is_granted_entry_by_entry(tmp_path: Path) -> None:
    site = _installed_tree(tmp_path)
    assert sorted(cut_out(str(site), [str(site / "grader")])) == [str(site / "six.py"), str(site / "torch")]
    assert cut_out(str(site / "grader" / "_reference"), [str(site / "grader")]) == []  # inside a secret
    checkout = tmp_path / "checkout"
    (checkout / ".venv" / "lib").mkdir(parents=True)
    (checkout / "reference").mkdir()
    # a checkout is guarded: never granted whole, though its virtual environment may be
    assert cut_out(str(checkout), [], [str(checkout)]) == []
    assert cut_out(str(checkout / ".venv" / "lib"), [], [str(checkout)]) == [str(checkout / ".venv" / "lib")]
    assert str(checkout) not in cut_out(str(tmp_path), [], [str(checkout)])


@needs_landlock
def test_landlock_enforces_the_cut(tmp_path: Path) -> None:
    """In a forked child: the rules made by cut_out let it read torch and six, nothing of the grader."""
    site = _installed_tree(tmp_path)
    ruleset = new_ruleset(landlock_abi())
    assert ruleset is not None
    for path in cut_out(str(site), [str(site / "grader")]):
        assert ruleset.grant(path, READ)
    targets = ["torch/__init__.py", "six.py", "grader/sandbox/_ops.py", "grader/_reference/attention_head.py",
               "grader/_snapshots/step4.safetensors", "grader/__init__.py"]  # fmt: skip
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: restrict, try, report one letter per target, and leave without cleanup
        try:
            ok = ruleset.enforce()
            letters = ""
            for rel in targets:
                try:
                    with open(site / rel) as f:
                        f.read()
                    letters += "r"
                except PermissionError:
                    letters += "-"
            os.write(w, (("E" if ok else "X") + letters).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.close(ruleset.fd)
    got = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert got == "Err----"  # torch and six; nothing of the grader package


# -- end to end: a head that looks everywhere ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("own_uid", [False, True], ids=["sandbox uid", "own uid (laptop)"])
def test_a_snooping_submission_finds_nothing_and_no_output_leaks(rubric: Rubric, own_uid: bool) -> None:
    """tests/hostile/snoop at import, in every call and in its own tests (on the wheat and on every chaff,
    whose source its failures carry): the JSON and the HTML hold nothing secret."""
    with WorkerPool(2, uid_base=rubric.limits.sandbox_uid_base, lazy=True, sandbox_uids=not own_uid) as pool:
        result = grade(HOSTILE / "snoop", rubric, pool=pool, tests_pool=pool)
    assert SNOOPED in result.output.text  # it looked
    json_text, page = result_json(result), render_html(result)
    assert leaked(json_text) == [] and leaked(page) == []
    checks = {c.id: c for c in result.checks}
    assert checks["reference_match"].status == "passed"  # found nothing, so it answered
    tests = checks["student_tests"]
    assert tests.status == "failed" and "catch" in tests.message  # ran on every chaff, quoted none


def test_the_workers_count_what_the_students_code_tries(open_sandbox: OpenSandbox) -> None:
    """Issue 54: denied reads, writes, commands and sockets left no trace (status graded, 91 points). Each worker
    counts what the student's own code tried beyond what it owns (not a library's own files, not its work dir), and
    the sandbox adds the workers' counts up."""
    sb = open_sandbox("attempts")
    assert sb.start().status == "ok"
    assert sb.attempts == {"reads": 3, "writes": 2, "commands": 2, "connections": 1}
    reply = call(sb, "causal_self_attention", *head_inputs())
    assert reply.status == "ok"
    assert sb.attempts["reads"] == 4
    sb.close()  # the session's pool has one slot
    honest = open_sandbox("good")
    assert honest.start().status == "ok" and call(honest, "causal_self_attention", *head_inputs()).status == "ok"
    assert honest.attempts == {"reads": 0, "writes": 0, "commands": 0, "connections": 0}
    honest.close()


def test_the_grade_carries_the_attempts(rubric: Rubric, pool: WorkerPool) -> None:
    """result.json's attempts: the grader adds up its workers' counts (the class overview flags them)."""
    result = grade(HOSTILE / "attempts", rubric, only=["interface"], pool=pool, visuals=False)
    assert (result.attempts.reads, result.attempts.writes, result.attempts.commands) >= (4, 2, 2)
    said = result.attempts.words()  # one read in every call of the head, three at import
    rest = "2 writes outside its work dir, 2 commands run, 1 network connection"
    assert said == f"{result.attempts.reads} reads outside its folder, {rest}"
    assert grade(HOSTILE / "good", rubric, only=["interface"], pool=pool, visuals=False).attempts.total == 0
