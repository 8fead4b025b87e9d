"""The in-process store: what a toolkit uses unless told to share state."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["MemoryState"]

_PRUNE_AT = 10_000
"""Buckets kept before the full ones are dropped (a bucket whose time is past is full anyway)."""
_SWEEP_FIRST = 64
"""Claims kept before the first sweep of ended ones; later sweeps wait for the record to double,
so each claim costs O(1) on average however many are live."""


class MemoryState:
    """State kept in this process's memory, for one toolkit. Nothing to run, nothing shared.

    Runs on one event loop: each method completes without awaiting, so a reservation is atomic.
    """

    def __init__(self, *, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        """Values kept at most (least recently used go first): bounds a cache's memory."""
        self._tat: dict[str, int] = {}
        """Per bucket: the theoretical arrival time of the next call (GCRA), in nanoseconds of
        the monotonic clock: whole numbers, so no rounding can make a bucket with room wait."""
        self._values: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._claims: dict[str, float] = {}
        """Per claimed key: when its claim ends (monotonic seconds). Never evicted before then,
        unlike values: a record dropped early would let its key be claimed twice."""
        self._sweep_at = _SWEEP_FIRST

    @property
    def url(self) -> str:
        return "memory://"

    async def reserve(
        self, key: str, *, interval: float, burst: int, max_wait: float | None
    ) -> tuple[bool, float]:
        now = time.monotonic_ns()
        if len(self._tat) > _PRUNE_AT:  # per-caller keys come and go: forget the idle ones
            self._tat = {k: t for k, t in self._tat.items() if t > now}
        step = round(interval * 1e9)
        limit = None if max_wait is None else round(max_wait * 1e9)
        return gcra(self._tat, key, now=now, interval=step, burst=burst, max_wait=limit)

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

    async def update(
        self, key: str, change: Callable[[bytes | None], bytes | None], *, ttl: float | None = None
    ) -> bytes | None:
        old = await self.get(key)
        new = change(old)  # no await in between: nothing else runs on this loop meanwhile
        if new is None:
            await self.delete(key)
        elif new is not old and new != old:
            await self.put(key, new, ttl=math.inf if ttl is None else ttl)
        return new

    async def touch(self, key: str, *, ttl: float) -> bool:
        if await self.get(key) is None:  # get drops it when it has expired
            return False
        self._values[key] = (time.monotonic() + ttl, self._values[key][1])
        return True

    async def claim(self, key: str, *, ttl: float) -> bool:
        now = time.monotonic()
        if len(self._claims) >= self._sweep_at:  # drop ended claims once the record doubled
            self._claims = {k: t for k, t in self._claims.items() if t > now}
            self._sweep_at = max(_SWEEP_FIRST, 2 * len(self._claims))
        ends = self._claims.get(key)
        if ends is not None and ends > now:
            return False
        self._claims[key] = now + ttl
        return True

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        self._tat.clear()
        self._values.clear()
        self._claims.clear()


def gcra(
    tat: dict[str, int],
    key: str,
    *,
    now: int,
    interval: int,
    burst: int,
    max_wait: int | None,
) -> tuple[bool, float]:
    """One reservation of the generic cell rate algorithm, the same arithmetic as the Redis
    script: a full bucket of `burst` calls, refilled one per `interval`; each call takes the
    next free slot and learns how long until it comes (in seconds); nothing is taken when that
    is more than `max_wait`. Times are whole nanoseconds, as the Redis script's are whole
    microseconds: with fractions, `start + interval - now - ...` around a large clock value left
    a rounding crumb above 0, and `max_wait: 0` refused a bucket's first call."""
    start = max(tat.get(key, now), now)
    wait = max(0, start - now - (burst - 1) * interval)
    if max_wait is not None and wait > max_wait:
        return False, wait / 1e9
    tat[key] = start + interval
    return True, wait / 1e9
