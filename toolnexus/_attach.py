"""How a manifest's guard rails attach to a tool: approval rules (a tool's own, an include's
stricter override, the toolkit-wide permissions seen through every name a tool had), its
effective sandbox, and its middleware stack. `build.py` decides what to build; this module
decides how each built tool is governed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, cast

from .approval import (
    AccessRules,
    ApprovalPolicy,
    Decision,
    PermissionRules,
    Verdict,
    combine_verdicts,
    compile_permissions,
    compile_rules,
)
from .approval.access import AccessEntry, compile_entry
from .base import Tool
from .errors import ConfigError, ManifestIssue, manifest_error
from .middleware import Middleware, from_config, timeout
from .runtime.sandbox import SandboxPolicy

if TYPE_CHECKING:
    from .manifest import Manifest, MiddlewareDecl

__all__ = [
    "AccessSites",
    "AliasAware",
    "Issues",
    "ManifestRules",
    "attach",
    "effective_sandbox",
    "inline_middleware",
    "is_hidden",
    "manifest_access",
    "manifest_middleware",
    "manifest_permissions",
    "policy_summary",
]


class Issues:
    """Collects located problems so that a manifest reports all of them at once, and the tool
    names each include's filters met (see `apply_include_chain`), so that a filter or
    override that met none is reported too."""

    def __init__(self) -> None:
        self.items: list[ManifestIssue] = []
        self.names: dict[Any, set[str]] = {}
        self.skipped: list[tuple[Any, str | None]] = []
        """(declaration, tool name or None when unknown) of each tool left out for a problem
        already reported: a rule naming it is not a second mistake."""
        self.curated: dict[Any, set[str]] = {}
        """Per include override with `arguments` (by where it is written), the arguments of
        the tools its glob met: an argument none of them has is a mistake the builder reports."""

    def add(self, decl: Any, error: ConfigError, *, kind: str = "schema") -> None:
        from .manifest import issue_at

        issue = issue_at(decl, error)
        self.items.append(dataclasses.replace(issue, kind=kind))

    def raise_if_any(self) -> None:
        if self.items:
            raise manifest_error(self.items)


def inline_middleware(items: Any, decl: Any) -> tuple[Any, ...]:
    """A tool's own `middleware:` items as `MiddlewareDecl`-like tuples (name/use, options)."""
    if not items:
        return ()
    out = []
    for index, item in enumerate(items):
        out.append(InlineMiddleware(item=item, decl=decl, index=index))
    return tuple(out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class InlineMiddleware:
    """A middleware item written inside a tool entry (the loader keeps it as plain data)."""

    item: Any
    decl: Any
    index: int


def attach(
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
    issues: Issues,
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
        policy = fixed if policy is None else Both(policy, fixed)
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
        policy = compiled if policy is None else Both(policy, compiled)
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
        try:
            chain.append(timeout(timeout_s))
        except ConfigError as exc:
            raise ConfigError(exc.message, field="timeout") from exc
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
        policy = stricter if policy is None else Both(policy, stricter)
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


class Both:
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
        return " + ".join(policy_summary(p) for p in (self.first, self.second))


class _Summarised(Protocol):
    """A policy that describes itself for listings: optional, `ApprovalPolicy` needs only
    `decide`, so user policies may leave it out."""

    def summary(self) -> str: ...


def _has_summary(policy: object) -> TypeGuard[_Summarised]:
    return callable(getattr(policy, "summary", None))


def policy_summary(policy: object) -> str:
    """`ask, 2 rules`: the policy's own `summary()`, or its class name when it has none."""
    return policy.summary() if _has_summary(policy) else type(policy).__name__


def is_hidden(policy: ApprovalPolicy | None, t: Tool) -> bool:
    """True when a bare deny (`deny: [name]`) removes the tool from the listing altogether,
    under its own name or one it had before an include prefixed it."""
    if isinstance(policy, AliasAware):
        return any(is_hidden(policy.policy, alias) for alias in policy.names_of(t))
    if isinstance(policy, PermissionRules):
        return policy.hidden(t)
    if isinstance(policy, Both):
        return is_hidden(policy.first, t) or is_hidden(policy.second, t)
    return False


class AliasAware:
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
        # The bare name of a `.mcp.json` tool namespaced for a clash (`mcp.namespace`) names
        # several tools (other servers', or the manifest's own): it may restrict this one,
        # never allow it.
        bare = tool.meta.get("namespaced_from")
        verdicts: list[Verdict] = []
        for t in self.names_of(tool):
            verdict = self.policy.decide(t, arguments, workspace)
            if t is not tool and t.name == bare and verdict.decision is Decision.ALLOW:
                continue
            verdicts.append(verdict)
        return combine_verdicts(verdicts)

    def summary(self) -> str:
        return policy_summary(self.policy)


def effective_sandbox(
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


def manifest_middleware(decls: Sequence[MiddlewareDecl], issues: Issues) -> list[Middleware]:
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
    if isinstance(item, InlineMiddleware):
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
    # Only callability can be checked here; the signature is the user's promise, as for any
    # middleware passed in code.
    return cast(Middleware, made)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ManifestRules:
    """The manifest's `permissions:` compiled, and where each rule is written (for the check
    that every rule applies to some tool)."""

    rules: PermissionRules
    sites: Mapping[str, Any]
    """Field (`deny[2]`) -> its `PermissionDecl`."""


def manifest_access(manifest: Manifest | None, issues: Issues) -> AccessSites | None:
    """The `access:` entries of the manifest and its includes, compiled (None without any);
    each bad entry is reported where it is written."""
    if manifest is None or not manifest.access:
        return None
    entries: list[AccessEntry] = []
    sites: dict[int, Any] = {}
    for decl in manifest.access:
        try:
            entry = compile_entry(
                decl.entry, scope=decl.scope, field="", origin=lambda f, d=decl: str(d.where)
            )
        except ConfigError as exc:
            issues.add(decl, ConfigError(exc.message, field=exc.field))
            continue
        sites[id(entry)] = decl
        entries.append(entry)
    return AccessSites(rules=AccessRules(entries), sites=sites)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccessSites:
    """The compiled `access:` entries and, per entry (by id), its `AccessDecl`."""

    rules: AccessRules
    sites: Mapping[int, Any]


def manifest_permissions(
    manifest: Manifest | None, extra: ApprovalPolicy | None, issues: Issues
) -> tuple[ApprovalPolicy | None, ManifestRules | None]:
    """The toolkit-wide policy (the manifest's `permissions:` with `extra`, the policy given in
    code) and the manifest's compiled rules, if it has any."""
    if manifest is None:
        return extra, None
    lists: dict[str, list[Any]] = {"allow": [], "ask": [], "deny": []}
    where: dict[str, Any] = {}
    for decl in manifest.permissions:
        item: Any = decl.text
        if decl.caller is not None:
            item = {"rule": decl.text, "caller": decl.caller}
        try:  # each alone first, so that every bad rule is reported, not only the first
            alone: dict[str, list[Any]] = {"allow": [], "ask": [], "deny": []}
            alone[decl.decision] = [item]
            compile_permissions(alone["allow"], alone["ask"], alone["deny"])
        except ConfigError as exc:
            issues.add(decl, ConfigError(exc.message))
            continue
        where[f"{decl.decision}[{len(lists[decl.decision])}]"] = decl
        lists[decl.decision].append(item)
    default = manifest.defaults.approval
    if not any(lists.values()) and default in (None, "allow"):
        return extra, None
    compiled = compile_permissions(
        lists["allow"],
        lists["ask"],
        lists["deny"],
        locate=lambda f: str(where[f].where) if f in where else None,
        default=default or "allow",
    )
    policy: ApprovalPolicy = compiled if extra is None else Both(extra, compiled)
    return policy, ManifestRules(rules=compiled, sites=where)
