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
from ..search.plan import is_deferred
from ..search.provider import ANTHROPIC_SEARCH_TOOLS, native_split, sent_tools
from ._message import Message
from .gemini import gemini_schema
from .strict import strict_schema

if TYPE_CHECKING:
    import mcp.types

    from ..search.state import SearchState

__all__ = [
    "anthropic_tools",
    "gemini_tools",
    "mcp_tools",
    "openai_chat_tools",
    "openai_responses_tools",
]


def openai_chat_tools(
    tools: Iterable[Tool], *, strict: bool = False, state: SearchState | None = None
) -> list[Message]:
    """Tool definitions for OpenAI Chat Completions (`tools=` of `chat.completions.create`).

    Args:
        tools: the tools to offer, in the order given (a registry lists them sorted by name,
            which keeps prompts byte-identical across requests for prompt caching).
        strict: send each schema through `strict_schema` and mark it `strict`. A tool whose
            schema strict mode cannot express is sent as it is with `strict: false`.
        state: the conversation's `SearchState` (`toolkit.search_state()`): deferred tools it
            has not loaded are left out and `tool_search` is offered. Without it every tool
            is sent (README, "Large tool sets").

    The `parameters` dicts are the tools' own (not copies) unless converted: do not mutate them.
    """
    result: list[Message] = []
    for tool in sent_tools(tools, state):
        function: Message = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"], function["strict"] = _openai_parameters(tool, strict)
        result.append({"type": "function", "function": function})
    return result


def openai_responses_tools(
    tools: Iterable[Tool],
    *,
    strict: bool = False,
    state: SearchState | None = None,
    search: str = "native",
) -> list[Message]:
    """Tool definitions for the OpenAI Responses API (`tools=` of `responses.create`).

    Same as `openai_chat_tools` in the Responses' flat shape. `strict` is always written out
    because the Responses API treats a function tool without it as strict.

    With `state`, deferred tools use OpenAI's own tool search (`search="native"`): every
    function goes out, the deferred ones with `defer_loading: true`, plus a hosted
    `{"type": "tool_search"}` tool; `parse_openai_responses_calls(..., state=)` reads what it
    found. `search="neutral"` sends only the loaded tools and our `tool_search` instead.
    """
    split = native_split(tools, state, search, regex=False)
    chosen, native = split if split is not None else (sent_tools(tools, state), False)
    result: list[Message] = []
    for tool in chosen:
        item: Message = {"type": "function", "name": tool.name}
        if tool.description:
            item["description"] = tool.description
        item["parameters"], item["strict"] = _openai_parameters(tool, strict)
        if native and is_deferred(tool):
            item["defer_loading"] = True
        result.append(item)
    if native:
        result.append({"type": "tool_search"})
    return result


def anthropic_tools(
    tools: Iterable[Tool], *, state: SearchState | None = None, search: str = "native"
) -> list[Message]:
    """Tool definitions for the Anthropic Messages API (`tools=` of `messages.create`).

    With `state`, deferred tools use Anthropic's own tool search: every tool goes out, the
    deferred ones with `defer_loading: true`, plus the server tool
    `tool_search_tool_bm25_20251119` (`search="native"`) or `tool_search_tool_regex_20251119`
    (`search="regex"`); `parse_anthropic_calls(..., state=)` reads what it found.
    `search="neutral"` sends only the loaded tools and our `tool_search` instead.
    """
    split = native_split(tools, state, search, regex=True)
    chosen, native = split if split is not None else (sent_tools(tools, state), False)
    result: list[Message] = []
    for tool in chosen:
        item: Message = {"name": tool.name}
        if tool.description:
            item["description"] = tool.description
        item["input_schema"] = tool.parameters
        if native and is_deferred(tool):
            item["defer_loading"] = True
        result.append(item)
    if native:
        result.append(dict(ANTHROPIC_SEARCH_TOOLS[search]))
    return result


def gemini_tools(
    tools: Iterable[Tool], *, json_schema: bool = False, state: SearchState | None = None
) -> list[Message]:
    """Tool definitions for Gemini: `[{"function_declarations": [...]}]`, ready for
    `GenerateContentConfig(tools=...)` of `google-genai` (or the REST `tools` field).

    Args:
        tools: the tools to offer, in the order given.
        json_schema: send each schema unchanged as `parameters_json_schema`, which newer
            Gemini models accept (full JSON Schema: `$ref`, `additionalProperties`, maps...).
            By default each schema goes through `gemini_schema` into `parameters`, which every
            Gemini model and Vertex AI accept; a tool without parameters then gets none at
            all, since Gemini rejects an OBJECT schema with empty `properties`.
        state: as for `openai_chat_tools` (Gemini has no tool search of its own).
    """
    declarations: list[Message] = []
    for tool in sent_tools(tools, state):
        declaration: Message = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        if json_schema:
            declaration["parameters_json_schema"] = tool.parameters
        elif tool.parameters.get("properties"):
            declaration["parameters"] = gemini_schema(tool.parameters)
        declarations.append(declaration)
    return [{"function_declarations": declarations}] if declarations else []


def mcp_tools(tools: Iterable[Tool], *, state: SearchState | None = None) -> list[mcp.types.Tool]:
    """`mcp.types.Tool`s, for serving the tools over MCP.

    The flags become the annotations (`read_only` → `readOnlyHint`, `destructive`,
    `idempotent`, `open_world`) and `title` goes both on the tool and in the annotations.
    `state` as for `openai_chat_tools` (`serve` keeps one per client session).
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
        for tool in sent_tools(tools, state)
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
