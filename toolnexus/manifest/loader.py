"""`load_manifest`: a manifest file (and everything it includes) to a checked `Manifest`.

The steps, per file: parse YAML with positions -> interpolate `${VAR}` and normalise units ->
check against `schema.json` -> record declarations. Problems are collected across every file
and raised together at the end as one `ManifestError` (the most specific subclass when all are
of one kind), each with file, line, column, field path and what was expected.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..errors import ConfigError, ManifestIssue, UsageError, manifest_error
from .includes import IncludeProblem, apply_include_chain, resolve_include
from .interpolate import interpolate, mask_secrets, references
from .model import (
    AccessDecl,
    BuiltinSite,
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
    _Located,
    _parse_field,
)
from .units import parse_duration, parse_size, unit_of
from .validate import Check, Violation, compile_schema, field_path
from .yamlpos import NodePath, Positions, YamlSyntaxError, parse_yaml

__all__ = ["SCHEMA_PATH", "issue_at", "load_manifest", "manifest_schema"]

SCHEMA_PATH = Path(__file__).with_name("schema.json")
"""The manifest's JSON Schema, shipped in the package."""

_Decl = TypeVar("_Decl", ToolDecl, ServerDecl)
"""A named declaration: tool and server names are each unique across the manifest."""

_KINDS: dict[str, ToolKind] = {
    "python": "python",
    "command": "shell",
    "http": "http",
    "openapi": "openapi",
}
# Subtrees holding the user's own data (argument schemas, matchers, headers...): keys named
# `timeout` there are not durations.
_OPAQUE = frozenset({"parameters", "when", "env", "headers", "query", "body", "with", "set"})
_TOOL_TEXT: dict[str, str] = {
    "name": "a tool's name",
    "title": "a tool's title",
    "description": "a tool's description",
    "parameters": "a tool's parameter schema",
}
"""A tool entry's fields sent to the model as they are written."""
_STRENGTH: dict[Literal["allow", "ask", "deny"], int] = {"allow": 0, "ask": 1, "deny": 2}
_LEAVES = frozenset({str, int, float, bool, type(None)})
_CONTAINERS = frozenset({dict, list})
_UNITS: dict[str, str | None] = {}


def _unit(key: str) -> str | None:
    """`unit_of`, memoised: the same few keys come up thousands of times."""
    try:
        return _UNITS[key]
    except KeyError:
        unit = unit_of(key)
        if len(_UNITS) < 4096:
            _UNITS[key] = unit
        return unit


_MCP_TRANSPORTS = {
    None: None,
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}


@cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


@cache
def _checkers() -> tuple[Check, Check]:
    root = _schema()
    return compile_schema(root), compile_schema(root, "#/$defs/server")


def manifest_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (Draft 2020-12), as shipped in `schema.json`."""
    return copy.deepcopy(_schema())


def issue_at(decl: _Located, error: ConfigError) -> ManifestIssue:
    """A `ConfigError` a builder raised for `decl` (its `field` relative to the entry), located
    at the line and column of that field."""
    where = decl.locate(error.field)
    return ManifestIssue(
        message=mask_secrets(error.message),  # builders quote values, some interpolated
        file=where.file,
        line=where.line,
        column=where.column,
        field=where.field,
        kind="schema",
    )


def load_manifest(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
) -> Manifest:
    """Load and check a manifest.

    Args:
        source: a path to a manifest or a `.mcp.json` file, YAML text (a string containing a
            newline), or the manifest as a mapping.
        env: variables for `${VAR}` interpolation; default `os.environ`.

    Returns:
        The manifest and everything it includes, as plain data.

    Raises:
        ManifestError: every problem found, in all files (a subclass when all are of one kind).
        UsageError: `source` is of an unsupported type.
    """
    partial = load_manifest_partial(source, env=env)
    if partial.issues or partial.manifest is None:
        raise manifest_error(list(partial.issues))
    return partial.manifest


@dataclass(frozen=True, kw_only=True)
class PartialManifest:
    """What loads of a manifest with problems: the parts without any, so that the builder can
    find its own problems too and `validate` shows them all at once. Never run: a manifest
    with any issue builds no toolkit."""

    manifest: Manifest | None
    """None when nothing usable was read (a syntax error, an unreadable file)."""
    issues: tuple[ManifestIssue, ...] = ()
    dropped: tuple[str | None, ...] = ()
    """Names of the tool entries left out for a problem; None for a part whose tools cannot
    be named (an entry without a readable name, a broken include, `builtins` or server)."""


def load_manifest_partial(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
) -> PartialManifest:
    """Load what can be loaded of a manifest, and every problem of the rest (see
    `load_manifest`, which raises them).

    Raises:
        ManifestError: the manifest file itself cannot be read.
        UsageError: `source` is of an unsupported type.
    """
    loader = _Loader(os.environ if env is None else env)
    manifest = loader.load(source)
    return PartialManifest(
        manifest=manifest, issues=tuple(loader.sorted_issues()), dropped=tuple(loader.dropped)
    )


@dataclass(frozen=True, kw_only=True)
class _File:
    """The file being processed."""

    display: str | None
    base_dir: Path
    positions: Positions | None
    label: str
    mcp_json: bool = False
    """A file in the `mcpServers` format: its servers' clashing tool names get namespaced."""

    def loc(self, path: NodePath) -> Location:
        found = self.positions.of(path) if self.positions is not None else None
        if found is None:
            return Location(file=self.display, field=field_path(path))
        return Location(file=self.display, line=found[0], column=found[1], field=field_path(path))


@dataclass(frozen=True, kw_only=True)
class _Scope:
    """What an included file inherits from the includes above it."""

    chain: tuple[IncludeDecl, ...] = ()
    stack: tuple[tuple[str, str], ...] = ()
    """(identity, label) of the files being loaded, outermost first: for cycles."""
    defaults: Defaults | None = None
    middleware: tuple[MiddlewareDecl, ...] = ()


class _Loader:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.issues: list[ManifestIssue] = []
        self.files: dict[Path, None] = {}
        self.includes: list[IncludeDecl] = []
        self.tools: list[ToolDecl] = []
        self.tool_names: dict[str, ToolDecl] = {}
        self.servers: list[ServerDecl] = []
        self.server_names: dict[str, ServerDecl] = {}
        self.permissions: list[PermissionDecl] = []
        self.access: list[AccessDecl] = []
        self.builtins: dict[str, dict[str, Any]] = {}
        self.builtin_sites: dict[str, BuiltinSite] = {}
        self.include_names: dict[Location, set[str]] = {}
        self.dropped: list[str | None] = []

    # -- entry -------------------------------------------------------------------------------

    def load(self, source: str | os.PathLike[str] | Mapping[str, Any]) -> Manifest | None:
        """The manifest without the parts that have problems (`self.issues`); None when
        nothing usable was read."""
        cwd = Path.cwd()
        top_file: Path | None = None
        if isinstance(source, Mapping):
            ctx = _File(display=None, base_dir=cwd, positions=None, label="<manifest>")
            data: Any = source
            key = "<manifest>"
        elif isinstance(source, str) and "\n" in source:
            parsed = self.parse(source, None, cwd, "<manifest>")
            data, ctx = parsed if parsed else (None, None)
            key = "<manifest>"
        elif isinstance(source, str | os.PathLike):
            top_file = Path(source).expanduser()
            display = os.fspath(source)
            key = os.path.realpath(top_file)
            try:
                text = top_file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = "file not found" if isinstance(exc, FileNotFoundError) else str(exc)
                raise manifest_error(
                    [
                        ManifestIssue(
                            message=f"cannot read the manifest: {reason}", file=display, kind="file"
                        )
                    ]
                ) from exc
            self.files[Path(os.path.abspath(top_file))] = None
            base = Path(os.path.abspath(top_file.parent))
            parsed = self.parse(text, display, base, display)
            data, ctx = parsed if parsed else (None, None)
        else:
            raise UsageError(
                "load_manifest() takes a path, YAML text (with a newline) or a mapping; "
                f"got {type(source).__name__}"
            )
        header: dict[str, Any] | None = None
        if ctx is not None:
            header = self.document(data, ctx, _Scope(stack=((key, ctx.label),)))
        if header is None or ctx is None:
            return None
        own = header.get("__defaults__", Defaults())
        workspace = _absolute(ctx.base_dir, header.get("workspace", "."))
        return Manifest(
            version=1,
            name=header.get("name"),
            workspace=workspace,
            roots=tuple(_absolute(ctx.base_dir, r) for r in header.get("roots", ())),
            defaults=own,
            middleware=header.get("__middleware__", ()),
            permissions=tuple(self.permissions),
            access=tuple(self.access),
            tools=tuple(self.tools),
            mcp_servers=tuple(self.servers),
            builtins=self.builtins,
            builtin_sites=self.builtin_sites,
            includes=tuple(self.includes),
            include_names={k: frozenset(v) for k, v in self.include_names.items()},
            files=tuple(self.files),
            source=Path(os.path.abspath(top_file)) if top_file is not None else None,
            tool_search=header.get("tool_search"),
            tool_search_site=header.get("__tool_search_site__"),
            serve_auth=header.get("__serve_auth__"),
            serve_state=header.get("__serve_state__"),
        )

    def sorted_issues(self) -> list[ManifestIssue]:
        order: dict[str | None, int] = {}
        for issue in self.issues:
            order.setdefault(issue.file, len(order))
        return sorted(self.issues, key=lambda i: (order[i.file], i.line or 0, i.column or 0))

    # -- parsing and preparing ---------------------------------------------------------------

    def parse(
        self, text: str, display: str | None, base_dir: Path, label: str
    ) -> tuple[Any, _File] | None:
        try:
            data, positions, problems = parse_yaml(text)
        except YamlSyntaxError as exc:
            self.dropped.append(None)
            self.issues.append(
                ManifestIssue(
                    message=exc.message,
                    file=display,
                    line=exc.line,
                    column=exc.column,
                    kind="syntax",
                )
            )
            return None
        for problem in problems:
            self.issues.append(
                ManifestIssue(
                    message=problem.message,
                    file=display,
                    line=problem.line,
                    column=problem.column,
                    field=field_path(problem.path),
                    kind="syntax",
                )
            )
        return data, _File(display=display, base_dir=base_dir, positions=positions, label=label)

    def issue(
        self, ctx: _File, path: NodePath, message: str, kind: str, *, key: bool = False
    ) -> None:
        found = ctx.positions.of(path, key=key) if ctx.positions is not None else None
        self.issues.append(
            ManifestIssue(
                message=mask_secrets(message),
                file=ctx.display,
                line=found[0] if found else None,
                column=found[1] if found else None,
                field=field_path(path),
                kind=kind,
            )
        )

    def prepare(
        self, value: Any, path: NodePath, ctx: _File, bad: set[NodePath], units: bool
    ) -> Any:
        """A copy of `value` with strings interpolated and unit keys normalised."""
        kind = type(value)
        if kind is str or (kind not in _CONTAINERS and isinstance(value, str)):
            if "${" not in value:
                return value
            if (names := references(value)) and (what := _model_reads(path)) is not None:
                self.issue(ctx, path, _model_text_problem(what, names), "env")
                bad.add(path)
                return value  # never filled in: nothing of the variable is read
            text, problems = interpolate(value, self.env)
            for problem in problems:
                self.issue(ctx, path, problem, "env")
            if problems:
                bad.add(path)
            return text
        if kind is dict or (kind not in _LEAVES and isinstance(value, Mapping)):
            out: dict[str, Any] = {}
            for raw_key, item in value.items():
                key = raw_key if type(raw_key) is str else str(raw_key)
                unit = _unit(key) if units else None
                item_kind = type(item)
                if item_kind in _LEAVES and unit is None:
                    # the common case, kept free of calls and path tuples
                    if item_kind is str and "${" in item:
                        out[key] = self.prepare(item, (*path, key), ctx, bad, False)
                    else:
                        out[key] = item
                elif unit is not None and item_kind not in _CONTAINERS:
                    sub = (*path, key)
                    text = self.prepare(item, sub, ctx, bad, False)
                    out[key] = self.unit(unit, text, sub, ctx, bad)
                else:
                    sub_units = units and key not in _OPAQUE
                    out[key] = self.prepare(item, (*path, key), ctx, bad, sub_units)
            return out
        if kind is list or (kind not in _LEAVES and isinstance(value, list | tuple)):
            return [self.prepare(v, (*path, i), ctx, bad, units) for i, v in enumerate(value)]
        return value

    def unit(self, unit: str, value: Any, path: NodePath, ctx: _File, bad: set[NodePath]) -> Any:
        """`value` in seconds or bytes; left as is (and reported) if it is not a valid one."""
        if path in bad:
            return value
        try:
            return parse_duration(value) if unit == "duration" else parse_size(value)
        except ValueError as exc:
            self.issue(ctx, path, str(exc), "schema")
            bad.add(path)
            return value

    def check(
        self, checker: Check, data: Any, path: NodePath, ctx: _File, bad: set[NodePath]
    ) -> list[Violation]:
        """Run `checker`, report its violations (minus those already reported), return them."""
        violations: list[Violation] = []
        checker(data, path, violations)
        for v in violations:
            if not any(v.path[: len(b)] == b for b in bad):
                self.issue(ctx, v.path, v.message, "schema", key=v.at_key)
        return violations

    # -- one manifest ------------------------------------------------------------------------

    def document(self, data: Any, ctx: _File, scope: _Scope) -> dict[str, Any] | None:
        """Process one manifest; returns its top-level keys (plus its own defaults and
        middleware) for the caller, or None when it is unusable."""
        bad: set[NodePath] = set()
        data = self.prepare(data, (), ctx, bad, True)
        if data is None or data == {}:
            self.issue(
                ctx, (), "the manifest is empty: expected a mapping with `version: 1`", "schema"
            )
            return None
        if not isinstance(data, dict):
            self.issue(
                ctx,
                (),
                "expected a mapping (version, tools, ...) at the top of the manifest",
                "schema",
            )
            return None
        if "mcpServers" in data and "version" not in data:
            data, ctx = self.from_mcp_json(data, ctx)
        root_check, _ = _checkers()
        violations = self.check(root_check, data, (), ctx, bad)
        broken = [v.path for v in violations]

        def ok(prefix: NodePath) -> bool:
            n = len(prefix)
            return not any(p[:n] == prefix or prefix[: len(p)] == p for p in broken)

        def whole(prefix: NodePath) -> bool:
            """The container itself is sound (its items are checked one by one)."""
            return not any(prefix[: len(p)] == p for p in broken)

        own = _defaults(data.get("defaults") if ok(("defaults",)) else None)
        effective = own if scope.defaults is None else _layer(scope.defaults, own)
        middleware = self.middleware(data.get("middleware", ()), ctx) if ok(("middleware",)) else ()
        inner = _Scope(
            chain=scope.chain,
            stack=scope.stack,
            defaults=effective,
            middleware=(*scope.middleware, *middleware) if scope.chain else (),
        )
        if whole(("permissions",)):
            for decision in ("allow", "ask", "deny"):
                if not whole(("permissions", decision)):
                    continue
                for i, item in enumerate(data.get("permissions", {}).get(decision, ())):
                    path = ("permissions", decision, i)
                    if not ok(path):
                        continue
                    conditional = isinstance(item, Mapping)
                    self.permissions.append(
                        PermissionDecl(
                            decision=decision,
                            text=item["rule"] if conditional else item,
                            caller=item["caller"] if conditional else None,
                            where=ctx.loc(path),
                            path=path,
                            positions=ctx.positions,
                        )
                    )
        for i, item in enumerate(data.get("access", ()) if whole(("access",)) else ()):
            if ok(("access", i)):
                path = ("access", i)
                self.access.append(
                    AccessDecl(
                        entry=item,
                        scope=ctx.label,
                        where=ctx.loc(path),
                        path=path,
                        positions=ctx.positions,
                    )
                )
        self.drop(data, broken)
        for i, item in enumerate(data.get("include", ()) if whole(("include",)) else ()):
            if ok(("include", i)):
                self.include(item, ("include", i), ctx, inner)
        for i, entry in enumerate(data.get("tools", ()) if whole(("tools",)) else ()):
            if ok(("tools", i)):
                self.tool(entry, ("tools", i), ctx, inner)
        servers = data.get("mcp_servers", {}) if whole(("mcp_servers",)) else {}
        sources = servers.get("from", ()) if ok(("mcp_servers", "from")) else ()
        for i, ref in enumerate([sources] if isinstance(sources, str) else sources):
            path = (
                ("mcp_servers", "from") if isinstance(sources, str) else ("mcp_servers", "from", i)
            )
            self.mcp_json_file(ref, path, ctx, inner)
        for name, entry in servers.items():
            if name != "from" and ok(("mcp_servers", name)):
                self.server(name, entry, ("mcp_servers", name), ctx, inner)
        if ok(("builtins",)):
            raw = data.get("builtins")
            for name, options in _builtins(raw).items():
                filters = [step.ref for step in scope.chain if step.only or step.exclude]
                if name == "*" and filters:
                    message = (
                        f"`builtins: all` is not narrowed by the only/exclude of the include of "
                        f"{filters[-1]}: every builtin would load; list the builtins by name here"
                    )
                    self.issue(ctx, _builtin_path(raw, name), message, "include")
                    self.dropped.append(None)
                    continue
                if name == "*" or _passes(scope.chain, name, self.include_names):
                    self.builtins[name] = options
                    path = _builtin_path(raw, name)
                    self.builtin_sites[name] = BuiltinSite(
                        where=ctx.loc(path), path=path, positions=ctx.positions
                    )
        header = {k: data[k] for k in ("name", "workspace", "roots") if k in data and ok((k,))}
        if "tool_search" in data and ok(("tool_search",)):
            if scope.chain:
                message = "tool_search is toolkit-wide: write it in the top manifest"
                self.issue(ctx, ("tool_search",), message, "schema")
            else:
                header["tool_search"] = data["tool_search"]
                header["__tool_search_site__"] = BuiltinSite(
                    where=ctx.loc(("tool_search",)), path=("tool_search",), positions=ctx.positions
                )
        if "serve" in data and ok(("serve",)):
            if scope.chain:
                message = (
                    "applies to the top manifest only (the one `toolnexus serve` is given); "
                    "move it there"
                )
                self.issue(ctx, ("serve",), message, "schema")
            else:
                if "auth" in data["serve"]:
                    header["__serve_auth__"] = self.serve_auth(data["serve"]["auth"], ctx)
                if "state" in data["serve"]:
                    header["__serve_state__"] = self.serve_state(data["serve"]["state"], ctx)
        header["__defaults__"] = own
        header["__middleware__"] = middleware
        return header

    def serve_auth(self, block: Mapping[str, Any], ctx: _File) -> ServeAuth | None:
        """`serve.auth` (its shape already checked against the schema) as a `ServeAuth`; a
        value it refuses (a URL, a scope) is reported at its line."""
        introspection = block.get("introspection") or {}
        try:
            return ServeAuth(
                issuer=block["issuer"],
                audience=block["audience"],
                jwks_url=block.get("jwks_url"),
                introspection_url=introspection.get("url"),
                client_id=introspection.get("client_id"),
                client_secret=introspection.get("client_secret"),
                required_scopes=tuple(block.get("required_scopes", ())),
                groups_claim=block.get("groups_claim", "groups"),
                roles_claim=block.get("roles_claim", "roles"),
            )
        except ConfigError as exc:
            self.issue(ctx, ("serve", *_parse_field(exc.field)), exc.message, "schema")
            return None

    def serve_state(self, url: str, ctx: _File) -> str | None:
        """`serve.state` (a string, interpolated): a store URL whose scheme is known, else
        reported at its line with the schemes accepted."""
        from ..state import check_state_url

        try:
            check_state_url(url)
        except ConfigError as exc:
            self.issue(ctx, ("serve", "state"), exc.message, "schema")
            return None
        return url

    def drop(self, data: Mapping[str, Any], broken: Sequence[NodePath]) -> None:
        """Record what the broken parts of a document would have declared (`self.dropped`)."""
        tools = data.get("tools")
        for path in broken:
            head = path[:1]
            if head == ("tools",) and len(path) >= 2 and isinstance(tools, list):
                entry = tools[path[1]] if isinstance(path[1], int) else None
                if not isinstance(entry, Mapping):
                    self.dropped.append(None)
                    continue
                name = entry.get("name")
                named = isinstance(name, str) and "openapi" not in entry
                self.dropped.append(name if named else None)
            elif head in (("tools",), ("include",), ("builtins",), ("mcp_servers",), ()):
                self.dropped.append(None)

    def middleware(self, items: Sequence[Any], ctx: _File) -> tuple[MiddlewareDecl, ...]:
        out = []
        for i, item in enumerate(items):
            path = ("middleware", i)
            common: dict[str, Any] = {
                "where": ctx.loc(path),
                "path": path,
                "positions": ctx.positions,
                "base_dir": ctx.base_dir,
            }
            if isinstance(item, str):
                out.append(MiddlewareDecl(name=item, **common))
            elif "use" in item:
                out.append(MiddlewareDecl(use=item["use"], options=item.get("with"), **common))
            else:
                ((name, options),) = item.items()
                out.append(MiddlewareDecl(name=name, options=options, **common))
        return tuple(out)

    def include(self, item: Any, path: NodePath, ctx: _File, scope: _Scope) -> None:
        options: Mapping[str, Any] = item if isinstance(item, Mapping) else {}
        ref: str = options["path"] if isinstance(item, Mapping) else item
        where = ctx.loc(path)
        shown_dir = Path(ctx.display).parent if ctx.display and ctx.positions else None
        try:
            resolved = resolve_include(ref, ctx.base_dir, shown_dir)
        except IncludeProblem as exc:
            self.issue(ctx, path, str(exc), "include")
            self.dropped.append(None)
            return
        labels = [label for key, label in scope.stack]
        if any(key == resolved.key for key, _ in scope.stack):
            cycle = " -> ".join([*labels, resolved.label])
            self.issue(
                ctx, path, f"include cycle: {cycle}; remove one of these includes", "include"
            )
            self.dropped.append(None)
            return
        if resolved.watch is not None:
            self.files[resolved.watch] = None
        overrides = tuple(
            OverrideDecl(
                glob=glob,
                approval=value.get("approval"),
                sandbox=value.get("sandbox"),
                arguments=value.get("arguments"),
                where=ctx.loc((*path, "override", glob)),
                path=(*path, "override", glob),
                positions=ctx.positions,
            )
            for glob, value in options.get("override", {}).items()
        )
        decl = IncludeDecl(
            ref=ref,
            file=resolved.watch,
            only=tuple(options.get("only", ())),
            exclude=tuple(options.get("exclude", ())),
            prefix=options.get("prefix", ""),
            overrides=overrides,
            defer=options.get("defer"),
            depth=len(scope.chain) + 1,
            where=where,
            path=path,
            positions=ctx.positions,
        )
        self.includes.append(decl)
        if resolved.data is not None:
            inner_ctx: _File | None = _File(
                display=resolved.label,
                base_dir=resolved.base_dir,
                positions=None,
                label=resolved.label,
            )
            data: Any = resolved.data
        else:
            display = os.fspath(resolved.file) if resolved.file else resolved.label
            parsed = self.parse(resolved.text or "", display, resolved.base_dir, resolved.label)
            data, inner_ctx = parsed if parsed else (None, None)
        if inner_ctx is None:
            return
        self.document(
            data,
            inner_ctx,
            _Scope(
                chain=(*scope.chain, decl),
                stack=(*scope.stack, (resolved.key, resolved.label)),
                defaults=scope.defaults,
                middleware=scope.middleware,
            ),
        )

    def tool(self, entry: dict[str, Any], path: NodePath, ctx: _File, scope: _Scope) -> None:
        kind: ToolKind = next(kind for key, kind in _KINDS.items() if key in entry)
        name: str | None = entry.get("name")
        spec = entry
        overrides: tuple[OverrideDecl, ...] = ()
        if name is not None and scope.chain:
            renamed = apply_include_chain(scope.chain, name, self.include_names)
            if renamed is None:
                return
            name, overrides = renamed
            spec = {**entry, "name": name}
        if kind == "openapi" and "://" not in entry["openapi"]:
            self.files[Path(os.path.abspath(ctx.base_dir / entry["openapi"]))] = None
        decl = ToolDecl(
            name=name,
            kind=kind,
            spec=spec,
            where=ctx.loc(path),
            path=path,
            positions=ctx.positions,
            base_dir=ctx.base_dir,
            include_chain=scope.chain,
            defaults=scope.defaults or Defaults(),
            scope_middleware=scope.middleware,
            overrides=overrides,
        )
        if name is not None:
            fix = "rename one (or use an include's prefix or exclude)"
            if not self.claim(self.tool_names, name, decl, ctx, path, what="tool", fix=fix):
                return
        self.tools.append(decl)

    def server(
        self, name: str, entry: dict[str, Any], path: NodePath, ctx: _File, scope: _Scope
    ) -> None:
        spec = dict(entry)
        spec.setdefault("transport", "stdio" if "command" in entry else "http")
        decl = ServerDecl(
            name=name,
            spec=spec,
            where=ctx.loc(path),
            path=path,
            positions=ctx.positions,
            base_dir=ctx.base_dir,
            include_chain=scope.chain,
            defaults=scope.defaults or Defaults(),
            scope_middleware=scope.middleware,
            namespaced=ctx.mcp_json,
        )
        if self.claim(
            self.server_names, name, decl, ctx, path, what="MCP server", fix="rename one"
        ):
            self.servers.append(decl)

    def claim(
        self,
        names: dict[str, _Decl],
        name: str,
        decl: _Decl,
        ctx: _File,
        path: NodePath,
        *,
        what: str,
        fix: str,
    ) -> bool:
        """Record `decl` as the definition of `name`; False when the name is already taken.

        The same declaration met again (one file included along two paths) is the same
        definition and is dropped quietly; a second place defining the name is a `duplicate`.
        """
        first = names.get(name)
        if first is None:
            names[name] = decl
            return True
        if first.where != decl.where:
            self.issue(
                ctx,
                path,
                f"{what} {name!r} is defined twice: first at {_origin(first)}, again at "
                f"{_origin(decl)}; {fix}",
                "duplicate",
            )
        return False

    # -- .mcp.json ---------------------------------------------------------------------------

    def from_mcp_json(self, data: dict[str, Any], ctx: _File) -> tuple[dict[str, Any], _File]:
        """A standard `{"mcpServers": {...}}` document as a manifest with only servers."""
        servers = data["mcpServers"]
        if not isinstance(servers, dict):
            self.issue(
                ctx, ("mcpServers",), "expected a mapping of server name -> server", "schema"
            )
            servers = {}
        converted: dict[str, Any] = {}
        for name, entry in servers.items():
            if not isinstance(entry, dict):
                converted[name] = entry
            elif entry.get("disabled") is not True:
                converted[name] = _mcp_server(entry)
        positions = None
        if ctx.positions is not None:
            positions = Positions()
            for source, target in (
                (ctx.positions.values, positions.values),
                (ctx.positions.keys, positions.keys),
            ):
                for p, where in source.items():
                    if p[:1] == ("mcpServers",):
                        tail = p[2:]
                        if tail[:1] == ("type",):
                            tail = ("transport", *tail[1:])
                        target[("mcp_servers", *p[1:2], *tail)] = where
                    elif p == ():
                        target[p] = where
        new_ctx = _File(
            display=ctx.display,
            base_dir=ctx.base_dir,
            positions=positions,
            label=ctx.label,
            mcp_json=True,
        )
        return {"version": 1, "mcp_servers": converted}, new_ctx

    def mcp_json_file(self, ref: str, path: NodePath, ctx: _File, scope: _Scope) -> None:
        real = Path(ref).expanduser()
        real = real if real.is_absolute() else ctx.base_dir / real
        shown = (
            ref
            if ctx.display is None or Path(ref).is_absolute()
            else os.path.normpath(Path(ctx.display).parent / ref)
        )
        try:
            text = real.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = "file not found" if isinstance(exc, FileNotFoundError) else str(exc)
            self.issue(ctx, path, f"cannot read {ref!r}: {reason}", "include")
            self.dropped.append(None)
            return
        self.files[Path(os.path.abspath(real))] = None
        parsed = self.parse(text, shown, Path(os.path.abspath(real.parent)), shown)
        if parsed is None:
            return
        data, file_ctx = parsed
        bad: set[NodePath] = set()
        data = self.prepare(data, (), file_ctx, bad, True)
        if not isinstance(data, dict) or "mcpServers" not in data:
            self.issue(
                file_ctx,
                (),
                'expected a .mcp.json document: {"mcpServers": {name: '
                "{command, args, env} or {type, url, headers}}}",
                "schema",
            )
            return
        data, file_ctx = self.from_mcp_json(data, file_ctx)
        _, server_check = _checkers()
        for name, entry in data["mcp_servers"].items():
            sub = ("mcp_servers", name)
            if not self.check(server_check, entry, sub, file_ctx, bad):
                self.server(name, entry, sub, file_ctx, scope)


def _model_reads(path: NodePath) -> str | None:
    """What the field at `path` is, when its text reaches the model as written (tool
    definitions, names, and the approval reasons refusals quote); None for every other field.

    `${VAR}` is refused in these, whatever the variable: interpolation is for values sent to a
    program or a server, and a description is read by the model (and whoever sees its context).
    """
    if len(path) >= 3 and path[0] == "tools" and isinstance(path[2], str) and path[2] in _TOOL_TEXT:
        return _TOOL_TEXT[path[2]]
    if len(path) == 3 and path[2] == "prefix" and path[0] in ("include", "mcp_servers", "tools"):
        return "a prefix of tool names"
    at = 4 if path[:1] == ("include",) else 2  # tools[i].arguments, include[i].override.G.arguments
    if len(path) > at and path[at] == "arguments" and "value" not in path[at + 1 :]:
        # A fixed `value` is sent to the tool only; the rest is the published schema.
        return "a curated argument (its name, default and constraints are in the tool's schema)"
    if len(path) >= 4 and path[-1] == "reason" and path[-4:-2] == ("approval", "rules"):
        return "an approval rule's reason (refusals quote it to the model)"
    return None


def _model_text_problem(what: str, names: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(names))
    return (
        f"{what} is text the model reads, and `${{...}}` here would put the value of "
        f"environment variable {shown} into it: interpolation is for values sent to a program or "
        "server (command, args, env, headers, url, query, body). Write the text out, move the "
        "value to where it is sent, or write $${ for a literal ${"
    )


def _mcp_server(entry: dict[str, Any]) -> dict[str, Any]:
    """One `.mcp.json` server in manifest form. Keys other tools add (`disabled`,
    `autoApprove`, ...) are ignored; a disabled server is dropped by the caller."""
    out = {k: entry[k] for k in ("command", "args", "env", "cwd", "url", "headers") if k in entry}
    kind = entry.get("type")
    transport = _MCP_TRANSPORTS.get(kind, kind) if isinstance(kind, str | None) else kind
    if transport is not None:
        out["transport"] = transport
    return out


def _origin(decl: ToolDecl | ServerDecl) -> str:
    text = str(decl.where)
    if decl.include_chain:
        chain = " -> ".join(f"{step.ref} at {step.where}" for step in decl.include_chain)
        text += f" (included via {chain})"
    return text


def _absolute(base: Path, path: str) -> Path:
    return Path(os.path.normpath(base / Path(path).expanduser()))


def _defaults(data: Mapping[str, Any] | None) -> Defaults:
    if not data:
        return Defaults()
    return Defaults(
        approval=data.get("approval"),
        timeout=data.get("timeout"),
        max_output=data.get("max_output"),
        kill_grace=data.get("kill_grace"),
        sandbox=data.get("sandbox"),
    )


def _layer(outer: Defaults, inner: Defaults) -> Defaults:
    """Defaults for an included file's entries: the includer's values win, the included
    file's fill the gaps, and the approval default is the stricter of the two."""
    approval = outer.approval or inner.approval
    if outer.approval and inner.approval:
        approval = max(outer.approval, inner.approval, key=_STRENGTH.__getitem__)
    sandbox = outer.sandbox
    if inner.sandbox is not None:
        sandbox = {**inner.sandbox, **(outer.sandbox or {})}
    return Defaults(
        approval=approval,
        timeout=outer.timeout if outer.timeout is not None else inner.timeout,
        max_output=outer.max_output if outer.max_output is not None else inner.max_output,
        kill_grace=outer.kill_grace if outer.kill_grace is not None else inner.kill_grace,
        sandbox=sandbox,
    )


def _builtins(value: Any) -> dict[str, dict[str, Any]]:
    """`all` -> {"*": {}}; [a, b] -> {a: {}, b: {}}; {a: null} -> {a: {}}."""
    if value is None:
        return {}
    if value == "all":
        return {"*": {}}
    if isinstance(value, list):
        return {name: {} for name in value}
    return {name: dict(options or {}) for name, options in value.items()}


def _builtin_path(raw: Any, name: str) -> NodePath:
    """Where builtin `name` is written: its key, its list item, or `builtins: all` itself."""
    if isinstance(raw, list):
        return ("builtins", raw.index(name))
    if isinstance(raw, dict):
        return ("builtins", name)
    return ("builtins",)


def _passes(chain: Sequence[IncludeDecl], name: str, seen: dict[Location, set[str]]) -> bool:
    """Whether the only/exclude globs of every include in `chain` keep builtin `name`
    (builtins keep their names: prefixes do not apply to them); records the name in `seen`
    for each include it reaches."""
    import fnmatch

    for step in reversed(chain):
        seen.setdefault(step.where, set()).add(name)
        if step.only and not any(fnmatch.fnmatchcase(name, g) for g in step.only):
            return False
        if any(fnmatch.fnmatchcase(name, g) for g in step.exclude):
            return False
    return True
