"""Every rule applies to something, or the manifest does not load.

Claude Code's tool names (`Bash`, `Read`, `Edit`, `MultiEdit`, `Write`, `Glob`, `Grep`,
`WebFetch`, `mcp__server`, `mcp__server__tool`, `mcp__server__*`) mean the builtin and MCP
tools they mean in Claude Code, checked with real calls; a rule, include filter or override
that names nothing, and hand-written `parameters:` that are not a schema, are located errors
with a fix; `toolnexus validate` reports every problem of a file at once. Each case passed
`validate` with "ok" before, and the call then ran.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolnexus import create_toolkit
from toolnexus.errors import ManifestError

from .conftest import FIXTURES

SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("srv", version="1.0")


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return f"srv: {text}"


@server.tool()
def stamp(label: str) -> str:
    """Stamp a label."""
    return f"stamped {label}"


if __name__ == "__main__":
    server.run()
'''


def write(folder: Path, text: str, name: str = "tools.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def server_script(folder: Path) -> Path:
    """The MCP server `srv` (tools `echo` and `stamp`) as a script in `folder`."""
    script = folder / "srv.py"
    script.write_text(textwrap.dedent(SERVER).lstrip())
    return script


def mcp_json(folder: Path) -> Path:
    script = server_script(folder)
    path = folder / ".mcp.json"
    path.write_text(
        json.dumps({"mcpServers": {"srv": {"command": sys.executable, "args": [str(script)]}}})
    )
    return path


def validate(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`toolnexus validate` as a user runs it: a separate process."""
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", "validate", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


# -- Claude Code's names ---------------------------------------------------------------------


def test_bash_rule_denies_rm_through_the_builtin_shell(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [shell]
        permissions:
          allow: [shell]
          deny: ["Bash(rm *)"]
        """,
    )
    with create_toolkit(path) as tk:
        denied = tk.execute("shell", {"command": "rm -rf x"})
        assert denied.is_error and "deny Bash(rm *)" in denied.content
        assert (tmp_path / "x").is_dir()
        ran = tk.execute("shell", {"command": "echo fine"})
        assert not ran.is_error and "fine" in ran.content


def test_bash_param_rule_names_the_shells_own_argument(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [shell]
        permissions:
          allow: [shell]
          deny: ["Bash(run_in_background:true)"]
        """,
    )
    with create_toolkit(path) as tk:
        denied = tk.execute("shell", {"command": "echo hi", "run_in_background": True})
        assert denied.is_error and "run_in_background" in denied.content


def test_edit_rule_covers_every_tool_that_edits_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "a.txt").write_text("one\n")
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [read, write, edit, apply_patch]
        permissions:
          allow: [read, write, edit, apply_patch]
          deny: ["Edit(secret/**)"]
        """,
    )
    patch = "*** Begin Patch\n*** Add File: secret/b.txt\n+two\n*** End Patch"
    moved = (
        "*** Begin Patch\n*** Update File: open.txt\n*** Move to: secret/c.txt\n@@\n-o\n+p\n"
        "*** End Patch"
    )
    (tmp_path / "open.txt").write_text("o\n")
    with create_toolkit(path) as tk:
        tk.execute("read", {"path": "secret/a.txt"})
        for name, args in (
            ("write", {"path": "secret/a.txt", "content": "x"}),
            ("edit", {"path": "secret/a.txt", "old_string": "one", "new_string": "x"}),
            ("apply_patch", {"patch": patch}),
            ("apply_patch", {"patch": moved}),
            ("apply_patch", {"patch": "not a patch, so no path can be read"}),
        ):
            result = tk.execute(name, args)
            assert result.is_error and "deny Edit(secret/**)" in result.content, (name, result)
        assert (secret / "a.txt").read_text() == "one\n"
        assert not (secret / "b.txt").exists() and not (secret / "c.txt").exists()
        ok = tk.execute("apply_patch", {"patch": patch.replace("secret/b.txt", "b.txt")})
        assert not ok.is_error, ok.content
        assert (tmp_path / "b.txt").read_text() == "two\n"


def test_an_edit_allow_needs_every_path_of_a_patch(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        defaults: {approval: ask}
        builtins: [apply_patch]
        permissions:
          allow: ["Edit(src/**)"]
        """,
    )
    both = "*** Begin Patch\n*** Add File: src/a\n+a\n*** Add File: b\n+b\n*** End Patch"
    with create_toolkit(path) as tk:
        assert tk.check("apply_patch", {"patch": both}).decision.value == "ask"
        inside = both.replace("File: b", "File: src/b")
        assert tk.check("apply_patch", {"patch": inside}).decision.value == "allow"


def test_multiedit_rule_is_the_edit_tool(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [edit]
        permissions:
          allow: [edit]
          deny: ["MultiEdit(a.txt)"]
        """,
    )
    with create_toolkit(path) as tk:
        edits = [{"old_string": "one", "new_string": "two"}]
        denied = tk.execute("edit", {"path": "a.txt", "edits": edits})
        assert denied.is_error and "MultiEdit(a.txt)" in denied.content
    assert (tmp_path / "a.txt").read_text() == "one\n"


def test_webfetch_domain_rule_denies_the_fetch_tool(tmp_path: Path, http_server: object) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [fetch]
        permissions:
          allow: [fetch]
          deny: ["WebFetch(domain:127.0.0.1)"]
        """,
    )
    with create_toolkit(path) as tk:
        url = f"{http_server.url}/json"  # type: ignore[attr-defined]
        denied = tk.execute("fetch", {"url": url})
        assert denied.is_error and "deny WebFetch(domain:127.0.0.1)" in denied.content


@pytest.mark.parametrize(
    ("rule", "tool", "args"),
    [
        ("Read(secret.txt)", "read", {"path": "secret.txt"}),
        ("Write(secret.txt)", "write", {"path": "secret.txt", "content": "x"}),
        ("Glob(secret)", "glob", {"pattern": "*", "path": "secret"}),
        ("Grep(secret)", "grep", {"pattern": "x", "path": "secret"}),
    ],
)
def test_read_write_glob_grep_rules_name_the_builtins(
    tmp_path: Path, rule: str, tool: str, args: dict[str, object]
) -> None:
    (tmp_path / "secret.txt").write_text("s\n")
    (tmp_path / "secret").mkdir()
    path = write(
        tmp_path,
        f"""
        version: 1
        builtins: [read, write, glob, grep]
        permissions:
          deny: ["{rule}"]
        """,
    )
    with create_toolkit(path) as tk:
        denied = tk.execute(tool, args)
        assert denied.is_error and f"deny {rule}" in denied.content
    assert (tmp_path / "secret.txt").read_text() == "s\n"


@pytest.mark.parametrize("rule", ["mcp__srv", "mcp__srv__*", "mcp__srv__echo", "mcp__*"])
def test_mcp_rules_match_a_mcp_json_servers_bare_tool_names(tmp_path: Path, rule: str) -> None:
    mcp_json(tmp_path)
    path = write(
        tmp_path,
        f"""
        version: 1
        mcp_servers:
          from: .mcp.json
        permissions:
          deny: ["{rule}"]
        """,
    )
    with create_toolkit(path) as tk:
        assert "echo" not in tk.names()  # a bare deny hides the tool, as in Claude Code
        denied = tk.execute("echo", {"text": "hi"})
        assert denied.is_error and "srv: hi" not in denied.content
        assert ("stamp" in tk.names()) is (rule == "mcp__srv__echo")


def test_mcp_rule_with_a_specifier_and_a_manifest_servers_prefix(tmp_path: Path) -> None:
    script = server_script(tmp_path)
    path = write(
        tmp_path,
        f"""
        version: 1
        mcp_servers:
          srv:
            command: {sys.executable}
            args: ["{script}"]
            prefix: s_
        permissions:
          ask: ["mcp__srv__stamp(label:secret*)"]
          deny: ["mcp__srv__echo(text:rm*)"]
        """,
    )
    with create_toolkit(path) as tk:
        assert tk.names() == ["s_echo", "s_stamp"]
        assert tk.check("s_echo", {"text": "rm -rf /"}).decision.value == "deny"
        assert tk.check("s_echo", {"text": "hello"}).decision.value == "allow"
        assert tk.check("s_stamp", {"label": "secret plan"}).decision.value == "ask"


def test_an_mcp_allow_needs_the_server_name_as_in_claude_code(tmp_path: Path) -> None:
    mcp_json(tmp_path)
    path = write(
        tmp_path,
        """
        version: 1
        mcp_servers:
          from: .mcp.json
        permissions:
          allow: ["mcp__*"]
        """,
    )
    with pytest.raises(ManifestError) as caught:
        create_toolkit(path)
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.column) == (str(path), 5, 11)
    assert "mcp__<server>" in issue.message


# -- rules naming nothing --------------------------------------------------------------------


def test_a_permission_naming_no_tool_is_a_located_error_with_a_suggestion(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [shell, read]
        permissions:
          deny: ["Bahs(rm *)", "reed(**/.env)"]
        """,
    )
    result = validate(path)
    assert result.returncode == 1, result.stdout
    err = result.stderr.splitlines()
    assert any(
        line.startswith(f"{path}:4:10: permissions.deny[0]:") and "did you mean 'Bash'" in line
        for line in err
    ), err
    assert any(
        line.startswith(f"{path}:4:24: permissions.deny[1]:") and "did you mean 'read'" in line
        for line in err
    ), err


def test_a_permission_naming_no_argument_is_a_located_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [shell]
        permissions:
          deny: ["Bash(run_in_backgroud:true)"]
        """,
    )
    result = validate(path)
    assert result.returncode == 1, result.stdout
    assert f"{path}:4:10: permissions.deny[0]:" in result.stderr
    assert "did you mean 'run_in_background'" in result.stderr


def test_a_rule_for_an_mcp_tool_warns_at_build_and_fails_validate_connect(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mcp_json(tmp_path)
    path = write(
        tmp_path,
        """
        version: 1
        mcp_servers:
          from: .mcp.json
        permissions:
          deny: ["ehco(secret*)", "echo(secret*)"]
        """,
    )
    with caplog.at_level(logging.WARNING, logger="toolnexus"), create_toolkit(path) as tk:
        assert tk.check("echo", {"text": "secret"}).decision.value == "deny"
    warned = [r.getMessage() for r in caplog.records if "ehco" in r.getMessage()]
    assert warned and "did you mean 'echo'" in warned[0], caplog.records
    unconnected = validate(path)
    assert unconnected.returncode == 0, unconnected.stderr
    assert "ehco" in unconnected.stdout and "--connect" in unconnected.stdout
    connected = validate(path, "--connect")
    assert connected.returncode == 1, connected.stdout
    assert f"{path}:5:10: permissions.deny[0]:" in connected.stderr
    assert "did you mean 'echo'" in connected.stderr
    assert "echo(secret*)" not in connected.stderr
    doctor = subprocess.run(
        [sys.executable, "-m", "toolnexus", "doctor", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
        check=False,
    )
    assert doctor.returncode == 1
    assert "ehco" in doctor.stdout and "did you mean 'echo'" in doctor.stdout


def test_an_mcp_servers_approval_naming_no_argument_fails_validate_connect(
    tmp_path: Path,
) -> None:
    script = server_script(tmp_path)
    path = write(
        tmp_path,
        f"""
        version: 1
        mcp_servers:
          srv:
            command: {sys.executable}
            args: ["{script}"]
            approval:
              rules:
                - decision: deny
                  when: {{txt: {{glob: "rm*"}}}}
        """,
    )
    connected = validate(path, "--connect")
    assert connected.returncode == 1, connected.stdout
    assert f"{path}:9:23: mcp_servers.srv.approval.rules[0].when.txt:" in connected.stderr
    assert "did you mean 'text'" in connected.stderr


# -- include filters and overrides naming nothing --------------------------------------------


INCLUDED = """
version: 1
tools:
  - name: purge
    command: [echo, purge]
  - name: deploy
    command: [echo, deploy]
  - name: ticket
    command: [echo, ticket]
"""


@pytest.mark.parametrize(
    ("options", "field", "hint"),
    [
        ("exclude: [purg]", "include[0].exclude[0]", "did you mean 'purge'"),
        ("only: [tiket]", "include[0].only[0]", "did you mean 'ticket'"),
        ("override: {deplyo: {approval: ask}}", "include[0].override.deplyo", "'deploy'"),
    ],
)
def test_an_include_entry_matching_no_tool_is_a_located_error(
    tmp_path: Path, options: str, field: str, hint: str
) -> None:
    write(tmp_path, INCLUDED, "team.yaml")
    path = write(
        tmp_path,
        f"""
        version: 1
        include:
          - {{path: team.yaml, {options}}}
        """,
    )
    result = validate(path)
    assert result.returncode == 1, result.stdout
    (line,) = [line for line in result.stderr.splitlines() if field in line]
    assert line.startswith(f"{path}:3:") and hint in line, line


def test_an_include_entry_matching_a_built_tool_is_fine(tmp_path: Path) -> None:
    """Names that exist only once built (an OpenAPI operation, a factory's tools) count."""
    write(
        tmp_path,
        f"""
        version: 1
        tools:
          - openapi: {FIXTURES / "http" / "petstore.yaml"}
            base_url: http://127.0.0.1:9
        """,
        "api.yaml",
    )
    path = write(
        tmp_path,
        """
        version: 1
        include:
          - {path: api.yaml, exclude: [delete*]}
        """,
    )
    result = validate(path)
    assert result.returncode == 0, result.stderr


# -- hand-written parameters -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("command: [echo, hi]", "tools[0].parameters.properties.path.type"),
        ("http: {url: 'http://127.0.0.1:9/'}", "tools[0].parameters.properties.path.type"),
    ],
)
def test_hand_written_parameters_are_meta_checked(tmp_path: Path, entry: str, field: str) -> None:
    path = write(
        tmp_path,
        f"""
        version: 1
        tools:
          - name: t
            {entry}
            parameters:
              type: object
              properties:
                path: {{type: strin}}
              required: path
        """,
    )
    result = validate(path)
    assert result.returncode == 1, result.stdout
    err = result.stderr.splitlines()
    assert any(line.startswith(f"{path}:8:22: {field}:") for line in err), err
    assert any("did you mean 'string'" in line for line in err), err
    assert any(line.startswith(f"{path}:9:17: tools[0].parameters.required:") for line in err), err


# -- validate collects across stages ----------------------------------------------------------


def test_validate_reports_schema_build_and_rule_problems_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        version: 1
        builtins: [shell]
        tools:
          - name: a
            command: [echo]
            descripton: typo
          - name: b
            command: [echo, hi]
            parameters: {type: object, properties: {path: {type: strin}}}
        permissions:
          deny: ["Bahs(rm *)"]
        """,
    )
    result = validate(path)
    assert result.returncode == 1, result.stdout
    err = result.stderr.splitlines()
    assert any(line.startswith(f"{path}:6:5: tools[0].descripton:") for line in err), err
    assert any(
        line.startswith(f"{path}:9:58: tools[1].parameters.properties.path.type:") for line in err
    ), err
    assert any(line.startswith(f"{path}:11:10: permissions.deny[0]:") for line in err), err


def test_an_include_filter_over_builtins_all_is_a_located_error(tmp_path: Path) -> None:
    """`exclude: [shell]` of an include whose file loads `builtins: all` left shell in."""
    write(tmp_path, "version: 1\nbuiltins: all\n", "team.yaml")
    path = write(
        tmp_path,
        """
        version: 1
        include:
          - {path: team.yaml, exclude: [shell]}
        """,
    )
    result = validate(path)
    assert result.returncode == 1, result.stdout
    assert f"{tmp_path / 'team.yaml'}:2:11: builtins:" in result.stderr
    assert "list the builtins by name" in result.stderr
