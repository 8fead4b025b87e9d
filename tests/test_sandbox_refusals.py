"""A sandboxed MCP server that fails on a path its policy keeps from it: the status says the
sandbox did it, which policy, and the manifest key that would allow it. Run under bwrap and
under Landlock. The usual case: a server that writes its data file beside itself (as
server-memory writes memory.jsonl next to its code)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from toolnexus import create_toolkit

from .conftest import only_mechanism

SERVER = '''
"""An MCP server that keeps its data beside its own file, as server-memory does."""
from pathlib import Path

from mcp.server.mcpserver import MCPServer

DATA = Path(__file__).with_name("memory.jsonl")
DATA.write_text("")  # at start-up: refused by the sandbox when this folder is not writable

server = MCPServer("memory")


@server.tool()
def remember(text: str) -> str:
    """Remember a line."""
    with DATA.open("a") as f:
        f.write(text + "\\n")
    return "ok"


server.run()
'''


def _manifest(tmp_path: Path, sandbox: str) -> tuple[Path, Path]:
    code = tmp_path / "server"
    code.mkdir()
    (code / "memory_server.py").write_text(textwrap.dedent(SERVER))
    workspace = tmp_path / "work"
    workspace.mkdir()
    manifest = workspace / "tools.yaml"
    manifest.write_text(
        "version: 1\nmcp_servers:\n"
        f"  memory: {{command: {sys.executable}, args: ['{code / 'memory_server.py'}'], "
        f"sandbox: {sandbox}, connect_timeout: 60}}\n"
    )
    return manifest, code


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_a_server_writing_beside_itself_is_told_the_sandbox_refused_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    only_mechanism(mechanism, monkeypatch)
    manifest, code = _manifest(tmp_path, "{filesystem: workspace-write}")
    with create_toolkit(manifest) as toolkit:
        status = toolkit.status()["memory"]
    assert status["state"] == "failed"
    reason = status["reason"]
    assert "memory.jsonl" in reason  # the server's own error, quoted
    assert "the sandbox (filesystem: workspace-write) does not let it write" in reason, reason
    assert f"add `writable: [{code.resolve()}]`" in reason


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_a_read_only_sandbox_names_the_mode_to_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    only_mechanism(mechanism, monkeypatch)
    manifest, _ = _manifest(tmp_path, "{filesystem: read-only}")
    with create_toolkit(manifest) as toolkit:
        reason = toolkit.status()["memory"]["reason"]
    assert "filesystem: read-only" in reason and "`filesystem: workspace-write`" in reason


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_the_writable_key_the_hint_names_does_allow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    only_mechanism(mechanism, monkeypatch)
    manifest, code = _manifest(tmp_path, "{filesystem: workspace-write}")
    text = manifest.read_text().replace(
        "sandbox: {filesystem: workspace-write}",
        f"sandbox: {{filesystem: workspace-write, writable: ['{code}']}}",
    )
    manifest.write_text(text)
    with create_toolkit(manifest) as toolkit:
        assert toolkit.status()["memory"]["state"] == "ready"
        assert toolkit.execute("remember", {"text": "hi"}).content == "ok"
    assert (code / "memory.jsonl").read_text() == "hi\n"


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
def test_a_shell_tool_refused_a_write_is_told_which_policy_did_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    only_mechanism(mechanism, monkeypatch)
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "work"
    workspace.mkdir()
    manifest = workspace / "tools.yaml"
    manifest.write_text(
        "version: 1\ntools:\n  - name: save\n    description: Save a note\n"
        f"    command: [sh, -c, 'echo hi > {outside}/note.txt']\n"
        "    sandbox: {filesystem: workspace-write}\n"
    )
    with create_toolkit(manifest) as toolkit:
        result = toolkit.execute("save", {})
    assert result.is_error and f"{outside}/note.txt" in result.content
    assert "note: the sandbox (filesystem: workspace-write) does not let it write" in result.content
    assert f"add `writable: [{outside.resolve()}]`" in result.content
    assert not (outside / "note.txt").exists()
