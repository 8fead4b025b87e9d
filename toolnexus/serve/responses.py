"""The one JSON answer the serve middleware writes straight to ASGI (refusals, drain, not
started): every such answer has the same headers, whoever refuses the request."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = ["send_json"]


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
