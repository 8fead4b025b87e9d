"""Check data against `schema.json`, fast, with messages written for people.

`jsonschema` costs 60-120 µs per tool entry here (30-60 ms for a 500-tool manifest, most of the
loading budget) and words its errors for schema authors. This module compiles the subset of
JSON Schema that `schema.json` uses into closures once per process (a few µs per entry) and
reports every violation with what was expected. Compiling fails on any keyword it does not
implement, so the schema cannot silently outgrow the checker; the test suite also checks
`schema.json` against the 2020-12 meta-schema and compares verdicts with `jsonschema`.

`oneOf` whose branches each require a key no other branch requires (tool kinds, stdio vs HTTP
servers, body forms) is checked as a discriminated union: the key present picks the branch, and
zero or several such keys is one clear error instead of one per branch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._suggest import did_you_mean
from ..schema.refs import MISSING, resolve_pointer
from .interpolate import Secret
from .yamlpos import NodePath

__all__ = ["Violation", "compile_schema", "describe_value", "field_path"]


@dataclass(frozen=True, kw_only=True)
class Violation:
    """One way the data breaks the schema."""

    path: NodePath
    message: str
    at_key: bool = False
    """True when the offending thing is the key itself (an unknown key): point at the key."""


Check = Callable[[Any, NodePath, list[Violation]], None]

_ANNOTATIONS = frozenset(
    {
        "description",
        "title",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "patternErrorMessage",
        "$defs",
    }
)
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
}


def field_path(path: NodePath) -> str:
    """`tools[2].http.url`-style text for a path (indexes are 0-based)."""
    out = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif re.fullmatch(r"[A-Za-z_$][\w$-]*", part):
            out.append(f".{part}" if out else part)
        else:
            out.append(f"[{part!r}]")
    return "".join(out)


def describe_value(value: Any) -> str:
    """A short description of a value for a message; interpolated values are never shown."""
    if isinstance(value, Secret):
        return "an interpolated value"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return value is None


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    for name in ("string", "object", "array", "integer", "number"):
        if _is_type(value, name):
            return _TYPE_NAMES[name]
    return "null"


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def resolve(self, ref: str) -> Mapping[str, Any]:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported, got {ref!r}")
        node = resolve_pointer(self.root, ref)
        if node is MISSING:
            raise ValueError(f"$ref {ref!r} points to nothing in the manifest schema")
        return node

    def ref(self, ref: str) -> Check:
        check = self.refs.get(ref)
        if check is None:
            slot: list[Check] = []

            def forward(value: Any, path: NodePath, errors: list[Violation]) -> None:
                # a recursive $ref is used before its compilation finishes
                slot[0](value, path, errors)

            self.refs[ref] = forward
            check = self.compile(self.resolve(ref))
            slot.append(check)
            self.refs[ref] = check
        return check

    def types(self, schema: Mapping[str, Any]) -> list[str] | None:
        """The JSON types a schema accepts, following `$ref`; None for any."""
        if "$ref" in schema:
            return self.types(self.resolve(schema["$ref"]))
        if "type" in schema:
            t = schema["type"]
            return [t] if isinstance(t, str) else list(t)
        if "anyOf" in schema:
            found: list[str] = []
            for branch in schema["anyOf"]:
                sub = self.types(branch)
                if sub is None:
                    return None
                found += [t for t in sub if t not in found]
            return found
        return None

    def compile(self, schema: Mapping[str, Any]) -> Check:
        unknown = set(schema) - _SUPPORTED - _ANNOTATIONS
        if unknown:
            raise ValueError(f"schema keywords not supported by the checker: {sorted(unknown)}")
        checks: list[Check] = []
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        if "type" in schema:
            checks.append(self.type_check(schema))
        if any(k in schema for k in _OBJECT_KEYWORDS):
            checks.append(_object(self, schema))
        for keyword, build in _BUILDERS.items():
            if keyword in schema:
                checks.append(build(self, schema))
        if len(checks) == 1:
            return checks[0]
        if not checks:
            return _accept

        def check_all(value: Any, path: NodePath, errors: list[Violation]) -> None:
            # Stop at the first failing keyword group: a wrong type makes the rest noise.
            before = len(errors)
            for check in checks:
                check(value, path, errors)
                if len(errors) != before:
                    return

        return check_all

    def type_check(self, schema: Mapping[str, Any]) -> Check:
        t = schema["type"]
        names = [t] if isinstance(t, str) else list(t)
        expected = " or ".join(_TYPE_NAMES[n] for n in names)

        def check_type(value: Any, path: NodePath, errors: list[Violation]) -> None:
            for name in names:
                if _is_type(value, name):
                    return
            errors.append(
                Violation(path=path, message=f"expected {expected}, got {_value_type(value)}")
            )

        return check_type


def _accept(value: Any, path: NodePath, errors: list[Violation]) -> None:
    return None


def _enum(c: _Compiler, schema: Mapping[str, Any]) -> Check:
    options = list(schema["enum"])
    texts = [str(o) for o in options]
    listed = ", ".join(texts)

    def check_enum(value: Any, path: NodePath, errors: list[Violation]) -> None:
        if value in options and not (isinstance(value, bool) and True not in options):
            return
        hint = did_you_mean(value, texts) if isinstance(value, str) else ""
        errors.append(
            Violation(
                path=path,
                message=f"expected one of {listed}; got {describe_value(value)}{hint}",
            )
        )

    return check_enum


def _const(c: _Compiler, schema: Mapping[str, Any]) -> Check:
    expected = schema["const"]

    def check_const(value: Any, path: NodePath, errors: list[Violation]) -> None:
        if value != expected or type(value) is not type(expected):
            errors.append(
                Violation(path=path, message=f"expected {expected!r}; got {describe_value(value)}")
            )

    return check_const


def _pattern(c: _Compiler, schema: Mapping[str, Any]) -> Check:
    regex = re.compile(schema["pattern"])
    message = schema.get("patternErrorMessage") or f"expected text matching {regex.pattern!r}"

    def check_pattern(value: Any, path: NodePath, errors: list[Violation]) -> None:
        if isinstance(value, str) and regex.search(value) is None:
            errors.append(Violation(path=path, message=f"{message}; got {describe_value(value)}"))

    return check_pattern


def _bound(keyword: str) -> Callable[[_Compiler, Mapping[str, Any]], Check]:
    def build(c: _Compiler, schema: Mapping[str, Any]) -> Check:
        limit = schema[keyword]
        measure, text = _BOUNDS[keyword]

        def check_bound(value: Any, path: NodePath, errors: list[Violation]) -> None:
            size = measure(value)
            if size is None:
                return
            low = keyword.startswith("min")
            if (size < limit) if low else (size > limit):
                errors.append(Violation(path=path, message=text.format(limit)))

        return check_bound

    return build


def _number(v: Any) -> float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _length(kind: type) -> Callable[[Any], int | None]:
    return lambda v: len(v) if isinstance(v, kind) else None


_BOUNDS: dict[str, tuple[Callable[[Any], float | None], str]] = {
    "minimum": (_number, "expected a number >= {}"),
    "minLength": (_length(str), "expected at least {} character(s)"),
    "minItems": (_length(list), "expected at least {} item(s)"),
    "minProperties": (_length(dict), "expected at least {} key(s)"),
    "maxProperties": (_length(dict), "expected at most {} key(s)"),
}


def _items(c: _Compiler, schema: Mapping[str, Any]) -> Check:
    item = c.compile(schema["items"])

    def check_items(value: Any, path: NodePath, errors: list[Violation]) -> None:
        if isinstance(value, list):
            for index, element in enumerate(value):
                item(element, (*path, index), errors)

    return check_items


def _object(c: _Compiler, schema: Mapping[str, Any]) -> Check:
    """properties, additionalProperties, required and propertyNames, in one pass."""
    props = {k: c.compile(v) for k, v in schema.get("properties", {}).items()}
    extra_schema = schema.get("additionalProperties", True)
    extra: Check | None = None if isinstance(extra_schema, bool) else c.compile(extra_schema)
    closed = extra_schema is False
    required = list(schema.get("required", ()))
    allowed = sorted(props)
    names_schema = schema.get("propertyNames")
    names = list(names_schema.get("enum", ())) if names_schema else None
    if names_schema and set(names_schema) - {"enum"} - _ANNOTATIONS:
        raise ValueError("propertyNames supports only enum")

    def check_object(value: Any, path: NodePath, errors: list[Violation]) -> None:
        if not isinstance(value, dict):
            return
        for key, element in value.items():
            sub = props.get(key)
            if sub is not None:
                sub(element, (*path, key), errors)
            elif names is not None and key not in names:
                errors.append(
                    Violation(
                        path=(*path, key),
                        message=f"unknown name {key!r}{did_you_mean(key, names)}"
                        f" (expected one of {', '.join(names)})",
                        at_key=True,
                    )
                )
            elif closed:
                errors.append(_unknown_key(key, path, allowed))
            elif extra is not None:
                extra(element, (*path, key), errors)
        for key in required:
            if key not in value:
                errors.append(Violation(path=path, message=f"missing required key {key!r}"))

    return check_object


def _unknown_key(key: str, path: NodePath, allowed: list[str]) -> Violation:
    where = f" in {field_path(path)}" if path else ""
    hint = did_you_mean(key, allowed)
    if not hint:
        hint = f"; expected one of {', '.join(allowed)}" if allowed else "; no keys are allowed"
    return Violation(path=(*path, key), message=f"unknown key {key!r}{where}{hint}", at_key=True)


def _alternatives(c: _Compiler, schema: Mapping[str, Any]) -> Check:
    """anyOf, and oneOf that is not a discriminated union: the branch matching the value's type
    (and, among mappings, the one whose required keys are most present) explains the error."""
    keyword = "anyOf" if "anyOf" in schema else "oneOf"
    raw = list(schema[keyword])
    branches = [c.compile(b) for b in raw]
    types = [c.types(b) for b in raw]
    required = [_required_of(c, b) for b in raw]
    expected = " or ".join(
        dict.fromkeys(_TYPE_NAMES[t] for ts in types if ts is not None for t in ts)
    )

    def check_alternatives(value: Any, path: NodePath, errors: list[Violation]) -> None:
        best: list[Violation] | None = None
        best_score = (-1, 0)
        for branch, branch_types, keys in zip(branches, types, required, strict=True):
            found: list[Violation] = []
            branch(value, path, found)
            if not found:
                return
            if branch_types is not None and not any(_is_type(value, t) for t in branch_types):
                continue
            present = sum(k in value for k in keys) if isinstance(value, dict) else 0
            score = (present, -len(found))
            if score > best_score:
                best, best_score = found, score
        if best is None:
            best = [Violation(path=path, message=f"expected {expected}, got {_value_type(value)}")]
        errors.extend(best)

    return check_alternatives


def _required_of(c: _Compiler, schema: Mapping[str, Any]) -> list[str]:
    if "$ref" in schema:
        return _required_of(c, c.resolve(schema["$ref"]))
    return list(schema.get("required", ()))


def _discriminators(c: _Compiler, branches: list[Mapping[str, Any]]) -> list[str] | None:
    """The key that picks each branch of a oneOf, or None if the branches have no such keys."""
    required = [_required_of(c, b) for b in branches]
    keys: list[str] = []
    for own in required:
        others = {k for r in required if r is not own for k in r}
        unique = [k for k in own if k not in others]
        if not unique:
            return None
        keys.append(unique[-1])
    return keys


def _one_of(c: _Compiler, schema: Mapping[str, Any]) -> Check:
    raw = list(schema["oneOf"])
    keys = _discriminators(c, raw)
    if keys is None:
        return _alternatives(c, schema)
    branches = [c.compile(b) for b in raw]
    listed = ", ".join(keys)
    known = sorted(
        {k for b in raw for k in c.resolve(b["$ref"]).get("properties", {})}
        if all("$ref" in b for b in raw)
        else set()
    )

    def check_one_of(value: Any, path: NodePath, errors: list[Violation]) -> None:
        if not isinstance(value, dict):
            return
        present = [i for i, k in enumerate(keys) if k in value]
        if len(present) == 1:
            branches[present[0]](value, path, errors)
            return
        if present:
            both = " and ".join(repr(keys[i]) for i in present)
            errors.append(
                Violation(
                    path=path, message=f"expected exactly one of the keys {listed}; got {both}"
                )
            )
            return
        errors.append(
            Violation(path=path, message=f"expected one of the keys {listed}; found none")
        )
        for key in value:
            if known and key not in known:
                errors.append(_unknown_key(key, path, known))

    return check_one_of


_BUILDERS: dict[str, Callable[[_Compiler, Mapping[str, Any]], Check]] = {
    "const": _const,
    "enum": _enum,
    "pattern": _pattern,
    "minimum": _bound("minimum"),
    "minLength": _bound("minLength"),
    "minItems": _bound("minItems"),
    "minProperties": _bound("minProperties"),
    "maxProperties": _bound("maxProperties"),
    "items": _items,
    "anyOf": _alternatives,
    "oneOf": _one_of,
}
# keywords _object checks in one pass over the mapping
_OBJECT_KEYWORDS = ("properties", "additionalProperties", "required", "propertyNames")
_SUPPORTED = frozenset({"$ref", "type", *_BUILDERS, *_OBJECT_KEYWORDS})


def compile_schema(root: Mapping[str, Any], pointer: str = "#") -> Check:
    """A checker for the schema at `pointer` inside `root`: `check(value, path, errors)`.

    Raises:
        ValueError: the schema uses a keyword this checker does not implement.
    """
    compiler = _Compiler(root)
    return compiler.compile(root if pointer == "#" else compiler.resolve(pointer))
