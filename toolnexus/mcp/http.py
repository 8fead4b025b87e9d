"""A size guard for MCP over streamable HTTP: a JSON answer longer than `max_message` is refused
as its bytes arrive, before the SDK reads it whole.

Server-sent events are bounded by the SDK itself (`max_sse_event_size`, per event; the stream of
a session lives long and may carry any number of events). A plain JSON answer has no such
limit: this transport counts its bytes and raises `httpx2.StreamError`, which the SDK turns into
an error for the one request that answer belonged to (its connection stays usable).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

__all__ = ["BoundedTransport"]


class _AnswerTooLarge(httpx2.StreamError):
    """An HTTP answer longer than the server's `max_message`."""


class BoundedTransport(httpx2.AsyncBaseTransport):
    """`httpx2.AsyncHTTPTransport`, with JSON response bodies cut off past `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return response
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        response.stream = _Bounded(stream, self._limit, response.headers.get("content-length"))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, declared: str | None) -> None:
        self._inner = inner
        self._limit = limit
        self._declared = int(declared) if declared and declared.isdigit() else 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared > self._limit:
            raise _AnswerTooLarge(self._message(self._declared))
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise _AnswerTooLarge(self._message(seen))
            yield chunk

    def _message(self, size: int) -> str:
        # "byte limit" is the phrase `translate_error` knows, as in the SDK's SSE limit.
        return f"the answer ({size:,}+ bytes) is past the {self._limit:,} byte limit (max_message)"

    async def aclose(self) -> None:
        await self._inner.aclose()
