"""Single-use approvals across replicas: two real `toolnexus serve --http` processes sharing one
real redis-server (`TOOLNEXUS_STATE_URL`) and one approval secret. An approval redeemed on one
replica is used up on the other too; before, each replica kept its own record, so a replayed
ticket ran its call once more on every other replica. A Redis that does not answer refuses the
retry: a ticket whose single use cannot be recorded approves nothing."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import types

from toolnexus import StateUnavailable
from toolnexus.state import open_state

from ..serve.served import serve_http
from ..serve.test_serve_approval import (
    MANIFEST,
    Asked,
    client,
    did_not_run,
    first_round,
    retry,
    text,
)
from ..test_serve import child_env
from .conftest import RedisServer

pytestmark = pytest.mark.anyio

WAIT = 60.0
SECRET = "a-secret-every-replica-shares-of-more-than-32-bytes"


async def test_an_approval_used_on_one_replica_cannot_be_replayed_on_another(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(textwrap.dedent(MANIFEST).lstrip())
    env = child_env(TOOLNEXUS_APPROVAL_SECRET=SECRET, TOOLNEXUS_STATE_URL=redis_server.url)
    with serve_http(manifest, env) as one, serve_http(manifest, env) as two:
        with anyio.fail_after(WAIT):
            async with client(one, elicitation_callback=Asked()) as c:
                question = await first_round(c, "prod")
                ran = await retry(c, "prod", question.request_state)
            assert isinstance(ran, types.CallToolResult) and not ran.is_error, ran
            assert text(ran).strip() == "deployed prod"
            async with client(two, elicitation_callback=Asked()) as c:
                replayed = await retry(c, "prod", question.request_state)
            assert "already used" in did_not_run(replayed)

            # The shared secret still lets the other replica redeem a fresh ticket once.
            async with client(one, elicitation_callback=Asked()) as c:
                question = await first_round(c, "staging")
            async with client(two, elicitation_callback=Asked()) as c:
                ran = await retry(c, "staging", question.request_state)
            assert isinstance(ran, types.CallToolResult) and not ran.is_error, ran

            async with client(one, elicitation_callback=Asked()) as c:
                question = await first_round(c, "later")
            redis_server.stop()
            async with client(two, elicitation_callback=Asked()) as c:
                refused = await retry(c, "later", question.request_state)
            said = did_not_run(refused)
            assert "could not be checked for single use" in said
            assert "cannot reach redis" in said


async def test_a_claim_is_taken_once_in_redis_and_in_memory(redis_server: RedisServer) -> None:
    for url in (redis_server.url, "memory://"):
        store = open_state(url)
        try:
            with anyio.fail_after(WAIT):
                assert await store.claim("nonce", ttl=60)
                assert not await store.claim("nonce", ttl=60)
                assert await store.claim("other", ttl=60)
                assert await store.claim("brief", ttl=0.001)
                await anyio.sleep(0.05)  # past the claim's end: it may be taken again
                assert await store.claim("brief", ttl=60), url
        finally:
            await store.aclose()


async def test_a_claim_on_an_unreachable_redis_is_an_error(redis_server: RedisServer) -> None:
    store = open_state(redis_server.url)
    redis_server.stop()
    try:
        with anyio.fail_after(WAIT), pytest.raises(StateUnavailable, match="cannot reach redis"):
            await store.claim("nonce", ttl=60)
    finally:
        with contextlib.suppress(StateUnavailable):
            await store.aclose()
