"""OpenAI strict mode (`strict_schema`): a tool's schema in the stricter shape strict mode needs.

Strict mode (Structured Outputs for function calls) wants every property required, no free keys
and only some keywords; `strict_schema` documents the rewrite. Keywords it drops only ever loosen
the schema the model sees: the executor still validates every call against the tool's own
schema, so the model reads a precise error instead. Separate because it is a schema rewrite with
its own rules, used by the OpenAI tool definitions only when asked for `strict`; the Gemini
conversion reuses its `$ref` resolution (`_resolve_ref`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import StrictSchemaError
from ..schema import enum_type
from ..schema.refs import MISSING, resolve_pointer

__all__ = ["strict_schema"]


_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum",
        "const", "$ref", "$defs", "definitions", "description", "title", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
        "maxItems",
    }
)  # fmt: skip
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean"})


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema rewritten for OpenAI's strict mode (Structured Outputs for function calls).

    - every object gets `additionalProperties: false` and lists all its properties in
      `required`;
    - a property that was optional becomes nullable: `type: [T, "null"]` for scalars,
      `anyOf: [..., {"type": "null"}]` for objects, arrays, `$ref`s and unions (and `null`
      joins its `enum`). The executor drops those nulls before validating (they mean "not
      given"). A nullable object or array already written `type: [T, "null"]` is rewritten
      the `anyOf` way too, the only one strict mode accepts for them;
    - a schema of only `enum` or `const` of scalars gets the `type` of its values (newer
      models require a `type` outside unions and `$ref`s);
    - `$ref` to `#`, `#/$defs/...` or `#/definitions/...` stays (strict mode supports them,
      recursion included); a `$ref` with sibling keywords or to another place is inlined;
    - `oneOf` becomes `anyOf`; an `allOf` of one schema is merged in; `prefixItems` become
      `items: {anyOf: [...]}`;
    - keywords strict mode rejects are dropped: everything but type, properties, required,
      additionalProperties, items, anyOf, enum, const, $ref, $defs, definitions, title,
      description, pattern, format (date-time, time, date, duration, email, hostname, ipv4,
      ipv6, uuid), minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minItems,
      maxItems. A dropped non-null `default` is added to the description.

    Dropping keywords only loosens what the model is held to; the executor still validates
    against the original schema.

    Raises:
        StrictSchemaError: the schema cannot be made strict without changing what it accepts:
            an object with `additionalProperties` other than false or with `patternProperties`,
            a nested object without `properties`, an array without `items`, a schema that
            accepts any value, an `allOf` of several schemas, a root `anyOf`, or a `$ref`
            that does not resolve in the document.
    """
    root = dict(schema)
    if "anyOf" in root or "oneOf" in root or _types(root) - {"object"}:
        raise StrictSchemaError(
            "#: strict mode needs a plain object schema at the root (no anyOf/oneOf, no other "
            "type); send this tool non-strict or give it one object schema"
        )
    return _strict(root, root, "#", frozenset(), is_root=True)


def _strict(
    node: Any,
    root: Mapping[str, Any],
    path: str,
    inlining: frozenset[str],
    *,
    is_root: bool = False,
) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        raise StrictSchemaError(
            f"{path}: expected a schema object, got {node!r}; strict mode cannot express "
            "boolean schemas"
        )
    node = dict(node)
    ref = node.get("$ref")
    if ref is not None:
        if len(node) == 1 and _is_defs_ref(ref):
            _resolve_ref(root, ref, path)
            return {"$ref": ref}
        if ref in inlining:
            raise StrictSchemaError(
                f"{path}: $ref {ref!r} refers to itself through a place strict mode cannot "
                "reference; move the recursive schema under $defs"
            )
        target = _resolve_ref(root, ref, path)
        node.pop("$ref")
        return _strict({**target, **node}, root, path, inlining | {ref}, is_root=is_root)

    if "oneOf" in node:
        if "anyOf" in node:
            raise StrictSchemaError(f"{path}: both anyOf and oneOf; strict mode has only anyOf")
        node["anyOf"] = node.pop("oneOf")
    all_of = node.pop("allOf", None)
    if all_of is not None:
        if len(all_of) != 1 or not isinstance(all_of[0], Mapping):
            raise StrictSchemaError(
                f"{path}: allOf of {len(all_of)} schemas; strict mode supports no allOf, merge "
                "them into one schema"
            )
        node = {**all_of[0], **node}
        return _strict(node, root, path, inlining, is_root=is_root)

    types = _types(node)
    if not types and "properties" in node:
        node["type"] = "object"
    elif not types and ("items" in node or "prefixItems" in node):
        node["type"] = "array"
    elif not types and ("enum" in node or "const" in node):
        # newer models refuse a schema without `type` unless it is a union or a $ref; an enum
        # of objects or arrays stays untyped (typing it would call for properties or items)
        inferred = enum_type(node["enum"] if "enum" in node else [node["const"]])
        if inferred is not None:
            node["type"] = inferred
    types = _types(node)
    if "object" in types:
        _strict_object(node, root, path, inlining, is_root=is_root)
    if "array" in types:
        _strict_array(node, root, path, inlining)
    if "anyOf" in node:
        node["anyOf"] = [
            _strict(variant, root, f"{path}/anyOf/{i}", inlining)
            for i, variant in enumerate(node["anyOf"])
        ]
    for defs_key in ("$defs", "definitions"):
        if defs_key in node:
            node[defs_key] = {
                name: _strict(sub, root, f"{path}/{defs_key}/{name}", inlining)
                for name, sub in node[defs_key].items()
            }
    if not (types or "anyOf" in node or "enum" in node or "const" in node):
        raise StrictSchemaError(
            f"{path}: accepts a value of any type, which strict mode cannot express; give it a type"
        )

    default = node.get("default")
    if default is not None:
        shown = json.dumps(default, ensure_ascii=False)
        node["description"] = f"{node.get('description', '')} (default: {shown})".lstrip()
    if node.get("format") not in _STRICT_FORMATS:
        node.pop("format", None)
    kept = {key: value for key, value in node.items() if key in _STRICT_KEYWORDS}
    if "null" in types and types & {"object", "array"}:
        # `type: ["array", "null"]` is refused ("array schema missing items"): say it with anyOf
        declared = [t for t in kept["type"] if t != "null"]
        kept["type"] = declared[0] if len(declared) == 1 else declared
        return _nullable(kept)
    return kept


def _strict_object(
    node: dict[str, Any],
    root: Mapping[str, Any],
    path: str,
    inlining: frozenset[str],
    *,
    is_root: bool,
) -> None:
    extra = node.get("additionalProperties", False)
    if extra is not False or "patternProperties" in node:
        raise StrictSchemaError(
            f"{path}: an object with free keys (additionalProperties or patternProperties); "
            "strict mode only has fixed properties"
        )
    properties = node.get("properties")
    if properties is None and not is_root:
        raise StrictSchemaError(
            f"{path}: an object without properties accepts any keys; strict mode only has "
            "fixed properties"
        )
    properties = properties or {}
    was_required = set(node.get("required", ()))
    converted: dict[str, Any] = {}
    for name, sub in properties.items():
        schema = _strict(sub, root, f"{path}/properties/{name}", inlining)
        converted[name] = schema if name in was_required else _nullable(schema)
    node["properties"] = converted
    node["required"] = list(converted)
    node["additionalProperties"] = False


def _strict_array(
    node: dict[str, Any], root: Mapping[str, Any], path: str, inlining: frozenset[str]
) -> None:
    items = node.get("items")
    prefix = node.pop("prefixItems", None)
    if prefix is not None:
        variants = [*prefix, *([items] if isinstance(items, Mapping) else [])]
        unique = [v for i, v in enumerate(variants) if v not in variants[:i]]
        items = unique[0] if len(unique) == 1 else {"anyOf": unique}
    if not isinstance(items, Mapping) or not items:
        raise StrictSchemaError(
            f"{path}: an array without an items schema accepts anything; strict mode needs "
            "one (e.g. list[str] instead of list)"
        )
    node["items"] = _strict(items, root, f"{path}/items", inlining)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` that also accepts null, in the form strict mode accepts."""
    types = _types(schema)
    if "null" in types:
        return schema
    if types and types <= _SCALAR_TYPES and "const" not in schema:
        declared = schema["type"]
        listed = [declared] if isinstance(declared, str) else list(declared)
        nullable = {**schema, "type": [*listed, "null"]}
        if "enum" in schema and None not in schema["enum"]:
            nullable["enum"] = [*schema["enum"], None]
        return nullable
    if "anyOf" in schema and "type" not in schema:
        if any(variant.get("type") == "null" for variant in schema["anyOf"]):
            return schema
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    outer = {key: schema[key] for key in ("title", "description") if key in schema}
    inner = {key: value for key, value in schema.items() if key not in outer}
    return {**outer, "anyOf": [inner, {"type": "null"}]}


def _types(node: Mapping[str, Any]) -> set[str]:
    declared = node.get("type")
    if declared is None:
        return set()
    return {declared} if isinstance(declared, str) else set(declared)


def _is_defs_ref(ref: str) -> bool:
    return ref == "#" or ref.startswith(("#/$defs/", "#/definitions/"))


def _resolve_ref(root: Mapping[str, Any], ref: str, path: str) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        raise StrictSchemaError(f"{path}: $ref {ref!r} points outside this schema; inline it first")
    target = resolve_pointer(root, ref)
    if target is MISSING:
        raise StrictSchemaError(f"{path}: $ref {ref!r} does not resolve in this schema")
    if not isinstance(target, Mapping):
        raise StrictSchemaError(f"{path}: $ref {ref!r} resolves to {target!r}, not a schema")
    return target
