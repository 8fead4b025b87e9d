"""The manifest: YAML (or `.mcp.json`, or a mapping) in, a checked `Manifest` of plain data out.

Importing this package imports nothing heavy: PyYAML loads on the first parse, and the schema
checker is compiled on the first load (`jsonschema` is not needed at run time).
"""

from __future__ import annotations

from .includes import TOOLSET_GROUP, apply_include_chain
from .interpolate import Secret
from .loader import (
    SCHEMA_PATH,
    PartialManifest,
    issue_at,
    load_manifest,
    load_manifest_partial,
    manifest_schema,
)
from .model import (
    AccessDecl,
    Defaults,
    IncludeDecl,
    Location,
    Manifest,
    MiddlewareDecl,
    OverrideDecl,
    PermissionDecl,
    ServeAuth,
    ServerDecl,
    ToolDecl,
    ToolKind,
)

__all__ = [
    "SCHEMA_PATH",
    "TOOLSET_GROUP",
    "AccessDecl",
    "Defaults",
    "IncludeDecl",
    "Location",
    "Manifest",
    "MiddlewareDecl",
    "OverrideDecl",
    "PartialManifest",
    "PermissionDecl",
    "Secret",
    "ServeAuth",
    "ServerDecl",
    "ToolDecl",
    "ToolKind",
    "apply_include_chain",
    "issue_at",
    "load_manifest",
    "load_manifest_partial",
    "manifest_schema",
]
