"""The in-process store and the middleware options that reach it."""

from __future__ import annotations

import pytest


def test_in_process_buckets_forget_idle_keys_and_keep_busy_ones() -> None:
    import asyncio

    from toolnexus.state import memory

    store = memory.MemoryState()

    async def run() -> None:
        for n in range(memory._PRUNE_AT + 1):
            await store.reserve(f"idle{n}", interval=1e-9, burst=1, max_wait=None)
        await store.reserve("busy", interval=3600.0, burst=1, max_wait=None)
        assert await store.reserve("busy", interval=3600.0, burst=1, max_wait=0) == (
            False,
            pytest.approx(3600.0, abs=5),
        )

    asyncio.run(run())
    assert "busy" in store._tat and len(store._tat) < memory._PRUNE_AT


def test_a_bad_duration_names_its_option() -> None:
    from toolnexus import ConfigError
    from toolnexus.middleware import cache, rate_limit

    with pytest.raises(ConfigError, match=r"^per: "):
        rate_limit(3, per="soon")
    with pytest.raises(ConfigError, match=r"^max_wait: "):
        rate_limit(3, max_wait="later")
    with pytest.raises(ConfigError, match=r"^ttl: "):
        cache("forever")
