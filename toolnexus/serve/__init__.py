"""A toolkit served as an MCP server (`toolnexus serve`): the room for everything a served
request meets.

`server` builds the MCP server and the HTTP app over a `Toolkit`; `log` carries what tools log
to the client; `forward` passes upstream servers' questions (elicitation, sampling) on to the
client; `identity` checks callers' OAuth access tokens and says who is calling (`Caller`,
`current_caller()`), `metadata` publishes where clients log in (RFC 9728), and `metrics`
counts calls and approvals for Prometheus (`GET /metrics`), and `health` reads a running
server's `/healthz` from another process (`toolnexus doctor --url`). The state replicas share
is in `toolnexus.state`: plain toolkits use it too.

The names below are the documented entry points (`toolnexus.serve.http_app`, `uvicorn
toolnexus.serve:app_from_env --factory`); importing this package does not import `mcp`,
`starlette` or `uvicorn` (they load when a server is built).
"""

from __future__ import annotations

from .identity import Caller, Refusal, TokenValidator, current_caller
from .metrics import METRICS_PATH
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
    "METRICS_PATH",
    "Caller",
    "Refusal",
    "ServeOptions",
    "TokenValidator",
    "app_from_env",
    "build_server",
    "current_caller",
    "http_app",
    "serve",
    "serve_stdio",
]
