"""The manifest-wide `permissions:` strings: `compile_permissions` and `PermissionRules`.

Strings in the syntax of Claude Code's permission rules (`read`, `shell(git status *)`,
`read(**/.env*)`, `fetch(domain:*.internal)`), applied to each tool's primary argument. Under
doubt they lean the same way as the rules of `approval:` blocks: an allow needs every reading of
the argument to match, a deny or ask only one. Also `split_command` and
`is_known_safe_command`, the public face of the shell reader (`toolnexus.shell`) that command
permissions and `command` matchers use.

Separate because it is a second front end with its own syntax and a per-tool plan cache; it
compiles to the same `_Rule` pairs as `rules` and reuses its helpers.
"""

from __future__ import annotations

import dataclasses
import json
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from .._suggest import did_you_mean
from ..errors import ConfigError
from .decision import Decision, Verdict
from .hosts import _compile_host, _host_matches
from .names import ToolName, compile_tool_name, suggestions
from .paths import _glob_regex, _path_matches, _PathPattern, _permission_path_pattern
from .rules import (
    _MISSING,
    Locate,
    _always,
    _decision,
    _default_verdict,
    _getter,
    _nowhere,
    _Rule,
    _Test,
    _with_caller,
)

if TYPE_CHECKING:
    from ..base import Tool

__all__ = ["PermissionRules", "compile_permissions", "is_known_safe_command", "split_command"]


_PERMISSION = re.compile(r"\s*([A-Za-z0-9_*?\[\]!-]+)\s*(?:\((.*)\))?\s*", re.DOTALL)
_PARAM_SPEC = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*):(.*)", re.DOTALL)
_PRIMARY_NAMES = ("command", "path", "file_path", "url", "pattern")
_PrimaryKind = Literal["command", "path", "paths", "url", "text"]
PathsOf = Callable[[Any], Sequence[str] | None]
"""`tool.meta["paths_of"]` for a primary argument of kind `paths` (a patch): the files a value
touches, or None when they cannot be read from it."""


def _primary_kind(name: str) -> _PrimaryKind:
    lowered = name.lower()
    if lowered in ("command", "cmd", "script"):
        return "command"
    if lowered in ("url", "uri") or lowered.endswith("_url"):
        return "url"
    if lowered in ("path", "file", "filename", "dir", "directory", "cwd") or lowered.endswith(
        ("_path", "_file", "_dir")
    ):
        return "path"
    return "text"


@dataclass(frozen=True, slots=True)
class _Permission:
    """One `Name(spec)` string, compiled for every kind of primary argument it may meet."""

    decision: Decision
    text: str
    field: str
    """Where the string sits in `permissions` (`deny[2]`)."""
    name: ToolName
    bare: bool
    verdict: Verdict
    spec: str = ""
    """The text between the parentheses (command patterns compile when a tool needs one)."""
    path: _PathPattern | None = None
    host: Callable[[str], bool] | None = None
    glob: re.Pattern[str] | None = None
    param: tuple[str, re.Pattern[str]] | None = None
    primary_form: tuple[str, _Permission] | None = None
    """(param, `Name(value)`) of a `Name(param:value)`: used when `param` is the tool's primary
    argument, so the value is read as that argument is (a command, a path, a URL)."""
    caller: Any = None
    """The `caller:` condition of a `{rule, caller}` item (a mapping, compiled with the rest),
    or None: the rule holds for every caller, and for calls with none."""

    def for_tool(
        self,
        properties: Mapping[str, Any],
        primary: tuple[str, _PrimaryKind] | None,
        paths_of: PathsOf | None = None,
    ) -> _Test | None:
        """The condition this rule puts on calls of one tool (None: it never applies)."""
        if self.bare:
            return _always
        strict = self.decision is Decision.ALLOW
        form = self.primary_form
        if form is not None and primary is not None and form[0] == primary[0]:
            return form[1].for_tool(properties, primary, paths_of)
        if self.param is not None and not strict:
            param, value = self.param
            if param in properties and (primary is None or param != primary[0]):
                return _param_test(param, value)
        if primary is None:
            return None
        name, kind = primary
        get = _getter(name)
        if kind == "command":
            from ..shell import command_matches, compile_command_pattern

            patterns = [compile_command_pattern(self.spec)]
            return lambda args, ws: (
                isinstance(v := get(args), str) and command_matches(v, patterns, strict=strict)
            )
        if kind == "path" and self.path is not None:
            paths = [self.path]
            return lambda args, ws: (
                isinstance(v := get(args), str) and _path_matches(paths, v, ws, strict)
            )
        if kind == "paths" and self.path is not None and paths_of is not None:
            return _paths_test(get, paths_of, [self.path], strict)
        if kind == "url" and self.host is not None:
            hosts = [self.host]
            return lambda args, ws: (
                isinstance(v := get(args), str) and _host_matches(hosts, v, strict)
            )
        glob = self.glob
        if glob is None:
            return None
        return lambda args, ws: isinstance(v := get(args), str) and glob.fullmatch(v) is not None

    def unknown_argument(self, tools: Sequence[Tool]) -> ConfigError | None:
        """The error for a deny or ask `Name(param:value)` whose `param` is an argument of none
        of `tools` (the tools it covers), unless the spec reads as something else for them: a
        path or URL with a colon, or a legacy `cmd:*` command prefix."""
        if self.param is None or self.decision is Decision.ALLOW:
            return None
        param = self.param[0]
        names: set[str] = set()
        for t in tools:
            properties = t.parameters.get("properties") or {}
            names.update(properties)
            open_ended = "properties" not in t.parameters
            if param in properties or (
                open_ended and t.parameters.get("additionalProperties") is not False
            ):
                return None
            kind = _primary_of(t)
            if kind is not None and kind[1] in ("path", "paths", "url"):
                return None
            if kind is not None and kind[1] == "command" and self.spec.endswith(":*"):
                return None
        listed = f" (its arguments: {', '.join(sorted(names))})" if names else ""
        return ConfigError(
            f"{self.text!r}: no tool it names has an argument {param!r}"
            f"{did_you_mean(param, names)}{listed}",
            field=self.field,
        )


async def _never(arguments: dict[str, Any], ctx: Any) -> Any:
    """The handler of the stand-ins `unmatched` makes for bare names; never called."""
    raise AssertionError("a stand-in tool for a name is never run")


def _primary_of(tool: Tool) -> tuple[str, _PrimaryKind] | None:
    """The tool's primary argument and its kind (see `PermissionRules`)."""
    properties = tool.parameters.get("properties") or {}
    name = tool.meta.get("primary_argument") if tool.meta else None
    if not name:
        name = next((n for n in _PRIMARY_NAMES if n in properties), None)
    if not name:
        return None
    kind = tool.meta.get("primary_kind") if tool.meta else None
    return name, kind or _primary_kind(name)


def _paths_test(
    get: Callable[[Mapping[str, Any]], Any],
    paths_of: PathsOf,
    patterns: list[_PathPattern],
    strict: bool,
) -> _Test:
    """A path rule over every file a value touches (the paths of a patch): an allow needs
    each of them to match, a deny or ask one; a value whose paths cannot be read matches
    every deny and ask and no allow (doubt never allows)."""

    def test(args: Mapping[str, Any], ws: Path) -> bool:
        value = get(args)
        paths = None if value is _MISSING else paths_of(value)
        if not paths:
            return not strict
        seen = (_path_matches(patterns, p, ws, strict) for p in paths)
        return all(seen) if strict else any(seen)

    return test


def _param_test(param: str, value: re.Pattern[str]) -> _Test:
    def test(args: Mapping[str, Any], ws: Path) -> bool:
        v = args.get(param, _MISSING)
        if v is _MISSING or isinstance(v, list | dict):
            return False
        text = v if isinstance(v, str) else json.dumps(v)
        return value.fullmatch(text) is not None

    return test


_Plan = tuple[_Rule, ...]


class PermissionRules:
    """Manifest-wide `permissions:` compiled by `compile_permissions`: an `ApprovalPolicy`.

    Each string is `Name` or `Name(spec)`, in the syntax of Claude Code's permission rules.
    `Name` is a tool-name glob (case-insensitive); `spec` applies to the tool's *primary
    argument*: `tool.meta["primary_argument"]` when set (its kind guessed from its name, or
    `tool.meta["primary_kind"]`: command, path, url or text), else the first of `command`,
    `path`, `file_path`, `url`, `pattern` among the schema's properties.

    - command: a command pattern (`git status *`, legacy `npm run test:*`), matched like the
      `command` matcher of `compile_rules`.
    - path: gitignore-style: `//abs/path` absolute, `~/x` in the home folder, `/x` and `./x`
      relative to the workspace, a bare name (`.env*`) or `**/x` at any depth (anywhere for
      deny/ask, inside the workspace for allow), `a/b` relative to the workspace; a match
      covers everything beneath.
    - url: `domain:host-glob` (`domain:*.example.com`) or a glob of the whole URL.
    - text (any other primary argument): a glob of the whole value.
    - `param:value` (deny and ask only, as in Claude Code): a glob over any other top-level
      argument's JSON scalar, e.g. `shell(run_in_background:true)`. Naming the primary
      argument itself (`mcp__srv__echo(text:rm*)`) is the same as `Name(value)`.

    `Name` alone or `Name(*)` covers every call; as a deny it hides the tool (`hidden`).
    An item may also be `{rule: "Name(spec)", caller: {groups: [ops]}}`: the rule holds only
    for calls of a matching caller (see `toolnexus.approval.access`), never without one.

    Evaluation: deny, then ask, then allow; the first match wins. No match: the default,
    `matched=False`.
    """

    def __init__(self, rules: Sequence[_Permission], default: Verdict) -> None:
        order = {Decision.DENY: 0, Decision.ASK: 1, Decision.ALLOW: 2}
        self._rules = tuple(sorted(rules, key=lambda r: order[r.decision]))
        self._default = default
        self._plans: dict[int, tuple[weakref.ref[Tool], _Plan]] = {}

    @property
    def default(self) -> Verdict:
        return self._default

    @property
    def rules(self) -> tuple[str, ...]:
        """The rules in evaluation order, as written (`deny read(**/.env*)`)."""
        return tuple(r.verdict.rule or "" for r in self._rules)

    def __repr__(self) -> str:
        return f"PermissionRules({list(self.rules)!r}, default={self._default.decision.value})"

    def summary(self) -> str:
        return f"{self._default.decision.value}, {len(self._rules)} permission rules"

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        for test, verdict in self._plan(tool):
            if test(arguments, workspace):
                return verdict
        return self._default

    def hidden(self, tool: Tool) -> bool:
        """True when a bare deny (`Name` or `Name(*)`) covers the tool: drop it from listings."""
        return any(
            r.bare and r.caller is None and r.decision is Decision.DENY and r.name.matches(tool)
            for r in self._rules
        )

    def unmatched(self, tools: Iterable[Tool | str]) -> list[ConfigError]:
        """One error per rule that would never apply to `tools` (tools, or bare names): its
        name covers none of them (a typo makes a deny rule silently useless), or its
        `param:value` names an argument none of the tools it covers has. The builder decides
        whether to raise or warn. In the order the rules are evaluated."""
        from ..base import Tool

        known = [t if isinstance(t, Tool) else Tool(name=t, handler=_never) for t in tools]
        choices = suggestions(known)
        problems = []
        for rule in self._rules:
            covered = [t for t in known if rule.name.matches(t)]
            if not covered:
                name = rule.name.written
                problems.append(
                    ConfigError(
                        f"{rule.text!r} names no tool{did_you_mean(name, choices)}",
                        field=rule.field,
                    )
                )
            elif (problem := rule.unknown_argument(covered)) is not None:
                problems.append(problem)
        return problems

    def _plan(self, tool: Tool) -> _Plan:
        key = id(tool)
        entry = self._plans.get(key)
        if entry is not None and entry[0]() is tool:
            return entry[1]
        plan = self._build_plan(tool)
        plans = self._plans
        ref = weakref.ref(tool, lambda _ref: plans.pop(key, None))
        plans[key] = (ref, plan)
        return plan

    def _build_plan(self, tool: Tool) -> _Plan:
        properties = tool.parameters.get("properties") or {}
        primary = _primary_of(tool)
        paths_of = tool.meta.get("paths_of") if tool.meta else None
        plan: list[_Rule] = []
        for rule in self._rules:
            if rule.name.matches(tool):
                reader = cast("PathsOf", paths_of) if callable(paths_of) else None
                test = rule.for_tool(properties, primary, reader)
                if test is not None and rule.caller is not None:
                    test = _with_caller(test, rule.caller, rule.field)[0]
                if test is not None:
                    plan.append((test, rule.verdict))
        return tuple(plan)


def compile_permissions(
    allow: Sequence[str | Mapping[str, Any]] = (),
    ask: Sequence[str | Mapping[str, Any]] = (),
    deny: Sequence[str | Mapping[str, Any]] = (),
    *,
    locate: Locate | None = None,
    default: Decision | str = Decision.ALLOW,
) -> PermissionRules:
    """Compile manifest-wide permission strings (`read`, `shell(git status *)`,
    `read(**/.env*)`, `fetch(domain:*.internal)`, `mcp_time_*`) into a `PermissionRules`.

    Args:
        allow, ask, deny: The strings of each list (see `PermissionRules` for the syntax).
        locate: Gives `file:line` for `deny[2]`-style field paths, carried by the verdicts.
        default: The decision when no rule applies (the manifest's `defaults.approval`).

    Raises:
        ConfigError: with `field` such as `deny[2]`.
    """
    where = locate or _nowhere
    rules: list[_Permission] = []
    for decision, items in ((Decision.ALLOW, allow), (Decision.ASK, ask), (Decision.DENY, deny)):
        key = decision.value
        if isinstance(items, str) or not isinstance(items, Sequence):
            raise ConfigError(
                f'expected a list of rule strings such as "read(src/**)", got {items!r}',
                field=key,
            )
        for index, text in enumerate(items):
            field = f"{key}[{index}]"
            rules.append(_compile_permission(decision, text, field, where(field)))
    base = _default_verdict(_decision(default, "default"), None)
    return PermissionRules(rules, base)


def _compile_permission(
    decision: Decision, text: Any, field: str, origin: str | None
) -> _Permission:
    if isinstance(text, Mapping):
        return _compile_conditional(decision, cast("Mapping[str, Any]", text), field, origin)
    if not isinstance(text, str):
        raise ConfigError(
            f'expected a rule string such as "read(src/**)", got {text!r}', field=field
        )
    m = _PERMISSION.fullmatch(text)
    if m is None:
        raise ConfigError(
            f"cannot read {text!r}: expected `Name` or `Name(spec)`, where Name is a tool name "
            "or a glob of tool names (letters, digits, _, -, *)",
            field=field,
        )
    name_glob, spec = m.group(1), m.group(2)
    name = compile_tool_name(name_glob, allow=decision is Decision.ALLOW, field=field)
    written = f"{decision} {text.strip()}"
    verdict = Verdict(decision=decision, rule=written, origin=origin)
    if spec is None or spec.strip() == "*":
        return _Permission(
            decision=decision, text=text, field=field, name=name, bare=True, verdict=verdict
        )
    spec = spec.strip()
    if not spec:
        raise ConfigError(
            f"empty specifier in {text!r}: write `{name_glob}` (or `{name_glob}(*)`) for every "
            "call, or put a pattern between the parentheses",
            field=field,
        )
    host = None
    if spec.startswith("domain:"):
        host = _compile_host(spec.removeprefix("domain:"), field)
    param_match = _PARAM_SPEC.fullmatch(spec)
    param = None
    primary_form = None
    if param_match is not None and param_match.group(1) != "domain":
        value = re.compile(_glob_regex(param_match.group(2), segments=False), re.DOTALL)
        param = (param_match.group(1), value)
        if param_match.group(2).strip():
            inner = _compile_permission(
                decision, f"{name_glob}({param_match.group(2)})", field, origin
            )
            inner = dataclasses.replace(inner, text=text, verdict=verdict)
            primary_form = (param_match.group(1), inner)
    return _Permission(
        decision=decision,
        text=text,
        field=field,
        name=name,
        bare=False,
        verdict=verdict,
        spec=spec,
        path=None if host else _permission_path_pattern(spec),
        host=host,
        glob=None if host else re.compile(_glob_regex(spec, segments=False), re.DOTALL),
        param=param,
        primary_form=primary_form,
    )


_ITEM_KEYS = ("rule", "caller")


def _compile_conditional(
    decision: Decision, item: Mapping[str, Any], field: str, origin: str | None
) -> _Permission:
    """`{rule: "deploy", caller: {groups: [dev]}}`: a rule that holds for some callers only."""
    from .access import compile_caller

    for key in item:
        if key not in _ITEM_KEYS:
            raise ConfigError(
                f"unknown key {key!r}; expected rule and caller"
                f"{did_you_mean(str(key), _ITEM_KEYS)}",
                field=f"{field}.{key}",
            )
    if "rule" not in item or "caller" not in item:
        missing = "rule" if "rule" not in item else "caller"
        raise ConfigError(
            f'missing `{missing}`: write {{rule: "Name(spec)", caller: {{groups: [...]}}}}',
            field=field,
        )
    who = compile_caller(item["caller"], f"{field}.caller")
    inner = _compile_permission(decision, item["rule"], field, origin)
    written = f"{decision} {inner.text.strip()} for callers with {who.describe()}"
    verdict = Verdict(decision=decision, rule=written, origin=origin)
    return dataclasses.replace(inner, verdict=verdict, caller=item["caller"])


def split_command(command: str) -> list[list[str]] | None:
    """Split a shell command line into its simple commands, as lists of words.

    Splits on `&&`, `||`, `;`, `|`, `|&`, `&` and newlines; removes quotes; drops comments and
    redirections. Returns None when the command uses a construct that cannot be read statically
    (command or process substitution, backticks, subshells, unbalanced quotes, an unterminated
    here-document): such a command must never be approved automatically.

    >>> split_command("git status && ls -la 'my dir' | wc -l")
    [['git', 'status'], ['ls', '-la', 'my dir'], ['wc', '-l']]
    """
    from ..shell import split_command as split

    return split(command)


def is_known_safe_command(command: str) -> bool:
    """True when `command` only reads: every simple command is on the built-in read-only list
    (`ls cat head tail wc grep rg find sed -n sort uniq git status|diff|log|show|branch ...`)
    with only options it understands and allows (not `find -exec/-delete/-fprint`,
    `rg --pre/-z`, `sort -o`, `git diff --output`, `git branch -D`...), and nothing is
    redirected but to /dev/null, a descriptor, or from a here-document.

    The builtin shell tool runs such commands without asking. Anything not fully understood
    (substitutions, subshells, unbalanced quotes, unknown options, expansions in operands) is
    not known-safe. Wrappers (`timeout`, `nice`, `env`, `LANG=C cmd`, `bash -c`, `eval`,
    `xargs`...) are not looked past: a wrapped command is not known-safe and gets asked.
    """
    from ..shell import is_known_safe_command as known_safe

    return known_safe(command)
