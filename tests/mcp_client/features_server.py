"""An MCP server that talks back: progress, elicitation (form and URL), sampling, logging,
roots, and mixed content with annotations. stdio by default; `http PORT` for streamable HTTP;
`--legacy` answers only the initialize handshake (2025-11-25), where a server may send its own
requests in the middle of a call."""

from __future__ import annotations

import base64
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp_types import (
    Annotations,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    ImageContent,
    InputRequiredResult,
    NotificationParams,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()

server = MCPServer("features", version="1.0")


@server.tool()
async def work(steps: int, ctx: Context, pause: float = 0.0) -> str:
    """Reports progress for each step, pausing between steps."""
    for i in range(1, steps + 1):
        await anyio.sleep(pause)
        await ctx.report_progress(i, steps, f"step {i}")
    return f"did {steps} steps"


class Name(BaseModel):
    name: str


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Asks the user's name (form mode)."""
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name: {answer.action}"


@server.tool()
async def ask_prefs(ctx: Context) -> str:
    """Asks a form whose fields have defaults, and returns the content exactly as received
    (no model on this side to fill the defaults in)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "color": {"type": "string", "default": "blue"},
            "count": {"type": "integer", "default": 3},
            "notify": {"type": "boolean", "default": False},
        },
    }
    answer = await ctx.session.elicit_form("Preferences?", schema, ctx.request_id)
    return f"{answer.action}: {sorted((answer.content or {}).items())}"


_url_asked: set[str] = set()


@server.tool()
async def needs_url(key: str) -> str:
    """Refuses with -32042 (URL elicitation required) the first time for each key, then
    answers: the user has been to the page meanwhile."""
    if key not in _url_asked:
        _url_asked.add(key)
        page = ElicitRequestURLParams(
            message="Connect your account", url="https://example.test/connect", elicitation_id=key
        )
        raise UrlElicitationRequiredError([page])
    return f"connected {key}"


@server.tool(structured_output=False)
async def ask_by_input(ctx: Context) -> CallToolResult | InputRequiredResult:
    """Asks the user's name the 2026-07-28 way: an InputRequiredResult the client answers."""
    answer = (ctx.input_responses or {}).get("name")
    if not isinstance(answer, ElicitResult):
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        question = ElicitRequestFormParams(message="Your name?", requested_schema=schema)
        return InputRequiredResult(input_requests={"name": ElicitRequest(params=question)})
    name = (answer.content or {}).get("name") if answer.action == "accept" else answer.action
    return CallToolResult(content=[TextContent(text=f"hello {name}")])


left_behind: list[object] = []


@server.tool()
async def ask_and_leave(ctx: Context) -> str:
    """Asks the user's name and returns without waiting for the answer."""
    import asyncio

    left_behind.append(asyncio.get_running_loop().create_task(ctx.elicit("Still there?", Name)))
    await anyio.sleep(0.5)
    return "left"


@server.tool()
async def ask_url(ctx: Context) -> str:
    """Sends the user to a URL (URL mode)."""
    answer = await ctx.elicit_url("Log in please", "https://example.test/login", "el-1")
    return f"url answer: {answer.action}"


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model for a completion (sampling)."""
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(text=f"Summarize: {text}"))],
        max_tokens=50,
        related_request_id=ctx.request_id,
    )
    content = result.content
    return f"model {result.model} said: {getattr(content, 'text', content)}"


@server.tool()
async def chatty(ctx: Context) -> str:
    """Logs at several levels."""
    await ctx.debug("a debug line")
    await ctx.info("an info line")
    await ctx.warning("a warning line")
    await ctx.error({"code": 7})
    return "logged"


@server.tool()
async def my_roots(ctx: Context) -> str:
    """Lists the client's roots."""
    listing = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in listing.roots)


roots_changes: list[None] = []


async def _roots_changed(ctx: object, params: NotificationParams) -> None:
    roots_changes.append(None)


server._lowlevel_server.add_notification_handler(
    "notifications/roots/list_changed", NotificationParams, _roots_changed
)


@server.tool()
async def roots_changed() -> int:
    """How many times the client said its roots changed."""
    return len(roots_changes)


@server.tool()
async def mixed() -> CallToolResult:
    """Text, image, text: in that order, with annotations."""
    return CallToolResult(
        content=[
            TextContent(text="before"),
            ImageContent(
                data=PNG,
                mime_type="image/png",
                annotations=Annotations(audience=["user"], priority=0.9),
            ),
            TextContent(text="the image above", annotations=Annotations(audience=["assistant"])),
        ]
    )


@server.tool()
async def capabilities(ctx: Context) -> str:
    """The capabilities the client declared that can make a server ask: sorted, comma-joined."""
    caps = ctx.client_capabilities
    declared = [name for name in ("elicitation", "sampling", "roots") if getattr(caps, name, None)]
    return ",".join(declared) or "none"


@server.tool()
async def whoami(ctx: Context) -> str:
    """The client's name and version, as it introduced itself."""
    info = ctx.session.client_params.client_info if ctx.session.client_params else None
    return f"{info.name} {info.version}" if info else "unknown"


async def run_legacy_stdio() -> None:
    """stdio in handshake-only mode, as servers built on older SDKs are."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(
            low, read, write, lifespan_state=state, init_options=low.create_initialization_options()
        )


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--legacy" in args:
        anyio.run(run_legacy_stdio)
    elif args and args[0] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(args[1]))
    else:
        server.run()
