"""Approval: decide allow | ask | deny for a call from its tool and arguments.

The executor asks every policy that applies (the toolkit-wide permissions, then the tool's own
rules) and keeps the strongest decision: deny beats ask beats allow. A decision carries the rule
that made it, so audit logs and approvers can show *why*. `ask` goes to the `Approver`; with no
approver configured it is refused (fail closed), and so is any policy or approver that crashes.

Two front ends compile to policies: `compile_rules` for a tool's `approval:` block (matchers
over named arguments) and `compile_permissions` for the manifest-wide `permissions:` strings
(`read(**/.env*)`). Both lean the same way under doubt: a rule that would *allow* a call
needs every reading of an argument to match (the path as written and its symlink target,
every sub-command of a shell line), a rule that would *deny* or *ask* needs only one.
Everything is compiled up front; `decide` touches the disk only for `path` matchers.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import re
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ._suggest import did_you_mean
from .errors import ConfigError

if TYPE_CHECKING:
    from .base import Tool

__all__ = [
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRules",
    "Approver",
    "Decision",
    "PermissionRules",
    "Verdict",
    "combine_verdicts",
    "compile_permissions",
    "compile_rules",
    "is_known_safe_command",
    "split_command",
]


class Decision(enum.StrEnum):
    """What to do with a call. Ordered by strength: ALLOW < ASK < DENY."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"

    @property
    def strength(self) -> int:
        return _STRENGTH[self]


_STRENGTH = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A decision and the rule that made it."""

    decision: Decision
    rule: str | None = None
    """The rule in its written form, e.g. `deny read(**/.env*)`; None for a default."""
    origin: str | None = None
    """Where the rule was written (`tools.yaml:14`), for audit logs and approval prompts."""
    reason: str = ""
    """A sentence for the model or the approver: why this decision."""
    matched: bool = True
    """False when no rule matched and this is the policy's default."""

    def describe(self) -> str:
        """`deny by rule 'read(**/.env*)' (tools.yaml:14)`-style text."""
        text = self.decision.value
        if self.rule:
            text += f" by rule {self.rule!r}"
        if self.origin:
            text += f" ({self.origin})"
        if self.reason:
            text += f": {self.reason}"
        return text


ALLOW_BY_DEFAULT = Verdict(decision=Decision.ALLOW, matched=False, reason="no rule applies")


class ApprovalPolicy(Protocol):
    """Anything that can decide on a call. Must be cheap and must not do I/O beyond `stat`."""

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict: ...


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """What an approver is shown: the call and the rule that asked."""

    tool: Tool
    arguments: Mapping[str, Any]
    verdict: Verdict
    call_id: str


Approver = Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""Says yes (True) or no (False) to a call a rule marked `ask`; sync or async."""


def combine_verdicts(verdicts: Sequence[Verdict]) -> Verdict:
    """The strongest matched verdict; if none matched, the last default (the most specific).

    Policies are passed general first (toolkit permissions) and specific last (the tool's own
    rules), so a tool's `default:` beats the toolkit's when no rule matched anywhere.
    """
    best: Verdict | None = None
    for verdict in verdicts:
        if verdict.matched and (best is None or verdict.decision.strength > best.decision.strength):
            best = verdict
    if best is not None:
        return best
    for verdict in reversed(verdicts):
        return verdict
    return ALLOW_BY_DEFAULT


# --- the rule language ----------------------------------------------------------------------

Locate = Callable[[str], str | None]
"""Maps a field path of the approval block (`rules[1]`, `deny[2]`, `default`) to `file:line`."""

_Test = Callable[[Mapping[str, Any], Path], bool]
"""A compiled condition over (arguments, workspace)."""
_ValueTest = Callable[[Any, Path], bool]
"""A compiled condition over one argument's value."""

_MISSING: Any = object()
_DECISIONS = ("allow", "ask", "deny")
_MATCHERS = (
    "eq", "in", "glob", "regex", "prefix", "gt", "gte", "lt", "lte",
    "path", "host", "command", "exists", "any", "not",
)  # fmt: skip
_RULE_KEYS = ("decision", "when", "reason")
_SPEC_KEYS = ("default", "rules")


def _decision(value: Any, field: str) -> Decision:
    if isinstance(value, Decision):
        return value
    if isinstance(value, str) and value in _DECISIONS:
        return Decision(value)
    hint = did_you_mean(value, _DECISIONS) if isinstance(value, str) else ""
    raise ConfigError(f"expected one of allow, ask, deny, got {value!r}{hint}", field=field)


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


_Rule = tuple[_Test, Verdict]
"""A compiled rule: its condition and the verdict it gives when the condition holds."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRules:
    """A tool's compiled `approval:` block: an `ApprovalPolicy` made by `compile_rules`.

    `decide` tries the deny rules, then the ask rules, then the allow rules, each kind in the
    order written, and returns the verdict of the first that matches (the strongest kind wins
    whatever its specificity); when none does, the default with `matched=False`.
    """

    default: Verdict
    """What to do when no rule matches."""
    rules: tuple[_Rule, ...] = ()
    """The compiled rules, deny first, then ask, then allow."""

    def decide(self, tool: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        for test, verdict in self.rules:
            if test(arguments, workspace):
                return verdict
        return self.default

    def summary(self) -> str:
        """`ask, 2 rules`: a short description for listings."""
        count = len(self.rules)
        if not count:
            return self.default.decision.value
        return f"{self.default.decision.value}, {count} rule{'s' if count > 1 else ''}"


def compile_rules(
    spec: str | Decision | Mapping[str, Any],
    *,
    locate: Locate | None = None,
    default: Decision | str = Decision.ALLOW,
    parameters: Mapping[str, Any] | None = None,
) -> ApprovalRules:
    """Compile a tool's `approval:` value into an `ApprovalRules` policy.

    `spec` is `allow`, `ask`, `deny`, or `{default: ..., rules: [{decision, when, reason}]}`.
    `when` maps argument names (dotted for nested values: `options.mode`) to matchers; every
    entry must hold, `any: [when, ...]` holds when one alternative does, `not: when` inverts.
    A matcher is a scalar (equality) or a mapping of one or more of:

    - `eq`, `in`: JSON equality (`true` is not `1`).
    - `glob`: shell-style wildcards over the whole string; `*` spans `/` too.
    - `regex`: Python regex, *searched* like JSON Schema's `pattern`: anchor it with `^...$`
      to match the whole value.
    - `prefix`: `str.startswith`.
    - `gt`, `gte`, `lt`, `lte`: numbers (a non-number never matches).
    - `path`: glob over the argument taken as a path: resolved against the workspace with `..`
      and symlinks followed. Relative patterns are relative to the workspace, absolute ones
      absolute, `~/` is the home folder; `*` stays inside one path segment, `**` spans any
      number, and `dir/**` also matches `dir` itself. An allow rule needs both the written
      path and its symlink-resolved target to match; a deny or ask rule needs either.
    - `host`: the host of a URL argument: `example.com`, `*.example.com` (subdomains, not the
      apex), `*`; case-insensitive, IDNA-normalised. A URL whose host cannot be read for sure
      never matches an allow rule and always matches a deny or ask rule.
    - `command`: a shell command pattern (`git status *`: `*` spans anything, and a trailing
      ` *` also matches nothing, at a word boundary) applied to each sub-command of `&&`,
      `||`, `;`, `|`, `&` and newlines, past wrappers such as `timeout`, `nice`, `env VAR=..`.
      In an allow rule *every* sub-command must match and a command that cannot be read
      statically (`$(...)`, backticks, unbalanced quotes) never does; in a deny or ask rule
      *any* sub-command matching is enough, including those inside substitutions.
    - `exists`: `true`/`false`. Otherwise a missing argument never matches.
    - `any: [matcher, ...]`, `not: matcher`.

    glob, regex, prefix, path, host and command also take a list: any item may match.

    Args:
        spec: The approval value.
        locate: Gives `file:line` for a field path (`rules[1]`, `default`, `""` for the block
            itself), so verdicts carry where their rule was written.
        default: The decision when `spec` is a mapping without `default` (the manifest's
            `defaults.approval`).
        parameters: The tool's JSON Schema: when given, `when` may only name its properties.

    Raises:
        ConfigError: with `field` relative to the block (`rules[1].when.path.glob`).
    """
    where = locate or _nowhere
    if isinstance(spec, str | Decision):
        decision = _decision(spec, "")
        return ApprovalRules(default=_default_verdict(decision, where("")))
    if not isinstance(spec, Mapping):
        raise ConfigError(
            "expected allow, ask, deny or a mapping {default: ..., rules: [...]}, "
            f"got {type(spec).__name__}"
        )
    for key in spec:
        if key not in _SPEC_KEYS:
            raise ConfigError(
                f"unknown key {key!r}; expected default and rules"
                f"{did_you_mean(str(key), _SPEC_KEYS)}",
                field=str(key),
            )
    if "default" in spec:
        base = _default_verdict(_decision(spec["default"], "default"), where("default"))
    else:
        base = _default_verdict(_decision(default, "default"), None)
    rules = spec.get("rules", [])
    if not isinstance(rules, list):
        raise ConfigError(f"expected a list of rules, got {type(rules).__name__}", field="rules")
    properties = _properties(parameters)
    compiled: dict[Decision, list[_Rule]] = {d: [] for d in Decision}
    for index, rule in enumerate(rules):
        field = f"rules[{index}]"
        decision, test, written, reason = _compile_rule(rule, field, properties)
        verdict = Verdict(decision=decision, rule=written, origin=where(field), reason=reason)
        compiled[decision].append((test, verdict))
    ordered = (*compiled[Decision.DENY], *compiled[Decision.ASK], *compiled[Decision.ALLOW])
    return ApprovalRules(default=base, rules=ordered)


def _nowhere(field: str) -> str | None:
    return None


def _default_verdict(decision: Decision, origin: str | None) -> Verdict:
    return Verdict(
        decision=decision, origin=origin, matched=False, reason=f"no rule matched; {decision}"
    )


def _properties(parameters: Mapping[str, Any] | None) -> frozenset[str] | None:
    if parameters is None:
        return None
    props = parameters.get("properties")
    return frozenset(props) if isinstance(props, Mapping) and props else None


def _compile_rule(
    rule: Any, field: str, properties: frozenset[str] | None
) -> tuple[Decision, _Test, str, str]:
    if not isinstance(rule, Mapping):
        raise ConfigError(
            f"expected a rule {{decision: ..., when: {{...}}}}, got {type(rule).__name__}",
            field=field,
        )
    for key in rule:
        if key not in _RULE_KEYS:
            raise ConfigError(
                f"unknown key {key!r}; expected decision, when and reason"
                f"{did_you_mean(str(key), _RULE_KEYS)}",
                field=_join(field, str(key)),
            )
    if "decision" not in rule:
        raise ConfigError("missing `decision` (allow, ask or deny)", field=field)
    decision = _decision(rule["decision"], _join(field, "decision"))
    reason = rule.get("reason", "")
    if not isinstance(reason, str):
        raise ConfigError(
            f"expected a sentence, got {type(reason).__name__}", field=_join(field, "reason")
        )
    strict = decision is Decision.ALLOW
    if "when" in rule:
        when = rule["when"]
        test = _compile_when(when, _join(field, "when"), strict, properties)
        written = f"{decision} when {json.dumps(when, ensure_ascii=False, default=str)}"
    else:
        test = _always
        written = f"{decision} always"
    return decision, test, written, reason


def _always(arguments: Mapping[str, Any], workspace: Path) -> bool:
    return True


def _compile_when(when: Any, field: str, strict: bool, properties: frozenset[str] | None) -> _Test:
    """`strict` is True where a match makes the call *more* permitted (an allow rule, or a
    deny rule under one `not`): there, doubt means no match."""
    if not isinstance(when, Mapping) or not when:
        raise ConfigError(
            "expected a non-empty mapping of argument names to matchers, "
            f"e.g. {{path: {{glob: 'src/**'}}}}, got {when!r}",
            field=field,
        )
    tests: list[_Test] = []
    for key, spec in when.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"expected an argument name, got {key!r}", field=field)
        sub = _join(field, key)
        if key == "any":
            if not isinstance(spec, list) or not spec:
                raise ConfigError("expected a non-empty list of alternatives", field=sub)
            alternatives = [
                _compile_when(alt, f"{sub}[{i}]", strict, properties) for i, alt in enumerate(spec)
            ]
            tests.append(_any_of(alternatives))
        elif key == "not":
            tests.append(_negate(_compile_when(spec, sub, not strict, properties)))
        else:
            _check_argument_name(key, properties, sub)
            tests.append(_compile_argument(key, spec, sub, strict))
    return tests[0] if len(tests) == 1 else _all_of(tests)


def _any_of(tests: Sequence[_Test]) -> _Test:
    return lambda args, ws: any(t(args, ws) for t in tests)


def _all_of(tests: Sequence[_Test]) -> _Test:
    return lambda args, ws: all(t(args, ws) for t in tests)


def _negate(test: _Test) -> _Test:
    return lambda args, ws: not test(args, ws)


def _check_argument_name(name: str, properties: frozenset[str] | None, field: str) -> None:
    if properties is None or name in properties or name.split(".", 1)[0] in properties:
        return
    raise ConfigError(
        f"the tool has no argument {name!r}{did_you_mean(name, properties)} "
        f"(its arguments: {', '.join(sorted(properties))})",
        field=field,
    )


def _getter(name: str) -> Callable[[Mapping[str, Any]], Any]:
    parts = name.split(".")
    if len(parts) == 1:
        return lambda args: args.get(name, _MISSING)

    def get(args: Mapping[str, Any]) -> Any:
        if name in args:
            return args[name]
        value: Any = args
        for part in parts:
            if isinstance(value, Mapping):
                value = value.get(part, _MISSING)
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return _MISSING
            if value is _MISSING:
                return _MISSING
        return value

    return get


def _compile_argument(name: str, spec: Any, field: str, strict: bool) -> _Test:
    get = _getter(name)
    exists: bool | None = None
    if isinstance(spec, Mapping) and "exists" in spec:
        exists = spec["exists"]
        if not isinstance(exists, bool):
            raise ConfigError(
                f"expected true or false, got {exists!r}", field=_join(field, "exists")
            )
        spec = {k: v for k, v in spec.items() if k != "exists"}
        if not spec:
            return lambda args, ws: (get(args) is not _MISSING) is exists
    value_test = _compile_matchers(spec, field, strict, argument=name)
    if exists is False:
        return lambda args, ws: False  # `exists: false` with a matcher on the value: never
    return lambda args, ws: (v := get(args)) is not _MISSING and value_test(v, ws)


def _compile_matchers(
    spec: Any, field: str, strict: bool, argument: str | None = None
) -> _ValueTest:
    """`argument` is the argument's name when `spec` sits directly under it (for hints)."""
    if spec is None or isinstance(spec, str | int | float | bool):
        return _eq_test(spec)
    if isinstance(spec, list):
        raise ConfigError(
            "a list is ambiguous here: write {in: [...]} to match any of these values, "
            "or {eq: [...]} to match the list itself",
            field=field,
        )
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(
            f"expected a value or a mapping of matchers ({', '.join(_MATCHERS)}), got {spec!r}",
            field=field,
        )
    tests: list[_ValueTest] = []
    for key, arg in spec.items():
        sub = _join(field, str(key))
        if key not in _MATCHERS:
            hint = did_you_mean(str(key), _MATCHERS)
            if not hint and argument is not None:
                hint = f" (to match a nested value, name it `{argument}.{key}`)"
            raise ConfigError(
                f"unknown matcher {key!r}{hint}; matchers are {', '.join(_MATCHERS)}", field=sub
            )
        tests.append(_compile_matcher(str(key), arg, sub, strict))
    if len(tests) == 1:
        return tests[0]
    return lambda v, ws: all(t(v, ws) for t in tests)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _eq_test(expected: Any) -> _ValueTest:
    return lambda v, ws: _json_equal(v, expected)


def _strings(arg: Any, field: str, what: str) -> list[str]:
    items = arg if isinstance(arg, list) else [arg]
    if not items or not all(isinstance(x, str) and x for x in items):
        raise ConfigError(f"expected {what} or a non-empty list of them, got {arg!r}", field=field)
    return items


def _number(arg: Any, field: str) -> float:
    if isinstance(arg, bool) or not isinstance(arg, int | float):
        raise ConfigError(f"expected a number, got {arg!r}", field=field)
    return arg


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _compile_matcher(key: str, arg: Any, field: str, strict: bool) -> _ValueTest:
    if key == "eq":
        return _eq_test(arg)
    if key == "in":
        if not isinstance(arg, list) or not arg:
            raise ConfigError(f"expected a non-empty list of values, got {arg!r}", field=field)
        return lambda v, ws: any(_json_equal(v, x) for x in arg)
    if key == "glob":
        globs = _strings(arg, field, "a glob")
        regexes = [re.compile(_glob_regex(g, segments=False), re.DOTALL) for g in globs]
        return lambda v, ws: isinstance(v, str) and any(r.fullmatch(v) for r in regexes)
    if key == "regex":
        compiled: list[re.Pattern[str]] = []
        for i, pattern in enumerate(_strings(arg, field, "a regular expression")):
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                sub = f"{field}[{i}]" if isinstance(arg, list) else field
                raise ConfigError(
                    f"invalid regular expression {pattern!r}: {exc}", field=sub
                ) from None
        return lambda v, ws: isinstance(v, str) and any(r.search(v) for r in compiled)
    if key == "prefix":
        prefixes = tuple(_strings(arg, field, "a prefix"))
        return lambda v, ws: isinstance(v, str) and v.startswith(prefixes)
    if key in ("gt", "gte", "lt", "lte"):
        bound = _number(arg, field)
        compare: Callable[[Any, float], bool] = _COMPARE[key]
        return lambda v, ws: _is_number(v) and compare(v, bound)
    if key == "path":
        paths = [_rule_path_pattern(p, field) for p in _strings(arg, field, "a path glob")]
        return lambda v, ws: isinstance(v, str) and _path_matches(paths, v, ws, strict)
    if key == "host":
        hosts = [_compile_host(h, field) for h in _strings(arg, field, "a host pattern")]
        return lambda v, ws: isinstance(v, str) and _host_matches(hosts, v, strict)
    if key == "command":
        from ._shellwords import command_matches, compile_command_pattern

        patterns = [compile_command_pattern(c) for c in _strings(arg, field, "a command pattern")]
        return lambda v, ws: isinstance(v, str) and command_matches(v, patterns, strict=strict)
    if key == "any":
        if not isinstance(arg, list) or not arg:
            raise ConfigError("expected a non-empty list of alternatives", field=field)
        alternatives = [_compile_matchers(a, f"{field}[{i}]", strict) for i, a in enumerate(arg)]
        return lambda v, ws: any(t(v, ws) for t in alternatives)
    if key == "not":
        inner = _compile_matchers(arg, field, not strict)
        return lambda v, ws: not inner(v, ws)
    raise ConfigError(
        "`exists` must sit directly under the argument name, not inside any/not", field=field
    )


_COMPARE: dict[str, Callable[[Any, float], bool]] = {
    "gt": lambda v, b: v > b,
    "gte": lambda v, b: v >= b,
    "lt": lambda v, b: v < b,
    "lte": lambda v, b: v <= b,
}


# --- globs and paths ------------------------------------------------------------------------


def _glob_regex(pattern: str, *, segments: bool) -> str:
    """Translate a glob to a regex body. With `segments`, `*` and `?` stay inside one path
    segment and `**` spans segments (`a/**/b`, `**/x`, `dir/**`); without, `*` spans anything.
    Also: `[abc]`, `[!abc]`, `{a,b}`, and `\\` to escape the next character."""
    star, one = ("[^/]*", "[^/]") if segments else (".*", ".")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            at_start = i == 0 or pattern[i - 1] == "/"
            if segments and j - i >= 2 and at_start:
                if j == n:
                    out.append(".*")
                    i = j
                    continue
                if pattern[j] == "/":
                    out.append("(?:.*/)?")
                    i = j + 1
                    continue
            out.append(star)
            i = j
        elif c == "?":
            out.append(one)
            i += 1
        elif c == "/" and segments and pattern[i:] in ("/**", "/***"):
            out.append("(?:/.*)?")
            i = n
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : end]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            escaped = "".join(
                ch if ch.isalnum() or (ch == "-" and "--" not in body) else "\\" + ch for ch in body
            )
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end + 1
        elif c == "{":
            end = pattern.find("}", i)
            alternatives = pattern[i + 1 : end].split(",") if end > 0 else []
            if len(alternatives) < 2:
                out.append(re.escape(c))
                i += 1
                continue
            inner = "|".join(_glob_regex(a, segments=segments) for a in alternatives)
            out.append(f"(?:{inner})")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _PathPattern:
    source: str
    regex: re.Pattern[str]
    anchor: Literal["absolute", "workspace", "floating"]
    """`absolute`: matched against the absolute path; `workspace`: against the path relative
    to the workspace (never outside it); `floating` (gitignore's bare names and `**/x`): at any
    depth, anywhere for deny/ask rules, inside the workspace for allow rules."""

    def matches(self, path: str, workspace: str, strict: bool) -> bool:
        if self.anchor == "absolute" or (self.anchor == "floating" and not strict):
            return self.regex.fullmatch(path) is not None
        rel = _relative(path, workspace)
        return rel is not None and self.regex.fullmatch(rel) is not None


def _relative(path: str, workspace: str) -> str | None:
    if path == workspace:
        return ""
    root = workspace if workspace.endswith("/") else workspace + "/"
    return path[len(root) :] if path.startswith(root) else None


def _rule_path_pattern(pattern: str, field: str) -> _PathPattern:
    """`path:` globs of approval rules: absolute is absolute, `~/` is home, else workspace."""
    text = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
    if text.startswith("/"):
        body = _glob_regex(os.path.normpath(text).replace("//", "/", 1), segments=True)
        return _PathPattern(source=pattern, regex=re.compile(body, re.DOTALL), anchor="absolute")
    text = text.removeprefix("./")
    if not text:
        raise ConfigError(f"empty path pattern {pattern!r}", field=field)
    body = _glob_regex(text, segments=True)
    return _PathPattern(source=pattern, regex=re.compile(body, re.DOTALL), anchor="workspace")


def _permission_path_pattern(pattern: str) -> _PathPattern:
    """gitignore-style path specs of permission strings (Claude Code's reading): `//abs`
    absolute, `~/x` home, `/x` and `./x` relative to the workspace, a bare name (or `**/x`)
    at any depth, `a/b` relative to the workspace. A match also covers everything beneath."""
    text = pattern if pattern.startswith("//") else pattern.rstrip("/") or "/"
    anchor: Literal["absolute", "workspace", "floating"]
    if text.startswith("//"):
        text, anchor = "/" + text.strip("/"), "absolute"
    elif text.startswith("~"):
        text, anchor = os.path.expanduser(text), "absolute"
    elif text.startswith(("/", "./")):
        text, anchor = text.removeprefix(".").lstrip("/"), "workspace"
    elif text.startswith("**/") or "/" not in text:
        text, anchor = text.removeprefix("**/"), "floating"
    else:
        anchor = "workspace"
    body = _glob_regex(text, segments=True) if text else ""
    if anchor == "floating":
        body = "(?:.*/)?" + body
    regex = re.compile(body + "(?:/.*)?" if body else ".*", re.DOTALL)
    return _PathPattern(source=pattern, regex=regex, anchor=anchor)


@functools.lru_cache(maxsize=64)
def _workspace_forms(workspace: Path) -> tuple[str, str]:
    """The workspace as written (absolute, normalised) and symlink-resolved. Cached: the
    workspace of a toolkit does not move, and this keeps rules without paths off the disk."""
    lexical = os.path.normpath(os.path.abspath(workspace))
    return lexical, os.path.realpath(lexical)


def _path_candidates(value: str, workspace: Path) -> list[tuple[str, str]] | None:
    """(path, workspace) pairs a path argument may mean: as written (`..` collapsed) and with
    symlinks resolved, and the same after `~` expansion when it starts with `~`."""
    if "\0" in value:
        return None
    lexical_ws, real_ws = _workspace_forms(workspace)
    spellings = [value]
    if value.startswith("~"):
        spellings.append(os.path.expanduser(value))
    out: list[tuple[str, str]] = []
    for spelling in spellings:
        lexical = os.path.normpath(os.path.join(lexical_ws, spelling))
        if lexical.startswith("//"):
            lexical = "/" + lexical.lstrip("/")
        out.append((lexical, lexical_ws))
        out.append((os.path.realpath(lexical), real_ws))
    return out


def _path_matches(patterns: Sequence[_PathPattern], value: str, ws: Path, strict: bool) -> bool:
    candidates = _path_candidates(value, ws)
    if candidates is None:
        return not strict
    hit = (any(p.matches(path, root, strict) for p in patterns) for path, root in candidates)
    return all(hit) if strict else any(hit)


# --- hosts ----------------------------------------------------------------------------------

_HOST_CHARS = re.compile(r"[a-z0-9_.:\-]+")


def _ascii_host(host: str) -> str | None:
    host = host.lower().rstrip(".")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host if _HOST_CHARS.fullmatch(host) else None


def _url_host(value: str) -> str | None:
    """The host a URL argument points at, or None when it cannot be told for sure (parsers
    disagree on `\\` in the authority; control characters; undecodable names)."""
    text = value.strip()
    if "://" not in text and not text.startswith("//"):
        text = "//" + text
    authority = re.split(r"[/?#]", text.split("//", 1)[1], maxsplit=1)[0]
    if "\\" in authority or any(ord(ch) < 0x21 for ch in authority):
        return None
    from urllib.parse import unquote, urlsplit

    try:
        host = urlsplit(text).hostname
    except ValueError:
        return None
    if not host:
        return None
    return _ascii_host(unquote(host) if "%" in host else host)


def _compile_host(pattern: str, field: str) -> Callable[[str], bool]:
    text = pattern.strip().lower().rstrip(".")
    if "/" in text or "@" in text or not text:
        raise ConfigError(
            f"expected a host name such as api.example.com or *.example.com, got {pattern!r}",
            field=field,
        )
    if text == "*":
        return lambda host: True
    subdomains = text.startswith("*.")
    labels = text[2:] if subdomains else text
    converted = [label if "*" in label else _ascii_host(label) for label in labels.split(".")]
    if any(not label for label in converted):
        raise ConfigError(f"invalid host pattern {pattern!r}", field=field)
    base = ".".join(label for label in converted if label)
    if "*" not in base:
        if subdomains:
            suffix = "." + base
            return lambda host: host.endswith(suffix)
        return lambda host: host == base
    body = r"\.".join(
        "[^.]*".join(re.escape(p) for p in label.split("*")) for label in base.split(".")
    )
    regex = re.compile((r"(?:[^.]+\.)+" if subdomains else "") + body)
    return lambda host: regex.fullmatch(host) is not None


def _host_matches(patterns: Sequence[Callable[[str], bool]], value: str, strict: bool) -> bool:
    host = _url_host(value)
    if host is None:
        return not strict
    return any(p(host) for p in patterns)


# --- permission strings ---------------------------------------------------------------------

_PERMISSION = re.compile(r"\s*([A-Za-z0-9_*?\[\]!-]+)\s*(?:\((.*)\))?\s*", re.DOTALL)
_PARAM_SPEC = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*):(.*)", re.DOTALL)
_PRIMARY_NAMES = ("command", "path", "file_path", "url", "pattern")
_PrimaryKind = Literal["command", "path", "url", "text"]


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
    name: re.Pattern[str]
    bare: bool
    verdict: Verdict
    spec: str = ""
    """The text between the parentheses (command patterns compile when a tool needs one)."""
    path: _PathPattern | None = None
    host: Callable[[str], bool] | None = None
    glob: re.Pattern[str] | None = None
    param: tuple[str, re.Pattern[str]] | None = None

    def for_tool(
        self, properties: Mapping[str, Any], primary: tuple[str, _PrimaryKind] | None
    ) -> _Test | None:
        """The condition this rule puts on calls of one tool (None: it never applies)."""
        if self.bare:
            return _always
        strict = self.decision is Decision.ALLOW
        if self.param is not None and not strict:
            param, value = self.param
            if param in properties and (primary is None or param != primary[0]):
                return _param_test(param, value)
        if primary is None:
            return None
        name, kind = primary
        get = _getter(name)
        if kind == "command":
            from ._shellwords import command_matches, compile_command_pattern

            patterns = [compile_command_pattern(self.spec)]
            return lambda args, ws: (
                isinstance(v := get(args), str) and command_matches(v, patterns, strict=strict)
            )
        if kind == "path" and self.path is not None:
            paths = [self.path]
            return lambda args, ws: (
                isinstance(v := get(args), str) and _path_matches(paths, v, ws, strict)
            )
        if kind == "url" and self.host is not None:
            hosts = [self.host]
            return lambda args, ws: (
                isinstance(v := get(args), str) and _host_matches(hosts, v, strict)
            )
        glob = self.glob
        if glob is None:
            return None
        return lambda args, ws: isinstance(v := get(args), str) and glob.fullmatch(v) is not None


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
      argument's JSON scalar, e.g. `shell(run_in_background:true)`.

    `Name` alone or `Name(*)` covers every call; as a deny it hides the tool (`hidden`).
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
        name = tool.name
        return any(
            r.bare and r.decision is Decision.DENY and r.name.fullmatch(name) for r in self._rules
        )

    def unmatched(self, tool_names: Iterable[str]) -> list[ConfigError]:
        """One error per rule whose name matches none of `tool_names` (a typo makes a deny
        rule silently useless); the builder decides whether to raise or warn."""
        names = list(tool_names)
        problems = []
        for rule in self._rules:
            if not any(rule.name.fullmatch(n) for n in names):
                tool = rule.text.split("(", 1)[0].strip()
                problems.append(
                    ConfigError(
                        f"{rule.text!r} names no tool{did_you_mean(tool, names)}",
                        field=rule.field,
                    )
                )
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
        primary_name = tool.meta.get("primary_argument") if tool.meta else None
        if not primary_name:
            primary_name = next((n for n in _PRIMARY_NAMES if n in properties), None)
        primary: tuple[str, _PrimaryKind] | None = None
        if primary_name:
            kind = tool.meta.get("primary_kind") if tool.meta else None
            primary = (primary_name, kind or _primary_kind(primary_name))
        plan: list[_Rule] = []
        for rule in self._rules:
            if rule.name.fullmatch(tool.name):
                test = rule.for_tool(properties, primary)
                if test is not None:
                    plan.append((test, rule.verdict))
        return tuple(plan)


def compile_permissions(
    allow: Sequence[str] = (),
    ask: Sequence[str] = (),
    deny: Sequence[str] = (),
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
    name = re.compile(_glob_regex(name_glob, segments=False), re.IGNORECASE)
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
    if param_match is not None and param_match.group(1) != "domain":
        value = re.compile(_glob_regex(param_match.group(2), segments=False), re.DOTALL)
        param = (param_match.group(1), value)
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
    )


def split_command(command: str) -> list[list[str]] | None:
    """Split a shell command line into its simple commands, as lists of words.

    Splits on `&&`, `||`, `;`, `|`, `|&`, `&` and newlines; removes quotes; drops comments and
    redirections. Returns None when the command uses a construct that cannot be read statically
    (command or process substitution, backticks, subshells, unbalanced quotes, an unterminated
    here-document): such a command must never be approved automatically.

    >>> split_command("git status && ls -la 'my dir' | wc -l")
    [['git', 'status'], ['ls', '-la', 'my dir'], ['wc', '-l']]
    """
    from ._shellwords import split_command as split

    return split(command)


def is_known_safe_command(command: str) -> bool:
    """True when `command` only reads: every simple command is on the built-in read-only list
    (`ls cat head tail wc grep rg find sed -n sort uniq git status|diff|log|show|branch ...`,
    with their dangerous flags refused: `find -exec/-delete/-fprint`, `rg --pre/-z`,
    `sort -o`, `git diff --output`, `git branch -D`...) and nothing is redirected into a file
    other than /dev/null.

    The builtin shell tool runs such commands without asking. Anything that cannot be read
    statically (substitutions, subshells, unbalanced quotes) is not known-safe. Wrappers that
    change nothing (`timeout 5`, `nice`, `LANG=C`) are looked past; `bash -c 'SCRIPT'` is
    judged by its script.
    """
    from ._shellwords import is_known_safe_command as known_safe

    return known_safe(command)
