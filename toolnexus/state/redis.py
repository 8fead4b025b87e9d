"""The Redis store: state shared by every toolkit and replica pointed at one Redis.

redis-py (the `redis` extra) is imported here only, so `import toolnexus` never loads it.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import StateUnavailable, UsageError

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["RedisState"]

CONNECT_TIMEOUT_S = 1.0
"""How long to wait for a connection: an unreachable Redis fails the call quickly (a URL's
`?socket_connect_timeout=` overrides it)."""
COMMAND_TIMEOUT_S = 2.0
"""How long one command may take (`?socket_timeout=` overrides it)."""

_RESERVE = """
-- One reservation of the generic cell rate algorithm, in one round trip and atomic (a script
-- runs alone): a full bucket of ARGV[2] calls, one more every ARGV[1] microseconds; the call
-- takes the next free slot and learns how long until it comes. Redis's clock, not the
-- replicas': they need not agree on the time. Returns the wait in microseconds; when it is over
-- ARGV[3] (if that is >= 0), nothing is taken and the answer is -1 - wait.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local wait = (tat - now) - (burst - 1) * interval
if wait < 0 then wait = 0 end
if max_wait >= 0 and wait > max_wait then return -1 - math.floor(wait) end
local new = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000) + 1)
return math.floor(wait)
"""


def _import_redis() -> Any:
    try:
        import redis.asyncio
    except ImportError as exc:
        raise ImportError(
            "a redis:// state store needs redis-py: pip install 'toolnexus[redis]'"
        ) from exc
    return redis.asyncio


class RedisState:
    """A state store in Redis (redis-py's asyncio client, connected on first use).

    Its connections belong to the event loop that first used it: share one object between
    toolkits on one loop (`acreate_toolkit`); toolkits on loops of their own (`create_toolkit`)
    each take the URL.

    Keys start with `prefix` (default `toolnexus:`), so one Redis can serve other programs too.
    """

    def __init__(self, url: str, *, prefix: str = "toolnexus:") -> None:
        self._url = url
        self.prefix = prefix
        self._client: Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reserve: AsyncScript | None = None
        self._where = _where(url)
        _import_redis()  # a missing extra fails when the store is chosen, not on the first call

    @property
    def url(self) -> str:
        return _masked(self._url)

    def _redis(self) -> Redis:
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                raise UsageError(
                    "this RedisState is in use on another event loop (its connections belong "
                    "to that loop); give each toolkit the URL instead: state='redis://...'"
                )
            self._client = None  # that loop is gone, and its connections with it
        if self._client is None:
            self._loop = loop
            aioredis = _import_redis()
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            client: Redis = aioredis.Redis.from_url(
                self._url,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=COMMAND_TIMEOUT_S,
                # One retry: a pooled connection broken by a Redis restart is replaced at once,
                # while a Redis that is down fails the call after one short attempt more.
                retry=Retry(NoBackoff(), 1),
            )
            self._reserve = client.register_script(_RESERVE)
            self._client = client
        return self._client

    def _unavailable(self, exc: BaseException) -> StateUnavailable:
        reason = str(exc) or type(exc).__name__
        return StateUnavailable(f"cannot reach redis at {self._where} ({reason})")

    async def reserve(
        self, key: str, *, interval: float, burst: int, max_wait: float | None
    ) -> tuple[bool, float]:
        from redis.exceptions import RedisError

        self._redis()
        assert self._reserve is not None
        limit = -1 if max_wait is None else round(max_wait * 1e6)
        try:
            wait: Any = await self._reserve(
                keys=[self.prefix + key], args=[round(interval * 1e6), burst, limit]
            )
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        micros = int(wait)
        return (True, micros / 1e6) if micros >= 0 else (False, (-1 - micros) / 1e6)

    async def get(self, key: str) -> bytes | None:
        from redis.exceptions import RedisError

        try:
            value = await self._redis().get(self.prefix + key)
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return value.encode() if isinstance(value, str) else value

    async def put(self, key: str, value: bytes, *, ttl: float) -> None:
        from redis.exceptions import RedisError

        try:
            await self._redis().set(self.prefix + key, value, px=max(1, round(ttl * 1000)))
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc

    async def delete(self, key: str) -> None:
        from redis.exceptions import RedisError

        try:
            await self._redis().delete(self.prefix + key)
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc

    async def touch(self, key: str, *, ttl: float) -> bool:
        from redis.exceptions import RedisError

        try:  # PEXPIRE sets nothing on a missing key
            kept = await self._redis().pexpire(self.prefix + key, max(1, round(ttl * 1000)))
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return bool(kept)

    async def claim(self, key: str, *, ttl: float) -> bool:
        from redis.exceptions import RedisError

        try:  # SET NX PX: one atomic command, so two replicas never both take the key
            taken = await self._redis().set(
                self.prefix + key, b"1", nx=True, px=max(1, math.ceil(ttl * 1000))
            )
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return bool(taken)

    async def check(self) -> None:
        from redis.exceptions import RedisError

        try:
            await self._redis().ping()
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _where(url: str) -> str:
    """`host:port` (or the socket path) of a Redis URL, for messages: never the password."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    host = parts.hostname or "localhost"
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{parts.port or 6379}"


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
