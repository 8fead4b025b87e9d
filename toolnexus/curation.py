"""Curated arguments: what a team does to a third-party tool's arguments before handing it out.

Rename an argument, hide it behind a fixed value, give it a default, or narrow what it accepts
(`enum`, `pattern`, `minimum`/`maximum`, `minLength`/`maxLength`):

```python
from toolnexus import curate

issues = curate(list_issues, {
    "repo": {"rename": "repository"},
    "owner": {"value": "acme"},                  # hidden: the model never sees nor sets it
    "per_page": {"default": 20, "maximum": 50},
    "state": {"enum": ["open", "closed"]},
})
```

The tool's `parameters` become the curated schema: that is what adapters, `serve` and tool
search publish. The tool keeps a `Curation` that the executor uses on every call: it refuses an
argument the model may not set, validates the rest against the curated schema, then maps them
back to the upstream names and adds the fixed values and defaults. Approval rules, permissions
and middleware see those *final* arguments, under the upstream names: a `deny` on `owner: evil`
holds whatever the model sends, since the model can no longer name `owner` at all.

Curation only tightens. An `enum` must be allowed by the upstream schema (a subset of its enum,
if it has one), a range must lie within the upstream range, a fixed value must be valid upstream
and a default valid against the curated schema. Applied twice (an include's `override` over the
included manifest's own curation), the second works on the first's published schema, so it can
narrow further but never widen a range nor bring a hidden argument back.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._suggest import did_you_mean
from .base import JSON, Tool
from .errors import ConfigError
from .schema import compile_validator

__all__ = ["ArgumentSpec", "Curation", "curate", "curate_parameters", "rules_view"]

ArgumentSpec = Mapping[str, Any]
"""One argument's curation, as a manifest writes it: `{rename: NAME}`, `{value: V}` (hidden
and fixed), `{hide: true}` (an optional argument left out), `{default: V}`, and the narrowing
keywords `enum`, `pattern`, `minimum`, `maximum`, `minLength`, `maxLength`."""

_KEYS: Final = (
    "rename",
    "value",
    "hide",
    "default",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
)
_HIDING: Final = ("value", "hide")
_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""What OpenAI, Anthropic and Gemini all accept as a property name."""
_TOGETHER: Final = (
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "propertyNames",
)
"""Root keywords that tie arguments together by name: renaming or hiding one would change
what the schema accepts in ways a property-by-property edit cannot follow."""
_STRING: Final = frozenset({"string"})
_NUMBER: Final = frozenset({"integer", "number"})


@dataclass(frozen=True, kw_only=True)
class Curation:
    """How a curated tool's arguments become the upstream tool's: kept on `Tool.curation` and
    applied by the executor to every call (see the module docstring)."""

    parameters: dict[str, Any]
    """The upstream schema, under which approval rules and permissions read the arguments."""
    names: Mapping[str, str] = field(default_factory=dict[str, str])
    """Published name -> upstream name, for the renamed arguments only."""
    fixed: Mapping[str, JSON] = field(default_factory=dict[str, JSON])
    """Upstream name -> the value every call gets (the model cannot set it)."""
    hidden: frozenset[str] = frozenset()
    """Upstream names of optional arguments left out (no value is sent)."""
    defaults: Mapping[str, JSON] = field(default_factory=dict[str, JSON])
    """Upstream name -> the value sent when the model gives none."""
    published: frozenset[str] = frozenset()
    """The argument names of the curated schema."""
    former: Mapping[str, str] = field(default_factory=dict[str, str])
    """Names an earlier curation published that a later one renamed or hid -> upstream name,
    so that the model sending one is told what became of it."""

    def refusals(self, arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
        """`(json_path, message)` for each argument the model may not send: a fixed or hidden
        one, or a renamed one under its upstream name. Checked before validation (an unknown
        name there would only be "unexpected"), so that the message says why."""
        problems: list[tuple[str, str]] = []
        for key in arguments:
            if key in self.published:
                continue
            key_up = self.former.get(key, key)
            if key_up in self.fixed:
                message = f"argument {key!r} is fixed by the toolkit and cannot be set"
            elif key_up in self.hidden:
                message = f"argument {key!r} is not offered by the toolkit; leave it out"
            elif (now := self._published_name(key_up)) is not None:
                message = f"argument {key!r} is called {now!r} here; send {now!r} instead"
            else:
                continue
            problems.append((f"$.{key}", message))
        return problems

    def upstream(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated curated arguments as the upstream tool takes them: renamed back, with the
        defaults of what is missing and every fixed value."""
        names = self.names
        out = {names.get(key, key): value for key, value in arguments.items()}
        for key, value in self.defaults.items():
            if key not in out:
                out[key] = value
        out.update(self.fixed)
        return out

    def then(self, outer: Curation) -> Curation:
        """This curation followed by `outer`, which was written against this one's published
        schema (an include's override over the included manifest's own curation)."""
        up = self.names
        names = {new: up.get(old, old) for new, old in outer.names.items()}
        dropped = set(outer.names.values()) | set(outer.fixed) | outer.hidden
        names.update({new: old for new, old in up.items() if new not in dropped})
        former = {**self.former, **{a: up[a] for a in dropped if a in up}}
        return Curation(
            parameters=self.parameters,
            names=names,
            fixed={**self.fixed, **{up.get(k, k): v for k, v in outer.fixed.items()}},
            hidden=self.hidden | {up.get(k, k) for k in outer.hidden},
            defaults={**self.defaults, **{up.get(k, k): v for k, v in outer.defaults.items()}},
            published=outer.published,
            former=former,
        )

    def _published_name(self, upstream: str) -> str | None:
        return next((new for new, old in self.names.items() if old == upstream), None)


def curate(tool: Tool, arguments: Mapping[str, ArgumentSpec]) -> Tool:
    """`tool` with curated arguments (see the module docstring); curating a curated tool
    narrows its published schema further.

    Args:
        tool: any tool.
        arguments: argument name (as `tool` publishes it) -> its curation.

    Raises:
        ConfigError: an argument the tool lacks, a loosening constraint, a bad value or a name
            clash; `field` names the argument and key (`owner.value`).
    """
    if not arguments:
        return tool
    parameters, curation = curate_parameters(tool.parameters, arguments)
    if tool.curation is not None:
        curation = tool.curation.then(curation)
    return dataclasses.replace(tool, parameters=parameters, curation=curation)


def rules_view(tool: Tool) -> Tool:
    """`tool` as approval rules and permissions see it: with its upstream schema, whose names
    the final arguments of a call carry."""
    if tool.curation is None:
        return tool
    return dataclasses.replace(tool, parameters=tool.curation.parameters)


def curate_parameters(
    parameters: Mapping[str, Any], arguments: Mapping[str, ArgumentSpec]
) -> tuple[dict[str, Any], Curation]:
    """The curated schema and the `Curation` that maps calls back to `parameters`.

    Raises:
        ConfigError: as `curate`.
    """
    properties = parameters.get("properties")
    properties = dict(properties) if isinstance(properties, Mapping) else {}
    required = [r for r in parameters.get("required") or () if isinstance(r, str)]
    names: dict[str, str] = {}
    fixed: dict[str, JSON] = {}
    hidden: set[str] = set()
    defaults: dict[str, JSON] = {}
    curated: dict[str, Any] = {}
    for name, spec in arguments.items():
        if name not in properties:
            listed = ", ".join(properties) or "none"
            raise ConfigError(
                f"the tool has no argument {name!r}{did_you_mean(name, properties)} "
                f"(its arguments: {listed})",
                field=name,
            )
        _check_keys(name, spec)
        if any(k in spec for k in ("rename", *_HIDING)):
            _check_independent(parameters, name)
        prop = properties[name]
        if "value" in spec or spec.get("hide") is True:
            _hide(parameters, name, spec, prop, required=required, fixed=fixed, hidden=hidden)
            continue
        prop = _narrowed(parameters, name, spec, prop)
        if "default" in spec:
            problems = _problems(parameters, prop, spec["default"])
            if problems:
                raise ConfigError(
                    f"default {spec['default']!r} is not valid for {name!r} as curated: {problems}",
                    field=f"{name}.default",
                )
            prop = {**prop, "default": spec["default"]}
            defaults[name] = spec["default"]
        curated[name] = prop
        if "rename" in spec:
            names[spec["rename"]] = name
    out_props: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for name, prop in properties.items():
        if name in fixed or name in hidden:
            continue
        new = next((n for n, old in names.items() if old == name), name)
        if new in owner:
            first = owner[new]
            raise ConfigError(
                f"two arguments would be called {new!r}: {first!r} and {name!r}; rename one "
                "of them to another name",
                field=f"{name if new != name else first}.rename",
            )
        owner[new] = name
        out_props[new] = curated.get(name, prop)
    published_required = [
        next((n for n, old in names.items() if old == r), r)
        for r in required
        if r not in fixed and r not in hidden and r not in defaults
    ]
    schema = {**parameters, "properties": out_props}
    if published_required:
        schema["required"] = published_required
    else:
        schema.pop("required", None)
    return schema, Curation(
        parameters=dict(parameters),
        names=names,
        fixed=fixed,
        hidden=frozenset(hidden),
        defaults=defaults,
        published=frozenset(out_props),
    )


def _check_keys(name: str, spec: Any) -> None:
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(
            "expected a mapping such as {rename: NEW}, {value: V}, {default: V} or {enum: [...]}",
            field=name,
        )
    for key in spec:
        if key not in _KEYS:
            raise ConfigError(
                f"unknown key {key!r}{did_you_mean(str(key), _KEYS)}; expected one of "
                f"{', '.join(_KEYS)}",
                field=f"{name}.{key}",
            )
    if "hide" in spec and spec["hide"] is not True:
        raise ConfigError(
            "expected `hide: true` (leave the key out to keep the argument)",
            field=f"{name}.hide",
        )
    if any(k in spec for k in _HIDING):
        others = [k for k in spec if k not in _HIDING]
        if others:
            raise ConfigError(
                f"a hidden argument is not shown to the model, so {others[0]!r} has no effect; "
                "remove it",
                field=f"{name}.{others[0]}",
            )
    if "rename" in spec and (
        not isinstance(spec["rename"], str) or not _NAME.match(spec["rename"])
    ):
        raise ConfigError(
            f"expected 1 to 64 letters, digits, _, . or -, got {spec['rename']!r}",
            field=f"{name}.rename",
        )


def _check_independent(parameters: Mapping[str, Any], name: str) -> None:
    together = [k for k in _TOGETHER if k in parameters]
    if together:
        raise ConfigError(
            f"the tool's schema ties its arguments together ({together[0]}), so {name!r} "
            "cannot be renamed or hidden without changing what it accepts; narrow it instead",
            field=name,
        )


def _hide(
    parameters: Mapping[str, Any],
    name: str,
    spec: ArgumentSpec,
    prop: Any,
    *,
    required: Sequence[str],
    fixed: dict[str, JSON],
    hidden: set[str],
) -> None:
    if "value" not in spec:
        if name in required:
            raise ConfigError(
                f"{name!r} is required by the tool: give it a fixed `value` to hide it",
                field=f"{name}.hide",
            )
        hidden.add(name)
        return
    value = spec["value"]
    problems = _problems(parameters, prop, value)
    if problems:
        raise ConfigError(
            f"fixed value {value!r} is not valid for {name!r}: {problems}",
            field=f"{name}.value",
        )
    fixed[name] = value


def _narrowed(
    parameters: Mapping[str, Any], name: str, spec: ArgumentSpec, prop: Any
) -> dict[str, Any]:
    """The argument's schema with `spec`'s narrowing keywords, each checked to tighten."""
    out: dict[str, Any] = dict(prop) if isinstance(prop, Mapping) else {}
    types = _types(prop)
    if "enum" in spec:
        values = spec["enum"]
        if not isinstance(values, list) or not values:
            raise ConfigError("expected a non-empty list of values", field=f"{name}.enum")
        for value in values:
            problems = _problems(parameters, prop, value)
            if problems:
                raise ConfigError(
                    f"{value!r} is not a value {name!r} accepts, so the enum would widen it: "
                    f"{problems}",
                    field=f"{name}.enum",
                )
        out["enum"] = list(values)
    if "pattern" in spec:
        _needs(types, _STRING, name, "pattern")
        pattern = spec["pattern"]
        if not isinstance(pattern, str):
            raise ConfigError("expected a regular expression", field=f"{name}.pattern")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(
                f"not a valid regular expression: {exc}", field=f"{name}.pattern"
            ) from None
        old = out.get("pattern")
        if isinstance(old, str) and old != pattern:
            # Both must hold: the upstream pattern stays, beside the curated one.
            out["allOf"] = [*out.get("allOf", ()), {"pattern": old}]
        out["pattern"] = pattern
    for low, high, kinds in (("minimum", "maximum", _NUMBER), ("minLength", "maxLength", _STRING)):
        for key in (low, high):
            if key not in spec:
                continue
            _needs(types, kinds, name, key)
            bound = spec[key]
            integral = key.endswith("Length")
            if (
                isinstance(bound, bool)
                or not isinstance(bound, int | float)
                or (integral and (not isinstance(bound, int) or bound < 0))
            ):
                what = "a whole number, 0 or more" if integral else "a number"
                raise ConfigError(f"expected {what}, got {bound!r}", field=f"{name}.{key}")
            _within(out, key, bound, name)
            out[key] = bound
        if low in out and high in out and out[low] > out[high]:
            raise ConfigError(
                f"{low} {out[low]!r} is above {high} {out[high]!r}: no value would be accepted",
                field=f"{name}.{low if low in spec else high}",
            )
    return out


def _within(prop: Mapping[str, Any], key: str, bound: float, name: str) -> None:
    """Refuse a bound looser than the upstream one: it would lift the upstream limit, since the
    curated bound replaces it."""
    upper = key in ("maximum", "maxLength")
    exclusive = {"maximum": "exclusiveMaximum", "minimum": "exclusiveMinimum"}.get(key)
    limits: list[tuple[str, float, bool]] = []
    if isinstance(old := prop.get(key), int | float) and not isinstance(old, bool):
        limits.append((key, old, False))
    if exclusive and isinstance(old := prop.get(exclusive), int | float):
        limits.append((exclusive, old, True))
    for which, old, strict in limits:
        wider = (
            (bound > old or (strict and bound == old))
            if upper
            else (bound < old or (strict and bound == old))
        )
        if wider:
            raise ConfigError(
                f"{key} {bound!r} would widen {name!r}: the tool's own {which} is {old!r}; "
                "curation may only narrow",
                field=f"{name}.{key}",
            )


def _types(prop: Any) -> frozenset[str] | None:
    """The JSON types an argument's schema names at its top, None when it names none (a
    `$ref`, an `anyOf`): the keyword is then not checked against a type."""
    if not isinstance(prop, Mapping):
        return None
    kind = prop.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(k for k in kind if isinstance(k, str))
    return None


def _needs(types: frozenset[str] | None, kinds: frozenset[str], name: str, key: str) -> None:
    if types is not None and not types & kinds:
        what = "strings" if kinds is _STRING else "numbers"
        raise ConfigError(
            f"{key} narrows {what}, and {name!r} is {'/'.join(sorted(types))}",
            field=f"{name}.{key}",
        )


def _problems(parameters: Mapping[str, Any], prop: Any, value: Any) -> str:
    """Why `value` does not validate against one argument's schema `prop` ("" when it does),
    checked inside the tool's schema so that its `$ref`s resolve."""
    holder = {k: v for k, v in parameters.items() if k in ("$defs", "definitions", "$id")}
    schema = {**holder, "type": "object", "properties": {"v": prop}}
    errors = compile_validator(schema).errors({"v": value})
    return "; ".join(message for _, message in errors)
