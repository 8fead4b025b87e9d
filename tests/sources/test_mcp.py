"""MCP servers as tool sources, against real servers (tests/mcp_servers/) over stdio and HTTP."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from toolnexus.base import AudioPart, ImagePart, ResourcePart, Result, TextPart, Tool, ToolContext
from toolnexus.errors import ConfigError, SourceError, ToolError, ToolTimeout, UsageError
from toolnexus.mcp.server import McpServer, McpServerState, connect_all
from toolnexus.mcp.spec import McpServerSpec
from toolnexus.runtime.sandbox import SandboxPolicy

from ..conftest import free_port, wait_for_port

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PARENT_SECRET = "TOOLNEXUS_TEST_PARENT_SECRET"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def stdio(name: str, script: str, *args: str, **keys: Any) -> McpServerSpec:
    mapping = {"command": sys.executable, "args": [str(SERVERS / script), *args], **keys}
    return McpServerSpec.from_mapping(name, mapping, base_dir=SERVERS)


def ctx(deadline_in: float | None = None) -> ToolContext:
    deadline = None if deadline_in is None else time.monotonic() + deadline_in
    return ToolContext(call_id="c1", tool_name="t", workspace=SERVERS, deadline=deadline)


def tool(server: McpServer, name: str) -> Tool:
    found = {t.name: t for t in server.tools()}
    assert name in found, sorted(found)
    return found[name]


async def call(server: McpServer, tool_name: str, /, **arguments: Any) -> Result:
    with anyio.fail_after(10):
        return await tool(server, tool_name).run(arguments, ctx())


def children() -> set[int]:
    """Live and zombie child processes of this test process, from /proc."""
    me = str(os.getpid())
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me:
            found.add(int(entry))
    return found


@pytest.fixture(scope="module")
async def everything() -> AsyncIterator[McpServer]:
    """One stdio server shared by the tests that do not break it. The parent holds a secret
    the child must not inherit."""
    os.environ[PARENT_SECRET] = "hunter2"
    try:
        server = McpServer(stdio("ev", "everything.py", env={"GIVEN": "yes"}), workspace=SERVERS)
        await server.start()
    finally:
        del os.environ[PARENT_SECRET]
    yield server
    await server.aclose()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The everything server over streamable HTTP, in its own process."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVERS / "everything.py"), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc, 15)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- configuration ------------------------------------------------------------------------------


def test_stdio_spec_resolves_paths_and_keeps_env_values_out_of_repr(tmp_path: Path) -> None:
    spec = McpServerSpec.from_mapping(
        "time",
        {
            "command": "bin/server",
            "args": ["--port", 8080],
            "env": {"TOKEN": "s3cret", "A": 1},
            "cwd": "work",
            "prefix": "time_",
            "tools": {"include": ["get_*"], "exclude": "convert_time"},
            "timeout": 10,
            "connect_timeout": 2.5,
            "required": True,
            "approval": "ask",
        },
        base_dir=tmp_path,
    )
    assert spec.transport == "stdio"
    assert spec.command == str(tmp_path / "bin/server")
    assert spec.args == ("--port", "8080")
    assert spec.env == (("A", "1"), ("TOKEN", "s3cret"))
    assert spec.cwd == tmp_path / "work"
    assert (spec.include, spec.exclude) == (("get_*",), ("convert_time",))
    assert (spec.timeout, spec.connect_timeout, spec.required) == (10.0, 2.5, True)
    assert "s3cret" not in repr(spec) and "'TOKEN'" in repr(spec)


def test_http_spec_hides_header_values_and_url_credentials(tmp_path: Path) -> None:
    spec = McpServerSpec.from_mapping(
        "docs",
        {
            "type": "http",
            "url": "https://me:tok@example.test/mcp",
            "headers": {"Auth": "Bearer x1"},
        },
        base_dir=tmp_path,
    )
    assert spec.transport == "http"
    normalised = {"transport": "http", "url": "http://127.0.0.1:9/mcp", "type": "streamable-http"}
    assert McpServerSpec.from_mapping("d", normalised, base_dir=tmp_path).transport == "http"
    assert "x1" not in repr(spec) and "tok" not in repr(spec)
    assert spec.connect_timeout == 10.0


def test_equal_configurations_give_equal_hashable_specs(tmp_path: Path) -> None:
    entry = {"command": "srv", "env": {"B": "2", "A": "1"}, "tools": {"include": ["x*"]}}
    a = McpServerSpec.from_mapping("s", entry, base_dir=tmp_path)
    b = McpServerSpec.from_mapping("s", dict(entry), base_dir=tmp_path)
    c = McpServerSpec.from_mapping("s", {**entry, "timeout": 3}, base_dir=tmp_path)
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert len({a, b, c}) == 2


@pytest.mark.parametrize(
    ("entry", "field", "words"),
    [
        ({}, "command", "expected `command`"),
        ({"command": "x", "url": "http://h/mcp"}, "url", "not both"),
        ({"command": ""}, "command", "non-empty"),
        ({"command": "x", "args": "a b"}, "args", "list of strings"),
        ({"command": "x", "args": [None]}, "args[0]", "expected a string"),
        ({"command": "x", "env": {"K": ["v"]}}, "env.K", "string value"),
        ({"command": "x", "headers": {}}, "headers", "belongs to HTTP"),
        ({"url": "ftp://h/x"}, "url", "http:// or https://"),
        ({"url": "http://h/mcp", "sandbox": {}}, "sandbox", "stdio"),
        ({"url": "http://h/mcp", "cwd": "."}, "cwd", "stdio"),
        ({"command": "x", "timeout": "10s"}, "timeout", "number of seconds"),
        ({"command": "x", "connect_timeout": 0}, "connect_timeout", "positive"),
        ({"command": "x", "required": "yes"}, "required", "true or false"),
        ({"command": "x", "prefix": 3}, "prefix", "string"),
        ({"command": "x", "tools": {"inclde": ["a"]}}, "tools.inclde", "did you mean 'include'"),
        ({"command": "x", "tools": {"exclude": [""]}}, "tools.exclude", "glob"),
        ({"command": "x", "comand": "y"}, "comand", "did you mean 'command'"),
        ({"type": "sse", "url": "http://h/sse"}, "type", "not supported"),
        ({"type": "websocket", "url": "http://h"}, "type", "unknown transport"),
        ({"type": "stdio", "url": "http://h"}, "command", "needs `command`"),
        ({"transport": "sse", "url": "http://h/sse"}, "transport", "not supported"),
        ({"transport": "http", "command": "x"}, "url", "needs `url`"),
        ({"type": "http", "transport": "stdio", "url": "http://h"}, "transport", "disagree"),
    ],
)
def test_bad_entries_name_the_field(
    tmp_path: Path, entry: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        McpServerSpec.from_mapping("s", entry, base_dir=tmp_path)
    assert caught.value.field == field
    assert words in caught.value.message


def test_a_spec_needs_exactly_one_transport() -> None:
    with pytest.raises(UsageError, match="exactly one of"):
        McpServerSpec(name="s")
    with pytest.raises(UsageError, match="exactly one of"):
        McpServerSpec(name="s", command="x", url="http://h/mcp")


def test_secret_env_values_never_appear_in_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        McpServerSpec.from_mapping(
            "s", {"command": "x", "env": {"T": {"v": "s3cret"}}}, base_dir=tmp_path
        )
    assert "s3cret" not in str(caught.value)


# -- tools and results over stdio -----------------------------------------------------------------


@pytest.mark.anyio
async def test_tools_carry_annotations_schemas_and_origin(everything: McpServer) -> None:
    status = everything.status
    assert status.state is McpServerState.READY
    assert status.protocol_version == "2026-07-28"
    assert status.tool_count == len(everything.tools()) >= 11

    echo = tool(everything, "echo")
    assert (echo.read_only, echo.destructive, echo.idempotent, echo.open_world) == (
        True,
        False,
        True,
        True,
    )
    assert echo.title == "Echo"
    assert echo.source == "mcp" and echo.origin == "mcp:ev"
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.meta == {"server": "ev", "mcp_name": "echo", "primary_argument": "text"}

    search = tool(everything, "web_search")  # "web.search" on the server
    assert search.meta["mcp_name"] == "web.search"
    assert (search.read_only, search.destructive, search.open_world) == (False, False, False)

    delete = tool(everything, "delete_thing")  # MCP defaults for the hints it leaves out
    assert (delete.read_only, delete.destructive, delete.idempotent, delete.open_world) == (
        False,
        True,
        False,
        True,
    )
    add = tool(everything, "add")
    assert add.output_schema is not None
    assert add.output_schema["properties"]["result"]["type"] == "integer"
    assert "primary_argument" not in add.meta


@pytest.mark.anyio
async def test_structured_content_and_text(everything: McpServer) -> None:
    result = await call(everything, "add", a=2, b=3)
    assert (result.content, result.structured, result.is_error) == ("5", {"result": 5}, False)
    assert result.metadata["server"] == "ev"
    renamed = await call(everything, "web_search", query="mcp")
    assert renamed.content == "3 results for mcp"


@pytest.mark.anyio
async def test_media_and_resources_become_parts_in_order(everything: McpServer) -> None:
    result = await call(everything, "media")
    # Text keeps its place (issue 12): the text after the media stays after it.
    assert result.content == "first"
    assert result.parts == (
        ImagePart(data=PNG_1X1, mime_type="image/png"),
        AudioPart(data=b"RIFF\x24\x00\x00\x00WAVEfmt ", mime_type="audio/wav"),
        TextPart(text="second"),
        ResourcePart(uri="file:///readme.md", mime_type="text/markdown"),
        ResourcePart(uri="mem://note", mime_type="text/plain", text="embedded text"),
        ResourcePart(uri="mem://blob", mime_type="application/octet-stream", data=b"\x00\x01"),
    )


@pytest.mark.anyio
async def test_is_error_results_stay_results(everything: McpServer) -> None:
    result = await call(everything, "fail", message="disk on fire")
    assert result.is_error
    assert "disk on fire" in result.content


@pytest.mark.anyio
async def test_a_call_past_its_deadline_times_out_and_the_session_survives(
    everything: McpServer,
) -> None:
    with anyio.fail_after(10), pytest.raises(ToolTimeout) as caught:
        await tool(everything, "slow").run({"seconds": 30}, ctx(deadline_in=0.3))
    assert caught.value.retryable
    assert "timed out after 0.3 s" in caught.value.message
    assert (await call(everything, "echo", text="still here")).content == "still here"


@pytest.mark.anyio
async def test_stdio_child_gets_only_a_minimal_environment_plus_its_own(
    everything: McpServer,
) -> None:
    assert (await call(everything, "env", name="GIVEN")).content == "yes"
    assert (await call(everything, "env", name=PARENT_SECRET)).content == "<unset>"
    assert (await call(everything, "env", name="PATH")).content == os.environ["PATH"]


@pytest.mark.anyio
async def test_tools_list_changed_refreshes_a_2026_session(everything: McpServer) -> None:
    changed = anyio.Event()
    everything.on_tools_changed = lambda server: changed.set()
    try:
        await call(everything, "grow", name="fresh_modern")
        with anyio.fail_after(5):
            await changed.wait()
    finally:
        everything.on_tools_changed = None
    assert (await call(everything, "fresh_modern", x=2)).content == "fresh_modern:2"
    assert everything.status.tool_count == len(everything.tools())


@pytest.mark.anyio
async def test_tools_list_changed_refreshes_a_legacy_session() -> None:
    changed = anyio.Event()

    async def on_change(server: McpServer) -> None:
        changed.set()

    server = McpServer(
        stdio("old", "everything.py", "--legacy"), workspace=SERVERS, on_tools_changed=on_change
    )
    try:
        await server.start()
        assert server.status.protocol_version == "2025-11-25"
        assert "fresh_legacy" not in {t.name for t in server.tools()}
        await call(server, "grow", name="fresh_legacy")
        with anyio.fail_after(5):
            await changed.wait()
        assert (await call(server, "fresh_legacy", x=1)).content == "fresh_legacy:1"
        assert server.status.tools_changed == 1  # live: the change shows in the status
    finally:
        await server.aclose()


# -- filters, pagination, HTTP --------------------------------------------------------------------


@pytest.mark.anyio
async def test_include_exclude_and_prefix_use_the_servers_names() -> None:
    spec = stdio(
        "f",
        "everything.py",
        prefix="ev.",
        tools={"include": ["e*", "web.*", "add"], "exclude": ["env"]},
    )
    server = McpServer(spec, workspace=SERVERS)
    try:
        await server.start()
        assert sorted(t.name for t in server.tools()) == ["ev_add", "ev_echo", "ev_web_search"]
        assert (await call(server, "ev_add", a=1, b=1)).structured == {"result": 2}
    finally:
        await server.aclose()


@pytest.mark.anyio
async def test_every_page_of_tools_is_listed() -> None:
    server = McpServer(stdio("pages", "paginated.py"), workspace=SERVERS)
    try:
        await server.start()
        assert [t.name for t in server.tools()] == [f"tool_{i}" for i in range(7)]
        result = await call(server, "tool_6", x=1)
        assert result.content == "tool_6 got {'x': 1}"
    finally:
        await server.aclose()


@pytest.mark.anyio
async def test_streamable_http_server(http_url: str) -> None:
    spec = McpServerSpec.from_mapping(
        "web", {"url": http_url, "headers": {"X-Test": "1"}}, base_dir=SERVERS
    )
    server = McpServer(spec, workspace=SERVERS)
    try:
        await server.start()
        assert server.status.transport == "http"
        assert server.status.state is McpServerState.READY
        assert (await call(server, "add", a=20, b=22)).structured == {"result": 42}
        assert (await call(server, "media")).parts[0] == ImagePart(data=PNG_1X1)
    finally:
        await server.aclose()
    assert server.status.state is McpServerState.CLOSED


@pytest.mark.anyio
async def test_unreachable_http_server_fails_with_the_reason() -> None:
    spec = McpServerSpec.from_mapping(
        "gone",
        {"url": f"http://127.0.0.1:{free_port()}/mcp", "connect_timeout": 5},
        base_dir=SERVERS,
    )
    server = McpServer(spec, workspace=SERVERS)
    with pytest.raises(SourceError, match="'gone' did not start"):
        await server.start()
    assert server.status.state is McpServerState.FAILED
    await server.aclose()


# -- failures, restarts, shutdown -----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_server_that_never_answers_is_given_up_at_its_deadline() -> None:
    before = children()
    server = McpServer(stdio("mute", "hang.py", connect_timeout=1), workspace=SERVERS)
    with pytest.raises(SourceError) as caught:
        await server.start()
    assert "within 1 s" in str(caught.value)
    status = server.status
    assert status.state is McpServerState.FAILED
    assert status.reason is not None and "within 1 s (connect_timeout)" in status.reason
    assert server.tools() == []
    await server.aclose()
    assert children() - before == set()


@pytest.mark.anyio
async def test_missing_command_is_reported_plainly() -> None:
    spec = McpServerSpec.from_mapping(
        "nope", {"command": "no-such-mcp-server-xyz"}, base_dir=SERVERS
    )
    server = McpServer(spec, workspace=SERVERS)
    with pytest.raises(SourceError, match="'no-such-mcp-server-xyz' not found"):
        await server.start()
    await server.aclose()


@pytest.mark.anyio
async def test_a_crashed_server_restarts_on_the_next_call_then_backs_off(tmp_path: Path) -> None:
    before = children()
    marker = tmp_path / "refuse"
    spec = stdio("fragile", "everything.py", "--refuse-start-if", str(marker))
    server = McpServer(spec, workspace=SERVERS)
    try:
        await server.start()
        (first,) = children() - before

        with pytest.raises(ToolError) as crash:
            await call(server, "crash")
        assert crash.value.retryable and "closed the connection" in crash.value.message
        assert server.status.state is McpServerState.CRASHED  # live, not the build's "ready"
        assert "restarted on the next call" in (server.status.reason or "")

        result = await call(server, "echo", text="back")
        assert (result.content, result.metadata.get("restarted")) == ("back", True)
        assert server.status.state is McpServerState.READY
        assert server.status.restarts == 1
        assert first not in children()  # the crashed process was reaped, not left a zombie
        assert "restarted" not in (await call(server, "echo", text="again")).metadata

        # Now the server cannot start any more: the call says it is down and when it is retried.
        with pytest.raises(ToolError):
            await call(server, "crash", marker=str(marker))
        with pytest.raises(ToolError) as down:
            await call(server, "echo", text="x")
        assert "'fragile' is down" in down.value.message
        assert "refusing to start" in down.value.message  # the server's own stderr
        assert "retried in 0.5 s" in down.value.message
        with pytest.raises(ToolError, match=r"is down .* retried in \d+\.\d s"):
            await call(server, "echo", text="x")
        status = server.status
        assert status.state is McpServerState.FAILED
        assert status.retry_in is not None and status.retry_in > 0
    finally:
        await server.aclose()
    assert children() - before == set()


@pytest.mark.anyio
async def test_connect_all_isolates_failures_and_raises_for_required_ones() -> None:
    good = McpServer(stdio("good", "paginated.py"), workspace=SERVERS)
    mute = McpServer(stdio("mute", "hang.py", connect_timeout=1), workspace=SERVERS)
    missing = McpServer(
        McpServerSpec.from_mapping("missing", {"command": "no-such-xyz"}, base_dir=SERVERS),
        workspace=SERVERS,
    )
    try:
        await connect_all([good, mute, missing])
        assert good.status.state is McpServerState.READY and len(good.tools()) == 7
        assert mute.status.state is McpServerState.FAILED
        assert missing.status.state is McpServerState.FAILED
        assert "not found" in (missing.status.reason or "")
    finally:
        for server in (good, mute, missing):
            await server.aclose()

    required = McpServer(
        McpServerSpec.from_mapping(
            "vital", {"command": "no-such-xyz", "required": True}, base_dir=SERVERS
        ),
        workspace=SERVERS,
    )
    optional = McpServer(stdio("mute2", "hang.py", connect_timeout=1), workspace=SERVERS)
    try:
        with pytest.raises(SourceError, match=r"'vital' did not start.*required: true"):
            await connect_all([required, optional])
        assert optional.status.state is McpServerState.FAILED  # it still got its full chance
    finally:
        await required.aclose()
        await optional.aclose()


@pytest.mark.anyio
async def test_close_leaves_no_process_thread_or_task_behind() -> None:
    before_children = children()
    before_threads = set(threading.enumerate())
    server = McpServer(stdio("tidy", "paginated.py"), workspace=SERVERS)
    await server.start()
    assert len(children() - before_children) == 1
    await server.aclose()
    await server.aclose()  # twice is fine
    assert children() - before_children == set()
    for thread in set(threading.enumerate()) - before_threads:
        thread.join(timeout=5)  # asyncio's child watcher thread ends with its child
        assert not thread.is_alive(), thread
    import asyncio

    assert [t for t in asyncio.all_tasks() if t.get_name() == "toolnexus-mcp-tidy"] == []
    assert server.status.state is McpServerState.CLOSED
    with pytest.raises(UsageError):
        await server.start()


@pytest.mark.anyio
async def test_closing_a_server_while_it_connects_ends_the_attempt() -> None:
    before = children()
    server = McpServer(stdio("late", "hang.py", connect_timeout=30), workspace=SERVERS)
    failures: list[SourceError] = []

    async def start() -> None:
        try:
            await server.start()
        except SourceError as exc:
            failures.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await anyio.lowlevel.checkpoint()  # let start() begin connecting
            assert server.status.state is McpServerState.CONNECTING
            await server.aclose()
    assert [str(e) for e in failures] == ["MCP server 'late' was closed while it connected"]
    assert server.status.state is McpServerState.CLOSED
    assert children() - before == set()


@pytest.mark.anyio
async def test_calls_after_close_are_refused(tmp_path: Path) -> None:
    server = McpServer(stdio("shut", "paginated.py"), workspace=SERVERS)
    await server.start()
    tool_0 = tool(server, "tool_0")
    await server.aclose()
    with pytest.raises(ToolError, match="'shut' is closed"):
        await tool_0.run({}, ctx())


@pytest.mark.anyio
async def test_a_sandboxed_server_cannot_write_outside_its_writable_paths(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    beside = tmp_path / "beside.txt"
    read_only = SERVERS / "sandbox-escape.txt"
    policy = SandboxPolicy(filesystem="workspace-write", network=False)
    server = McpServer(stdio("boxed", "everything.py"), sandbox=policy, workspace=workspace)
    try:
        await server.start()
        assert server.status.sandbox in ("bwrap", "landlock")
        inside = await call(server, "write_file", path=str(workspace / "in.txt"), text="ok")
        assert inside.content == "written"
        assert (workspace / "in.txt").read_text() == "ok"
        refused = await call(server, "write_file", path=str(read_only), text="no")
        assert refused.is_error and "write failed" in refused.content
        # Next to the workspace: refused, or written to a private /tmp; never on the host.
        await call(server, "write_file", path=str(beside), text="no")
        assert not beside.exists()
    finally:
        await server.aclose()
        escaped = read_only.exists()
        read_only.unlink(missing_ok=True)
    assert not escaped


# -- error translation ----------------------------------------------------------------------------


def _mcp_error(code: int) -> BaseException:
    from mcp.shared.exceptions import MCPError

    return MCPError(code=code, message="boom")


def _httpx2_error() -> BaseException:
    import httpx2

    return httpx2.ConnectError("refused")


def _validation_error() -> BaseException:
    import mcp_types
    import pydantic

    try:
        mcp_types.CallToolResult.model_validate({"content": 3})
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("expected a validation error")


@pytest.mark.parametrize(
    ("make", "kind", "retryable", "words"),
    [
        (lambda: _mcp_error(-32001), ToolTimeout, True, "timed out after 2 s"),
        (lambda: _mcp_error(-32000), ToolError, True, "closed the connection"),
        (lambda: _mcp_error(-32602), ToolError, False, "rejected the arguments"),
        (lambda: _mcp_error(-32601), ToolError, False, "does not support"),
        (lambda: _mcp_error(-1), ToolError, False, "error -1: boom"),
        (TimeoutError, ToolTimeout, True, "timed out"),
        (anyio.BrokenResourceError, ToolError, True, "closed the connection"),
        (anyio.ClosedResourceError, ToolError, True, "closed the connection"),
        (anyio.EndOfStream, ToolError, True, "closed the connection"),
        (_httpx2_error, ToolError, True, "HTTP error"),
        (_validation_error, ToolError, False, "malformed result"),
        (lambda: ConnectionResetError("reset"), ToolError, True, "unreachable"),
        (lambda: RuntimeError("Invalid structured content"), ToolError, False, "unusable"),
        (lambda: ExceptionGroup("g", [ValueError("deep")]), ToolError, False, "ValueError: deep"),
    ],
)
def test_every_foreign_failure_becomes_a_tool_error(
    make: Any, kind: type[ToolError], retryable: bool, words: str
) -> None:
    from toolnexus.mcp.convert import translate_error

    error = translate_error(make(), server="s", tool="t", timeout=2.0)
    assert type(error) is kind
    assert error.retryable is retryable
    assert words in error.message
    assert "'s'" in error.message


# -- limits, malformed listings, broken streams, HTTP statuses ------------------------------------


def test_size_limits_are_read_per_server(tmp_path: Path) -> None:
    spec = McpServerSpec.from_mapping(
        "s", {"command": "x", "max_output": 500, "max_message": 2048}, base_dir=tmp_path
    )
    assert (spec.max_output, spec.max_message) == (500, 2048)
    assert "max_message=2048" in repr(spec)
    default = McpServerSpec.from_mapping("s", {"command": "x"}, base_dir=tmp_path)
    assert (default.max_output, default.max_message) == (30_000, 16 * 1024 * 1024)
    for key in ("max_output", "max_message"):
        with pytest.raises(ConfigError) as caught:
            McpServerSpec.from_mapping("s", {"command": "x", key: 0}, base_dir=tmp_path)
        assert caught.value.field == key and "positive" in caught.value.message


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("just text", "not an object"),
        ({"inputSchema": {"type": "object"}}, "no name"),
        ({"name": "bad\x07name", "inputSchema": {"type": "object"}}, "control characters"),
        ({"name": "x" * 129, "inputSchema": {"type": "object"}}, "longer than 128"),
        ({"name": "t"}, "no inputSchema"),
        ({"name": "t", "inputSchema": ["x"]}, "not a JSON object"),
        ({"name": "t", "inputSchema": {"type": "string"}}, "describes 'string'"),
        (
            {
                "name": "t",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "strin"}}},
            },
            "did you mean 'string'",
        ),
        (
            {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}},
            "outputSchema describes 'array'",
        ),
        ({"name": "t", "inputSchema": {"type": "object"}, "title": 3}, "does not follow"),
    ],
)
def test_malformed_tool_entries_are_named_with_their_reason(entry: object, words: str) -> None:
    from toolnexus.mcp.convert import check_tool

    reason = check_tool(entry, None)
    assert reason is not None and words in reason


def test_a_good_tool_entry_passes_the_check() -> None:
    from toolnexus.mcp.convert import check_tool, listing_surface

    entry = {"name": "web.search", "inputSchema": {"type": "object"}, "description": "d"}
    assert check_tool(entry, None) is None
    surface = listing_surface({"tools": [entry]}, "2025-11-25")
    assert surface is not None and check_tool(entry, surface) is None


@pytest.mark.anyio
async def test_one_bad_tool_does_not_sink_its_server() -> None:
    server = McpServer(stdio("bad", "bad_tools.py", connect_timeout=30), workspace=SERVERS)
    try:
        await server.start()
        assert sorted(t.name for t in server.tools()) == ["good_a", "good_b", "web_search"]
        assert (await call(server, "web_search", x=3)).content == "web search got 3"
        assert (await call(server, "good_b", x=2)).content == "good_b got 2"
        skipped = {s.tool: s.reason for s in server.status.skipped}
        assert sorted(skipped) == [
            "#8",
            "bad\x07name",
            "bad_schema",
            "good_a",
            "no_schema",
            "not_object",
        ]
        assert "listed this name twice" in skipped["good_a"]
        assert "not a valid JSON Schema" in skipped["bad_schema"]
        as_dict = server.status.to_dict()["skipped"]
        assert {"tool": "no_schema", "reason": "it has no inputSchema"} in as_dict
    finally:
        await server.aclose()


@pytest.mark.anyio
async def test_long_answers_keep_head_and_tail_and_oversized_ones_are_refused() -> None:
    spec = stdio("big", "faults.py", max_output=1000, max_message=300_000, connect_timeout=30)
    server = McpServer(spec, workspace=SERVERS)
    try:
        await server.start()
        result = await call(server, "big", size=100_000)
        assert len(result.content) < 1100 and "characters cut" in result.content
        assert result.metadata["truncated"] is True
        assert result.structured is None and result.metadata["structured_dropped"] is True
        with pytest.raises(ToolError) as refused:
            await call(server, "big", size=400_000)
        assert "larger than its max_message" in refused.value.message
        assert (await call(server, "echo", text="still")).content == "still"
        assert server.status.restarts == 0  # refusing an answer does not cost the session
    finally:
        await server.aclose()


@pytest.mark.anyio
async def test_an_oversized_message_that_answers_no_call_breaks_the_stream() -> None:
    spec = stdio("flood", "faults.py", max_message=100_000, timeout=60, connect_timeout=30)
    server = McpServer(spec, workspace=SERVERS)
    try:
        await server.start()
        with anyio.fail_after(30), pytest.raises(ToolError) as caught:
            await tool(server, "flood").run({"size": 300_000}, ctx())
        assert "larger than max_message (100,000 bytes)" in caught.value.message
        assert server.status.state is McpServerState.CRASHED
        assert (await call(server, "echo", text="back")).metadata.get("restarted") is True
    finally:
        await server.aclose()


@pytest.mark.anyio
async def test_an_invalid_utf8_byte_does_not_jam_the_server() -> None:
    server = McpServer(stdio("utf", "faults.py", connect_timeout=30), workspace=SERVERS)
    try:
        await server.start()
        assert (await call(server, "bad_utf8")).content == "after the bad byte"
        assert (await call(server, "echo", text="next")).content == "next"
        assert server.status.restarts == 0
    finally:
        await server.aclose()


@pytest.mark.anyio
async def test_garbage_on_stdout_fails_the_call_at_once_and_restarts_the_server() -> None:
    spec = stdio("junk", "faults.py", timeout=60, connect_timeout=30)
    server = McpServer(spec, workspace=SERVERS)
    try:
        await server.start()
        with anyio.fail_after(30), pytest.raises(ToolError) as caught:
            await tool(server, "garbage").run({}, ctx())
        assert not isinstance(caught.value, ToolTimeout)
        assert "broke the MCP protocol" in caught.value.message
        assert "'this is not JSON-RPC'" in caught.value.message
        status = server.status
        assert status.state is McpServerState.CRASHED
        assert status.reason is not None and "not JSON-RPC" in status.reason
        result = await call(server, "echo", text="back")
        assert (result.content, result.metadata.get("restarted")) == ("back", True)
    finally:
        await server.aclose()


@pytest.mark.anyio
async def test_garbage_at_start_up_is_reported_as_such() -> None:
    spec = stdio("early", "faults.py", "--start-with", r"b'\xff\xfe\n'", connect_timeout=30)
    server = McpServer(spec, workspace=SERVERS)
    try:
        with pytest.raises(SourceError) as caught:
            await server.start()
        assert "broke the MCP protocol on stdout" in str(caught.value)
        assert "handshake" not in str(caught.value)
        assert server.status.state is McpServerState.FAILED
    finally:
        await server.aclose()


def test_http_statuses_are_named_with_what_to_do() -> None:
    from toolnexus.mcp.convert import describe_http_status

    assert "no token was sent" in describe_http_status((401, "Unauthorized", "u"))
    sent = describe_http_status((401, "Unauthorized", "u"), sent_token=True)
    assert "the token was refused" in sent and "no token was sent" not in sent
    in_json = describe_http_status((401, "Unauthorized", "u"), json_syntax=True)
    assert '"headers": {"Authorization": "Bearer ${TOKEN}"}' in in_json
    assert 'Authorization: "Bearer ${TOKEN}"' in describe_http_status((401, "Unauthorized", "u"))
    assert "refused" in describe_http_status((403, "Forbidden", "u"))
    assert "URL is likely wrong" in describe_http_status((404, "Not Found", "http://h/x"))
    assert "HTTP 502 Bad Gateway: the server failed" in describe_http_status(
        (502, "Bad Gateway", "")
    )


def _sdk_stand_in() -> BaseException:
    from mcp.shared.exceptions import MCPError

    return MCPError(code=-32603, message="Server returned an error response")


def test_the_sdks_http_stand_in_becomes_the_status() -> None:
    from toolnexus.mcp.convert import translate_error

    error = translate_error(
        _sdk_stand_in(),
        server="s",
        tool="t",
        timeout=None,
        http_status=(500, "Internal Server Error", ""),
    )
    assert "HTTP 500 Internal Server Error" in error.message and error.retryable
    denied = translate_error(
        _sdk_stand_in(), server="s", tool="t", timeout=None, http_status=(403, "Forbidden", "")
    )
    assert "HTTP 403" in denied.message and not denied.retryable


def test_a_refused_answer_and_a_broken_stream_are_explained() -> None:
    from mcp.shared.exceptions import MCPError

    from toolnexus.mcp.convert import translate_error
    from toolnexus.mcp.stdio import MESSAGE_TOO_LARGE

    big = translate_error(
        MCPError(code=MESSAGE_TOO_LARGE, message="x"), server="s", tool="t", timeout=None
    )
    assert "max_message" in big.message and not big.retryable
    sse = MCPError(code=-32000, message="SSE stream failed: event exceeded the 10 byte limit.")
    assert "max_message" in translate_error(sse, server="s", tool="t", timeout=None).message
    broken = translate_error(
        MCPError(code=-32000, message="Connection closed"),
        server="s",
        tool="t",
        timeout=None,
        broken="it wrote a line that is not JSON-RPC: 'x'",
    )
    assert "broke the MCP protocol during 't'" in broken.message and broken.retryable


# -- command line ---------------------------------------------------------------------------------


def _manifest_with_bad_tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.yaml"
    server = (
        f"{{command: {sys.executable}, args: ['{SERVERS / 'bad_tools.py'}'], connect_timeout: 60}}"
    )
    path.write_text(f"version: 1\nmcp_servers:\n  bad: {server}\n")
    return path


def test_doctor_and_validate_connect_list_skipped_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolnexus.cli import main

    path = _manifest_with_bad_tools(tmp_path)
    assert main(["doctor", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"mcp bad +ok +\d+\.\ds  3 tools\n", out), out  # with its start time
    assert "skipped 'bad_schema': its inputSchema is not a valid JSON Schema" in out
    assert "skipped 'no_schema': it has no inputSchema" in out

    assert main(["validate", "--connect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "not started" not in out
    assert "skipped 'not_object'" in out

    assert main(["validate", str(path)]) == 0
    assert "1 MCP server (not started)" in capsys.readouterr().out


def test_list_warns_about_skipped_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolnexus.cli import main

    assert main(["list", str(_manifest_with_bad_tools(tmp_path))]) == 0
    captured = capsys.readouterr()
    assert "good_a" in captured.out and "good_b" in captured.out
    assert "warning: MCP server 'bad' skipped tool 'no_schema': it has no inputSchema" in (
        captured.err
    )


def test_validate_connect_fails_when_a_server_does_not_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolnexus.cli import main

    path = tmp_path / "tools.yaml"
    path.write_text(f"version: 1\nmcp_servers:\n  gone: {{command: {tmp_path / 'nothing'}}}\n")
    assert main(["validate", "--connect", str(path)]) == 1
    out = capsys.readouterr().out
    assert "mcp gone" in out and "failed" in out and "not found" in out
