"""Handshake-era MCP sessions shared by replicas (`toolnexus.serve.sessions`): real `toolnexus
serve --http` processes sharing a real redis-server, behind a real nginx balancing round robin
(no `ip_hash`), and the SDK's client in one session throughout.

What must hold: one session is answered by every replica; a search on one loads tools that
another lists; with the replica that opened it killed, the client carries on in the same
session on another, its search state with it; a closed session is adopted by no replica; the
store away is a 503 saying so; and every record expires."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp import types
from mcp.client.streamable_http import streamable_http_client

from ..conftest import free_port, wait_for_port
from ..reliability.test_mcp_replicas import _nginx_conf
from ..state.conftest import RedisServer, running_redis
from ..test_serve import child_env
from .oidc import RS_ENV, SERVE_AUTH, running_provider

pytestmark = pytest.mark.anyio

WAIT = 60.0
STARTUP = 60.0

MANIFEST = """
version: 1
tool_search: {always: [where]}
tools:
  - {name: where, description: Say which replica answers., command: [printenv, REPLICA]}
  - {name: rotate_keys, description: Rotate the deploy keys., command: [echo, rotated]}
"""


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


class Replicas:
    """`toolnexus serve --http` processes on ports of their own, each with `REPLICA` set to its
    name (what the `where` tool prints)."""

    def __init__(self, manifest: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.manifest = manifest
        self.args = args
        self.env = env or {}
        self.ports: dict[str, int] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, *names: str) -> list[int]:
        """Start `names` side by side; their ports, once each answers."""
        for name in names:
            port = self.ports[name] = free_port()
            self.procs[name] = subprocess.Popen(
                [
                    *(sys.executable, "-m", "toolnexus", "serve", str(self.manifest)),
                    *("--http", f"127.0.0.1:{port}", *self.args),
                ],
                cwd=self.manifest.parent,
                env=child_env(REPLICA=name, **self.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        for name in names:
            wait_for_port(self.ports[name], self.procs[name], STARTUP)
        return [self.ports[name] for name in names]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}/mcp"

    def kill(self, name: str) -> None:
        process = self.procs.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=WAIT)

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)


@contextlib.contextmanager
def balanced(tmp_path: Path, ports: list[int], listen: int | None = None) -> Iterator[str]:
    """nginx on `listen` (a free port by default), round robin over `ports`; yields its MCP
    URL."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert Path(nginx).exists(), "these tests need nginx (Debian package `nginx`)"
    listen = listen or free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(_nginx_conf(tmp_path, listen, ports, balance=""))
    proxy = subprocess.Popen(
        [nginx, "-p", str(tmp_path), "-c", str(conf), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(listen, proxy, STARTUP)
        yield f"http://127.0.0.1:{listen}/mcp"
    finally:
        proxy.send_signal(signal.SIGQUIT)
        try:
            proxy.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            proxy.kill()
            proxy.wait(timeout=WAIT)


@contextlib.asynccontextmanager
async def session(
    url: str, seen: list[str], token: str | None = None, **options: Any
) -> AsyncIterator[mcp.Client]:
    """A handshake-era SDK client at `url`; `seen` collects the session id of every answer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def record(response: httpx2.Response) -> None:
        if sid := response.headers.get("mcp-session-id"):
            seen.append(sid)

    async with httpx2.AsyncClient(
        headers=headers, timeout=WAIT, event_hooks={"response": [record]}
    ) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(
            transport, mode="legacy", read_timeout_seconds=WAIT, **options
        ) as client:
            yield client


async def rpc(
    url: str,
    session_id: str | None,
    method: str,
    params: dict[str, Any] | None = None,
    token: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """One JSON-RPC request (in session `session_id`, if given), sent straight to `url` (one
    replica, not the balancer): the HTTP status and the JSON-RPC answer."""
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if session_id:
        headers["mcp-session-id"] = session_id
    if token:
        headers["authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 9001, "method": method, "params": params or {}}
    async with httpx2.AsyncClient(timeout=WAIT) as http:
        response = await http.post(url, headers=headers, json=body)
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return response.status_code, json.loads(text)


def listed(answer: dict[str, Any]) -> list[str]:
    return sorted(t["name"] for t in answer["result"]["tools"])


async def text(client: mcp.Client, tool: str) -> str:
    result = await client.call_tool(tool, {})
    assert not result.is_error, result
    return result.content[0].text.strip()  # type: ignore[union-attr]


async def test_a_session_moves_between_replicas_with_its_search_state(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(MANIFEST)
    replicas = Replicas(manifest, "--state", redis_server.url)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    try:
        # a and b behind the balancer; c and d on their own, asked directly
        with balanced(tmp_path, replicas.start("a", "b", "c", "d")[:2]) as url:
            with anyio.fail_after(WAIT):
                await _moves_with_its_state(url, replicas, redis_server, on_message, changed)
    finally:
        replicas.stop()


async def _moves_with_its_state(
    url: str, replicas: Replicas, redis_server: RedisServer, on_message: Any, changed: Any
) -> None:
    seen: list[str] = []
    async with session(url, seen, message_handler=on_message) as client:
        # round robin: one session, answered by both replicas
        assert {await text(client, "where") for _ in range(4)} == {"a", "b"}
        assert [t.name for t in (await client.list_tools()).tools] == ["tool_search", "where"]
        found = await client.call_tool("tool_search", {"query": "rotate deploy keys"})
        assert "rotate_keys" in found.content[0].text  # type: ignore[union-attr]
        await changed.wait()  # on the search's own response stream, whichever replica
        sid = seen[0]
        for name in "abc":  # each replica, asked directly, lists what was loaded (c adopts)
            status, answer = await rpc(replicas.url(name), sid, "tools/list")
            assert status == 200, answer
            assert listed(answer) == ["rotate_keys", "tool_search", "where"]

        records = await _keys(redis_server, "toolnexus:mcp-*")
        assert len(records) == 2  # the session's record and its search state
        for ttl in records.values():
            assert 0 < ttl <= 30 * 60 * 1000  # idle sessions leave nothing behind

        replicas.kill("a")  # the replica that opened the session, among others
        assert {await text(client, "where") for _ in range(3)} == {"b"}
        assert "rotate_keys" in [t.name for t in (await client.list_tools()).tools]
        assert await text(client, "rotate_keys") == "rotated"
        assert set(seen) == {sid}  # the same session throughout, never a new one

    # Leaving the block sent DELETE: the session is closed everywhere, held copies (b, c) and
    # a replica that never saw it (d) alike.
    assert await _keys(redis_server, "toolnexus:mcp-*") == {}
    for name in "bcd":
        status, answer = await rpc(replicas.url(name), sid, "tools/list")
        assert (status, answer["error"]["message"]) == (404, "Session not found")

    # Expired: the record's idle life ran out (made to now, rather than waited for).
    idle = await _opened(replicas.url("b"))
    await _expire(redis_server, f"toolnexus:mcp-session:{idle}")
    for name in "bd":
        status, answer = await rpc(replicas.url(name), idle, "tools/list")
        assert (status, answer["error"]["message"]) == (404, "Session not found")

    # The store away: no session is opened or continued, and the answer says why.
    live = await _opened(replicas.url("b"))
    redis_server.stop()
    for sent in ((None, "initialize", INITIALIZE), (live, "tools/list", {})):
        status, answer = await rpc(replicas.url("b"), *sent)
        assert status == 503
        message = answer["error"]["message"]
        assert "the session store is unreachable: cannot reach redis" in message
    redis_server.start()  # an empty Redis: the session is gone
    status, answer = await rpc(replicas.url("b"), live, "tools/list")
    assert (status, answer["error"]["message"]) == (404, "Session not found")


INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"},
}


async def _opened(url: str) -> str:
    """A new session at `url` (initialize and initialized, sent by hand); its id."""
    async with httpx2.AsyncClient(timeout=WAIT) as http:
        response = await http.post(
            url,
            headers={"accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE},
        )
        assert response.status_code == 200, response.text
        sid = response.headers["mcp-session-id"]
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = {"accept": "application/json, text/event-stream", "mcp-session-id": sid}
        assert (await http.post(url, headers=headers, json=ready)).status_code == 202
    return sid


async def _expire(redis_server: RedisServer, key: str) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        assert await client.pexpire(key, 1)
        while await client.exists(key):
            await anyio.sleep(0.01)  # Redis's own clock: nothing to wait on but the key
    finally:
        await client.aclose()


async def test_another_caller_presenting_the_session_id_is_refused_on_every_replica(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Two identities of a real OpenID provider: `robot` opens a session, `robot-opaque`
    presents its id to the replica holding it, to one that would adopt it, and through the
    balancer. Each answers 404 as to an unknown session, and the owner carries on."""
    listen = free_port()
    url = f"http://127.0.0.1:{listen}/mcp"
    with running_provider(free_port(), url) as provider:
        manifest = tmp_path / "tools.yaml"
        tools = MANIFEST.split("version: 1\n", 1)[1]
        auth = SERVE_AUTH.format(issuer=provider.issuer, audience=url)
        manifest.write_text("version: 1\n" + auth + tools)
        owner = provider.token("robot", "robot-secret")
        thief = provider.token("robot-opaque", "robot-secret")
        replicas = Replicas(manifest, "--state", redis_server.url, env=RS_ENV)
        try:
            with balanced(tmp_path, replicas.start("a", "b"), listen), anyio.fail_after(WAIT):
                seen: list[str] = []
                async with session(url, seen, token=owner) as client:
                    assert {await text(client, "where") for _ in range(4)} == {"a", "b"}
                    await client.call_tool("tool_search", {"query": "rotate deploy keys"})
                    sid = seen[0]
                    for where in (replicas.url("a"), replicas.url("b"), url, url):
                        status, answer = await rpc(where, sid, "tools/list", token=thief)
                        assert (status, answer["error"]["message"]) == (404, "Session not found")
                    for where in (replicas.url("a"), replicas.url("b")):
                        status, answer = await rpc(where, sid, "tools/list", token=owner)
                        assert listed(answer) == ["rotate_keys", "tool_search", "where"]
                    assert {await text(client, "where") for _ in range(4)} == {"a", "b"}
                    assert set(seen) == {sid}
        finally:
            replicas.stop()


async def _keys(redis_server: RedisServer, pattern: str) -> dict[str, int]:
    """The keys matching `pattern` in the test's Redis, with their remaining life (ms)."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        return {k.decode(): await client.pttl(k) async for k in client.scan_iter(pattern)}
    finally:
        await client.aclose()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_touch_extends_a_value_and_never_brings_one_back(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """What keeps a session's record alive: `touch` on a missing or deleted key stores nothing
    (a `put` of what was read earlier would revive a session closed meanwhile)."""
    from toolnexus.state import StateBackend, open_state

    url = request.getfixturevalue("redis_server").url if kind == "redis" else None
    store: StateBackend = open_state(url)
    try:
        assert not await store.touch("k", ttl=60)
        assert await store.get("k") is None
        await store.put("k", b"v", ttl=1.0)
        assert await store.touch("k", ttl=60)
        await anyio.sleep(1.3)  # time passing is what is tested: past the first life
        assert await store.get("k") == b"v"
        await store.delete("k")
        assert not await store.touch("k", ttl=60)
        assert await store.get("k") is None
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("part", "named"),
    [
        ("serve_loop", "mcp.server.runner.serve_loop"),
        ("terminate", "StreamableHTTPServerTransport.terminate"),
    ],
)
async def test_serving_fails_at_start_up_when_the_sdk_parts_adoption_uses_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, part: str, named: str
) -> None:
    from mcp.server import runner, streamable_http

    from toolnexus.errors import UsageError
    from toolnexus.serve import http_app

    if part == "serve_loop":
        monkeypatch.delattr(runner, "serve_loop")
    else:
        monkeypatch.delattr(streamable_http.StreamableHTTPServerTransport, part)
    manifest = tmp_path / "tools.yaml"
    manifest.write_text(MANIFEST)
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # never reached: start-up fails first
    app = http_app(manifest, state=nowhere)
    with pytest.raises(UsageError) as caught:
        async with app.router.lifespan_context(app):
            pass
    assert named in str(caught.value)
    assert "pip install 'mcp>=2.3,<3'" in str(caught.value)


APPROVALS = """
version: 1
tools:
  - name: deploy
    command: [printenv, REPLICA]
    approval: {default: ask}
"""


async def test_approval_questions_are_answered_whichever_replica_the_answer_reaches(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Round robin sends the client's answer to an approval question (asked mid-call, on the
    call's stream) to the other replica: it reaches the replica that asked through the store,
    so each call is asked once and runs, or is refused as the user answered."""
    (tmp_path / "tools.yaml").write_text(APPROVALS)
    timeout = ("--approval-timeout", "10")  # a lost answer fails the test, saying so
    replicas = Replicas(tmp_path / "tools.yaml", "--state", redis_server.url, *timeout)
    questions: list[str] = []
    answers = iter([True, True, True, False, True, True])

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        questions.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": next(answers)})

    try:
        with balanced(tmp_path, replicas.start("a", "b")) as url, anyio.fail_after(WAIT):
            async with session(url, seen := [], elicitation_callback=user) as client:
                results = [await client.call_tool("deploy", {}) for _ in range(6)]
            texts = [r.content[0].text.strip() for r in results]  # type: ignore[union-attr]
            assert len(questions) == 6
            assert {t for i, t in enumerate(texts) if i != 3} == {"a", "b"}
            assert results[3].is_error and "without approving the call" in texts[3]
            assert set(seen) == {seen[0]}
    finally:
        replicas.stop()
