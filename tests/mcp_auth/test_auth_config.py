"""The `auth:` entry of an MCP server (located errors, what the spec keeps) and the token file
(atomic, private, keyed by server URL). No server runs here."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from pathlib import Path

import pytest

from toolnexus.build import check_manifest
from toolnexus.errors import ConfigError, ManifestError
from toolnexus.mcp.auth import AuthSettings, parse_auth
from toolnexus.mcp.spec import McpServerSpec
from toolnexus.mcp.tokens import TokenStore, server_key, token_store_path

URL = "http://127.0.0.1:9/mcp"


def _issues(tmp_path: Path, entry: str) -> list[str]:
    path = tmp_path / "tools.yaml"
    path.write_text(f"version: 1\nmcp_servers:\n  docs:\n{entry}")
    with pytest.raises(ManifestError) as caught:
        check_manifest(path)
    return [str(issue) for issue in caught.value.issues]


@pytest.mark.parametrize(
    ("entry", "field", "said"),
    [
        (
            f"    url: {URL}\n    auth: oath\n",
            "5:11: mcp_servers.docs.auth:",
            "did you mean 'oauth'",
        ),
        (
            f"    url: {URL}\n    auth:\n      oauth:\n        scope: [mcp]\n",
            "7:9: mcp_servers.docs.auth.oauth.scope:",
            "did you mean 'scopes'",
        ),
        (
            f"    url: {URL}\n    auth:\n      client_credentials:\n        client_id: x\n",
            "mcp_servers.docs.auth.client_credentials:",
            "client_secret",
        ),
        ("    command: echo\n    auth: oauth\n", "mcp_servers.docs.auth:", "belongs to HTTP"),
        (
            f"    url: {URL}\n    headers: {{Authorization: Bearer x}}\n    auth: oauth\n",
            "mcp_servers.docs.auth:",
            "either `auth:` or an Authorization header",
        ),
        (
            f"    url: {URL}\n    auth:\n      oauth:\n        client_id: x\n"
            "        client_secrt: y\n",
            "mcp_servers.docs.auth.oauth.client_secrt:",
            "did you mean 'client_secret'",
        ),
        (
            f"    url: {URL}\n    auth:\n      oauth:\n        client_metadata_url: https://x/\n",
            "mcp_servers.docs.auth.oauth.client_metadata_url:",
            "an https URL with a path",
        ),
    ],
    ids=[
        "unknown-word", "unknown-key", "no-secret", "stdio", "with-header", "secret-typo",
        "root-path",
    ],
)
def test_bad_auth_is_a_located_error(tmp_path: Path, entry: str, field: str, said: str) -> None:
    issues = _issues(tmp_path, entry)
    assert len(issues) == 1, issues
    assert issues[0].startswith(f"{tmp_path / 'tools.yaml'}:")
    assert field in issues[0]
    assert said in issues[0]


@pytest.mark.parametrize(
    ("value", "field", "said"),
    [
        ("oath", "auth", "expected `oauth`"),
        ({"oauth": {"scope": ["mcp"]}}, "auth.oauth.scope", "unknown key 'scope'"),
        ({"oauth": {"scopes": [1]}}, "auth.oauth.scopes", "list of scope names"),
        ({"password": {}}, "auth.password", "unknown kind of auth 'password'"),
        ({"client_credentials": {"client_id": "x"}}, "auth.client_credentials.client_secret", ""),
        ({"oauth": {"client_metadata_url": "https://x/"}}, "auth.oauth.client_metadata_url", ""),
        ({"oauth": {"client_secret": "s"}}, "auth.oauth.client_id", "give its `client_id`"),
        ({"oauth": {"client_secrt": "s"}}, "auth.oauth.client_secrt", "unknown key"),
    ],
)
def test_parse_auth_names_the_field(value: object, field: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_auth(value)
    assert caught.value.field == field
    assert said in str(caught.value)


def test_auth_forms() -> None:
    assert parse_auth("oauth") == AuthSettings(grant="authorization_code")
    assert parse_auth({"oauth": None}) == AuthSettings(grant="authorization_code")
    full = parse_auth(
        {
            "oauth": {
                "scopes": "mcp admin",
                "client_id": "pre-registered",
                "client_metadata_url": "https://client.example/toolnexus.json",
            }
        }
    )
    assert full is not None and full.scopes == ("mcp", "admin")
    assert full.client_id == "pre-registered"
    robot = parse_auth({"client_credentials": {"client_id": "r", "client_secret": "hidden"}})
    assert robot is not None and robot.grant == "client_credentials"
    assert "hidden" not in repr(robot)


def test_spec_keeps_auth_and_hides_the_secret(tmp_path: Path) -> None:
    entry = {
        "url": URL,
        "auth": {"client_credentials": {"client_id": "r", "client_secret": "hidden"}},
    }
    spec = McpServerSpec.from_mapping("docs", entry, base_dir=tmp_path)
    assert spec.auth is not None and spec.auth.client_secret == "hidden"
    assert "hidden" not in repr(spec)
    same = McpServerSpec.from_mapping("docs", entry, base_dir=tmp_path)
    other = McpServerSpec.from_mapping("docs", {"url": URL, "auth": "oauth"}, base_dir=tmp_path)
    assert spec == same and hash(spec) == hash(same)  # hot reload keeps the session
    assert spec != other


def test_good_auth_manifest_checks(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        "version: 1\nmcp_servers:\n"
        f"  a:\n    url: {URL}\n    auth: oauth\n"
        f"  b:\n    url: {URL}\n    auth: {{oauth: {{scopes: [mcp]}}}}\n"
        f"  c:\n    url: {URL}\n    auth: {{client_credentials: {{client_id: x, "
        "client_secret: y, scopes: [mcp], issuer: 'http://127.0.0.1:1'}}\n"
    )
    assert check_manifest(path) == ([], 3, ())


def test_store_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TOOLNEXUS_TOKEN_STORE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert token_store_path() == tmp_path / "xdg" / "toolnexus" / "tokens.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert token_store_path() == tmp_path / "home" / ".config" / "toolnexus" / "tokens.json"
    monkeypatch.setenv("TOOLNEXUS_TOKEN_STORE", str(tmp_path / "t.json"))
    assert token_store_path() == tmp_path / "t.json"


def test_store_is_private_and_keyed_by_url(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "cfg" / "toolnexus" / "tokens.json")
    store.update("HTTP://Example.COM/mcp#x", lambda r: r.update(tokens={"access_token": "a"}))
    assert store.get("http://example.com/mcp") == {"tokens": {"access_token": "a"}}
    assert server_key("http://user:pw@example.com") == "http://example.com/"
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert store.servers() == ["http://example.com/mcp"]
    assert store.remove("http://example.com/mcp") is True
    assert store.remove("http://example.com/mcp") is False
    leftovers = [p.name for p in store.path.parent.iterdir() if p.name.startswith(".tokens-")]
    assert leftovers == []  # the temporary files of the atomic writes are gone


def test_store_survives_concurrent_writers_and_a_damaged_file(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")

    def write(n: int) -> None:
        for i in range(20):
            store.update(f"http://127.0.0.1/{n}", lambda r, i=i: r.update(count=i))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [store.get(f"http://127.0.0.1/{n}") for n in range(4)] == [{"count": 19}] * 4

    store.path.write_text("{not json")
    assert store.get("http://127.0.0.1/0") is None
    store.update("http://127.0.0.1/0", lambda r: r.update(ok=True))
    assert store.get("http://127.0.0.1/0") == {"ok": True}
    assert os.stat(store.path).st_mode & 0o077 == 0


def test_a_refused_refresh_keeps_tokens_another_process_saved(tmp_path: Path) -> None:
    """The refresh token this process held was refused because another process refreshed in
    between (refresh tokens rotate): the file's newer tokens are kept and handed back, and only
    a login whose stored tokens are the refused ones is marked expired."""
    from mcp.shared.auth import OAuthToken

    from toolnexus.mcp.auth import _StoredLogin

    store = TokenStore(tmp_path / "tokens.json")
    login = _StoredLogin(store, URL)
    held = OAuthToken(access_token="a1", refresh_token="r1")
    newer = {"access_token": "a2", "refresh_token": "r2", "token_type": "Bearer"}
    store.update(URL, lambda r: r.update(tokens=newer, expires_at=123.0))
    assert asyncio.run(login.newer(held)) == {"tokens": newer, "expires_at": 123.0}
    found = asyncio.run(login.refresh_refused(held))
    assert found is not None and found["tokens"] == newer
    assert store.get(URL) == {"tokens": newer, "expires_at": 123.0}  # not wiped

    same = OAuthToken(access_token="a2", refresh_token="r2")
    assert asyncio.run(login.newer(same)) is None
    assert asyncio.run(login.refresh_refused(same)) is None
    assert store.get(URL) == {"tokens": None, "expires_at": 123.0, "expired": True}


def test_the_readme_auth_example_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = (Path(__file__).parents[2] / "docs" / "mcp-client.md").read_text(encoding="utf-8")
    section = page[page.index("## Authorization (OAuth)") :]
    block = section[section.index("```yaml\n") + 8 : section.index("```\n", 8)]
    monkeypatch.setenv("BILLING_CLIENT_ID", "id")
    # Interpolated values are masked process-wide from then on: a common word ("secret") would
    # be masked in every later test's messages ("client_***").
    monkeypatch.setenv("BILLING_CLIENT_SECRET", "billing-client-secret-value")
    monkeypatch.setenv("WIKI_CLIENT_ID", "wiki")
    monkeypatch.setenv("WIKI_CLIENT_SECRET", "wiki-client-secret-value")
    path = tmp_path / "tools.yaml"
    path.write_text("version: 1\n" + block)
    assert check_manifest(path) == ([], 4, ())


def test_login_names_the_servers_of_the_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolnexus.cli import main

    monkeypatch.setenv("TOOLNEXUS_TOKEN_STORE", str(tmp_path / "tokens.json"))
    path = tmp_path / "tools.yaml"
    path.write_text(
        f"version: 1\nmcp_servers:\n  docs:\n    url: {URL}\n    auth: oauth\n"
        f"  plain:\n    url: {URL}\n  local:\n    command: echo\n"
    )
    assert main(["login", "nope", "-m", str(path)]) == 1
    assert "no MCP server 'nope'" in capsys.readouterr().err
    assert main(["login", "plain", "-m", str(path)]) == 1
    assert "has no `auth:`; add `auth: oauth`" in capsys.readouterr().err
    assert main(["login", "local", "-m", str(path)]) == 1
    assert "runs over stdio" in capsys.readouterr().err
    assert main(["logout", "docs", "-m", str(path)]) == 0
    assert "no login stored for 'docs'" in capsys.readouterr().out
    assert main(["login", "docs", "-m", str(tmp_path / "missing.yaml")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_refusals_in_words() -> None:
    from toolnexus.mcp.auth import LoginProblem, describe_refusal, oauth_hint

    user = AuthSettings(grant="authorization_code")
    robot = AuthSettings(grant="client_credentials", client_id="r", client_secret="s")
    expired = LoginProblem(kind="expired", status=401)
    assert describe_refusal("docs", user, 401, expired) == expired.message("docs")
    assert describe_refusal("docs", user, 401, None) == (
        "HTTP 401: the MCP server 'docs' needs a login; run `toolnexus login docs`"
    )
    forbidden = describe_refusal("docs", user, 403, expired)  # not the 401 recorded
    assert forbidden.startswith("HTTP 403: the MCP server 'docs' refused this login")
    assert "client credentials" in describe_refusal("docs", robot, 401, None)
    challenge = 'Bearer resource_metadata="http://x/.well-known/oauth-protected-resource"'
    assert oauth_hint("x", 401, challenge) is not None
    assert oauth_hint("x", 401, 'Basic realm="x"') is None
    assert oauth_hint("x", 404, challenge) is None
