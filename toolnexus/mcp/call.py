"""One `tools/call` to an MCP server, with its deadline, progress and (for task tools) the
tasks API.

Progress. A progress token is sent (by the SDK, in the request's `_meta`) only when someone
listens: the call's progress callback, or `reset_timeout_on_progress`. Each notification is
handed to `ToolContext.report_progress` through a `_Relay`: the SDK starts a task per
notification, so a slow or hanging callback would otherwise run many times at once, out of
order, and outlive the call (one task per notification of a flooding server). The relay runs
the callback once at a time, in order, queues at most `_MAX_QUEUED` reports (the oldest go),
and when the call ends lets the running callback finish for at most `_DRAIN` seconds before
cancelling it: no report reaches the callback after the call returned.

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
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client

    from ..base import ToolContext

__all__ = ["call_tool", "set_log_level"]

_MAX_QUEUED = 100
"""Progress reports waiting for a busy callback; older ones are dropped beyond this."""
_DRAIN = 1.0
"""Seconds a call's result waits for its running progress callback before cancelling it."""


class _Relay:
    """A call's progress reports to `ToolContext.report_progress`, one at a time and in order,
    never after the call (see the module doc)."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.pending: deque[tuple[float, float | None, str | None]] = deque(maxlen=_MAX_QUEUED)
        self.closed = False
        self.scope: anyio.CancelScope | None = None
        self.idle: anyio.Event | None = None

    async def offer(self, progress: float, total: float | None, message: str | None) -> None:
        if self.closed:
            return
        self.pending.append((progress, total, message))
        if self.idle is not None:
            return  # the running delivery takes it
        self.idle = anyio.Event()
        try:
            with anyio.CancelScope() as self.scope:
                while self.pending:
                    await self.ctx.report_progress(*self.pending.popleft())
        finally:
            self.idle.set()
            self.idle = self.scope = None

    async def drain(self) -> None:
        """Take no more reports; wait (bounded) for the ones queued, then cancel the delivery
        and wait for it to end."""
        self.closed = True
        idle = self.idle
        if idle is None:
            return
        with anyio.move_on_after(_DRAIN):
            await idle.wait()
        self.close()
        with anyio.move_on_after(_DRAIN):  # the cancelled callback's own clean-up
            await idle.wait()

    def close(self) -> None:
        self.closed = True
        self.pending.clear()
        if self.scope is not None:
            self.scope.cancel()


def call_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    *,
    ctx: ToolContext,
    timeout: float | None,
    reset_on_progress: bool,
    max_total: float | None,
    as_task: bool,
) -> Awaitable[mcp_types.CallToolResult]:
    """The server's result for one call (await it).

    Raises:
        TimeoutError: the call ran out of time (with `reset_on_progress`; otherwise the SDK's
            `MCPError` REQUEST_TIMEOUT).
        MCPError, and whatever the transport raises: translated by the caller.
    """
    if not (reset_on_progress or as_task or ctx.progress is not None):
        # Nobody listens for progress and the SDK enforces the timeout: no scope, relay or
        # progress token to set up, and no coroutine of ours around the SDK's (the common
        # call, and the one `benchmarks/` compares with a direct SDK call).
        return client.call_tool(name, arguments, read_timeout_seconds=timeout)
    return _call_tool_listening(
        client,
        name,
        arguments,
        ctx=ctx,
        timeout=timeout,
        reset_on_progress=reset_on_progress,
        max_total=max_total,
        as_task=as_task,
    )


async def _call_tool_listening(
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
    """`call_tool` with progress relayed, the idle timeout restarted by it, or as a task."""
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

    relay = _Relay(ctx)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if not relay.closed:
            alive()
        await relay.offer(progress, total, message)

    listener = on_progress if (ctx.progress is not None or reset_on_progress) else None
    sdk_timeout = None if reset_on_progress else timeout
    result: mcp_types.CallToolResult | None = None
    try:
        with scope:
            if as_task:
                from .tasks import call_as_task

                result = await call_as_task(
                    client, name, arguments, progress=listener, timeout=sdk_timeout, alive=alive
                )
            else:
                result = await client.call_tool(
                    name, arguments, read_timeout_seconds=sdk_timeout, progress_callback=listener
                )
        if result is None:
            raise TimeoutError  # the scope's deadline passed (it caught its own cancellation)
        await relay.drain()
        return result
    finally:
        relay.close()


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
