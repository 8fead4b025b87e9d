"""OAuth for streamable-HTTP MCP servers, end to end: a real authorization server and an
`MCPServer` behind the SDK's bearer middleware (servers.py, in a subprocess), the login driven
by a scripted browser through the loopback redirect, then toolkits that use the stored login
without a browser."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from toolnexus import create_toolkit
from toolnexus.cli import main as cli_main
from toolnexus.errors import SourceError
from toolnexus.mcp.auth import AuthSettings, parse_auth
from toolnexus.mcp.login import login
from toolnexus.mcp.tokens import TokenStore

from .conftest import Protected, ScriptedBrowser, _stop, start_protected

ROOT = Path(__file__).parents[2]


def _manifest(folder: Path, url: str, auth: str = "auth: oauth", extra: str = "") -> Path:
    path = folder / "tools.yaml"
    path.write_text(f"version: 1\nmcp_servers:\n  docs:\n    url: {url}\n    {auth}\n{extra}")
    return path


def _login(url: str, browser: ScriptedBrowser, settings: AuthSettings | None = None) -> str:
    out = io.StringIO()
    said = asyncio.run(
        login(
            "docs",
            url,
            settings or AuthSettings(grant="authorization_code"),
            out=out,
            open_browser=browser,
        )
    )
    assert browser.visited and browser.visited[-1] in out.getvalue()  # the URL is printed
    return said


def test_login_then_calls_work_without_a_browser(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    said = _login(protected.url, browser)
    assert "logged in to 'docs'" in said
    query = parse_qs(urlsplit(browser.visited[0]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    assert query["resource"] == [protected.url]
    assert protected.state()["counts"]["register"] == 1  # dynamic client registration
    record = TokenStore(token_file).get(protected.url)
    assert record is not None
    # Found from the 401's WWW-Authenticate, kept for refreshes in later processes.
    assert record["resource_metadata"]["resource"] == protected.url
    assert record["auth_server"].rstrip("/") == protected.issuer
    assert record["server_metadata"]["token_endpoint"] == f"{protected.issuer}/token"

    with create_toolkit(_manifest(project, protected.url)) as toolkit:
        result = toolkit.execute("whoami", {})
        assert not result.is_error, result.content
        assert result.content == "you are logged in"
        assert toolkit.status()["docs"]["login"] is None
    assert len(browser.visited) == 1  # the toolkit never asked for a browser

    # The token file: outside the project, 0600 in a 0700 folder, holding the tokens.
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    access = TokenStore(token_file).get(protected.url)["tokens"]["access_token"]  # type: ignore[index]
    for path in project.rglob("*"):
        assert access not in path.read_text(errors="replace")


async def _both(toolkit: object) -> list[str]:
    calls = [toolkit.aexecute("rendezvous", {}) for _ in range(2)]  # type: ignore[attr-defined]
    return [result.content for result in await asyncio.gather(*calls)]


def test_calls_on_one_connection_run_concurrently(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    """The SDK's provider holds a lock until each answer's headers arrive; with a token in
    hand the calls must not queue behind each other (each waits for the other to arrive)."""
    from toolnexus import acreate_toolkit

    _login(protected.url, browser)
    robot = "auth: {client_credentials: {client_id: robot, client_secret: s3cret}}"

    async def run(manifest: Path) -> list[str]:
        toolkit = await acreate_toolkit(manifest)
        try:
            assert not (await toolkit.aexecute("whoami", {})).is_error
            return await _both(toolkit)
        finally:
            await toolkit.aclose()

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert asyncio.run(run(_manifest(tmp_path / "a", protected.url))) == ["together"] * 2
    assert asyncio.run(run(_manifest(tmp_path / "b", protected.url, robot))) == ["together"] * 2


def test_two_manifests_share_one_login(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    _login(protected.url, browser)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        with create_toolkit(_manifest(tmp_path / name, protected.url)) as toolkit:
            assert not toolkit.execute("whoami", {}).is_error
    assert protected.state()["counts"]["code"] == 1


def test_expired_access_token_is_refreshed_silently(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    _login(protected.url, browser)
    store = TokenStore(token_file)
    first = store.get(protected.url)["tokens"]  # type: ignore[index]
    with create_toolkit(_manifest(tmp_path, protected.url)) as toolkit:
        assert not toolkit.execute("whoami", {}).is_error
        # The server ends the access token before its stated expiry: one refresh, no error.
        protected.expire()
        result = toolkit.execute("whoami", {})
        assert not result.is_error, result.content
    assert protected.state()["counts"]["refresh"] == 1
    second = store.get(protected.url)["tokens"]  # type: ignore[index]
    assert second["refresh_token"] != first["refresh_token"]  # the rotated token was saved

    # Past its stated expiry (a fresh process reads it from the file): refreshed before use.
    store.update(protected.url, lambda record: record.update(expires_at=time.time() - 5))
    protected.expire()
    with create_toolkit(_manifest(tmp_path, protected.url)) as toolkit:
        result = toolkit.execute("whoami", {})
        assert not result.is_error, result.content
    assert protected.state()["counts"]["refresh"] == 2
    assert len(browser.visited) == 1


def test_dead_refresh_token_says_expired_and_names_the_command(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    _login(protected.url, browser)
    protected.revoke()
    manifest = _manifest(tmp_path, protected.url)
    with create_toolkit(manifest) as toolkit:
        status = toolkit.status()["docs"]
        assert status["state"] == "failed"
        assert status["login"] == "expired"
        assert "has expired and could not be refreshed" in status["reason"]
        assert "run `toolnexus login docs`" in status["reason"]
        assert "HTTP 401" in status["reason"]
    assert TokenStore(token_file).get(protected.url)["expired"] is True  # type: ignore[index]

    required = _manifest(tmp_path, protected.url, extra="    required: true\n")
    with pytest.raises(SourceError, match=r"expired.*toolnexus login docs"):
        create_toolkit(required)
    assert len(browser.visited) == 1

    # Logging in again mends it.
    _login(protected.url, browser)
    with create_toolkit(manifest) as toolkit:
        assert not toolkit.execute("whoami", {}).is_error


def test_missing_login_fails_clearly_without_registering(
    protected: Protected, token_file: Path, tmp_path: Path
) -> None:
    manifest = _manifest(tmp_path, protected.url)
    with create_toolkit(manifest) as toolkit:
        status = toolkit.status()["docs"]
        assert status["login"] == "missing"
        assert status["reason"] == (
            "HTTP 401: the MCP server 'docs' needs a login; run `toolnexus login docs`"
        )
        result = toolkit.execute("whoami", {})
        assert result.is_error  # the tool was never listed
    with pytest.raises(SourceError, match="needs a login; run `toolnexus login docs`"):
        create_toolkit(_manifest(tmp_path, protected.url, extra="    required: true\n"))
    counts = protected.state()["counts"]
    assert counts["register"] == 0 and counts["authorize"] == 0  # nothing happened behind us
    assert not token_file.exists()


def test_step_up_on_insufficient_scope(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    _login(protected.url, browser)
    manifest = _manifest(tmp_path, protected.url)
    with create_toolkit(manifest) as toolkit:
        result = toolkit.execute("admin_op", {})
        assert result.is_error
        assert "HTTP 403 insufficient_scope" in result.content
        assert "(it asks for: mcp admin)" in result.content
        assert "run `toolnexus login docs` to grant it" in result.content
        assert toolkit.status()["docs"]["login"] == "insufficient_scope"
        assert not toolkit.execute("whoami", {}).is_error  # the session is still usable
    assert TokenStore(token_file).get(protected.url)["wanted_scope"] == "mcp admin"  # type: ignore[index]

    _login(protected.url, browser)  # asks for the scope the server wanted
    assert "admin" in parse_qs(urlsplit(browser.visited[-1]).query)["scope"][0].split()
    with create_toolkit(manifest) as toolkit:
        result = toolkit.execute("admin_op", {})
        assert not result.is_error, result.content
        assert result.content == "admin done"
    assert "wanted_scope" not in TokenStore(token_file).get(protected.url)  # type: ignore[operator]


def test_a_login_granting_the_scope_is_picked_up_by_running_toolkits(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    _login(protected.url, browser)
    manifest = _manifest(tmp_path, protected.url)
    with create_toolkit(manifest) as running, create_toolkit(manifest) as reloaded:
        for toolkit in (running, reloaded):
            assert "HTTP 403 insufficient_scope" in toolkit.execute("admin_op", {}).content
        reloaded.reload()
        _login(protected.url, browser)  # while both run: grants the scope
        for toolkit in (running, reloaded):
            result = toolkit.execute("admin_op", {})
            assert not result.is_error, result.content
            assert result.content == "admin done"


def test_manifest_scopes_are_asked_for(
    protected: Protected, token_file: Path, browser: ScriptedBrowser
) -> None:
    _login(protected.url, browser, parse_auth({"oauth": {"scopes": ["mcp", "admin"]}}))
    assert parse_qs(urlsplit(browser.visited[0]).query)["scope"][0].split() == ["mcp", "admin"]


def test_client_id_metadata_document_is_used_instead_of_registration(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    document = "https://client.example/toolnexus.json"
    _login(protected.url, browser, parse_auth({"oauth": {"client_metadata_url": document}}))
    state = protected.state()
    assert state["counts"]["register"] == 0
    assert state["authorize_client_ids"] == [document]
    auth = f"auth: {{oauth: {{client_metadata_url: '{document}'}}}}"
    with create_toolkit(_manifest(tmp_path, protected.url, auth)) as toolkit:
        assert not toolkit.execute("whoami", {}).is_error


def test_pre_registered_client_id_skips_registration(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    _login(protected.url, browser, parse_auth({"oauth": {"client_id": "pre-registered"}}))
    state = protected.state()
    assert state["counts"]["register"] == 0
    assert state["authorize_client_ids"] == ["pre-registered"]
    auth = "auth: {oauth: {client_id: pre-registered}}"
    with create_toolkit(_manifest(tmp_path, protected.url, auth)) as toolkit:
        assert not toolkit.execute("whoami", {}).is_error


def test_pre_registered_confidential_client_authenticates_with_its_secret(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    settings = parse_auth({"oauth": {"client_id": "confidential", "client_secret": "c0nfidential"}})
    assert settings is not None and "c0nfidential" not in repr(settings)
    _login(protected.url, browser, settings)
    state = protected.state()
    assert state["counts"]["register"] == 0
    assert state["counts"]["confidential"] == 1  # the token endpoint checked the secret
    assert state["authorize_client_ids"] == ["confidential"]
    auth = "auth: {oauth: {client_id: confidential, client_secret: c0nfidential}}"
    with create_toolkit(_manifest(tmp_path, protected.url, auth)) as toolkit:
        assert not toolkit.execute("whoami", {}).is_error


def test_client_credentials_headless(
    protected: Protected, token_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROBOT_ID", "robot")
    monkeypatch.setenv("ROBOT_SECRET", "s3cret")
    auth = (
        "auth: {client_credentials: {client_id: '${ROBOT_ID}', client_secret: "
        "'${ROBOT_SECRET}', scopes: [mcp, admin]}}"
    )
    manifest = _manifest(tmp_path, protected.url, auth)
    with create_toolkit(manifest) as toolkit:
        assert "s3cret" not in repr(toolkit.status())
        result = toolkit.execute("admin_op", {})
        assert not result.is_error, result.content
    assert protected.state()["counts"]["client_credentials"] == 1
    assert not token_file.exists()  # client-credentials tokens stay in memory

    monkeypatch.setenv("ROBOT_SECRET", "wrong")
    with create_toolkit(manifest) as toolkit:
        status = toolkit.status()["docs"]
        assert status["state"] == "failed"
        assert status["reason"].startswith(
            "the authorization server of 'docs' refused its client credentials ("
        ), status["reason"]
        assert "invalid_client" in status["reason"]
        assert "check `client_id` and `client_secret`" in status["reason"]


def test_client_credentials_with_a_signed_jwt(
    protected: Protected, token_file: Path, tmp_path: Path
) -> None:
    key = tmp_path / "signer.pem"
    key.write_bytes(httpx.get(f"{protected.issuer}/test/client-key").content)
    auth = (
        f"auth: {{client_credentials: {{client_id: signer, private_key_file: '{key}', "
        "scopes: [mcp, admin]}}"
    )
    with create_toolkit(_manifest(tmp_path, protected.url, auth)) as toolkit:
        result = toolkit.execute("admin_op", {})
        assert not result.is_error, result.content
    assert protected.state()["counts"]["private_key_jwt"] == 1
    assert not token_file.exists()

    key.write_text("not a key")
    with create_toolkit(_manifest(tmp_path, protected.url, auth)) as toolkit:
        status = toolkit.status()["docs"]
    assert status["state"] == "failed"
    assert "private_key_file" in status["reason"] and "PEM private key" in status["reason"]


def test_client_credentials_step_up_is_headless(
    protected: Protected, token_file: Path, tmp_path: Path
) -> None:
    """Asked for `mcp` only, then challenged for `admin`: a second grant with both, no
    person involved."""
    auth = "auth: {client_credentials: {client_id: robot, client_secret: s3cret, scopes: [mcp]}}"
    with create_toolkit(_manifest(tmp_path, protected.url, auth)) as toolkit:
        result = toolkit.execute("admin_op", {})
        assert not result.is_error, result.content
    assert protected.state()["counts"]["client_credentials"] == 2


def test_server_without_auth_says_to_add_it(protected: Protected, tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(f"version: 1\nmcp_servers:\n  docs:\n    url: {protected.url}\n")
    with create_toolkit(path) as toolkit:
        reason = toolkit.status()["docs"]["reason"]
    assert reason == (
        "HTTP 401: the MCP server 'docs' uses OAuth; add `auth: oauth` to its manifest entry "
        "and run `toolnexus login docs`"
    )


def test_doctor_reports_the_server_that_needs_a_login(
    protected: Protected, token_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _manifest(tmp_path, protected.url)
    assert cli_main(["doctor", str(manifest)]) == 1
    out = capsys.readouterr().out
    assert re.search(rf"^tokens +0 logins +{re.escape(str(token_file))}$", out, re.M)
    line = next(line for line in out.splitlines() if "mcp docs" in line)
    assert "login missing" in line and "run `toolnexus login docs`" in line


def test_doctor_counts_only_logins_that_hold_tokens(
    protected: Protected,
    token_file: Path,
    browser: ScriptedBrowser,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _login(protected.url, browser)
    manifest = _manifest(tmp_path, protected.url)
    assert cli_main(["doctor", str(manifest)]) == 0
    assert re.search(
        rf"^tokens +1 login +{re.escape(str(token_file))}$", capsys.readouterr().out, re.M
    )
    protected.revoke()  # the refresh token dies too: the record keeps no tokens
    with create_toolkit(manifest) as toolkit:
        assert toolkit.status()["docs"]["login"] == "expired"
    assert cli_main(["doctor", str(manifest)]) == 1
    out = capsys.readouterr().out
    assert re.search(rf"^tokens +0 logins, 1 expired +{re.escape(str(token_file))}$", out, re.M)
    assert "login expired" in out


BROWSER_SCRIPT = """
import sys, httpx
answer = httpx.get(sys.argv[1], follow_redirects=True, timeout=10)
open(sys.argv[2], "w").write(str(answer.status_code))
"""


def test_cli_login_and_logout(protected: Protected, token_file: Path, tmp_path: Path) -> None:
    """`toolnexus login` in its own process, the system browser being a script ($BROWSER)."""
    manifest = _manifest(tmp_path, protected.url)
    script = tmp_path / "browser.py"
    script.write_text(BROWSER_SCRIPT)
    seen = tmp_path / "browser-status"
    env = {
        **os.environ,
        "BROWSER": f"{sys.executable} {script} %s {seen}",
        "PYTHONPATH": str(ROOT),
    }
    run = subprocess.run(
        [sys.executable, "-m", "toolnexus", "login", "docs", "-m", str(manifest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "Open this URL to log in to 'docs':" in run.stdout
    assert f"tokens saved in {token_file}" in run.stdout
    assert seen.read_text() == "200"
    assert TokenStore(token_file).get(protected.url) is not None

    logout = subprocess.run(
        [sys.executable, "-m", "toolnexus", "logout", "docs", "-m", str(manifest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert logout.returncode == 0, logout.stderr
    assert "logged out of 'docs'" in logout.stdout
    assert TokenStore(token_file).get(protected.url) is None
    assert json.loads(token_file.read_text()) == {}
    with create_toolkit(manifest) as toolkit:
        assert toolkit.status()["docs"]["login"] == "missing"


def test_reload_retries_a_server_that_needed_a_login(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    """The manifest did not change, but the login did: a reload connects the server again
    instead of keeping the failed session it started with."""
    with create_toolkit(_manifest(tmp_path, protected.url)) as toolkit:
        assert toolkit.status()["docs"]["login"] == "missing"
        _login(protected.url, browser)
        toolkit.reload()
        status = toolkit.status()["docs"]
        assert status["state"] == "ready" and status["login"] is None, status
        assert toolkit.execute("whoami", {}).content == "you are logged in"
        toolkit.reload()  # a ready server is kept as it is, not connected again
        assert toolkit.status()["docs"]["restarts"] == 0
        assert protected.state()["counts"]["code"] == 1


@pytest.mark.parametrize("how", ["refused early", "past its expiry"])
def test_two_processes_one_refresh_token(
    token_file: Path, browser: ScriptedBrowser, tmp_path: Path, how: str
) -> None:
    """Refresh tokens rotate: when one toolkit (another process) has refreshed, a second one
    holding the old refresh token takes the new tokens from the file instead of spending the
    dead refresh token and wiping its neighbour's good login."""
    ttl = 3 if how == "past its expiry" else 3600
    protected, proc = start_protected(access_ttl=ttl)
    try:
        _login(protected.url, browser)
        logged_in = time.time()
        store = TokenStore(token_file)
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        with (
            create_toolkit(_manifest(tmp_path / "a", protected.url)) as first,
            create_toolkit(_manifest(tmp_path / "b", protected.url)) as second,
        ):
            if how == "past its expiry":  # both hold a token they know has expired
                time.sleep(max(0.0, logged_in + ttl + 0.5 - time.time()))
            else:  # both hold a token the server ends early
                protected.expire()
            assert not first.execute("whoami", {}).is_error
            result = second.execute("whoami", {})
            assert not result.is_error, result.content
            assert second.status()["docs"]["login"] is None
        assert protected.state()["counts"]["refresh"] == 1  # the old refresh token unspent
        record = store.get(protected.url)
        assert record is not None and record.get("tokens") and not record.get("expired")
        with create_toolkit(_manifest(tmp_path / "a", protected.url)) as third:
            assert not third.execute("whoami", {}).is_error
    finally:
        _stop(proc)


class _ForgingBrowser(ScriptedBrowser):
    """Another page on this machine reaches the loopback listener first, with a code and an
    error of its own (login CSRF); then the user's real answer arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.forged: list[int] = []

    async def __call__(self, url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        callback = query["redirect_uri"][0]
        async with httpx.AsyncClient(timeout=10) as client:
            for forged in ("code=x&state=guess", "error=access_denied", "code=x&state=%C3%A9"):
                self.forged.append((await client.get(f"{callback}?{forged}")).status_code)
        await super().__call__(url)


def test_the_loopback_listener_ignores_answers_of_another_state(
    protected: Protected, token_file: Path, tmp_path: Path
) -> None:
    browser = _ForgingBrowser()
    said = _login(protected.url, browser)
    assert "logged in to 'docs'" in said
    assert browser.forged == [400, 400, 400]
    with create_toolkit(_manifest(tmp_path, protected.url)) as toolkit:
        assert toolkit.execute("whoami", {}).content == "you are logged in"


def test_an_abandoned_login_keeps_the_login_that_worked(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    """`toolnexus login` again (for more scopes, say) that the user never finishes: the login
    that worked before still works, for the agents running on it too."""
    _login(protected.url, browser)
    before = TokenStore(token_file).get(protected.url)

    async def walk_away(url: str) -> None:
        pass

    with pytest.raises(SourceError, match="no answer from the browser"):
        asyncio.run(
            login(
                "docs",
                protected.url,
                AuthSettings(grant="authorization_code"),
                out=io.StringIO(),
                open_browser=walk_away,
                timeout=1,
            )
        )
    assert TokenStore(token_file).get(protected.url) == before
    with create_toolkit(_manifest(tmp_path, protected.url)) as toolkit:
        assert toolkit.execute("whoami", {}).content == "you are logged in"
    # A finished second login replaces the tokens, and keeps the client registration.
    _login(protected.url, browser)
    after = TokenStore(token_file).get(protected.url)
    assert after is not None and before is not None
    assert after["tokens"]["access_token"] != before["tokens"]["access_token"]
    assert protected.state()["counts"]["register"] == 1


def test_an_unreachable_token_endpoint_is_named_not_the_server(
    protected: Protected, token_file: Path, browser: ScriptedBrowser, tmp_path: Path
) -> None:
    """The MCP server is up; the authorization server's token endpoint is not. The reason
    names the endpoint that could not be reached, not the healthy MCP server."""
    from ..conftest import free_port

    _login(protected.url, browser)
    dead = f"http://127.0.0.1:{free_port()}/token"

    def break_it(record: dict[str, object]) -> None:
        record["server_metadata"]["token_endpoint"] = dead  # type: ignore[index]
        record["expires_at"] = time.time() - 5  # a refresh comes first

    TokenStore(token_file).update(protected.url, break_it)
    with create_toolkit(_manifest(tmp_path, protected.url)) as toolkit:
        reason = toolkit.status()["docs"]["reason"]
    assert f"cannot reach {dead}" in reason and "OAuth for 'docs'" in reason, reason
