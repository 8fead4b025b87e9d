"""Meta-checks (`check_schema`): is a schema valid Draft 2020-12, do its local `$ref`s resolve,
and does every reference stay inside the schema's own document?

A reference to another document (`"$ref": "https://..."`, or a relative one that leaves the
document) is refused: resolving it would fetch a URL that a tool definition chose, from
whatever machine validates the call. Validation never fetches either (see `validate`); refusing
at build makes the mistake visible where it was made.
Runs once per tool, at build. A fast structural pass accepts the common schemas; anything it is
not sure about goes through jsonschema's meta-schema validation, and `jsonschema` is imported only
then. Separate from validation, which checks arguments against a schema on every call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any, Final

from .._suggest import did_you_mean
from ..errors import ConfigError
from ._paths import _json_path
from .refs import MISSING, resolve_pointer

__all__ = ["SchemaPath", "check_schema", "schema_problems"]


_DRAFT_2020_12: Final = "https://json-schema.org/draft/2020-12/schema"
_SIMPLE_TYPES: Final = ("array", "boolean", "integer", "null", "number", "object", "string")
_SCHEMA_MAP_KEYS: Final = frozenset({"properties", "patternProperties", "$defs", "definitions",
                                     "dependentSchemas"})
_SCHEMA_KEYS: Final = frozenset({"additionalProperties", "items", "not", "if", "then", "else",
                                 "contains", "propertyNames", "contentSchema"})
_SCHEMA_ARRAY_KEYS: Final = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_NON_NEGATIVE_KEYS: Final = frozenset({"minLength", "maxLength", "minItems", "maxItems",
                                       "minProperties", "maxProperties", "minContains",
                                       "maxContains"})
_NUMBER_KEYS: Final = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_STRING_KEYS: Final = frozenset({"format", "title", "description", "$comment", "contentEncoding",
                                 "contentMediaType"})
_BOOL_KEYS: Final = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
_FREE_KEYS: Final = frozenset({"default", "const"})
_META_KNOWN: Final = frozenset(
    {"$anchor", "$comment", "$defs", "$dynamicAnchor", "$dynamicRef", "$id", "$recursiveAnchor",
     "$recursiveRef", "$ref", "$schema", "$vocabulary", "additionalProperties", "allOf", "anyOf",
     "const", "contains", "contentEncoding", "contentMediaType", "contentSchema", "default",
     "definitions", "dependencies", "dependentRequired", "dependentSchemas", "deprecated",
     "description", "else", "enum", "examples", "exclusiveMaximum", "exclusiveMinimum", "format",
     "if", "items", "maxContains", "maxItems", "maxLength", "maxProperties", "maximum",
     "minContains", "minItems", "minLength", "minProperties", "minimum", "multipleOf", "not",
     "oneOf", "pattern", "patternProperties", "prefixItems", "properties", "propertyNames",
     "readOnly", "required", "then", "title", "type", "unevaluatedItems",
     "unevaluatedProperties", "uniqueItems", "writeOnly"}
)
"""Every keyword the 2020-12 meta-schema constrains; any other key is free-form there."""
_SAFE_REF: Final = re.compile(r"#(/[A-Za-z0-9_.~$%-]*)*")


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_non_negative_int(value: Any) -> bool:
    return (type(value) is int or (type(value) is float and value.is_integer())) and value >= 0


def _quick_meta_ok(schema: Any) -> bool:
    """True only if `schema` is certainly valid against the 2020-12 meta-schema.

    Mirrors the meta-schema for the keywords tools use; anything else (and any doubt) says False
    and lets jsonschema decide, so this may be stricter than the meta-schema but never looser.
    """
    if schema is True or schema is False:
        return True
    if type(schema) is not dict:
        return False
    for key, value in schema.items():
        if key not in _META_KNOWN:
            continue
        if key in _SCHEMA_KEYS:
            ok = _quick_meta_ok(value)
        elif key in _SCHEMA_MAP_KEYS:
            ok = type(value) is dict and all(_quick_meta_ok(v) for v in value.values())
            if ok and key == "patternProperties":
                ok = all(_regex_ok(p) for p in value)
        elif key in _SCHEMA_ARRAY_KEYS:
            ok = type(value) is list and bool(value) and all(_quick_meta_ok(v) for v in value)
        elif key in _NON_NEGATIVE_KEYS:
            ok = _is_non_negative_int(value)
        elif key in _NUMBER_KEYS:
            ok = _is_number(value)
        elif key in _STRING_KEYS:
            ok = type(value) is str
        elif key in _BOOL_KEYS:
            ok = type(value) is bool
        elif key in _FREE_KEYS:
            ok = True
        elif key == "type":
            ok = value in _SIMPLE_TYPES if type(value) is str else (
                type(value) is list
                and bool(value)
                and all(type(v) is str and v in _SIMPLE_TYPES for v in value)
                and len(set(value)) == len(value)
            )
        elif key in ("enum", "examples"):
            ok = type(value) is list
        elif key == "required":
            ok = _string_array_ok(value)
        elif key == "dependentRequired":
            ok = type(value) is dict and all(_string_array_ok(v) for v in value.values())
        elif key == "multipleOf":
            ok = _is_number(value) and value > 0
        elif key == "pattern":
            ok = type(value) is str and _regex_ok(value)
        elif key == "$ref":
            ok = type(value) is str and _SAFE_REF.fullmatch(value) is not None
        elif key == "$schema":
            ok = value == _DRAFT_2020_12
        else:
            ok = False
        if not ok:
            return False
    return True


def _string_array_ok(value: Any) -> bool:
    return (
        type(value) is list
        and all(type(v) is str for v in value)
        and len(set(value)) == len(value)
    )


@functools.lru_cache(maxsize=512)
def _regex_ok(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def check_schema(schema: Any, *, field: str = "parameters") -> None:
    """Check that `schema` is a valid Draft 2020-12 schema whose `$ref`s all resolve inside it.

    Meant for build time. Common schemas are checked by a fast structural pass; anything it is
    not sure about goes through jsonschema's meta-schema validation.

    Raises:
        ConfigError: every problem, each with the JSON path of the bad part (`field` names the
            configuration key the schema came from).
    """
    problems = schema_problems(schema)
    if problems:
        listed = "; ".join(f"{_shown(path)}: {message}" for path, message in problems)
        raise ConfigError(f"{_lead(problems)}{listed}", field=field)


SchemaPath = tuple[str | int, ...]
"""Where in a schema a problem is: keys and indexes from its root."""


def schema_problems(schema: Any) -> list[tuple[SchemaPath, str]]:
    """Every problem `check_schema` reports, each with the path of the bad part, so that a
    manifest can locate each at its own line (`parameters.properties.path.type`)."""
    if not _quick_meta_ok(schema):
        problems = _meta_problems(schema)
        if problems:
            return problems
    foreign = _foreign_refs(schema)
    if foreign:
        return [
            (
                path,
                f"{ref!r} names another document: remote references are never fetched; copy the "
                "schema it names under `$defs` and point to it with '#/$defs/NAME'",
            )
            for path, ref in foreign
        ]
    if isinstance(schema, dict) and not _has_key(schema, "$id"):
        for path, ref in _local_refs(schema, ()):
            if resolve_pointer(schema, ref) is MISSING:
                return [
                    (
                        path,
                        f"$ref {ref!r} points to nothing in this schema; define it under "
                        "`$defs` or fix the reference",
                    )
                ]
    return []


def _lead(problems: list[tuple[SchemaPath, str]]) -> str:
    """The meta-schema's problems are introduced as such; a dangling `$ref` speaks for itself."""
    refs = (("$ref",), ("$dynamicRef",))
    return "" if problems[0][0][-1:] in refs else "not a valid JSON Schema (Draft 2020-12): "


def _meta_problems(schema: Any) -> list[tuple[SchemaPath, str]]:
    from jsonschema import Draft202012Validator

    meta = Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    problems: list[tuple[SchemaPath, str]] = []
    for error in meta.iter_errors(schema):
        path = tuple(error.absolute_path)
        message = error.message
        if error.absolute_path and error.absolute_path[-1] == "type" and isinstance(
            error.instance, str
        ):
            expected = ", ".join(_SIMPLE_TYPES)
            message = (
                f"unknown type {error.instance!r}; expected one of {expected}"
                + did_you_mean(error.instance, _SIMPLE_TYPES)
            )
        elif path[-1:] == ("required",) and isinstance(error.instance, str):
            message += f"; write a list of names: required: [{error.instance}]"
        problems.append((path, message))
    return problems


def _has_key(node: Any, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(_has_key(v, key) for v in node.values())
    if isinstance(node, list):
        return any(_has_key(v, key) for v in node)
    return False


_REF_KEYS: Final = ("$ref", "$dynamicRef")
_DATA_KEYS: Final = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are data, not schemas: a `$ref` or `$id` there means nothing."""


def _foreign_refs(schema: Any) -> list[tuple[SchemaPath, str]]:
    """`(path, ref)` of every reference that leaves the document: resolved against the
    `$id`s around it (as jsonschema's `referencing` does, with `urljoin`), it names neither the
    document, nor a resource the document declares with `$id`, nor a meta-schema that ships with
    jsonschema (which it resolves without fetching). An allow-list: nothing else is local."""
    from urllib.parse import urldefrag, urljoin

    resources: set[str] = {""}
    refs: list[tuple[SchemaPath, str, str]] = []

    def walk(node: Any, path: SchemaPath, base: str) -> None:
        if isinstance(node, dict):
            declared = node.get("$id")
            if isinstance(declared, str):
                base = urldefrag(urljoin(base, declared))[0]
                resources.add(base)
            for key in _REF_KEYS:
                ref = node.get(key)
                if isinstance(ref, str):
                    refs.append(((*path, key), ref, urldefrag(urljoin(base, ref))[0]))
            for key, value in node.items():
                if key not in _DATA_KEYS:
                    walk(value, (*path, key), base)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, (*path, i), base)

    walk(schema, (), "")
    foreign = [(path, ref) for path, ref, target in refs if target not in resources]
    if not foreign:
        return []
    from jsonschema_specifications import REGISTRY  # bundled with jsonschema: no fetch

    return [(path, ref) for path, ref in foreign if urldefrag(ref)[0] not in REGISTRY]


def _local_refs(node: Any, path: SchemaPath) -> Iterable[tuple[SchemaPath, str]]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            yield (*path, "$ref"), ref
        for key, value in node.items():
            if key not in ("const", "enum", "default", "examples"):
                yield from _local_refs(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _local_refs(value, (*path, i))


def _shown(path: SchemaPath) -> str:
    """`$.properties.x.type`; a `$ref` keeps its `$` (`$.x.$ref`)."""
    if path[-1:] in (("$ref",), ("$dynamicRef",)):
        return f"{_json_path(path[:-1])}.{path[-1]}"
    return _json_path(path)
