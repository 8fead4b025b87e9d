"""Tool definitions (`openai_chat_tools`, `openai_responses_tools`, `anthropic_tools`,
`gemini_tools`, `mcp_tools`): the tools as each provider's request declares them.

The first step of an agent loop, sent with every request. Separate from the schema conversions
it may apply (`strict` for OpenAI's strict mode, `gemini` for Gemini's subset) and from the
parsing of calls and formatting of results that follow. `mcp` is imported only inside
`mcp_tools`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..base import Tool
from ..errors import StrictSchemaError
from ._message import Message
from .gemini import gemini_schema
from .strict import strict_schema

if TYPE_CHECKING:
    import mcp.types

__all__ = [
    "anthropic_tools",
    "gemini_tools",
    "mcp_tools",
    "openai_chat_tools",
    "openai_responses_tools",
]


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
    A read-only tool is published with `destructiveHint: false`: `destructive` defaults to
    MCP's own default (true), which is meaningless for a tool that changes nothing, and
    clients that read the hint without checking `readOnlyHint` first would warn about it.
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
                destructive_hint=tool.destructive and not tool.read_only,
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
