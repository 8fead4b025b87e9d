"""`toolnexus serve` as an OAuth 2.1 resource server, end to end with real parts: a real OpenID
provider (`oidc-provider`, Node) issues the tokens, `toolnexus serve` runs as a subprocess, and
the MCP SDK's own clients log in by discovery alone: the 401's `resource_metadata`, the
protected resource metadata, the provider's metadata, dynamic registration, authorization code
with PKCE (or client credentials), then tools. A tool reads `current_caller()` to show who the
server thinks is calling."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import httpx
import httpx2
import mcp
import pytest
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from .oidc import FOLDER, RS_ENV, SERVE_AUTH, Team, browse_to_callback, node_or_skip, serving_team

pytestmark = pytest.mark.anyio

WAIT = 30.0
REDIRECT = "http://127.0.0.1:47123/callback"
"""Where the provider sends the "browser" back; nothing listens (`browse_to_callback` stops)."""

WHOAMI = '''
from toolnexus.serve import current_caller


def whoami() -> str:
    """Who the server says is calling."""
    caller = current_caller()
    if caller is None:
        return "nobody"
    return f"{caller.subject} client={caller.client_id} groups={','.join(caller.groups)} " \\
        f"roles={','.join(caller.roles)} scopes={','.join(sorted(caller.scopes))}"
'''

MANIFEST = (
    "version: 1\nname: team-tools\n"
    + SERVE_AUTH
    + """tools:
  - name: whoami
    python: whoami:whoami
    read_only: true
"""
)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    folder = tmp_path_factory.mktemp("team")
    files = {"whoami.py": WHOAMI}
    with serving_team(folder, files, MANIFEST, env=RS_ENV) as team:
        yield team


class Memory(TokenStorage):
    """The SDK's token storage, in memory: each test logs in afresh."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def user_login(url: str, login_hint: str = "alice") -> OAuthClientProvider:
    """The SDK's authorization-code provider, knowing nothing but the MCP server's URL; the
    "browser" logs in as `login_hint`."""
    answers: list[dict[str, str]] = []

    async def redirect(authorization_url: str) -> None:
        answers.append(
            await browse_to_callback(f"{authorization_url}&login_hint={login_hint}", REDIRECT)
        )

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult.model_validate(answers.pop())

    metadata = OAuthClientMetadata(
        client_name="toolnexus tests",
        redirect_uris=[REDIRECT],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, Memory(), redirect, callback)


@asynccontextmanager
async def connected(
    url: str, auth: httpx2.Auth | None = None, token: str | None = None
) -> AsyncIterator[mcp.Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(auth=auth, headers=headers, timeout=WAIT) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(transport, read_timeout_seconds=WAIT) as client:
            yield client


async def whoami(client: mcp.Client) -> str:
    result = await client.call_tool("whoami", {})
    assert not result.is_error, result
    text = result.content[0]
    assert text.type == "text"
    return text.text


async def test_the_sdk_client_logs_in_through_discovery_alone(team: Team) -> None:
    with anyio.fail_after(WAIT * 2):
        async with connected(team.url, auth=user_login(team.url)) as client:
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == ["whoami"]
            said = await whoami(client)
    # The client registered itself (its id is the provider's choice).
    assert said.startswith("alice client=")
    assert said.endswith(" groups=ops roles=admin scopes=mcp")


async def test_each_user_is_told_apart(team: Team) -> None:
    with anyio.fail_after(WAIT * 2):
        async with connected(team.url, auth=user_login(team.url, "bob")) as client:
            said = await whoami(client)
    assert said.startswith("bob client=")
    assert said.endswith(" groups=dev roles= scopes=mcp")


async def test_client_credentials_log_in_through_discovery_alone(team: Team) -> None:
    # The issuer is named so the secret only ever goes there (the SDK asks for it); the token
    # endpoint and the resource are discovered.
    robot = ClientCredentialsOAuthProvider(
        team.url,
        Memory(),
        client_id="robot",
        client_secret="robot-secret",
        scope="mcp",
        issuer=team.provider.issuer,
    )
    with anyio.fail_after(WAIT):
        async with connected(team.url, auth=robot) as client:
            assert await whoami(client) == (
                "robot client=robot groups=robots roles=automation scopes=mcp"
            )


async def test_an_opaque_token_is_checked_by_introspection(team: Team) -> None:
    token = team.provider.token("robot-opaque", "robot-secret")
    assert token.count(".") != 2  # not a JWT
    with anyio.fail_after(WAIT):
        async with connected(team.url, token=token) as client:
            # The provider's introspection answer names no `sub` for a client's own token: the
            # caller's subject stays empty rather than guessed.
            assert await whoami(client) == (
                "None client=robot-opaque groups=robots roles= scopes=mcp"
            )


def test_a_request_without_a_token_is_told_where_to_log_in(team: Team) -> None:
    answer = httpx.post(team.url, json={})
    assert answer.status_code == 401
    prm = f"{team.url.removesuffix('/mcp')}/.well-known/oauth-protected-resource/mcp"
    assert answer.headers["www-authenticate"] == (f'Bearer scope="mcp", resource_metadata="{prm}"')
    for url in (prm, prm.removesuffix("/mcp")):
        document = httpx.get(url).json()
        assert document == {
            "resource": team.url,
            "authorization_servers": [team.provider.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["mcp"],
        }


def test_a_token_without_the_required_scope_gets_403_naming_it(team: Team) -> None:
    token = team.provider.token("robot", "robot-secret", scope="tools")
    answer = httpx.post(team.url, json={}, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 403
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]
    assert 'scope="mcp"' in answer.headers["www-authenticate"]


def test_the_typescript_sdk_client_logs_in_through_discovery_alone(team: Team) -> None:
    node = node_or_skip()
    done = subprocess.run(
        [node, str(FOLDER / "ts_client.mjs"), team.url, REDIRECT],
        cwd=FOLDER,
        check=False,
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["tools"] == ["whoami"]
    assert said["whoami"].startswith("alice client=")
    assert said["whoami"].endswith(" groups=ops roles=admin scopes=mcp")
