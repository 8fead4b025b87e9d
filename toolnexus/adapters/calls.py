"""Parsing tool calls (`parse_openai_chat_calls`, `parse_openai_responses_calls`,
`parse_anthropic_calls`, `parse_gemini_calls`): a provider's response becomes `ToolCall`s.

Inputs may be plain dicts (decoded JSON) or the official SDKs' objects (`openai`, `anthropic`,
`google-genai`): anything with `model_dump()` is read through it, so none of those SDKs is
imported. Separate because it is the one step that reads what a provider sends, with its own
tolerance for the providers' shapes; `results` takes `_GEMINI_ID_PREFIX` from here so that
made-up Gemini ids are not echoed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..base import ToolCall
from ..errors import UsageError
from ..search.provider import observe_anthropic, observe_responses

if TYPE_CHECKING:
    from ..search.state import SearchState

__all__ = [
    "parse_anthropic_calls",
    "parse_gemini_calls",
    "parse_openai_chat_calls",
    "parse_openai_responses_calls",
]


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


def parse_openai_responses_calls(
    output: Any, *, state: SearchState | None = None
) -> list[ToolCall]:
    """The function calls in an OpenAI Responses output.

    Args:
        output: a `Response` or its dict, or its `output` list (other items, such as messages
            and reasoning, are skipped).

    Returns:
        One `ToolCall` per `function_call` item, in order, with `id` set to its `call_id`
        (what `function_call_output` must echo). With `state`, the tools OpenAI's tool search
        returned (`tool_search_output` items) are loaded into it.
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
    if state is not None:
        observe_responses((_plain(raw, "a Responses output item") for raw in data), state)
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


def parse_anthropic_calls(message: Any, *, state: SearchState | None = None) -> list[ToolCall]:
    """The tool calls in an Anthropic message.

    Args:
        message: a `Message` or its dict, or its `content` list of blocks.

    Returns:
        One `ToolCall` per `tool_use` block, in order; the arguments are the already-decoded
        `input` mapping. Server tools (`server_tool_use`) are skipped: Anthropic runs them.
        With `state`, the tools Anthropic's tool search referenced
        (`tool_search_tool_result` blocks) are loaded into it.
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
    if state is not None:
        observe_anthropic((_plain(raw, "an Anthropic content block") for raw in data or ()), state)
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
