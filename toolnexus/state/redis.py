"""The Redis store: state shared by every toolkit and replica pointed at one Redis.

redis-py (the `redis` extra) is imported here only, so `import toolnexus` never loads it.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from ..errors import StateUnavailable, UsageError

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisState"]

CONNECT_TIMEOUT_S = 1.0
"""How long to wait for a connection: an unreachable Redis fails the call quickly (a URL's
`?socket_connect_timeout=` overrides it)."""
COMMAND_TIMEOUT_S = 2.0
"""How long one command may take (`?socket_timeout=` overrides it). Kept by `asyncio.timeout`
around each call, not by redis-py's socket timeout: with that set, redis-py sends every command
through `asyncio.wait_for`, a task of its own per command on Python 3.11."""
UPDATE_TIMEOUT_S = 10.0
"""How long one `update` may take, its retries included."""
UPDATE_TRIES = 100
"""Times `update` reads a key again after another writer changed it before giving up: a key
that changes this often is not a token record but a fault."""

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
        self._sha = hashlib.sha1(_RESERVE.encode()).hexdigest()
        """The reservation script's SHA1, as EVALSHA names it."""
        self._where = _where(url)
        given = parse_qs(urlsplit(url).query).get("socket_timeout")
        self._timeout = float(given[0]) if given else COMMAND_TIMEOUT_S
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
                socket_timeout=None,  # each call has a deadline of its own (`_command`)
                # One retry: a pooled connection broken by a Redis restart is replaced at once,
                # while a Redis that is down fails the call after one short attempt more.
                retry=Retry(NoBackoff(), 1),
            )
            self._client = client
        return self._client

    async def _command(self, *command: Any) -> Any:
        """One command on a pooled connection: packed, sent, its reply read, the connection
        given back. The path of every single command, `reserve` once per rate-limited call
        and `get` once per cache lookup: redis-py's `execute_command` (with a script object,
        retries and its checks) spent twice the CPU of this on the same round trip. A pooled
        connection that broke (a Redis restart) is replaced once, as the client's retry would.

        Raises:
            RedisError, OSError: as redis-py raises them (an error reply included).
        """
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import ResponseError

        pool = self._redis().connection_pool
        for attempt in (1, 2):
            conn = await pool.get_connection()
            try:
                async with asyncio.timeout(self._timeout):
                    await conn.send_packed_command(conn.pack_command(*command), check_health=False)
                    return await conn.read_response()
            except ResponseError:
                raise  # an error reply: the connection is in step, and stays in the pool
            except RedisConnectionError:
                await conn.disconnect()
                if attempt == 2:
                    raise
            except BaseException:
                await conn.disconnect()  # a reply may still come on it: never reuse it
                raise
            finally:
                await pool.release(conn)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _unavailable(self, exc: BaseException) -> StateUnavailable:
        reason = str(exc) or type(exc).__name__
        return StateUnavailable(f"cannot reach redis at {self._where} ({reason})")

    async def reserve(
        self, key: str, *, interval: float, burst: int, max_wait: float | None
    ) -> tuple[bool, float]:
        from redis.exceptions import NoScriptError, RedisError

        limit = -1 if max_wait is None else round(max_wait * 1e6)
        args = (1, self.prefix + key, round(interval * 1e6), burst, limit)
        try:
            try:
                wait: Any = await self._command("EVALSHA", self._sha, *args)
            except NoScriptError:  # a new or flushed Redis: EVAL runs it and caches it
                wait = await self._command("EVAL", _RESERVE, *args)
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        micros = int(wait)
        return (True, micros / 1e6) if micros >= 0 else (False, (-1 - micros) / 1e6)

    async def get(self, key: str) -> bytes | None:
        from redis.exceptions import RedisError

        try:
            value = await self._command("GET", self.prefix + key)
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return value.encode() if isinstance(value, str) else value

    async def put(self, key: str, value: bytes, *, ttl: float) -> None:
        from redis.exceptions import RedisError

        try:
            await self._command("SET", self.prefix + key, value, "PX", max(1, round(ttl * 1000)))
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc

    async def delete(self, key: str) -> None:
        from redis.exceptions import RedisError

        try:
            await self._command("DEL", self.prefix + key)
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc

    async def update(
        self, key: str, change: Callable[[bytes | None], bytes | None], *, ttl: float | None = None
    ) -> bytes | None:
        from redis.exceptions import RedisError, WatchError

        name = self.prefix + key
        try:
            # WATCH, GET, then MULTI/SET/EXEC: the transaction is refused (WatchError) when
            # another client wrote the key after the WATCH, and the change is made again on
            # what that client wrote. Optimistic: no lock held while `change` runs.
            async with asyncio.timeout(UPDATE_TIMEOUT_S), self._redis().pipeline() as pipe:
                for tries in range(UPDATE_TRIES):
                    try:
                        await pipe.watch(name)
                        old: bytes | None = await pipe.get(name)  # type: ignore[assignment]
                        new = change(old)
                        if new is not None and new == old:
                            await pipe.unwatch()
                            return old
                        pipe.multi()
                        if new is None:
                            pipe.delete(name)
                        elif ttl is None:
                            pipe.set(name, new)
                        else:
                            pipe.set(name, new, px=max(1, math.ceil(ttl * 1000)))
                        await pipe.execute()
                        return new
                    except WatchError:
                        # Lost the race: a random pause, growing, so that writers who lost
                        # together do not meet again at once.
                        await asyncio.sleep(random.uniform(0, 0.001 * min(tries + 1, 20)))
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        raise StateUnavailable(
            f"redis at {self._where}: the key {name!r} changed {UPDATE_TRIES} times while it "
            "was being updated; nothing was written"
        )

    async def touch(self, key: str, *, ttl: float) -> bool:
        from redis.exceptions import RedisError

        try:  # PEXPIRE sets nothing on a missing key
            kept = await self._command("PEXPIRE", self.prefix + key, max(1, round(ttl * 1000)))
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return bool(kept)

    async def claim(self, key: str, *, ttl: float) -> bool:
        from redis.exceptions import RedisError

        ms = max(1, math.ceil(ttl * 1000))
        try:  # SET NX PX: one atomic command, so two replicas never both take the key
            taken = await self._command("SET", self.prefix + key, b"1", "NX", "PX", ms)
        except (RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return taken is not None  # OK when set; nil when the key was there

    async def check(self) -> None:
        from redis.exceptions import RedisError

        try:
            await self._command("PING")
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
