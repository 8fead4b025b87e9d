"""Gemini schemas (`gemini_schema`): a tool's schema in the subset Gemini accepts.

Gemini takes a subset of JSON Schema (OpenAPI 3.0 style); `gemini_schema` documents what it
converts and drops. Keywords it drops only ever loosen the schema the model sees: the executor
still validates every call against the tool's own schema, so the model reads a precise error
instead. Separate because it is a schema rewrite with its own rules, used by `gemini_tools`
(unless `json_schema=True`); `$ref`s resolve as in strict mode (`strict._resolve_ref`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import StrictSchemaError, UsageError
from .strict import _resolve_ref

__all__ = ["gemini_schema"]


_GEMINI_RENAMED = {
    "anyOf": "any_of",
    "minItems": "min_items",
    "maxItems": "max_items",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minProperties": "min_properties",
    "maxProperties": "max_properties",
    "propertyOrdering": "property_ordering",
}
_GEMINI_KEPT = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "properties", "required",
        "items", "minimum", "maximum", "pattern", "example", "default", *_GEMINI_RENAMED,
    }
)  # fmt: skip
_GEMINI_FORMATS = {
    "STRING": frozenset({"enum", "date-time"}),
    "INTEGER": frozenset({"int32", "int64"}),
    "NUMBER": frozenset({"float", "double"}),
}


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` in the subset Gemini's `Schema` accepts (OpenAPI 3.0 style), snake_case keys.

    - `$ref`s are inlined (`$defs` and `definitions` disappear); a recursive reference stops
      at the second level with a description saying it repeats the enclosing value;
    - `type` becomes upper case; a type list with `null` becomes `nullable: true`; several
      non-null types become `any_of`; a missing type is inferred from `properties`/`items`;
    - `oneOf` becomes `any_of`; null variants of a union become `nullable`; a union left with
      one variant is merged into its parent; `allOf` is merged into one schema;
    - `const` becomes a one-value `enum` for strings; Gemini's `enum` holds strings only, so a
      non-string `enum` or `const` is dropped and its values listed in the description;
    - `exclusiveMinimum`/`exclusiveMaximum` become `minimum`/`maximum`; `examples` gives its
      first value to `example`; `prefixItems` become `items: {any_of: [...]}`;
    - `format` is kept only where Gemini knows it (enum and date-time for strings, int32 and
      int64, float and double);
    - dropped: `additionalProperties`, `patternProperties`, `multipleOf`, `uniqueItems`, `not`,
      conditionals, `$schema`, `$id`, `$comment` and every other keyword not listed in
      `google.genai.types.Schema`.

    Objects without properties (free-form maps) stay bare `OBJECT`s with a description saying
    the keys are free (and the values' type): Gemini has no way to say "any keys" and may
    refuse them; `gemini_tools(json_schema=True)` sends such schemas as they are.
    """
    return _gemini(schema, schema, frozenset())


def _gemini(schema: Any, root: Mapping[str, Any], expanding: frozenset[str]) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        return {}  # `true`/`false` schemas: Gemini has no equivalent, leave the value open
    node: dict[str, Any] = dict(schema)
    ref = node.pop("$ref", None)
    if ref is not None:
        target = _gemini_resolve(root, ref)
        if ref in expanding:
            repeated = _gemini_type(target) or {}
            name = ref.rsplit("/", 1)[-1] or "root"
            return {**repeated, "description": f"Same structure as the enclosing {name} value."}
        node = {**target, **node}
        expanding = expanding | {ref}
    for sub in node.pop("allOf", ()):
        node = _merge(node, sub if isinstance(sub, Mapping) else {})
    if "oneOf" in node:
        node["anyOf"] = [*node.get("anyOf", ()), *node.pop("oneOf")]

    out: dict[str, Any] = {}
    notes: list[str] = []
    declared = node.get("type")
    types: list[str] = [declared] if isinstance(declared, str) else list(declared or ())
    if "null" in types:
        types.remove("null")
        out["nullable"] = True
    if not types and "properties" in node:
        types = ["object"]
    if not types and "items" in node:
        types = ["array"]
    if not types and _all_strings(node.get("enum", [])) and "enum" in node:
        types = ["string"]

    if len(types) > 1:
        # Gemini's `type` is one type: split into a union, each variant keeping the keywords
        # (a variant ignores those of other types), the words staying on the union.
        outer = ("title", "description", "default")
        shared = {k: v for k, v in node.items() if k not in outer}
        variants = [_gemini({**shared, "type": t}, root, expanding) for t in types]
        return {**out, **{k: node[k] for k in outer if k in node}, "any_of": variants}
    if types:
        out["type"] = types[0].upper()

    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "enum" in node:
        values = list(node.pop("enum"))
        if None in values:
            values.remove(None)
            out["nullable"] = True
        if _all_strings(values):
            out["enum"] = values
            out.setdefault("type", "STRING")
        else:
            notes.append("One of: " + ", ".join(json.dumps(v, ensure_ascii=False) for v in values))

    if "anyOf" in node:
        variants = [_gemini(v, root, expanding) for v in node.pop("anyOf")]
        kept = [v for v in variants if v != {"nullable": True}]  # what {"type": "null"} becomes
        if len(kept) < len(variants):
            out["nullable"] = True
        if len(kept) > 1 and all(v.keys() == {"type", "enum"} for v in kept):
            # a union of string constants (Literal, oneOf of consts) reads best as one enum
            kept = [{"type": "STRING", "enum": [e for v in kept for e in v["enum"]]}]
        if len(kept) == 1:
            merged = {**kept[0], **out}
            if kept[0].get("nullable"):
                merged["nullable"] = True
            out = merged
        elif kept:
            out["any_of"] = kept

    if "properties" in node:
        properties = {
            name: _gemini(sub, root, expanding) for name, sub in node.pop("properties").items()
        }
        if properties:
            out["properties"] = properties
        required = [name for name in node.pop("required", ()) if name in properties]
        if required:
            out["required"] = required
    if "items" in node or "prefixItems" in node:
        prefix = list(node.pop("prefixItems", ()))
        items = node.pop("items", None)
        if isinstance(items, Mapping):
            prefix.append(items)
        if len(prefix) == 1:
            out["items"] = _gemini(prefix[0], root, expanding)
        elif prefix:
            out["items"] = {"any_of": [_gemini(v, root, expanding) for v in prefix]}
    if "exclusiveMinimum" in node and "minimum" not in node:
        node["minimum"] = node["exclusiveMinimum"]
    if "exclusiveMaximum" in node and "maximum" not in node:
        node["maximum"] = node["exclusiveMaximum"]
    examples = node.get("examples")
    if isinstance(examples, list) and examples and "example" not in node:
        node["example"] = examples[0]
    fmt = node.pop("format", None)
    if fmt in _GEMINI_FORMATS.get(out.get("type", ""), ()):
        out["format"] = fmt
    extra = node.get("additionalProperties", True)
    if out.get("type") == "OBJECT" and "properties" not in out and extra is not False:
        # Gemini has no way to say "any keys": at least tell the model in words
        value_type = _gemini_type(extra) if isinstance(extra, Mapping) else None
        kind = f" whose values are of type {value_type['type']}" if value_type else ""
        notes.append(f"An object with keys of your choice{kind}.")

    for key, value in node.items():
        name = _GEMINI_RENAMED.get(key, key)
        if key in _GEMINI_KEPT and name not in out and key not in ("type", "required"):
            out[name] = value
    if notes:
        out["description"] = " ".join([out.get("description", ""), *notes]).strip()
    return out


def _gemini_type(target: Mapping[str, Any]) -> dict[str, Any] | None:
    declared = target.get("type")
    if isinstance(declared, str) and declared != "null":
        return {"type": declared.upper()}
    if "properties" in target:
        return {"type": "OBJECT"}
    return None


def _gemini_resolve(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    try:
        return _resolve_ref(root, ref, "#")
    except StrictSchemaError as exc:
        raise UsageError(f"cannot convert the schema for Gemini: {exc}") from exc


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`allOf` flattened: properties and required lists unite, other keys keep the first."""
    merged = {**extra, **base}
    if "properties" in base or "properties" in extra:
        merged["properties"] = {**extra.get("properties", {}), **base.get("properties", {})}
    required = [*base.get("required", ()), *extra.get("required", ())]
    if required:
        merged["required"] = list(dict.fromkeys(required))
    return merged


def _all_strings(values: Iterable[Any]) -> bool:
    return all(isinstance(v, str) for v in values)
