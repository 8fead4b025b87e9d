"""A `.mcp.json` whose servers offer the same tool names loads as is: clashing names are
namespaced per server (`mcp__SERVER__TOOL`, at most 64 characters), while a clash a toolnexus
manifest declares stays the located "defined twice" error. Real `MCPServer` stdio servers."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from toolnexus import Tool, create_toolkit
from toolnexus.base import Result
from toolnexus.errors import ManifestError
from toolnexus.mcp.namespace import namespace_clashes, namespaced_name
from toolnexus.schema import is_valid_name

from ..conftest import MCP_SERVERS

EVERYTHING = MCP_SERVERS / "everything.py"

SERVER = '''
import sys

from mcp.server.mcpserver import MCPServer

who = sys.argv[1]
extra = sys.argv[2] if len(sys.argv) > 2 else "only_" + who
server = MCPServer(who, version="1.0")


@server.tool()
def echo(text: str) -> str:
    """Echo, saying which server answered."""
    return f"{who}: {text}"


def own(text: str) -> str:
    return f"{who} own: {text}"


server.add_tool(own, name=extra, description="A tool only this server has.")

if __name__ == "__main__":
    server.run()
'''


def write_server(folder: Path) -> Path:
    script = folder / "echo_server.py"
    script.write_text(textwrap.dedent(SERVER).lstrip())
    return script


def entry(script: Path, *args: str) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(script), *args]}


def test_two_servers_offering_echo_load_and_each_echo_reaches_its_server(tmp_path: Path) -> None:
    script = write_server(tmp_path)
    path = tmp_path / ".mcp.json"
    servers = {"alpha": entry(script, "alpha"), "beta": entry(script, "beta")}
    path.write_text(json.dumps({"mcpServers": servers}))
    with create_toolkit(path) as tk:
        # Only the clashing name is namespaced (both copies); the others keep their names.
        assert tk.names() == ["mcp__alpha__echo", "mcp__beta__echo", "only_alpha", "only_beta"]
        assert tk.execute("mcp__alpha__echo", {"text": "hi"}).content == "alpha: hi"
        assert tk.execute("mcp__beta__echo", {"text": "hi"}).content == "beta: hi"
        assert tk.execute("only_beta", {"text": "x"}).content == "beta own: x"
        unknown = tk.execute("echo", {"text": "hi"})
        assert unknown.is_error


def test_long_server_and_tool_names_stay_within_64_characters(tmp_path: Path) -> None:
    script = write_server(tmp_path)
    tool = "summarise_the_quarterly_report_for_the_board_of_directors_now"  # 61 characters
    one = "the-finance-department-reporting-server-" + "x" * 30
    two = "the-finance-department-reporting-server-" + "y" * 30  # same first 40 characters
    path = tmp_path / ".mcp.json"
    servers = {one: entry(script, "one", tool), two: entry(script, "two", tool)}
    path.write_text(json.dumps({"mcpServers": servers}))
    with create_toolkit(path) as tk:
        long_names = [n for n in tk.names() if "summarise" in n]
        assert len(long_names) == 2 and len(set(long_names)) == 2
        for name in long_names:
            assert len(name) <= 64 and is_valid_name(name), name
            assert name.startswith("mcp__the-finance-depa")
        assert long_names == sorted([namespaced_name(one, tool), namespaced_name(two, tool)])
        answers = {tk.execute(n, {"text": "q3"}).content for n in long_names}
        assert answers == {"one own: q3", "two own: q3"}
    assert namespaced_name(one, tool) == namespaced_name(one, tool)  # the same on every run


def test_an_imported_mcp_json_yields_to_the_manifests_own_tool_and_rules(tmp_path: Path) -> None:
    script = write_server(tmp_path)
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"srv": entry(script, "srv")}}))
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        textwrap.dedent(
            """
            version: 1
            tools:
              - name: echo
                command: [echo, "manifest {text}"]
                parameters: {type: object, properties: {text: {type: string}}, required: [text]}
            mcp_servers:
              from: .mcp.json
            permissions:
              deny: ["echo(secret*)"]
            """
        )
    )
    with create_toolkit(manifest) as tk:
        assert tk.names() == ["echo", "mcp__srv__echo", "only_srv"]
        assert tk.execute("echo", {"text": "a"}).content.strip() == "manifest a"
        assert tk.execute("mcp__srv__echo", {"text": "a"}).content == "srv: a"
        # A rule written for the bare name still holds for the namespaced tool.
        denied = tk.execute("mcp__srv__echo", {"text": "secret plans"})
        assert denied.is_error and "denied" in denied.content


def test_a_clash_a_manifest_declares_is_still_a_located_error(tmp_path: Path) -> None:
    script = write_server(tmp_path)
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        textwrap.dedent(
            f"""
            version: 1
            mcp_servers:
              alpha: {{command: {sys.executable!r}, args: [{str(script)!r}, alpha]}}
              beta: {{command: {sys.executable!r}, args: [{str(script)!r}, beta]}}
            """
        )
    )
    with pytest.raises(ManifestError) as failure:
        create_toolkit(manifest)
    text = str(failure.value)
    assert "tool 'echo' is defined twice" in text
    assert "mcp:alpha" in text and "mcp:beta" in text
    assert "tools.yaml" in text


def test_a_name_that_starts_to_clash_at_runtime_is_namespaced_then(tmp_path: Path) -> None:
    """A server whose `tools/list_changed` brings a name another server has: both copies are
    renamed in the next generation, and each still reaches its own server."""
    script = write_server(tmp_path)
    path = tmp_path / ".mcp.json"
    servers = {
        "alpha": entry(script, "alpha"),
        "grows": {"command": sys.executable, "args": [str(EVERYTHING)]},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    with create_toolkit(path) as tk:
        assert {"mcp__alpha__echo", "mcp__grows__echo", "only_alpha", "grow"} <= set(tk.names())
        grown = tk.execute("grow", {"name": "only_alpha"})
        assert not grown.is_error, grown.content
        deadline = time.monotonic() + 30
        while "only_alpha" in tk.names() and time.monotonic() < deadline:
            time.sleep(0.02)  # the refresh arrives as a notification: nothing to wait on
        names = set(tk.names())
        assert {"mcp__alpha__only_alpha", "mcp__grows__only_alpha"} <= names, names
        assert "only_alpha" not in names
        assert tk.execute("mcp__alpha__only_alpha", {"text": "t"}).content == "alpha own: t"
        assert tk.execute("mcp__grows__only_alpha", {"x": 3}).content == "only_alpha:3"


async def _run(arguments: dict[str, object], ctx: object) -> Result:
    return Result(content="")


def _mcp_tool(name: str, server: str) -> Tool:
    return Tool(name=name, handler=_run, source="mcp", meta={"server": server, "mcp_name": name})


def test_names_are_worked_out_afresh_when_a_servers_tools_change() -> None:
    """What a `tools/list_changed` refresh relies on: namespacing again is stable, and a name
    that stops clashing gets its bare name back (aliases included)."""
    tools = [_mcp_tool("echo", "a"), _mcp_tool("echo", "b"), _mcp_tool("solo", "a")]
    once = namespace_clashes(tools, {"a", "b"})
    assert [t.name for t in once] == ["mcp__a__echo", "mcp__b__echo", "solo"]
    assert once[0].meta["aliases"] == ("echo",)
    assert [t.name for t in namespace_clashes(once, {"a", "b"})] == [t.name for t in once]
    without_b = namespace_clashes([t for t in once if t.meta["server"] == "a"], {"a", "b"})
    assert [t.name for t in without_b] == ["echo", "solo"]
    assert "aliases" not in without_b[0].meta
    # A server not from an mcpServers file is never renamed: the clash is left to the registry.
    assert [t.name for t in namespace_clashes(tools, {"a"})] == ["mcp__a__echo", "echo", "solo"]


def test_servers_whose_names_sanitize_alike_still_load_with_distinct_names(
    tmp_path: Path,
) -> None:
    script = write_server(tmp_path)
    path = tmp_path / ".mcp.json"
    servers = {"my.srv": entry(script, "dot"), "my_srv": entry(script, "underscore")}
    path.write_text(json.dumps({"mcpServers": servers}))
    with create_toolkit(path) as tk:
        echoes = [n for n in tk.names() if "echo" in n]
        assert len(echoes) == 2 and all(n.startswith("mcp__my_srv__echo_") for n in echoes)
        assert all(len(n) <= 64 and is_valid_name(n) for n in echoes)
        answers = {tk.execute(n, {"text": "hi"}).content for n in echoes}
    assert answers == {"dot: hi", "underscore: hi"}


def test_a_namespaced_name_never_takes_the_name_of_another_tool() -> None:
    tools = [_mcp_tool("echo", "a"), _mcp_tool("echo", "b"), _mcp_tool("mcp__a__echo", "c")]
    names = [t.name for t in namespace_clashes(tools, {"a", "b", "c"})]
    assert len(set(names)) == 3
    assert names[1:] == ["mcp__b__echo", "mcp__a__echo"]  # the tool that had the name keeps it
    assert names[0].startswith("mcp__a__echo_") and len(names[0]) == len("mcp__a__echo_") + 8
    again = [t.name for t in namespace_clashes(namespace_clashes(tools, {"a", "b", "c"}), {"a"})]
    assert again[0] == names[0]


def test_an_allow_on_the_bare_name_does_not_let_another_servers_copy_through(
    tmp_path: Path,
) -> None:
    """`allow: [echo]` was written for the tool called `echo` (here the manifest's own); it
    must not approve a `.mcp.json` server's `echo` too, which another server's tool list (even
    one changing at run time) can bring in. Deny and ask on the bare name still hold."""
    script = write_server(tmp_path)
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"srv": entry(script, "srv")}}))
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(
        textwrap.dedent(
            """
            version: 1
            defaults: {approval: ask}
            tools:
              - name: echo
                command: [echo, "manifest {text}"]
                parameters: {type: object, properties: {text: {type: string}}, required: [text]}
            mcp_servers:
              from: .mcp.json
            permissions:
              allow: [echo, only_srv]
              deny: ["echo(secret*)"]
            """
        )
    )
    with create_toolkit(manifest) as tk:
        assert tk.execute("echo", {"text": "a"}).content.strip() == "manifest a"
        assert tk.execute("only_srv", {"text": "a"}).content == "srv own: a"  # not renamed
        other = tk.execute("mcp__srv__echo", {"text": "a"})
        denied = tk.execute("mcp__srv__echo", {"text": "secret plans"})
    assert other.is_error and "srv: a" not in other.content, other.content
    assert "approv" in other.content.lower(), other.content  # the default, ask, applies
    assert denied.is_error and "denied" in denied.content
