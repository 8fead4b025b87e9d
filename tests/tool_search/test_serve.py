"""`serve` with deferred tools: each MCP client session loads its own, and a search that finds
tools sends that session `notifications/tools/list_changed`."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp import StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client

from toolnexus import acreate_toolkit
from toolnexus.serve.server import build_server, http_app

from .conftest import forecast, hello, star_repo

WAIT = 30.0
STARTUP = 60.0
ROOT = Path(__file__).resolve().parents[2]


async def names(client: mcp.Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


@pytest.mark.anyio
async def test_a_search_makes_found_tools_appear_for_that_session_only() -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with await acreate_toolkit(
        extra_tools=[forecast, star_repo, hello], tool_search={"always": ["hello"]}
    ) as toolkit:
        server = build_server(toolkit)
        with anyio.fail_after(WAIT):
            async with (
                mcp.Client(server, mode="legacy", message_handler=on_message) as first,
                mcp.Client(server, mode="legacy") as second,
            ):
                assert await names(first) == ["hello", "tool_search"]
                found = await first.call_tool("tool_search", {"query": "star a repository"})
                assert not found.is_error
                assert "star_repo" in found.content[0].text  # type: ignore[union-attr]
                await changed.wait()
                assert await names(first) == ["hello", "star_repo", "tool_search"]
                assert await names(second) == ["hello", "tool_search"]
                # a deferred tool the session never searched still runs when called
                guessed = await second.call_tool("forecast", {"city": "Oslo"})
                assert guessed.content[0].text == "sunny in Oslo"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_search_that_finds_nothing_new_sends_no_notification() -> None:
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notes.append(message)

    async with await acreate_toolkit(
        extra_tools=[forecast, hello], tool_search={"always": ["hello"]}
    ) as toolkit:
        server = build_server(toolkit)
        with anyio.fail_after(WAIT):
            async with mcp.Client(server, mode="legacy", message_handler=on_message) as client:
                await client.call_tool("tool_search", {"query": "weather"})
                await client.call_tool("tool_search", {"query": "weather"})
                await client.call_tool("tool_search", {"query": "zebra"})
                await client.list_tools()  # a round trip: any notification has arrived
                assert len(notes) == 1


@pytest.mark.anyio
async def test_stateless_clients_see_every_tool() -> None:
    """A 2026-07-28 client has no session to keep loaded tools in: it is shown every tool,
    as without deferral (and no search tool)."""
    async with await acreate_toolkit(
        extra_tools=[forecast, hello], tool_search={"always": ["hello"]}
    ) as toolkit:
        server = build_server(toolkit)
        with anyio.fail_after(WAIT):
            async with mcp.Client(server) as client:
                assert await names(client) == ["forecast", "hello"]


@pytest.mark.anyio
async def test_stdio_serve_of_a_manifest_with_tool_search(tmp_path: Path) -> None:
    """`toolnexus serve tools.yaml` in a real subprocess, a real client over stdio."""
    (tmp_path / "tools.yaml").write_text(
        "version: 1\n"
        "tool_search: {always: [ping]}\n"
        "tools:\n"
        "  - {name: ping, description: Answer pong., command: [echo, pong]}\n"
        "  - {name: rotate_keys, description: Rotate the deploy keys., command: [echo, rotated]}\n"
    )
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolnexus", "serve", str(tmp_path / "tools.yaml")],
        env={
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        },
        cwd=tmp_path,
    )
    with anyio.fail_after(STARTUP):
        async with mcp.Client(params, mode="legacy", message_handler=on_message) as client:
            assert await names(client) == ["ping", "tool_search"]
            await client.call_tool("tool_search", {"query": "rotate deploy keys"})
            await changed.wait()
            assert await names(client) == ["ping", "rotate_keys", "tool_search"]
            done = await client.call_tool("rotate_keys", {})
            assert done.content[0].text.strip() == "rotated"  # type: ignore[union-attr]


@asynccontextmanager
async def in_process_http() -> AsyncIterator[tuple[httpx2.AsyncClient, str]]:
    """`http_app` of a searchable toolkit, served in process: an HTTP client and its base URL."""
    async with await acreate_toolkit(
        extra_tools=[forecast, star_repo, hello], tool_search={"always": ["hello"]}
    ) as toolkit:
        app = http_app(toolkit)
        transport = httpx2.ASGITransport(app)
        base = "http://127.0.0.1:8000"
        with anyio.fail_after(WAIT):
            async with (
                app.router.lifespan_context(app),
                httpx2.AsyncClient(transport=transport, base_url=base) as http,
            ):
                yield http, base


@pytest.mark.anyio
async def test_streamable_http_sessions_keep_their_own_loaded_tools() -> None:
    """`http_app` in process: each streamable HTTP session (handshake era) has its own state."""
    async with in_process_http() as (http, base):
        one = streamable_http_client(f"{base}/mcp", http_client=http)
        two = streamable_http_client(f"{base}/mcp", http_client=http)
        async with (
            mcp.Client(one, mode="legacy") as first,
            mcp.Client(two, mode="legacy") as second,
        ):
            await first.call_tool("tool_search", {"query": "weather forecast"})
            assert await names(first) == ["forecast", "hello", "tool_search"]
            assert await names(second) == ["hello", "tool_search"]


@pytest.mark.anyio
async def test_a_closed_sessions_state_is_forgotten() -> None:
    """Memory per server stays bounded: the state of a session that ended is not kept."""
    import gc

    from toolnexus.search import SearchState

    def alive() -> int:
        gc.collect()
        return sum(isinstance(o, SearchState) for o in gc.get_objects())

    async with in_process_http() as (http, base):
        before = alive()
        for _ in range(3):
            client = streamable_http_client(f"{base}/mcp", http_client=http)
            async with mcp.Client(client, mode="legacy") as session:
                await session.call_tool("tool_search", {"query": "weather forecast"})
                assert alive() == before + 1  # this session's state, while it lives
            await anyio.sleep(0.1)
        assert alive() <= before
