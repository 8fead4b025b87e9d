"""An MCPServer that misbehaves on request: the MCP faults `tests/reliability/test_mcp_faults.py`
checks (and the `mcp_large` benchmark), over stdio or streamable HTTP.

Run: `python faults.py [--http PORT] [--status-file FILE] [--token TOKEN] [--start-with BYTES]`.

- stdio by default. The wire is served from explicit streams, so tools can write raw bytes
  onto it (`garbage`, `bad_utf8`) or close it (`close_stdout`) as a broken server would.
- `--http PORT` serves streamable HTTP on 127.0.0.1:PORT at `/mcp`. `--token TOKEN` answers 401
  without an `Authorization` header and 403 with a wrong one; `--status-file FILE` answers
  every request with the HTTP status written in FILE while it exists (a server that starts
  failing mid-session), or never answers while FILE says `hang`. `--json-response` answers
  requests with plain JSON instead of server-sent events. `--legacy` refuses `server/discover`,
  so clients fall back to a handshake-era session (with a session id the server forgets when
  it restarts).
- `--start-with BYTES` writes BYTES (a Python bytes literal) onto the stdio wire before serving.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

server = MCPServer("faults", version="1.0")
WIRE: dict[str, int] = {}
"""`fd`: the stdio wire's file descriptor (a duplicate of fd 1), for tools that write raw bytes."""


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def big(size: int) -> str:
    """A text answer of `size` characters."""
    return "x" * size


@server.tool()
def bad_utf8() -> str:
    """Put a log notification with an invalid UTF-8 byte on the wire, then answer normally."""
    _raw(
        b'{"jsonrpc":"2.0","method":"notifications/message",'
        b'"params":{"level":"info","data":"bad \xff byte"}}\n'
    )
    return "after the bad byte"


@server.tool()
async def garbage() -> str:
    """Put a line that is not JSON-RPC on the wire, then never answer."""
    _raw(b"this is not JSON-RPC\n")
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def flood(size: int) -> str:
    """Put a log notification of about `size` bytes (no request id) on the wire, then never
    answer."""
    data = b"y" * size
    _raw(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"')
    _raw(data + b'"}}\n')
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def close_stdout() -> str:
    """Close the wire and keep running (stdin stays open), never answering."""
    os.close(WIRE.pop("fd"))
    os.close(1)
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
def exit_now() -> str:
    """Exit the process in the middle of the call."""
    os._exit(1)


@server.tool()
async def hang() -> str:
    """Never answer."""
    await anyio.sleep_forever()
    return "unreachable"


def _raw(data: bytes) -> None:
    assert "fd" in WIRE, "raw writes need the stdio transport"
    os.write(WIRE["fd"], data)


async def _serve_stdio(start_with: bytes) -> None:
    wire = WIRE["fd"] = os.dup(1)
    if start_with:
        os.write(wire, start_with)
    out = io.TextIOWrapper(os.fdopen(wire, "wb", closefd=False), encoding="utf-8")
    stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin, anyio.wrap_file(out)) as (read, write):
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


def _guarded_app(
    token: str | None, status_file: Path | None, json_response: bool, legacy: bool
) -> Any:
    """The MCP app behind a gate that answers with an HTTP error status, as a proxy would."""
    import json

    from starlette.responses import JSONResponse, PlainTextResponse

    app = server.streamable_http_app(json_response=json_response)

    async def refuse_discover(scope: Any, receive: Any, send: Any) -> None:
        """Pass the request on, unless it is `server/discover` (answered: method not found)."""
        chunks = []
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        body = b"".join(m.get("body", b"") for m in chunks)
        try:
            request = json.loads(body) if body else None
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            reply = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
            await JSONResponse(reply)(scope, receive, send)
            return
        queued = list(chunks)

        async def replay() -> Any:
            return queued.pop(0) if queued else await receive()

        await app(scope, replay, send)

    async def gate(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            status = None
            if status_file is not None and status_file.exists():
                written = status_file.read_text().strip()
                if written == "hang":
                    await anyio.sleep_forever()
                status = int(written)
            elif token is not None:
                given = headers.get(b"authorization")
                if given is None:
                    status = 401
                elif given != f"Bearer {token}".encode():
                    status = 403
            if status is not None:
                answer = PlainTextResponse(f"status {status}", status_code=status)
                await answer(scope, receive, send)
                return
            if legacy and scope["method"] == "POST":
                await refuse_discover(scope, receive, send)
                return
        await app(scope, receive, send)

    return gate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--token", default=None)
    parser.add_argument("--status-file", type=Path, default=None)
    parser.add_argument("--start-with", default="")
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--legacy", action="store_true")
    options = parser.parse_args()
    if options.http is None:
        start = ast.literal_eval(options.start_with) if options.start_with else b""
        anyio.run(_serve_stdio, start)
        return
    import uvicorn

    app = _guarded_app(options.token, options.status_file, options.json_response, options.legacy)
    uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
