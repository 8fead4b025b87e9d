"""Which tools of a generation are deferred, and the `tool_search` tool over them.

Deferral is decided once per generation (and again when an MCP server's tools change), from:

- each tool's own mark, `meta["defer"]` (True or False), set by `defer:` on a manifest entry,
  an include or an MCP server (`mark`);
- the toolkit-wide `tool_search:` block (`ToolSearchSettings`): when the tools' definitions are
  over its budget (`max_tools` tools or `max_bytes` bytes of definitions; with neither, always),
  *every* tool is deferred except those named in `always` or marked `defer: false`; `defer`
  globs defer the tools they name whatever the budget.

A budget decides all or nothing rather than "the first N tools": which tools stay loaded then
never depends on how many others there are or on their order, and it is what agents such as
Claude Code do (search turns on when the definitions would take too much of the context).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import Tool
from ..errors import ConfigError
from ..manifest.units import parse_size
from .semantic import Embedder, EmbeddingCache, as_embedder, default_cache_path
from .state import SEARCH_METADATA
from .tool import MAX_LIMIT, SEARCH_TOOL, search_tool

__all__ = [
    "ToolSearchSettings",
    "apply_search",
    "definition_bytes",
    "is_deferred",
    "is_search_tool",
    "mark",
    "own_defer",
    "settings_from",
]

_KEYS = ("max_tools", "max_bytes", "always", "defer", "limit", "embedder", "embedding_cache")


@dataclass(frozen=True, kw_only=True)
class ToolSearchSettings:
    """The `tool_search:` block of a manifest, or `create_toolkit(tool_search=...)`."""

    max_tools: int | None = None
    """Defer (all but `always`) when there are more tools than this."""
    max_bytes: int | None = None
    """Defer (all but `always`) when the definitions take more bytes than this (the compact
    JSON of name, description and parameters of every tool)."""
    always: tuple[str, ...] = ()
    """Names or globs of tools that are never deferred."""
    defer: tuple[str, ...] = ()
    """Names or globs of tools deferred whatever the budget."""
    limit: int = 5
    """How many tools a search returns unless the model asks for another number."""
    embedder: Embedder | None = None
    """Rank by meaning too, fused with the lexical ranking (`toolnexus.search.semantic`);
    None: lexical only."""
    embedding_cache: EmbeddingCache | None = None
    """Where the tools' vectors are kept between builds (memory, and an SQLite file unless
    `embedding_cache: false`); made from the settings when an embedder is given."""


def settings_from(value: object) -> ToolSearchSettings | None:
    """`tool_search=` (True, a mapping of the manifest block's keys, settings or None).

    Raises:
        ConfigError: an unknown key or a value of the wrong kind (`field` names it).
    """
    if value is None or value is False:
        return None
    if value is True:
        return ToolSearchSettings()
    if isinstance(value, ToolSearchSettings):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"tool_search takes True, a mapping ({', '.join(_KEYS)}) or None; "
            f"got {type(value).__name__}"
        )
    for key in value:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r}; known: {', '.join(_KEYS)}", field=str(key))
    out: dict[str, Any] = {}
    for key in ("max_tools", "max_bytes", "limit"):
        item = value.get(key)
        if item is None:
            continue
        if key == "max_bytes" and isinstance(item, str):  # `64KB`, as the manifest takes it
            try:
                item = parse_size(item)
            except ValueError as exc:
                raise ConfigError(str(exc), field=key) from None
        if not isinstance(item, int) or isinstance(item, bool) or item < 0:
            raise ConfigError(f"expected a whole number of 0 or more, got {item!r}", field=key)
        out[key] = item
    if not 1 <= out.get("limit", 5) <= MAX_LIMIT:
        raise ConfigError(f"expected 1 to {MAX_LIMIT}, got {out['limit']}", field="limit")
    for key in ("always", "defer"):
        item = value.get(key, ())
        names = [item] if isinstance(item, str) else item
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise ConfigError("expected a tool name or glob, or a list of them", field=key)
        out[key] = tuple(names)
    if value.get("embedder") is not None:
        out["embedder"] = as_embedder(value["embedder"])
        out["embedding_cache"] = _cache_from(value.get("embedding_cache", True))
    elif value.get("embedding_cache") is not None:
        raise ConfigError("embedding_cache needs an embedder", field="embedding_cache")
    return ToolSearchSettings(**out)


def _cache_from(value: object) -> EmbeddingCache:
    """`embedding_cache:`: true (the default file under the user's cache directory), false
    (memory only) or a path."""
    if value is True:
        return EmbeddingCache(path=default_cache_path())
    if value is False:
        return EmbeddingCache()
    if isinstance(value, str | Path) and str(value):
        return EmbeddingCache(path=Path(value).expanduser())
    raise ConfigError(
        f"expected true, false or a file path, got {value!r}", field="embedding_cache"
    )


def mark(t: Tool, defer: bool | None) -> Tool:
    """`t` with its own deferral mark (`defer:` of its entry, include or server); None leaves
    it unmarked."""
    if defer is None or t.meta.get("defer") is defer:
        return t
    return dataclasses.replace(t, meta={**t.meta, "defer": defer})


def own_defer(spec: Mapping[str, Any], chain: Sequence[Any]) -> bool | None:
    """A tool's own mark: `defer:` of its entry (or server), else of the innermost include
    that sets one; None when nothing does."""
    if isinstance(spec.get("defer"), bool):
        return spec["defer"]
    for step in reversed(chain):
        if isinstance(getattr(step, "defer", None), bool):
            return step.defer
    return None


def is_deferred(t: Tool) -> bool:
    """Whether `t`'s definition is held back until a search finds it."""
    return bool(t.meta.get("deferred"))


def is_search_tool(t: Tool) -> bool:
    """Whether `t` is the provider-neutral `tool_search` tool this module adds."""
    return t.meta.get(SEARCH_METADATA) is True


def definition_bytes(tools: Iterable[Tool]) -> int:
    """Bytes of the tools' definitions: the compact JSON of name, description, parameters
    (about what every provider's request carries per tool)."""
    return sum(
        len(
            json.dumps(
                {"name": t.name, "description": t.description, "parameters": t.parameters},
                separators=(",", ":"),
                ensure_ascii=False,
            ).encode()
        )
        for t in tools
    )


def apply_search(
    tools: Sequence[Tool],
    settings: ToolSearchSettings | None,
    *,
    hidden: Collection[str] = (),
    visible: Callable[[Tool], bool] | None = None,
) -> list[Tool]:
    """`tools` with the deferred ones marked `meta["deferred"]`, plus `tool_search` over them
    (leaving out `hidden` tools, which nobody may call, and, per search, the tools `visible`
    says the current caller may not see); `tools` unchanged when none is deferred. A
    `tool_search` added earlier is replaced (an MCP refresh passes it back in).

    Raises:
        ConfigError: another tool is already called `tool_search`.
    """
    plain = [t for t in tools if not is_search_tool(t)]
    deferred_names = _deferred(plain, settings)
    if not deferred_names:
        return [_unmarked(t) for t in plain]
    clash = next((t for t in plain if t.name == SEARCH_TOOL), None)
    if clash is not None:
        raise ConfigError(
            f"a tool is already called {SEARCH_TOOL!r} ({clash.origin or clash.source}), the "
            "name of the tool search this toolkit adds for its deferred tools; rename it",
            field="tool_search",
        )
    out: list[Tool] = []
    for t in plain:
        deferred = t.name in deferred_names
        if deferred != is_deferred(t):
            t = dataclasses.replace(t, meta={**t.meta, "deferred": deferred})
        out.append(t)
    searchable = [t for t in out if is_deferred(t) and t.name not in hidden]
    if settings is None:
        return [*out, search_tool(searchable, visible=visible)]
    tool = search_tool(
        searchable,
        limit=settings.limit,
        visible=visible,
        embedder=settings.embedder,
        cache=settings.embedding_cache,
    )
    return [*out, tool]


def _unmarked(t: Tool) -> Tool:
    if not is_deferred(t):
        return t
    return dataclasses.replace(t, meta={k: v for k, v in t.meta.items() if k != "deferred"})


def _deferred(tools: Sequence[Tool], settings: ToolSearchSettings | None) -> set[str]:
    def named(t: Tool, globs: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(t.name, g) for g in globs)

    always = settings.always if settings is not None else ()
    out: set[str] = set()
    over = settings is not None and _over_budget(tools, settings)
    for t in tools:
        if named(t, always):
            continue
        own = t.meta.get("defer")
        chosen = own is True or (settings is not None and named(t, settings.defer))
        if chosen or (over and own is not False):
            out.add(t.name)
    return out


def _over_budget(tools: Sequence[Tool], settings: ToolSearchSettings) -> bool:
    if settings.max_tools is None and settings.max_bytes is None:
        return True
    if settings.max_tools is not None and len(tools) > settings.max_tools:
        return True
    return settings.max_bytes is not None and definition_bytes(tools) > settings.max_bytes
