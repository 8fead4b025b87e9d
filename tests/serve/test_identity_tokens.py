"""Bad access tokens at `serve`'s door: each is refused with a 401 that tells the client what to
do and nothing about why, and a log line that says exactly why. The issuer is a real HTTP
server on 127.0.0.1 (its metadata and key set, which tests rotate and take down); tokens are
signed here, since no real provider issues broken ones. The served app runs in process (the
transport is not what is tested here)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import mcp
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp.client.streamable_http import streamable_http_client

from toolnexus import ConfigError, acreate_toolkit
from toolnexus.manifest import ServeAuth
from toolnexus.serve import Caller, Refusal, TokenValidator, http_app
from toolnexus.serve import identity as identity_module

from ..test_serve import write_manifest

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8000"
AUDIENCE = f"{BASE}/mcp"
WAIT = 30.0


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _public_jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    jwk = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


@dataclass
class Issuer:
    """Discovery and JWKS over real HTTP; `keys` is what /jwks serves right now."""

    url: str
    server: ThreadingHTTPServer
    signing: dict[str, Any] = field(default_factory=dict)
    """kid -> private key."""
    keys: list[dict[str, Any]] = field(default_factory=list)
    jwks_hits: int = 0

    def add_key(self, kid: str, alg: str = "RS256") -> None:
        key = (
            rsa.generate_private_key(65537, 2048)
            if alg == "RS256"
            else ec.generate_private_key(ec.SECP256R1())
        )
        self.signing[kid] = key
        self.keys.append(_public_jwk(key, kid, alg))

    def mint(self, kid: str = "k1", alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "alice",
            "client_id": "cli",
            "scope": "mcp",
            "iat": now,
            "exp": now + 600,
            "jti": f"{time.monotonic_ns()}",
            "groups": ["ops"],
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(
            payload, self.signing[kid], algorithm=alg, headers={"kid": kid, "typ": "at+jwt"}
        )

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    holder: dict[str, Issuer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = holder["issuer"]
            if self.path == "/.well-known/openid-configuration":
                body: Any = {"issuer": found.url, "jwks_uri": f"{found.url}/jwks"}
            elif self.path == "/jwks":
                found.jwks_hits += 1
                body = {"keys": found.keys}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found = Issuer(url=f"http://127.0.0.1:{server.server_address[1]}", server=server)
    holder["issuer"] = found
    found.add_key("k1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@asynccontextmanager
async def served(tmp_path: Path, issuer: Issuer) -> AsyncIterator[httpx2.AsyncClient]:
    """The app (`http_app` with `auth`), started, and an HTTP client talking to it."""
    auth = ServeAuth(issuer=issuer.url, audience=AUDIENCE, required_scopes=("mcp",))
    async with await acreate_toolkit(write_manifest(tmp_path)) as toolkit:
        app = http_app(toolkit, auth=auth)
        async with app.router.lifespan_context(app):
            transport = httpx2.ASGITransport(app)
            async with httpx2.AsyncClient(transport=transport, base_url=BASE) as http:
                yield http


def _forged(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    head = _b64(json.dumps(header).encode())
    body = _b64(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64(signature)}"


def _claims(issuer: Issuer) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "scope": "mcp", "exp": now + 600}


def _hs256_with_public_key(issuer: Issuer) -> str:
    """The classic confusion: the issuer's *public* key used as an HMAC secret."""
    pem = (
        issuer.signing["k1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    head = _b64(json.dumps({"alg": "HS256", "kid": "k1", "typ": "JWT"}).encode())
    body = _b64(json.dumps(_claims(issuer)).encode())
    signature = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(signature)}"


def _tampered(issuer: Issuer) -> str:
    head, _, rest = issuer.mint().partition(".")
    _, _, signature = rest.partition(".")
    claims = {**_claims(issuer), "sub": "admin"}
    return f"{head}.{_b64(json.dumps(claims).encode())}.{signature}"


def _other_key(issuer: Issuer) -> str:
    stranger = Issuer(url=issuer.url, server=issuer.server)
    stranger.add_key("k-stranger")
    return stranger.mint(kid="k-stranger")


def _es256_under_an_rsa_kid(issuer: Issuer) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return jwt.encode(_claims(issuer), key, algorithm="ES256", headers={"kid": "k1"})


BAD: dict[str, tuple[Any, str]] = {
    "expired": (lambda i: i.mint(exp=int(time.time()) - 120), "the token expired at"),
    "not yet valid": (lambda i: i.mint(nbf=int(time.time()) + 600), "the token is not valid yet"),
    "wrong audience": (
        lambda i: i.mint(aud="http://127.0.0.1:9999/mcp"),
        "does not name this server",
    ),
    "wrong issuer": (lambda i: i.mint(iss="http://127.0.0.1:1"), "iss 'http://127.0.0.1:1' is not"),
    "alg none": (
        lambda i: _forged({"alg": "none", "typ": "JWT"}, _claims(i)),
        "alg 'none' is refused (no signature)",
    ),
    "HS256 with the public key": (_hs256_with_public_key, "alg 'HS256' is refused"),
    "unknown kid": (_other_key, "no key of the issuer matches kid 'k-stranger'"),
    "tampered payload": (_tampered, "signature does not verify with key 'k1'"),
    "ES256 under an RSA key's kid": (
        _es256_under_an_rsa_kid,
        "alg ES256 is not one key 'k1' allows",
    ),
    "no exp": (lambda i: i.mint(exp=None), "the token has no 'exp' claim"),
    "not a JWT": (lambda i: "opaque-but-no-introspection", "the token is not a JWT"),
    "malformed payload": (
        lambda i: _b64(b'{"alg":"RS256","kid":"k1"}') + ".!!!." + _b64(b"sig"),
        "the token is malformed",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
async def test_a_bad_token_gets_a_plain_401_and_a_precise_log_line(
    case: str, issuer: Issuer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make, reason = BAD[case]
    token = make(issuer)
    with caplog.at_level(logging.WARNING, logger=identity_module.__name__), anyio.fail_after(WAIT):
        async with served(tmp_path, issuer) as http:
            answer = await http.post("/mcp", json={}, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", error_description="')
    assert f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"' in challenge
    # What the client reads is the same for every bad token: what to do, never which check failed.
    assert answer.json() == {
        "error": "invalid_token",
        "error_description": "the access token was not accepted; obtain a new one from the "
        "authorization server named in the resource metadata",
    }
    refused = [r.getMessage() for r in caplog.records if "refused a request" in r.getMessage()]
    assert len(refused) == 1 and reason in refused[0], refused


async def test_a_good_token_reaches_the_tools_and_a_missing_scope_is_named(
    issuer: Issuer, tmp_path: Path
) -> None:
    with anyio.fail_after(WAIT):
        async with served(tmp_path, issuer) as http:
            narrow = await http.post(
                "/mcp", json={}, headers={"Authorization": f"Bearer {issuer.mint(scope='other')}"}
            )
            assert narrow.status_code == 403
            assert narrow.headers["www-authenticate"].startswith(
                'Bearer error="insufficient_scope", error_description="'
            )
            assert 'scope="mcp"' in narrow.headers["www-authenticate"]
            http.headers["Authorization"] = f"Bearer {issuer.mint()}"
            streams = streamable_http_client(AUDIENCE, http_client=http)
            async with mcp.Client(streams) as client:
                added = await client.call_tool("add", {"a": 3, "b": 4})
                assert added.content[0].text == "7"  # type: ignore[union-attr]


async def test_no_token_is_told_where_to_log_in(issuer: Issuer, tmp_path: Path) -> None:
    with anyio.fail_after(WAIT):
        async with served(tmp_path, issuer) as http:
            answer = await http.post("/mcp", json={})
            health = await http.get("/healthz")
            metadata = await http.get("/.well-known/oauth-protected-resource/mcp")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer scope="mcp", resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
    )
    assert health.status_code == 200  # the health check and the metadata need no token
    assert metadata.json()["authorization_servers"] == [issuer.url]


# --- keys: rotation, the refetch floor, an unreachable key endpoint ---------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _validator(issuer: Issuer, clock: Clock) -> TokenValidator:
    return TokenValidator(ServeAuth(issuer=issuer.url, audience=AUDIENCE), clock=clock)


async def test_a_rotated_key_is_picked_up_no_sooner_than_the_floor(issuer: Issuer) -> None:
    clock = Clock()
    validator = _validator(issuer, clock)
    try:
        await validator.prepare()
        assert isinstance(await validator.validate(issuer.mint()), Caller)
        issuer.add_key("k2")
        hits = issuer.jwks_hits
        # Right after a fetch, a burst of unknown kids makes no request at all to the issuer.
        for _ in range(20):
            refused = await validator.validate(issuer.mint(kid="k2"))
            assert isinstance(refused, Refusal) and "kid 'k2'" in refused.reason
        assert issuer.jwks_hits == hits
        clock.now += identity_module.JWKS_REFETCH_FLOOR_S + 1
        accepted = await validator.validate(issuer.mint(kid="k2"))
        assert isinstance(accepted, Caller) and accepted.subject == "alice"
        assert accepted.groups == ("ops",)
        assert issuer.jwks_hits == hits + 1
    finally:
        await validator.aclose()


async def test_an_unreachable_key_endpoint_keeps_the_keys_in_hand(
    issuer: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    validator = _validator(issuer, clock)
    try:
        await validator.prepare()
        issuer.stop()
        clock.now += identity_module.JWKS_REFETCH_FLOOR_S + 1
        assert isinstance(await validator.validate(issuer.mint()), Caller)
        issuer.add_key("k9")
        with caplog.at_level(logging.WARNING, logger=identity_module.__name__):
            refused = await validator.validate(issuer.mint(kid="k9"))
        assert isinstance(refused, Refusal) and refused.status == 401
        assert "no key of the issuer matches kid 'k9'" in refused.reason
        assert any(
            "could not fetch the issuer's keys" in r.getMessage()
            and "keeping the 1 key(s) in hand" in r.getMessage()
            for r in caplog.records
        )
    finally:
        await validator.aclose()


async def test_a_token_seen_before_is_not_verified_again_until_it_expires(issuer: Issuer) -> None:
    validator = _validator(issuer, Clock())
    try:
        token = issuer.mint()
        first = await validator.validate(token)
        assert isinstance(first, Caller)
        assert await validator.validate(token) is first
    finally:
        await validator.aclose()


# --- set-up -----------------------------------------------------------------------------------


def _manifest_with_auth(tmp_path: Path, issuer_url: str) -> Path:
    auth = f"serve:\n  auth:\n    issuer: {issuer_url}\n    audience: {AUDIENCE}\n"
    return write_manifest(tmp_path, auth)


def test_a_static_token_beside_serve_auth_is_refused(tmp_path: Path) -> None:
    manifest = _manifest_with_auth(tmp_path, "https://login.example.com")
    with pytest.raises(ConfigError, match=r"drop --token .* or remove serve\.auth"):
        http_app(manifest, token="static-0123456789")


def test_serve_auth_is_enough_on_a_public_address(tmp_path: Path) -> None:
    manifest = _manifest_with_auth(tmp_path, "https://login.example.com")
    app = http_app(manifest, host="10.1.2.3")  # reads serve.auth from the manifest
    paths = {getattr(route, "path", None) for route in app.routes}
    assert {
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    } <= paths
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ConfigError, match="without a bearer token"):
        http_app(write_manifest(plain), host="10.1.2.3")
