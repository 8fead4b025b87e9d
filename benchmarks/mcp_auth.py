"""MCP over OAuth: what `auth: oauth` costs per call and per connect, against the same server
reached with the same bearer token as a plain `headers:` entry, in the same run.

The server pair is the test suite's (`tests/mcp_auth/servers.py`: our small authorization
server, the SDK's `MCPServer` behind its bearer middleware), in a subprocess on 127.0.0.1. The
login is done once with a scripted browser, into a token file in a temporary folder.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from run import ROOT, Row, spread, table

SERVERS = ROOT / "tests" / "mcp_auth" / "servers.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the protected MCP server did not start") from None
            time.sleep(0.05)  # polling a port: there is no event to wait on


def bench_mcp_auth() -> None:
    as_port, mcp_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVERS), "--as-port", str(as_port), "--mcp-port", str(mcp_port)],
        stderr=subprocess.DEVNULL,
    )
    folder = tempfile.mkdtemp(prefix="toolnexus-bench-auth-")
    os.environ["TOOLNEXUS_TOKEN_STORE"] = str(Path(folder) / "tokens.json")
    try:
        _wait(as_port, proc)
        _wait(mcp_port, proc)
        asyncio.run(_bench(f"http://127.0.0.1:{mcp_port}/mcp"))
    finally:
        os.environ.pop("TOOLNEXUS_TOKEN_STORE", None)
        proc.terminate()
        proc.wait(10)


async def _bench(url: str) -> None:
    import httpx

    from toolnexus import acreate_toolkit
    from toolnexus.mcp.auth import AuthSettings
    from toolnexus.mcp.login import login
    from toolnexus.mcp.tokens import TokenStore

    async def browser(authorization_url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=True) as client:
            await client.get(authorization_url)

    importlib.import_module("mcp.client.auth")  # first: the login is timed, not the import

    started = time.perf_counter()
    await login(
        "docs",
        url,
        AuthSettings(grant="authorization_code"),
        out=io.StringIO(),
        open_browser=browser,
    )
    login_ms = (time.perf_counter() - started) * 1e3
    record = TokenStore().get(url)
    assert record is not None
    token = record["tokens"]["access_token"]
    oauth = {"version": 1, "mcp_servers": {"docs": {"url": url, "auth": "oauth"}}}
    bearer = {
        "version": 1,
        "mcp_servers": {"docs": {"url": url, "headers": {"Authorization": f"Bearer {token}"}}},
    }

    connect: dict[str, list[float]] = {"oauth": [], "headers": []}
    for i in range(8):
        order = ["oauth", "headers"] if i % 2 == 0 else ["headers", "oauth"]
        for kind in order:
            start = time.perf_counter()
            toolkit = await acreate_toolkit(oauth if kind == "oauth" else bearer)
            connect[kind].append((time.perf_counter() - start) * 1e3)
            assert toolkit.status()["docs"]["state"] == "ready"
            await toolkit.aclose()

    by_oauth = await acreate_toolkit(oauth)
    by_header = await acreate_toolkit(bearer)
    calls: dict[str, list[float]] = {"oauth": [], "headers": []}
    number = 10
    try:
        for toolkit in (by_oauth, by_header):
            check = await toolkit.aexecute("whoami", {})
            assert not check.is_error, check.content

        async def batch(call: Callable[[], Awaitable[Any]], into: list[float]) -> None:
            start = time.perf_counter()
            for _ in range(number):
                await call()
            into.append((time.perf_counter() - start) / number * 1e6)

        pair = [
            (lambda: by_oauth.aexecute("whoami", {}), calls["oauth"]),
            (lambda: by_header.aexecute("whoami", {}), calls["headers"]),
        ]
        for i in range(30):  # A-B-B-A: load from other processes hits both alike
            for call, into in pair if i % 2 == 0 else reversed(pair):
                await batch(call, into)
    finally:
        await by_oauth.aclose()
        await by_header.aclose()

    call_oauth, call_header = statistics.median(calls["oauth"]), statistics.median(calls["headers"])
    conn_oauth = statistics.median(connect["oauth"])
    conn_header = statistics.median(connect["headers"])
    rows: list[Row] = [
        (
            "call, `headers: {Authorization: Bearer …}`",
            call_header,
            "µs",
            f"batches {spread(calls['headers'])} µs",
        ),
        (
            "call, `auth: oauth` (stored login, same token)",
            call_oauth,
            "µs",
            f"batches {spread(calls['oauth'])} µs; {call_oauth / call_header:.2f}× headers",
        ),
        ("connect + list, `headers:`", conn_header, "ms", f"{spread(connect['headers'])} ms"),
        (
            "connect + list, `auth: oauth`",
            conn_oauth,
            "ms",
            f"{spread(connect['oauth'])} ms; {conn_oauth / conn_header:.2f}× headers",
        ),
        (
            "`login` (discovery, registration, PKCE, token; scripted browser)",
            login_ms,
            "ms",
            "once per user and server",
        ),
    ]
    table("MCP over OAuth (streamable HTTP, 127.0.0.1)", rows)


if __name__ == "__main__":
    bench_mcp_auth()
