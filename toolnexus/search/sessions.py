"""Per-client search state for `serve`: each MCP connection loads its own deferred tools.

`tools/list` shows a connection the tools that are not deferred, `tool_search`, and what that
connection's searches found; a search that finds new tools tells that client (and only that
client) `notifications/tools/list_changed`, so it lists again and sees them. Stateless
connections (2026-07-28 requests, stateless HTTP) have no session to keep a state in: they
are shown every tool, as a toolkit without deferral would be.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..base import Result
from .state import SearchState

__all__ = ["SessionStates"]


class SessionStates:
    """One `SearchState` per live MCP connection (forgotten with the connection)."""

    def __init__(self) -> None:
        self._states: weakref.WeakKeyDictionary[Any, SearchState] = weakref.WeakKeyDictionary()

    def state(self, ctx: Any) -> SearchState | None:
        """The state of the connection `ctx` (a request context) belongs to; None when the
        request has no session."""
        connection = _connection(ctx)
        if connection is None:
            return None
        found = self._states.get(connection)
        if found is None:
            found = self._states[connection] = SearchState()
        return found

    async def observe(self, ctx: Any, result: Result) -> None:
        """Load what a `tool_search` result found and tell the client its list changed."""
        state = self.state(ctx)
        if state is not None and state.observe(result):
            connection = _connection(ctx)
            if connection is not None:
                await connection.send_tool_list_changed()


def _connection(ctx: Any) -> Any:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    # As `serve`'s announcer does: the low-level request context does not expose the
    # connection, the session proxy holds it.
    return getattr(ctx.session, "_connection", None)
