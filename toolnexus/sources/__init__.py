"""Tool sources: one module per kind of tool (python, shell, http, openapi, mcp).

Each builder receives one validated manifest entry (a mapping: durations already in seconds,
sizes in bytes, `${VAR}` already interpolated) and a `BuildContext`, and returns `Tool`s. Common
keys (approval, middleware) are attached by the toolkit builder; a source only reads its own keys
and raises `ConfigError(field=...)` for a bad value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from ..runtime.sandbox import SandboxPolicy

__all__ = ["BuildContext"]


@dataclass(frozen=True, kw_only=True)
class BuildContext:
    """What a source needs to know about the toolkit it builds for."""

    workspace: Path
    """Root for relative paths and sandboxes."""
    base_dir: Path
    """Folder of the manifest that declared the entry: relative files resolve against it."""
    origin: str | None = None
    """`file:line` of the entry, for messages and `Tool.origin`."""
    sandbox: SandboxPolicy | None = None
    """The entry's effective sandbox policy (its own block merged over `defaults`), if any."""
    timeout: float | None = None
    """The entry's effective timeout in seconds (its own or `defaults.timeout`)."""
    http_client: Callable[[], httpx.AsyncClient] | None = None
    """Returns the toolkit's shared `httpx.AsyncClient` (created on first use)."""
    env: dict[str, str] | None = None
    """The environment used for `${VAR}` lookups; None means `os.environ`."""

    def resolve(self, path: str | Path) -> Path:
        """`path` made absolute against `base_dir`."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)
