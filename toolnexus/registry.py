"""Registry: the tools of one toolkit generation, by name.

Listing is sorted by name so the tool block of a prompt stays byte-identical from request to
request (provider prompt caches key on it). Registration is atomic: a batch with one bad or
duplicate name registers nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from ._suggest import closest
from .base import Tool
from .errors import ToolNotFound, UsageError
from .schema import check_name

__all__ = ["Registry"]


class Registry:
    """Tools by name; safe to read and write from several threads."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] = {}
        self._sorted: tuple[Tool, ...] | None = ()
        self.register(*tools)

    def register(self, *tools: Tool, replace: bool = False) -> None:
        """Add tools, all or none.

        Raises:
            UsageError: a name is invalid, appears twice in the batch, or is already registered
                (unless `replace`); the message names both owners.
        """
        batch: dict[str, Tool] = {}
        for t in tools:
            check_name(t.name)
            if t.name in batch:
                raise UsageError(_clash(t.name, batch[t.name], t))
            batch[t.name] = t
        with self._lock:
            if not replace:
                for name, t in batch.items():
                    if name in self._tools:
                        raise UsageError(_clash(name, self._tools[name], t))
            self._tools.update(batch)
            self._sorted = None

    def remove(self, name: str) -> Tool:
        """Remove and return a tool.

        Raises:
            ToolNotFound: no tool has that name.
        """
        with self._lock:
            if name not in self._tools:
                raise ToolNotFound(self.not_found_message(name))
            self._sorted = None
            return self._tools.pop(name)

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolNotFound(self.not_found_message(name))
        return tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools())

    def tools(self) -> tuple[Tool, ...]:
        """Every tool, sorted by name."""
        listing = self._sorted
        if listing is None:
            with self._lock:
                listing = tuple(sorted(self._tools.values(), key=lambda t: t.name))
                self._sorted = listing
        return listing

    def names(self) -> list[str]:
        return [t.name for t in self.tools()]

    def subset(self, names: Iterable[str]) -> Registry:
        """A new registry holding only `names`.

        Raises:
            ToolNotFound: one of the names is unknown (with a suggestion).
        """
        picked = [self[name] for name in names]
        return Registry(picked)

    def clone(self) -> Registry:
        """An independent copy (tools are immutable and shared)."""
        return Registry(self.tools())

    def not_found_message(self, name: str, *, names: list[str] | None = None) -> str:
        """`unknown tool 'reed'; did you mean 'read'?` plus the available names when few.

        `names`: the tools the caller may see (default: every one), so that neither a
        suggestion nor the list reveals a tool the caller may not use."""
        names = list(self._tools) if names is None else names
        close = closest(name, names, n=3)
        message = f"unknown tool {name!r}"
        if close:
            message += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
        elif names and len(names) <= 20:
            message += "; available tools: " + ", ".join(sorted(names))
        elif not names:
            message += "; this toolkit has no tools"
        return message


def _clash(name: str, first: Tool, second: Tool) -> str:
    a = first.origin or first.source
    b = second.origin or second.source
    return (
        f"two tools are named {name!r}: one from {a}, one from {b}; "
        "rename one, or give its source a prefix"
    )
