"""Shared state: where rate limits, cached results and the single-use records of approvals
live.

In-process by default (embedded, nothing to run: one toolkit counts alone). With a Redis URL
(`create_toolkit(state="redis://host:6379/0")`, `TOOLNEXUS_STATE_URL`, `toolnexus serve --state
URL`, the manifest's `serve: {state: URL}`), every toolkit and replica pointed at the same
Redis holds one rate limit together and shares one cache and one record of used approvals. A
store that cannot be reached is an error (`StateUnavailable`), never a quiet fallback to
counting in-process: N replicas counting alone let N times the limit through.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..errors import ConfigError

__all__ = ["STATE_URL_ENV", "StateBackend", "check_state_url", "open_state"]

STATE_URL_ENV = "TOOLNEXUS_STATE_URL"
"""The environment variable naming the state store when `state=` is not given."""

_SCHEMES = ("memory", "redis", "rediss", "unix")


@runtime_checkable
class StateBackend(Protocol):
    """Where state shared between calls, toolkits and replicas lives.

    Every method is atomic on the store's side: two replicas reserving from one bucket at the
    same instant get two different slots.
    """

    @property
    def url(self) -> str:
        """Where the store is, for messages (a password in the URL is masked)."""
        ...

    async def reserve(
        self, key: str, *, interval: float, burst: int, max_wait: float | None
    ) -> tuple[bool, float]:
        """Take the next slot of the token bucket `key` (one call every `interval` seconds, up
        to `burst` at once).

        Returns:
            `(True, wait)`: the slot is taken and comes in `wait` seconds (0.0: now).
            `(False, wait)`: it would come in `wait` seconds, more than `max_wait`, so nothing
            was taken.

        Raises:
            StateUnavailable: the store did not answer.
        """
        ...

    async def get(self, key: str) -> bytes | None:
        """The value stored at `key`, or None (never set, or expired)."""
        ...

    async def put(self, key: str, value: bytes, *, ttl: float) -> None:
        """Store `value` at `key` for `ttl` seconds."""
        ...

    async def delete(self, key: str) -> None:
        """Forget `key` (nothing happens when it is not there)."""
        ...

    async def update(
        self, key: str, change: Callable[[bytes | None], bytes | None], *, ttl: float | None = None
    ) -> bytes | None:
        """Read, change and write `key` as one step: `change` gets the value stored (None:
        none) and returns the new one (None: delete the key; the value it got: write nothing,
        so an expiry set earlier stands). When another writer changed the key in between, the
        value is read again and `change` runs again, so it must have no other effects. What
        the OAuth token store needs: a refresh on one replica and a revocation seen on another
        must not overwrite each other.

        Args:
            ttl: seconds the written value lives; None: until it is changed or deleted.

        Returns:
            The value stored afterwards.

        Raises:
            StateUnavailable: the store did not answer, or the key kept changing.
        """
        ...

    async def touch(self, key: str, *, ttl: float) -> bool:
        """Keep the value at `key` for `ttl` seconds from now: True when it was there, False
        (and nothing stored) when it was not. Never brings a deleted value back, as a `put` of
        what was read earlier could (a served MCP session closed on one replica stays closed
        while another replica keeps it alive)."""
        ...

    async def claim(self, key: str, *, ttl: float) -> bool:
        """Take `key` for `ttl` seconds: True for the one call that took it, False for every
        other call (from any toolkit or replica on the store) until it expires. What makes a
        single-use record single-use everywhere (an approval redeemed on one replica cannot
        be replayed on another).

        Raises:
            StateUnavailable: the store did not answer (nothing may be assumed taken or free).
        """
        ...

    async def check(self) -> None:
        """Return when the store answers.

        Raises:
            StateUnavailable: it does not; the message says where and why.
        """
        ...

    async def aclose(self) -> None:
        """Release connections; safe to call twice."""
        ...


def open_state(url: str | None = None) -> StateBackend:
    """The store at `url`: `memory://` (or None) for in-process, `redis://`, `rediss://` or
    `unix://` for Redis. Opening connects nothing: the first use does.

    Raises:
        ConfigError: an unknown scheme (with the ones accepted).
        ImportError: a Redis URL without redis-py installed (the message has the pip line).
    """
    if check_state_url(url) == "memory":
        from .memory import MemoryState

        return MemoryState()
    from .redis import RedisState

    assert url is not None
    return RedisState(url)


def check_state_url(url: str | None) -> str:
    """The kind of store `url` names, `memory` or `redis`, without opening it (what
    `toolnexus validate` checks of `serve: {state: ...}`).

    Raises:
        ConfigError: an unknown scheme, with the closest known one and the ones accepted.
    """
    if url is None or url in {"", "memory://"}:
        return "memory"
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        return "redis"
    from .._suggest import did_you_mean

    hint = did_you_mean(scheme, _SCHEMES) if scheme else ""
    raise ConfigError(
        f"unknown state store {url!r}{hint}: use memory:// (in-process, the default) or "
        "redis://HOST:PORT/DB (rediss:// for TLS, unix:///path/redis.sock)",
        field="state",
    )


def state_url_from_env() -> str | None:
    """`TOOLNEXUS_STATE_URL`, or None when unset or empty."""
    return os.environ.get(STATE_URL_ENV) or None
