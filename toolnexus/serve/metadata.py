"""Protected Resource Metadata (RFC 9728): how an MCP client finds where to log in.

A client that gets a 401 from `serve` reads `resource_metadata` from the `WWW-Authenticate`
header (or, failing that, tries the well-known URLs itself), fetches this document, and learns
the authorization server (`authorization_servers`), the resource to ask a token for
(`resource`, RFC 8707) and the scopes. The MCP authorization spec has clients try the
path-suffixed URL first (`/.well-known/oauth-protected-resource/mcp` for `/mcp`), then the root
one; both are served, and so is the variant for the audience's own path when a proxy puts the
endpoint elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..manifest.model import ServeAuth

if TYPE_CHECKING:
    from starlette.routing import Route

__all__ = ["WELL_KNOWN", "metadata_document", "metadata_paths", "metadata_routes", "metadata_url"]

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_url(auth: ServeAuth) -> str:
    """The document's absolute URL, as RFC 9728 section 3.1 builds it from the resource: the
    well-known prefix inserted between the audience's host and its path."""
    parts = urlsplit(auth.audience)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def metadata_paths(auth: ServeAuth, endpoint: str) -> frozenset[str]:
    """Every path the document is served at: the root one, the one for the audience's path and
    the one for the MCP `endpoint` path of this app."""
    audience_path = urlsplit(auth.audience).path.rstrip("/")
    return frozenset({WELL_KNOWN, WELL_KNOWN + audience_path, WELL_KNOWN + endpoint})


def metadata_document(auth: ServeAuth) -> dict[str, Any]:
    """The RFC 9728 document for `auth`."""
    document: dict[str, Any] = {
        "resource": auth.audience,
        "authorization_servers": [auth.issuer],
        "bearer_methods_supported": ["header"],
    }
    if auth.required_scopes:
        document["scopes_supported"] = list(auth.required_scopes)
    return document


def metadata_routes(auth: ServeAuth, endpoint: str) -> list[Route]:
    """Starlette routes answering `GET` (and CORS preflight, for browser-based clients) with the
    document at every path of `metadata_paths`."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    document = metadata_document(auth)
    cors = {"access-control-allow-origin": "*", "access-control-allow-methods": "GET, OPTIONS"}

    async def handle(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=cors)
        return JSONResponse(document, headers={**cors, "cache-control": "public, max-age=3600"})

    return [
        Route(path, handle, methods=["GET", "OPTIONS"])
        for path in sorted(metadata_paths(auth, endpoint))
    ]
