"""`serve` as an OAuth resource server: what checking a JWT access token costs.

1. Token validation per request (`TokenValidator.validate`), with the issuer's keys cached:
   a token seen for the first time (its signature is verified: RS256 and ES256) and a token
   seen before (remembered until it expires, as MCP clients send the same token with every
   request).
2. Calls per second through `serve`'s HTTP app (`http_app`: Starlette, the auth middleware, the
   MCP SDK's streamable HTTP, the toolkit) with JWT auth, with the static `--token`, and with no
   authentication, A-B interleaved in the same run. The app runs in process (ASGI transport), so
   the measurement is the server's own path, not the loopback network's noise.

The issuer's metadata and keys are served over real HTTP on 127.0.0.1. Run:
`.venv/bin/python benchmarks/serve_auth.py`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from run import Row, spread, table

AUDIENCE = "http://127.0.0.1:8000/mcp"
MANIFEST = """
version: 1
tools:
  - name: add
    python: mathmod:add
"""
MATH = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


@contextmanager
def issuer(keys: list[dict[str, Any]]) -> Iterator[str]:
    holder: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = holder["url"]
            if self.path == "/.well-known/openid-configuration":
                body: Any = {"issuer": url, "jwks_uri": f"{url}/jwks"}
            else:
                body = {"keys": keys}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["url"]
    finally:
        server.shutdown()
        server.server_close()


def _keys() -> dict[str, tuple[Any, dict[str, Any]]]:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    out = {}
    for alg, key in (
        ("RS256", rsa.generate_private_key(65537, 2048)),
        ("ES256", ec.generate_private_key(ec.SECP256R1())),
    ):
        jwk = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key()))
        out[alg] = (key, {**jwk, "kid": alg.lower(), "alg": alg, "use": "sig"})
    return out


def _mint(url: str, key: Any, alg: str, n: int) -> str:
    import jwt

    claims = {
        "iss": url,
        "aud": AUDIENCE,
        "sub": f"user-{n}",
        "scope": "mcp",
        "exp": int(time.time()) + 3600,
        "groups": ["ops"],
    }
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": alg.lower(), "typ": "at+jwt"})


async def _validation(url: str, keys: dict[str, tuple[Any, dict[str, Any]]]) -> list[Row]:
    from toolnexus.manifest import ServeAuth
    from toolnexus.serve import Caller, TokenValidator

    validator = TokenValidator(ServeAuth(issuer=url, audience=AUDIENCE))
    await validator.prepare()
    rows: list[Row] = []
    try:
        for alg, (key, _) in keys.items():
            fresh = [_mint(url, key, alg, n) for n in range(3000)]
            samples = []
            for chunk in range(15):
                batch = fresh[chunk * 200 : (chunk + 1) * 200]
                start = time.perf_counter()
                for token in batch:
                    verdict = await validator.validate(token)
                samples.append((time.perf_counter() - start) / len(batch) * 1e6)
                assert isinstance(verdict, Caller)
            rows.append(
                (
                    f"validate a {alg} token seen for the first time (signature verified)",
                    statistics.median(samples),
                    "µs",
                    f"target ≤ 100 µs with a cached key; spread {spread(samples)}",
                )
            )
        import jwt

        public = keys["RS256"][0].public_key()
        token = _mint(url, keys["RS256"][0], "RS256", -1)
        samples = []
        for _ in range(15):
            start = time.perf_counter()
            for _ in range(200):
                jwt.decode(token, public, algorithms=["RS256"], audience=AUDIENCE, issuer=url)
            samples.append((time.perf_counter() - start) / 200 * 1e6)
        rows.append(
            (
                "for scale: PyJWT's decode alone, RS256 (same machine, same run)",
                statistics.median(samples),
                "µs",
                f"the floor under the first row; spread {spread(samples)}",
            )
        )
        await validator.validate(token)
        samples = []
        for _ in range(15):
            start = time.perf_counter()
            for _ in range(2000):
                await validator.validate(token)
            samples.append((time.perf_counter() - start) / 2000 * 1e6)
        rows.append(
            (
                "validate a token seen before (remembered until it expires)",
                statistics.median(samples),
                "µs",
                f"what each further request of a client costs; spread {spread(samples)}",
            )
        )
    finally:
        await validator.aclose()
    return rows


async def _calls(url: str, keys: dict[str, tuple[Any, dict[str, Any]]]) -> list[Row]:
    import httpx2
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    from toolnexus import acreate_toolkit
    from toolnexus.manifest import ServeAuth
    from toolnexus.serve import http_app

    folder = Path(tempfile.mkdtemp(prefix="toolnexus-bench-serve-auth-"))
    (folder / "mathmod.py").write_text(MATH.lstrip())
    (folder / "tools.yaml").write_text(MANIFEST.lstrip())
    static = "bench-token-0123456789"
    jwt_token = _mint(url, keys["RS256"][0], "RS256", 0)
    auth = ServeAuth(issuer=url, audience=AUDIENCE, required_scopes=("mcp",))
    number = 50
    rates: dict[str, list[float]] = {"jwt": [], "token": [], "none": []}
    async with await acreate_toolkit(folder / "tools.yaml") as toolkit:
        setups = {
            "jwt": (http_app(toolkit, auth=auth), jwt_token),
            "token": (http_app(toolkit, token=static), static),
            "none": (http_app(toolkit), None),
        }
        clients: dict[str, Any] = {}
        async with asyncio.timeout(600):
            stack = []
            try:
                for kind, (app, token) in setups.items():
                    lifespan = app.router.lifespan_context(app)
                    await lifespan.__aenter__()
                    stack.append(lifespan)
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    http = httpx2.AsyncClient(
                        transport=httpx2.ASGITransport(app),
                        base_url="http://127.0.0.1:8000",
                        headers=headers,
                    )
                    stack.append(http)
                    client = mcp.Client(streamable_http_client(AUDIENCE, http_client=http))
                    await client.__aenter__()
                    stack.append(client)
                    clients[kind] = client
                    assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"
                order = list(clients)
                for round_ in range(12):  # interleaved: other processes' load hits all alike
                    for kind in order if round_ % 2 == 0 else reversed(order):
                        start = time.perf_counter()
                        for i in range(number):
                            await clients[kind].call_tool("add", {"a": i, "b": 1})
                        rates[kind].append(number / (time.perf_counter() - start))
            finally:
                for item in reversed(stack):
                    await item.__aexit__(None, None, None)
    jwt_rate, token_rate, none_rate = (
        statistics.median(rates[k]) for k in ("jwt", "token", "none")
    )
    return [
        (
            "calls/s through serve, no authentication",
            none_rate,
            "calls/s",
            f"spread {spread(rates['none'])}",
        ),
        (
            "calls/s through serve, static --token",
            token_rate,
            "calls/s",
            f"spread {spread(rates['token'])}",
        ),
        (
            "calls/s through serve, JWT access token (serve.auth)",
            jwt_rate,
            "calls/s",
            f"spread {spread(rates['jwt'])}",
        ),
        ("JWT ÷ no authentication", jwt_rate / none_rate, "×", "target ≥ 0.9×"),
    ]


def bench_serve_auth() -> None:
    keys = _keys()
    with issuer([jwk for _, jwk in keys.values()]) as url:
        table("serve: OAuth access tokens (JWT) per request", asyncio.run(_validation(url, keys)))
        table(
            "serve: calls through the HTTP app with and without auth",
            asyncio.run(_calls(url, keys)),
        )


if __name__ == "__main__":
    bench_serve_auth()
