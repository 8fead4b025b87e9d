"""An MCP server whose `tools/list` holds malformed entries among good ones, over stdio.

The SDK's server refuses to send a malformed listing, so the bad entries are spliced into the
answer on its way out (after the SDK serialized the good ones): a name with a control
character, an
`inputSchema` that is not valid JSON Schema, one that is not an object schema, one missing, an
entry that is not an object, and a name listed twice.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse

OBJECT: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}}}
TYPO: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "strin"}}}
BAD: list[Any] = [
    {"name": "bad\x07name", "inputSchema": OBJECT},
    {"name": "bad_schema", "inputSchema": TYPO},
    {"name": "not_object", "inputSchema": {"type": "string"}},
    {"name": "no_schema", "description": "no inputSchema at all"},
    "not a tool",
    {"name": "good_a", "inputSchema": OBJECT, "description": "a second good_a"},
]

server = MCPServer("bad-tools", version="1.0")


@server.tool()
def good_a(x: int = 0) -> str:
    """A good tool."""
    return f"good_a got {x}"


@server.tool()
def good_b(x: int = 0) -> str:
    """Another good tool."""
    return f"good_b got {x}"


@server.tool(name="web search")
def web_search(x: int = 0) -> str:
    """A name outside MCP's recommended characters: kept, under a sanitized name."""
    return f"web search got {x}"


async def main() -> None:
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), anyio.create_task_group() as tg:
        send, receive = anyio.create_memory_object_stream[SessionMessage](0)

        async def splice() -> None:
            async with receive:
                async for item in receive:
                    message = item.message
                    if isinstance(message, JSONRPCResponse) and "tools" in message.result:
                        message.result["tools"] = [*message.result["tools"], *BAD]
                    await write.send(item)

        tg.start_soon(splice)
        await lowlevel.run(read, send, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
