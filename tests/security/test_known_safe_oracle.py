"""The known-safe oracle: commands generated from the table's own programs and options (valid
and mutated: clusters, abbreviations, `--` placements, values that look like options) with
shell syntax around them. Every command the analysis calls known-safe is RUN, by bash, in a
throwaway bubblewrap sandbox over a copy of a fixture workspace (files with hostile names, a
git repository with changes) with no network. The copy must be byte-identical afterwards, and
no program outside the table may have been executed.

What ran is recorded by logging shims: inside the sandbox `/usr/bin`, `/usr/sbin`,
`/usr/local/bin` and `/usr/lib/git-core` are replaced by folders holding one small script per
program there, which appends the program's name to a log and execs the real binary (mounted
elsewhere). Any exec of a program in those folders, by PATH or by absolute path, goes through
a shim; `/bin` and `/sbin` are links into `/usr` here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from builtin.shell import GIT_SAFETY_ENV
from toolnexus import is_known_safe_command
from toolnexus.shell.table import GIT, GIT_SUBCOMMANDS, PROGRAMS, Arity, Option, Program

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "toolnexus-hypothesis")
"""Hypothesis keeps caches in `.hypothesis/`: not in the checkout."""

BIN_DIRS = [Path(d) for d in ("/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/lib/git-core")]
INTERPRETERS = frozenset({"bash", "sh", "dash"})
"""bash runs every command; `which` and `egrep` are sh scripts."""
WAITING = frozenset({"-f", "--follow", "-F", "--retry", "--pid", "-s", "--sleep-interval"})
"""tail options that wait for more input: harmless, but they would only hit the time limit."""


@dataclass
class Sandbox:
    root: Path
    shims: list[tuple[Path, Path, Path]]  # (real dir, its mount point, shim dir)
    workspace: Path
    log: Path
    digest: dict[str, str]

    def run(self, command: str) -> tuple[str, list[str]]:
        """Run `command` with bash in the sandbox; (its output, the programs it executed)."""
        self.log.write_text("")
        args = [
            "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--unshare-net", "--unshare-pid", "--die-with-parent",
            "--new-session",
        ]  # fmt: skip
        for real, mount, shim in self.shims:
            args += ["--ro-bind", str(real), str(mount), "--ro-bind", str(shim), str(real)]
        args += ["--bind", str(self.log.parent), "/tmp/log"]
        args += ["--bind", str(self.workspace), "/tmp/ws", "--chdir", "/tmp/ws"]
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", **GIT_SAFETY_ENV}
        try:
            done = subprocess.run(
                [*args, "/usr/bin/bash", "-c", command],
                capture_output=True,
                text=True,
                errors="replace",
                stdin=subprocess.DEVNULL,
                env=env,
                timeout=20,
                check=False,
            )
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            output = "[timed out]"
        return output, self.log.read_text().split()


def _digest(root: Path) -> dict[str, str]:
    """Every path under `root` (`.git` included) with its type, mode and content hash."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            st_ = path.lstat()
            if path.is_symlink():
                out[rel] = f"link {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = f"dir {st_.st_mode:o}"
            else:
                out[rel] = f"file {st_.st_mode:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out


def _git(ws: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=ws,
        check=True,
        capture_output=True,
    )


def _fixture_workspace(ws: Path) -> None:
    files = {
        "a.txt": "alpha\nbeta\ngamma\nbeta\n",
        "b.txt": "alpha\ndelta\n",
        "in.txt": "3\n1\n2\n",
        "notes.md": "# notes\nTODO: x\n",
        "src/main.py": "print('hi')  # TODO\n",
        "src/util.py": "def f():\n    return 1\n",
        "sub/deep/c.txt": "c\n",
        # names a glob may expand into options
        "-n": "",
        "-delete": "",
        "--output=pwned.txt": "",
        "-o": "",
    }
    for name, text in files.items():
        path = ws / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "add", "a.txt", "b.txt", "src")
    _git(ws, "commit", "-qm", "init")
    (ws / "a.txt").write_text("alpha\nBETA\n")
    (ws / "new.txt").write_text("untracked\n")


def _write_shims(shim: Path, real: Path, mounts: dict[Path, Path], dash: Path) -> None:
    """One logging script per program of `real`. A link (`which` -> /etc/alternatives/which ->
    which.debianutils) execs its final target directly, so it is logged once, by the name it
    was called by."""
    shim.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            continue
        target = Path(os.path.realpath(entry))
        mount = mounts.get(target.parent)
        exe = mount / target.name if mount is not None else mounts[real] / entry.name
        script = shim / entry.name
        script.write_text(f'#!{dash}\necho {entry.name} >> /tmp/log/exec.log\nexec {exe} "$@"\n')
        script.chmod(0o755)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: the oracle runs commands in it")
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-net", "true"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"bwrap cannot create a sandbox here: {probe.stderr.decode().strip()}")
    root = tmp_path_factory.mktemp("oracle")
    dirs = [d for d in BIN_DIRS if d.is_dir() and not d.is_symlink()]
    mounts = [Path(f"/tmp/real/{i}") for i in range(len(dirs))]
    dash = mounts[0] / "dash"
    by_dir = dict(zip(dirs, mounts, strict=True))
    shims = []
    for i, (real, mount) in enumerate(by_dir.items()):
        _write_shims(root / "shims" / str(i), real, by_dir, dash)
        shims.append((real, mount, root / "shims" / str(i)))
    ws = root / "ws"
    _fixture_workspace(ws)
    log = root / "log" / "exec.log"
    log.parent.mkdir()
    log.touch()
    yield Sandbox(root, shims, ws, log, _digest(ws))


def _check(sandbox: Sandbox, command: str) -> None:
    output, ran = sandbox.run(command)
    allowed = set(PROGRAMS) | INTERPRETERS
    assert set(ran) <= allowed, f"{command!r} ran {sorted(set(ran) - allowed)}:\n{output}"
    after = _digest(sandbox.workspace)
    changed = sorted(
        k for k in after.keys() | sandbox.digest.keys() if after.get(k) != sandbox.digest.get(k)
    )
    assert changed == [], f"{command!r} changed {changed}:\n{output}"


def test_the_oracle_sees_writes_and_programs(sandbox: Sandbox) -> None:
    """The oracle itself: a command that writes, and one that runs an unlisted program, are
    caught; a read-only command passes and really ran."""
    output, ran = sandbox.run("git status --short; cat a.txt")
    assert "BETA" in output and "new.txt" in output
    assert {"bash", "git", "cat"} <= set(ran)
    with pytest.raises(AssertionError, match=r"ran \['touch'\]"):
        _check(sandbox, "/usr/bin/touch /tmp/x")
    with pytest.raises(AssertionError, match=r"changed \['pwned'\]"):
        _check(sandbox, "echo > pwned")
    (sandbox.workspace / "pwned").unlink()
    with pytest.raises(AssertionError, match="ran"):
        _check(sandbox, "find . -maxdepth 0 -exec /usr/bin/touch /tmp/y ';'")
    output, _ = sandbox.run("exec 3<>/dev/tcp/1.1.1.1/80 && echo connected")
    assert "connected" not in output


# --- generating commands from the table ----------------------------------------------------

OPERANDS = [
    "a.txt", "b.txt", "in.txt", "src", ".", "-", "src/*.py", "*", "*.txt", "-o", "--",
    "pwned.txt", "HEAD", "HEAD~1", "1", "3", "+%s", "p", "1p", "1,2p", "1w pwned", "alpha",
    "TODO", "-name", "*.py", "-delete", "-exec", "{}", ";", "$HOME", "s/a/b/w pwned",
    "--output=pwned.txt", "-ofoo", "main", "new-branch", "-d", "f", "x",
]  # fmt: skip
VALUES = [
    "1", "3", "a.txt", ",", "--", "--", "-o", "pwned.txt", "alpha", "%s", "/tmp", "-", "x", "k1",
]  # fmt: skip
SYNTAX = [" | ", " ; ", " && ", " || ", "\n"]
REDIRECTS = ["2>/dev/null", ">/dev/null", "2>&1", ">&-", "</dev/null", "> out.txt", "< a.txt"]


def _quote(draw: st.DrawFn, word: str) -> str:
    style = draw(st.sampled_from(["plain", "plain", "plain", "single", "double"]))
    if style == "single":
        return "'" + word.replace("'", "'\\''") + "'"
    if style == "double":
        return '"' + word.replace('"', '\\"') + '"'
    return word.replace(" ", "\\ ").replace(";", "\\;")


def _option_words(draw: st.DrawFn, program: Program) -> list[str]:
    options = [o for o in program.options if not set(o.names) & WAITING]
    if not options:
        return []
    option: Option = draw(st.sampled_from(options))
    name = draw(st.sampled_from(option.names))
    mutation = draw(st.sampled_from(["none", "none", "none", "abbrev", "cluster", "value"]))
    if mutation == "abbrev" and name.startswith("--") and len(name) > 4:
        name = name[: draw(st.integers(3, len(name) - 1))]
    if mutation == "cluster" and not name.startswith("--"):
        shorts = [n for o in options for n in o.names if len(n) == 2 and o.arity is Arity.NONE]
        if shorts:
            name += "".join(n[1] for n in draw(st.lists(st.sampled_from(shorts), max_size=2)))
    if option.arity is Arity.NONE and mutation != "value":
        return [name]
    value = draw(st.sampled_from(VALUES))
    if name.startswith("--") and draw(st.booleans()):
        return [f"{name}={value}"]
    if option.arity is Arity.OPTIONAL or draw(st.booleans()):
        return [name + value]
    return [name, _quote(draw, value)]


@st.composite
def simple_commands(draw: st.DrawFn) -> str:
    programs = [p for p in PROGRAMS.values() if p.name not in ("sleep", "git")]
    guarded = [p for p in programs if p.check or any(o.refused for o in p.options)]
    choice = draw(st.integers(0, 3))
    if choice == 0:
        sub = draw(st.sampled_from(sorted(GIT_SUBCOMMANDS)))
        program = GIT_SUBCOMMANDS[sub]
        head = ["git"]
        if draw(st.booleans()):
            head += [draw(st.sampled_from([n for o in GIT.options for n in o.names]))]
        head.append(sub)
        if program.subcommands:
            inner = draw(st.sampled_from(sorted(program.subcommands)))
            head.append(inner)
            program = program.subcommands[inner]
    else:
        # Half of the time a program that has something to refuse: that is where bugs hide.
        program = draw(st.sampled_from(guarded if choice == 1 else programs))
        head = [program.name]
    words: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            words += _option_words(draw, program)
        else:
            words.append(_quote(draw, draw(st.sampled_from(OPERANDS))))
    words += draw(st.lists(st.sampled_from(REDIRECTS), max_size=1))
    return " ".join(head + words)


@st.composite
def commands(draw: st.DrawFn) -> str:
    parts = draw(st.lists(simple_commands(), min_size=1, max_size=3))
    line = parts[0]
    for part in parts[1:]:
        line += draw(st.sampled_from(SYNTAX)) + part
    heredoc = draw(st.sampled_from(["", "", "", "<<EOF\nalpha $HOME\nEOF", "<<'E'\n$(x)\nE"]))
    if heredoc:
        first, _, rest = heredoc.partition("\n")
        line = f"{line} {first}\n{rest}"
    return line


SEEN: list[str] = []


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
    database=None,  # reproducible in CI, and no .hypothesis folder in the checkout
)
@given(command=commands())
def test_known_safe_commands_change_nothing_and_run_only_the_table(
    sandbox: Sandbox, command: str
) -> None:
    if is_known_safe_command(command):
        SEEN.append(command)
        _check(sandbox, command)


def test_the_generator_reached_known_safe_commands() -> None:
    """Not vacuous: a good part of the generated commands were known-safe and were run."""
    if not SEEN:
        pytest.skip("the oracle test did not run in this session (deselected or skipped)")
    assert len(SEEN) >= 40, SEEN
