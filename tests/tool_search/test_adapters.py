"""Adapters with deferred tools: provider-native shapes (checked against the SDKs' own typed
params, as tests/test_adapters.py does), their tool-search results read back, and the
provider-neutral `tool_search` everywhere else."""

from __future__ import annotations

from typing import Any

import anthropic.types as anthropic_types
import openai.types.chat as chat_types
import openai.types.responses as responses_types
import pytest
from google.genai import types as gemini_types
from pydantic import TypeAdapter

from toolnexus import Toolkit, UsageError, create_toolkit, get_adapter
from toolnexus.adapters import (
    anthropic_tools,
    gemini_tools,
    mcp_tools,
    openai_chat_results,
    openai_chat_tools,
    openai_responses_tools,
    parse_anthropic_calls,
    parse_openai_responses_calls,
)
from toolnexus.base import ToolCall

from .conftest import forecast, hello, star_repo


def conforms(param_type: Any, value: Any) -> None:
    """`value` validates as `param_type` and loses no key doing so (no invented keys)."""
    assert TypeAdapter(param_type).validate_python(value) == value


@pytest.fixture
def toolkit() -> Any:
    with create_toolkit(
        extra_tools=[forecast, star_repo, hello], tool_search={"always": ["hello"]}
    ) as tk:
        yield tk


def test_anthropic_native_defer_loading_and_bm25_search_tool(toolkit: Toolkit) -> None:
    state = toolkit.search_state()
    definitions = anthropic_tools(toolkit.tools(), state=state)
    by_name = {d["name"]: d for d in definitions}
    assert sorted(by_name) == ["forecast", "hello", "star_repo", "tool_search_tool_bm25"]
    assert by_name["forecast"]["defer_loading"] is True
    assert "defer_loading" not in by_name["hello"]
    search = by_name["tool_search_tool_bm25"]
    assert search == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    conforms(anthropic_types.ToolSearchToolBm25_20251119Param, search)
    for name in ("forecast", "hello", "star_repo"):
        conforms(anthropic_types.ToolParam, by_name[name])
    regex = anthropic_tools(toolkit.tools(), state=state, search="regex")[-1]
    conforms(anthropic_types.ToolSearchToolRegex20251119Param, regex)
    assert regex["type"] == "tool_search_tool_regex_20251119"


def test_anthropic_search_results_are_read_back_into_the_state(toolkit: Toolkit) -> None:
    state = toolkit.search_state()
    message = anthropic_types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "tool_search_tool_bm25",
                    "input": {"query": "weather"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [{"type": "tool_reference", "tool_name": "forecast"}],
                    },
                },
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "forecast",
                    "input": {"city": "Oslo"},
                },
            ],
        }
    )
    calls = parse_anthropic_calls(message, state=state)
    assert [c.name for c in calls] == ["forecast"]
    assert state.loaded == {"forecast"}
    assert toolkit.execute_many(calls)[0].content == "sunny in Oslo"


def test_openai_responses_native_defer_loading_and_hosted_search(toolkit: Toolkit) -> None:
    state = toolkit.search_state()
    definitions = openai_responses_tools(toolkit.tools(), state=state, strict=True)
    assert definitions[-1] == {"type": "tool_search"}
    conforms(responses_types.ToolSearchToolParam, definitions[-1])
    functions = {d["name"]: d for d in definitions[:-1]}
    assert sorted(functions) == ["forecast", "hello", "star_repo"]
    assert functions["star_repo"]["defer_loading"] is True
    assert "defer_loading" not in functions["hello"]
    for d in functions.values():
        conforms(responses_types.FunctionToolParam, d)


def test_openai_responses_search_output_is_read_back(toolkit: Toolkit) -> None:
    state = toolkit.search_state()
    items = [
        responses_types.ResponseToolSearchCall.model_validate(
            {
                "id": "ts_1",
                "type": "tool_search_call",
                "arguments": {"query": "star"},
                "execution": "server",
                "status": "completed",
            }
        ),
        responses_types.ResponseToolSearchOutputItem.model_validate(
            {
                "id": "tso_1",
                "type": "tool_search_output",
                "execution": "server",
                "status": "completed",
                "tools": [
                    {
                        "type": "function",
                        "name": "star_repo",
                        "parameters": {"type": "object", "properties": {}},
                        "strict": False,
                        "defer_loading": True,
                    }
                ],
            }
        ),
        responses_types.ResponseFunctionToolCall.model_validate(
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "star_repo",
                "arguments": '{"owner": "a", "repo": "b"}',
            }
        ),
    ]
    calls = parse_openai_responses_calls(items, state=state)
    assert [(c.name, c.id) for c in calls] == [("star_repo", "call_1")]
    assert state.loaded == {"star_repo"}


def test_chat_completions_get_the_neutral_search_tool(toolkit: Toolkit) -> None:
    state = toolkit.search_state()
    definitions = openai_chat_tools(toolkit.tools(), state=state, strict=True)
    assert [d["function"]["name"] for d in definitions] == ["hello", "tool_search"]
    for d in definitions:
        conforms(chat_types.ChatCompletionToolParam, d)
    search = definitions[1]["function"]
    assert search["strict"] is True and search["parameters"]["required"] == [
        "query",
        "mode",
        "namespace",
        "limit",
    ]
    calls = [ToolCall(name="tool_search", arguments='{"query": "weather forecast"}', id="c1")]
    results = toolkit.execute_many(calls)
    messages = openai_chat_results(calls, results, state=state)
    assert "forecast" in messages[0]["content"]
    assert state.loaded == {"forecast"}
    after = [d["function"]["name"] for d in openai_chat_tools(toolkit.tools(), state=state)]
    assert after == ["forecast", "hello", "tool_search"]


def test_gemini_and_mcp_get_the_neutral_search_tool(toolkit: Toolkit) -> None:
    state = toolkit.search_state()
    state.load(["star_repo"])
    declarations = gemini_tools(toolkit.tools(), state=state)
    gemini_types.Tool.model_validate(declarations[0])
    names = [d["name"] for d in declarations[0]["function_declarations"]]
    assert names == ["hello", "star_repo", "tool_search"]
    assert [t.name for t in mcp_tools(toolkit.tools(), state=state)] == names


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses"])
def test_native_providers_can_use_the_neutral_search(toolkit: Toolkit, provider: str) -> None:
    adapter = get_adapter(provider, search="neutral")
    definitions = adapter.tools(toolkit.tools(), state=toolkit.search_state())
    names = [d["name"] for d in definitions]
    assert names == ["hello", "tool_search"]
    assert not any("defer_loading" in d for d in definitions)


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai-chat", "openai-responses"])
def test_every_adapter_records_a_neutral_search(toolkit: Toolkit, provider: str) -> None:
    """An agent loop written once: the search result goes back through `format_results` with
    the state, whatever the provider."""
    adapter = get_adapter(provider, search="neutral")
    state = toolkit.search_state()
    calls = [ToolCall(name="tool_search", arguments={"query": "star a repository"}, id="x1")]
    adapter.format_results(calls, toolkit.execute_many(calls), state=state)
    assert state.loaded == {"star_repo"}
    empty: dict[str, Any] = {
        "anthropic": [],
        "gemini": {"candidates": []},
        "openai-chat": {"role": "assistant", "content": "done"},
        "openai-responses": [],
    }
    assert adapter.parse_calls(empty[provider], state=state) == []
    assert state.loaded == {"star_repo"}


def test_without_a_state_every_tool_goes_out_and_no_search_tool(toolkit: Toolkit) -> None:
    assert [d["name"] for d in anthropic_tools(toolkit.tools())] == [
        "forecast",
        "hello",
        "star_repo",
    ]
    assert not any("defer_loading" in d for d in openai_responses_tools(toolkit.tools()))


def test_unknown_search_modes_are_refused() -> None:
    with pytest.raises(UsageError, match="search='regex'"):
        get_adapter("openai-responses", search="regex")
    with pytest.raises(UsageError, match="search='fuzzy'"):
        anthropic_tools([], state=None, search="fuzzy")
