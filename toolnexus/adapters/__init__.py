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

Each step is its own module; this package re-exports their public names:

- `definitions` (`openai_chat_tools`, `openai_responses_tools`, `anthropic_tools`,
  `gemini_tools`, `mcp_tools`): the tools as each provider's request declares them;
- `strict` (`strict_schema`): a schema in the shape OpenAI's strict mode needs;
- `gemini` (`gemini_schema`): a schema in the subset Gemini accepts;
- `calls` (`parse_*_calls`): a provider's response read into `ToolCall`s;
- `results` (`*_result`, `*_results`, `mcp_result`): results in each provider's shape, with
  the table of what each provider can carry back from a tool.

`Adapter`, `PROVIDERS` and `get_adapter` (here) bundle one provider's steps under the same names.

Inputs may be plain dicts (decoded JSON) or the official SDKs' objects (`openai`, `anthropic`,
`google-genai`): anything with `model_dump()` is read through it. None of those SDKs is imported
here; `mcp` is imported only by `mcp_tools` and `mcp_result`.

Gemini takes a subset of JSON Schema (OpenAPI 3.0 style); `gemini_schema` documents what it
converts and drops. OpenAI's strict mode needs a stricter shape; `strict_schema` documents it.
Keywords either conversion drops only ever loosen the schema the model sees: the executor still
validates every call against the tool's own schema, so the model reads a precise error instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._suggest import did_you_mean
from ..base import Result, Tool, ToolCall
from ..errors import UsageError
from ._message import Message as Message  # not in __all__; the type in the signatures
from .calls import (
    parse_anthropic_calls,
    parse_gemini_calls,
    parse_openai_chat_calls,
    parse_openai_responses_calls,
)
from .definitions import (
    anthropic_tools,
    gemini_tools,
    mcp_tools,
    openai_chat_tools,
    openai_responses_tools,
)
from .gemini import gemini_schema
from .results import (
    anthropic_result,
    anthropic_results,
    gemini_result,
    gemini_results,
    mcp_result,
    openai_chat_result,
    openai_chat_results,
    openai_responses_result,
    openai_responses_results,
)
from .strict import strict_schema

if TYPE_CHECKING:
    from ..search.state import SearchState

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


@dataclass(frozen=True, kw_only=True)
class Adapter:
    """One provider's conversions under the same names, so an agent loop is written once."""

    provider: str
    """`openai-chat`, `openai-responses`, `anthropic` or `gemini`."""
    tools: _ToolsStep
    """Tool definitions for the request's `tools` field (`state=` for deferred tools)."""
    parse_calls: _ParseStep
    """The tool calls in a response (or its message, output items, content or parts);
    `state=` records what a provider's own tool search found."""
    format_result: Callable[[ToolCall, Result], Message]
    """One call's result as the provider's result message, item, block or part."""
    format_results: _ResultsStep
    """A batch's results as the messages (or input items) to add to the conversation;
    `state=` records what `tool_search` calls found."""


class _ToolsStep(Protocol):
    def __call__(
        self, tools: Iterable[Tool], /, *, state: SearchState | None = None
    ) -> list[Message]: ...


class _ParseStep(Protocol):
    def __call__(self, response: Any, /, *, state: SearchState | None = None) -> list[ToolCall]: ...


class _ResultsStep(Protocol):
    def __call__(
        self,
        calls: Sequence[ToolCall],
        results: Sequence[Result],
        /,
        *,
        state: SearchState | None = None,
    ) -> list[Message]: ...


PROVIDERS = ("anthropic", "gemini", "openai-chat", "openai-responses")
"""The names `get_adapter` knows."""


def get_adapter(provider: str, *, strict: bool = False, search: str = "native") -> Adapter:
    """The `Adapter` for `provider` (one of `PROVIDERS`).

    Args:
        provider: `openai-chat`, `openai-responses`, `anthropic` or `gemini`.
        strict: OpenAI's strict mode for tool definitions (see `strict_schema`).
        search: how deferred tools are searched where the provider has its own tool search
            (Anthropic, OpenAI Responses): `native`, `regex` (Anthropic only) or `neutral`
            (our `tool_search` tool, as for the other providers).

    Raises:
        UsageError: an unknown provider, or `strict` for a provider without strict mode.
    """
    if provider not in PROVIDERS:
        raise UsageError(
            f"unknown provider {provider!r}{did_you_mean(provider, PROVIDERS)} "
            f"(known: {', '.join(PROVIDERS)})"
        )
    if search not in ("native", "neutral") and not (provider == "anthropic" and search == "regex"):
        raise UsageError(f"search={search!r}: expected native or neutral (or regex for anthropic)")
    if strict and not provider.startswith("openai"):
        raise UsageError(
            f"strict=True is OpenAI's strict mode; {provider!r} has none, leave strict off"
        )
    if provider == "openai-chat":
        return Adapter(
            provider=provider,
            tools=functools.partial(openai_chat_tools, strict=strict),
            parse_calls=_ignoring_state(parse_openai_chat_calls),
            format_result=openai_chat_result,
            format_results=openai_chat_results,
        )
    if provider == "openai-responses":
        return Adapter(
            provider=provider,
            tools=functools.partial(openai_responses_tools, strict=strict, search=search),
            parse_calls=parse_openai_responses_calls,
            format_result=openai_responses_result,
            format_results=openai_responses_results,
        )
    if provider == "anthropic":
        return Adapter(
            provider=provider,
            tools=functools.partial(anthropic_tools, search=search),
            parse_calls=parse_anthropic_calls,
            format_result=anthropic_result,
            format_results=anthropic_results,
        )
    return Adapter(
        provider=provider,
        tools=gemini_tools,
        parse_calls=_ignoring_state(parse_gemini_calls),
        format_result=gemini_result,
        format_results=gemini_results,
    )


def _ignoring_state(parse: Callable[[Any], list[ToolCall]]) -> _ParseStep:
    """A provider without tool search of its own: nothing to read back from its responses
    (the neutral `tool_search` results are read by `format_results`)."""

    def parse_calls(response: Any, /, *, state: SearchState | None = None) -> list[ToolCall]:
        return parse(response)

    return parse_calls
