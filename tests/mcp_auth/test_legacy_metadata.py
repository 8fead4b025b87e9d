"""2025-03-26 servers (no protected-resource metadata): the authorization server metadata at the
MCP server's own origin may name an issuer with a path on that origin (what the conformance
suite's auth/2025-03-26-oauth-metadata-backcompat scenario serves, tested in
test_conformance.py); an issuer on another origin stays refused."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolnexus.errors import SourceError
from toolnexus.mcp.auth import AuthSettings
from toolnexus.mcp.login import login
from toolnexus.mcp.tokens import TokenStore


def _legacy_server(issuer_of: str) -> ThreadingHTTPServer:
    """An MCP endpoint that answers 401 without `resource_metadata`, has no protected-resource
    metadata, and serves authorization server metadata at its origin naming `issuer_of`
    (`{origin}` is replaced by its own origin)."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, object], **headers: str) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            origin = f"http://{self.headers['Host']}"  # 127.0.0.1:PORT, as the client sent it
            if self.path == "/.well-known/oauth-authorization-server":
                issuer = issuer_of.format(origin=origin)
                self._send(
                    200,
                    {
                        "issuer": issuer,
                        "authorization_endpoint": f"{issuer}/authorize",
                        "token_endpoint": f"{issuer}/token",
                        "registration_endpoint": f"{issuer}/register",
                        "response_types_supported": ["code"],
                        "code_challenge_methods_supported": ["S256"],
                    },
                )
            else:
                self._send(404, {"error": "not_found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if self.path.endswith("/register"):
                self._send(201, {**body, "client_id": "legacy-client"})
            else:
                self._send(401, {"error": "invalid_token"}, **{"WWW-Authenticate": "Bearer"})

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def servers() -> Iterator[list[ThreadingHTTPServer]]:
    started: list[ThreadingHTTPServer] = []
    yield started
    for server in started:
        server.shutdown()


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/mcp"


def _login(url: str, tmp_path: Path, visited: list[str], timeout: float) -> None:
    asyncio.run(
        login(
            "legacy",
            url,
            AuthSettings(grant="authorization_code"),
            out=io.StringIO(),
            open_browser=visited.append,
            store=TokenStore(tmp_path / "tokens.json"),
            timeout=timeout,
        )
    )


def test_an_issuer_with_a_path_on_the_servers_origin_is_taken(
    servers: list[ThreadingHTTPServer], tmp_path: Path
) -> None:
    servers.append(_legacy_server("{origin}/oauth"))
    visited: list[str] = []
    # Nobody answers the authorization page here: reaching it is what this test asks.
    with pytest.raises(SourceError, match="no answer from the browser"):
        _login(_url(servers[0]), tmp_path, visited, timeout=2)
    assert len(visited) == 1
    assert visited[0].startswith(_url(servers[0]).removesuffix("/mcp") + "/oauth/authorize?")


def test_an_issuer_on_another_origin_is_still_refused(
    servers: list[ThreadingHTTPServer], tmp_path: Path
) -> None:
    servers.append(_legacy_server("{origin}"))
    other = _url(servers[0]).removesuffix("/mcp")
    servers.append(_legacy_server(f"{other}/oauth"))
    visited: list[str] = []
    with pytest.raises(SourceError, match="issuer mismatch"):
        _login(_url(servers[1]), tmp_path, visited, timeout=10)
    assert visited == []  # refused at discovery: no authorization page was ever shown
