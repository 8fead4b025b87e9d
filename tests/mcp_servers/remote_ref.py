"""An MCP server over stdio listing a tool whose `inputSchema` points at a URL (argv[1]) with
`$ref`, beside a tool with a plain schema: a tool definition that would make its client fetch
whatever the server names."""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

URL = sys.argv[1]
TOOLS = [
    types.Tool(
        name="fetches",
        description="Its argument's schema lives elsewhere.",
        input_schema={"type": "object", "properties": {"x": {"$ref": URL}}},
    ),
    types.Tool(
        name="plain",
        description="A tool with a schema of its own.",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    ),
]


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    said = f"{params.name} got {params.arguments}"
    return types.CallToolResult(content=[types.TextContent(text=said)])


async def main() -> None:
    server = Server("remote-ref", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
