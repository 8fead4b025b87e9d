"""A running `toolnexus serve --http` read from outside (`toolnexus doctor --url URL`).

The reload watch lives in the serving process; `doctor` is another process, so it asks the
server's `GET /healthz`, the one endpoint that needs no token: the state store, a drain, and
the watch (`lost` while the manifest's files are gone, `watching` again once they are back).
The health check says how many watched files are missing, never which (it is public); the
server's log and `toolnexus watch` name them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .metrics import METRICS_PATH

__all__ = ["Health", "health_url", "read_health"]

_HEALTH = "/healthz"
_TIMEOUT_S = 5.0


@dataclass(kw_only=True, frozen=True)
class Health:
    """What `/healthz` answered."""

    url: str
    status: str
    """`ok`, `starting`, `draining`, `unavailable` (the state store), or `unreachable` (no
    answer, or not a toolnexus health check)."""
    detail: str = ""
    """Why, when `status` is not `ok`."""
    generation: int | None = None
    watch: str | None = None
    """`watching`, `lost`, or None when the server does not watch its manifest (no `--watch`)."""
    missing: int = 0
    """Watched files gone, while `watch` is `lost`."""

    @property
    def healthy(self) -> bool:
        """Serving, and (when watching) following its manifest."""
        return self.status == "ok" and self.watch != "lost"


def health_url(url: str) -> str:
    """The health check of the server at `url`: its base URL, its `/mcp` endpoint or the
    health check itself."""
    base = url.rstrip("/")
    for tail in ("/mcp", _HEALTH, METRICS_PATH):
        if base.endswith(tail):
            base = base[: -len(tail)]
            break
    return base + _HEALTH


def read_health(url: str, *, timeout: float = _TIMEOUT_S) -> Health:
    """Ask the server at `url` how it is; never raises (an unreachable server is a `Health`
    saying so)."""
    where = health_url(url)
    if not where.startswith(("http://", "https://")):  # urlopen would read file:// and others
        return Health(url=where, status="unreachable", detail="not an http:// or https:// URL")
    try:
        with urllib.request.urlopen(where, timeout=timeout) as response:
            body = _json(response.read())
    except urllib.error.HTTPError as exc:  # 503 carries the reason in its body
        body = _json(exc.read())
        if body is None:
            return Health(url=where, status="unreachable", detail=f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return Health(url=where, status="unreachable", detail=str(reason))
    except ValueError as exc:  # a malformed URL (a bad port)
        return Health(url=where, status="unreachable", detail=str(exc))
    if body is None or not isinstance(body.get("status"), str):
        return Health(url=where, status="unreachable", detail="not a toolnexus health check")
    watch = body.get("watch")
    return Health(
        url=where,
        status=body["status"],
        detail=str(body.get("reason") or ""),
        generation=body.get("generation") if isinstance(body.get("generation"), int) else None,
        watch=str(watch.get("state")) if isinstance(watch, dict) else None,
        missing=int(watch.get("missing") or 0) if isinstance(watch, dict) else 0,
    )


def _json(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
