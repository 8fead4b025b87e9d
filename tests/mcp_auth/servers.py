"""An OAuth-protected MCP server and its authorization server, on two ports of 127.0.0.1.

Run as `python servers.py --as-port A --mcp-port B [--access-ttl S]`. The MCP server is the
SDK's `MCPServer` over streamable HTTP with its own auth pieces: `AuthSettings` (protected
resource metadata at `/.well-known/oauth-protected-resource/mcp`, the bearer middleware and its
`WWW-Authenticate` challenge) and a `TokenVerifier` over this process's token table. The
authorization server is our own small one, because the SDK's token endpoint has no
client-credentials grant and we need to expire and revoke tokens at will: RFC 8414 metadata,
dynamic registration (RFC 7591), client ID metadata documents accepted by URL (not fetched: no
network here), authorization code with PKCE S256 (auto-approved: the "user" always consents),
refresh, and client credentials for the client `robot` / `s3cret`.

The tool `admin_op` needs the scope `admin` on top of `mcp`: calling it with less answers 403
`insufficient_scope`, the step-up challenge. `/test/state` and `/test/revoke` on the
authorization server let tests look and break things; `/test/expire` ends every access token
(refresh tokens stay good); `/test/slow-refresh?seconds=S` makes each refresh answer S seconds
after its refresh token was spent (the window in which a second client holding that token
would spend it too), and `counts.refresh_tries` counts refreshes asked for, refused or not.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import secrets
import socket
import time
import warnings
from typing import Any
from urllib.parse import urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

ROBOT = ("robot", "s3cret")
CONFIDENTIAL = ("confidential", "c0nfidential")
SIGNER = "signer"
"""A client that authenticates with a JWT it signs (private_key_jwt); its key is made at
start and handed to the test at /test/client-key."""
SIGNER_KEY = ec.generate_private_key(ec.SECP256R1())
SIGNER_PUBLIC = SIGNER_KEY.public_key()
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
"""A confidential client registered beforehand for the authorization code flow."""
state: dict[str, Any] = {
    "clients": {},  # client_id -> registration
    "codes": {},  # code -> grant
    "access": {},  # token -> {client_id, scopes, expires_at}
    "refresh": {},  # token -> {client_id, scopes}
    "counts": {"register": 0, "authorize": 0, "code": 0, "refresh": 0, "client_credentials": 0,
               "confidential": 0, "private_key_jwt": 0, "refresh_tries": 0},
    "authorize_client_ids": [],
    "refresh_delay": 0.0,
}


def _issue(client_id: str, scopes: list[str], ttl: int, *, refresh: bool) -> dict[str, Any]:
    access = secrets.token_urlsafe(16)
    state["access"][access] = {
        "client_id": client_id,
        "scopes": scopes,
        "expires_at": time.time() + ttl,
    }
    out: dict[str, Any] = {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ttl,
        "scope": " ".join(scopes),
    }
    if refresh:
        token = secrets.token_urlsafe(16)
        state["refresh"][token] = {"client_id": client_id, "scopes": scopes}
        out["refresh_token"] = token
    return out


def authorization_server(issuer: str, ttl: int) -> Starlette:
    async def metadata(request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "registration_endpoint": f"{issuer}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code",
                    "refresh_token",
                    "client_credentials",
                ],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "none",
                    "client_secret_basic",
                    "private_key_jwt",
                ],
                "scopes_supported": ["mcp", "admin"],
                "client_id_metadata_document_supported": True,
            }
        )

    async def register(request: Request) -> Response:
        body = await request.json()
        state["counts"]["register"] += 1
        client_id = f"dyn-{state['counts']['register']}"
        record = {
            "client_id": client_id,
            "client_id_issued_at": int(time.time()),
            "redirect_uris": body.get("redirect_uris", []),
            "grant_types": body.get("grant_types", ["authorization_code"]),
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "client_name": body.get("client_name"),
        }
        state["clients"][client_id] = record
        return JSONResponse(record, status_code=201)

    async def authorize(request: Request) -> Response:
        q = request.query_params
        client_id = q["client_id"]
        state["counts"]["authorize"] += 1
        state["authorize_client_ids"].append(client_id)
        redirect_uri = q["redirect_uri"]
        client = state["clients"].get(client_id)
        cimd = client_id.startswith("https://")
        if client is None and not cimd and client_id not in ("pre-registered", CONFIDENTIAL[0]):
            return JSONResponse({"error": "invalid_client"}, status_code=400)
        if client is not None and redirect_uri not in client["redirect_uris"]:
            return JSONResponse({"error": "invalid_redirect_uri"}, status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return JSONResponse({"error": "invalid_request", "why": "PKCE"}, status_code=400)
        code = secrets.token_urlsafe(16)
        state["codes"][code] = {
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "challenge": q["code_challenge"],
            "scopes": (q.get("scope") or "mcp").split(),
        }
        target = f"{redirect_uri}?{urlencode({'code': code, 'state': q.get('state', '')})}"
        return RedirectResponse(target, status_code=302)

    async def token(request: Request) -> Response:
        form = await request.form()
        grant = form.get("grant_type")
        if grant == "authorization_code":
            grant_record = state["codes"].pop(str(form.get("code")), None)
            if grant_record is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            verifier = str(form.get("code_verifier", ""))
            digest = hashlib.sha256(verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).decode().rstrip("=")
            if challenge != grant_record["challenge"]:
                return JSONResponse({"error": "invalid_grant", "why": "PKCE"}, status_code=400)
            if form.get("redirect_uri") != grant_record["redirect_uri"]:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            if grant_record["client_id"] == CONFIDENTIAL[0]:
                # A confidential client registered beforehand authenticates (HTTP Basic).
                pair = f"{CONFIDENTIAL[0]}:{CONFIDENTIAL[1]}".encode()
                expected = base64.b64encode(pair).decode()
                if request.headers.get("authorization", "") != f"Basic {expected}":
                    return JSONResponse({"error": "invalid_client"}, status_code=401)
                state["counts"]["confidential"] += 1
            state["counts"]["code"] += 1
            issued = _issue(grant_record["client_id"], grant_record["scopes"], ttl, refresh=True)
            return JSONResponse(issued)
        if grant == "refresh_token":
            state["counts"]["refresh_tries"] += 1
            old = state["refresh"].pop(str(form.get("refresh_token")), None)
            if old is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            await asyncio.sleep(state["refresh_delay"])
            state["counts"]["refresh"] += 1
            return JSONResponse(_issue(old["client_id"], old["scopes"], ttl, refresh=True))
        if grant == "client_credentials" and form.get("client_assertion_type") == JWT_BEARER:
            # private_key_jwt (RFC 7523): the robot's JWT, signed with its key, for us.
            try:
                claims = jwt.decode(
                    str(form.get("client_assertion")),
                    SIGNER_PUBLIC,
                    algorithms=["ES256"],
                    audience=issuer,
                )
            except jwt.PyJWTError as exc:
                return JSONResponse({"error": "invalid_client", "why": str(exc)}, status_code=401)
            if claims.get("iss") != SIGNER or claims.get("sub") != SIGNER:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            state["counts"]["private_key_jwt"] += 1
            scopes = str(form.get("scope") or "mcp").split()
            return JSONResponse(_issue(SIGNER, scopes, ttl, refresh=False))
        if grant == "client_credentials":
            basic = request.headers.get("authorization", "")
            expected = base64.b64encode(f"{ROBOT[0]}:{ROBOT[1]}".encode()).decode()
            if basic != f"Basic {expected}":
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            state["counts"]["client_credentials"] += 1
            scopes = str(form.get("scope") or "mcp").split()
            return JSONResponse(_issue(ROBOT[0], scopes, ttl, refresh=False))
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    async def test_state(request: Request) -> Response:
        return JSONResponse(
            {
                "counts": state["counts"],
                "clients": sorted(state["clients"]),
                "authorize_client_ids": state["authorize_client_ids"],
            }
        )

    async def client_key(request: Request) -> Response:
        pem = SIGNER_KEY.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return Response(pem, media_type="application/x-pem-file")

    async def revoke(request: Request) -> Response:
        state["access"].clear()
        state["refresh"].clear()
        return JSONResponse({"revoked": True})

    async def slow_refresh(request: Request) -> Response:
        state["refresh_delay"] = float(request.query_params["seconds"])
        return JSONResponse({"refresh_delay": state["refresh_delay"]})

    async def expire(request: Request) -> Response:
        for found in state["access"].values():
            found["expires_at"] = 0
        return JSONResponse({"expired": True})

    return Starlette(
        routes=[
            Route("/test/expire", expire, methods=["POST"]),
            Route("/test/slow-refresh", slow_refresh, methods=["POST"]),
            Route("/test/client-key", client_key),
            Route("/.well-known/oauth-authorization-server", metadata),
            Route("/register", register, methods=["POST"]),
            Route("/authorize", authorize),
            Route("/token", token, methods=["POST"]),
            Route("/test/state", test_state),
            Route("/test/revoke", revoke, methods=["POST"]),
        ]
    )


class Verifier:
    """The MCP server's `TokenVerifier`: the authorization server's table, in this process."""

    async def verify_token(self, token: str) -> AccessToken | None:
        found = state["access"].get(token)
        if found is None or found["expires_at"] < time.time():
            return None
        return AccessToken(
            token=token,
            client_id=found["client_id"],
            scopes=found["scopes"],
            expires_at=int(found["expires_at"]),
        )


def mcp_server(issuer: str, resource: str, json_response: bool = False) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = MCPServer(
            "protected",
            token_verifier=Verifier(),
            auth=AuthSettings(
                issuer_url=issuer,  # type: ignore[arg-type]
                resource_server_url=resource,  # type: ignore[arg-type]
                required_scopes=["mcp"],
                validate_token_resource=False,
            ),
        )

    @server.tool()
    def whoami() -> str:
        """Say who called."""
        return "you are logged in"

    @server.tool()
    def admin_op() -> str:
        """Something that needs the admin scope."""
        return "admin done"

    arrived: list[asyncio.Event] = []

    @server.tool()
    async def rendezvous() -> str:
        """Wait (up to 5 s) for a second concurrent call: "together" when one came."""
        mine = asyncio.Event()
        arrived.append(mine)
        if len(arrived) % 2 == 0:
            for event in arrived[-2:]:
                event.set()
        try:
            await asyncio.wait_for(mine.wait(), 5)
        except TimeoutError:
            arrived.remove(mine)
            return "alone"
        return "together"

    app = server.streamable_http_app(json_response=json_response)
    metadata_url = f"{resource.rsplit('/mcp', 1)[0]}/.well-known/oauth-protected-resource/mcp"

    async def step_up(scope: Any, receive: Any, send: Any) -> None:
        """Answer 403 insufficient_scope to `admin_op` called without the admin scope."""
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks: list[Any] = []
        body = b""
        while True:
            message = await receive()
            chunks.append(message)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            call = json.loads(body)
        except ValueError:
            call = {}
        is_admin = (
            isinstance(call, dict)
            and call.get("method") == "tools/call"
            and call.get("params", {}).get("name") == "admin_op"
        )
        if is_admin:
            headers = dict(scope["headers"])
            bearer = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
            found = state["access"].get(bearer)
            if found is not None and "admin" not in found["scopes"]:
                challenge = (
                    f'Bearer error="insufficient_scope", scope="mcp admin", '
                    f'resource_metadata="{metadata_url}"'
                )
                response = JSONResponse(
                    {"error": "insufficient_scope"},
                    status_code=403,
                    headers={"WWW-Authenticate": challenge},
                )
                await response(scope, receive, send)
                return

        async def replay() -> Any:
            return chunks.pop(0) if chunks else await receive()

        await app(scope, replay, send)

    return step_up


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--as-port", type=int, required=True)
    parser.add_argument("--mcp-port", type=int, required=True)
    parser.add_argument("--access-ttl", type=int, default=3600)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--as-fd", type=int, help="a socket already listening on --as-port")
    parser.add_argument("--mcp-fd", type=int, help="a socket already listening on --mcp-port")
    options = parser.parse_args()
    issuer = f"http://127.0.0.1:{options.as_port}"
    resource = f"http://127.0.0.1:{options.mcp_port}/mcp"
    servers = [
        uvicorn.Server(
            uvicorn.Config(
                authorization_server(issuer, options.access_ttl),
                host="127.0.0.1",
                port=options.as_port,
                log_level="warning",
            )
        ),
        uvicorn.Server(
            uvicorn.Config(
                mcp_server(issuer, resource, options.json_response),
                host="127.0.0.1",
                port=options.mcp_port,
                log_level="warning",
            )
        ),
    ]
    # Sockets the test bound and passed in: a port chosen free and bound later, here, can be
    # taken in between by another test's server or an outgoing connection.
    fds = (options.as_fd, options.mcp_fd)
    await asyncio.gather(
        *(
            server.serve(sockets=None if fd is None else [socket.socket(fileno=fd)])
            for server, fd in zip(servers, fds, strict=True)
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
