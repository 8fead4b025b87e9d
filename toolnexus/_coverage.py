"""Every rule, include filter and override of a manifest applies to some tool, or it is a problem.

A `deny: ["Bahs(rm *)"]`, an `exclude: [purg]` or an `override: {deplyo: ...}` loads and then
does nothing: worse than no rule, since whoever wrote it believes it holds. The builder asks
this module, once every tool is built, which of them cover nothing, and reports each where it
is written, with the closest name that exists.

A rule written for every toolkit that includes it (a company's `deny: [git_push*]`,
`read(**/.env*)`) may rightly meet nothing in one of them: a glob over names or a well-known
tool's name is such a rule. A literal name of nothing known is a typo.

A name may belong to a tool that only an MCP server provides, and those are known only once the
server lists its tools (and may change while it runs): such problems are *pending*. The build
logs them as warnings; `toolnexus validate --connect` fails on them and `toolnexus doctor`
reports them. A rule naming an MCP server the manifest does not declare is an error at once.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._suggest import did_you_mean
from .approval.names import CLAUDE_CODE_TOOLS, MCP_PREFIX
from .curation import rules_view
from .errors import ConfigError, ManifestIssue

if TYPE_CHECKING:
    from ._attach import Issues, ManifestRules
    from .base import Tool
    from .manifest import IncludeDecl, Manifest, ServerDecl

__all__ = ["Coverage", "check_coverage"]

_PENDING = (
    " (if an MCP server provides it, this is checked once the servers list their tools: "
    "toolnexus validate --connect)"
)


WELL_KNOWN = frozenset(
    (
        *CLAUDE_CODE_TOOLS,
        *(n for names in CLAUDE_CODE_TOOLS.values() for n in names),
        *("shell_output", "shell_kill", "todo"),
    )
)
"""Tool names a shared policy may rule on without the toolkit having them: the builtin tool
set's and Claude Code's."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Coverage:
    """What covers nothing: errors now, and problems that depend on MCP servers' tools."""

    errors: tuple[ManifestIssue, ...] = ()
    pending: tuple[ManifestIssue, ...] = ()
    """Could still be met by a tool an MCP server lists: warnings at build, errors for
    `validate --connect`, reported by `doctor`."""


def check_coverage(
    manifest: Manifest | None,
    tools: Sequence[Tool],
    rules: ManifestRules | None,
    issues: Issues,
) -> Coverage:
    """The manifest's rules, include filters and overrides that apply to none of `tools`.

    Args:
        manifest: The manifest (None: nothing to check).
        tools: Every tool built, MCP servers' included when they were started.
        rules: The manifest's compiled `permissions:`, if any.
        issues: The build's problems so far: the names each include's filters met, and the
            tools left out for a problem already reported (a rule naming one of those is not a
            second mistake; one whose names are unknown leaves name checks undecided).
    """
    if manifest is None:
        return Coverage()
    from .manifest import issue_at

    errors: list[ManifestIssue] = []
    pending: list[ManifestIssue] = []
    servers = manifest.mcp_servers
    unknown = [decl for decl, name in issues.skipped if name is None and decl is not None]
    unnamed = any(name is None for _, name in issues.skipped)
    if rules is not None:
        declared = _server_names(servers)
        # Rules read a curated tool's arguments under their upstream names.
        known = [*_with_aliases([rules_view(t) for t in tools]), *_stand_ins(issues)]
        for problem in rules.rules.unmatched(known):
            decl = rules.sites[problem.field]
            missing = _undeclared_server(decl.text, declared)
            names_nothing = "names no tool" in problem.message
            if missing is not None:
                errors.append(issue_at(decl, ConfigError(missing)))
            elif names_nothing and (unnamed or _defensive(decl.text)):
                continue
            elif names_nothing and servers:
                pending.append(issue_at(decl, ConfigError(problem.message + _PENDING)))
            else:
                errors.append(issue_at(decl, ConfigError(problem.message)))
    loader_dropped = any(d is None for d, _ in issues.skipped)
    for include in manifest.includes:
        if loader_dropped or any(_through(include, d) for d in unknown):
            continue  # its tools are not all known: the problems reported come first
        names = set(issues.names.get(include.where, ()))
        names |= {n for d, n in issues.skipped if n and _through(include, d)}
        found = _include_problems(include, names)
        found += _override_arguments(include, issues.curated)
        if _serves(include, servers):
            pending += [dataclasses.replace(i, message=i.message + _PENDING) for i in found]
        else:
            errors += found
    for server in servers:
        pending += _server_arguments(server, tools)
    return Coverage(errors=tuple(errors), pending=tuple(pending))


def _defensive(text: str) -> bool:
    """A rule that may rightly meet no tool: a glob over names (`git_push*`: whoever defines
    such a tool) or a well-known tool's name (`read(**/.env*)`, `Bash(rm *)`), as a company's
    shared policy writes them for every toolkit that includes it. A literal name of nothing
    known (`reed`, `Bahs`) is a typo."""
    name = text.split("(", 1)[0].strip()
    if name.lower().startswith(MCP_PREFIX):
        return False  # checked against the servers declared, then their tools
    return any(c in name for c in "*?[") or name in WELL_KNOWN


def _stand_ins(issues: Issues) -> list[Tool]:
    """Tools left out for a reported problem, by name, taking any argument."""
    from .base import Tool

    return [
        Tool(name=n, handler=_never, parameters={"type": "object"})
        for _, n in issues.skipped
        if n is not None
    ]


async def _never(arguments: dict[str, Any], ctx: Any) -> Any:
    raise AssertionError("a stand-in for a tool that failed to build is never run")


def _through(include: IncludeDecl, decl: Any) -> bool:
    return any(include.where == step.where for step in decl.include_chain)


def _with_aliases(tools: Sequence[Tool]) -> list[Tool]:
    """The tools, and each under every name it had along its include chain (a rule written
    for a tool before an include prefixed it still applies to it)."""
    out = list(tools)
    for t in tools:
        out += [dataclasses.replace(t, name=a) for a in t.meta.get("aliases", ()) if a != t.name]
    return out


def _server_names(servers: Sequence[ServerDecl]) -> set[str]:
    from .schema import sanitize_name

    return {n for s in servers for n in (s.name.lower(), sanitize_name(s.name).lower())}


def _undeclared_server(text: str, declared: set[str]) -> str | None:
    """The error for a rule in Claude Code's MCP form whose server (written literally) the
    manifest does not declare, else None."""
    name = text.split("(", 1)[0].strip()
    if not name.lower().startswith(MCP_PREFIX):
        return None
    server = name[len(MCP_PREFIX) :].split("__", 1)[0]
    if not server or any(c in server for c in "*?[") or server.lower() in declared:
        return None
    known = sorted(declared)
    listed = f" (declared: {', '.join(known)})" if known else " (it declares none)"
    return (
        f"{text!r} names MCP server {server!r}, which the manifest does not declare"
        f"{did_you_mean(server.lower(), known)}{listed}"
    )


def _include_problems(include: IncludeDecl, names: set[str]) -> list[ManifestIssue]:
    """One issue per `only`/`exclude` glob and `override` of `include` that met no tool."""
    from .manifest import issue_at

    shown = sorted(names)
    what = f"of {include.ref}" if names else f"({include.ref} has no tools)"
    out: list[ManifestIssue] = []
    for key, globs in (("only", include.only), ("exclude", include.exclude)):
        for index, glob in enumerate(globs):
            if not any(fnmatch.fnmatchcase(n, glob) for n in names):
                consequence = "; the include gives no tool" if key == "only" else ""
                error = ConfigError(
                    f"{key} entry {glob!r} matches no tool {what}{consequence}"
                    f"{did_you_mean(glob, shown)}",
                    field=f"{key}[{index}]",
                )
                out.append(issue_at(include, error))
    for override in include.overrides:
        if not any(fnmatch.fnmatchcase(n, override.glob) for n in names):
            error = ConfigError(
                f"override {override.glob!r} matches no tool {what}, so it tightens nothing"
                f"{did_you_mean(override.glob, shown)}"
            )
            out.append(issue_at(override, error))
    return out


def _override_arguments(
    include: IncludeDecl, curated: Mapping[Any, set[str]]
) -> list[ManifestIssue]:
    """One issue per argument an override's glob curates that none of its tools has (a tool
    named exactly reports its own, when it is curated)."""
    from .manifest import issue_at

    out: list[ManifestIssue] = []
    for override in include.overrides:
        met = curated.get(override.where)
        if not override.arguments or met is None or not any(c in override.glob for c in "*?["):
            continue
        for name in override.arguments:
            if name not in met:
                error = ConfigError(
                    f"no tool {override.glob!r} matches has an argument {name!r}"
                    f"{did_you_mean(name, met)} (their arguments: {', '.join(sorted(met))})",
                    field=f"arguments.{name}",
                )
                out.append(issue_at(override, error))
    return out


def _serves(include: IncludeDecl, servers: Sequence[ServerDecl]) -> bool:
    """Whether an MCP server comes through `include` (its tools are known only once it runs)."""
    return any(include.where == step.where for s in servers for step in s.include_chain)


def _server_arguments(server: ServerDecl, tools: Sequence[Tool]) -> list[ManifestIssue]:
    """Pending issues for a server's `approval:` rules naming an argument none of its listed
    tools has (the rule is checked per tool only when the tool has it)."""
    from .manifest import issue_at

    approval = server.spec.get("approval")
    own = [t for t in tools if t.source == "mcp" and t.meta.get("server") == server.name]
    if not isinstance(approval, Mapping) or not own:
        return []
    properties: set[str] = set()
    for t in own:
        properties.update(rules_view(t).parameters.get("properties") or {})
    out: list[ManifestIssue] = []
    for index, rule in enumerate(approval.get("rules") or ()):
        when = rule.get("when") if isinstance(rule, Mapping) else None
        for name, field in _arguments(when, f"approval.rules[{index}].when"):
            if name in properties or name.split(".", 1)[0] in properties:
                continue
            error = ConfigError(
                f"no tool of MCP server {server.name!r} has an argument {name!r}"
                f"{did_you_mean(name, properties)} (their arguments: "
                f"{', '.join(sorted(properties)) or 'none'})",
                field=field,
            )
            out.append(issue_at(server, error))
    return out


def _arguments(when: Any, field: str) -> Iterator[tuple[str, str]]:
    """(argument name, field) for every argument a `when:` clause names, through any/not."""
    if not isinstance(when, Mapping):
        return
    for key, spec in when.items():
        sub = f"{field}.{key}"
        if key == "any" and isinstance(spec, list):
            for i, alternative in enumerate(spec):
                yield from _arguments(alternative, f"{sub}[{i}]")
        elif key == "not":
            yield from _arguments(spec, sub)
        elif isinstance(key, str):
            yield key, sub
