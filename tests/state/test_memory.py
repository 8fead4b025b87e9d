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


@pytest.mark.parametrize("now", [1, 12_345_678_901_234, 1_700_000_000_123_456_789])
@pytest.mark.parametrize(("interval", "burst"), [(3600.0, 1), (1 / 3, 3), (0.1, 7)])
def test_a_bucket_with_room_grants_at_once_whatever_the_clock_reads(
    now: int, interval: float, burst: int
) -> None:
    # Seen in CI on a machine up 3.5 h: with float seconds, `start + interval - now - burst *
    # interval` left a rounding crumb above 0, and `max_wait: 0` refused a fresh bucket's first
    # call. Times are whole nanoseconds now, exact at any clock value.
    from toolnexus.state.memory import gcra

    step = round(interval * 1e9)
    tat: dict[str, int] = {}
    for _ in range(burst):  # the whole burst is granted at once, without waiting
        assert gcra(tat, "k", now=now, interval=step, burst=burst, max_wait=0) == (True, 0.0)
    granted, wait = gcra(tat, "k", now=now, interval=step, burst=burst, max_wait=0)
    assert not granted and wait == pytest.approx(interval)
