"""`toolnexus serve` speaking more of MCP, driven by the SDK's own client against real server
processes (stdio and streamable HTTP): what tools log reaches the client at the level it set,
annotations follow the tools' flags, and each answer to the approval question gets its own
message."""

from __future__ import annotations

import sys
import textwrap
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp import StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from ..test_serve import child_env
from .served import STARTUP, serve_http

WAIT = 30.0

TOOLS = '''
from toolnexus import ToolContext


def chatty(n: int, ctx: ToolContext) -> str:
    """Log once at each of four levels."""
    ctx.logger.debug("debug %d", n)
    ctx.logger.info("info %d", n)
    ctx.logger.warning("warning %d", n)
    ctx.logger.error("error %d", n)
    return "spoke"


def look(path: str) -> str:
    """Pretend to read something on the network."""
    return path
'''

MANIFEST = """
version: 1
name: protocol
tools:
  - name: chatty
    python: logtools:chatty
    read_only: true
    open_world: false
  - name: look
    python: logtools:look
    read_only: true
  - name: wipe
    command: [echo, wiped]
    destructive: true
    idempotent: true
  - name: deploy
    command: [echo, "deployed {target}"]
    parameters:
      type: object
      properties: {target: {type: string}}
      required: [target]
    approval: {default: ask}
"""


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("protocol")
    (folder / "logtools.py").write_text(textwrap.dedent(TOOLS).lstrip())
    path = folder / "tools.yaml"
    path.write_text(textwrap.dedent(MANIFEST).lstrip())
    return path


@pytest.fixture(scope="module")
def http_url(manifest: Path) -> Iterator[str]:
    """One `toolnexus serve --http` process (sessions) for the module."""
    with serve_http(manifest, child_env()) as url:
        yield url


class Logs:
    """A logging callback that records (level, data, logger) of every message."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any, str | None]] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.received.append((params.level, params.data, params.logger))

    def take(self) -> list[tuple[str, Any, str | None]]:
        taken, self.received = self.received, []
        return taken


@asynccontextmanager
async def client(transport: str, target: Any, **options: Any) -> AsyncIterator[mcp.Client]:
    """An SDK client of `toolnexus serve` over `transport` ("stdio": `target` is the manifest;
    "http": the URL)."""
    with anyio.fail_after(STARTUP):
        if transport == "stdio":
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "toolnexus", "serve", str(target)],
                env={"PYTHONPATH": child_env()["PYTHONPATH"]},
                cwd=Path(target).parent,
            )
            async with mcp.Client(params, read_timeout_seconds=WAIT, **options) as c:
                yield c
            return
        async with httpx2.AsyncClient(timeout=WAIT) as http:
            stream = streamable_http_client(target, http_client=http)
            async with mcp.Client(stream, read_timeout_seconds=WAIT, **options) as c:
                yield c


async def set_level(c: mcp.Client, level: types.LoggingLevel) -> None:
    with warnings.catch_warnings():  # deprecated as of 2026-07-28, current before it
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await c.set_logging_level(level)


def expected(*levels: str) -> list[tuple[str, str, str]]:
    return [(level, f"{level} 1", "chatty") for level in levels]


# --- logging --------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_handshake_clients_get_tool_logs_at_the_level_they_set(
    transport: str, manifest: Path, http_url: str
) -> None:
    logs = Logs()
    target = manifest if transport == "stdio" else http_url
    async with client(transport, target, mode="legacy", logging_callback=logs) as c:
        assert c.server_capabilities is not None and c.server_capabilities.logging is not None
        with anyio.fail_after(WAIT):
            result = await c.call_tool("chatty", {"n": 1})
            assert result.content[0].text == "spoke"  # type: ignore[union-attr]
            # Sent on the call's own stream, before its result: all there when it returns.
            assert logs.take() == expected("warning", "error")  # the default: warning

            await set_level(c, "debug")
            await c.call_tool("chatty", {"n": 1})
            assert logs.take() == expected("debug", "info", "warning", "error")

            await set_level(c, "error")
            await c.call_tool("chatty", {"n": 1})
            assert logs.take() == expected("error")

            await c.call_tool("look", {"path": "x"})  # a tool that logs nothing
            assert logs.take() == []


@pytest.mark.anyio
async def test_a_2026_client_gets_logs_only_when_its_request_asks(http_url: str) -> None:
    logs = Logs()
    async with client("http", http_url, logging_callback=logs, log_level="info") as c:
        assert c.protocol_version == "2026-07-28"
        with anyio.fail_after(WAIT):
            await c.call_tool("chatty", {"n": 1})
        assert logs.take() == expected("info", "warning", "error")
    async with client("http", http_url, logging_callback=logs) as c:
        with anyio.fail_after(WAIT):
            result = await c.call_tool("chatty", {"n": 1})
        assert not result.is_error
        assert logs.take() == []  # no opt-in on the request: nothing may be sent


# --- annotations ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_annotations_follow_each_tools_flags(manifest: Path) -> None:
    async with client("stdio", manifest, mode="legacy") as c:
        with anyio.fail_after(WAIT):
            listed = {t.name: t.annotations for t in (await c.list_tools()).tools}
    chatty, look, wipe = listed["chatty"], listed["look"], listed["wipe"]
    assert chatty is not None and look is not None and wipe is not None
    # Read-only: never destructive; open-world as the tool says (default: MCP's, true).
    assert (chatty.read_only_hint, chatty.destructive_hint, chatty.open_world_hint) == (
        True,
        False,
        False,
    )
    assert (look.read_only_hint, look.destructive_hint, look.open_world_hint) == (True, False, True)
    assert (wipe.read_only_hint, wipe.destructive_hint, wipe.idempotent_hint) == (False, True, True)


# --- approval answers -----------------------------------------------------------------------


def answering(action: str, content: dict[str, Any] | None) -> Any:
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return callback


ANSWERS = {
    "approved": ("accept", {"approve": True}, None),
    "unticked": ("accept", {"approve": False}, "without approving the call"),
    "empty": ("accept", {}, "accepted the approval question but sent no approval"),
    "declined": ("decline", None, "the user declined this call"),
    "cancelled": ("cancel", None, "dismissed the approval question without answering"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_answer_to_the_approval_question_is_told_as_it_was(
    http_url: str, mode: str
) -> None:
    for case, (action, content, message) in ANSWERS.items():
        callback = answering(action, content)
        async with client("http", http_url, mode=mode, elicitation_callback=callback) as c:
            with anyio.fail_after(WAIT):
                result = await c.call_tool("deploy", {"target": "prod"})
        text = result.content[0].text  # type: ignore[union-attr]
        if message is None:
            assert not result.is_error and text.strip() == "deployed prod", case
            continue
        assert result.is_error, case
        assert message in text, (case, text)
        if action != "decline":
            assert "declined" not in text, (case, text)


@pytest.mark.anyio
async def test_a_client_asking_for_more_does_not_change_what_the_application_logs(
    manifest: Path,
) -> None:
    """In process (the SDK's direct transport): the application keeps `toolnexus.tool` at
    warning; a client at debug gets all four records, the application's handler still two."""
    import logging

    from toolnexus import acreate_toolkit
    from toolnexus.serve.server import build_server

    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    app_logger = logging.getLogger("toolnexus.tool")
    collect = Collect()
    app_logger.addHandler(collect)
    before = app_logger.level
    app_logger.setLevel(logging.WARNING)
    logs = Logs()
    try:
        async with await acreate_toolkit(manifest) as toolkit:
            server = build_server(toolkit)
            async with mcp.Client(server, mode="legacy", logging_callback=logs) as c:
                await set_level(c, "debug")
                with anyio.fail_after(WAIT):
                    await c.call_tool("chatty", {"n": 1})
    finally:
        app_logger.removeHandler(collect)
        app_logger.setLevel(before)
    assert logs.take() == expected("debug", "info", "warning", "error")
    assert seen == ["warning 1", "error 1"]


@pytest.mark.anyio
async def test_logs_of_a_toolkit_on_its_own_loop_thread_arrive_before_the_result(
    manifest: Path,
) -> None:
    """`create_toolkit` runs calls on a private loop thread: the records cross to the
    server's loop and are all sent before the call's result."""
    from toolnexus import create_toolkit
    from toolnexus.serve.server import build_server

    logs = Logs()
    with create_toolkit(manifest) as toolkit:
        async with mcp.Client(build_server(toolkit), mode="legacy", logging_callback=logs) as c:
            await set_level(c, "info")
            for n in range(3):
                with anyio.fail_after(WAIT):
                    await c.call_tool("chatty", {"n": n})
                assert logs.take() == [
                    (level, f"{level} {n}", "chatty") for level in ("info", "warning", "error")
                ]
