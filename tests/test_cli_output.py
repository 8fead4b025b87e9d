"""The `toolnexus` command as a user meets it, run as a real process: its version, the tables,
colour (only on a terminal, never with NO_COLOR), `--json`, MCP servers shown as each finishes
starting (plain lines in a pipe, live lines on a pseudo-terminal), shell completion, and the
errors that name their cause."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import toolnexus
from toolnexus import create_toolkit

from .conftest import MCP_SERVERS

ROOT = Path(__file__).resolve().parents[1]
ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str = ""):
    """`toolnexus ARGS` in a child process, its stdin not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def run_on_terminal(*args: str, env: dict[str, str] | None = None) -> str:
    """`toolnexus ARGS` with a pseudo-terminal as stdout and stderr: everything it wrote."""
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolnexus", *args],
        stdin=subprocess.DEVNULL,
        stdout=child,
        stderr=child,
        env={**os.environ, **(env or {})},
    )
    os.close(child)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([main], [], [], 120)
            if not ready:
                raise AssertionError("no output for 120 s: " + b"".join(chunks).decode())
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        proc.wait(timeout=60)
        os.close(main)
    return b"".join(chunks).decode()


@pytest.fixture
def no_color_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)


def _servers_manifest(tmp_path: Path) -> Path:
    """One MCP server that starts and one whose command does not exist."""
    path = tmp_path / "tools.yaml"
    good = f"{{command: {sys.executable}, args: ['{MCP_SERVERS / 'everything.py'}']"
    good += ", tools: {include: [echo, add]}}"
    path.write_text(
        "version: 1\ntools:\n  - {name: hello, command: [echo, hi]}\nmcp_servers:\n"
        f"  good: {good}\n"
        f"  gone: {{command: {tmp_path / 'no-such-server'}, connect_timeout: 5s}}\n"
    )
    return path


# -- version -------------------------------------------------------------------------------------


def test_version_is_the_one_in_pyproject() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert toolnexus.__version__ == declared
    done = run("--version")
    assert done.returncode == 0 and done.stdout == f"toolnexus {declared}\n"


# -- tables, colour, --json ----------------------------------------------------------------------


LIST_MANIFEST = """\
version: 1
tools:
  - name: hello
    description: Say hello
    command: [echo, hello]
    read_only: true
  - name: a_much_longer_tool_name
    description: Deploy
    command: [echo, deployed]
    approval: ask
    sandbox: {filesystem: read-only, network: false}
"""


def test_list_is_an_aligned_table_and_json_flags_are_a_list(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(LIST_MANIFEST)
    done = run("list", str(path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "FLAGS", "APPROVAL", "SANDBOX"]
    assert "\x1b[" not in done.stdout  # not a terminal: no colour
    for column in ("SOURCE", "FLAGS", "APPROVAL"):
        at = lines[0].index(column)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in lines[1:]), column

    listed = json.loads(run("list", "--json", str(path)).stdout)
    flags = {t["name"]: t["flags"] for t in listed["tools"]}
    assert flags["hello"] == ["read-only", "open-world"]
    assert flags["a_much_longer_tool_name"] == ["destructive", "open-world"]


def test_colour_only_on_a_terminal_and_never_with_no_color(
    tmp_path: Path, no_color_unset: None
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(LIST_MANIFEST)
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    coloured = run_on_terminal("list", str(path), env=env)
    assert "\x1b[1mNAME" in coloured
    plain = run_on_terminal("list", str(path), env={"NO_COLOR": "1"})
    assert "NAME" in plain and "\x1b[" not in plain


def test_doctor_json_lists_the_checks_and_the_servers(tmp_path: Path) -> None:
    done = run("doctor", "--json", str(_servers_manifest(tmp_path)))
    assert done.returncode == 1  # a server does not start
    report = json.loads(done.stdout)
    names = [c["name"] for c in report["checks"]]
    assert names[:4] == ["python", "sandbox", "bwrap", "landlock"] and "ripgrep" in names
    servers = {s["name"]: s for s in report["manifest"]["servers"]}
    assert servers["good"]["state"] == "ready" and servers["good"]["tool_count"] == 2
    assert servers["gone"]["state"] == "failed" and "not found" in servers["gone"]["reason"]
    assert isinstance(servers["good"]["started_in"], float)
    assert report["manifest"]["tools"] == 3


# -- servers as they finish ----------------------------------------------------------------------


def test_validate_connect_prints_a_plain_line_per_server_with_its_time(tmp_path: Path) -> None:
    path = _servers_manifest(tmp_path)
    done = run("validate", "--connect", str(path))
    assert done.returncode == 1
    lines = [line for line in done.stdout.splitlines() if line.lstrip().startswith("mcp ")]
    assert len(lines) == 2  # each once: as it finished, not again in a table afterwards
    by_name = {line.split()[1]: line for line in lines}
    assert re.fullmatch(r"  mcp good +ok +\d+\.\ds  2 tools", by_name["good"])
    assert re.fullmatch(r"  mcp gone +failed +\d+\.\ds  command .* not found.*", by_name["gone"])
    assert "starting" not in done.stdout and "\x1b[" not in done.stdout
    # Both columns line up, whatever the order the servers finished in.
    assert len({line.index(line.split()[2]) for line in lines}) == 1


def test_doctor_on_a_terminal_rewrites_each_servers_line_when_it_finishes(
    tmp_path: Path,
) -> None:
    shown = run_on_terminal("doctor", str(_servers_manifest(tmp_path)), env={"NO_COLOR": "1"})
    assert "mcp good" in shown and "starting…" in shown  # a line per server as it starts
    assert "\x1b[" in shown and "A\r\x1b[K" in shown  # ...rewritten in place
    final = ESCAPE.sub("", shown)
    assert re.search(r"mcp good +ok +\d+\.\ds  2 tools", final)
    assert re.search(r"mcp gone +failed +\d+\.\ds", final)


# -- completion ----------------------------------------------------------------------------------


def _bash_complete(script: str, *words: str) -> list[str]:
    probe = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n_toolnexus\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.split()


def test_bash_completion_is_valid_and_completes_commands_flags_and_choices(
    tmp_path: Path,
) -> None:
    done = run("completion", "bash")
    assert done.returncode == 0
    script = done.stdout
    (tmp_path / "c.sh").write_text(script)
    subprocess.run(["bash", "-n", str(tmp_path / "c.sh")], check=True, timeout=30)
    assert _bash_complete(script, "toolnexus", "va") == ["validate"]
    assert set(_bash_complete(script, "toolnexus", "")) >= {"list", "doctor", "completion"}
    assert _bash_complete(script, "toolnexus", "doctor", "--j") == ["--json"]
    assert _bash_complete(script, "toolnexus", "install", "--dry") == ["--dry-run"]
    assert "claude-code" in _bash_complete(script, "toolnexus", "install", "cla")


def _shell_or_skip(shell: str) -> str:
    found = shutil.which(shell)
    if found is None:
        pytest.skip(f"{shell} is not installed here (.ci/run installs it): its script is untested")
    return found


def test_zsh_completion_parses_and_registers_for_toolnexus(tmp_path: Path) -> None:
    done = run("completion", "zsh")
    assert done.returncode == 0 and "validate" in done.stdout
    zsh = _shell_or_skip("zsh")
    (tmp_path / "_toolnexus").write_text(done.stdout)
    subprocess.run([zsh, "-n", str(tmp_path / "_toolnexus")], check=True, timeout=30)
    # Installed as the docs say (a file `_toolnexus` on $fpath), compinit binds it to toolnexus.
    probe = f"fpath=({tmp_path} $fpath); autoload -U compinit; compinit -u -D; "
    probe += "print -r -- $_comps[toolnexus]"
    bound = subprocess.run(
        [zsh, "-f", "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    assert bound.stdout.strip() == "_toolnexus"


def _fish_complete(fish: str, script: Path, line: str) -> list[str]:
    probe = f"source {script}; complete -C {shlex.quote(line)}"
    done = subprocess.run(
        [fish, "--no-config", "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    return [row.split("\t")[0] for row in done.stdout.splitlines()]


def test_fish_completion_parses_and_completes_commands_flags_and_choices(tmp_path: Path) -> None:
    done = run("completion", "fish")
    assert done.returncode == 0 and "validate" in done.stdout
    fish = _shell_or_skip("fish")
    script = tmp_path / "toolnexus.fish"
    script.write_text(done.stdout)
    subprocess.run([fish, "--no-execute", str(script)], check=True, timeout=30)
    assert _fish_complete(fish, script, "toolnexus va") == ["validate"]
    assert set(_fish_complete(fish, script, "toolnexus ")) >= {"list", "doctor", "completion"}
    assert _fish_complete(fish, script, "toolnexus doctor --j") == ["--json"]
    assert "claude-code" in _fish_complete(fish, script, "toolnexus install cla")


def test_completion_of_an_unknown_shell_is_a_usage_error() -> None:
    done = run("completion", "tcsh")
    assert done.returncode == 2 and "invalid choice" in done.stderr


# -- errors that name their cause ----------------------------------------------------------------


def test_call_without_a_terminal_says_so_once_and_nobody_declined(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(LIST_MANIFEST)
    done = run("call", str(path), "a_much_longer_tool_name")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("no terminal to ask") == 1, done.stderr
    assert "pass --yes" in done.stderr and "declined" not in done.stderr


def test_an_unknown_tool_names_the_mcp_server_that_did_not_start(tmp_path: Path) -> None:
    with create_toolkit(_servers_manifest(tmp_path)) as toolkit:
        result = toolkit.execute("read_file", {})
        assert result.is_error
        assert "unknown tool 'read_file'" in result.content
        assert "MCP server 'gone' is failed: command" in result.content
        assert "not found" in result.content and "its tools are missing" in result.content
        assert "'good'" not in result.content  # a server that runs is not blamed
    done = run("call", str(_servers_manifest(tmp_path)), "read_file")
    assert done.returncode == 1 and "MCP server 'gone' is failed" in done.stderr


def test_an_unknown_tool_with_every_server_up_says_nothing_of_servers(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    good = f"{{command: {sys.executable}, args: ['{MCP_SERVERS / 'everything.py'}']}}"
    path.write_text(f"version: 1\nmcp_servers:\n  good: {good}\n")
    with create_toolkit(path) as toolkit:
        content = toolkit.execute("no_such_tool_at_all", {}).content
    assert content.startswith("unknown tool 'no_such_tool_at_all'") and "MCP server" not in content


def _installed_without_its_manifest(site: Path) -> None:
    """A package installed the way a wheel built without package data installs it: the module
    and its metadata (with the entry point), and no tools.yaml."""
    (site / "forgot_tools").mkdir(parents=True)
    (site / "forgot_tools" / "__init__.py").write_text('MANIFEST = "tools.yaml"\n')
    info = site / "forgot_tools-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: forgot-tools\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[toolnexus.toolsets]\nforgot = forgot_tools:MANIFEST\n")


@pytest.mark.parametrize("ref", ["toolset:forgot", "package:forgot_tools/tools.yaml"])
def test_a_manifest_missing_from_its_package_says_how_to_ship_it(tmp_path: Path, ref: str) -> None:
    site = tmp_path / "site"
    _installed_without_its_manifest(site)
    path = tmp_path / "tools.yaml"
    path.write_text(f"version: 1\ninclude: ['{ref}']\n")
    pythonpath = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    done = run("validate", str(path), env={"PYTHONPATH": pythonpath})
    assert done.returncode == 1
    assert "missing from the installed package" in done.stderr, done.stderr
    assert '[tool.setuptools.package-data]` `forgot_tools = ["tools.yaml"]`' in done.stderr
    assert f"{path}:2:" in done.stderr  # located at the include


def test_validate_json_is_a_list_of_reports(tmp_path: Path) -> None:
    good = tmp_path / "tools.yaml"
    good.write_text(LIST_MANIFEST)
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntools:\n  - {name: x, comand: [echo]}\n")
    done = run("validate", "--json", str(good), str(bad))
    assert done.returncode == 1
    reports = json.loads(done.stdout)
    assert [r["ok"] for r in reports] == [True, False]
    assert sorted(reports[0]["tools"]) == ["a_much_longer_tool_name", "hello"]
    assert any(f"{bad}:3:" in issue for issue in reports[1]["issues"]), reports[1]

    connected = json.loads(
        run("validate", "--json", "--connect", str(_servers_manifest(tmp_path))).stdout
    )
    (report,) = connected
    assert report["ok"] is False
    assert {s["name"]: s["state"] for s in report["servers"]} == {"good": "ready", "gone": "failed"}
