"""The provider-neutral `tool_search` tool: keywords or a regex in, matching deferred tools out.

What the model calls where the provider has no tool search of its own (Chat Completions,
Gemini, MCP clients of `serve`), and what `Toolkit.execute("tool_search", ...)` runs for any of
them. It is an ordinary read-only tool: approval rules, middleware and audit see it like any
other. Its result names the tools found in `Result.metadata["tool_search"]`, which
`SearchState.observe` (and the adapters' `*_results(..., state=)`) read to load them, so their
definitions go out from the next request on.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..base import Result, Tool, ToolContext
from ..errors import ConfigError
from ..runtime.workers import run_in_worker
from .index import MAX_PATTERN, SearchIndex, short_description
from .semantic import DEPTH, Embedder, EmbeddingCache, SemanticIndex, fuse
from .state import SEARCH_METADATA

__all__ = ["MAX_LIMIT", "SEARCH_TOOL", "Ranker", "namespace_of", "search_tool"]

SEARCH_TOOL = "tool_search"
"""The name of the provider-neutral search tool."""

MAX_LIMIT = 20
"""Most tools one search returns."""

_DESCRIPTION = (
    "Search the {count} more tools available beyond the ones you can see. Describe the task "
    "you want done in plain words, as you would to a colleague ('make my own copy of a "
    "repository', 'who am I logged in as'), not a guessed tool name. Mode 'browse' lists the "
    "groups of tools (API sections, MCP servers, included tool sets) with how many tools each "
    "holds; give 'namespace' to search within one group. Mode 'regex' takes a regular "
    "expression over tool names and descriptions. The tools found can be called from your "
    "next turn on."
)

NAMESPACE_KEYS = ("server", "tags", "include")
"""Where a tool's namespace comes from, first found wins: its MCP server, its OpenAPI
operation's first tag, the include that brought it in."""


def namespace_of(t: Tool) -> str | None:
    """The group a tool is browsed under (see `NAMESPACE_KEYS`); None when it has none."""
    for key in NAMESPACE_KEYS:
        value = t.meta.get(key)
        if isinstance(value, list | tuple) and value:
            value = value[0]
        if isinstance(value, str) and value:
            return value
    return None


def search_parameters(limit: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "The task in plain words, or a regex with mode 'regex' "
                "(not needed with mode 'browse').",
            },
            "mode": {
                "type": "string",
                "enum": ["keywords", "regex", "browse"],
                "description": "'keywords' (default, ranked), 'regex' (Python syntax, "
                f"case-insensitive, at most {MAX_PATTERN} characters) or 'browse' (list the "
                "namespaces and their tool counts).",
            },
            "namespace": {
                "type": "string",
                "maxLength": 200,
                "description": "Search only the tools of this namespace (from mode 'browse').",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": f"How many tools to return (default {limit}).",
            },
        },
        "additionalProperties": False,
    }


class Ranker:
    """The lexical index, and with an embedder the semantic one, over one set of tools:
    keywords are ranked by BM25F alone, or by both fused (`semantic.fuse`)."""

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        embedder: Embedder | None = None,
        cache: EmbeddingCache | None = None,
    ) -> None:
        self.tools = tools
        self.by_name = {t.name: t for t in tools}
        self.lexical = SearchIndex(tools=tools)
        self.semantic = (
            SemanticIndex(tools=tools, embedder=embedder, cache=cache or EmbeddingCache())
            if embedder is not None
            else None
        )
        groups: dict[str, list[int]] = {}
        for i, t in enumerate(tools):
            groups.setdefault(namespace_of(t) or "(other)", []).append(i)
        self.namespaces = {k: frozenset(v) for k, v in sorted(groups.items())}

    def search(self, query: str, limit: int, *, namespace: str | None = None) -> list[Tool]:
        within = self.namespaces.get(namespace, frozenset()) if namespace is not None else None
        if self.semantic is None and within is None:
            return [self.by_name[h.name] for h in self.lexical.search(query, limit)]
        if self.semantic is None:
            hits = self.lexical.ranked(query, limit, within=within)
            return [self.tools[i] for i, _ in hits]
        lexical = [i for i, _ in self.lexical.ranked(query, DEPTH, within=within)]
        semantic = [i for i, _ in self.semantic.ranked(query, DEPTH, within=within)]
        fused = fuse([(lexical, self.semantic.embedder.lexical_weight), (semantic, 1.0)])
        return [self.tools[i] for i, _ in fused[:limit]]


class _LazyIndex:
    """Built on the first search: a toolkit that is never searched pays nothing for it."""

    def __init__(
        self, tools: Sequence[Tool], embedder: Embedder | None, cache: EmbeddingCache | None
    ) -> None:
        self._tools = tools
        self._embedder = embedder
        self._cache = cache
        self._index: Ranker | None = None
        self._lock = threading.Lock()

    def get(self) -> Ranker:
        if self._index is None:
            with self._lock:
                if self._index is None:
                    self._index = Ranker(self._tools, embedder=self._embedder, cache=self._cache)
        return self._index


def search_tool(
    deferred: Sequence[Tool],
    *,
    limit: int = 5,
    visible: Callable[[Tool], bool] | None = None,
    embedder: Embedder | None = None,
    cache: EmbeddingCache | None = None,
) -> Tool:
    """The `tool_search` tool over `deferred` (the tools whose definitions are held back);
    keywords ranked lexically, or fused with `embedder`'s vectors (cached in `cache`).

    `visible` (the `access:` entries, for the caller of each search) leaves out the tools the
    caller may not see: a search or a browse must not reveal what `tools/list` hides."""
    index = _LazyIndex(deferred, embedder, cache)
    by_name = {t.name: t for t in deferred}

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> Result:
        query: str | None = arguments.get("query")
        mode: str = arguments.get("mode", "keywords")
        wanted: int = arguments.get("limit", limit)
        # Asked for every match when some may be left out, so the caller still gets `wanted`.
        count = wanted if visible is None else len(deferred)
        namespace: str | None = arguments.get("namespace")
        complete = True
        # On a worker thread: the first search builds the index (0.35-0.65 s for GitHub's
        # 1,223 tools, plus the embeddings not cached yet) and a regex search may take
        # REGEX_BUDGET; on the loop, that would stall every other call (and, under `serve`,
        # every other client) meanwhile.
        try:
            ranker = await run_in_worker(index.get)
        except ConfigError as exc:
            return Result.error(f"tool search: {exc.message}", error_type="ConfigError")
        spaces = namespaces(ranker, visible)
        if mode == "browse":
            return browsed(spaces)
        if namespace is not None and namespace not in spaces:
            known = ", ".join(spaces)
            close = difflib.get_close_matches(namespace, list(spaces), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {known}"
            return Result.error(
                f"argument 'namespace': no namespace {namespace!r}{hint}",
                error_type="InvalidArguments",
            )
        if not query:
            return Result.error(
                f"argument 'query' is required in mode {mode!r} (mode 'browse' needs none)",
                error_type="InvalidArguments",
            )
        text = query
        if mode == "regex":
            try:
                hits, complete = await run_in_worker(
                    lambda: ranker.lexical.search_regex(
                        text, count if namespace is None else len(deferred)
                    )
                )
            except ConfigError as exc:
                return Result.error(
                    f"argument 'query' (mode regex): {exc.message}", error_type="InvalidArguments"
                )
            chosen = [by_name[h.name] for h in hits]
            if namespace is not None:
                chosen = [t for t in chosen if (namespace_of(t) or "(other)") == namespace]
        else:
            chosen = await run_in_worker(lambda: ranker.search(text, count, namespace=namespace))
        if visible is not None:
            chosen = [t for t in chosen if visible(t)]
        result = found(text, chosen[:wanted])
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


def namespaces(ranker: Ranker, visible: Callable[[Tool], bool] | None) -> dict[str, int]:
    """How many tools each namespace holds, counting only those the caller may see (a
    namespace of hidden tools only is left out: its name would reveal them)."""
    counts = {
        k: sum(1 for i in v if visible is None or visible(ranker.tools[i]))
        for k, v in ranker.namespaces.items()
    }
    return {k: n for k, n in counts.items() if n}


def browsed(spaces: Mapping[str, int]) -> Result:
    """The namespaces and how many tools each holds; loads no tool."""
    entries = [{"namespace": k, "tools": n} for k, n in spaces.items()]
    lines = [f"- {e['namespace']}: {e['tools']} tool(s)" for e in entries]
    text = f"{len(entries)} namespace(s); search one with its name as 'namespace':\n" + "\n".join(
        lines
    )
    return Result(content=text, structured={"namespaces": entries}, metadata={SEARCH_METADATA: []})


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
