"""The in-process store: what a toolkit uses unless told to share state."""

from __future__ import annotations

import time
from collections import OrderedDict

__all__ = ["MemoryState"]

_PRUNE_AT = 10_000
"""Buckets kept before the full ones are dropped (a bucket whose time is past is full anyway)."""


class MemoryState:
    """State kept in this process's memory, for one toolkit. Nothing to run, nothing shared.

    Runs on one event loop: each method completes without awaiting, so a reservation is atomic.
    """

    def __init__(self, *, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        """Values kept at most (least recently used go first): bounds a cache's memory."""
        self._tat: dict[str, float] = {}
        """Per bucket: the theoretical arrival time of the next call (GCRA)."""
        self._values: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    @property
    def url(self) -> str:
        return "memory://"

    async def reserve(
        self, key: str, *, interval: float, burst: int, max_wait: float | None
    ) -> tuple[bool, float]:
        now = time.monotonic()
        if len(self._tat) > _PRUNE_AT:  # per-caller keys come and go: forget the idle ones
            self._tat = {k: t for k, t in self._tat.items() if t > now}
        return gcra(self._tat, key, now=now, interval=interval, burst=burst, max_wait=max_wait)

    async def get(self, key: str) -> bytes | None:
        hit = self._values.get(key)
        if hit is None:
            return None
        if hit[0] <= time.monotonic():
            del self._values[key]
            return None
        self._values.move_to_end(key)
        return hit[1]

    async def put(self, key: str, value: bytes, *, ttl: float) -> None:
        self._values[key] = (time.monotonic() + ttl, value)
        self._values.move_to_end(key)
        while len(self._values) > self.max_entries:
            self._values.popitem(last=False)

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        self._tat.clear()
        self._values.clear()


def gcra(
    tat: dict[str, float],
    key: str,
    *,
    now: float,
    interval: float,
    burst: int,
    max_wait: float | None,
) -> tuple[bool, float]:
    """One reservation of the generic cell rate algorithm, the same arithmetic as the Redis
    script: a full bucket of `burst` calls, refilled one per `interval`; each call takes the
    next free slot and learns how long until it comes; nothing is taken when that is more than
    `max_wait`."""
    start = max(tat.get(key, now), now)
    wait = max(0.0, start + interval - now - burst * interval)
    if max_wait is not None and wait > max_wait:
        return False, wait
    tat[key] = start + interval
    return True, wait
