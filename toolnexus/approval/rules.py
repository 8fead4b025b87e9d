"""The rule language of a tool's `approval:` block: `compile_rules`, `ApprovalRules`, the matchers.

`compile_rules` turns the block (matchers over named arguments) into a policy. Under doubt it
leans the safe way: a rule that would *allow* a call needs every reading of an argument to match
(the path as written and its symlink target, every sub-command of a shell line), a rule that
would *deny* or *ask* needs only one. Everything is compiled up front; `decide` touches the disk
only for `path` matchers.

Separate because it is a language of its own (keys, matchers, error messages with the field
that is wrong). Paths, hosts and shell commands are matched by `paths`, `hosts` and
`toolnexus.shell`; the manifest-wide permission strings (`permissions`) compile to the same
`_Rule` pairs and reuse this module's helpers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._suggest import did_you_mean
from ..errors import ConfigError
from .decision import Decision, Verdict
from .hosts import _compile_host, _host_matches
from .paths import _glob_regex, _path_matches, _rule_path_pattern

if TYPE_CHECKING:
    from ..base import Tool

__all__ = ["ApprovalRules", "Locate", "compile_rules"]


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
_RULE_KEYS = ("decision", "when", "caller", "reason")
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
      `||`, `;`, `|`, `&` and newlines. In an allow rule *every* sub-command must match, past
      wrappers such as `timeout`, `nice`, `env VAR=..` only when each of their options is
      understood, and a command that cannot be read statically (`$(...)`, backticks,
      unbalanced quotes) never does. In a deny or ask rule *any* reading is enough: the
      pattern may match wherever its program appears as a word (`sudo -u x git push`,
      `foo git push`), past git's global options (`git -C . push`), inside substitutions and
      the scripts of `sh -c`, `eval`, `env -S` or a here-document fed to a shell; a program
      known only at run time (`$X`, a glob, a shell reading a pipe) matches every pattern.
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
                f"unknown key {key!r}; expected decision, when, caller and reason"
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
    if "caller" in rule:
        test, shown = _with_caller(test, rule["caller"], _join(field, "caller"))
        written = f"{written} for {shown}"
    return decision, test, written, reason


def _with_caller(test: _Test, spec: Any, field: str) -> tuple[_Test, str]:
    """`test` that also needs the current caller to match `spec` (a `caller:` condition), and
    how the condition reads. Without a caller (a local toolkit) it never holds.

    Raises:
        ConfigError: a bad `caller:` mapping (see `compile_caller`).
    """
    from ..base import current_caller
    from .access import compile_caller

    who = compile_caller(spec, field)

    def caller_test(arguments: Mapping[str, Any], workspace: Path) -> bool:
        return who.matches(current_caller()) and test(arguments, workspace)

    return caller_test, f"callers with {who.describe()}"


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
        from ..shell import command_matches, compile_command_pattern

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
