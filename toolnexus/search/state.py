"""SearchState: which deferred tools one conversation has loaded.

Kept by the application, one per conversation, so that one toolkit (and its generations) serves
many conversations. It is a plain set of names, serialisable to JSON, and it decides nothing but
which definitions are *sent*: calls are decided, validated and run the same whatever it holds.
Names of tools that no longer exist (a reload removed them) are dropped quietly when definitions
are next computed (`prune`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..base import Result
from ..errors import UsageError

__all__ = ["SEARCH_METADATA", "SearchState"]

SEARCH_METADATA = "tool_search"
"""`Result.metadata` key under which a search result lists the names it found."""

_VERSION = 1


@dataclass(kw_only=True)
class SearchState:
    """The deferred tools loaded in one conversation (their definitions are sent)."""

    loaded: set[str] = field(default_factory=set)

    def __contains__(self, name: object) -> bool:
        return name in self.loaded

    def load(self, names: Iterable[str]) -> list[str]:
        """Mark `names` loaded; returns those that were not loaded before, in order."""
        new = [n for n in dict.fromkeys(names) if n not in self.loaded]
        self.loaded.update(new)
        return new

    def observe(self, results: Result | Iterable[Result]) -> list[str]:
        """Load what `tool_search` results found (other results are ignored); returns the
        newly loaded names. Adapters' `*_results(..., state=)` call this for you."""
        batch = [results] if isinstance(results, Result) else results
        new: list[str] = []
        for result in batch:
            found = result.metadata.get(SEARCH_METADATA)
            if isinstance(found, list | tuple) and not result.is_error:
                new += self.load(str(n) for n in found)
        return new

    def prune(self, existing: Iterable[str]) -> None:
        """Drop names that are not among `existing` (tools a reload removed)."""
        self.loaded.intersection_update(existing)

    def to_dict(self) -> dict[str, Any]:
        return {"version": _VERSION, "loaded": sorted(self.loaded)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchState:
        """The state `to_dict` wrote.

        Raises:
            UsageError: not a mapping of that shape (or of a newer version).
        """
        if not isinstance(data, Mapping):
            raise UsageError(f"a search state is a mapping, got {type(data).__name__}")
        version, loaded = data.get("version"), data.get("loaded")
        if version != _VERSION or isinstance(version, bool):  # True == 1 in Python
            raise UsageError(f"search state version {version!r} is not {_VERSION}")
        if not isinstance(loaded, list) or not all(isinstance(n, str) for n in loaded):
            raise UsageError("search state `loaded` must be a list of tool names")
        return cls(loaded=set(loaded))

    @classmethod
    def from_json(cls, text: str | bytes) -> SearchState:
        """The state `to_json` wrote.

        Raises:
            UsageError: not JSON, or not of the shape `from_dict` takes.
        """
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise UsageError(f"a search state is JSON: {exc}") from None
        return cls.from_dict(data)
