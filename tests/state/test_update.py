"""`StateBackend.update`, the compare-and-set the OAuth token store is built on: in process
and on a real redis-server, where writers on separate connections race."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from toolnexus.state import StateBackend, open_state

from .conftest import RedisServer

pytestmark = pytest.mark.anyio

WAIT = 30.0


def _add_one(raw: bytes | None) -> bytes:
    return str(int(raw or b"0") + 1).encode()


async def _semantics(store: StateBackend) -> None:
    assert await store.update("k", lambda raw: raw) is None  # nothing, nothing written
    assert await store.get("k") is None
    assert await store.update("k", lambda raw: b"1" if raw is None else raw + b"!") == b"1"
    assert await store.update("k", lambda raw: (raw or b"") + b"!") == b"1!"
    assert await store.get("k") == b"1!"
    assert await store.update("k", lambda raw: None) is None  # None deletes
    assert await store.get("k") is None
    # A value written with an expiry is gone after it; one left unchanged keeps that expiry.
    assert await store.update("short", lambda raw: b"x", ttl=0.2) == b"x"
    assert await store.update("short", lambda raw: raw) == b"x"
    with anyio.fail_after(WAIT):
        while await store.get("short") is not None:
            await asyncio.sleep(0.05)


async def test_update_in_process() -> None:
    store = open_state("memory://")
    await _semantics(store)
    await asyncio.gather(*(store.update("n", _add_one) for _ in range(50)))
    assert await store.get("n") == b"50"


async def test_update_on_redis_retries_on_what_another_writer_wrote(
    redis_server: RedisServer,
) -> None:
    """Two stores (two connections, as two replicas) add one 25 times each, all at once:
    every read-change-write that raced another is made again, so none is lost."""
    first, second = open_state(redis_server.url), open_state(redis_server.url)
    calls = 0

    def counted(raw: bytes | None) -> bytes:
        nonlocal calls
        calls += 1
        return _add_one(raw)

    try:
        with anyio.fail_after(WAIT):
            await _semantics(first)
            await asyncio.gather(
                *(store.update("n", counted) for store in (first, second) for _ in range(25))
            )
        assert await second.get("n") == b"50"
        assert calls > 50  # some ran again: the race was real
    finally:
        await first.aclose()
        await second.aclose()


async def test_update_on_an_unreachable_redis_names_it(redis_server: RedisServer) -> None:
    from toolnexus.errors import StateUnavailable

    store = open_state(redis_server.url)
    redis_server.stop()
    try:
        with anyio.fail_after(WAIT), pytest.raises(StateUnavailable, match="cannot reach redis"):
            await store.update("k", lambda raw: b"1")
    finally:
        await store.aclose()
