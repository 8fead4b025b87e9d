"""One `tools/call` to an MCP server, with its deadline, progress and (for task tools) the
tasks API.

Progress. A progress token is sent (by the SDK, in the request's `_meta`) only when someone
listens: the call's progress callback, or `reset_timeout_on_progress`. Each notification is
handed to `ToolContext.report_progress`.

Timeouts. Without `reset_timeout_on_progress` the call gets `min(timeout, the call's time
left)`, enforced by the SDK. With it, `timeout` is an idle window that each progress
notification restarts, inside a hard limit of `max_total_timeout` (from the call's start) and
the call's own deadline: the scope here enforces both, and its cancellation makes the SDK send
`notifications/cancelled`. For a task tool, each `tasks/get` answer saying the task is still
working restarts the window too (the SDK delivers no progress after the task was created).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client

    from ..base import ToolContext

__all__ = ["call_tool", "set_log_level"]


async def call_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    *,
    ctx: ToolContext,
    timeout: float | None,
    reset_on_progress: bool,
    max_total: float | None,
    as_task: bool,
) -> mcp_types.CallToolResult:
    """The server's result for one call.

    Raises:
        TimeoutError: the call ran out of time (with `reset_on_progress`; otherwise the SDK's
            `MCPError` REQUEST_TIMEOUT).
        MCPError, and whatever the transport raises: translated by the caller.
    """
    start = time.monotonic()
    hard = math.inf
    if reset_on_progress:
        if max_total is not None:
            hard = start + max_total
        if ctx.deadline is not None:
            hard = min(hard, ctx.deadline)
    window = timeout if reset_on_progress else None
    scope = anyio.CancelScope(deadline=min(hard, start + window if window else math.inf))

    def alive() -> None:
        if window is not None:
            scope.deadline = min(hard, time.monotonic() + window)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        alive()
        await ctx.report_progress(progress, total, message)

    listener = on_progress if (ctx.progress is not None or reset_on_progress) else None
    sdk_timeout = None if reset_on_progress else timeout
    with scope:
        if as_task:
            from ._mcp_tasks import call_as_task

            return await call_as_task(
                client, name, arguments, progress=listener, timeout=sdk_timeout, alive=alive
            )
        return await client.call_tool(
            name, arguments, read_timeout_seconds=sdk_timeout, progress_callback=listener
        )
    raise TimeoutError  # the scope's deadline passed (it caught its own cancellation)


async def set_log_level(client: Client, level: str | None, server: str) -> None:
    """`logging/setLevel` on handshake-era sessions of servers that offer logging (2026-07-28
    sessions carry the level in each request's `_meta`, set up in `client_options`)."""
    import logging

    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if level is None or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return
    if client.server_capabilities.logging is None:
        logging.getLogger("toolnexus.mcp").info(
            "MCP server '%s' does not offer logging; `log_level: %s` is not sent", server, level
        )
        return
    try:
        await client.set_logging_level(level)  # type: ignore[arg-type]
    except MCPError as exc:
        logging.getLogger("toolnexus.mcp").warning(
            "MCP server '%s' refused logging/setLevel %s: %s", server, level, exc
        )
