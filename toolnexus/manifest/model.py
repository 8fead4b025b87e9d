"""The loaded manifest: plain frozen data, no behaviour beyond locating a field.

Everything here is what the YAML said, checked and normalised (durations in float seconds,
sizes in int bytes, `${VAR}` interpolated, relative paths kept as written but with the folder
they are relative to). The toolkit builder turns it into tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .yamlpos import NodePath, Positions

_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")

__all__ = [
    "AccessDecl",
    "BuiltinSite",
    "Defaults",
    "IncludeDecl",
    "Location",
    "Manifest",
    "MiddlewareDecl",
    "OverrideDecl",
    "PermissionDecl",
    "ServeAuth",
    "ServerDecl",
    "ToolDecl",
    "ToolKind",
]

ToolKind = Literal["python", "shell", "http", "openapi"]


@dataclass(frozen=True, kw_only=True)
class Location:
    """Where something is written."""

    file: str | None
    """The manifest file as displayed (relative paths stay relative), `toolset:NAME` for a tool
    set given as a mapping; None for a manifest given as text or a mapping."""
    line: int | None = None
    """1-based."""
    column: int | None = None
    """1-based."""
    field: str = ""
    """Path of the field inside its file, e.g. `tools[3].approval.rules[1]` (0-based indexes)."""

    def __str__(self) -> str:
        """`file:line:col` (as much as is known)."""
        parts = [self.file if self.file is not None else "<manifest>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


@dataclass(frozen=True, kw_only=True)
class _Located:
    """Shared by declarations that builders may need to report errors inside of."""

    where: Location
    """Where the declaration starts."""
    path: NodePath = ()
    """The declaration's path inside its file, e.g. `("tools", 3)`."""
    positions: Positions | None = field(default=None, repr=False, compare=False)
    """Positions of the file it comes from (None for a mapping source)."""

    def locate(self, sub_field: str | NodePath) -> Location:
        """Where `sub_field` (relative to this declaration, e.g. `approval.rules[1]`) is
        written; a field that is absent (a default) is located at its closest parent."""
        from .validate import field_path

        sub = _parse_field(sub_field) if isinstance(sub_field, str) else tuple(sub_field)
        full = (*self.path, *sub)
        name = field_path(full)
        if self.positions is None:
            return Location(file=self.where.file, field=name)
        found = self.positions.of(full)
        if found is None:
            return Location(file=self.where.file, field=name)
        return Location(file=self.where.file, line=found[0], column=found[1], field=name)


def _parse_field(text: str) -> NodePath:
    """`approval.rules[1].when` -> ("approval", "rules", 1, "when")."""
    parts: list[str | int] = []
    for chunk in text.replace("]", "").split("."):
        if not chunk:
            continue
        name, *indexes = chunk.split("[")
        if name:
            parts.append(name)
        parts += [int(i) if i.lstrip("-").isdigit() else i.strip("'\"") for i in indexes]
    return tuple(parts)


@dataclass(frozen=True, kw_only=True)
class Defaults:
    """`defaults:` of a manifest. None means "not set": the builder's own default applies."""

    approval: Literal["allow", "ask", "deny"] | None = None
    timeout: float | None = None
    """Seconds."""
    max_output: int | None = None
    """Characters kept by shell and HTTP tools."""
    kill_grace: float | None = None
    """Seconds between SIGTERM and SIGKILL for shell tools."""
    sandbox: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class MiddlewareDecl(_Located):
    """One middleware item: a built-in by `name`, or a factory by `use` (`module:attr`)."""

    name: str | None = None
    use: str | None = None
    options: Any = None
    """`{retry: {attempts: 3}}` -> `{"attempts": 3}`; `{timeout: 30s}` -> `30.0`; `retry` ->
    None; the `with:` mapping of a `use` item (or None)."""
    base_dir: Path
    """Folder of the declaring manifest: `use` modules resolve against it too."""


@dataclass(frozen=True, kw_only=True)
class PermissionDecl(_Located):
    """One manifest-wide rule, e.g. `deny read(**/.env*)`, and where it is written.

    Rules from included manifests are kept as written (a prefix given to an include does not
    rewrite them) and apply toolkit-wide: a company deny cannot be lost by including it.
    """

    decision: Literal["allow", "ask", "deny"]
    text: str
    caller: Mapping[str, Any] | None = None
    """`{rule, caller}` items: the callers the rule holds for (None: every call)."""


@dataclass(frozen=True, kw_only=True)
class AccessDecl(_Located):
    """One `access:` entry (`{tools: [deploy*], groups: [ops]}`) and the file it is written in.

    Entries of one file are alternatives; every file whose entries name a tool must let the
    caller in (see `toolnexus.approval.access`).
    """

    entry: Mapping[str, Any]
    scope: str
    """The file it is written in, as displayed."""


@dataclass(frozen=True, kw_only=True)
class OverrideDecl(_Located):
    """`override: {glob: {approval, sandbox, arguments}}` of an include: settings meant to be
    stricter.

    Recorded as written; the toolkit builder checks that each one only tightens.
    """

    glob: str
    approval: Any = None
    sandbox: Mapping[str, Any] | None = None
    arguments: Mapping[str, Any] | None = None
    """Curated arguments (`toolnexus.curation`), applied over what the included manifest
    publishes: they may narrow it further, never widen it."""


@dataclass(frozen=True, kw_only=True)
class IncludeDecl(_Located):
    """One `include:` entry as it was resolved."""

    ref: str
    """As written: `team/base.yaml`, `package:pkg/x.yaml`, `toolset:builtin`."""
    file: Path | None
    """The manifest file read (None for a tool set given as a mapping)."""
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    prefix: str = ""
    overrides: tuple[OverrideDecl, ...] = ()
    depth: int = 1
    """1 for the top manifest's own includes, 2 for theirs, and so on."""
    defer: bool | None = None
    """`defer:` of the include: its tools' deferral unless an entry sets its own."""


@dataclass(frozen=True, kw_only=True)
class ToolDecl(_Located):
    """One `tools:` entry."""

    name: str | None
    """Final name (include prefixes applied); None for openapi entries and python factories,
    whose tools are named when built (pass each through `apply_include_chain`)."""
    kind: ToolKind
    spec: Mapping[str, Any]
    """The whole normalised entry (`name` updated with include prefixes)."""
    base_dir: Path
    """Folder of the declaring manifest: relative paths and `python:` modules resolve here."""
    include_chain: tuple[IncludeDecl, ...] = ()
    """The includes this entry came through, outermost first; empty for the top manifest."""
    defaults: Defaults = field(default_factory=Defaults)
    """Effective defaults for this entry (see `Manifest.defaults` for the layering)."""
    scope_middleware: tuple[MiddlewareDecl, ...] = ()
    """Manifest-wide middleware of the included manifests it comes from, outermost first: runs
    inside the top manifest's middleware and outside the entry's own."""
    overrides: tuple[OverrideDecl, ...] = ()
    """Include overrides whose glob matched this tool's name (innermost include first)."""


@dataclass(frozen=True, kw_only=True)
class ServerDecl(_Located):
    """One MCP server."""

    name: str
    spec: Mapping[str, Any]
    """The normalised entry; `transport` is always set (stdio, http or sse)."""
    base_dir: Path
    """Folder of the declaring file (manifest or .mcp.json): `cwd` resolves here."""
    include_chain: tuple[IncludeDecl, ...] = ()
    defaults: Defaults = field(default_factory=Defaults)
    scope_middleware: tuple[MiddlewareDecl, ...] = ()
    namespaced: bool = False
    """Declared in a file in the `mcpServers` format (`.mcp.json`), which has no place for a
    prefix: a tool name it shares with another tool is namespaced (`mcp__SERVER__TOOL`)."""


@dataclass(frozen=True, kw_only=True)
class BuiltinSite(_Located):
    """Where a builtin tool's options are written, so that a builder's complaint about them
    (an unknown option, a bad approval rule) names the file and line."""


@dataclass(frozen=True, kw_only=True, repr=False)
class ServeAuth:
    """`serve: {auth: ...}`: `toolnexus serve` as an OAuth 2.1 resource server.

    Checked when made (a manifest's block, or one given to `http_app(auth=...)`), so a bad URL
    fails at start rather than on the first request. `client_secret` is hidden from `repr`.
    """

    issuer: str
    """The authorization server's issuer URL: the `iss` every token must carry, and where its
    metadata (keys, introspection endpoint) is discovered."""
    audience: str
    """This server's canonical URL (RFC 8707), e.g. `https://tools.example.com/mcp`: the `aud`
    every token must carry, published as `resource` in the protected resource metadata."""
    jwks_url: str | None = None
    """The issuer's key set, when it is not discovered from the issuer's metadata."""
    introspection_url: str | None = None
    """Opaque tokens: the RFC 7662 endpoint (default: `introspection_endpoint` of the issuer's
    metadata); used only with `client_id` and `client_secret`."""
    client_id: str | None = None
    """This server's client at the issuer, for introspection."""
    client_secret: str | None = None
    required_scopes: tuple[str, ...] = ()
    """Scopes every token must carry (else 403 `insufficient_scope`)."""
    groups_claim: str = "groups"
    """The claim holding the caller's groups; a dotted path reaches into objects."""
    roles_claim: str = "roles"
    """The claim holding the caller's roles; a dotted path reaches into objects."""

    def __post_init__(self) -> None:
        from urllib.parse import urlsplit

        from ..errors import ConfigError

        for name in ("issuer", "audience", "jwks_url", "introspection_url"):
            value = getattr(self, name)
            if value is None:
                continue
            where = "auth.introspection.url" if name == "introspection_url" else f"auth.{name}"
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"expected an absolute http(s) URL, got {value!r}", field=where)
            if parts.fragment or (name != "audience" and parts.query):
                raise ConfigError(
                    f"expected a URL without {'a fragment' if parts.fragment else 'a query'}, "
                    f"got {value!r}",
                    field=where,
                )
            if (
                name != "audience"
                and parts.scheme == "http"
                and parts.hostname not in _LOOPBACK_HOSTS
            ):
                # OAuth 2.1 requires TLS: keys or introspection answers fetched in the clear
                # could be swapped by anyone on the path, and would admit any token.
                raise ConfigError(
                    f"{value!r} is plain http on a host other than this machine; use https "
                    "(plain http is accepted for 127.0.0.1 and localhost only)",
                    field=where,
                )
        if (self.client_id is None) != (self.client_secret is None):
            missing = "client_secret" if self.client_secret is None else "client_id"
            raise ConfigError(
                f"introspection needs both client_id and client_secret; add `{missing}`",
                field=f"auth.introspection.{missing}",
            )
        if self.introspection_url is not None and self.client_id is None:
            raise ConfigError(
                "introspection needs this server's client_id and client_secret at the issuer",
                field="auth.introspection",
            )
        for i, scope in enumerate(self.required_scopes):
            if not scope or any(c.isspace() or c in '"\\' for c in scope):
                raise ConfigError(
                    f"expected a scope name (no spaces, quotes or backslashes), got {scope!r}",
                    field=f"auth.required_scopes[{i}]",
                )
        for name in ("groups_claim", "roles_claim"):
            if not getattr(self, name) or "" in getattr(self, name).split("."):
                raise ConfigError(
                    f"expected a claim name or dotted path, got {getattr(self, name)!r}",
                    field=f"auth.{name}",
                )

    def __repr__(self) -> str:
        shown = [f"issuer={self.issuer!r}", f"audience={self.audience!r}"]
        for name in ("jwks_url", "introspection_url", "client_id"):
            if getattr(self, name) is not None:
                shown.append(f"{name}={getattr(self, name)!r}")
        if self.client_secret is not None:
            shown.append("client_secret='***'")
        if self.required_scopes:
            shown.append(f"required_scopes={self.required_scopes!r}")
        return f"ServeAuth({', '.join(shown)})"


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """A loaded manifest and everything it includes.

    Defaults layering: a tool of the top manifest uses `defaults`; a tool of an included
    manifest uses `ToolDecl.defaults`, where the including manifest's values win and the
    included one's fill what it left unset, except `approval`, which is the stricter of the two.
    """

    version: int
    name: str | None = None
    workspace: Path
    """Absolute; default: the manifest's folder (the current directory for a mapping)."""
    roots: tuple[Path, ...] = ()
    """Absolute extra folders file tools may touch."""
    defaults: Defaults = field(default_factory=Defaults)
    middleware: tuple[MiddlewareDecl, ...] = ()
    """The top manifest's, outermost first."""
    permissions: tuple[PermissionDecl, ...] = ()
    """Every file's rules, the top manifest's first."""
    access: tuple[AccessDecl, ...] = ()
    """Every file's `access:` entries (who may see and call which tools under `serve`)."""
    tools: tuple[ToolDecl, ...] = ()
    mcp_servers: tuple[ServerDecl, ...] = ()
    builtins: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """name -> options; `all` is `{"*": {}}`. Included manifests' builtins are merged in
    (the including manifest's options win for a name both list)."""
    builtin_sites: Mapping[str, BuiltinSite] = field(default_factory=dict)
    """name -> where the options in `builtins` were written (same keys)."""
    includes: tuple[IncludeDecl, ...] = ()
    """Every include resolved, depth-first in file order."""
    include_names: Mapping[Location, frozenset[str]] = field(default_factory=dict)
    """Per include (by `IncludeDecl.where`), the names of the tools declared by name and of
    the builtins its filters met; the builder adds the tools named when built."""
    files: tuple[Path, ...] = ()
    """Every file read or referenced (manifests, includes, .mcp.json, OpenAPI documents): what
    a hot-reload watcher watches."""
    source: Path | None = None
    """The top manifest's file, None for text or a mapping."""
    tool_search: Mapping[str, Any] | None = None
    """The top manifest's `tool_search:` block as written (see `toolnexus.search.plan`)."""
    tool_search_site: BuiltinSite | None = None
    """Where `tool_search:` is written, for the builder's complaints about it."""
    serve_auth: ServeAuth | None = None
    """The top manifest's `serve: {auth: ...}`: `toolnexus serve` checks callers' OAuth tokens."""
    serve_state: str | None = None
    """The top manifest's `serve: {state: URL}`: the store `toolnexus serve` shares between
    workers and replicas (`--state` overrides it; it overrides `TOOLNEXUS_STATE_URL`)."""
