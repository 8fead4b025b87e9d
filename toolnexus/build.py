"""Build one Generation: tools from every source, with approval, sandbox and middleware
attached, and the executor wired. Called by `create_toolkit` and again by every reload.

Every problem a builder finds is collected and reported at once, located at the manifest line
it comes from. MCP servers whose configuration did not change are adopted from the previous
generation instead of restarted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._attach import (
    AccessSites,
    AliasAware,
    Issues,
    ManifestRules,
    attach,
    effective_sandbox,
    inline_middleware,
    is_hidden,
    manifest_access,
    manifest_middleware,
    manifest_permissions,
)
from ._coverage import check_coverage
from .base import Tool, current_caller
from .errors import (
    ConfigError,
    ManifestError,
    ManifestIssue,
    UsageError,
    manifest_error,
)
from .executor import Executor
from .generation import Generation, ToolkitOptions
from .mcp.namespace import mcp_json_servers, namespace_clashes
from .registry import Registry
from .runtime.sandbox import SandboxPolicy
from .search.plan import apply_search, mark, own_defer, settings_from

if TYPE_CHECKING:
    import httpx

    from .approval import AccessRules
    from .manifest import Manifest, ServerDecl, ToolDecl
    from .mcp.callbacks import McpHandlers
    from .mcp.server import McpServer
    from .mcp.tokens import LoginStore
    from .search.plan import ToolSearchSettings

logger = logging.getLogger("toolnexus")

__all__ = [
    "Builtins",
    "build_generation",
    "builtin_options",
    "check_manifest",
    "load_toolset",
    "server_tools",
    "with_server_tools",
]

PROTECTED = (".git/hooks", ".git/config")
"""Paths that stay read-only inside writable sandbox roots (plus the manifest files).

Still needed beside `sandbox.protected_git_paths` (which a sandboxed process gets on top): the
in-process file tools see only the policy's `protected` (via `confine_path`), and this is what
keeps `.git/config` and `.git/hooks` read-only for them under `protect_git: false` (README,
builtin file tools)."""


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
    on_tools_changed: Callable[[McpServer], Awaitable[None]] | None = None,
) -> Generation:
    """A complete, ready generation, or an exception with nothing left open.

    Raises:
        ManifestError: every problem of the manifest and its tools, located.
        SourceError: a required MCP server did not start.
    """
    from .mcp.callbacks import McpHandlers

    stack = AsyncExitStack()
    fresh: list[McpServer] = []
    adopted: set[Any] = set()
    try:
        local = await _off_the_loop(options, previous, _Shared(stack=stack))
        manifest, workspace, issues = local.manifest, local.workspace, local.issues
        tools, files, protected = local.tools, local.files, local.protected
        permissions = local.permissions
        roots = manifest.roots if manifest is not None else ()
        servers: dict[Any, McpServer] = {}
        server_decls: dict[Any, ServerDecl] = {}
        if manifest is not None and manifest.mcp_servers:
            from .mcp.tokens import login_store_for

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
                on_tools_changed=on_tools_changed,
                handlers=McpHandlers(elicitation=options.elicitation, sampling=options.sampling),
                roots=[Path(r) for r in roots],
                logins=login_store_for(options.state),
            )
            tools += server_tools
            tools = namespace_clashes(tools, mcp_json_servers(manifest.mcp_servers))
        coverage = check_coverage(manifest, tools, local.rules, issues)
        issues.items += coverage.errors
        access_errors, access_pending = _access_coverage(local.access, tools, manifest)
        issues.items += access_errors
        coverage = dataclasses.replace(coverage, pending=(*coverage.pending, *access_pending))
        issues.raise_if_any()
        for issue in coverage.pending:
            logger.warning("%s", issue)

        if permissions is not None and any(t.meta.get("aliases") for t in tools):
            permissions = AliasAware(permissions)
        search = _search_settings(options, manifest)
        access = local.access.rules if local.access is not None else None
        tools = _with_search(tools, search, permissions, manifest, access)
        registry = _registry(tools, manifest)
        executor = Executor(
            registry,
            middleware=local.middleware,
            permissions=permissions,
            approver=options.approver,
            workspace=workspace,
            roots=roots,
            state=previous.executor.state if previous is not None else None,
            store=options.state,
            access=local.access.rules if local.access is not None else None,
            missing=functools.partial(servers_down, servers),
        )
        hidden = frozenset(t.name for t in registry.tools() if is_hidden(permissions, t))
        gen = Generation(
            number=number,
            registry=registry,
            executor=executor,
            resources=stack,
            files=tuple(dict.fromkeys(p.resolve() for p in files)),
            hidden=hidden,
            name=manifest.name if manifest is not None else None,
            tool_search=search,
            pending=coverage.pending,
            access=local.access.rules if local.access is not None else None,
        )
        # Shared with the generation that may adopt these servers; see `_close_unadopted`.
        gen.carry.update(mcp=servers, adopted=set(), decls=server_decls)
        gen.status.update({s.name: s.status.to_dict() for s in servers.values()})
        stack.push_async_callback(_close_unadopted, gen.carry)
        if previous is not None:
            # Only a successful build takes servers over; a failed one leaves them to `previous`.
            previous.carry.setdefault("adopted", set()).update(adopted)
            for key in adopted:  # a kept session learns of changed `roots:`
                await servers[key].set_roots([Path(r) for r in roots])
        return gen
    except BaseException:
        for server in fresh:
            await server.aclose()
        await stack.aclose()
        raise


def _access_coverage(
    access: AccessSites | None, tools: Sequence[Tool], manifest: Manifest | None
) -> tuple[list[ManifestIssue], list[ManifestIssue]]:
    """Each `access:` tool pattern that names no tool: an entry meant to restrict a tool it
    misspells would leave that tool open to every caller, so it is an error (a pending one
    while MCP servers could still list such a tool)."""
    errors: list[ManifestIssue] = []
    pending: list[ManifestIssue] = []
    if access is None:
        return errors, pending
    from .manifest import issue_at

    servers = manifest is not None and bool(manifest.mcp_servers)
    for entry, problem in access.rules.unmatched(tools):
        issue = issue_at(access.sites[id(entry)], problem)
        (pending if servers else errors).append(issue)
    return errors, pending


BUILD_TIMEOUT = 60.0
"""Seconds the synchronous part of a build (reading the manifest, importing tool modules,
building tools) may take. It runs on a worker thread, so calls go on meanwhile; past this the
build is given up, since a module that hangs on import would otherwise hold every later
reload. The thread itself cannot be stopped: it runs on until the import returns."""


@dataclasses.dataclass(kw_only=True)
class _Local:
    """What a build makes without I/O on the event loop: everything but the MCP servers."""

    manifest: Manifest | None
    workspace: Path
    issues: Issues
    tools: list[Tool]
    files: list[Path]
    protected: tuple[str, ...]
    permissions: Any
    middleware: list[Any]
    rules: ManifestRules | None = None
    """The manifest's own `permissions:` compiled (checked to apply to some tool)."""
    access: AccessSites | None = None
    """The `access:` entries of the manifest and its includes, compiled."""
    building: ToolDecl | None = None
    """The manifest entry being built right now (named if the build hangs)."""


async def _off_the_loop(
    options: ToolkitOptions, previous: Generation | None, shared: _Shared
) -> _Local:
    """`_build_local` on a worker thread, bounded by `BUILD_TIMEOUT`.

    Raises:
        ManifestError: the build's own problems, or a build that did not finish in time
            (located at the entry whose module was importing, when there is one).
    """
    from .runtime.workers import run_in_worker

    progress: list[_Local] = []
    try:
        return await asyncio.wait_for(
            run_in_worker(_build_local, options, previous, shared, progress), BUILD_TIMEOUT
        )
    except TimeoutError:
        raise _hung(progress[0] if progress else None) from None


def _hung(local: _Local | None) -> ManifestError:
    seconds = f"{BUILD_TIMEOUT:g}s"
    decl = local.building if local is not None else None
    if decl is None:
        message = (
            f"building the toolkit did not finish within {seconds}; a Python module that hangs "
            "on import is the usual cause (its import runs on and cannot be stopped: fix it and "
            "restart the process)"
        )
        return manifest_error([ManifestIssue(message=message, kind="import")])
    exc = ConfigError(
        f"building this tool did not finish within {seconds}: its module hangs on import "
        "(top-level code that never returns). The import runs on in a thread and cannot be "
        "stopped, and it holds the import lock: fix the module and restart the process",
        field="python" if decl.kind == "python" else "",
    )
    issues = Issues()
    issues.add(decl, exc, kind="import")
    return manifest_error(issues.items)


def _build_local(
    options: ToolkitOptions,
    previous: Generation | None,
    shared: _Shared,
    progress: list[_Local],
) -> _Local:
    issues = Issues()
    manifest = _load(options.source, options.env, issues, fresh=previous is not None)
    workspace = (
        options.workspace or (manifest.workspace if manifest is not None else None) or Path.cwd()
    ).resolve()
    files: list[Path] = list(manifest.files) if manifest is not None else []
    local = _Local(
        manifest=manifest,
        workspace=workspace,
        issues=issues,
        tools=_checked_extra_tools(options.extra_tools),
        files=files,
        protected=(*PROTECTED, *(str(f) for f in files)),
        permissions=None,
        middleware=list(options.middleware),
    )
    progress.append(local)
    issues, tools, protected = local.issues, local.tools, local.protected
    if manifest is not None:
        issues.names.update({k: set(v) for k, v in manifest.include_names.items()})
    wanted = dict(options.builtins)
    if manifest is not None:
        wanted = {**manifest.builtins, **wanted}
        for decl in manifest.tools:
            local.building = decl
            built = _build_tool(decl, workspace, protected, shared, issues)
            tools += built
            for t in built:
                files += [Path(p) for p in t.meta.get("files", ())]
        local.building = None
    if wanted:
        try:
            tools += _builtin_tools(wanted, manifest, workspace, protected, issues)
        except ConfigError as exc:
            if manifest is None:
                raise  # create_toolkit(builtins=...): a plain ConfigError for the caller
            field = exc.field if exc.field.startswith("builtins") else f"builtins.{exc.field}"
            issues.items.append(_builtin_issue(exc.message, field, manifest))
    local.permissions, local.rules = manifest_permissions(manifest, options.permissions, issues)
    local.access = manifest_access(manifest, issues)
    if manifest is not None:
        local.middleware += manifest_middleware(manifest.middleware, issues)
    return local


def _checked_extra_tools(extra: Sequence[Tool]) -> list[Tool]:
    """`extra_tools`, each checked as a manifest's tools are: a schema typo is the program's
    mistake, reported now rather than as a crash of every call.

    Raises:
        UsageError: not a Tool, or a tool whose parameters are not a valid object schema.
    """
    from .function import check_parameters

    for index, t in enumerate(extra):
        if not isinstance(t, Tool):
            raise UsageError(
                f"extra_tools[{index}] is {type(t).__name__}, not a Tool; make one with "
                "toolnexus.tool(fn) or @tool"
            )
        try:
            check_parameters(t.parameters)
        except ConfigError as exc:
            raise UsageError(
                f"extra_tools[{index}]: tool {t.name!r}: parameters: {exc.message}"
            ) from exc
    return list(extra)


def check_manifest(source: str | Path) -> tuple[list[Tool], int, tuple[ManifestIssue, ...]]:
    """Load a manifest and build every tool without starting MCP servers; returns the tools
    built, how many MCP servers are declared (their tools come when they run), and the rules
    and include entries that met no tool but might meet one of those servers' tools.

    Raises:
        ManifestError: every problem found, located.
    """

    async def run() -> tuple[list[Tool], int, tuple[ManifestIssue, ...]]:
        gen = await build_generation(
            ToolkitOptions(source=source), number=1, previous=None, connect=False
        )
        try:
            return list(gen.registry.tools()), len(gen.carry["mcp"]), gen.pending
        finally:
            await gen.resources.aclose()

    return asyncio.run(run())


# -- loading -----------------------------------------------------------------------------------


def _load(
    source: Any, env: Mapping[str, str] | None, issues: Issues, *, fresh: bool
) -> Manifest | None:
    """The manifest, or what of it has no problem: those go into `issues` (raised once the
    build has found its own too), with the tools they leave out.

    Raises:
        ManifestError: nothing usable could be read.
    """
    if source is None:
        return None
    from .manifest import Manifest, load_manifest_partial

    if isinstance(source, Manifest):
        manifest = source
    else:
        partial = load_manifest_partial(source, env=env)
        issues.items += partial.issues
        issues.skipped += [(None, name) for name in partial.dropped]
        if partial.manifest is None:
            raise manifest_error(list(partial.issues))
        manifest = partial.manifest
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
    issues: Issues,
) -> list[Tool]:
    from .sources import BuildContext

    spec = decl.spec
    if "parameters" in spec:
        # Written by hand: checked as Python tools' and extra_tools' schemas are, each problem
        # at its own line, before a typo (`type: strin`) fails every call.
        from .function import parameter_problems

        written = spec["parameters"]
        if isinstance(written, Mapping) and "type" not in written:
            written = {**written, "type": "object"}  # the only type arguments come in
        problems = parameter_problems(written)
        for problem in problems:
            issues.add(decl, problem)
        if problems:
            issues.skipped.append((decl, decl.name))
            return []
    if "max_output" not in spec and decl.defaults.max_output is not None:
        spec = {**spec, "max_output": decl.defaults.max_output}
    if decl.kind == "shell" and "kill_grace" not in spec and decl.defaults.kill_grace is not None:
        spec = {**spec, "kill_grace": decl.defaults.kill_grace}
    try:
        # `defaults.sandbox` confines processes: shell tools, and python tools that asked for a
        # child process. HTTP tools only read their own block (a host allow-list).
        if decl.kind == "shell" or (decl.kind == "python" and "sandbox" in spec):
            sandbox = effective_sandbox(
                decl.defaults.sandbox, spec.get("sandbox"), decl.base_dir, protected
            )
        else:
            sandbox = effective_sandbox(None, spec.get("sandbox"), decl.base_dir, protected)
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
        issues.skipped.append((decl, decl.name))
        return []

    own_arguments = spec.get("arguments")
    if own_arguments and decl.kind == "python" and len(built) > 1:
        issues.add(
            decl,
            ConfigError(
                f"this entry makes {len(built)} tools, and `arguments` curates one tool's "
                "arguments; curate each tool in an include's `override` instead",
                field="arguments",
            ),
        )
        issues.skipped += [(decl, t.name) for t in built]
        return []
    many = decl.kind == "openapi"
    if many and own_arguments:
        _check_globs(own_arguments, built, decl, issues)
    result: list[Tool] = []
    for t in built:
        source_names = _source_names(t)
        overrides = decl.overrides
        if decl.name is None:
            named = _through_includes(t, decl.include_chain, issues.names)
            if named is None:
                continue
            t, overrides = named
        t = _provenance(t, decl)
        t = mark(t, own_defer(spec, decl.include_chain))
        try:
            t = attach(
                t,
                approval=spec.get("approval"),
                default_approval=decl.defaults.approval,
                locate=lambda f, d=decl: _where(d, f),
                middleware=(
                    *decl.scope_middleware,
                    *inline_middleware(spec.get("middleware"), decl),
                ),
                timeout_s=timeout_s if decl.kind in ("python", "openapi") else None,
                sandbox=ctx.sandbox,
                overrides=overrides,
                base_dir=decl.base_dir,
                protected=protected,
                issues=issues,
            )
        except ConfigError as exc:
            issues.add(decl, _renamed_in_rule(exc, own_arguments if not many else None))
            issues.skipped.append((decl, t.name))
            continue
        curated = _curated(
            t,
            source_names=source_names,
            decl=decl,
            own=own_arguments,
            overrides=overrides,
            issues=issues,
            many=many,
        )
        if curated is None:
            issues.skipped.append((decl, t.name))
            continue
        result.append(curated)
    return result


def _renamed_in_rule(exc: ConfigError, arguments: Mapping[str, Any] | None) -> ConfigError:
    """A rule naming an argument by its curated name: say which name rules read."""
    name = exc.field.rpartition(".")[2]
    if not arguments or ".when." not in f".{exc.field}":
        return exc
    old = next(
        (
            a
            for a, spec in arguments.items()
            if isinstance(spec, Mapping) and spec.get("rename") == name
        ),
        None,
    )
    if old is None:
        return exc
    return ConfigError(
        f"{exc.message}; rules read the tool's own argument names, and {name!r} is the curated "
        f"name of {old!r}: write {old!r}",
        field=exc.field,
    )


def _source_names(t: Tool) -> tuple[str, ...]:
    """The names a source's `arguments:` globs match: the tool's name as the source made it
    (with the entry's prefix), and its own name at the source (MCP name, operationId)."""
    extra = (t.meta.get("mcp_name"), t.meta.get("operation_id"))
    return (t.name, *(n for n in extra if isinstance(n, str)))


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _check_globs(
    arguments: Mapping[str, Any], built: Sequence[Tool], decl: Any, issues: Issues
) -> None:
    """Each tool name or glob of a source's `arguments:` must name one of its tools, and each
    argument it curates must be one that some tool it names has (a glob skips the tools
    without it, so a misspelt argument would otherwise curate nothing, silently)."""
    import fnmatch

    from ._suggest import did_you_mean

    names = [n for t in built for n in _source_names(t)]
    for glob, curated in arguments.items():
        matched = [t for t in built if any(fnmatch.fnmatchcase(n, glob) for n in _source_names(t))]
        if not matched:
            problem = f"{glob!r} names none of this entry's tools{did_you_mean(glob, names)}"
            issues.add(decl, ConfigError(problem, field=f"arguments[{glob!r}]"))
            continue
        if not _is_glob(glob) or not isinstance(curated, Mapping):
            continue  # a tool named exactly: `curate` reports its unknown arguments
        have = sorted({p for t in matched for p in t.parameters.get("properties") or {}})
        for name in curated:
            if name not in have:
                problem = (
                    f"no tool {glob!r} names has an argument {name!r}{did_you_mean(name, have)} "
                    f"(their arguments: {', '.join(have) or 'none'})"
                )
                issues.add(decl, ConfigError(problem, field=f"arguments[{glob!r}].{name}"))


def _curated(
    t: Tool,
    *,
    source_names: Sequence[str],
    decl: Any,
    own: Mapping[str, Any] | None,
    overrides: Sequence[Any],
    issues: Issues,
    many: bool,
) -> Tool | None:
    """`t` with its entry's curated arguments, then each include override's (innermost
    first, each narrowing what the one before published); None when one is refused (recorded
    in `issues`): published uncurated, the tool would let the model set what was fixed.

    A tool name that is a glob (`list_*`, an override's glob) curates the arguments each tool
    it matches has; a plain name, like a tool's own entry, must name arguments the tool has.
    """
    import fnmatch

    from .curation import curate

    if own and many:
        for glob, arguments in own.items():
            if not any(fnmatch.fnmatchcase(n, glob) for n in source_names):
                continue
            try:
                t = curate(t, _for_tool(t, arguments, strict=not _is_glob(glob)))
            except ConfigError as exc:
                issues.add(decl, ConfigError(exc.message, field=f"arguments[{glob!r}].{exc.field}"))
                return None
    elif own:
        try:
            t = curate(t, own)
        except ConfigError as exc:
            issues.add(decl, ConfigError(exc.message, field=f"arguments.{exc.field}"))
            return None
    for override in overrides:
        if not override.arguments:
            continue
        met = issues.curated.setdefault(override.where, set())
        met.update(t.parameters.get("properties") or {})
        try:
            t = curate(t, _for_tool(t, override.arguments, strict=not _is_glob(override.glob)))
        except ConfigError as exc:
            message = exc.message
            if exc.field.partition(".")[0] not in t.parameters.get("properties", {}):
                message += " (an override curates what the included manifest publishes)"
            issues.add(override, ConfigError(message, field=f"arguments.{exc.field}"))
            return None
    return t


def _for_tool(t: Tool, arguments: Mapping[str, Any], *, strict: bool) -> Mapping[str, Any]:
    """`arguments` as they apply to `t`: all of them for a tool named exactly, those it has
    for the tools of a glob."""
    if strict:
        return arguments
    properties = t.parameters.get("properties") or {}
    return {name: spec for name, spec in arguments.items() if name in properties}


def _through_includes(
    t: Tool, chain: Sequence[Any], seen: dict[Any, set[str]] | None = None
) -> tuple[Tool, Sequence[Any]] | None:
    """A tool named at build time (OpenAPI operation, factory, MCP tool) renamed by the include
    chain it came through, with the overrides that apply; None if a filter drops it. `seen`
    collects the names each include's filters met."""
    if not chain:
        return t, ()
    from .manifest import apply_include_chain

    renamed = apply_include_chain(chain, t.name, seen)
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
        meta={
            **t.meta,
            "aliases": tuple(dict.fromkeys(names)),
            "where": decl.where,
            "include": str(chain[0].ref),  # what tool search browses it under
        },
    )


def _where(decl: Any, sub_field: str) -> str:
    return str(decl.locate(sub_field))


# -- tool search ---------------------------------------------------------------------------------


def _search_settings(
    options: ToolkitOptions, manifest: Manifest | None
) -> ToolSearchSettings | None:
    """`create_toolkit(tool_search=...)` if given, else the manifest's block (located errors)."""
    if options.tool_search is not None:
        try:
            return settings_from(options.tool_search)
        except ConfigError as exc:
            where = f".{exc.field}" if exc.field else ""
            raise UsageError(f"tool_search{where}: {exc.message}") from exc
    if manifest is None or manifest.tool_search is None:
        return None
    from .manifest import issue_at

    try:
        return settings_from(manifest.tool_search)
    except ConfigError as exc:
        site = manifest.tool_search_site
        issue = issue_at(site, exc) if site else ManifestIssue(message=exc.message)
        raise manifest_error([issue]) from exc


def _with_search(
    tools: list[Tool],
    settings: ToolSearchSettings | None,
    permissions: Any,
    manifest: Manifest | None,
    access: AccessRules | None = None,
) -> list[Tool]:
    """`tools` with deferral applied and `tool_search` added (see `toolnexus.search.plan`)."""
    from .manifest import issue_at

    hidden = {t.name for t in tools if is_hidden(permissions, t)}
    try:
        return apply_search(tools, settings, hidden=hidden, visible=_visible_to_caller(access))
    except ConfigError as exc:
        site = manifest.tool_search_site if manifest is not None else None
        if site is None:
            raise UsageError(exc.message) from exc
        raise manifest_error([issue_at(site, exc)]) from exc


def _visible_to_caller(access: AccessRules | None) -> Callable[[Tool], bool] | None:
    """Whether the current caller may see a tool (for the search tool); None without
    `access:` entries."""
    if access is None:
        return None
    rules = access
    return lambda tool: rules.allows(tool, current_caller())


# -- middleware ----------------------------------------------------------------------------------


# -- permissions -----------------------------------------------------------------------------------


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
    issues: Issues,
    connect: bool,
    on_tools_changed: Callable[[McpServer], Awaitable[None]] | None,
    handlers: McpHandlers | None = None,
    roots: Sequence[Path] = (),
    logins: LoginStore | None = None,
) -> list[Tool]:
    from .mcp.server import connect_all
    from .sources.mcp import open_servers

    open_servers(
        decls,
        workspace=workspace,
        protected=protected,
        previous=previous.carry.get("mcp", {}) if previous is not None else {},
        servers=servers,
        server_decls=server_decls,
        fresh=fresh,
        adopted=adopted,
        issues=issues,
        on_tools_changed=on_tools_changed,
        handlers=handlers,
        roots=roots,
        logins=logins,
    )
    if issues.items or not connect:
        return []
    await connect_all(fresh)
    tools: list[Tool] = []
    for key, server in servers.items():
        tools += server_tools(server, server_decls[key], issues)
    return tools


def servers_down(servers: Mapping[Any, McpServer]) -> str:
    """The MCP servers that are not ready and why, in words ("" when all are): what an unknown
    tool name may be missing because of."""
    down = []
    for server in servers.values():
        status = server.status
        if status.state.value == "ready":
            continue
        why = status.reason or status.last_error
        down.append(f"{server.name!r} is {status.state.value}{': ' + why if why else ''}")
    if not down:
        return ""
    if len(down) == 1:
        return f"MCP server {down[0]}; its tools are missing until it runs"
    return "MCP servers not running, so their tools are missing: " + "; ".join(down)


def server_tools(server: McpServer, decl: ServerDecl, issues: Issues | None = None) -> list[Tool]:
    """A server's tools with the manifest's approval, middleware and include chain applied."""
    out: list[Tool] = []
    problems = issues if issues is not None else Issues()
    own = decl.spec.get("arguments")
    if own and issues is not None and server.tools():
        # Checked against the tools listed at start: a misspelt name would leave an argument
        # the manifest meant to fix open to the model. Tools listed later are curated as they
        # come (a glob curates those that have the argument).
        _check_globs(own, server.tools(), decl, issues)
    for t in server.tools():
        source_names = _source_names(t)
        named = _through_includes(t, decl.include_chain, issues.names if issues else None)
        if named is None:
            continue
        t, overrides = named
        t = _provenance(t, decl, keep_origin=True)
        t = mark(t, own_defer(decl.spec, decl.include_chain))
        try:
            t = attach(
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
                issues=issues or Issues(),
                check_arguments=False,
            )
        except ConfigError as exc:
            if issues is not None:
                issues.add(decl, exc)
            continue
        curated = _curated(
            t,
            source_names=source_names,
            decl=decl,
            own=own,
            overrides=overrides,
            issues=problems,
            many=True,
        )
        if curated is None:
            if issues is None:  # a tool announced later (list_changed): left out, and said why
                logger.error(
                    "MCP server %r: tool %r left out: %s", decl.name, t.name, problems.items[-1]
                )
            continue
        out.append(curated)
    return out


def with_server_tools(current: Generation, server: McpServer) -> Generation | None:
    """The generation after `current` in which `server`'s tools are its new list, or None when
    `current` does not hold that server (a generation since replaced it).

    Everything else carries over: other tools, middleware, permissions, state and the live
    resources, which the new generation takes from `current` (retiring it then closes nothing).
    """
    carry = current.carry
    key = next((k for k, s in carry.get("mcp", {}).items() if s is server), None)
    if key is None:
        return None
    fresh = server_tools(server, carry["decls"][key])
    stale = {t.name for t in current.registry.tools() if t.meta.get("server") == server.name}
    kept = [t for t in current.registry.tools() if t.name not in stale]
    namespaced = mcp_json_servers(carry["decls"].values())
    merged = namespace_clashes([*kept, *fresh], namespaced)
    old = current.executor
    # A tool the server adds may be one a bare deny hides: hide it (and keep it out of the
    # search) as a full build would, rather than reuse the old generation's set.
    hidden = frozenset(t.name for t in merged if is_hidden(old.permissions, t))
    registry = Registry(
        apply_search(
            merged, current.tool_search, hidden=hidden, visible=_visible_to_caller(old.access)
        )
    )
    executor = Executor(
        registry,
        middleware=old.middleware,
        permissions=old.permissions,
        approver=old.approver,
        workspace=old.workspace,
        roots=old.roots[1:],
        state=old.state,
        store=old.store,
        access=old.access,
        missing=old.missing,
    )
    new = dataclasses.replace(
        current,
        number=current.number + 1,
        registry=registry,
        hidden=hidden,
        executor=executor,
        inflight=0,
        retired=False,
    )
    new.status[server.name] = server.status.to_dict()
    current.resources = AsyncExitStack()
    current.carry = {}
    return new


async def _close_unadopted(carry: dict[str, Any]) -> None:
    """Close the servers of a retired generation that the next one did not adopt."""
    servers: dict[Any, McpServer] = carry.get("mcp", {})
    adopted: set[Any] = carry.get("adopted", set())
    for key, server in servers.items():
        if key not in adopted:
            await server.aclose()


# -- builtins and packaged tool sets ------------------------------------------------------------


Builtins = bool | str | Sequence[str] | Mapping[str, Mapping[str, Any] | None] | None
"""What `create_toolkit(builtins=...)` takes: True or `"all"` (every builtin), one name, a list
of names, a mapping name -> options (None for none), or False / None (no builtins)."""

_BUILTINS_SHAPES = (
    "True or 'all' (every builtin), a name ('read'), a list of names (['read', 'grep']), a "
    "mapping name -> options ({'read': {'max_lines': 500}}), or False or None (none)"
)


def builtin_options(spec: object) -> dict[str, Mapping[str, Any]]:
    """`builtins=` as a mapping name -> options (`"*"` for every builtin).

    Raises:
        UsageError: any other shape, naming the parameter, the bad part and the shapes taken.
    """
    if spec is None or spec is False:
        return {}
    if spec is True or spec == "all":
        return {"*": {}}
    if isinstance(spec, str):
        return {spec: {}}
    if isinstance(spec, Mapping):
        out: dict[str, Mapping[str, Any]] = {}
        for name, options in spec.items():
            if not isinstance(name, str):
                raise _bad_builtins(f"builtins key {name!r} is {type(name).__name__}, not a name")
            if options is not None and not isinstance(options, Mapping):
                raise _bad_builtins(f"builtins[{name!r}] is {_kind(options)}, not a mapping")
            out[name] = dict(options or {})
        return out
    if isinstance(spec, list | tuple | set | frozenset):
        for index, name in enumerate(spec):
            if not isinstance(name, str):
                raise _bad_builtins(f"builtins[{index}] is {_kind(name)}, not a name")
        return {name: {} for name in spec}
    raise _bad_builtins(f"got {_kind(spec)}")


def _kind(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _bad_builtins(problem: str) -> UsageError:
    return UsageError(f"builtins= takes {_BUILTINS_SHAPES}; {problem}")


_COMMON_KEYS = ("approval", "sandbox", "middleware", "timeout")


def _builtin_tools(
    options: Mapping[str, Mapping[str, Any]],
    manifest: Manifest | None,
    workspace: Path,
    protected: Sequence[str],
    issues: Issues,
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
            # defaults.sandbox confines processes and file access; a tool doing its own
            # network access opts out (see `_takes_defaults`).
            inherited = None if not _takes_defaults(t) or defaults is None else defaults.sandbox
            sandbox = effective_sandbox(inherited, own.get("sandbox"), base_dir, protected)
            if sandbox is None and _takes_defaults(t):
                sandbox = SandboxPolicy(protected=tuple(protected))
            t = attach(
                t,
                approval=own.get("approval"),
                default_approval=defaults.approval if defaults is not None else None,
                locate=lambda f: None,
                middleware=inline_middleware(own.get("middleware"), _Anywhere(base_dir)),
                timeout_s=own.get("timeout"),
                sandbox=sandbox,
                overrides=(),
                base_dir=base_dir,
                protected=protected,
                issues=issues,
            )
        except ConfigError as exc:
            sub_field = f".{exc.field}" if exc.field else ""
            raise ConfigError(exc.message, field=f"builtins.{t.name}{sub_field}") from exc
        out.append(t)
    return out


def _takes_defaults(t: Tool) -> bool:
    """Whether `defaults.sandbox` applies to a packaged tool. A tool that does its own
    network access (a fetcher) says `meta={"sandbox_defaults": False}`: the defaults are about
    processes and files, and `network: false` there would cut it off entirely."""
    return t.meta.get("sandbox_defaults", True) is not False


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


def _builtin_issue(message: str, field: str, manifest: Manifest) -> ManifestIssue:
    """A builtin's options refused by its builder, located where they are written
    (`field` is `builtins.<name>[.<option>...]`)."""
    _, _, rest = field.partition(".")
    name, _, sub = rest.partition(".")
    site = manifest.builtin_sites.get(name) or manifest.builtin_sites.get("*")
    if site is None:
        return ManifestIssue(message=message, file=_source(manifest), field=field)
    where = site.locate(sub)
    return ManifestIssue(
        message=message, file=where.file, line=where.line, column=where.column, field=field
    )


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
