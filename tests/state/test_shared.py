"""Shared state through a real redis-server: toolkits (and replicas) that share one Redis hold
one rate limit and one cache; a Redis that goes away is a clear error, never a quiet fallback
to counting alone, and its return is picked up without a restart."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolnexus import (
    ConfigError,
    ImagePart,
    Result,
    StateBackend,
    ToolContext,
    acreate_toolkit,
    create_toolkit,
    tool,
)
from toolnexus.middleware import cache, rate_limit
from toolnexus.state import STATE_URL_ENV, open_state

from .conftest import LIMITED, RedisServer

pytestmark = pytest.mark.anyio

WAIT = 30.0



async def test_two_toolkits_sharing_redis_hold_one_rate_limit(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    (tmp_path / "tools.yaml").write_text(LIMITED)
    with anyio.fail_after(WAIT):
        first = await acreate_toolkit(tmp_path / "tools.yaml", state=redis_server.url)
        second = await acreate_toolkit(tmp_path / "tools.yaml", state=redis_server.url)
        async with first, second:
            calls = [kit.aexecute("ping", {}) for kit in (first, second) for _ in range(5)]
            results = await asyncio.gather(*calls)
    ran = [r for r in results if not r.is_error]
    refused = [r for r in results if r.is_error]
    assert len(ran) == 3, [r.content for r in results]
    assert all(r.content.strip() == "pong" for r in ran)
    assert all(r.metadata["error_type"] == "RateLimited" for r in refused)
    assert all(r.metadata["retryable"] and r.metadata["retry_after"] > 0 for r in refused)
    assert "rate limit reached for 'ping' (3 calls per 3600s)" in refused[0].content


async def test_a_limit_per_caller_is_held_per_caller_across_toolkits_sharing_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    from toolnexus.base import Caller, acting_as

    (tmp_path / "tools.yaml").write_text(
        LIMITED.replace("max_wait: 0}", "max_wait: 0, per_caller: true}")
    )
    alice = Caller(subject="alice", issuer="https://id", groups=("ops",))
    bob = Caller(subject="bob", issuer="https://id", groups=("dev",))
    with anyio.fail_after(WAIT):
        first = await acreate_toolkit(tmp_path / "tools.yaml", state=redis_server.url)
        second = await acreate_toolkit(tmp_path / "tools.yaml", state=redis_server.url)
        async with first, second:
            counts: dict[str, int] = {}
            for caller in (alice, bob):
                with acting_as(caller):
                    results = [await kit.aexecute("ping", {}) for kit in (first, second) * 3]
                counts[str(caller.subject)] = sum(not r.is_error for r in results)
    # Three calls an hour for each caller, held together by both toolkits.
    assert counts == {"alice": 3, "bob": 3}


async def test_in_process_toolkits_count_alone(tmp_path: Path) -> None:
    """The default store is embedded: nothing to run, and nothing shared."""
    (tmp_path / "tools.yaml").write_text(LIMITED)
    with anyio.fail_after(WAIT):
        first = await acreate_toolkit(tmp_path / "tools.yaml")
        second = await acreate_toolkit(tmp_path / "tools.yaml")
        async with first, second:
            assert first.store.url == "memory://"
            results = [await kit.aexecute("ping", {}) for kit in (first, second) for _ in range(4)]
    assert sum(not r.is_error for r in results) == 6


async def test_the_same_limit_twice_on_a_call_counts_it_once(redis_server: RedisServer) -> None:
    @tool(name="ping")
    def ping() -> str:
        return "pong"

    limit = {"calls": 2, "per": 3600.0, "max_wait": 0.0}
    with anyio.fail_after(WAIT):
        async with await acreate_toolkit(
            extra_tools=[ping],
            middleware=[rate_limit(**limit), rate_limit(**limit)],
            state=redis_server.url,
        ) as kit:
            results = [await kit.aexecute("ping", {}) for _ in range(3)]
    assert [r.is_error for r in results] == [False, False, True]


async def test_the_cache_is_shared_with_binary_parts(redis_server: RedisServer) -> None:
    runs: list[str] = []
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))

    @tool(name="look", read_only=True)
    def look(name: str) -> Result:
        runs.append(name)
        return Result(
            content=f"picture of {name}",
            parts=(ImagePart(data=png, mime_type="image/png"),),
            structured={"name": name, "n": len(runs)},
            metadata={"source": "camera"},
        )

    with anyio.fail_after(WAIT):
        options: dict[str, Any] = {"middleware": [cache(60)], "state": redis_server.url}
        kits = [await acreate_toolkit(extra_tools=[look], **options) for _ in range(2)]
        async with kits[0], kits[1]:
            fresh = await kits[0].aexecute("look", {"name": "cat"})
            again = await kits[1].aexecute("look", {"name": "cat"})
            other = await kits[1].aexecute("look", {"name": "dog"})
    assert runs == ["cat", "dog"]
    assert "cached" not in fresh.metadata
    assert again.metadata["cached"] is True
    assert again.content == fresh.content and again.structured == fresh.structured
    assert again.parts == fresh.parts and again.parts[0].data == png  # type: ignore[union-attr]
    assert again.metadata["source"] == "camera"
    assert other.structured == {"name": "dog", "n": 2}


async def test_redis_gone_is_a_clear_error_and_its_return_recovers(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    ran: list[int] = []

    @tool(name="count", read_only=True)
    def count(n: int) -> str:
        ran.append(n)
        return str(n)

    with anyio.fail_after(WAIT):
        async with await acreate_toolkit(
            extra_tools=[count],
            middleware=[rate_limit(1000, per=1.0), cache(60)],
            state=redis_server.url,
        ) as kit:
            assert not (await kit.aexecute("count", {"n": 1})).is_error
            await kit.store.check()

            redis_server.stop()
            limited = await kit.aexecute("count", {"n": 2})
            assert limited.is_error and limited.metadata["error_type"] == "StateUnavailable"
            assert limited.content.startswith(
                f"rate limit state unavailable: cannot reach redis at 127.0.0.1:{redis_server.port}"
            )
            assert limited.metadata["retryable"] is True
            with pytest.raises(Exception, match="cannot reach redis"):
                await kit.store.check()
            assert ran == [1]  # never run as if the limit were counted in this process

            redis_server.start()  # an empty Redis on the same port
            await kit.store.check()
            again = await kit.aexecute("count", {"n": 2})
            assert not again.is_error and again.content == "2"
    assert ran == [1, 2]


async def test_cache_without_redis_refuses_the_call(redis_server: RedisServer) -> None:
    ran: list[int] = []

    @tool(name="count", read_only=True)
    def count(n: int) -> str:
        ran.append(n)
        return str(n)

    redis_server.stop()
    with anyio.fail_after(WAIT):
        async with await acreate_toolkit(
            extra_tools=[count], middleware=[cache(60)], state=redis_server.url
        ) as kit:
            result = await kit.aexecute("count", {"n": 1})
    assert result.is_error and result.content.startswith("cache state unavailable: cannot reach")
    assert ran == []


def test_the_state_url_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer
) -> None:
    monkeypatch.setenv(STATE_URL_ENV, redis_server.url)
    with create_toolkit() as kit:
        assert kit.store.url == redis_server.url
        kit._run(kit.store.check())


def test_the_store_closes_with_the_toolkit(redis_server: RedisServer) -> None:
    @tool(name="ping")
    def ping() -> str:
        return "pong"

    def clients() -> int:
        with socket.create_connection(("127.0.0.1", redis_server.port), timeout=5) as sock:
            sock.sendall(b"INFO clients\r\n")
            data = b""
            while b"connected_clients:" not in data or not data.endswith(b"\r\n"):
                data += sock.recv(4096)
        line = next(x for x in data.split(b"\r\n") if x.startswith(b"connected_clients:"))
        return int(line.split(b":")[1]) - 1  # less this connection

    kit = create_toolkit(
        extra_tools=[ping], middleware=[rate_limit(10, per=1.0)], state=redis_server.url
    )
    assert not kit.execute("ping", {}).is_error
    assert clients() >= 1
    kit.close()
    assert clients() == 0


async def test_a_store_given_as_an_object_stays_the_callers(redis_server: RedisServer) -> None:
    store = open_state(redis_server.url)
    assert isinstance(store, StateBackend)
    with anyio.fail_after(WAIT):
        async with await acreate_toolkit(state=store) as kit:
            assert kit.store is store
            await store.put("k", b"v", ttl=60)
        async with await acreate_toolkit(state=store):
            assert await store.get("k") == b"v"  # still open: the caller closes it
        await store.aclose()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redos://127.0.0.1:6379", "unknown state store 'redos://127.0.0.1:6379'; did you mean"),
        ("127.0.0.1:6379", "use memory:// (in-process, the default) or redis://HOST:PORT/DB"),
    ],
)
def test_a_bad_state_url_is_refused_with_the_fix(url: str, expected: str) -> None:
    with pytest.raises(ConfigError, match="state: ") as info:
        create_toolkit(state=url)
    assert expected in str(info.value)


async def test_a_call_without_a_toolkit_store_still_limits() -> None:
    """Middleware used on a bare `ToolContext` (no toolkit) keeps its own in-process bucket."""
    from toolnexus import Executor, Registry, Tool
    from toolnexus.approval import Decision, Verdict
    from toolnexus.middleware import Call

    async def handler(args: dict[str, Any], ctx: ToolContext) -> Result:
        return Result(content="ok")

    t = Tool(name="t", handler=handler)
    mw = rate_limit(1, per=3600.0, max_wait=0)
    ctx = ToolContext(call_id="c", tool_name="t", workspace=Path.cwd())
    verdict = Verdict(decision=Decision.ALLOW)

    async def inner(call: Call) -> Result:
        return Result(content="ran")

    first = await mw(Call(tool=t, arguments={}, ctx=ctx, verdict=verdict), inner)
    second = await mw(Call(tool=t, arguments={}, ctx=ctx, verdict=verdict), inner)
    assert (first.is_error, second.is_error) == (False, True)
    assert Executor(Registry([t])).store.url == "memory://"


async def test_a_key_function_chooses_the_bucket(redis_server: RedisServer) -> None:
    """`key` replaces the per-tool bucket (the hook a per-caller limit will use)."""

    @tool(name="a")
    def a() -> str:
        return "a"

    @tool(name="b")
    def b() -> str:
        return "b"

    limit = rate_limit(2, per=3600.0, max_wait=0, key=lambda call: "everyone")
    with anyio.fail_after(WAIT):
        async with await acreate_toolkit(
            extra_tools=[a, b], middleware=[limit], state=redis_server.url
        ) as kit:
            results = [await kit.aexecute(name, {}) for name in ("a", "b", "a", "b")]
    assert [r.is_error for r in results] == [False, False, True, True]
    with pytest.raises(ConfigError, match="key must be a function"):
        rate_limit(2, key="caller")  # type: ignore[arg-type]
