"""A toolkit served as an MCP server (`toolnexus serve`): the room for everything a served
request meets.

`server` builds the MCP server and the HTTP app over a `Toolkit`; `log` carries what tools log
to the client; `forward` passes upstream servers' questions (elicitation, sampling) on to the
client. Who is calling and state shared between replicas belong here too.

The names below are the documented entry points (`toolnexus.serve.http_app`, `uvicorn
toolnexus.serve:app_from_env --factory`); importing this package does not import `mcp`,
`starlette` or `uvicorn` (they load when a server is built).
"""

from __future__ import annotations

from .server import (
    APPROVAL_TIMEOUT_S,
    HEALTH_PATH,
    MCP_PATH,
    ServeOptions,
    app_from_env,
    build_server,
    http_app,
    serve,
    serve_stdio,
)

__all__ = [
    "APPROVAL_TIMEOUT_S",
    "HEALTH_PATH",
    "MCP_PATH",
    "ServeOptions",
    "app_from_env",
    "build_server",
    "http_app",
    "serve",
    "serve_stdio",
]
