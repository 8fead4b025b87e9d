"""Per-client search state for `serve`: each MCP session loads its own deferred tools.

`tools/list` shows a session the tools that are not deferred, `tool_search`, and what that
session's searches found; a search that finds new tools tells that client (and only that
client) `notifications/tools/list_changed`, so it lists again and sees them. Stateless
connections (2026-07-28 requests, stateless HTTP) have no session to keep a state in: they
are shown every tool, as a toolkit without deferral would be.

Where the state lives: with the in-process store, in this process, one per live connection
(forgotten with it). With a shared store (Redis), in the store, keyed by the `Mcp-Session-Id`
and the caller, so any replica serving the session (`toolnexus.serve.sessions`) lists what a
search on another replica loaded; it lives as long as the session's record. There the
`list_changed` notice goes on the response stream of the call that searched, which reaches the
client whichever replica holds its GET stream.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from ..base import Result, current_caller
from ..errors import UsageError
from .state import SEARCH_METADATA, SearchState

if TYPE_CHECKING:
    from ..state import StateBackend

__all__ = ["SessionStates"]

logger = logging.getLogger("toolnexus.serve")


class SessionStates:
    """One `SearchState` per MCP session: per live connection, or in `store` when given (a
    store the replicas share)."""

    def __init__(self, store: StateBackend | None = None) -> None:
        self.store = store
        self._states: weakref.WeakKeyDictionary[Any, SearchState] = weakref.WeakKeyDictionary()

    async def state(self, ctx: Any) -> SearchState | None:
        """The state of the session `ctx` (a request context) belongs to; None when the
        request has no session.

        Raises:
            StateUnavailable: the shared store did not answer.
        """
        key = self._key(ctx)
        if key is not None:
            assert self.store is not None
            raw = await self.store.get(key)
            if raw is None:
                return SearchState()
            try:
                return SearchState.from_json(raw)
            except UsageError as exc:  # written by another version: start again, and say so
                logger.warning("search state of an MCP session dropped: %s", exc)
                return SearchState()
        connection = _connection(ctx)
        if connection is None:
            return None
        found = self._states.get(connection)
        if found is None:
            found = self._states[connection] = SearchState()
        return found

    async def observe(self, ctx: Any, result: Result) -> None:
        """Load what a `tool_search` result found and tell the client its list changed.

        Raises:
            StateUnavailable: the shared store did not answer (nothing was loaded).
        """
        from mcp import types

        if SEARCH_METADATA not in result.metadata:  # not a search: no state to read
            return
        state = await self.state(ctx)
        if state is None or not state.observe(result):
            return
        key = self._key(ctx)
        if key is not None:
            from ..serve.sessions import SESSION_TTL_S

            assert self.store is not None
            await self.store.put(key, state.to_json().encode(), ttl=SESSION_TTL_S)
            notice = types.ToolListChangedNotification()
            await ctx.session.send_notification(notice, related_request_id=ctx.request_id)
            return
        connection = _connection(ctx)
        if connection is not None:
            await connection.send_tool_list_changed()

    def _key(self, ctx: Any) -> str | None:
        """The store key of this request's session, when the state lives in the store."""
        if self.store is None or _connection(ctx) is None:
            return None
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        session_id = headers.get("mcp-session-id") if headers is not None else None
        if not session_id:  # stdio or in process: the connection is the session
            return None
        from ..serve.sessions import caller_key, session_keys

        return session_keys(session_id, caller_key(current_caller())).search


def _connection(ctx: Any) -> Any:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    # As `serve`'s announcer does: the low-level request context does not expose the
    # connection, the session proxy holds it.
    return getattr(ctx.session, "_connection", None)
