"""Provider adapters, checked against the official SDKs' own types.

The shapes we emit are validated with the SDK types (`openai`, `anthropic`, `google-genai`,
`mcp`), and the calls we parse come from SDK response objects built from realistic payloads.
For the SDKs' TypedDict request params, pydantic drops keys it does not know, so comparing the
validated value with the original catches misspelled or invented keys too.
"""

from __future__ import annotations

import base64
import collections.abc
import copy
import dataclasses
import enum
import json
from pathlib import Path
from types import UnionType
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import anthropic.types as anthropic_types
import jsonschema
import mcp.types as mcp_types
import openai.types.chat as chat_types
import openai.types.responses as responses_types
import pytest
from google.genai import types as gemini_types
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict, is_typeddict

from toolnexus import StrictSchemaError, acreate_toolkit
from toolnexus.adapters import (
    PROVIDERS,
    anthropic_result,
    anthropic_results,
    anthropic_tools,
    gemini_result,
    gemini_results,
    gemini_schema,
    gemini_tools,
    get_adapter,
    mcp_result,
    mcp_tools,
    openai_chat_result,
    openai_chat_results,
    openai_chat_tools,
    openai_responses_result,
    openai_responses_results,
    openai_responses_tools,
    parse_anthropic_calls,
    parse_gemini_calls,
    parse_openai_chat_calls,
    parse_openai_responses_calls,
    strict_schema,
)
from toolnexus.base import (
    AudioPart,
    ImagePart,
    ResourcePart,
    Result,
    Tool,
    ToolCall,
    ToolContext,
    empty_parameters,
)
from toolnexus.errors import UsageError
from toolnexus.function import tool

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
PDF = b"%PDF-1.4\n%fake\n"

SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for.", "minLength": 1},
        "limit": {"type": "integer", "default": 10, "minimum": 1, "exclusiveMaximum": 101},
        "mode": {"enum": ["fast", "deep"]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "since": {"type": ["string", "null"], "format": "date-time"},
        "where": {"$ref": "#/$defs/Filter", "description": "Narrow the search."},
        "sort": {"oneOf": [{"const": "date"}, {"const": "score"}]},
    },
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {
        "Filter": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "format": "uri-reference"},
                "kind": {"type": "integer", "enum": [1, 2, 3]},
            },
            "required": ["path"],
        }
    },
}


async def _echo(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result(content=json.dumps(arguments, sort_keys=True), structured=arguments)


async def _screenshot(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result(content="the screen", parts=(ImagePart(data=PNG, mime_type="image/png"),))


async def _fail(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result.error("disk full: free some space and retry")


SEARCH = Tool(
    name="search",
    handler=_echo,
    description="Search the notes.",
    parameters=SEARCH_PARAMETERS,
    title="Search notes",
    read_only=True,
    destructive=False,
    idempotent=True,
    open_world=False,
)
SCREENSHOT = Tool(name="screenshot", handler=_screenshot, description="Take a screenshot.")
FAIL = Tool(name="write-file", handler=_fail, parameters=empty_parameters())
TOOLS = (SEARCH, SCREENSHOT, FAIL)


_EAGER: dict[Any, Any] = {}


def _eager(tp: Any) -> Any:
    """`tp` with every `Iterable[X]` rebuilt as `list[X]`, TypedDicts included.

    pydantic validates an `Iterable` field lazily, and iterating the result afterwards panics
    in pydantic-core 2.50 when the item type uses shared definitions (as the SDK unions do).
    """
    if is_typeddict(tp):
        if tp not in _EAGER:
            hints = get_type_hints(tp, include_extras=True)
            fields = {
                key: (Required if key in tp.__required_keys__ else NotRequired)[
                    _eager(_unwrap_required(hint))
                ]
                for key, hint in hints.items()
            }
            eager: Any = TypedDict(tp.__name__, fields)  # type: ignore[operator]
            config = getattr(tp, "__pydantic_config__", None)
            if config is not None:
                eager.__pydantic_config__ = config
            _EAGER[tp] = eager
        return _EAGER[tp]
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return Annotated[(_eager(args[0]), *tp.__metadata__)]  # type: ignore[misc]
    if origin in (Union, UnionType):
        return Union[tuple(_eager(a) for a in args)]  # noqa: UP007
    if origin is collections.abc.Iterable or origin is list:
        return list[_eager(args[0])]  # type: ignore[misc]
    if origin is dict:
        return dict[args[0], _eager(args[1])]  # type: ignore[misc]
    return tp


def _unwrap_required(hint: Any) -> Any:
    while get_origin(hint) in (Required, NotRequired):
        hint = get_args(hint)[0]
    return hint


def assert_conforms(param_type: Any, value: Any) -> None:
    """`value` validates as `param_type` and loses no key doing so (no unknown keys)."""
    validated = TypeAdapter(_eager(param_type)).validate_python(value)
    assert validated == value


async def _run(calls: list[ToolCall], tmp_path: Path) -> list[Result]:
    """Run parsed calls the way an agent loop does: through a toolkit (validation, approval,
    middleware, and strict mode's nulls dropped)."""
    async with await acreate_toolkit(extra_tools=TOOLS, workspace=tmp_path) as toolkit:
        return await toolkit.aexecute_many(calls)


# --- tool definitions ----------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_openai_chat_tools_are_chat_completion_tool_params(strict: bool) -> None:
    definitions = openai_chat_tools(TOOLS, strict=strict)
    for definition in definitions:
        assert_conforms(chat_types.ChatCompletionToolParam, definition)
    assert [d["function"]["name"] for d in definitions] == ["search", "screenshot", "write-file"]
    search = definitions[0]["function"]
    assert search["description"] == "Search the notes."
    assert search["strict"] is strict
    assert "description" not in definitions[2]["function"]  # none given: none sent
    if not strict:
        assert search["parameters"] is SEARCH_PARAMETERS


@pytest.mark.parametrize("strict", [False, True])
def test_openai_responses_tools_are_function_tool_params_with_strict_spelled_out(
    strict: bool,
) -> None:
    definitions = openai_responses_tools(TOOLS, strict=strict)
    for definition in definitions:
        assert_conforms(responses_types.FunctionToolParam, definition)
        # the Responses API makes a tool without `strict` strict: never leave it out
        assert definition["strict"] is strict
    assert definitions[0]["type"] == "function"
    assert definitions[0]["name"] == "search"


def test_anthropic_tools_are_tool_params() -> None:
    definitions = anthropic_tools(TOOLS)
    for definition in definitions:
        assert_conforms(anthropic_types.ToolParam, definition)
    assert definitions[0] == {
        "name": "search",
        "description": "Search the notes.",
        "input_schema": SEARCH_PARAMETERS,
    }


def test_gemini_tools_validate_as_a_gemini_tool_and_drop_what_gemini_rejects() -> None:
    (tool_dict,) = gemini_tools(TOOLS)
    tool = gemini_types.Tool.model_validate(tool_dict)  # extra="forbid": unknown keys fail
    declarations = {d.name: d for d in tool.function_declarations or []}
    assert set(declarations) == {"search", "screenshot", "write-file"}
    # Gemini refuses an OBJECT with empty properties: a tool without arguments has none
    assert declarations["screenshot"].parameters is None
    params = declarations["search"].parameters
    assert params is not None
    assert params.type == gemini_types.Type.OBJECT
    assert params.required == ["query"]
    assert params.additional_properties is None
    props = params.properties or {}
    assert props["query"].min_length == 1
    assert props["limit"].maximum == 101 and props["limit"].default == 10
    assert props["mode"].type == gemini_types.Type.STRING
    assert props["mode"].enum == ["fast", "deep"]
    assert props["since"].nullable is True and props["since"].format == "date-time"
    where = props["where"]  # the $ref is inlined, the sibling description wins
    assert where.type == gemini_types.Type.OBJECT
    assert where.description == "Narrow the search."
    assert (where.properties or {})["path"].format is None  # Gemini knows no uri-reference
    kind = (where.properties or {})["kind"]
    assert kind.enum is None and kind.type == gemini_types.Type.INTEGER
    assert kind.description == "One of: 1, 2, 3"
    assert props["sort"].enum == ["date", "score"]
    serialized = json.dumps(tool_dict)
    for rejected in ("$ref", "$defs", "additionalProperties", "const", "oneOf", "uniqueItems"):
        assert rejected not in serialized


def test_gemini_schema_conversions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "either": {"type": ["string", "integer", "null"], "description": "S or I."},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
            "both": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}},
                    {"properties": {"b": {"type": "boolean"}}, "required": ["b"]},
                ]
            },
            "count": {"type": "integer", "format": "int64", "exclusiveMinimum": 0},
            "ratio": {"type": "number", "format": "percent", "examples": [0.5]},
            "anything": {},
        },
        "required": ["either", "ghost"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node"}, "label": {"const": 3}},
            }
        },
    }
    converted = gemini_schema(schema)
    gemini_types.Schema.model_validate(converted)
    props = converted["properties"]
    assert props["either"] == {
        "nullable": True,
        "description": "S or I.",
        "any_of": [{"type": "STRING"}, {"type": "INTEGER"}],
    }
    maybe = props["maybe"]
    assert maybe["nullable"] is True and maybe["type"] == "OBJECT"
    # a recursive $ref is cut at its second occurrence, with a word for the model
    assert maybe["properties"]["child"] == {
        "type": "OBJECT",
        "description": "Same structure as the enclosing Node value.",
    }
    assert maybe["properties"]["label"] == {"description": "One of: 3"}
    assert props["pair"]["items"] == {"any_of": [{"type": "STRING"}, {"type": "NUMBER"}]}
    assert props["both"]["properties"] == {"a": {"type": "STRING"}, "b": {"type": "BOOLEAN"}}
    assert props["both"]["required"] == ["b"]
    assert props["count"] == {"type": "INTEGER", "format": "int64", "minimum": 0}
    assert props["ratio"] == {"type": "NUMBER", "example": 0.5}
    assert props["anything"] == {}
    assert converted["required"] == ["either"]  # names without a property are dropped


def test_gemini_schema_refuses_a_ref_that_does_not_resolve() -> None:
    with pytest.raises(UsageError, match=r"\$ref '#/\$defs/Nope' does not resolve"):
        gemini_schema({"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}})


def test_gemini_schema_reads_refs_as_json_pointers_in_a_uri_fragment() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/a%20b~1c"}},
        "$defs": {"a b/c": {"type": "string"}},
    }
    assert gemini_schema(schema)["properties"]["x"] == {"type": "STRING"}
    with pytest.raises(UsageError, match=r"\$ref '#item' does not resolve"):
        gemini_schema({"type": "object", "properties": {"x": {"$ref": "#item"}}})


def test_mcp_tools_carry_flags_as_annotations_and_title() -> None:
    listed = mcp_tools(TOOLS)
    assert all(isinstance(t, mcp_types.Tool) for t in listed)
    wire = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]
    assert wire[0] == {
        "name": "search",
        "title": "Search notes",
        "description": "Search the notes.",
        "inputSchema": SEARCH_PARAMETERS,
        "annotations": {
            "title": "Search notes",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }
    assert wire[1]["annotations"] == {  # MCP's defaults, spelled out
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert [mcp_types.Tool.model_validate(w) for w in wire] == listed


# --- strict mode ---------------------------------------------------------------------------


def test_strict_schema_closes_objects_requires_everything_and_makes_optionals_nullable() -> None:
    strict = strict_schema(SEARCH_PARAMETERS)
    jsonschema.Draft202012Validator.check_schema(strict)
    assert strict["additionalProperties"] is False
    assert strict["required"] == list(SEARCH_PARAMETERS["properties"])
    props = strict["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {
        "type": ["integer", "null"],
        "minimum": 1,
        "exclusiveMaximum": 101,
        "description": "(default: 10)",
    }
    # a bare enum gets the type of its values: newer models refuse schemas without a type
    assert props["mode"] == {"enum": ["fast", "deep", None], "type": ["string", "null"]}
    assert props["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    }
    assert props["since"] == {"type": ["string", "null"], "format": "date-time"}
    # a $ref with siblings is inlined (strict mode refuses siblings), then closed
    where = props["where"]
    assert where["description"] == "Narrow the search."
    inner = where["anyOf"][0]
    assert inner["additionalProperties"] is False
    assert inner["required"] == ["path", "kind"]
    assert inner["properties"]["path"] == {"type": "string"}  # uri-reference is not supported
    assert inner["properties"]["kind"] == {"type": ["integer", "null"], "enum": [1, 2, 3, None]}
    assert props["sort"] == {
        "anyOf": [
            {"const": "date", "type": "string"},
            {"const": "score", "type": "string"},
            {"type": "null"},
        ]
    }
    assert strict["$defs"]["Filter"]["additionalProperties"] is False
    assert SEARCH_PARAMETERS["properties"]["query"]["minLength"] == 1  # the input is untouched


def test_strict_schema_accepts_what_a_strict_model_sends_and_only_that() -> None:
    validator = jsonschema.Draft202012Validator(strict_schema(SEARCH_PARAMETERS))
    sent_by_model = {
        "query": "q",
        "limit": None,
        "mode": None,
        "tags": None,
        "since": None,
        "where": {"path": "a/b", "kind": None},
        "sort": "date",
    }
    assert list(validator.iter_errors(sent_by_model)) == []
    missing = {k: v for k, v in sent_by_model.items() if k != "limit"}
    assert not validator.is_valid(missing)
    assert not validator.is_valid({**sent_by_model, "extra": 1})
    assert not validator.is_valid({**sent_by_model, "query": None})  # required stays non-null
    # dropping the nulls (what the executor does) gives arguments the original schema accepts
    original = jsonschema.Draft202012Validator(SEARCH_PARAMETERS)
    dropped = {k: v for k, v in sent_by_model.items() if v is not None}
    dropped["where"] = {"path": "a/b"}
    assert list(original.iter_errors(dropped)) == []


def test_strict_schema_keeps_defs_refs_and_root_recursion() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/Tree"},
            "again": {"$ref": "#"},
        },
        "required": ["tree"],
        "$defs": {
            "Tree": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
                "required": ["kids"],
            }
        },
    }
    strict = strict_schema(schema)
    assert strict["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    assert strict["properties"]["again"] == {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    assert strict["$defs"]["Tree"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/Tree"}
    validator = jsonschema.Draft202012Validator(strict)
    assert validator.is_valid({"tree": {"kids": [{"kids": []}]}, "again": None})
    assert not validator.is_valid({"tree": {"kids": [{}]}, "again": None})


def test_strict_schema_merges_single_all_of_and_unions_prefix_items() -> None:
    schema = {
        "type": "object",
        "properties": {
            "point": {"allOf": [{"$ref": "#/properties/base"}], "description": "A point."},
            "base": {"type": "object", "properties": {"x": {"type": "number"}}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["point", "base", "pair"],
    }
    strict = strict_schema(schema)
    assert strict["properties"]["point"] == {
        "type": "object",
        "properties": {"x": {"type": ["number", "null"]}},
        "description": "A point.",
        "required": ["x"],
        "additionalProperties": False,
    }
    assert strict["properties"]["pair"]["items"] == {
        "anyOf": [{"type": "string"}, {"type": "integer"}]
    }


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {}}}},
            r"#/properties/m: an object with free keys",
        ),
        (
            {"type": "object", "properties": {"m": {"type": "object"}}},
            r"#/properties/m: an object without properties",
        ),
        ({"type": "object", "properties": {"a": {}}}, r"#/properties/a: accepts a value of any"),
        (
            {"type": "object", "properties": {"l": {"type": "array"}}},
            r"#/properties/l: an array without an items schema",
        ),
        (
            {"type": "object", "properties": {"x": {"allOf": [{"type": "string"}, {}]}}},
            r"allOf of 2 schemas",
        ),
        ({"anyOf": [{"type": "object"}]}, r"#: strict mode needs a plain object schema"),
        (
            {"type": "object", "properties": {"x": {"$ref": "other.json#/X"}}},
            r"points outside this schema",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}},
            r"does not resolve",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}},
            r"refers to itself",
        ),
    ],
)
def test_strict_schema_refuses_what_strict_mode_cannot_express(
    schema: dict[str, Any], message: str
) -> None:
    with pytest.raises(StrictSchemaError, match=message):
        strict_schema(schema)


def test_a_tool_that_cannot_be_strict_is_sent_non_strict_and_the_others_stay_strict() -> None:
    free_form = {
        "type": "object",
        "properties": {"headers": {"type": "object", "additionalProperties": {"type": "string"}}},
    }
    mapper = Tool(name="request", handler=_echo, parameters=free_form)
    chat = openai_chat_tools([SEARCH, mapper], strict=True)
    assert chat[0]["function"]["strict"] is True
    assert chat[1]["function"] == {"name": "request", "parameters": free_form, "strict": False}
    responses = openai_responses_tools([mapper], strict=True)
    assert responses[0]["strict"] is False and responses[0]["parameters"] is free_form


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


@dataclasses.dataclass
class Region:
    left: int
    top: int
    width: int = 100


@tool
def capture(
    window: str,
    size: Size = Size.SMALL,
    tags: list[str] | None = None,
    region: Region | None = None,
    fmt: Literal["png", "jpeg"] = "png",
) -> str:
    """Capture a window.

    Args:
        window: the window title.
        tags: labels to attach.
    """
    return json.dumps({"window": window, "tags": tags, "region": region is not None})


def test_derived_schemas_convert_for_strict_mode_and_gemini() -> None:
    """Schemas derived from type hints (`list[str] | None` is `type: [array, null]`) come out
    in the forms each provider accepts."""
    (definition,) = openai_chat_tools([capture], strict=True)
    assert definition["function"]["strict"] is True
    assert_conforms(chat_types.ChatCompletionToolParam, definition)
    params = definition["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    props = params["properties"]
    assert params["required"] == ["window", "size", "tags", "region", "fmt"]
    # strict mode refuses `type: ["array", "null"]` ("array schema missing items")
    assert props["tags"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert props["tags"]["description"] == "labels to attach."
    region = props["region"]["anyOf"][0]
    assert region["type"] == "object" and region["required"] == ["left", "top", "width"]
    assert region["properties"]["width"]["type"] == ["integer", "null"]
    assert props["size"]["enum"] == [1, 2, None]
    validator = jsonschema.Draft202012Validator(params)
    assert validator.is_valid(
        {"window": "w", "size": None, "tags": None, "region": None, "fmt": None}
    )
    (declarations,) = gemini_tools([capture])
    gemini_types.Tool.model_validate(declarations)
    gemini_props = declarations["function_declarations"][0]["parameters"]["properties"]
    assert gemini_props["tags"] == {
        "nullable": True,
        "type": "ARRAY",
        "items": {"type": "STRING"},
        "description": "labels to attach.",
        "default": None,
    }
    assert gemini_props["size"]["description"] == "One of: 1, 2"
    assert gemini_props["fmt"]["enum"] == ["png", "jpeg"]


@pytest.mark.anyio
async def test_a_strict_call_to_a_derived_tool_runs(tmp_path: Path) -> None:
    arguments = {"window": "w", "size": None, "tags": None, "region": None, "fmt": None}
    call = ToolCall(name="capture", arguments=json.dumps(arguments), id="call_1")
    async with await acreate_toolkit(extra_tools=[capture], workspace=tmp_path) as toolkit:
        (result,) = await toolkit.aexecute_many([call])
    assert not result.is_error, result.content
    assert json.loads(result.content) == {"window": "w", "tags": None, "region": False}


def test_gemini_json_schema_mode_sends_schemas_unchanged() -> None:
    (declarations,) = gemini_tools(TOOLS, json_schema=True)
    tool_ = gemini_types.Tool.model_validate(declarations)
    by_name = {d.name: d for d in tool_.function_declarations or []}
    assert by_name["search"].parameters_json_schema == SEARCH_PARAMETERS
    assert by_name["search"].parameters is None
    assert by_name["screenshot"].parameters_json_schema == empty_parameters()


def test_gemini_free_form_objects_say_their_keys_are_free() -> None:
    converted = gemini_schema(
        {
            "type": "object",
            "properties": {
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object"},
                "closed": {"type": "object", "additionalProperties": False},
            },
        }
    )
    gemini_types.Schema.model_validate(converted)
    assert converted["properties"] == {
        "headers": {
            "type": "OBJECT",
            "description": "An object with keys of your choice whose values are of type STRING.",
        },
        "extra": {"type": "OBJECT", "description": "An object with keys of your choice."},
        "closed": {"type": "OBJECT"},
    }


def test_a_tool_without_arguments_is_strict_too() -> None:
    bare = Tool(name="now", handler=_echo, parameters={"type": "object"})
    assert strict_schema(bare.parameters) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


# --- parsing calls from SDK responses ------------------------------------------------------


def _chat_completion() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-5",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "search", "arguments": '{"query": "q"}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "screenshot", "arguments": ""},
                        },
                        {
                            "id": "call_c",
                            "type": "custom",
                            "custom": {"name": "grammar_tool", "input": "free text"},
                        },
                        {
                            "id": "call_d",
                            "type": "function",
                            "function": {"name": "write-file", "arguments": "{}"},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


EXPECTED_CHAT_CALLS = [
    ToolCall(name="search", arguments='{"query": "q"}', id="call_a"),
    ToolCall(name="screenshot", arguments={}, id="call_b"),
    ToolCall(name="write-file", arguments="{}", id="call_d"),
]


def test_parse_openai_chat_calls_from_sdk_objects_and_dicts() -> None:
    payload = _chat_completion()
    completion = chat_types.ChatCompletion.model_validate(payload)
    assert parse_openai_chat_calls(completion.choices[0].message) == EXPECTED_CHAT_CALLS
    assert parse_openai_chat_calls(completion) == EXPECTED_CHAT_CALLS
    assert parse_openai_chat_calls(payload["choices"][0]["message"]) == EXPECTED_CHAT_CALLS
    assert parse_openai_chat_calls({"role": "assistant", "content": "hi"}) == []
    no_choice = chat_types.ChatCompletion.model_validate({**payload, "choices": []})
    assert parse_openai_chat_calls(no_choice) == []


def _response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-5",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "completed",
    }


RESPONSES_OUTPUT = [
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "search",
        "arguments": '{"query":"q","limit":3}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "screenshot",
        "arguments": "",
        "status": "completed",
    },
]


def test_parse_openai_responses_calls_from_sdk_objects_and_dicts() -> None:
    response = responses_types.Response.model_validate(_response(RESPONSES_OUTPUT))
    expected = [
        ToolCall(name="search", arguments='{"query":"q","limit":3}', id="call_1"),
        ToolCall(name="screenshot", arguments={}, id="call_2"),
    ]
    assert parse_openai_responses_calls(response) == expected
    assert parse_openai_responses_calls(response.output) == expected
    assert parse_openai_responses_calls(RESPONSES_OUTPUT) == expected
    assert parse_openai_responses_calls(RESPONSES_OUTPUT[1]) == expected[:1]
    assert parse_openai_responses_calls(_response([])) == []


ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "Let me look.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "q"}},
        {"type": "tool_use", "id": "toolu_2", "name": "screenshot", "input": {}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 20},
}


def test_parse_anthropic_calls_from_sdk_objects_and_dicts() -> None:
    message = anthropic_types.Message.model_validate(ANTHROPIC_MESSAGE)
    expected = [
        ToolCall(name="search", arguments={"query": "q"}, id="toolu_1"),
        ToolCall(name="screenshot", arguments={}, id="toolu_2"),
    ]
    assert parse_anthropic_calls(message) == expected
    assert parse_anthropic_calls(message.content) == expected
    assert parse_anthropic_calls(ANTHROPIC_MESSAGE) == expected
    assert parse_anthropic_calls({"role": "user", "content": "plain text"}) == []


GEMINI_RESPONSE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Calling tools."},
                    {"function_call": {"name": "search", "args": {"query": "q"}}},
                    {"function_call": {"name": "screenshot"}},
                    {"function_call": {"id": "fc-given", "name": "write-file", "args": {}}},
                ],
            },
            "finish_reason": "STOP",
        }
    ]
}


def test_parse_gemini_calls_synthesizes_stable_ids_and_keeps_given_ones() -> None:
    response = gemini_types.GenerateContentResponse.model_validate(GEMINI_RESPONSE)
    calls = parse_gemini_calls(response)
    assert [(c.name, c.arguments) for c in calls] == [
        ("search", {"query": "q"}),
        ("screenshot", {}),
        ("write-file", {}),
    ]
    assert calls[2].id == "fc-given"
    assert calls[0].id and calls[1].id and calls[0].id != calls[1].id
    # the same response parsed again (or in another form) gives the same ids
    assert parse_gemini_calls(response) == calls
    assert parse_gemini_calls(GEMINI_RESPONSE) == calls
    assert parse_gemini_calls(response.candidates[0].content) == calls  # type: ignore[index]
    assert parse_gemini_calls(response.candidates[0].content.parts) == calls  # type: ignore[index,union-attr]
    rest = {
        "candidates": [
            {"content": {"parts": [{"functionCall": {"name": "search", "args": {"query": "q"}}}]}}
        ]
    }
    assert parse_gemini_calls(rest) == calls[:1]


def test_parse_gemini_calls_of_a_candidate_without_content_is_empty() -> None:
    blocked = gemini_types.GenerateContentResponse.model_validate(
        {"candidates": [{"finish_reason": "SAFETY"}]}
    )
    assert parse_gemini_calls(blocked) == []
    assert parse_gemini_calls(gemini_types.GenerateContentResponse()) == []


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (parse_openai_chat_calls, 42, r"cannot read an OpenAI chat message from int"),
        (parse_openai_responses_calls, {"id": "x"}, r"expected a Response \(with `output`\)"),
        (parse_anthropic_calls, {"id": "x"}, r"expected an Anthropic Message"),
        (parse_gemini_calls, {"text": "x"}, r"expected a GenerateContentResponse"),
        (
            parse_openai_chat_calls,
            {"tool_calls": [{"id": "a", "type": "function", "function": {"arguments": "{}"}}]},
            r"a chat function call has no 'name'",
        ),
        (
            parse_anthropic_calls,
            [{"type": "tool_use", "name": "search", "input": {}}],
            r"a tool_use block has no 'id'",
        ),
    ],
)
def test_parsing_something_else_says_what_was_expected(
    parse: Any, value: Any, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        parse(value)


# --- formatting results --------------------------------------------------------------------


def _results() -> tuple[list[ToolCall], list[Result]]:
    calls = [
        ToolCall(name="search", arguments={"query": "q"}, id="id_1"),
        ToolCall(name="screenshot", arguments={}, id="id_2"),
        ToolCall(name="write-file", arguments={}, id="id_3"),
    ]
    results = [
        Result(content='{"query": "q"}', structured={"query": "q"}),
        Result(content="the screen", parts=(ImagePart(data=PNG, mime_type="image/png"),)),
        Result.error("disk full: free some space and retry"),
    ]
    return calls, results


def test_openai_chat_results_are_tool_messages_then_one_user_message_with_the_images() -> None:
    calls, results = _results()
    messages = openai_chat_results(calls, results)
    assert len(messages) == 4
    for message in messages[:3]:
        assert_conforms(chat_types.ChatCompletionToolMessageParam, message)
    assert_conforms(chat_types.ChatCompletionUserMessageParam, messages[3])
    assert messages[0] == {"role": "tool", "tool_call_id": "id_1", "content": '{"query": "q"}'}
    assert messages[1]["content"] == "the screen\n[1 image follows in the next user message]"
    assert messages[2]["content"] == "Error: disk full: free some space and retry"
    assert messages[3] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Images from tool call id_2 (screenshot):"},
            {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
            },
        ],
    }
    assert openai_chat_results(calls[:1], results[:1]) == messages[:1]  # no images, no extra


def test_openai_chat_result_alone_says_the_image_was_not_shown() -> None:
    _, results = _results()
    message = openai_chat_result(ToolCall(name="screenshot", id="x"), results[1])
    assert_conforms(chat_types.ChatCompletionToolMessageParam, message)
    assert message["content"] == (
        f"the screen\n[image (image/png, {len(PNG)} bytes) not shown: OpenAI chat tool "
        "messages carry text only]"
    )


def test_openai_responses_results_put_images_and_pdfs_in_the_output() -> None:
    calls, results = _results()
    pdf = ResourcePart(uri="file:///docs/report.pdf", mime_type="application/pdf", data=PDF)
    audio = AudioPart(data=b"RIFF....WAVE", mime_type="audio/wav")
    calls.append(ToolCall(name="fetch", id="id_4"))
    results.append(Result(parts=(pdf, audio)))
    items = openai_responses_results(calls, results)
    for item in items:
        assert_conforms(FunctionCallOutput, item)
    assert items[0] == {
        "type": "function_call_output",
        "call_id": "id_1",
        "output": '{"query": "q"}',
    }
    assert items[1]["output"] == [
        {"type": "input_text", "text": "the screen"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
        },
    ]
    assert items[2]["output"] == "Error: disk full: free some space and retry"
    assert items[3]["output"] == [  # in the tool's order: the note stands where the audio was
        {
            "type": "input_file",
            "filename": "report.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode(),
        },
        {"type": "input_text", "text": "[audio (audio/wav, 12 bytes) not shown: OpenAI tool "
         "outputs carry only text, images and PDFs]"},
    ]  # fmt: skip
    assert openai_responses_result(calls[0], results[0]) == items[0]


def test_anthropic_results_are_one_user_message_of_tool_result_blocks() -> None:
    calls, results = _results()
    (message,) = anthropic_results(calls, results)
    assert_conforms(anthropic_types.MessageParam, message)
    assert message["role"] == "user"
    blocks = message["content"]
    for block in blocks:
        assert_conforms(anthropic_types.ToolResultBlockParam, block)
    assert blocks[0] == {
        "type": "tool_result",
        "tool_use_id": "id_1",
        "is_error": False,
        "content": [{"type": "text", "text": '{"query": "q"}'}],
    }
    assert blocks[1]["content"] == [
        {"type": "text", "text": "the screen"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG).decode(),
            },
        },
    ]
    assert blocks[2] == {
        "type": "tool_result",
        "tool_use_id": "id_3",
        "is_error": True,
        "content": [{"type": "text", "text": "disk full: free some space and retry"}],
    }


def test_anthropic_result_sends_no_empty_text_block_and_pdfs_as_documents() -> None:
    empty = anthropic_result(ToolCall(name="t", id="a"), Result())
    assert empty == {"type": "tool_result", "tool_use_id": "a", "is_error": False}
    pdf = ResourcePart(uri="mem://r.pdf", mime_type="application/pdf", data=PDF)
    block = anthropic_result(ToolCall(name="t", id="b"), Result(parts=(pdf,)))
    assert_conforms(anthropic_types.ToolResultBlockParam, block)
    assert block["content"] == [
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(PDF).decode(),
            },
        }
    ]


def test_gemini_results_are_one_user_content_of_function_responses() -> None:
    calls, results = _results()
    (content,) = gemini_results(calls, results)
    validated = gemini_types.Content.model_validate(content)
    assert validated.role == "user"
    responses = [p.function_response for p in validated.parts or []]
    assert [r.name for r in responses if r] == ["search", "screenshot", "write-file"]
    assert content["parts"][0] == {
        "function_response": {
            "name": "search",
            "response": {"output": '{"query": "q"}'},
            "id": "id_1",
        }
    }
    screenshot = responses[1]
    assert screenshot is not None and screenshot.parts
    assert screenshot.parts[0].inline_data is not None
    assert screenshot.parts[0].inline_data.data == PNG
    assert screenshot.parts[0].inline_data.mime_type == "image/png"
    assert content["parts"][2]["function_response"]["response"] == {
        "error": "disk full: free some space and retry"
    }


def test_gemini_result_echoes_only_ids_gemini_gave() -> None:
    calls = parse_gemini_calls(GEMINI_RESPONSE)
    parts = [gemini_result(c, r) for c, r in zip(calls, _results()[1], strict=True)]
    for part in parts:
        gemini_types.Part.model_validate(part)
    assert "id" not in parts[0]["function_response"]
    assert "id" not in parts[1]["function_response"]
    assert parts[2]["function_response"]["id"] == "fc-given"


def test_parts_a_provider_cannot_carry_become_notes_and_resource_text_is_inlined() -> None:
    result = Result(
        content="fetched",
        parts=(
            ResourcePart(uri="file:///notes.md", mime_type="text/markdown", text="# Notes"),
            ResourcePart(uri="https://example.com/data.csv", mime_type="text/csv"),
            AudioPart(data=b"abc", mime_type="audio/mpeg"),
            ImagePart(data=b"II*\x00", mime_type="image/tiff"),
        ),
    )
    call = ToolCall(name="fetch", id="x")
    tail = [
        "[resource file:///notes.md]\n# Notes",
        "[resource https://example.com/data.csv (text/csv)]",
    ]
    anthropic_text = anthropic_result(call, result)["content"][0]["text"]
    assert anthropic_text == "\n".join(
        [
            "fetched",
            *tail,
            "[audio (audio/mpeg, 3 bytes) not shown: Anthropic tool results carry text, images "
            "and PDFs]",
            "[image (image/tiff, 4 bytes) not shown: Anthropic tool results carry text, images "
            "and PDFs]",
        ]
    )
    chat_text = openai_chat_results([call], [result])[0]["content"]
    assert chat_text.startswith("fetched\n" + "\n".join(tail))
    gemini_text = gemini_result(call, result)["function_response"]["response"]["output"]
    assert gemini_text.startswith("fetched\n" + "\n".join(tail))


def test_image_blobs_in_resources_are_sent_as_images() -> None:
    blob = ResourcePart(uri="mem://shot.png", mime_type="image/png", data=PNG)
    block = anthropic_result(ToolCall(name="t", id="a"), Result(parts=(blob,)))
    assert block["content"][0]["type"] == "image"
    (item,) = openai_responses_result(ToolCall(name="t", id="a"), Result(parts=(blob,)))["output"]
    assert item["type"] == "input_image"


def test_mcp_result_carries_every_part_kind_structured_content_and_the_error_flag() -> None:
    result = Result(
        content="done",
        structured={"count": 2},
        parts=(
            ImagePart(data=PNG, mime_type="image/png"),
            AudioPart(data=b"RIFF", mime_type="audio/wav"),
            ResourcePart(uri="file:///a.txt", mime_type="text/plain", text="hello"),
            ResourcePart(uri="file:///b.bin", mime_type="application/octet-stream", data=b"\x01"),
            ResourcePart(uri="https://example.com/docs/page", mime_type="text/html"),
        ),
    )
    converted = mcp_result(result)
    assert isinstance(converted, mcp_types.CallToolResult)
    wire = converted.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert mcp_types.CallToolResult.model_validate(wire) == converted
    assert wire["structuredContent"] == {"count": 2}
    assert wire["isError"] is False
    assert wire["content"] == [
        {"type": "text", "text": "done"},
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
        {"type": "audio", "data": base64.b64encode(b"RIFF").decode(), "mimeType": "audio/wav"},
        {
            "type": "resource",
            "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"},
        },
        {
            "type": "resource",
            "resource": {
                "uri": "file:///b.bin",
                "mimeType": "application/octet-stream",
                "blob": "AQ==",
            },
        },
        {
            "type": "resource_link",
            "name": "page",
            "uri": "https://example.com/docs/page",
            "mimeType": "text/html",
        },
    ]
    error = mcp_result(Result.error("no such file: a.txt"))
    assert error.is_error is True
    assert error.content == [mcp_types.TextContent(text="no such file: a.txt")]
    assert error.structured_content is None
    listed = mcp_result(Result(content="[1, 2]", structured=[1, 2]))
    assert listed.structured_content is None  # only objects are valid on every protocol version


def test_formatting_needs_matching_batches_and_call_ids() -> None:
    calls, results = _results()
    for format_results in (openai_chat_results, anthropic_results, gemini_results):
        with pytest.raises(UsageError, match="got 3 calls and 2 results"):
            format_results(calls, results[:2])
    no_id = ToolCall(name="search", arguments={})
    for format_result in (openai_chat_result, openai_responses_result, anthropic_result):
        with pytest.raises(UsageError, match="tool call 'search' has no id"):
            format_result(no_id, results[0])
    assert "id" not in gemini_result(no_id, results[0])["function_response"]


# --- adapters, end to end -------------------------------------------------------------------


PROVIDER_RESPONSES: dict[str, Any] = {
    "openai-chat": chat_types.ChatCompletion.model_validate(_chat_completion()),
    "openai-responses": responses_types.Response.model_validate(_response(RESPONSES_OUTPUT)),
    "anthropic": anthropic_types.Message.model_validate(ANTHROPIC_MESSAGE),
    "gemini": gemini_types.GenerateContentResponse.model_validate(GEMINI_RESPONSE),
}


def _check_history(provider: str, items: list[dict[str, Any]]) -> None:
    """The items an agent appends to its history, checked with the provider's SDK types."""
    if provider == "openai-chat":
        for item in items:
            assert_conforms(chat_types.ChatCompletionMessageParam, item)
    elif provider == "openai-responses":
        for item in items:
            assert_conforms(FunctionCallOutput, item)
    elif provider == "anthropic":
        for item in items:
            assert_conforms(anthropic_types.MessageParam, item)
    else:
        for item in items:
            gemini_types.Content.model_validate(item)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_one_agent_loop_step_for_every_provider(provider: str, tmp_path: Path) -> None:
    adapter = get_adapter(provider)
    definitions = adapter.tools(TOOLS)
    assert len(definitions) == (1 if provider == "gemini" else 3)
    calls = adapter.parse_calls(PROVIDER_RESPONSES[provider])
    assert [c.name for c in calls][:2] == ["search", "screenshot"]
    results = await _run(calls, tmp_path)
    assert not any(r.is_error for r in results[:2]), results
    assert results[0].structured["query"] == "q"
    history = adapter.format_results(calls, results)
    _check_history(provider, history)
    serialized = json.dumps(history)
    assert base64.b64encode(PNG).decode() in serialized  # every provider gets the image
    assert adapter.format_result(calls[0], results[0]) in _flatten(history)


def _flatten(history: list[dict[str, Any]]) -> list[Any]:
    """Every message and every block inside one, to find a formatted result in a history."""
    found: list[Any] = []
    for item in history:
        found.append(item)
        for key in ("content", "parts"):
            if isinstance(item.get(key), list):
                found.extend(item[key])
    return found


def test_get_adapter_strict_applies_to_openai_only() -> None:
    strict_tools = get_adapter("openai-chat", strict=True).tools([SEARCH])
    assert strict_tools == openai_chat_tools([SEARCH], strict=True)
    assert get_adapter("openai-responses", strict=True).tools([SEARCH])[0]["strict"] is True
    with pytest.raises(UsageError, match="'anthropic' has none"):
        get_adapter("anthropic", strict=True)


def test_get_adapter_suggests_the_closest_provider() -> None:
    with pytest.raises(
        UsageError, match="unknown provider 'openai_chat'; did you mean 'openai-chat'"
    ):
        get_adapter("openai_chat")


def test_conversions_never_mutate_the_tool_schema() -> None:
    before = copy.deepcopy(SEARCH_PARAMETERS)
    strict_schema(SEARCH_PARAMETERS)
    gemini_schema(SEARCH_PARAMETERS)
    openai_chat_tools([SEARCH], strict=True)
    gemini_tools([SEARCH])
    assert before == SEARCH_PARAMETERS


def test_assert_conforms_catches_unknown_keys_and_wrong_values() -> None:
    (definition,) = openai_chat_tools([SEARCH])
    with pytest.raises(AssertionError):
        assert_conforms(chat_types.ChatCompletionToolParam, {**definition, "extra": True})
    with pytest.raises(ValidationError):
        assert_conforms(chat_types.ChatCompletionToolParam, {**definition, "type": "functon"})
    (block,) = anthropic_results([ToolCall(name="t", id="a")], [Result(content="x")])
    with pytest.raises(AssertionError):  # an unknown key deep inside an Iterable field
        assert_conforms(
            anthropic_types.MessageParam,
            {**block, "content": [{**block["content"][0], "tool_use_idd": "a"}]},
        )


@pytest.mark.anyio
async def test_strict_calls_with_nulls_for_optionals_run_as_if_they_were_left_out(
    tmp_path: Path,
) -> None:
    """What a strict-mode model must send (every key, null for "not given") runs as the call
    without those keys: the executor drops the nulls before validating."""
    (definition,) = openai_chat_tools([SEARCH], strict=True)
    strict = jsonschema.Draft202012Validator(definition["function"]["parameters"])
    arguments = {
        "query": "q",
        "limit": None,
        "mode": "deep",
        "tags": None,
        "since": None,
        "where": {"path": "notes/", "kind": None},
        "sort": None,
    }
    assert strict.is_valid(arguments)
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search", "arguments": json.dumps(arguments)},
            }
        ],
    }
    (result,) = await _run(parse_openai_chat_calls(message), tmp_path)
    assert not result.is_error, result.content
    # `since` stays: its own schema accepts null, so null is a value there, not "not given"
    assert result.structured == {
        "query": "q",
        "mode": "deep",
        "since": None,
        "where": {"path": "notes/"},
    }
    (reply,) = openai_chat_results(parse_openai_chat_calls(message), [result])
    assert reply["tool_call_id"] == "call_1"


def test_strict_schema_infers_missing_types_and_follows_json_pointers() -> None:
    schema = {
        "type": "object",
        "properties": {
            "point": {"properties": {"x": {"type": "number"}}, "required": ["x"]},
            "list": {"items": {"type": "string"}},
            "level": {"enum": [1, 2.5]},
            "mixed": {"enum": [None, True, 1, "one"]},
            "shapes": {"enum": [[1], {"a": 1}]},
            "tuples": {"enum": [(1, 2), "x"]},
            "none": {"enum": []},
            "same": {"$ref": "#/properties/point/properties/x"},
            "first": {"$ref": "#/properties/choice/anyOf/0"},
            "choice": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": [
            "point", "list", "level", "mixed", "shapes", "tuples", "none", "same", "first", "choice"
        ],
    }
    props = strict_schema(schema)["properties"]
    assert props["point"] == {
        "properties": {"x": {"type": "number"}},
        "required": ["x"],
        "type": "object",
        "additionalProperties": False,
    }
    assert props["list"] == {"items": {"type": "string"}, "type": "array"}
    assert props["level"] == {"enum": [1, 2.5], "type": "number"}
    assert props["mixed"]["type"] == ["null", "boolean", "integer", "string"]
    assert props["shapes"] == {"enum": [[1], {"a": 1}]}
    # a tuple is an array to JSON, so it is left untyped like one; an empty enum has no type
    assert props["tuples"] == {"enum": [(1, 2), "x"]}
    assert props["none"] == {"enum": []}
    assert props["same"] == {"type": "number"}
    assert props["first"] == {"type": "string"}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"b": True}}, r"#/properties/b: expected a schema"),
        (
            {"type": "object", "properties": {"u": {"anyOf": [], "oneOf": []}}},
            r"#/properties/u: both anyOf and oneOf",
        ),
        (
            {"type": "object", "properties": {"r": {"$ref": "#/required/0"}}, "required": ["r"]},
            r"resolves to 'r', not a schema",
        ),
    ],
)
def test_strict_schema_refuses_malformed_schemas(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(StrictSchemaError, match=message):
        strict_schema(schema)


def test_gemini_schema_edge_forms() -> None:
    converted = gemini_schema(
        {
            "properties": {
                "open": True,
                "listed": {"items": {"type": "integer"}},
                "choice": {"enum": ["a", None]},
                "opt": {"anyOf": [{"type": ["string", "null"]}, {"type": "null"}]},
                "nothing": {"anyOf": [{"type": "null"}]},
                "empty": {"type": "object", "properties": {}},
                "bare_array": {"type": "array", "prefixItems": []},
                "tree": {"$ref": "#/$defs/Tree"},
                "merged": {
                    "allOf": [
                        {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                        {"properties": {"b": {"type": "string"}}, "required": ["a", "b"]},
                    ]
                },
            },
            "$defs": {"Tree": {"properties": {"kids": {"items": {"$ref": "#/$defs/Tree"}}}}},
        }
    )
    gemini_types.Schema.model_validate(converted)
    assert converted["type"] == "OBJECT"
    props = converted["properties"]
    assert props["open"] == {}
    assert props["listed"] == {"type": "ARRAY", "items": {"type": "INTEGER"}}
    assert props["choice"] == {"nullable": True, "type": "STRING", "enum": ["a"]}
    assert props["opt"] == {"nullable": True, "type": "STRING"}
    assert props["nothing"] == {"nullable": True}
    assert props["empty"] == {
        "type": "OBJECT",
        "description": "An object with keys of your choice.",
    }
    assert props["bare_array"] == {"type": "ARRAY"}
    assert props["tree"]["properties"]["kids"]["items"] == {
        "type": "OBJECT",
        "description": "Same structure as the enclosing Tree value.",
    }
    assert props["merged"]["properties"] == {"a": {"type": "STRING"}, "b": {"type": "STRING"}}
    assert props["merged"]["required"] == ["a", "b"]


def test_parse_openai_chat_calls_accepts_decoded_arguments_from_compatible_servers() -> None:
    """Some OpenAI-compatible servers send `arguments` already decoded."""
    message = {
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "search", "arguments": {"query": "q"}},
            }
        ]
    }
    assert parse_openai_chat_calls(message) == [
        ToolCall(name="search", arguments={"query": "q"}, id="a")
    ]
    with pytest.raises(UsageError, match="expected an Anthropic content block as a mapping"):
        parse_anthropic_calls([["not", "a", "block"]])


def test_results_of_parts_only_and_blobs_no_provider_takes() -> None:
    archive = ResourcePart(uri="file:///out/build.zip", mime_type="application/zip", data=b"PK")
    unnamed = ResourcePart(uri="mem://blob", data=b"\x00\x01")
    result = Result(parts=(archive, unnamed))
    assert [c.type for c in mcp_result(result).content] == ["resource", "resource"]  # no text
    text = anthropic_result(ToolCall(name="build", id="a"), result)["content"][0]["text"]
    reason = "Anthropic tool results carry text, images and PDFs"
    assert text == (
        f"[resource file:///out/build.zip (application/zip, 2 bytes) not shown: {reason}]\n"
        f"[resource mem://blob (binary, 2 bytes) not shown: {reason}]"
    )
