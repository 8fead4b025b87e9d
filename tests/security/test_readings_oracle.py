"""The readings oracle: commands generated from the reading list (`toolnexus/shell/evaluators.py`:
each option, builtin, configuration key, variable and shell spelling, with the marker program as
the string it evaluates, spelled in the ways its parser takes it, behind wrappers, next to
read-only commands). Two properties:

- a deny rule on the marker matches every generated command that hands it the marker (`tn-marker
  *`), and an allow rule for the read-only part never covers it;
- every command the analysis calls known-safe is RUN, by bash, in a throwaway sandbox
  (toolnexus' own, read-only, network off, over a git repository in tmp_path) and must not run
  the marker: it would print a token and leave a file.

Run under bwrap and again with `TOOLNEXUS_SANDBOX_DISABLE=bwrap` (Landlock).
"""

from __future__ import annotations

import asyncio
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
from toolnexus.runtime.process import run_process
from toolnexus.runtime.sandbox import SandboxPolicy, detect
from toolnexus.shell import command_matches, compile_command_pattern
from toolnexus.shell.evaluators import ENTRIES, Evaluator, Reading, Source

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "toolnexus-hypothesis")

MARKER = "tn-marker"
TOKEN = "TN-MARKER-RAN"
DENY = compile_command_pattern(f"{MARKER} *")


@dataclass
class Sandbox:
    ws: Path
    mark: Path
    env: dict[str, str]

    def run(self, command: str) -> tuple[bool, str]:
        """Run `command` read-only; (whether the marker ran, the output)."""
        policy = SandboxPolicy(filesystem="read-only", network=False, env_set=self.env)
        result = asyncio.run(
            run_process(
                ["bash", "-c", command],
                cwd=self.ws,
                timeout=20,
                max_output=20_000,
                sandbox=policy,
                workspace=self.ws,
            )
        )
        output = result.stdout + result.stderr
        return TOKEN in output or self.mark.exists(), output


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    if detect().best == "none":
        pytest.skip("no sandbox mechanism works here")
    root = tmp_path_factory.mktemp("readings")
    ws = root / "ws"
    ws.mkdir()
    bin_dir = root / "bin"
    bin_dir.mkdir()
    mark = root / "ran"
    marker = bin_dir / MARKER
    marker.write_text(f"#!/bin/sh\necho {TOKEN}\necho {TOKEN} >&2\ntouch {mark}\n")
    marker.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(ws),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        **GIT_SAFETY_ENV,
    }
    setup = (
        "git init -q -b main && printf 'alpha\\nbeta\\n' > a.txt && git add a.txt && "
        "git -c user.name=t -c user.email=t@t commit -qm one && echo gamma >> a.txt"
    )
    subprocess.run(setup, shell=True, cwd=ws, env=env, check=True)
    yield Sandbox(ws, mark, env)


def test_the_oracle_sees_the_marker(sandbox: Sandbox) -> None:
    """Not vacuous: the marker is seen when it runs, read-only or not."""
    ran, output = sandbox.run(f"{MARKER}")
    assert ran, output
    ran, output = sandbox.run("git log --oneline")
    assert not ran and "one" in output


# --- generating commands from the list ---------------------------------------------------------

_QUOTES = ["{}", "'{}'", '"{}"', "\\{}"]
WRAPPERS = ["", "", "", "env ", "timeout 5 ", "nice -n 1 ", "nohup ", "command ", "exec -a x "]
SAFE = [
    "git log --oneline", "git status --short", "git diff", "git show HEAD", "sed -n 1p a.txt",
    "rg -n alpha", "sort a.txt", "ls -la", "git grep -n alpha", "git -P log -1", "cat a.txt",
]  # fmt: skip
"""Read-only commands: the known-safe lines that the oracle runs."""
SUBS = ["log -1", "-p log -1", "diff", "status", "show", "grep alpha", "ls-remote x:y"]


def _instance(name: str) -> str:
    """A configuration key or variable name with its `*` filled in."""
    return name.replace("*", "x").replace("<n>", "0")


def _value(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(_QUOTES)).format(MARKER)


def _option(draw: st.DrawFn, entry: Evaluator) -> str:
    option = draw(st.sampled_from(entry.options))
    name = draw(st.sampled_from(option.names))
    value = _value(draw)
    if entry.prefix:
        value = ("exec=" if "exec" in entry.prefix else "ProxyCommand=") + MARKER
    if name == "+":
        return f"'+!{MARKER}'"
    if name.startswith("--"):
        if draw(st.booleans()) and len(name) > 5:
            name = name[: draw(st.integers(4, len(name)))]  # getopt abbreviation
        return f"{name}={value}" if draw(st.booleans()) else f"{name} {value}"
    return f"{name}{value}" if draw(st.booleans()) and len(name) == 2 else f"{name} {value}"


@st.composite
def readings(draw: st.DrawFn) -> str:
    """One command that hands the marker to an entry of the list."""
    entry: Evaluator = draw(st.sampled_from(ENTRIES))
    program = entry.program.split()
    if entry.source is Source.CONFIG:
        key = _instance(draw(st.sampled_from(entry.names)))
        if key.lower().startswith(("alias.", "credential.")):
            value = f"'!{MARKER}'"
        else:
            value = _value(draw)
        form = draw(st.sampled_from(["-c", "config", "env"]))
        sub = draw(st.sampled_from(SUBS))
        if form == "-c":
            return f"git -c {key}={value} {sub}"
        if form == "config":
            return f"git config {key} {value}; git {sub}"
        return f"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0={key} GIT_CONFIG_VALUE_0={value} git {sub}"
    if entry.source is Source.ENV:
        name = _instance(draw(st.sampled_from(entry.names)))
        value = f"'$({MARKER})'" if entry.reading is Reading.EXPANDED else _value(draw)
        if entry.reading in (Reading.FILE, Reading.KEY):
            value = "./cfg"
        if entry.reading is Reading.RESOLVE:
            return f"PATH=./x:$PATH ls -c {MARKER}"
        safe = draw(st.sampled_from(SAFE))
        if draw(st.booleans()):
            return f"{name}={value} {safe}"
        return f"export {name}={value}; {safe}"
    if entry.source is Source.NAME:
        name = draw(st.sampled_from(entry.names))
        spelled = {"./*": "./x", "../*": "../x", "/tmp/*": "/tmp/x", "~/*": "~/x"}.get(name)
        if spelled is None:
            spelled = name.replace("*", draw(st.sampled_from(["self", "thread-self", "1", "3"])))
        return f"{spelled} -c {_value(draw)}"
    if entry.source is Source.BUILTIN:
        return {
            "hash": f"hash -p /bin/bash ls; ls -c {MARKER}",
            "enable": f"enable -f ./{MARKER}.so x",
            "fc": f"history -s {MARKER}; fc -e -",
            "history": f"history -s {_value(draw)}; fc -s",
            "set": f"set -H -o history; {MARKER}; !!",
            "eval": f"eval {_value(draw)}",
            "trap": f"trap {_value(draw)} EXIT",
            "source": f"source /dev/stdin <<< {MARKER}",
            "compgen": f"compgen -C {_value(draw)} x",
            "mapfile": f"mapfile -C {_value(draw)} -c 1 a <<< x",
            "bind": f"bind -x '\"\\C-t\": {MARKER}'",
            "alias": f"alias t={MARKER}",
            "command": f"command {MARKER}",
        }[entry.names[0]]
    if entry.source is Source.OPERAND:
        head = program[0] if program[0] != "git" else " ".join(program[:2])
        if head in ("awk", "mawk"):
            return f"{head} 'BEGIN {{ system(\"{MARKER}\") }}'"
        if head == "sed":
            script = draw(st.sampled_from([f"1e {MARKER}", f"s/.*/{MARKER}/e", f"$e {MARKER}"]))
            return f"sed -n {draw(st.sampled_from(_QUOTES)).format(script)} a.txt"
        if head == "git":
            return f"git ls-remote 'ext::sh -c {MARKER}'"
        if head.startswith("git "):
            return f"{head} {entry.names[0]} {MARKER}"
        return f"{draw(st.sampled_from(program))} {MARKER}"
    head = program[0] if program[0] != "git" or len(program) == 1 else " ".join(program[:2])
    return f"{head} {_option(draw, entry)} a.txt"


@st.composite
def commands(draw: st.DrawFn) -> tuple[str, bool]:
    """(a command line, whether it hands the marker to something that may run it)."""
    parts = draw(st.lists(st.booleans(), min_size=1, max_size=2))
    line: list[str] = []
    for evaluates in parts:
        if evaluates:
            line.append(draw(st.sampled_from(WRAPPERS)) + draw(readings()))
        else:
            line.append(draw(st.sampled_from(SAFE)))
    return draw(st.sampled_from([" ; ", " && ", " | "])).join(line), any(parts)


RAN: list[str] = []


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
    database=None,
)
@given(generated=commands())
def test_what_the_list_evaluates_is_denied_and_what_is_known_safe_runs_nothing(
    sandbox: Sandbox, generated: tuple[str, bool]
) -> None:
    command, evaluates = generated
    if evaluates:
        assert command_matches(command, [DENY], strict=False), command
        assert not is_known_safe_command(command), command
    if is_known_safe_command(command):
        RAN.append(command)
        ran, output = sandbox.run(command)
        assert not ran, f"{command!r} ran the marker:\n{output}"


def test_the_generator_ran_known_safe_commands() -> None:
    """Not vacuous: known-safe commands were generated and run."""
    if not RAN:
        pytest.skip("the oracle test did not run in this session (deselected or skipped)")
    assert len(RAN) >= 20, RAN
