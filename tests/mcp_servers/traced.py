"""An MCPServer that shows what trace context reached it.

Run: `python traced.py SPANS_FILE`. It configures an OpenTelemetry SDK writing its spans to
SPANS_FILE (the SDK's server middleware then opens a span per request from the request's
`_meta`); its `where` tool also reads `_meta` itself, starts its own span from the
`traceparent` it found, and answers with what it received.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from opentelemetry import trace
from opentelemetry.propagate import extract

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "tracing"))

from spanfile import install  # pyright: ignore[reportMissingImports]

server = MCPServer("traced", version="1.0")


@server.tool()
def where(label: str, ctx: Context) -> str:
    """Say which trace context the request carried."""
    meta = ctx.request_context.meta
    carrier = dict(meta or {})  # the request's `_meta`, as it arrived
    received = {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}
    tracer = trace.get_tracer("traced-server")
    with tracer.start_as_current_span(f"server work {label}", context=extract(received)) as span:
        own = span.get_span_context()
        return json.dumps({**received, "work_span_id": f"{own.span_id:016x}"})


if __name__ == "__main__":
    install(sys.argv[1])
    server.run()
