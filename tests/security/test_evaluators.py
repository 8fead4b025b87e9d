"""Every reading in `toolnexus/shell/evaluators.py`, proven by running it: each example runs,
with bash, in a throwaway sandbox (toolnexus' own: workspace-write over a fresh git repository in
tmp_path, network off), and a marker program on PATH leaves a file when the string it was handed
ran. Then the analysis must agree: a deny or ask rule on the marker matches the command (rules
and permissions both), and the command is never known-safe.

Issue 25, "Deny 'by any reading' misses whole classes". Run under bwrap and again with
`TOOLNEXUS_SANDBOX_DISABLE=bwrap` (Landlock).
"""

from __future__ import annotations

import http.server
import shlex
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from toolnexus import Decision, create_toolkit, is_known_safe_command
from toolnexus.runtime.process import run_process
from toolnexus.runtime.sandbox import SandboxPolicy, detect

if TYPE_CHECKING:
    from toolnexus.shell.evaluators import Evaluator

from .test_deny_any_reading import denied_every_way

MARKER = "tn-marker"
DENY = f"{MARKER} *"


@dataclass(frozen=True)
class Example:
    entry: str
    """The entry it exercises: `program|first name` of an `evaluators.ENTRIES` entry."""
    command: str
    tty: bool = False
    """Run under `script` (a terminal): git and man only start a pager on one."""
    http: bool = False
    """Needs a server on 127.0.0.1 that asks for a password (`{port}` in the command)."""
    run: bool = True
    why: str = ""
    """Why it is not run here (the analysis is still checked)."""


EXAMPLES = [
    Example("*|sh", "bash -c 'tn-marker'"),
    Example("*|sh", "/bin/sh -c tn-marker"),
    Example("*|sh", "rbash -c tn-marker"),
    Example("*|/proc/*/exe", "/proc/self/exe -c tn-marker"),
    Example("*|/proc/*/exe", "/proc/thread-self/exe -c tn-marker"),
    Example("*|/proc/*/exe", "/proc/$$/exe -c tn-marker"),
    Example("*|/proc/*/exe", "echo tn-marker | /proc/self/exe"),
    Example("*|/proc/*/exe", "exec 3</bin/bash; /dev/fd/3 -c tn-marker"),
    Example("*|./*", "ln -s /bin/bash x && ./x -c tn-marker"),
    Example("*|./*", "exec -a foo bash -c tn-marker"),
    Example("*|./*", "env bash -c tn-marker"),
    Example("*|PATH", "mkdir -p b && ln -sf /bin/bash b/ls && PATH=$PWD/b:$PATH ls -c tn-marker"),
    Example("bash|hash", "hash -p /bin/bash ls; ls -c tn-marker"),
    Example(
        "bash|enable",
        "enable -f ./tn-marker.so tnm",
        run=False,
        why="needs a builtin compiled as a shared object",
    ),
    Example("bash|fc", "history -s tn-marker; fc -e -"),
    Example("bash|fc", "history -s tn-markex; fc -s x=r"),
    Example("bash|history", "history -s 'tn-marker'; fc -s"),
    Example("bash|set", "set -o history -H\ntn-marker 1\n!!"),
    Example("bash|set", "set -H -o history\necho tn-marker\n!!:1"),
    Example("bash|eval", "eval tn-marker"),
    Example("bash|trap", "trap tn-marker EXIT"),
    Example("bash|source", "source /dev/stdin <<< tn-marker"),
    Example("bash|compgen", "compgen -C tn-marker x"),
    Example("bash|mapfile", "mapfile -C tn-marker -c 1 a <<< x"),
    Example(
        "bash|bind",
        "bind -x '\"\\C-t\": tn-marker'",
        run=False,
        why="runs on a key press in an interactive shell",
    ),
    Example("bash|alias", "shopt -s expand_aliases\nalias t=tn-marker\nt"),
    Example("bash|command", "command tn-marker; builtin eval tn-marker; coproc tn-marker; wait"),
    Example("*|PROMPT_COMMAND", "PROMPT_COMMAND=tn-marker bash -i </dev/null"),
    Example("*|BASH_ENV", "BASH_ENV='$(tn-marker)' bash -c true"),
    Example("*|BASH_ENV", "ENV='$(tn-marker)' sh -i </dev/null"),
    Example("*|BASH_ENV", "PS4='$(tn-marker)'; set -x; true"),
    Example("env|COMMAND", "timeout 5 nice nohup stdbuf -oL setsid -w flock /tmp/l env tn-marker"),
    Example("env|COMMAND", "echo x | xargs tn-marker"),
    Example("env|COMMAND", "script -qc tn-marker /dev/null", tty=True),
    Example("env|COMMAND", "watch -n 1 -g tn-marker >/dev/null & sleep 2; kill %1"),
    Example("env|-S/--split-string=", "env -S 'tn-marker x'"),
    Example("find|-exec", "find . -maxdepth 0 -exec tn-marker {} ';'"),
    Example(
        "sort|--compress-program=",
        "seq 100000 | sort -S 1k --compress-program=tn-marker -T . >/dev/null",
    ),
    Example("rg|--pre=", "echo a > a.txt; rg --pre tn-marker a a.txt"),
    Example(
        "rg|-z/--search-zip",
        "PATH=$PWD/zbin:$PATH rg -z x a.gz",
        run=False,
        why="runs gzip found on PATH: the PATH reading",
    ),
    Example(
        "tar|--to-command=",
        "echo a > a.txt; tar -cf t.tar a.txt; tar -xf t.tar --to-command=tn-marker",
    ),
    Example("tar|--to-command=", "echo a > a.txt; tar -I tn-marker -cf t.tz a.txt"),
    Example(
        "tar|--checkpoint-action=",
        "echo a > a.txt; tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec=tn-marker a.txt",
    ),
    Example(
        "rsync|-e/--rsh=",
        "rsync -e tn-marker a.txt x:y",
        run=False,
        why="rsync is not installed here",
    ),
    Example("ssh|-o=", "ssh -o ProxyCommand=tn-marker -o BatchMode=yes x true"),
    Example("ssh|-o=", "ssh -oProxyCommand='tn-marker %h' -o BatchMode=yes x true"),
    Example(
        "ssh|-F=",
        "printf 'Host *\\n ProxyCommand tn-marker\\n' > c; ssh -F c -o BatchMode=yes x true",
    ),
    Example("scp|-S=", "scp -S tn-marker x:y z"),
    Example("scp|-o=", "scp -o ProxyCommand=tn-marker -o BatchMode=yes x:y z"),
    Example(
        "scp|-F=",
        "printf 'Host *\\n ProxyCommand tn-marker\\n' > c; scp -F c -o BatchMode=yes x:y z",
    ),
    Example("man|-P/--pager=", "man -P tn-marker ls", tty=True),
    Example(
        "less|+=",
        "less '+!tn-marker' a.txt",
        run=False,
        why="needs a terminal and a less built with shell escapes",
    ),
    Example("*|LESSOPEN", "echo a > a.txt; LESSOPEN='|tn-marker %s' less a.txt"),
    Example("*|PAGER", "GIT_PAGER=tn-marker git -p log", tty=True),
    Example("*|PAGER", "export GIT_EXTERNAL_DIFF=tn-marker; echo b >> a.txt; git diff"),
    Example("*|PAGER", "GIT_SSH_COMMAND=tn-marker git ls-remote x:y"),
    Example("*|PAGER", "GIT_SSH=tn-marker git ls-remote x:y"),
    Example("*|PAGER", "GIT_EDITOR=tn-marker git commit --allow-empty"),
    Example("*|PAGER", "GIT_SEQUENCE_EDITOR=tn-marker git rebase -i HEAD"),
    Example("*|PAGER", "MANPAGER=tn-marker man ls", tty=True),
    Example("*|PAGER", "PAGER=tn-marker man ls", tty=True),
    Example("*|PAGER", "GIT_ASKPASS=tn-marker git ls-remote http://127.0.0.1:{port}/x", http=True),
    Example(
        "*|GIT_CONFIG_VALUE_*",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=tn-marker git -p log",
        tty=True,
    ),
    Example(
        "*|GIT_CONFIG_KEY_*",
        "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=tn-marker; "
        "git -p log",
        tty=True,
    ),
    Example(
        "*|GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_PARAMETERS=\"'core.pager'='tn-marker'\" git -p log",
        tty=True,
    ),
    Example(
        "*|GIT_CONFIG",
        "printf '[core]\\npager = tn-marker\\n' > g; GIT_CONFIG_GLOBAL=$PWD/g git -p log",
        tty=True,
    ),
    Example(
        "*|GIT_CONFIG",
        "mkdir -p x; ln -sf $(command -v tn-marker) x/git-tnx; GIT_EXEC_PATH=$PWD/x git tnx",
    ),
    Example("vim|-c=", "echo a > a.txt; vim -es -c '!tn-marker' -c q a.txt"),
    Example("vi|-c=", "vi -es -c '!tn-marker' -c q"),
    Example("ex|-c=", "ex -s -c '!tn-marker' -c q"),
    Example("python|-c=", "python3 -c 'import os; os.system(\"tn-marker\")'"),
    Example("perl|-e=", "perl -e 'system(\"tn-marker\")'"),
    Example(
        "ruby|-e=", "ruby -e 'system(\"tn-marker\")'", run=False, why="ruby is not installed here"
    ),
    Example("node|-e/--eval=", 'node -e \'require("child_process").execSync("tn-marker")\''),
    Example(
        "php|-r=", "php -r 'system(\"tn-marker\");'", run=False, why="php is not installed here"
    ),
    Example(
        "lua|-e=", "lua -e 'os.execute(\"tn-marker\")'", run=False, why="lua is not installed here"
    ),
    Example(
        "gdb|-ex/--eval-command=",
        "gdb -batch -ex 'shell tn-marker'",
        run=False,
        why="gdb is not installed here",
    ),
    Example("make|--eval=", "make -f /dev/null --eval='x: ; tn-marker' x"),
    Example("awk|PROGRAM", "awk 'BEGIN { system(\"tn-marker\") }'"),
    Example("awk|PROGRAM", "awk 'BEGIN { print | \"tn-marker\" }'"),
    Example("sed|SCRIPT", "echo a | sed '1e tn-marker'"),
    Example("sed|SCRIPT", "echo tn-marker | sed -n e"),
    Example("sed|SCRIPT", "echo a | sed 's/a/tn-marker/e'"),
    Example("sed|SCRIPT", "echo a | sed -e p -e '$e tn-marker'"),
    Example("sed|SCRIPT", "echo a | sed --expression='1 e tn-marker'"),
    Example(
        "git rebase|-x/--exec=",
        "git commit -q --allow-empty -m two; git rebase -q --exec tn-marker HEAD~1",
    ),
    Example(
        "git submodule|foreach",
        "git init -q s && git -C s commit -q --allow-empty -m x && "
        "git -c protocol.file.allow=always submodule -q add ./s s2 && "
        "git submodule foreach tn-marker",
    ),
    Example(
        "git bisect|run",
        "git commit -q --allow-empty -m two; git bisect start HEAD HEAD~1 && "
        "git bisect run tn-marker; git bisect reset",
    ),
    Example("git difftool|-x/--extcmd=", "echo b >> a.txt; git difftool -y -x tn-marker"),
    Example(
        "git mergetool|-t/--tool=",
        "git mergetool -y -t tn-marker",
        run=False,
        why="needs a merge conflict",
    ),
    Example("git grep|-O/--open-files-in-pager[=]", "git grep -Otn-marker alpha"),
    Example(
        "git filter-branch|--env-filter=",
        "FILTER_BRANCH_SQUELCH_WARNING=1 git filter-branch -f --env-filter tn-marker HEAD",
    ),
    Example("git fetch|--upload-pack=", "git ls-remote --upload-pack=tn-marker ."),
    Example("git fetch|--upload-pack=", "git fetch -q --upload-pack tn-marker ."),
    Example("git|ext::*", "git -c protocol.ext.allow=always ls-remote 'ext::sh -c tn-marker'"),
    Example(
        "git|--exec-path[=]",
        "mkdir -p x; ln -sf $(command -v tn-marker) x/git-tnx; git --exec-path=$PWD/x tnx",
    ),
    Example("git|core.pager", "git -c core.pager=tn-marker -p log", tty=True),
    Example("git|core.pager", "git -c core.fsmonitor=tn-marker status"),
    Example("git|core.pager", "echo b >> a.txt; git -c diff.external=tn-marker diff"),
    Example("git|core.pager", "git -c core.sshCommand=tn-marker ls-remote x:y"),
    Example("git|core.pager", "git -c core.editor=tn-marker commit --allow-empty"),
    Example("git|core.pager", "git -c sequence.editor=tn-marker rebase -i HEAD"),
    Example(
        "git|core.pager",
        "git -c credential.helper='!tn-marker' credential fill <<< $'protocol=https\\nhost=x\\n'",
    ),
    Example("git|core.pager", "git -c gpg.program=tn-marker commit -q -S --allow-empty -m s"),
    Example(
        "git|core.pager",
        "git -c core.askPass=tn-marker ls-remote http://127.0.0.1:{port}/x",
        http=True,
    ),
    Example("git|core.pager", "TNP=tn-marker git --config-env=core.pager=TNP -p log", tty=True),
    Example("git|core.pager", "git config core.pager tn-marker; git -p log", tty=True),
    Example("git|alias.*", "git -c alias.x='!tn-marker' x"),
    Example("git|alias.*", "git config alias.x '!tn-marker'; git x"),
    Example(
        "git|core.hooksPath",
        "mkdir -p h; ln -sf $(command -v tn-marker) h/pre-commit; "
        "git -c core.hooksPath=$PWD/h commit -q --allow-empty -m x",
    ),
    Example(
        "git|core.hooksPath",
        "printf '[core]\\npager = tn-marker\\n' > inc; git -c include.path=$PWD/inc -p log",
        tty=True,
    ),
]


def _key(entry: Evaluator) -> str:
    """`program|first name`, the program being the first one the entry lists."""
    words = entry.program.split()
    program = " ".join(words[:2]) if words[0] == "git" and len(words) > 1 else words[0]
    return f"{program}|{entry.names[0]}"


def test_every_entry_of_the_list_has_an_example() -> None:
    from toolnexus.shell.evaluators import ENTRIES

    keys = {_key(e) for e in ENTRIES}
    assert len(keys) == len(ENTRIES), "two entries share a program and first name"
    assert keys == {e.entry for e in EXAMPLES}
    assert all(e.doc for e in ENTRIES)


# --- running each example --------------------------------------------------------------------


class _AskForPassword(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="x"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def password_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AskForPassword)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


SETUP = "git init -q -b main && echo alpha > a.txt && git add a.txt && git commit -qm one"
"""Run inside the sandbox before each example: a repository made before the sandbox starts
would be read-only in it (`protected_git_paths`), and some examples commit."""


def _workspace(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """The workspace, its marker file and the environment: `.bin` (first on PATH) holds the
    marker program."""
    ws = tmp_path / "ws"
    ws.mkdir()
    mark = ws / ".ran"
    bin_dir = ws / ".bin"
    bin_dir.mkdir()
    marker = bin_dir / MARKER
    marker.write_text(f"#!/bin/sh\ntouch {mark}\ncat >/dev/null 2>&1 </dev/null\n")
    marker.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(ws),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return ws, mark, env


async def _run(command: str, tmp_path: Path, *, tty: bool, network: bool) -> tuple[bool, str]:
    """Run `command` with bash in the sandbox; (whether the marker ran, the output)."""
    ws, mark, env = _workspace(tmp_path)
    argv = ["bash", "-c", f"{SETUP} || exit 99\n{command}"]
    if tty:
        argv = ["script", "-qec", shlex.join(argv), "/dev/null"]
    # `script` opens a pseudo-terminal: Landlock confines /dev like the rest
    writable = ("/dev/ptmx", "/dev/pts") if tty and detect().best == "landlock" else ()
    policy = SandboxPolicy(
        filesystem="workspace-write", network=network, env_set=env, writable=writable
    )
    result = await run_process(
        argv, cwd=ws, timeout=30, max_output=20_000, sandbox=policy, workspace=ws
    )
    return mark.exists(), result.stdout + result.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.run], ids=lambda e: e.command)
async def test_the_reading_is_real(
    example: Example, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    command = example.command
    if example.http:
        port = request.getfixturevalue("password_server")
        command = command.replace("{port}", str(port))
    ran, output = await _run(command, tmp_path, tty=example.tty, network=example.http)
    assert ran, f"{command!r} did not run the marker:\n{output}"


# --- the analysis ----------------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.command)
def test_deny_and_ask_read_it_and_it_is_never_known_safe(example: Example) -> None:
    command = example.command.replace("{port}", "8080")
    assert denied_every_way(DENY, command)
    assert not is_known_safe_command(command)


# --- end to end: the builtin shell with a deny rule refuses, and nothing runs -----------------

ISSUE_CASES = [
    "/proc/self/exe -c 'tn-marker now'",
    "/proc/thread-self/exe -c 'true; tn-marker now'",
    "history -s 'tn-marker now'; fc -e -",
    "git -c core.sshCommand=tn-marker ls-remote x:y",
    "echo b >> a.txt; git -c diff.external=tn-marker diff",
    "export GIT_EXTERNAL_DIFF=tn-marker; echo b >> a.txt; git diff",
    "echo a | sed '1e tn-marker'",
    "echo a | sed 's/a/tn-marker/e'",
]


@pytest.mark.parametrize("command", ISSUE_CASES)
def test_builtin_shell_with_a_deny_rule_refuses_and_runs_nothing(
    command: str, tmp_path: Path
) -> None:
    ws, mark, env = _workspace(tmp_path)
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        "version: 1\n"
        "builtins:\n"
        "  shell:\n"
        "    default_approval: allow\n"
        "    approval:\n"
        "      rules:\n"
        f"        - {{decision: deny, when: {{command: {{command: '{DENY}'}}}}}}\n"
    )
    subprocess.run(SETUP, shell=True, cwd=ws, env=env, check=True)
    with create_toolkit(manifest, workspace=ws) as tk:
        assert tk.check("shell", {"command": command}).decision is Decision.DENY
        path = f"PATH={env['PATH']}; HOME={ws}; "
        result = tk.execute("shell", {"command": path + command})
        assert result.is_error, result.content
    assert not mark.exists()


def test_without_the_rule_the_builtin_shell_does_run_them(tmp_path: Path) -> None:
    """The end-to-end refusals above prove something only if the commands would run."""
    for i, command in enumerate(ISSUE_CASES):
        (tmp_path / str(i)).mkdir()
        ws, mark, env = _workspace(tmp_path / str(i))
        manifest = tmp_path / str(i) / "tools.yaml"
        manifest.write_text("version: 1\nbuiltins:\n  shell:\n    default_approval: allow\n")
        subprocess.run(SETUP, shell=True, cwd=ws, env=env, check=True)
        with create_toolkit(manifest, workspace=ws) as tk:
            path = f"PATH={env['PATH']}; HOME={ws}; "
            result = tk.execute("shell", {"command": path + command})
        assert mark.exists(), f"{command}: {result.content}"


SHELL_PATHS = [
    "/proc/self/exe -c 'tn-marker now'",
    "/proc/thread-self/exe -c 'tn-marker now'",
    "/proc/$$/exe -c 'tn-marker now'",
    "/proc/1/task/1/exe -c 'tn-marker now'",
    "exec 3</bin/bash; /dev/fd/3 -c 'tn-marker now'",
    "ln -s /bin/bash x; ./x -c 'tn-marker now'",
    "cp /bin/bash /tmp/b; /tmp/b -c 'tn-marker now'",
    "rbash -c 'tn-marker now'",
    "/usr/bin/sh -c 'tn-marker now'",
    "bash5.2 -c 'tn-marker now'",
    "exec -a ls bash -c 'tn-marker now'",
    "env -i bash -c 'tn-marker now'",
    "PATH=.:$PATH ls -c 'tn-marker now'",
    "hash -p /bin/bash ls; ls -c 'tn-marker now'",
    "echo 'tn-marker now' | /proc/self/exe",
]


@pytest.mark.parametrize("command", SHELL_PATHS)
def test_a_shell_by_any_path_is_read_as_one(command: str) -> None:
    """A deny on the shell itself, and on what its script runs, match whatever path names it."""
    assert denied_every_way("tn-marker now", command)
    assert denied_every_way("bash *", command)
    assert denied_every_way("sh -c *", command)
