"""The ASGI pieces the serve middleware shares: the type of the app each wraps, and the one
JSON answer it writes straight to ASGI (refusals, drain, not started), which has the same
headers whoever refuses the request."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

__all__ = ["ASGIApp", "send_json"]

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]
"""An ASGI application (scope, receive, send), as the serve middleware wraps one."""


async def send_json(
    send: Callable[[Any], Awaitable[None]],
    status: int,
    body: Any,
    *,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Answer with `body` as JSON, its length, and `headers`."""
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
