"""Known-safe by construction: every attack class of issue 10 that concerns the builtin shell's
auto-allow, read by `is_known_safe_command` and, where it matters, run end to end through the
builtin `shell` tool with no approver (the call must be refused and the file the attack would
create must not exist)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from builtin.shell import shell_tools
from toolnexus import Decision, Tool, acreate_toolkit, is_known_safe_command
from toolnexus.shell.table import GIT_SUBCOMMANDS, PROGRAMS, Parser, Program

# --- the attack classes, as the analysis reads them ------------------------------------------

WRAPPERS = [
    "env -iu ls sh -c 'touch x'",
    "env -u HOME sh -c 'touch x'",
    "env -S 'touch x'",
    "env -C sub git diff",
    "env ls",
    "env LC_ALL=C ls",
    "timeout 5 ls",
    "timeout -s KILL 5 touch x",
    "timeout --foreground 5 git -C sub diff",
    "nice ls",
    "nice -n 5 touch x",
    "find . -name x | xargs wc -l",
    "xargs -I{} touch {}",
    "exec ls",
    "command ls",
    "command -p touch x",
    "builtin echo x",
    "sudo ls",
    "sudo -u root ls",
    "stdbuf -o0 ls",
    "nohup ls",
    "time -o out ls",
    "bash -c 'ls'",
    "bash -lc 'ls && pwd'",
    "sh -c ls",
    "eval ls",
    "LANG=C ls",
    "PATH=. ls",
    "FOO=1",
]
"""Wrappers are not modelled: each runs its command differently from how it is written."""

VALUES_AND_CLUSTERS = [
    "sort -T -- -o out.txt in.txt",
    "sort -T -- in.txt",
    "sort -S 1M -o out.txt in.txt",
    "sort -ro out.txt in.txt",
    "sort -rk1 -o out.txt in.txt",
    "sort -zoout.txt in.txt",
    "sort in.txt -o out.txt",
    "sort -k -o in.txt",
    "sed -nie 1p x",
    "sed -ni 1p x",
    "sed -n -i.bak 1p x",
    "sed -n --in-place=.bak 1p x",
    "sed -nf script x",
    "grep -e -- -f x",
    "rg -nz foo",
    "rg -iz foo",
    "rg -n --pre cat foo",
    "file -bC -m magic",
    "file -pb x",
    "date -us 2020-01-01",
    "date -u 010112002020",
    "git grep -nO foo",
    "git branch -vd old",
    "git log -n -5 --output=x",
    "diff -l a b",
    "uniq -c in.txt out.txt",
]
"""`--` used as an option's value, value-taking letters inside clusters, options after
operands (GNU getopt permutes), and separate values that look like options."""

ABBREVIATIONS = [
    "sort --o=out x",
    "sort --outp out x",
    "sort --output out x",
    "sort --compress-prog=sh x",
    "sort --c x",  # ambiguous: --check, --compress-program
    "date --se=2020-01-01",
    "date --s=2020-01-01",
    "sed --in=.bak -n 1p x",
    "sed --in-pl -n 1p x",
    "sed -n --fi=script x",
    "diff --pag a b",
    "file --comp -m magic",
    "file --no-s x",
    "file --pres x",
    "ls --h",  # ambiguous
    "rg --pr=cat foo",
    "rg --search foo",
    "git diff --ext",
    "git diff --out=x",
    "git log --outp=x",
    "git grep --open=vim foo",
    "git cat-file --text HEAD:x",
    "git cat-file --filt HEAD:x",
]
"""getopt_long resolves any unambiguous prefix: an abbreviation of a refused option is refused,
and an ambiguous one is not understood. ripgrep and git (read exactly) take no prefixes here."""

INPUT_REDIRECTIONS = [
    "cat </dev/tcp/127.0.0.1/80",
    "cat < /dev/tcp/127.0.0.1/80",
    "cat 0</dev/udp/127.0.0.1/53",
    "head -c 10 3</dev/tcp/127.0.0.1/80",
    "wc -l < notes.txt",
    "cat <> notes.txt",
    "ls >&notes.txt",
    "ls 2>errors.txt",
    "ls > /dev/null > out.txt",
    "cat <<<x >out.txt",
]
"""Only /dev/null, descriptor duplications and here-documents: `/dev/tcp` is the network."""

GIT_ELSEWHERE = [
    "git -C sub diff",
    "git -Csub diff",
    "timeout 5 git -C sub diff",
    "bash -c 'git -C sub diff'",
    "sh -c 'git diff'",
    "git --git-dir=sub/.git log",
    "git --git-dir sub/.git log",
    "git --work-tree=sub status",
    "git --bare log",
    "git --namespace=x log",
    "git -c diff.external=./x diff",
    "git -ccore.pager=./x log",
    "git --config-env=core.pager=X log",
    "git --exec-path=. status",
    "git -p log",
    "GIT_DIR=sub/.git git log",
    "GIT_EXTERNAL_DIFF=./x git diff",
    "env git diff",
    "sudo git status",
    "git log --show-signature",
    "git diff --no-index a b",
    "git grep --recurse-submodules x",
    "git ls-files --recurse-submodules",
]
"""git pointed at another repository or config, or made to run a program."""

BASH_TRICKS = [
    "true {PATH}>/dev/null; ls",
    "ls {fd}>/dev/null",
    "cat <<EOF\nEO\\\nF\ntouch x\nEOF",
    "cat <<E$X\nx\nE$X",
    "echo $(touch x)",
    "ls `touch x`",
    "cat $HOME/x",
    'cat "$F"',
    "ls $DIR",
    "sort *.txt",  # a file named --output=x.txt
    "sed -n 1p *.txt",
    "rg foo *",
    "uniq in*",
    "./ls",
    "/bin/ls",
    "l* -la",
    "$CMD",
]
"""Expansions whose run-time value is unknown, globs that may expand into options, bash's
`{NAME}>` descriptor assignment, and here-document delimiters joined by backslash-newline."""

GIT_WRITES = [
    "git shortlog --output=x",  # found by the oracle in the old check
    "git log --output=x",
    "git show --output x",
    "git diff --output=x",
    "git stash show --output=x",
    "git branch new-branch",
    "git branch -m a b",
    "git stash",
    "git remote add x y",
    "git remote show origin",
    "git status --porcelain=v2 --output=x",
    "git tag v1",
    "git checkout status",
]
"""Read-only sub-commands made to write, and sub-commands that are not read-only."""

ATTACKS = {
    "wrapper": WRAPPERS,
    "value-cluster": VALUES_AND_CLUSTERS,
    "abbreviation": ABBREVIATIONS,
    "redirection": INPUT_REDIRECTIONS,
    "git-elsewhere": GIT_ELSEWHERE,
    "git-writes": GIT_WRITES,
    "bash": BASH_TRICKS,
}


@pytest.mark.parametrize(
    "command", [pytest.param(c, id=f"{k}:{c[:40]}") for k, cs in ATTACKS.items() for c in cs]
)
def test_attack_is_not_known_safe(command: str) -> None:
    assert is_known_safe_command(command) is False


KNOWN_SAFE = [
    "time ls",  # bash's `time` is a reserved word: it times `ls`, and runs nothing else
    "time -p wc -l a.txt",
    "ls -la",
    "ls -1 src/*.py",
    "ls *.py",
    "wc -l *.py",
    "cat -n a.txt | grep -v foo | wc -l",
    "head -20 a.txt && tail -n 5 a.txt",
    "grep -rn --include='*.py' TODO . | head -5",
    "grep -C2 -e foo -e bar a.txt",
    "rg -n TODO src",
    "rg -g '*.py' -tpy foo",
    "rg -n 'foo' -g'*.py'",
    "find . -name '*.py' -type f -not -path './.git/*' -print",
    "find src -maxdepth 2 -newer a.txt",
    "sort -rn -k2,2 -t, a.csv | uniq -c",
    "sort --rev a.txt",  # an unambiguous prefix of an allowed option
    "sort -T /tmp a.txt",
    "sed -n '10,20p' a.txt",
    "sed -n -e '/start/,/end/p' a.txt",
    "cut -d: -f1 a.txt; tr a-z A-Z </dev/null; nl a.txt",
    "diff -u a.txt b.txt",
    "du -sh .; df -h",
    "stat -c %s a.txt",
    "date +%Y-%m-%d; date -u --iso-8601=seconds",
    "echo hello; printf '%s\\n' a b; pwd; true; false",
    "echo $HOME ${USER:-x}",
    "test -f a.txt && [ -d src ]",
    "command -v rg",
    "cd src && ls",
    "ls 2>/dev/null",
    "ls > /dev/null 2>&1",
    "ls &>/dev/null",
    "cat <<'EOF'\nanything $(here)\nEOF",
    "cat <<EOF\n${HOME}\nEOF",
    "git status",
    "git status --short -uno",
    "git --no-pager log --oneline -n 5",
    "git log -3 --stat",
    "git diff HEAD~1 -- src",
    "git diff --cached --name-only",
    "git show HEAD:README.md",
    "git branch",
    "git branch -a -vv",
    "git branch --list 'feat/*'",
    "git branch --contains HEAD",
    "git rev-parse --show-toplevel",
    "git ls-files -z",
    "git blame -L 1,5 a.txt",
    "git grep -n TODO",
    "git remote -v",
    "git stash list",
]


@pytest.mark.parametrize("command", KNOWN_SAFE)
def test_read_only_commands_stay_known_safe(command: str) -> None:
    assert is_known_safe_command(command) is True


# --- the table itself ---------------------------------------------------------------------------


def _all_programs() -> list[Program]:
    return [*PROGRAMS.values(), *GIT_SUBCOMMANDS.values()]


@pytest.mark.parametrize("program", _all_programs(), ids=lambda p: p.name)
def test_each_option_name_is_listed_once(program: Program) -> None:
    names = [n for o in program.options for n in o.names]
    assert sorted({n for n in names if names.count(n) > 1}) == []


_GNU_LONG = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)")


@pytest.mark.parametrize(
    "program",
    [p for p in PROGRAMS.values() if p.parser is Parser.GETOPT and shutil.which(p.name)],
    ids=lambda p: p.name,
)
def test_getopt_tables_hold_every_long_option_of_the_binary(
    program: Program, tmp_path: Path
) -> None:
    """Prefixes resolve against the table's list, so it must be the program's *full* list:
    every `--name` its `--help` shows, and, asked for each one-letter prefix, the same answer
    as glibc's getopt_long gives (ambiguous with the same candidates, unknown, or one option)."""
    helped = subprocess.run(
        [program.name, "--help"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    listed = set(program.long())
    shown = {n for n in _GNU_LONG.findall(helped.stdout) if not n.endswith("-")}
    shown -= {"GTYPE-group-format", "LTYPE-line-format"}  # diff's placeholders, spelled out
    assert shown <= listed, f"{program.name}: {sorted(shown - listed)} missing from the table"
    long_ = program.long()
    for letter in "abcdefghijklmnopqrstuvwxyz":
        try:
            err = subprocess.run(
                [program.name, f"--{letter}"],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                cwd=tmp_path,
                timeout=5,
                check=False,
            ).stderr
        except subprocess.TimeoutExpired:
            err = ""  # it took the option and ran (`tail --f` follows)
        mine = {id(o) for n, o in long_.items() if n.startswith(letter)}
        if "is ambiguous; possibilities:" in err:
            # glibc names one spelling per option: compare options, not names.
            theirs = re.findall(r"'--([\w-]+)'", err.split("possibilities:", 1)[1])
            assert set(theirs) <= listed, f"{program.name}: {set(theirs) - listed} missing"
            assert {id(long_[n]) for n in theirs} == mine, f"{program.name} --{letter}"
        elif "unrecognized option" in err:
            assert not mine, f"{program.name} --{letter}: the binary knows no such option"
        else:
            assert len(mine) == 1, f"{program.name} --{letter}: the binary takes one option"


# --- end to end, through the builtin shell tool ---------------------------------------------

pytestmark = pytest.mark.anyio


async def _refused(workspace: Path, command: str, **args: object) -> None:
    """Run `command` through the builtin shell with no approver: it must be refused."""
    toolkit = await acreate_toolkit(builtins=["shell"], workspace=workspace)
    async with toolkit:
        verdict = toolkit.check("shell", {"command": command, **args})
        assert verdict.decision is not Decision.ALLOW, command
        result = await toolkit.aexecute("shell", {"command": command, **args})
        assert result.is_error, command


@pytest.mark.parametrize(
    ("command", "created"),
    [
        ("sort -T -- -o out.txt in.txt", "out.txt"),
        ("sort -ro out.txt in.txt", "out.txt"),
        ("sort in.txt --outp out.txt", "out.txt"),
        ("sort --compress-prog=./evil.sh -S 1 in.txt", "pwned"),
        ("env -iu ls sh -c 'touch pwned'", "pwned"),
        ("timeout 5 sh -c 'touch pwned'", "pwned"),
        ("sed -ni 1w\\ pwned in.txt", "pwned"),
        ("true {PATH}>/dev/null; ls", "pwned"),
        ("cat <<EOF\nEO\\\nF\ntouch pwned\nEOF", "pwned"),
    ],
)
async def test_attacks_are_refused_end_to_end(tmp_path: Path, command: str, created: str) -> None:
    (tmp_path / "in.txt").write_text("b\na\n" * 1000)
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {tmp_path / 'pwned'}\ncat\n")
    evil.chmod(0o755)
    for fd in range(10, 20):  # `{PATH}>` sets PATH to a descriptor number: a folder here
        (tmp_path / str(fd)).mkdir()
        shutil.copy(evil, tmp_path / str(fd) / "ls")
    await _refused(tmp_path, command)
    assert not (tmp_path / created).exists()


async def test_input_from_the_network_is_refused_end_to_end(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]
        await _refused(tmp_path, f"cat </dev/tcp/127.0.0.1/{port}")
        with pytest.raises(TimeoutError):
            server.accept()  # nobody connected


# --- git: only the workspace's own, unredirected repository --------------------------------


def _git(*args: str | Path) -> None:
    subprocess.run(["git", *map(str, args)], check=True, capture_output=True)


def _repo(folder: Path) -> Path:
    """A repository with one committed file, modified since (so `git diff` has work)."""
    _git("init", "-q", folder)
    (folder / "a.txt").write_text("a\n")
    _git("-C", folder, "add", "a.txt")
    _git("-C", folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (folder / "a.txt").write_text("a\nb\n")
    return folder


def _external_diff(tmp_path: Path) -> tuple[Path, Path]:
    """A diff.external program and the marker it leaves when git runs it."""
    marker = tmp_path / "external-ran"
    program = tmp_path / "external.sh"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    return program, marker


def _shell() -> Tool:
    (shell,) = [t for t in shell_tools({}) if t.name == "shell"]
    return shell


def _allowed(workspace: Path, command: str) -> bool:
    shell = _shell()
    assert shell.approval is not None
    return shell.approval.decide(shell, {"command": command}, workspace).decision is (
        Decision.ALLOW
    )


@pytest.mark.parametrize(
    "command",
    [
        "timeout 5 git -C sub diff",
        "git -C sub diff",
        "cd sub && git diff",
        "bash -c 'git -C sub diff'",
    ],
)
async def test_a_nested_repository_configured_to_run_a_program(
    tmp_path: Path, command: str
) -> None:
    ws = _repo(tmp_path / "ws")
    program, marker = _external_diff(tmp_path)
    _git("-C", _repo(ws / "sub"), "config", "diff.external", program)
    await _refused(ws, command)
    assert not marker.exists()


async def test_a_nested_repository_refuses_git_in_the_outer_one(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws")
    assert _allowed(ws, "git status")
    _git("-C", _repo(ws / "deep" / "sub"), "config", "diff.external", "/bin/true")
    assert not _allowed(ws, "git status")
    assert not _allowed(ws, "git diff")
    assert _allowed(ws, "ls")


def _evil_copy(ws: Path, tmp_path: Path) -> Path:
    """A copy of the workspace's git folder whose config runs a program on `git diff`."""
    program, _ = _external_diff(tmp_path)
    evil = tmp_path / "evil.git"
    shutil.copytree(ws / ".git", evil)
    _git("--git-dir", evil, "config", "diff.external", program)
    return evil


async def test_commondir_redirecting_the_repository(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws")
    (ws / ".git" / "commondir").write_text(f"{_evil_copy(ws, tmp_path)}\n")
    await _refused(ws, "git diff")
    assert not (tmp_path / "external-ran").exists()


async def test_a_gitfile_redirecting_the_repository(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws")
    evil = _evil_copy(ws, tmp_path)
    shutil.rmtree(ws / ".git")
    (ws / ".git").write_text(f"gitdir: {evil}\n")
    await _refused(ws, "git diff")
    assert not (tmp_path / "external-ran").exists()


async def test_alternates_pointing_at_another_repository(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws")
    other = _repo(tmp_path / "other")
    (ws / ".git" / "objects" / "info" / "alternates").write_text(f"{other}/.git/objects\n")
    assert not _allowed(ws, "git log")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("diff.external", "PROGRAM"),
        ("core.pager", "PROGRAM"),
        ("core.fsmonitor", "PROGRAM"),
        ("core.hooksPath", "hooks"),
        ("core.sshCommand", "PROGRAM"),
        ("core.worktree", "/tmp"),
        ("diff.x.textconv", "PROGRAM"),
        ("filter.x.clean", "PROGRAM"),
        ("gpg.program", "PROGRAM"),
        ("log.showSignature", "true"),
        ("include.path", "other.cfg"),
        ("includeIf.gitdir:/.path", "other.cfg"),
        ("extensions.partialClone", "origin"),
        ("something.unknown", "x"),
    ],
)
async def test_workspace_config_that_could_run_a_program(
    tmp_path: Path, key: str, value: str
) -> None:
    ws = _repo(tmp_path / "ws")
    program, marker = _external_diff(tmp_path)
    (ws / ".gitattributes").write_text("*.txt diff=x filter=x\n")
    _git("-C", ws, "config", key, str(program) if value == "PROGRAM" else value)
    await _refused(ws, "git diff")
    assert not marker.exists()


def test_harmless_config_keeps_git_auto_allowed(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws")
    for key, value in [
        ("user.name", "t"),
        ("remote.origin.url", "https://example.invalid/x.git"),
        ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
        ("branch.main.remote", "origin"),
        ("color.ui", "auto"),
        ("diff.algorithm", "histogram"),
    ]:
        _git("-C", ws, "config", key, value)
    assert _allowed(ws, "git status && git diff --stat && git log --oneline -3")
