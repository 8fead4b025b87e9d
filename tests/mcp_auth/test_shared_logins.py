"""OAuth logins in a shared state store: toolkits that share a real `redis-server` (as replicas
of one served toolkit do) share one login to an OAuth-protected MCP server (servers.py: the
SDK's `MCPServer` behind its bearer auth, and our small authorization server). One `toolnexus
login` serves them all; a refresh by one is seen by the others; two refreshing at once spend
the rotating refresh token once; a revoked login says so on each and a new login mends each; a
Redis that does not answer is an error naming the token store, never a fall back to the file.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from toolnexus import Toolkit, create_toolkit
from toolnexus.cli import main as cli_main
from toolnexus.mcp.auth import AuthSettings
from toolnexus.mcp.login import login
from toolnexus.mcp.tokens import SharedTokenStore, TokenStore, server_key
from toolnexus.state import open_state

from ..state.conftest import RedisServer, running_redis
from .conftest import Protected, ScriptedBrowser
from .test_oauth import BROWSER_SCRIPT, ROOT, _login

WAIT = 60.0
"""Bound on each step that waits for another thread or process (the machine is shared)."""


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server on a free port (the state tests' `RedisServer`)."""
    with running_redis(tmp_path) as server:
        yield server


def _manifest(folder: Path, url: str, state: str) -> Path:
    """A served toolkit's manifest: its state in `state`, one OAuth MCP server."""
    folder.mkdir(exist_ok=True)
    path = folder / "tools.yaml"
    path.write_text(
        f"version: 1\nserve:\n  state: {state}\n"
        f"mcp_servers:\n  docs:\n    url: {url}\n    auth: oauth\n"
    )
    return path


def _record(server: RedisServer, url: str) -> dict[str, Any] | None:
    """The login record as Redis holds it, read with a client of its own."""
    client = redis.Redis(port=server.port)
    try:
        raw = client.get("toolnexus:oauth:" + server_key(url))
    finally:
        client.close()
    return None if raw is None else json.loads(raw)  # type: ignore[arg-type]


def _login_shared(url: str, server: RedisServer, browser: ScriptedBrowser) -> str:
    """`login` into the shared store, as `toolnexus login --state URL` does."""

    async def run() -> str:
        state = open_state(server.url)
        try:
            return await login(
                "docs",
                url,
                AuthSettings(grant="authorization_code"),
                out=io.StringIO(),
                open_browser=browser,
                store=SharedTokenStore(state),
            )
        finally:
            await state.aclose()

    return asyncio.run(run())


def _replicas(manifest: Path, server: RedisServer) -> tuple[Toolkit, Toolkit]:
    """Two toolkits on the store, each on its own loop thread with its own connections."""
    return (
        create_toolkit(manifest, state=server.url),
        create_toolkit(manifest, state=server.url),
    )


def _together(*toolkits: Toolkit) -> list[str]:
    """`whoami` on each toolkit at the same moment, from a thread each; the error or answer."""
    start = threading.Barrier(len(toolkits))
    said: list[str] = [""] * len(toolkits)

    def call(index: int) -> None:
        start.wait(WAIT)
        result = toolkits[index].execute("whoami", {})
        said[index] = ("error: " if result.is_error else "") + result.content

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(toolkits))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    return said


def _cli(verb: str, manifest: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`toolnexus VERB docs -m MANIFEST` in a process of its own, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", verb, "docs", "-m", str(manifest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )


def test_one_cli_login_into_redis_serves_every_replica(
    protected: Protected, shared: RedisServer, token_file: Path, tmp_path: Path
) -> None:
    """`toolnexus login docs -m tools.yaml` writes where that manifest's served toolkit reads:
    its `serve: {state: ...}`; the user's token file is not touched."""
    manifest = _manifest(tmp_path / "project", protected.url, shared.url)
    script = tmp_path / "browser.py"
    script.write_text(BROWSER_SCRIPT)
    seen = tmp_path / "browser-status"
    env = {k: v for k, v in os.environ.items() if k != "TOOLNEXUS_STATE_URL"}
    env |= {"BROWSER": f"{sys.executable} {script} %s {seen}", "PYTHONPATH": str(ROOT)}
    run = _cli("login", manifest, env)
    assert run.returncode == 0, run.stderr
    assert f"tokens saved in the shared state store {shared.url}" in run.stdout
    assert seen.read_text() == "200"
    assert not token_file.exists()
    record = _record(shared, protected.url)
    assert record is not None and record["tokens"]["access_token"]
    assert record["server_metadata"]["token_endpoint"] == f"{protected.issuer}/token"

    first, second = _replicas(manifest, shared)
    with first, second:
        assert _together(first, second) == ["you are logged in"] * 2
        assert first.status()["docs"]["login"] is None
    counts = protected.state()["counts"]
    assert counts["code"] == 1 and counts["register"] == 1  # one login, one registration
    assert not token_file.exists()

    logout = _cli("logout", manifest, env)
    assert logout.returncode == 0, logout.stderr
    assert f"removed from the shared state store {shared.url}" in logout.stdout
    assert _record(shared, protected.url) is None


def test_a_refresh_by_one_replica_is_taken_by_the_other(
    protected: Protected, shared: RedisServer, token_file: Path, tmp_path: Path
) -> None:
    browser = ScriptedBrowser()
    _login_shared(protected.url, shared, browser)
    first_tokens = _record(shared, protected.url)["tokens"]  # type: ignore[index]
    first, second = _replicas(_manifest(tmp_path, protected.url, shared.url), shared)
    with first, second:
        assert _together(first, second) == ["you are logged in"] * 2
        protected.expire()  # both hold an access token the server now refuses
        assert first.execute("whoami", {}).content == "you are logged in"
        rotated = _record(shared, protected.url)["tokens"]  # type: ignore[index]
        assert rotated["refresh_token"] != first_tokens["refresh_token"]
        # The second holds the spent refresh token: it takes the new tokens instead.
        result = second.execute("whoami", {})
        assert not result.is_error, result.content
        assert second.status()["docs"]["login"] is None
    counts = protected.state()["counts"]
    assert counts["refresh"] == 1 and counts["refresh_tries"] == 1
    record = _record(shared, protected.url)
    assert record is not None and record["tokens"] == rotated and not record.get("expired")
    assert len(browser.visited) == 1 and not token_file.exists()


def test_two_replicas_refreshing_at_once_spend_the_refresh_token_once(
    protected: Protected, shared: RedisServer, token_file: Path, tmp_path: Path
) -> None:
    """Each refresh answers half a second after its refresh token was spent: a second replica
    refreshing with the same token in that window would be refused and, without the hold,
    mark the login expired (and fail its call) although the first got new tokens."""
    _login_shared(protected.url, shared, ScriptedBrowser())
    manifest = _manifest(tmp_path, protected.url, shared.url)
    first, second = _replicas(manifest, shared)
    with first, second:
        assert _together(first, second) == ["you are logged in"] * 2
        httpx.post(f"{protected.issuer}/test/slow-refresh?seconds=0.5").raise_for_status()
        for round_ in range(1, 3):
            protected.expire()
            assert _together(first, second) == ["you are logged in"] * 2
            counts = protected.state()["counts"]
            assert counts["refresh"] == round_ and counts["refresh_tries"] == round_, counts
            record = _record(shared, protected.url)
            assert record is not None and record["tokens"] and not record.get("expired")
    with create_toolkit(manifest, state=shared.url) as third:  # a replica started later
        assert third.execute("whoami", {}).content == "you are logged in"


def test_a_revoked_login_fails_on_each_replica_and_a_new_login_mends_each(
    protected: Protected, shared: RedisServer, token_file: Path, tmp_path: Path
) -> None:
    browser = ScriptedBrowser()
    _login_shared(protected.url, shared, browser)
    first, second = _replicas(_manifest(tmp_path, protected.url, shared.url), shared)
    with first, second:
        assert _together(first, second) == ["you are logged in"] * 2
        protected.revoke()  # access and refresh tokens die
        for said in _together(first, second):
            assert said.startswith("error: "), said
            assert "has expired and could not be refreshed" in said
            assert "run `toolnexus login docs`" in said
        record = _record(shared, protected.url)
        assert record is not None and record["expired"] is True and record["tokens"] is None
        assert first.status()["docs"]["login"] == "expired"

        _login_shared(protected.url, shared, browser)  # no restart, no reload
        assert _together(first, second) == ["you are logged in"] * 2
        assert second.status()["docs"]["login"] is None
    assert protected.state()["counts"]["code"] == 2 and not token_file.exists()


def test_an_unreachable_store_is_named_and_the_file_is_not_used(
    protected: Protected,
    shared: RedisServer,
    token_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _login(protected.url, ScriptedBrowser())  # a good login in the user's file
    assert TokenStore(token_file).get(protected.url) is not None
    manifest = _manifest(tmp_path, protected.url, shared.url)
    shared.stop()
    with create_toolkit(manifest, state=shared.url) as toolkit:
        status = toolkit.status()["docs"]
        assert status["state"] == "failed", status
        assert f"the OAuth token store for {server_key(protected.url)}" in status["reason"]
        assert f"cannot reach redis at 127.0.0.1:{shared.port}" in status["reason"]
        result = toolkit.execute("whoami", {})
        assert result.is_error
    assert protected.state()["counts"]["refresh"] == 0

    code = cli_main(["login", "docs", "-m", str(manifest)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"the OAuth token store for {server_key(protected.url)} failed" in err
    assert f"cannot reach redis at 127.0.0.1:{shared.port}" in err
    assert protected.state()["counts"]["authorize"] == 1  # only the file's login
