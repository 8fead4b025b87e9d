"""Build one Generation: tools from every source, with approval, sandbox and middleware
attached, and the executor wired. Called by `create_toolkit` and again by every reload.

Every problem a builder finds is collected and reported at once, located at the manifest line
it comes from. MCP servers whose configuration did not change are adopted from the previous
generation instead of restarted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .approval import (
    ApprovalPolicy,
    Decision,
    PermissionRules,
    Verdict,
    combine_verdicts,
    compile_permissions,
    compile_rules,
)
from .base import Tool
from .errors import (
    ConfigError,
    ManifestIssue,
    UsageError,
    manifest_error,
)
from .executor import Executor
from .middleware import Middleware, from_config, timeout
from .registry import Registry
from .sandbox import SandboxPolicy

if TYPE_CHECKING:
    import httpx

    from .manifest import Manifest, MiddlewareDecl, ServerDecl, ToolDecl
    from .sources.mcp import McpServer
    from .toolkit import Generation, Toolkit, ToolkitOptions

__all__ = ["build_generation", "check_manifest", "load_toolset"]

PROTECTED = (".git/hooks", ".git/config")
"""Paths that stay read-only inside writable sandbox roots (plus the manifest files)."""


class _Issues:
    """Collects located problems so that a manifest reports all of them at once."""

    def __init__(self) -> None:
        self.items: list[ManifestIssue] = []

    def add(self, decl: Any, error: ConfigError, *, kind: str = "schema") -> None:
        from .manifest import issue_at

        issue = issue_at(decl, error)
        self.items.append(dataclasses.replace(issue, kind=kind))

    def raise_if_any(self) -> None:
        if self.items:
            raise manifest_error(self.items)


@dataclasses.dataclass(kw_only=True)
class _Shared:
    """Per-generation resources created on first use."""

    stack: AsyncExitStack
    client: httpx.AsyncClient | None = None

    def http_client(self) -> httpx.AsyncClient:
        if self.client is None:
            import httpx

            self.client = httpx.AsyncClient(follow_redirects=False, timeout=30.0)
            self.stack.push_async_callback(self.client.aclose)
        return self.client


async def build_generation(
    options: ToolkitOptions,
    *,
    number: int,
    previous: Generation | None,
    connect: bool = True,
    toolkit: Toolkit | None = None,
) -> Generation:
    """A complete, ready generation, or an exception with nothing left open.

    Raises:
        ManifestError: every problem of the manifest and its tools, located.
        SourceError: a required MCP server did not start.
    """
    from .toolkit import Generation

    stack = AsyncExitStack()
    fresh: list[McpServer] = []
    adopted: set[Any] = set()
    try:
        manifest = _load(options.source, options.env, fresh=previous is not None)
        workspace = (
            options.workspace
            or (manifest.workspace if manifest is not None else None)
            or Path.cwd()
        ).resolve()
        roots = manifest.roots if manifest is not None else ()
        shared = _Shared(stack=stack)
        issues = _Issues()
        tools: list[Tool] = list(options.extra_tools)
        servers: dict[Any, McpServer] = {}
        server_decls: dict[Any, ServerDecl] = {}
        files: list[Path] = list(manifest.files) if manifest is not None else []
        protected = (*PROTECTED, *(str(f) for f in files))

        builtin_options = _builtin_options(options.builtins)
        if manifest is not None:
            builtin_options = {**manifest.builtins, **builtin_options}
            for decl in manifest.tools:
                built = _build_tool(decl, workspace, protected, shared, issues)
                tools += built
                for t in built:
                    files += [Path(p) for p in t.meta.get("files", ())]
        if builtin_options:
            tools += _builtin_tools(builtin_options, manifest, workspace, protected, issues)

        permissions = _permissions(manifest, options.permissions, issues)
        if manifest is not None and manifest.mcp_servers:
            server_tools = await _build_servers(
                manifest.mcp_servers,
                workspace=workspace,
                protected=protected,
                previous=previous,
                servers=servers,
                server_decls=server_decls,
                fresh=fresh,
                adopted=adopted,
                issues=issues,
                connect=connect,
                toolkit=toolkit,
            )
            tools += server_tools
        issues.raise_if_any()

        registry = _registry(tools, manifest)
        if permissions is not None and any(t.meta.get("aliases") for t in tools):
            permissions = _AliasAware(permissions)
        middleware = list(options.middleware)
        if manifest is not None:
            middleware += _middleware(manifest.middleware, issues)
            issues.raise_if_any()
        executor = Executor(
            registry,
            middleware=middleware,
            permissions=permissions,
            approver=options.approver,
            workspace=workspace,
            roots=roots,
            state=previous.executor.state if previous is not None else None,
        )
        hidden = frozenset(t.name for t in registry.tools() if _hidden(permissions, t))
        gen = Generation(
            number=number,
            registry=registry,
            executor=executor,
            resources=stack,
            files=tuple(dict.fromkeys(p.resolve() for p in files)),
            hidden=hidden,
        )
        # Shared with the generation that may adopt these servers; see `_close_unadopted`.
        gen.carry.update(mcp=servers, adopted=set(), decls=server_decls)
        gen.status.update({s.name: s.status.to_dict() for s in servers.values()})
        stack.push_async_callback(_close_unadopted, gen.carry)
        if previous is not None:
            # Only a successful build takes servers over; a failed one leaves them to `previous`.
            previous.carry.setdefault("adopted", set()).update(adopted)
        return gen
    except BaseException:
        for server in fresh:
            await server.aclose()
        await stack.aclose()
        raise


def check_manifest(source: str | Path) -> int:
    """Load a manifest and build every tool without starting MCP servers; returns the number
    of tools declared.

    Raises:
        ManifestError: every problem found, located.
    """
    import asyncio

    from .toolkit import ToolkitOptions

    async def run() -> int:
        gen = await build_generation(
            ToolkitOptions(source=source), number=1, previous=None, connect=False
        )
        try:
            return len(gen.registry) + len(gen.carry["mcp"])
        finally:
            await gen.resources.aclose()

    return asyncio.run(run())


# -- loading -----------------------------------------------------------------------------------


def _load(source: Any, env: Mapping[str, str] | None, *, fresh: bool) -> Manifest | None:
    if source is None:
        return None
    from .manifest import Manifest, load_manifest

    manifest = source if isinstance(source, Manifest) else load_manifest(source, env=env)
    if fresh:
        from .sources.python import forget_local_modules

        for folder in {d.base_dir for d in manifest.tools if d.kind == "python"}:
            forget_local_modules(folder)
    return manifest


# -- tools from the manifest -------------------------------------------------------------------


def _build_tool(
    decl: ToolDecl,
    workspace: Path,
    protected: Sequence[str],
    shared: _Shared,
    issues: _Issues,
) -> list[Tool]:
    from .sources import BuildContext

    spec = decl.spec
    if "max_output" not in spec and decl.defaults.max_output is not None:
        spec = {**spec, "max_output": decl.defaults.max_output}
    try:
        # `defaults.sandbox` confines processes: shell tools, and python tools that asked for a
        # child process. HTTP tools only read their own block (a host allow-list).
        if decl.kind == "shell" or (decl.kind == "python" and "sandbox" in spec):
            sandbox = _sandbox(decl.defaults.sandbox, spec.get("sandbox"), decl.base_dir, protected)
        else:
            sandbox = _sandbox(None, spec.get("sandbox"), decl.base_dir, protected)
        if sandbox is not None and decl.kind == "shell":
            sandbox.check_process()
        timeout_s = spec.get("timeout", decl.defaults.timeout)
        ctx = BuildContext(
            workspace=workspace,
            base_dir=decl.base_dir,
            origin=str(decl.where),
            sandbox=sandbox,
            timeout=timeout_s,
            http_client=shared.http_client,
        )
        if decl.kind == "python":
            from .sources.python import build_python_tools

            built = build_python_tools(spec, ctx)
        elif decl.kind == "shell":
            from .sources.shell import build_shell_tool

            built = [build_shell_tool(spec, ctx)]
        elif decl.kind == "http":
            from .sources.http import build_http_tool

            built = [build_http_tool(spec, ctx)]
        else:
            from .sources.openapi import build_openapi_tools

            built = build_openapi_tools(spec, ctx)
    except ConfigError as exc:
        kind = "import" if exc.field == "python" and "import" in exc.message else "schema"
        issues.add(decl, exc, kind=kind)
        return []

    result: list[Tool] = []
    for t in built:
        overrides = decl.overrides
        if decl.name is None:
            named = _through_includes(t, decl.include_chain)
            if named is None:
                continue
            t, overrides = named
        t = _provenance(t, decl)
        try:
            t = _attach(
                t,
                approval=spec.get("approval"),
                default_approval=decl.defaults.approval,
                locate=lambda f, d=decl: _where(d, f),
                middleware=(*decl.scope_middleware, *_decls(spec.get("middleware"), decl)),
                timeout_s=timeout_s if decl.kind in ("python", "openapi") else None,
                sandbox=ctx.sandbox,
                overrides=overrides,
                base_dir=decl.base_dir,
                protected=protected,
                issues=issues,
            )
        except ConfigError as exc:
            issues.add(decl, exc)
            continue
        result.append(t)
    return result


def _through_includes(t: Tool, chain: Sequence[Any]) -> tuple[Tool, Sequence[Any]] | None:
    """A tool named at build time (OpenAPI operation, factory, MCP tool) renamed by the include
    chain it came through, with the overrides that apply; None if a filter drops it."""
    if not chain:
        return t, ()
    from .manifest import apply_include_chain

    renamed = apply_include_chain(chain, t.name)
    if renamed is None:
        return None
    name, overrides = renamed
    return dataclasses.replace(t, name=name), overrides


def _provenance(t: Tool, decl: Any, *, keep_origin: bool = False) -> Tool:
    """Record where a tool comes from: its declaration (with the include chain, for messages)
    and the names it had along that chain (`meta["aliases"]`), so that a rule written for an
    included tool still applies after an include renamed it with a prefix."""
    chain = decl.include_chain
    if not chain:
        return t if keep_origin else dataclasses.replace(t, origin=t.origin or str(decl.where))
    names: list[str] = []
    name = t.name
    for step in chain:  # outermost first: its prefix is the first one on the name
        if step.prefix and name.startswith(step.prefix):
            name = name[len(step.prefix) :]
            names.append(name)
    via = " -> ".join(f"{step.ref} at {step.where}" for step in chain)
    origin = t.origin if keep_origin and t.origin else str(decl.where)
    return dataclasses.replace(
        t,
        origin=f"{origin} (included via {via})",
        meta={**t.meta, "aliases": tuple(dict.fromkeys(names)), "where": decl.where},
    )


def _decls(items: Any, decl: Any) -> tuple[Any, ...]:
    """A tool's own `middleware:` items as `MiddlewareDecl`-like tuples (name/use, options)."""
    if not items:
        return ()
    out = []
    for index, item in enumerate(items):
        out.append(_InlineMiddleware(item=item, decl=decl, index=index))
    return tuple(out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _InlineMiddleware:
    """A middleware item written inside a tool entry (the loader keeps it as plain data)."""

    item: Any
    decl: Any
    index: int


def _where(decl: Any, sub_field: str) -> str:
    return str(decl.locate(sub_field))


def _attach(
    t: Tool,
    *,
    approval: Any,
    default_approval: str | None,
    locate: Callable[[str], str | None],
    middleware: Sequence[Any],
    timeout_s: float | None,
    sandbox: SandboxPolicy | None,
    overrides: Sequence[Any],
    base_dir: Path,
    protected: Sequence[str],
    issues: _Issues,
    check_arguments: bool = True,
) -> Tool:
    """The tool with its approval policy, sandbox and middleware from the manifest.

    `check_arguments` makes a rule naming an argument the tool lacks an error; server-wide
    rules (one `approval:` for every tool of an MCP server) skip the check.
    """
    policy: ApprovalPolicy | None = t.approval
    if isinstance(approval, str) and approval in ("allow", "ask", "deny"):
        # A bare `approval: ask` is a rule about this tool, not a fallback: a manifest-wide
        # allow must not lift it (deny, then ask, then allow).
        fixed = _Fixed(Decision(approval), origin=locate("approval"))
        policy = fixed if policy is None else _Both(policy, fixed)
    elif approval is not None:
        try:
            compiled = compile_rules(
                approval,
                locate=lambda f: locate(f"approval.{f}" if f else "approval"),
                default=default_approval or "allow",
                parameters=t.parameters if check_arguments else None,
            )
        except ConfigError as exc:
            field = f"approval.{exc.field}" if exc.field else "approval"
            raise ConfigError(exc.message, field=field) from exc
        policy = compiled if policy is None else _Both(policy, compiled)
    for override in overrides:
        try:
            policy, sandbox = _apply_override(
                t,
                override,
                policy=policy,
                sandbox=sandbox,
                default_approval=default_approval,
                base_dir=base_dir,
                protected=protected,
            )
        except ConfigError as exc:
            issues.add(override, exc)  # located at the override, in the file that wrote it
    chain: list[Middleware] = []
    for item in middleware:
        built = _one_middleware(item)
        if built is not None:
            chain.append(built)
    if timeout_s:
        chain.append(timeout(float(timeout_s)))
    return dataclasses.replace(
        t,
        approval=policy,
        sandbox=sandbox if sandbox is not None else t.sandbox,
        middleware=(*chain, *t.middleware),
    )


def _apply_override(
    t: Tool,
    override: Any,
    *,
    policy: ApprovalPolicy | None,
    sandbox: SandboxPolicy | None,
    default_approval: str | None,
    base_dir: Path,
    protected: Sequence[str],
) -> tuple[ApprovalPolicy | None, SandboxPolicy | None]:
    """An include's `override` for one tool: stricter approval and sandbox, never looser.

    Raises:
        ConfigError: the override would loosen a rule (field `approval` or `sandbox`).
    """
    if override.approval is not None:
        _check_tightens(override.approval, t.name)
        stricter = compile_rules(
            override.approval,
            locate=lambda f: str(override.locate(f"approval.{f}" if f else "approval")),
            default=default_approval or "allow",
            parameters=t.parameters,
        )
        policy = stricter if policy is None else _Both(policy, stricter)
    if override.sandbox is not None:
        tighter = SandboxPolicy.from_mapping(
            override.sandbox,
            base=sandbox or SandboxPolicy(protected=tuple(protected)),
            base_dir=base_dir,
        )
        looser = tighter.loosens(sandbox) if sandbox is not None else []
        if looser:
            raise ConfigError(
                f"an include override may only tighten the sandbox of {t.name!r}; it would "
                f"loosen it: {'; '.join(looser)}",
                field="sandbox",
            )
        sandbox = tighter if sandbox is None else sandbox.tighten(tighter)
    return policy, sandbox


def _check_tightens(approval: Any, name: str) -> None:
    """An include override may add `ask` and `deny`, never `allow` (deny anywhere wins).

    Raises:
        ConfigError: the override would let something through that the included file did not.
    """
    loosening = approval == "allow"
    if isinstance(approval, Mapping):
        loosening = approval.get("default") == "allow" or any(
            isinstance(rule, Mapping) and rule.get("decision") == "allow"
            for rule in approval.get("rules") or ()
        )
    if loosening:
        raise ConfigError(
            f"an include override may only tighten the approval of {name!r} (ask or deny); "
            "'allow' would loosen what the included manifest decided",
            field="approval",
        )


@dataclasses.dataclass(frozen=True)
class _Fixed:
    """`approval: allow|ask|deny` written for a tool (or an MCP server): always matches."""

    decision: Decision
    origin: str | None

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        return Verdict(
            decision=self.decision, rule=f"approval: {self.decision.value}", origin=self.origin
        )

    def summary(self) -> str:
        return self.decision.value


class _Both:
    """Two policies on one tool (e.g. a builtin's own and the manifest's): strongest wins."""

    def __init__(self, first: ApprovalPolicy, second: ApprovalPolicy) -> None:
        self.first = first
        self.second = second

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        return combine_verdicts(
            [
                self.first.decide(tool, arguments, workspace),
                self.second.decide(tool, arguments, workspace),
            ]
        )

    def summary(self) -> str:
        return " + ".join(_summary(p) for p in (self.first, self.second))


def _summary(policy: ApprovalPolicy) -> str:
    summary = getattr(policy, "summary", None)
    return summary() if callable(summary) else type(policy).__name__


def _hidden(policy: ApprovalPolicy | None, t: Tool) -> bool:
    """True when a bare deny (`deny: [name]`) removes the tool from the listing altogether,
    under its own name or one it had before an include prefixed it."""
    if isinstance(policy, _AliasAware):
        return any(_hidden(policy.policy, alias) for alias in policy.names_of(t))
    if isinstance(policy, PermissionRules):
        return policy.hidden(t)
    if isinstance(policy, _Both):
        return _hidden(policy.first, t) or _hidden(policy.second, t)
    return False


class _AliasAware:
    """Toolkit-wide rules seen through every name a tool had along its include chain.

    A company's `deny: [purge_cache]` must still hold when a team includes the tool set with
    `prefix: x_`: the rules are asked about `x_purge_cache` and about `purge_cache`, and the
    strongest matching answer wins (deny anywhere wins).
    """

    def __init__(self, policy: ApprovalPolicy) -> None:
        self.policy = policy
        self._renamed: dict[tuple[int, str], tuple[Tool, Tool]] = {}

    def names_of(self, t: Tool) -> list[Tool]:
        out = [t]
        for alias in t.meta.get("aliases", ()):
            key = (id(t), alias)
            cached = self._renamed.get(key)
            if cached is None or cached[0] is not t:
                cached = (t, dataclasses.replace(t, name=alias))
                self._renamed[key] = cached
            out.append(cached[1])
        return out

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        if not tool.meta.get("aliases"):
            return self.policy.decide(tool, arguments, workspace)
        return combine_verdicts(
            [self.policy.decide(t, arguments, workspace) for t in self.names_of(tool)]
        )

    def summary(self) -> str:
        return _summary(self.policy)


def _sandbox(
    defaults: Mapping[str, Any] | None,
    own: Any,
    base_dir: Path,
    protected: Sequence[str],
) -> SandboxPolicy | None:
    """The effective sandbox: the entry's block merged over `defaults.sandbox`, if either."""
    if defaults is None and own is None:
        return None
    policy = SandboxPolicy(protected=tuple(protected))
    if defaults is not None:
        policy = SandboxPolicy.from_mapping(
            defaults, base=policy, base_dir=base_dir, field_prefix="defaults.sandbox"
        )
    if own is not None:
        policy = SandboxPolicy.from_mapping(own, base=policy, base_dir=base_dir)
    return policy


# -- middleware ----------------------------------------------------------------------------------


def _middleware(decls: Sequence[MiddlewareDecl], issues: _Issues) -> list[Middleware]:
    chain: list[Middleware] = []
    for decl in decls:
        try:
            built = _one_middleware(decl)
        except ConfigError as exc:
            issues.add(decl, exc)
            continue
        if built is not None:
            chain.append(built)
    return chain


def _one_middleware(item: Any) -> Middleware | None:
    """Build a middleware from a `MiddlewareDecl` or an item written inside a tool entry."""
    if isinstance(item, _InlineMiddleware):
        raw = item.item
        base_dir = item.decl.base_dir
        field = f"middleware[{item.index}]"
        if isinstance(raw, str):
            name, use, options = raw, None, None
        elif isinstance(raw, Mapping) and "use" in raw:
            name, use, options = None, raw["use"], raw.get("with")
        elif isinstance(raw, Mapping) and len(raw) == 1:
            ((name, options),) = raw.items()
            use = None
        else:
            raise ConfigError(
                "expected a middleware name, {name: options} or {use: 'module:factory'}",
                field=field,
            )
    else:
        name, use, options, base_dir, field = item.name, item.use, item.options, item.base_dir, ""
    try:
        if use is not None:
            return _custom_middleware(str(use), options, base_dir)
        return from_config(str(name), options, base_dir=base_dir)
    except ConfigError as exc:
        raise ConfigError(exc.message, field=field or exc.field) from exc


def _custom_middleware(ref: str, options: Any, base_dir: Path) -> Middleware:
    from .sources.python import load_reference

    factory, _ = load_reference(ref, base_dir)
    if not callable(factory):
        raise ConfigError(f"{ref} is not callable; it must be a factory returning a middleware")
    try:
        if options is None:
            made = factory()
        elif isinstance(options, Mapping):
            made = factory(**options)
        else:
            made = factory(options)
    except TypeError as exc:
        raise ConfigError(f"middleware factory {ref} rejected its options: {exc}") from exc
    if not callable(made):
        raise ConfigError(
            f"middleware factory {ref} returned {type(made).__name__}, not a middleware callable"
        )
    return made


# -- permissions -----------------------------------------------------------------------------------


def _permissions(
    manifest: Manifest | None, extra: ApprovalPolicy | None, issues: _Issues
) -> ApprovalPolicy | None:
    if manifest is None:
        return extra
    lists: dict[str, list[str]] = {"allow": [], "ask": [], "deny": []}
    where: dict[str, Any] = {}
    for decl in manifest.permissions:
        where[f"{decl.decision}[{len(lists[decl.decision])}]"] = decl
        lists[decl.decision].append(decl.text)
    default = manifest.defaults.approval
    if not any(lists.values()) and default in (None, "allow"):
        return extra
    try:
        policy: ApprovalPolicy = compile_permissions(
            lists["allow"],
            lists["ask"],
            lists["deny"],
            locate=lambda f: str(where[f].where) if f in where else None,
            default=default or "allow",
        )
    except ConfigError as exc:
        decl = where.get(exc.field)
        if decl is None:
            raise
        issues.add(decl, ConfigError(exc.message))
        return extra
    return policy if extra is None else _Both(extra, policy)


# -- MCP servers ---------------------------------------------------------------------------------


async def _build_servers(
    decls: Sequence[ServerDecl],
    *,
    workspace: Path,
    protected: Sequence[str],
    previous: Generation | None,
    servers: dict[Any, McpServer],
    server_decls: dict[Any, ServerDecl],
    fresh: list[McpServer],
    adopted: set[Any],
    issues: _Issues,
    connect: bool,
    toolkit: Toolkit | None,
) -> list[Tool]:
    from .sources.mcp import McpServer, McpServerSpec, connect_all

    old: dict[Any, McpServer] = previous.carry.get("mcp", {}) if previous is not None else {}
    for decl in decls:
        try:
            entry = decl.spec
            if "timeout" not in entry and decl.defaults.timeout is not None:
                entry = {**entry, "timeout": decl.defaults.timeout}  # per call, like other tools
            spec = McpServerSpec.from_mapping(decl.name, entry, base_dir=decl.base_dir)
            stdio = "command" in decl.spec
            sandbox = _sandbox(
                decl.defaults.sandbox if stdio else None,
                decl.spec.get("sandbox"),
                decl.base_dir,
                protected,
            )
            if sandbox is not None:
                sandbox.check_process()
            # The approval rules are compiled now so that a bad rule is reported at load.
            if decl.spec.get("approval") is not None:
                compile_rules(decl.spec["approval"], locate=lambda f: None)
        except ConfigError as exc:
            issues.add(decl, exc)
            continue
        # SandboxPolicy holds a dict (env_set): its repr is the hashable identity.
        key = (spec, repr(sandbox))
        server_decls[key] = decl
        server = old.get(key)
        if server is not None:
            adopted.add(key)
        else:
            server = McpServer(
                spec,
                sandbox=sandbox,
                workspace=workspace,
                on_tools_changed=_on_tools_changed(toolkit) if toolkit is not None else None,
            )
            fresh.append(server)
        servers[key] = server
    if issues.items or not connect:
        return []
    await connect_all(fresh)
    tools: list[Tool] = []
    for key, server in servers.items():
        tools += server_tools(server, server_decls[key], issues)
    return tools


def server_tools(server: McpServer, decl: ServerDecl, issues: _Issues | None = None) -> list[Tool]:
    """A server's tools with the manifest's approval, middleware and include chain applied."""
    out: list[Tool] = []
    for t in server.tools():
        named = _through_includes(t, decl.include_chain)
        if named is None:
            continue
        t, overrides = named
        t = _provenance(t, decl, keep_origin=True)
        try:
            t = _attach(
                t,
                approval=decl.spec.get("approval"),
                default_approval=decl.defaults.approval,
                locate=lambda f, d=decl: _where(d, f),
                middleware=decl.scope_middleware,
                timeout_s=None,
                sandbox=server.sandbox,  # shown by listings: the server's process is confined
                overrides=overrides,
                base_dir=decl.base_dir,
                protected=(),
                issues=issues or _Issues(),
                check_arguments=False,
            )
        except ConfigError as exc:
            if issues is not None:
                issues.add(decl, exc)
            continue
        out.append(t)
    return out


def _on_tools_changed(toolkit: Toolkit) -> Callable[[Any], Any]:
    async def changed(server: Any) -> None:
        from .reload import refresh_server_tools

        await refresh_server_tools(toolkit, server)

    return changed


async def _close_unadopted(carry: dict[str, Any]) -> None:
    """Close the servers of a retired generation that the next one did not adopt."""
    servers: dict[Any, McpServer] = carry.get("mcp", {})
    adopted: set[Any] = carry.get("adopted", set())
    for key, server in servers.items():
        if key not in adopted:
            await server.aclose()


# -- builtins and packaged tool sets ------------------------------------------------------------


def _builtin_options(spec: Any) -> dict[str, Mapping[str, Any]]:
    """`"all"`, a list of names, or a mapping name -> options, as a mapping."""
    if spec is None:
        return {}
    if spec == "all" or spec is True:
        return {"*": {}}
    if isinstance(spec, Mapping):
        return {str(k): dict(v or {}) for k, v in spec.items()}
    return {str(name): {} for name in spec}


_COMMON_KEYS = ("approval", "sandbox", "middleware", "timeout")
_OWN_SANDBOX_ONLY = frozenset({"fetch"})
"""Builtins whose sandbox is only their own block: `defaults.sandbox` is about processes."""


def _builtin_tools(
    options: Mapping[str, Mapping[str, Any]],
    manifest: Manifest | None,
    workspace: Path,
    protected: Sequence[str],
    issues: _Issues,
) -> list[Tool]:
    """The builtin tool set, with each tool's manifest options (approval, sandbox...) applied."""
    tool_options = {
        name: {k: v for k, v in opts.items() if k not in _COMMON_KEYS}
        for name, opts in options.items()
    }
    tools = load_toolset("builtin", tool_options)
    defaults = manifest.defaults if manifest is not None else None
    base_dir = manifest.source.parent if manifest is not None and manifest.source else workspace
    out: list[Tool] = []
    for t in tools:
        own = options.get(t.name, options.get("*", {}))
        try:
            # defaults.sandbox confines processes and file access; a network tool (fetch)
            # only follows its own block, or `network: false` meant for shells cuts it off.
            inherited = (
                None if t.name in _OWN_SANDBOX_ONLY or defaults is None else defaults.sandbox
            )
            sandbox = _sandbox(inherited, own.get("sandbox"), base_dir, protected)
            if sandbox is None and t.name not in _OWN_SANDBOX_ONLY:
                sandbox = SandboxPolicy(protected=tuple(protected))
            t = _attach(
                t,
                approval=own.get("approval"),
                default_approval=defaults.approval if defaults is not None else None,
                locate=lambda f: None,
                middleware=_decls(own.get("middleware"), _Anywhere(base_dir)),
                timeout_s=own.get("timeout"),
                sandbox=sandbox,
                overrides=(),
                base_dir=base_dir,
                protected=protected,
                issues=issues,
            )
        except ConfigError as exc:
            raise ConfigError(f"builtins.{t.name}: {exc.message}", field=exc.field) from exc
        out.append(t)
    return out


@dataclasses.dataclass(frozen=True)
class _Anywhere:
    base_dir: Path


def load_toolset(name: str, options: Mapping[str, Mapping[str, Any]]) -> list[Tool]:
    """Tools of a packaged tool set registered under the `toolnexus.toolsets` entry point.

    The entry point's object is called with `options` (tool name -> its options; `"*"` for
    all) and returns `Tool`s.

    Raises:
        UsageError: no installed package provides a tool set of that name.
    """
    from importlib.metadata import entry_points

    found = entry_points(group="toolnexus.toolsets", name=name)
    if not found:
        raise UsageError(
            f"no tool set named {name!r} is installed (entry point group toolnexus.toolsets); "
            "install the package that provides it (for builtins: pip install 'toolnexus[builtin]')"
        )
    factory = next(iter(found)).load()
    return list(factory(options))


def _source(manifest: Manifest | None) -> str | None:
    return str(manifest.source) if manifest is not None and manifest.source else None


def _registry(tools: Sequence[Tool], manifest: Manifest | None) -> Registry:
    """A registry of `tools`; a name clash is a manifest error naming both origins."""
    seen: dict[str, Tool] = {}
    issues: list[ManifestIssue] = []
    for t in tools:
        first = seen.get(t.name)
        if first is not None:
            later = t if t.meta.get("where") or not first.meta.get("where") else first
            where = later.meta.get("where")
            issues.append(
                ManifestIssue(
                    message=(
                        f"tool {t.name!r} is defined twice: first at {first.origin or first.source}"
                        f", again at {t.origin or t.source}; rename one (or use an include's "
                        "prefix or exclude)"
                    ),
                    file=where.file if where is not None else _source(manifest),
                    line=where.line if where is not None else None,
                    column=where.column if where is not None else None,
                    kind="duplicate",
                )
            )
        seen[t.name] = t
    if issues:
        raise manifest_error(issues)
    return Registry(tools)
