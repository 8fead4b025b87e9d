"""What the adapters send when tools are deferred, and what they read back from providers.

Two ways to hold definitions back:

- provider-neutral (Chat Completions, Gemini, MCP, or any provider on request): the request
  carries the loaded tools plus `tool_search`; a search result loads what it found into the
  conversation's `SearchState`, and those definitions go out from the next request on;
- native (Anthropic Messages, OpenAI Responses): every definition goes out, the deferred ones
  marked `defer_loading`, with the provider's own tool-search tool; the provider searches and
  loads tools itself, and the adapters read its search results back into the `SearchState`
  (so the state stays true if the conversation moves to another provider or is saved). The
  deferred tools keep `defer_loading` even once found, so the tools part of the prompt, which
  providers cache, does not change from request to request.

Without a `state`, adapters send every tool as before and no search tool: deferral is
something a conversation opts into.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ..base import Tool
from ..errors import UsageError
from .plan import is_deferred, is_search_tool
from .state import SearchState

__all__ = [
    "ANTHROPIC_SEARCH_TOOLS",
    "NativeSearch",
    "native_split",
    "observe_anthropic",
    "observe_responses",
    "sent_tools",
]

NativeSearch = Literal["native", "regex", "neutral"]
"""`native` (the provider's default search: BM25 on Anthropic), `regex` (Anthropic's regex
variant) or `neutral` (our `tool_search` tool, as for providers without native search)."""

ANTHROPIC_SEARCH_TOOLS: Mapping[str, dict[str, str]] = {
    "native": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
"""Anthropic's server-side tool-search tools (`anthropic.types.ToolSearchTool*Param`)."""


def sent_tools(tools: Iterable[Tool], state: SearchState | None) -> list[Tool]:
    """The tools whose definitions a provider-neutral request carries.

    Without `state`: every tool but `tool_search`. With it: the tools that are not deferred
    (`tool_search` among them) and the deferred ones the conversation loaded. Names in `state`
    that no longer exist are dropped from it.
    """
    items = list(tools)
    if state is None:
        return [t for t in items if not is_search_tool(t)]
    state.prune(t.name for t in items if is_deferred(t))
    return [t for t in items if not is_deferred(t) or t.name in state]


def native_split(
    tools: Iterable[Tool], state: SearchState | None, search: str, *, regex: bool
) -> tuple[list[Tool], bool] | None:
    """For a provider with native search: (every tool but `tool_search`, whether any is
    deferred), or None when the neutral way applies (`search="neutral"`, or no state).

    Raises:
        UsageError: an unknown `search` (or `regex` where the provider has no such variant).
    """
    known = ("native", "regex", "neutral") if regex else ("native", "neutral")
    if search not in known:
        raise UsageError(f"search={search!r}: expected one of {', '.join(known)}")
    if state is None or search == "neutral":
        return None
    items = list(tools)
    state.prune(t.name for t in items if is_deferred(t))
    plain = [t for t in items if not is_search_tool(t)]
    return plain, any(is_deferred(t) for t in plain)


def observe_anthropic(blocks: Iterable[Any], state: SearchState) -> list[str]:
    """Load the tools an Anthropic `tool_search_tool_result` block references."""
    new: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping) or block.get("type") != "tool_search_tool_result":
            continue
        content: Any = block.get("content")
        refs = content.get("tool_references") if isinstance(content, Mapping) else None
        names = [r.get("tool_name") for r in refs or () if isinstance(r, Mapping)]
        new += state.load(n for n in names if isinstance(n, str))
    return new


def observe_responses(items: Iterable[Any], state: SearchState) -> list[str]:
    """Load the function tools an OpenAI Responses `tool_search_output` item returned (those
    inside a namespace too)."""
    new: list[str] = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("type") != "tool_search_output":
            continue
        for found in item.get("tools") or ():
            if not isinstance(found, Mapping):
                continue
            nested = found.get("tools") if found.get("type") == "namespace" else [found]
            names = [
                f.get("name")
                for f in nested or ()
                if isinstance(f, Mapping) and f.get("type") == "function"
            ]
            new += state.load(n for n in names if isinstance(n, str))
    return new
