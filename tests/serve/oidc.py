"""A real OpenID provider for the tests: panva's `oidc-provider` (npm), run by Node on 127.0.0.1.

`tests/fixtures/oidc/provider.mjs` says what it issues (users, clients, groups). `.ci/run` installs
its packages (`npm ci` in that folder); where Node or the packages are absent the tests that need
it are skipped, saying so.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from ..conftest import OutputLines, free_port
from ..test_serve import serving

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "oidc"
STARTUP = 60.0

SERVE_AUTH = """serve:
  auth:
    issuer: {issuer}
    audience: {audience}
    required_scopes: [mcp]
    introspection:
      client_id: toolnexus-rs
      client_secret: ${{OIDC_RS_SECRET}}
"""
"""A manifest's `serve.auth` for the provider (a template for `issuer` and `audience`): tokens
checked by introspection as the resource server `provider.mjs` registers, whose secret the
served process reads from `RS_ENV`."""
RS_ENV = {"OIDC_RS_SECRET": "rs-secret"}


def node_or_skip() -> str:
    """The `node` binary, or skip: the provider needs Node and `npm ci` in FOLDER."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the OpenID provider of these tests runs on it")
    for package in ("oidc-provider", "jose", "@modelcontextprotocol/sdk"):
        if not (FOLDER / "node_modules" / package / "package.json").exists():
            pytest.skip(
                f"npm package {package} is not installed; run `npm ci` in {FOLDER} (.ci/run does)"
            )
    return node


@dataclass
class Provider:
    issuer: str
    audience: str

    def token(self, client: str, secret: str, scope: str = "mcp") -> str:
        """An access token for this audience by the client-credentials grant."""
        answer = httpx.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "scope": scope, "resource": self.audience},
            auth=(client, secret),
        )
        answer.raise_for_status()
        return str(answer.json()["access_token"])


@contextlib.contextmanager
def running_provider(port: int, audience: str) -> Iterator[Provider]:
    """`provider.mjs` on `port`, issuing tokens for `audience`, until the block ends."""
    node = node_or_skip()
    process = subprocess.Popen(
        [node, str(FOLDER / "provider.mjs"), str(port), audience],
        cwd=FOLDER,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    output = OutputLines(process.stdout)
    try:
        line = output.wait_for(
            lambda line: line.startswith("ready "), what="the OpenID provider", seconds=STARTUP
        )
        yield Provider(issuer=line.split()[1], audience=audience)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        output.close()


@dataclass
class Team:
    """A provider and a `toolnexus serve --http` that trusts it, serving from `folder`."""

    provider: Provider
    url: str
    folder: Path


@contextlib.contextmanager
def serving_team(
    folder: Path, files: dict[str, str], manifest: str, env: dict[str, str] | None = None
) -> Iterator[Team]:
    """Start the provider, write `files` (dedented) and `manifest` (formatted with the
    provider's `issuer` and the served `audience`) into `folder`, and serve it over HTTP with
    `env` set, until the block ends: the one setup of the OpenID end-to-end tests."""
    node_or_skip()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running_provider(free_port(), url) as provider:
        for name, text in files.items():
            (folder / name).write_text(textwrap.dedent(text).lstrip())
        path = folder / "tools.yaml"
        path.write_text(manifest.format(issuer=provider.issuer, audience=url))
        with pytest.MonkeyPatch.context() as patch:
            for key, value in (env or {}).items():
                patch.setenv(key, value)
            args = [str(path), "--http", f"127.0.0.1:{port}"]
            with serving(args, cwd=folder, ready="Application startup complete"):
                yield Team(provider=provider, url=url, folder=folder)


async def browse_to_callback(authorization_url: str, redirect_uri: str) -> dict[str, str]:
    """Play the user's browser: follow the provider's redirects (its login and consent answer
    by themselves) until it sends the browser to `redirect_uri`; return that URL's query
    (`code`, `state`, `iss`)."""
    url = authorization_url
    async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
        for _ in range(12):
            if url.startswith(redirect_uri):
                query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
                if "code" not in query:
                    raise AssertionError(f"the provider refused the login: {url}")
                return query
            answer = await browser.get(url)
            if answer.status_code not in (302, 303):
                raise AssertionError(f"{url} answered {answer.status_code}: {answer.text[:500]}")
            url = urljoin(url, answer.headers["location"])
    raise AssertionError("too many redirects on the way to the callback")
