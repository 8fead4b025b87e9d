"""What a served tool logs reaches the MCP client as `notifications/message` (`toolnexus serve`).

A tool logs through `ctx.logger` (`ToolContext.logger`). For a call that comes over MCP, the
server gives that call a logger of its own whose records are sent to the client that made the
call, on that call's stream (so they arrive before its result), at or above the level the
client asked for:

- handshake-era connections (2025-11-25 and older) set it with `logging/setLevel`; until they
  do, `DEFAULT_LEVEL` (warning) applies, the level Python itself shows by default;
- 2026-07-28 connections ask per request (`_meta["io.modelcontextprotocol/logLevel"]`); a
  request that does not ask gets no log messages, as that revision requires.

The records still go to `toolnexus.tool` as far as its level lets them, so the application's
own logging sees what it saw before. Sending never blocks the tool: records are queued (at most
`MAX_PENDING` per call; the rest are counted and reported in one last message) and sent in
order by a task on the server's loop, and the call's result waits until they are all sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    import mcp.types

    from ..base import Result
    from ..middleware import Call, Middleware, Next

__all__ = ["DEFAULT_LEVEL", "MAX_PENDING", "ClientLogLevels", "forward_logs", "mcp_level"]

DEFAULT_LEVEL: Final = "warning"
"""The level of a handshake-era connection that never sent `logging/setLevel`."""
MAX_PENDING: Final = 1000
"""Log messages of one call waiting to be sent; more are dropped (and counted)."""

PYTHON_LEVELS: Final[dict[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": 25,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": 60,
    "emergency": 70,
}
"""MCP's levels (RFC 5424, ascending) and the Python level each starts at."""
_LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"


def mcp_level(levelno: int) -> str:
    """The MCP level of a Python log record: the highest one whose Python level it reaches
    (a custom level between two counts as the lower)."""
    found = "debug"
    for name, number in PYTHON_LEVELS.items():
        if levelno >= number:
            found = name
    return found


class ClientLogLevels:
    """The level each handshake-era connection set with `logging/setLevel`.

    Kept per connection (weakly: a closed connection simply disappears), so on stateless
    HTTP, where every request is a connection of its own, `setLevel` cannot outlive its
    request and `DEFAULT_LEVEL` applies.
    """

    def __init__(self) -> None:
        self._levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def set_level(
        self, ctx: Any, params: mcp.types.SetLevelRequestParams
    ) -> mcp.types.EmptyResult:
        """The server's `logging/setLevel` handler."""
        from mcp import types

        # The low-level request context does not expose the connection; the session holds it
        # (as in serve's reload announcer).
        self._levels[ctx.session._connection] = params.level
        return types.EmptyResult()

    def threshold(self, ctx: Any) -> int | None:
        """The lowest Python level to send for this request, or None to send nothing."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            asked = (ctx.meta or {}).get(_LOG_LEVEL_META)
            return PYTHON_LEVELS.get(asked) if isinstance(asked, str) else None
        return PYTHON_LEVELS[self._levels.get(ctx.session._connection, DEFAULT_LEVEL)]


class _ToClient(logging.Handler):
    """Queues a call's records for the sender task, from whichever thread logs them."""

    def __init__(self, level: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(level)
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.queue: asyncio.Queue[logging.LogRecord | None] = asyncio.Queue(MAX_PENDING)
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if threading.get_ident() == self.loop_thread:
            # Queued now, not on the next turn of the loop: the call may end before that.
            self._put(record)
            return
        with contextlib.suppress(RuntimeError):  # the server's loop closed: nobody to tell
            self.loop.call_soon_threadsafe(self._put, record)

    def _put(self, record: logging.LogRecord | None) -> None:
        try:
            self.queue.put_nowait(record)
        except asyncio.QueueFull:
            self.dropped += record is not None


class _ToApplication(logging.Handler):
    """Hands a record to `toolnexus.tool` when that logger would have taken it itself, so
    the application's logging sees exactly what it saw before a client asked for more."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        if self.logger.isEnabledFor(record.levelno):
            self.logger.handle(record)


@contextlib.asynccontextmanager
async def forward_logs(
    ctx: Any, tool_name: str, threshold: int | None
) -> AsyncIterator[tuple[Middleware, ...]]:
    """Within the block, the middleware yielded gives the call a logger whose records at or
    above `threshold` go to the client of `ctx` (the SDK's request context); on leaving, every
    queued record has been sent. Yields no middleware when `threshold` is None."""
    if threshold is None:
        yield ()
        return
    from mcp import types

    parent = logging.getLogger("toolnexus.tool")
    call_logger = logging.Logger(f"toolnexus.tool.{tool_name}")  # not registered: no leak
    call_logger.propagate = False  # `_ToApplication` passes on what the application wants
    call_logger.addHandler(_ToApplication(parent))
    # Records the client wants must pass the logger's own gate, whatever the application
    # configured; each handler then applies its own level (the client's, the application's).
    call_logger.setLevel(min(threshold, parent.getEffectiveLevel()))
    handler = _ToClient(threshold, asyncio.get_running_loop())
    call_logger.addHandler(handler)

    async def send(level: str, data: Any) -> None:
        params = types.LoggingMessageNotificationParams(
            level=cast("types.LoggingLevel", level), data=data, logger=tool_name
        )
        notification = types.LoggingMessageNotification(params=params)
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    async def sender() -> None:
        reachable = True
        while (record := await handler.queue.get()) is not None:
            if not reachable:
                continue  # drain, so that the end of the call never waits on a full queue
            data = handler.format(record) if record.exc_info else record.getMessage()
            try:
                await send(mcp_level(record.levelno), data)
            except Exception as exc:  # noqa: BLE001 - the client went away; the result stands
                logging.getLogger("toolnexus").debug("log message not sent: %s", exc)
                reachable = False
        if handler.dropped and reachable:
            with contextlib.suppress(Exception):
                await send(
                    "warning", f"{handler.dropped} more log messages of this call were dropped"
                )

    async def give_logger(call: Call, next_step: Next) -> Result:
        call.ctx.logger = call_logger
        return await next_step(call)

    task = asyncio.create_task(sender())
    try:
        yield (give_logger,)
    finally:
        call_logger.removeHandler(handler)
        try:
            await handler.queue.put(None)  # after every record already queued
            await task
        except BaseException:  # the call itself was cancelled: its log messages with it
            task.cancel()
            raise
