"""A low-level MCP server listing 7 tools in pages of 3 (cursors "3" and "6"), over stdio."""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

PAGE = 3
TOOLS = [
    types.Tool(
        name=f"tool_{i}",
        description=f"Tool number {i}",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    for i in range(7)
]


async def list_tools(
    ctx: ServerRequestContext[object], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    next_cursor = str(end) if end < len(TOOLS) else None
    return types.ListToolsResult(tools=TOOLS[start:end], next_cursor=next_cursor)


async def call_tool(
    ctx: ServerRequestContext[object], params: types.CallToolRequestParams
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{params.name} got {params.arguments}")]
    )


server = Server("paginated", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
