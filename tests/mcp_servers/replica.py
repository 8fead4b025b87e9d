"""One replica of a replicated MCP server over streamable HTTP, for the replica tests
(`tests/reliability/test_mcp_replicas.py`): several of these run behind a real nginx.

Run: `python replica.py PORT NAME [--stateless] [--legacy] [--held DIR]`.

- `--stateless` serves with `stateless_http=True`: no session lives in the replica, so any
  replica answers any request (what a load balancer without stickiness needs).
- `--legacy` refuses `server/discover`, so clients fall back to a handshake-era session (an
  `initialize` and a session id that only this replica knows).
- `--held DIR`: the `hold` tool writes `DIR/NAME-<text>` when it starts (so a test knows which
  replica holds the call, without waiting on time), then answers `text` once `DIR/release`
  exists.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.responses import JSONResponse

server = MCPServer("replica", version="1.0")
OPTIONS: dict[str, Any] = {}


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def whoami() -> str:
    """The name of the replica that answered."""
    return str(OPTIONS["name"])


@server.tool()
async def hold(text: str) -> str:
    """Mark the call as running on this replica, then answer once the test releases it."""
    held: Path = OPTIONS["held"]
    (held / f"{OPTIONS['name']}-{text}").write_text("")
    while not (held / "release").exists():
        await anyio.sleep(0.02)  # a file written by another process: nothing to wait on
    return text


def _legacy(app: Any) -> Any:
    """`app`, answering `server/discover` with "method not found" (a handshake-era server)."""

    async def refuse_discover(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
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

    return refuse_discover


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("name")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--held", type=Path, default=Path("."))
    options = parser.parse_args()
    OPTIONS.update(name=options.name, held=options.held)
    import uvicorn

    app = server.streamable_http_app(stateless_http=options.stateless)
    if options.legacy:
        app = _legacy(app)
    uvicorn.run(app, host="127.0.0.1", port=options.port, log_level="warning")


if __name__ == "__main__":
    main()
