"""The provider-neutral `tool_search` tool: keywords or a regex in, matching deferred tools out.

What the model calls where the provider has no tool search of its own (Chat Completions,
Gemini, MCP clients of `serve`), and what `Toolkit.execute("tool_search", ...)` runs for any of
them. It is an ordinary read-only tool: approval rules, middleware and audit see it like any
other. Its result names the tools found in `Result.metadata["tool_search"]`, which
`SearchState.observe` (and the adapters' `*_results(..., state=)`) read to load them, so their
definitions go out from the next request on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..base import Result, Tool, ToolContext
from ..errors import ConfigError
from ..runtime.workers import run_in_worker
from .index import MAX_PATTERN, SearchIndex, short_description
from .state import SEARCH_METADATA

__all__ = ["MAX_LIMIT", "SEARCH_TOOL", "search_tool"]

SEARCH_TOOL = "tool_search"
"""The name of the provider-neutral search tool."""

MAX_LIMIT = 20
"""Most tools one search returns."""

_DESCRIPTION = (
    "Search the {count} more tools available beyond the ones you can see. Describe what you "
    "want to do in a few keywords (e.g. 'star a repository'), or give a regular expression "
    "over tool names and descriptions with mode 'regex'. The tools found can be called from "
    "your next turn on."
)


def search_parameters(limit: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "Keywords for what you want to do, or a regex with mode 'regex'.",
            },
            "mode": {
                "type": "string",
                "enum": ["keywords", "regex"],
                "description": "'keywords' (default, ranked) or 'regex' (Python syntax, "
                f"case-insensitive, at most {MAX_PATTERN} characters).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": f"How many tools to return (default {limit}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


class _LazyIndex:
    """Built on the first search: a toolkit that is never searched pays nothing for it."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = tools
        self._index: SearchIndex | None = None
        self._lock = threading.Lock()

    def get(self) -> SearchIndex:
        if self._index is None:
            with self._lock:
                if self._index is None:
                    self._index = SearchIndex(tools=self._tools)
        return self._index


def search_tool(
    deferred: Sequence[Tool], *, limit: int = 5, visible: Callable[[Tool], bool] | None = None
) -> Tool:
    """The `tool_search` tool over `deferred` (the tools whose definitions are held back).

    `visible` (the `access:` entries, for the caller of each search) leaves out the tools the
    caller may not see: a search must not reveal what `tools/list` hides."""
    index = _LazyIndex(deferred)
    by_name = {t.name: t for t in deferred}

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> Result:
        query: str = arguments["query"]
        mode: str = arguments.get("mode", "keywords")
        wanted: int = arguments.get("limit", limit)
        # Asked for every match when some may be left out, so the caller still gets `wanted`.
        count = wanted if visible is None else len(deferred)
        complete = True
        # On a worker thread: the first search builds the index (0.35-0.65 s for GitHub's
        # 1,223 tools) and a regex search may take REGEX_BUDGET; on the loop, that would stall
        # every other call (and, under `serve`, every other client) meanwhile.
        if mode == "regex":
            try:
                hits, complete = await run_in_worker(lambda: index.get().search_regex(query, count))
            except ConfigError as exc:
                return Result.error(
                    f"argument 'query' (mode regex): {exc.message}", error_type="InvalidArguments"
                )
        else:
            hits = await run_in_worker(lambda: index.get().search(query, count))
        tools = [by_name[h.name] for h in hits]
        if visible is not None:
            tools = [t for t in tools if visible(t)][:wanted]
        result = found(query, tools)
        if complete:
            return result
        note = "\n(The pattern is slow: only part of the tools were searched. Simplify it.)"
        return Result(
            content=result.content + note,
            structured=result.structured,
            metadata={**result.metadata, "partial": True},
        )

    return Tool(
        name=SEARCH_TOOL,
        handler=handler,
        description=_DESCRIPTION.format(count=len(deferred)),
        parameters=search_parameters(limit),
        source="python",
        title="Search tools",
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=False,
        origin="toolnexus tool search",
        meta={SEARCH_METADATA: True},
    )


def found(query: str, tools: Sequence[Tool]) -> Result:
    """The result the model reads: each tool's name and first sentence."""
    if not tools:
        return Result(
            content=f"No tool matches {query!r}. Try other words, or fewer of them.",
            structured={"tools": []},
            metadata={SEARCH_METADATA: []},
        )
    entries = [{"name": t.name, "description": short_description(t.description)} for t in tools]
    lines = [
        f"- {e['name']}: {e['description']}" if e["description"] else f"- {e['name']}"
        for e in entries
    ]
    text = f"{len(tools)} tool(s) found; you can call them now:\n" + "\n".join(lines)
    return Result(
        content=text,
        structured={"tools": entries},
        metadata={SEARCH_METADATA: [t.name for t in tools]},
    )
