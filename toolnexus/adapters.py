"""Provider adapters: tools out to a model, its tool calls back in, results out again.

Every provider gets the same three steps, as flat functions and as one `Adapter` per provider
(`get_adapter("anthropic")`), so an agent loop can be written once:

```python
adapter = get_adapter("anthropic")
response = client.messages.create(model=..., messages=messages,
                                  tools=adapter.tools(toolkit.tools()))
calls = adapter.parse_calls(response)
if calls:
    messages.append({"role": "assistant", "content": response.content})
    messages.extend(adapter.format_results(calls, toolkit.execute_many(calls)))
```

Inputs may be plain dicts (decoded JSON) or the official SDKs' objects (`openai`, `anthropic`,
`google-genai`): anything with `model_dump()` is read through it. None of those SDKs is imported
here; `mcp` is imported only by `mcp_tools` and `mcp_result`.

What each provider can carry back from a tool:

| provider          | error flag            | images                                         |
|-------------------|-----------------------|------------------------------------------------|
| OpenAI Chat       | none: "Error: " text  | not in tool messages; `openai_chat_results`    |
|                   |                       | adds one user message with them after the      |
|                   |                       | tool messages                                  |
| OpenAI Responses  | none: "Error: " text  | `input_image` items in the output; PDFs as     |
|                   |                       | `input_file`                                   |
| Anthropic         | `is_error`            | `image` blocks; PDFs as `document` blocks      |
| Gemini            | `response.error`      | `function_response.parts` (`inline_data`;      |
|                   |                       | multimodal function responses, Gemini 3+)      |
| MCP               | `is_error`            | image, audio, embedded and linked resources    |

A part a provider cannot carry becomes a short bracketed note in the text (its kind, type and
size), so the model knows something was returned. Results always send `Result.text`, never
`Result.structured` on its own: the text is what middleware such as `truncate` has bounded.

Gemini takes a subset of JSON Schema (OpenAPI 3.0 style); `gemini_schema` documents what it
converts and drops. OpenAI's strict mode needs a stricter shape; `strict_schema` documents it.
Keywords either conversion drops only ever loosen the schema the model sees: the executor still
validates every call against the tool's own schema, so the model reads a precise error instead.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._refs import MISSING, resolve_pointer
from ._suggest import did_you_mean
from .base import AudioPart, ImagePart, Part, ResourcePart, Result, Tool, ToolCall
from .errors import StrictSchemaError, UsageError
from .schema import enum_type

if TYPE_CHECKING:
    import mcp.types

__all__ = [
    "PROVIDERS",
    "Adapter",
    "anthropic_result",
    "anthropic_results",
    "anthropic_tools",
    "gemini_result",
    "gemini_results",
    "gemini_schema",
    "gemini_tools",
    "get_adapter",
    "mcp_result",
    "mcp_tools",
    "openai_chat_result",
    "openai_chat_results",
    "openai_chat_tools",
    "openai_responses_result",
    "openai_responses_results",
    "openai_responses_tools",
    "parse_anthropic_calls",
    "parse_gemini_calls",
    "parse_openai_chat_calls",
    "parse_openai_responses_calls",
    "strict_schema",
]

Message = dict[str, Any]
"""One provider message, content block or input item, as the provider's JSON."""


# --- tool definitions ----------------------------------------------------------------------


def openai_chat_tools(tools: Iterable[Tool], *, strict: bool = False) -> list[Message]:
    """Tool definitions for OpenAI Chat Completions (`tools=` of `chat.completions.create`).

    Args:
        tools: the tools to offer, in the order given (a registry lists them sorted by name,
            which keeps prompts byte-identical across requests for prompt caching).
        strict: send each schema through `strict_schema` and mark it `strict`. A tool whose
            schema strict mode cannot express is sent as it is with `strict: false`.

    The `parameters` dicts are the tools' own (not copies) unless converted: do not mutate them.
    """
    result: list[Message] = []
    for tool in tools:
        function: Message = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"], function["strict"] = _openai_parameters(tool, strict)
        result.append({"type": "function", "function": function})
    return result


def openai_responses_tools(tools: Iterable[Tool], *, strict: bool = False) -> list[Message]:
    """Tool definitions for the OpenAI Responses API (`tools=` of `responses.create`).

    Same as `openai_chat_tools` in the Responses' flat shape. `strict` is always written out
    because the Responses API treats a function tool without it as strict.
    """
    result: list[Message] = []
    for tool in tools:
        item: Message = {"type": "function", "name": tool.name}
        if tool.description:
            item["description"] = tool.description
        item["parameters"], item["strict"] = _openai_parameters(tool, strict)
        result.append(item)
    return result


def anthropic_tools(tools: Iterable[Tool]) -> list[Message]:
    """Tool definitions for the Anthropic Messages API (`tools=` of `messages.create`)."""
    result: list[Message] = []
    for tool in tools:
        item: Message = {"name": tool.name}
        if tool.description:
            item["description"] = tool.description
        item["input_schema"] = tool.parameters
        result.append(item)
    return result


def gemini_tools(tools: Iterable[Tool], *, json_schema: bool = False) -> list[Message]:
    """Tool definitions for Gemini: `[{"function_declarations": [...]}]`, ready for
    `GenerateContentConfig(tools=...)` of `google-genai` (or the REST `tools` field).

    Args:
        tools: the tools to offer, in the order given.
        json_schema: send each schema unchanged as `parameters_json_schema`, which newer
            Gemini models accept (full JSON Schema: `$ref`, `additionalProperties`, maps...).
            By default each schema goes through `gemini_schema` into `parameters`, which every
            Gemini model and Vertex AI accept; a tool without parameters then gets none at
            all, since Gemini rejects an OBJECT schema with empty `properties`.
    """
    declarations: list[Message] = []
    for tool in tools:
        declaration: Message = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        if json_schema:
            declaration["parameters_json_schema"] = tool.parameters
        elif tool.parameters.get("properties"):
            declaration["parameters"] = gemini_schema(tool.parameters)
        declarations.append(declaration)
    return [{"function_declarations": declarations}] if declarations else []


def mcp_tools(tools: Iterable[Tool]) -> list[mcp.types.Tool]:
    """`mcp.types.Tool`s, for serving the tools over MCP.

    The flags become the annotations (`read_only` → `readOnlyHint`, `destructive`,
    `idempotent`, `open_world`) and `title` goes both on the tool and in the annotations.
    """
    from mcp import types  # lazy: `import mcp` takes about a second

    return [
        types.Tool(
            name=tool.name,
            title=tool.title,
            description=tool.description or None,
            input_schema=tool.parameters,
            output_schema=tool.output_schema,
            annotations=types.ToolAnnotations(
                title=tool.title,
                read_only_hint=tool.read_only,
                destructive_hint=tool.destructive,
                idempotent_hint=tool.idempotent,
                open_world_hint=tool.open_world,
            ),
        )
        for tool in tools
    ]


def _openai_parameters(tool: Tool, strict: bool) -> tuple[dict[str, Any], bool]:
    if strict:
        try:
            return strict_schema(tool.parameters), True
        except StrictSchemaError:
            # One tool that cannot be strict must not stop the whole request: it goes out
            # non-strict, which `"strict": false` in the definition makes visible.
            pass
    return tool.parameters, False


# --- OpenAI strict mode --------------------------------------------------------------------

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


# --- Gemini schemas ------------------------------------------------------------------------

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


# --- parsing tool calls --------------------------------------------------------------------


def parse_openai_chat_calls(message: Any) -> list[ToolCall]:
    """The function calls in an OpenAI chat message.

    Args:
        message: a `ChatCompletionMessage` or its dict (`choices[0].message`); a whole
            `ChatCompletion` is accepted too and its first choice read.

    Returns:
        One `ToolCall` per `tool_calls` entry of type `function`, in order, with the
        arguments as the JSON text the model wrote (an empty string becomes `{}`). Custom
        (free-form) tool calls are skipped: toolnexus never declares custom tools.
    """
    data = _mapping(message, "an OpenAI chat message")
    if "choices" in data:
        choices = data["choices"] or []
        if not choices:
            return []
        data = _mapping(_mapping(choices[0], "a chat choice").get("message"), "a chat message")
    calls: list[ToolCall] = []
    for raw in data.get("tool_calls") or ():
        item = _mapping(raw, "a chat tool call")
        if item.get("type", "function") != "function":
            continue
        function = _mapping(_field(item, "function", "a chat tool call"), "a chat function call")
        calls.append(
            ToolCall(
                name=_field(function, "name", "a chat function call"),
                arguments=_arguments(function.get("arguments")),
                id=_field(item, "id", "a chat tool call"),
            )
        )
    return calls


def parse_openai_responses_calls(output: Any) -> list[ToolCall]:
    """The function calls in an OpenAI Responses output.

    Args:
        output: a `Response` or its dict, or its `output` list (other items, such as messages
            and reasoning, are skipped).

    Returns:
        One `ToolCall` per `function_call` item, in order, with `id` set to its `call_id`
        (what `function_call_output` must echo).
    """
    data = _plain(output, "an OpenAI Responses output")
    if isinstance(data, Mapping):
        if "output" in data:
            data = data["output"] or []
        elif data.get("type") == "function_call":
            data = [data]
        else:
            raise UsageError(
                "expected a Response (with `output`), its output list or a function_call item; "
                f"got a mapping with keys {sorted(data)}"
            )
    calls: list[ToolCall] = []
    for raw in data:
        item = _mapping(raw, "a Responses output item")
        if item.get("type") != "function_call":
            continue
        calls.append(
            ToolCall(
                name=_field(item, "name", "a function_call item"),
                arguments=_arguments(item.get("arguments")),
                id=_field(item, "call_id", "a function_call item"),
            )
        )
    return calls


def parse_anthropic_calls(message: Any) -> list[ToolCall]:
    """The tool calls in an Anthropic message.

    Args:
        message: a `Message` or its dict, or its `content` list of blocks.

    Returns:
        One `ToolCall` per `tool_use` block, in order; the arguments are the already-decoded
        `input` mapping. Server tools (`server_tool_use`) are skipped: Anthropic runs them.
    """
    data = _plain(message, "an Anthropic message")
    if isinstance(data, Mapping):
        if "content" not in data:
            raise UsageError(
                "expected an Anthropic Message (with `content`) or its list of content blocks; "
                f"got a mapping with keys {sorted(data)}"
            )
        data = data["content"]
    if isinstance(data, str):
        return []
    calls: list[ToolCall] = []
    for raw in data or ():
        block = _mapping(raw, "an Anthropic content block")
        if block.get("type") != "tool_use":
            continue
        arguments = block.get("input")
        calls.append(
            ToolCall(
                name=_field(block, "name", "a tool_use block"),
                arguments=dict(arguments) if isinstance(arguments, Mapping) else arguments,
                id=_field(block, "id", "a tool_use block"),
            )
        )
    return calls


_GEMINI_ID_PREFIX = "toolnexus-gemini-"
"""Marks ids made up for Gemini calls that came without one, so results do not echo them."""


def parse_gemini_calls(response: Any) -> list[ToolCall]:
    """The function calls in a Gemini response.

    Args:
        response: a `GenerateContentResponse` (its first candidate is read), a `Candidate`, a
            `Content`, or a list of `Part`s; SDK objects or dicts, with `function_call` or
            REST's `functionCall` keys.

    Returns:
        One `ToolCall` per function-call part, in order. Gemini often sends no call id; one is
        then made from the call's position, name and arguments, so parsing the same response
        twice gives the same ids. `gemini_result` does not send made-up ids back.
    """
    data = _plain(response, "a Gemini response")
    if isinstance(data, Mapping):
        if "candidates" in data:
            candidates = data["candidates"] or []
            if not candidates:
                return []
            data = _mapping(candidates[0], "a Gemini candidate")
        if "content" in data:
            if data["content"] is None:  # a candidate stopped before any content (safety...)
                return []
            data = _mapping(data["content"], "a Gemini content")
        if "parts" not in data:
            raise UsageError(
                "expected a GenerateContentResponse, a Candidate, a Content or a list of parts; "
                f"got a mapping with keys {sorted(data)}"
            )
        data = data["parts"]
    calls: list[ToolCall] = []
    for raw in data or ():
        part = _mapping(raw, "a Gemini part")
        call = part.get("function_call") or part.get("functionCall")
        if not call:
            continue
        call = _mapping(call, "a Gemini function call")
        name = _field(call, "name", "a Gemini function call")
        arguments = dict(call.get("args") or {})
        call_id = call.get("id") or _gemini_id(len(calls), name, arguments)
        calls.append(ToolCall(name=name, arguments=arguments, id=call_id))
    return calls


def _gemini_id(index: int, name: str, arguments: Mapping[str, Any]) -> str:
    text = json.dumps([name, arguments], sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{_GEMINI_ID_PREFIX}{index}-{digest}"


def _plain(value: Any, what: str) -> Any:
    """A provider value as plain data: mappings and lists as they are, SDK models dumped."""
    if isinstance(value, Mapping | list | tuple):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    raise UsageError(
        f"cannot read {what} from {type(value).__name__}: expected a dict or an official "
        "SDK object (one with model_dump())"
    )


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    data = _plain(value, what)
    if not isinstance(data, Mapping):
        raise UsageError(f"expected {what} as a mapping or SDK object, got {type(data).__name__}")
    return data


def _field(data: Mapping[str, Any], key: str, what: str) -> Any:
    value = data.get(key)
    if value is None:
        raise UsageError(f"{what} has no {key!r}: is this really one? (keys: {sorted(data)})")
    return value


def _arguments(raw: Any) -> str | dict[str, Any]:
    """Arguments as the model sent them; nothing at all means no arguments."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    return str(raw)


# --- formatting results --------------------------------------------------------------------

_OPENAI_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_ANTHROPIC_IMAGES = _OPENAI_IMAGES
_GEMINI_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
_PDF = "application/pdf"


def openai_chat_result(call: ToolCall, result: Result) -> Message:
    """The `role: "tool"` message answering `call`.

    Chat tool messages carry text only: an image is replaced by a note saying it could not be
    shown. Use `openai_chat_results` to deliver images (in a user message after the tool
    messages). An error is sent as its text, prefixed with "Error: " when it does not already
    say so, since the message has no error flag.
    """
    return _chat_tool_message(call, result, images_follow=False)


def openai_chat_results(calls: Sequence[ToolCall], results: Sequence[Result]) -> list[Message]:
    """The messages answering a batch of calls: one tool message per call, in order, then, if
    any result holds images, one user message with them.

    The tool messages must all follow the assistant message directly, so the images (which
    tool messages cannot hold) come after them, each group introduced by the call it belongs
    to; each tool message says how many of its images follow.
    """
    pairs = _pairs(calls, results)
    messages = [_chat_tool_message(c, r, images_follow=True) for c, r in pairs]
    content: list[Message] = []
    for call, result in pairs:
        images = _images(result, _OPENAI_IMAGES)
        if images:
            content.append(
                {"type": "text", "text": f"Images from tool call {call.id} ({call.name}):"}
            )
            content += [
                {"type": "image_url", "image_url": {"url": _data_url(p.mime_type, p.data)}}
                for p in images
            ]
    if content:
        messages.append({"role": "user", "content": content})
    return messages


def _chat_tool_message(call: ToolCall, result: Result, *, images_follow: bool) -> Message:
    images = _images(result, _OPENAI_IMAGES)
    notes = [
        _part_text(p, "OpenAI chat tool messages carry text only")
        for p in result.parts
        if not (images_follow and _as_image(p, _OPENAI_IMAGES))
    ]
    if images_follow and images:
        plural = "s follow" if len(images) > 1 else " follows"
        notes.append(f"[{len(images)} image{plural} in the next user message]")
    return {
        "role": "tool",
        "tool_call_id": _call_id(call, "OpenAI chat"),
        "content": _join(_flagged_text(result), *notes),
    }


def openai_responses_result(call: ToolCall, result: Result) -> Message:
    """The `function_call_output` item answering `call`.

    Text only gives a string output; with images (`input_image`) or PDFs (`input_file`) the
    output is a list of content items, text first. Errors are flagged in the text as for chat.
    """
    items: list[Message] = []
    notes: list[str] = []
    for part in result.parts:
        image = _as_image(part, _OPENAI_IMAGES)
        if image is not None:
            items.append(
                {"type": "input_image", "image_url": _data_url(image.mime_type, image.data)}
            )
        elif isinstance(part, ResourcePart) and part.data is not None and part.mime_type == _PDF:
            items.append(
                {
                    "type": "input_file",
                    "filename": _file_name(part.uri),
                    "file_data": _data_url(_PDF, part.data),
                }
            )
        else:
            notes.append(_part_text(part, "OpenAI tool outputs carry only text, images and PDFs"))
    text = _join(_flagged_text(result), *notes)
    output: str | list[Message] = text
    if items:
        output = [{"type": "input_text", "text": text}, *items] if text else items
    return {
        "type": "function_call_output",
        "call_id": _call_id(call, "OpenAI Responses"),
        "output": output,
    }


def openai_responses_results(calls: Sequence[ToolCall], results: Sequence[Result]) -> list[Message]:
    """One `function_call_output` item per call, in order, for the next request's `input`."""
    return [openai_responses_result(c, r) for c, r in _pairs(calls, results)]


def anthropic_result(call: ToolCall, result: Result) -> Message:
    """The `tool_result` content block answering `call`.

    Text goes in a text block (none when there is no text: Anthropic refuses empty ones),
    images in base64 `image` blocks, PDFs in `document` blocks; `is_error` carries the flag.
    """
    blocks: list[Message] = []
    notes: list[str] = []
    for part in result.parts:
        image = _as_image(part, _ANTHROPIC_IMAGES)
        if image is not None:
            source = {"type": "base64", "media_type": image.mime_type, "data": image.base64}
            blocks.append({"type": "image", "source": source})
        elif isinstance(part, ResourcePart) and part.data is not None and part.mime_type == _PDF:
            source = {"type": "base64", "media_type": _PDF, "data": _b64(part.data)}
            blocks.append({"type": "document", "source": source})
        else:
            notes.append(_part_text(part, "Anthropic tool results carry text, images and PDFs"))
    text = _join(result.text, *notes)
    if text:
        blocks.insert(0, {"type": "text", "text": text})
    block: Message = {
        "type": "tool_result",
        "tool_use_id": _call_id(call, "Anthropic"),
        "is_error": result.is_error,
    }
    if blocks:
        block["content"] = blocks
    return block


def anthropic_results(calls: Sequence[ToolCall], results: Sequence[Result]) -> list[Message]:
    """The one user message answering a batch of calls: all `tool_result` blocks, in order
    (Anthropic wants every result of a turn in the message right after it)."""
    blocks = [anthropic_result(c, r) for c, r in _pairs(calls, results)]
    return [{"role": "user", "content": blocks}] if blocks else []


def gemini_result(call: ToolCall, result: Result) -> Message:
    """The `function_response` part answering `call`.

    `response` is `{"output": text}`, or `{"error": text}` for an error. Images go in
    `function_response.parts` as `inline_data` (multimodal function responses, Gemini 3 and
    later). The call's id is echoed when Gemini gave one.
    """
    key = "error" if result.is_error else "output"
    notes: list[str] = []
    media: list[Message] = []
    for part in result.parts:
        image = _as_image(part, _GEMINI_IMAGES)
        if image is None:
            notes.append(_part_text(part, "Gemini function responses carry text and images"))
            continue
        blob = {
            "mime_type": image.mime_type,
            "data": image.base64,
            "display_name": f"{call.name}-{len(media) + 1}",
        }
        media.append({"inline_data": blob})
    response: Message = {"name": call.name, "response": {key: _join(result.text, *notes)}}
    if call.id and not call.id.startswith(_GEMINI_ID_PREFIX):
        response["id"] = call.id
    if media:
        response["parts"] = media
    return {"function_response": response}


def gemini_results(calls: Sequence[ToolCall], results: Sequence[Result]) -> list[Message]:
    """The one `user` content answering a batch of calls: all function responses, in order."""
    parts = [gemini_result(c, r) for c, r in _pairs(calls, results)]
    return [{"role": "user", "parts": parts}] if parts else []


def mcp_result(result: Result) -> mcp.types.CallToolResult:
    """The `mcp.types.CallToolResult` for `result`, for serving tools over MCP.

    Text (`Result.text`), images, audio and resources (embedded text or blob, or a link when
    the resource carries neither) become content blocks, in that order. `structured` becomes
    `structured_content` when it is a JSON object, which every protocol version accepts;
    other JSON values stay in the text only. `metadata` is never sent.
    """
    from mcp import types  # lazy: `import mcp` takes about a second

    content: list[
        types.TextContent
        | types.ImageContent
        | types.AudioContent
        | types.ResourceLink
        | types.EmbeddedResource
    ] = []
    if result.text or not result.parts:
        content.append(types.TextContent(text=result.text))
    for part in result.parts:
        if isinstance(part, ImagePart):
            content.append(types.ImageContent(data=part.base64, mime_type=part.mime_type))
        elif isinstance(part, AudioPart):
            content.append(types.AudioContent(data=part.base64, mime_type=part.mime_type))
        elif part.text is not None:
            resource = types.TextResourceContents(
                uri=part.uri, mime_type=part.mime_type, text=part.text
            )
            content.append(types.EmbeddedResource(resource=resource))
        elif part.data is not None:
            blob = types.BlobResourceContents(
                uri=part.uri, mime_type=part.mime_type, blob=_b64(part.data)
            )
            content.append(types.EmbeddedResource(resource=blob))
        else:
            link = types.ResourceLink(
                name=_file_name(part.uri), uri=part.uri, mime_type=part.mime_type
            )
            content.append(link)
    structured = result.structured if isinstance(result.structured, dict) else None
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=result.is_error
    )


def _pairs(calls: Sequence[ToolCall], results: Sequence[Result]) -> list[tuple[ToolCall, Result]]:
    if len(calls) != len(results):
        raise UsageError(
            f"got {len(calls)} calls and {len(results)} results; pass the results of exactly "
            "these calls, in call order (execute_many returns them so)"
        )
    return list(zip(calls, results, strict=True))


def _call_id(call: ToolCall, provider: str) -> str:
    if not call.id:
        raise UsageError(
            f"tool call {call.name!r} has no id, which {provider} needs to match the result to "
            "it; use the ToolCall parsed from the response (parse_* functions keep the id)"
        )
    return call.id


def _flagged_text(result: Result) -> str:
    """The text, marked as an error for providers whose tool messages have no error flag."""
    text = result.text
    if not result.is_error or text.lower().startswith("error"):
        return text
    return f"Error: {text}" if text else "Error: the tool failed without a message"


def _images(result: Result, supported: frozenset[str]) -> list[ImagePart]:
    return [image for p in result.parts if (image := _as_image(p, supported)) is not None]


def _as_image(part: Part, supported: frozenset[str]) -> ImagePart | None:
    """The part as an image the provider accepts (image parts and image blobs), else None."""
    if isinstance(part, ImagePart) and part.mime_type in supported:
        return part
    if isinstance(part, ResourcePart) and part.data is not None and part.mime_type in supported:
        return ImagePart(data=part.data, mime_type=part.mime_type)
    return None


def _part_text(part: Part, reason: str) -> str:
    """What the model reads instead of a part its provider cannot carry: a resource's text, a
    resource link's address, or a note naming what was left out and why."""
    if isinstance(part, ResourcePart):
        if part.text is not None:
            return f"[resource {part.uri}]\n{part.text}"
        if part.data is None:
            kind = f" ({part.mime_type})" if part.mime_type else ""
            return f"[resource {part.uri}{kind}]"
        label = f"resource {part.uri} ({part.mime_type or 'binary'}, {len(part.data)} bytes)"
    else:
        kind = "image" if isinstance(part, ImagePart) else "audio"
        label = f"{kind} ({part.mime_type}, {len(part.data)} bytes)"
    return f"[{label} not shown: {reason}]"


def _join(*texts: str) -> str:
    return "\n".join(text for text in texts if text)


def _data_url(mime_type: str, data: bytes) -> str:
    return f"data:{mime_type};base64,{_b64(data)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _file_name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1] or uri


# --- one adapter per provider --------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Adapter:
    """One provider's conversions under the same names, so an agent loop is written once."""

    provider: str
    """`openai-chat`, `openai-responses`, `anthropic` or `gemini`."""
    tools: Callable[[Iterable[Tool]], list[Message]]
    """Tool definitions for the request's `tools` field."""
    parse_calls: Callable[[Any], list[ToolCall]]
    """The tool calls in a response (or its message, output items, content or parts)."""
    format_result: Callable[[ToolCall, Result], Message]
    """One call's result as the provider's result message, item, block or part."""
    format_results: Callable[[Sequence[ToolCall], Sequence[Result]], list[Message]]
    """A batch's results as the messages (or input items) to add to the conversation."""


PROVIDERS = ("anthropic", "gemini", "openai-chat", "openai-responses")
"""The names `get_adapter` knows."""


def get_adapter(provider: str, *, strict: bool = False) -> Adapter:
    """The `Adapter` for `provider` (one of `PROVIDERS`).

    Args:
        provider: `openai-chat`, `openai-responses`, `anthropic` or `gemini`.
        strict: OpenAI's strict mode for tool definitions (see `strict_schema`).

    Raises:
        UsageError: an unknown provider, or `strict` for a provider without strict mode.
    """
    if provider not in PROVIDERS:
        raise UsageError(
            f"unknown provider {provider!r}{did_you_mean(provider, PROVIDERS)} "
            f"(known: {', '.join(PROVIDERS)})"
        )
    if strict and not provider.startswith("openai"):
        raise UsageError(
            f"strict=True is OpenAI's strict mode; {provider!r} has none, leave strict off"
        )
    if provider == "openai-chat":
        return Adapter(
            provider=provider,
            tools=functools.partial(openai_chat_tools, strict=strict),
            parse_calls=parse_openai_chat_calls,
            format_result=openai_chat_result,
            format_results=openai_chat_results,
        )
    if provider == "openai-responses":
        return Adapter(
            provider=provider,
            tools=functools.partial(openai_responses_tools, strict=strict),
            parse_calls=parse_openai_responses_calls,
            format_result=openai_responses_result,
            format_results=openai_responses_results,
        )
    if provider == "anthropic":
        return Adapter(
            provider=provider,
            tools=anthropic_tools,
            parse_calls=parse_anthropic_calls,
            format_result=anthropic_result,
            format_results=anthropic_results,
        )
    return Adapter(
        provider=provider,
        tools=gemini_tools,
        parse_calls=parse_gemini_calls,
        format_result=gemini_result,
        format_results=gemini_results,
    )
