"""An MCPServer with one tool per behaviour `tests/sources/test_mcp.py` checks.

Run: `python everything.py [--http PORT] [--legacy] [--refuse-start-if FILE]`.

- stdio by default; `--http PORT` serves streamable HTTP on 127.0.0.1:PORT at `/mcp`.
- `--legacy` answers `server/discover` with handshake-era versions only, so an auto-mode client
  falls back to `initialize` (a 2025-era session, where `tools/list_changed` arrives as a plain
  notification rather than through `subscriptions/listen`).
- `--refuse-start-if FILE` exits with status 3 before serving when FILE exists: a server whose
  restart fails.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.mcpserver import Audio, Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV_HEADER = b"RIFF\x24\x00\x00\x00WAVEfmt "

server = MCPServer("everything", version="1.0")


@server.tool(
    title="Echo",
    annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers (structured output)."""
    return a + b


@server.tool(
    name="web.search",
    annotations=types.ToolAnnotations(destructive_hint=False, open_world_hint=False),
)
def web_search(query: str, limit: int = 3) -> str:
    """A tool whose MCP name is not a valid provider tool name."""
    return f"{limit} results for {query}"


@server.tool(annotations=types.ToolAnnotations(destructive_hint=True, idempotent_hint=False))
def delete_thing(thing_id: int) -> str:
    """Pretend to delete something."""
    return f"deleted {thing_id}"


@server.tool()
def media() -> list[types.ContentBlock | Image | Audio]:
    """Return one block of every kind."""
    return [
        types.TextContent(type="text", text="first"),
        Image(data=PNG_1X1, format="png"),
        Audio(data=WAV_HEADER, format="wav"),
        types.TextContent(type="text", text="second"),
        types.ResourceLink(
            type="resource_link", name="readme", uri="file:///readme.md", mime_type="text/markdown"
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="mem://note", mime_type="text/plain", text="embedded text"
            ),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="mem://blob",
                mime_type="application/octet-stream",
                blob=base64.b64encode(b"\x00\x01").decode(),
            ),
        ),
    ]


@server.tool()
def fail(message: str) -> str:
    """Fail with `message` (an isError result)."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "done"


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable in the server's process, or `<unset>`."""
    return os.environ.get(name, "<unset>")


@server.tool()
def write_file(path: str, text: str) -> str:
    """Write `text` to `path`; the error text when the write is refused."""
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise ToolError(f"write failed: {exc}") from exc
    return "written"


@server.tool()
def crash(marker: str = "") -> str:
    """Exit the server process at once (after creating `marker`, if given)."""
    if marker:
        Path(marker).write_text("crashed")
    sys.stdout.flush()
    os._exit(1)


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Register a new tool `name` and tell the client the tool list changed."""

    def added(x: int = 0) -> str:
        return f"{name}:{x}"

    server.add_tool(added, name=name, description=f"added at runtime as {name}")
    if ctx.protocol_version in ("2026-07-28",):
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


async def _serve_stdio_as_legacy() -> None:
    """Serve stdio as a server written before 2026-07-28 would: `server/discover` is unknown.

    The SDK's server decides a connection's era from the client's first request, so the probe
    is answered here, before the server sees it, and the client falls back to `initialize`.
    """
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp_types.jsonrpc import ErrorData, JSONRPCError, JSONRPCRequest

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), anyio.create_task_group() as tg:
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def filter_discover() -> None:
            async with send:
                async for item in read:
                    message = getattr(item, "message", None)
                    if isinstance(message, JSONRPCRequest) and message.method == "server/discover":
                        error = ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                        reply = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
                        await write.send(SessionMessage(reply))
                        continue
                    await send.send(item)

        tg.start_soon(filter_discover)
        await lowlevel.run(receive, write, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--refuse-start-if", default=None)
    options = parser.parse_args()
    if options.refuse_start_if and Path(options.refuse_start_if).exists():
        print("refusing to start: marker file exists", file=sys.stderr)
        sys.exit(3)
    if options.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    elif options.legacy:
        anyio.run(_serve_stdio_as_legacy)
    else:
        server.run()


if __name__ == "__main__":
    main()
