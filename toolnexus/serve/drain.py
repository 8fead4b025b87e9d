"""Graceful drain: on SIGTERM a served toolkit stops taking new sessions, lets the calls in
flight finish, then exits.

A Kubernetes rollout (or any orchestrator) sends SIGTERM and, a grace period later, SIGKILL.
uvicorn's own shutdown closes the listening socket at once and then waits for open connections,
which on streamable HTTP include every session's long-lived event stream: a client whose call is
still running loses the connection it needs for its next request, and the server waits on
streams that never end. Draining first keeps the server whole while its calls finish: new
sessions are refused with 503 (the load balancer sends them to another replica, and `/healthz`
says `draining` so it stops routing here), requests of open sessions are still served, and only
when no request to the MCP endpoint is in flight (or the grace period is over) does uvicorn's
shutdown begin. A second signal exits at once.

What counts as a new session: a handshake-era `initialize` request. Clients of 2026-07-28 have
no handshake and no session, so each of their requests is served until the server stops; the
failing `/healthz` is what turns them to other replicas.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from .responses import send_json

if TYPE_CHECKING:
    import uvicorn

__all__ = ["DEFAULT_GRACE", "Drain", "draining_server"]

_PEEK = 64 * 1024
"""Bytes of a request body read to tell an `initialize` apart; a longer body is not one."""

DEFAULT_GRACE = 25.0
"""Seconds a drain waits for calls in flight: under Kubernetes' default 30 s between SIGTERM
and SIGKILL, leaving time for uvicorn's own shutdown."""

_Scope = MutableMapping[str, Any]
_ASGIApp = Callable[[_Scope, Any, Any], Awaitable[None]]


class Drain:
    """Whether the server is draining, and how many requests to the MCP endpoint are in flight.

    `middleware` counts the requests and refuses new sessions while draining; `/healthz` reads
    `draining`; the server's signal handling waits on `idle`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.draining = False
        self.inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def middleware(self, app: _ASGIApp) -> _ASGIApp:
        """An ASGI middleware in front of `app` (Starlette's `Middleware(drain.middleware)`)."""

        async def counted(scope: _Scope, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["path"] != self.path:
                await app(scope, receive, send)
                return
            if self.draining and scope["method"] == "POST":
                body, receive = await _peek(receive)
                if _opens_session(body):
                    await _refuse_new_session(send)
                    return
            self.inflight += 1
            self._idle.clear()
            try:
                await app(scope, receive, send)
            finally:
                self.inflight -= 1
                if self.inflight == 0:
                    self._idle.set()

        return counted

    async def wait_idle(self, grace: float) -> bool:
        """Wait until no request is in flight, at most `grace` seconds; True when idle."""
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
        except TimeoutError:
            return False
        return True


async def _peek(receive: Any) -> tuple[bytes, Any]:
    """The start of a request's body (up to `_PEEK` bytes), and a `receive` that replays it."""
    messages = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body") or size > _PEEK:
            break
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    pending = iter(messages)

    async def replay() -> Any:
        return next(pending, None) or await receive()

    return body, replay


def _opens_session(body: bytes) -> bool:
    """Whether a JSON-RPC body is (or, in a batch, holds) an `initialize` request."""
    if len(body) > _PEEK:
        return False
    try:
        message = json.loads(body)
    except ValueError:
        return False
    batch = message if isinstance(message, list) else [message]
    return any(isinstance(m, dict) and m.get("method") == "initialize" for m in batch)


async def _refuse_new_session(send: Any) -> None:
    detail = (
        "this server is shutting down and takes no new sessions; connect again (another "
        "replica will answer)"
    )
    headers = [(b"retry-after", b"1"), (b"connection", b"close")]
    await send_json(send, 503, {"error": "draining", "detail": detail}, headers=headers)


def draining_server(config: uvicorn.Config, drain: Drain, grace: float) -> uvicorn.Server:
    """A uvicorn server whose first SIGTERM or SIGINT drains before it shuts down."""
    import uvicorn

    class _Draining(uvicorn.Server):
        _loop: asyncio.AbstractEventLoop | None = None

        async def serve(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            loop = self._loop
            if drain.draining or loop is None:  # a second signal, or not started: now
                super().handle_exit(sig, frame)
                return
            drain.draining = True
            # A signal handler runs between any two bytecodes of the loop's thread: hand the
            # wait to the loop through its signal-safe door.
            loop.call_soon_threadsafe(lambda: loop.create_task(self._finish(sig, frame)))

        async def _finish(self, sig: int, frame: Any) -> None:
            await drain.wait_idle(grace)
            super().handle_exit(sig, frame)

    return _Draining(config)
