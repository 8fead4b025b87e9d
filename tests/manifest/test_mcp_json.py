"""The standard .mcp.json, loaded as is or imported with `mcp_servers: {from: ...}`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from toolnexus.errors import DuplicateToolError, ManifestSchemaError
from toolnexus.manifest import load_manifest

Write = Callable[[str, str], Path]

MCP_JSON = """
{
  "mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TZ:-UTC}"}},
    "docs": {"type": "http", "url": "http://127.0.0.1:9000/mcp",
             "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
    "old": {"type": "sse", "url": "http://127.0.0.1:9001/sse"},
    "off": {"command": "x", "disabled": true},
    "cline": {"command": "y", "autoApprove": []}
  }
}
"""


def test_load_an_mcp_json_as_is(write: Write, tmp_path: Path) -> None:
    path = write(".mcp.json", MCP_JSON)
    m = load_manifest(path, env={"DOCS_TOKEN": "t0k"})
    specs = {s.name: s.spec for s in m.mcp_servers}
    assert set(specs) == {"time", "docs", "old", "cline"}
    assert specs["time"] == {
        "command": "uvx",
        "args": ["mcp-server-time"],
        "env": {"TZ": "UTC"},
        "transport": "stdio",
    }
    assert specs["docs"]["transport"] == "http"
    assert specs["docs"]["headers"]["Authorization"] == "Bearer t0k"
    assert "t0k" not in repr(m)
    assert specs["old"]["transport"] == "sse"
    assert m.mcp_servers[0].where.line == 3 and m.mcp_servers[0].base_dir == tmp_path
    assert m.tools == ()


def test_import_with_from_merges_with_explicit_servers(write: Write, tmp_path: Path) -> None:
    write("cfg/.mcp.json", MCP_JSON)
    top = write(
        "tools.yaml",
        """
        version: 1
        mcp_servers:
          from: cfg/.mcp.json
          local: {command: ./server, timeout: 3s}
    """,
    )
    m = load_manifest(top, env={"DOCS_TOKEN": "x"})
    assert [s.name for s in m.mcp_servers] == ["time", "docs", "old", "cline", "local"]
    assert m.mcp_servers[0].base_dir == tmp_path / "cfg"
    assert m.mcp_servers[0].where.file == str(tmp_path / "cfg/.mcp.json")
    assert m.mcp_servers[-1].spec["timeout"] == 3.0
    assert tmp_path / "cfg/.mcp.json" in m.files


def test_name_clash_between_from_and_explicit_is_an_error(write: Write) -> None:
    write(".mcp.json", '{"mcpServers": {"time": {"command": "a"}}}')
    top = write("tools.yaml", "version: 1\nmcp_servers:\n  from: .mcp.json\n  time: {url: u}\n")
    with pytest.raises(DuplicateToolError, match="MCP server 'time' is defined twice"):
        load_manifest(top)


def test_bad_entries_in_mcp_json_are_located(write: Write) -> None:
    path = write(
        ".mcp.json",
        """
        {"mcpServers": {
          "a": {"type": "websocket", "url": "ws://x"},
          "b": {"args": []}
        }}
    """,
    )
    with pytest.raises(ManifestSchemaError) as err:
        load_manifest(path)
    transport, missing = err.value.issues
    assert transport.line == 2 and transport.field == "mcp_servers.a.transport"
    assert "expected one of stdio, http, sse; got 'websocket'" in transport.message
    assert missing.line == 3 and "command, url" in missing.message
