"""The login's loopback listener and the token store, attacked from this machine.

Any local program can reach the listener on 127.0.0.1 (its port is even kept in the store, for
the next login). Before, an answer that arrived before the authorization URL existed was taken,
whatever its state: the user's real answer was then ignored while their browser said "Logged
in". And the store's lock file was opened following a symbolic link planted in its place.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolnexus import create_toolkit
from toolnexus.errors import ConfigError
from toolnexus.mcp import login as login_module
from toolnexus.mcp.auth import AuthSettings
from toolnexus.mcp.login import login
from toolnexus.mcp.tokens import TokenStore

from .conftest import Protected, ScriptedBrowser
from .test_oauth import _manifest


def test_an_answer_before_the_login_asked_is_refused_and_reported(
    protected: Protected,
    token_file: Path,
    browser: ScriptedBrowser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = AuthSettings(grant="authorization_code")
    asyncio.run(login("docs", protected.url, settings, out=io.StringIO(), open_browser=browser))
    record = TokenStore(token_file).get(protected.url)
    assert record is not None
    callback = record["client"]["redirect_uris"][0]  # the next login listens there again

    planted: list[tuple[int, str]] = []
    real_handshake = login_module._handshake

    async def attacker_first(server: str, url: str, auth: Any) -> int:
        # The listener is up, the authorization URL does not exist yet: a local page answers.
        async with httpx.AsyncClient(timeout=10) as client:
            for query in ("code=planted&state=guess", "code=planted", "error=access_denied"):
                answer = await client.get(f"{callback}?{query}")
                planted.append((answer.status_code, answer.text))
        return await real_handshake(server, url, auth)

    monkeypatch.setattr(login_module, "_handshake", attacker_first)
    out = io.StringIO()
    said = asyncio.run(login("docs", protected.url, settings, out=out, open_browser=browser))
    assert "logged in to 'docs'" in said
    assert [status for status, _ in planted] == [400, 400, 400]
    assert all("Logged in" not in page for _, page in planted)
    assert "not for the login" in planted[0][1]
    printed = out.getvalue()
    assert printed.count("refused an answer") == 3, printed
    with create_toolkit(_manifest(tmp_path, protected.url)) as toolkit:
        assert toolkit.execute("whoami", {}).content == "you are logged in"


def test_the_stores_lock_file_is_never_a_planted_link(token_file: Path, tmp_path: Path) -> None:
    token_file.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    os.symlink(target, token_file.parent / f".{token_file.name}.lock")
    store = TokenStore(token_file)
    with pytest.raises(ConfigError, match="symbolic link"):
        store.update("https://example.org/mcp", lambda record: record.update(x=1))
    assert not target.exists()
    assert not token_file.exists()


def test_a_linked_store_file_or_folder_is_refused(token_file: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tokens.json").write_text('{"https://example.org/mcp": {"tokens": {}}}')
    token_file.parent.parent.mkdir(parents=True)
    os.symlink(elsewhere, token_file.parent)  # the folder is a link
    with pytest.raises(ConfigError, match="symbolic link"):
        TokenStore(token_file).get("https://example.org/mcp")
    with pytest.raises(ConfigError, match="symbolic link"):
        TokenStore(token_file).update("https://example.org/mcp", lambda record: None)
    assert oct(elsewhere.stat().st_mode & 0o777) != "0o700"  # not chmod-ed through the link

    os.unlink(token_file.parent)
    token_file.parent.mkdir()
    os.symlink(elsewhere / "tokens.json", token_file)  # the file is a link
    with pytest.raises(ConfigError, match="symbolic link"):
        TokenStore(token_file).get("https://example.org/mcp")


def test_each_authorization_of_one_login_waits_for_its_own_answer() -> None:
    """An authorization server migration (the conformance suite's): within one login the
    second authorization, to the new server, must not receive the first one's answer."""

    async def run() -> list[str | None]:
        got: list[str | None] = []
        async with (
            login_module._Loopback.open(None, lambda peer: None) as listener,
            httpx.AsyncClient(timeout=10) as client,
        ):
            for state in ("first", "second"):
                listener.expect(f"https://as.example/authorize?state={state}")
                answered = await client.get(f"{listener.redirect_uri}?code=c&state={state}")
                assert answered.status_code == 200
                got.append((await asyncio.wait_for(listener.answer, 10)).state)
        return got

    assert asyncio.run(run()) == ["first", "second"]
