"""What a toolkit answers when an MCP server talks back: elicitation and sampling questions
(handed to the application's handlers), log messages (to Python logging), roots, and progress.

A server's question arrives on the session, not on the call that caused it, so each server
keeps an `InFlight` record of its running calls: on 2026-07-28 sessions the question is resolved
inside the call's own task (a context variable names the call exactly); on handshake-era
sessions it arrives on the session's reader task, and is put to the one call in flight. With
several in flight it goes to the toolkit's handler (without a call id), unless one of them has
a handler of its own: then nobody can tell which call asked, and the question is refused
rather than sent to the wrong user.

A handler answering for a known call is cancelled when that call ends (the server gets an error):
a server that asks and returns without waiting, or never cancels its question, would otherwise
leave the handler waiting on a user for as long as the session lives.

A capability is declared to a server only when a handler exists for it, so a server never asks
a question nobody can answer; without one the SDK's refusal stands, as it always has.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..runtime.workers import run_in_worker

if TYPE_CHECKING:
    import mcp_types

    from ..base import ToolContext

__all__ = [
    "ElicitationHandler",
    "InFlight",
    "McpHandlers",
    "SamplingHandler",
    "ServerRequest",
    "client_options",
    "log_level_of",
    "roots_changed",
]

logger = logging.getLogger("toolnexus.mcp")

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's (syslog's) levels, lowest first; `log_level:` takes one of these."""
_PYTHON_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}


@dataclass(frozen=True, kw_only=True)
class ServerRequest:
    """A question an MCP server asked: which server, during which call, and the SDK's params
    (`mcp_types.ElicitRequestFormParams` / `ElicitRequestURLParams` for elicitation,
    `mcp_types.CreateMessageRequestParams` for sampling)."""

    server: str
    """The server's name under `mcp_servers:`."""
    params: Any
    call_id: str | None = None
    """The call the question belongs to; None when it cannot be told (see the module doc)."""
    tool_name: str | None = None
    """The toolkit's name of that call's tool."""


ElicitationHandler = Callable[[ServerRequest], Any]
"""Answers `elicitation/create` (sync or async). Returns an `mcp_types.ElicitResult` (or
`ErrorData`), a mapping (accepted, with that content), or None (declined)."""
SamplingHandler = Callable[[ServerRequest], Any]
"""Answers `sampling/createMessage` (sync or async). Returns an `mcp_types.CreateMessageResult`
(or `CreateMessageResultWithTools`, `ErrorData`), or a string (the assistant's text reply)."""


@dataclass(frozen=True, kw_only=True)
class McpHandlers:
    """The toolkit-wide handlers given to `create_toolkit`; identical handlers compare equal,
    so a reload keeps the sessions they were declared on."""

    elicitation: ElicitationHandler | None = None
    sampling: SamplingHandler | None = None


_asking: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "toolnexus_mcp_call", default=None
)


class InFlight:
    """The calls running on one server, so that its questions find the call that asked."""

    def __init__(self) -> None:
        self._calls: dict[int, ToolContext] = {}
        self._answering: dict[int, set[anyio.CancelScope]] = {}

    def enter(self, ctx: ToolContext) -> contextvars.Token[ToolContext | None]:
        """`ctx`'s call runs from now until `leave`: the server's questions find it. A pair
        of calls, not a context manager: it is entered on every call."""
        self._calls[id(ctx)] = ctx
        return _asking.set(ctx)

    def leave(self, ctx: ToolContext, token: contextvars.Token[ToolContext | None]) -> None:
        """The call has ended: the questions it was asked are answered no more."""
        self._calls.pop(id(ctx), None)
        for scope in self._answering.pop(id(ctx), ()):
            scope.cancel()
        _asking.reset(token)

    @contextmanager
    def answering(self, ctx: ToolContext | None) -> Iterator[anyio.CancelScope]:
        """A scope for a handler answering `ctx`'s question, cancelled when that call ends."""
        with anyio.CancelScope() as scope:
            if ctx is None or self._calls.get(id(ctx)) is not ctx:
                yield scope  # no call to end with
                return
            scopes = self._answering.setdefault(id(ctx), set())
            scopes.add(scope)
            try:
                yield scope
            finally:
                scopes.discard(scope)

    def overrides(self, kind: str) -> bool:
        """Whether a running call has its own handler of `kind` (then asking the toolkit's
        handler instead could answer for the wrong user)."""
        return any(getattr(ctx, kind) is not None for ctx in self._calls.values())

    def asker(self) -> tuple[ToolContext | None, bool]:
        """The call that asked, and whether that is certain (False: several were running)."""
        ctx = _asking.get()
        if ctx is not None and self._calls.get(id(ctx)) is ctx:
            return ctx, True
        calls = list(self._calls.values())
        if len(calls) == 1:
            return calls[0], True
        return None, not calls


def log_level_of(value: object) -> str:
    """A checked `log_level:` value.

    Raises:
        ConfigError: not one of MCP's levels.
    """
    from ..errors import ConfigError

    if not isinstance(value, str) or value.lower() not in LOG_LEVELS:
        raise ConfigError(
            f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}"[:200], field="log_level"
        )
    return value.lower()


def client_options(
    server: str,
    *,
    handlers: McpHandlers,
    inflight: InFlight,
    roots: Callable[[], Sequence[Path]],
    log_level: str | None,
) -> dict[str, Any]:
    """Keyword arguments for `mcp.Client`: identity, callbacks and the modern log opt-in."""
    from mcp_types import Implementation

    options: dict[str, Any] = {
        "client_info": Implementation(name="toolnexus", version=toolnexus_version()),
        "logging_callback": _logging_callback(server),
        "list_roots_callback": _roots_callback(roots),
    }
    if log_level is not None:
        options["log_level"] = log_level
    if handlers.elicitation is not None:
        options["elicitation_callback"] = _question_callback(
            server, "elicitation", handlers.elicitation, inflight, _elicit_result
        )
    if handlers.sampling is not None:
        options["sampling_callback"] = _question_callback(
            server, "sampling", handlers.sampling, inflight, _sampling_result
        )
    return options


def toolnexus_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolnexus")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0"


def _question_callback(
    server: str,
    kind: Literal["elicitation", "sampling"],
    default: Callable[[ServerRequest], Any],
    inflight: InFlight,
    convert: Callable[[Any, Any], Any],
) -> Any:
    async def answer(context: Any, params: Any) -> Any:
        from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, ErrorData

        ctx, certain = inflight.asker()
        handler = default
        if ctx is not None:
            handler = getattr(ctx, kind) or default
        elif not certain and inflight.overrides(kind):
            return ErrorData(
                code=INVALID_REQUEST,
                message=f"the client cannot tell which of its running calls this {kind} "
                "request belongs to; retry with one call at a time",
            )
        request = ServerRequest(
            server=server,
            params=params,
            call_id=ctx.call_id if ctx is not None else None,
            tool_name=ctx.tool_name if ctx is not None else None,
        )
        try:
            with inflight.answering(ctx) as scope:
                outcome = await _answered(handler, request)
            if scope.cancelled_caught:
                return ErrorData(
                    code=INTERNAL_ERROR,
                    message=f"the call that asked this {kind} request has ended",
                )
            return convert(outcome, params)
        except Exception as exc:  # boundary: the application's handler must not end the session
            logger.exception("the %s handler failed for MCP server '%s'", kind, server)
            return ErrorData(
                code=INTERNAL_ERROR,
                message=f"the client's {kind} handler failed: {type(exc).__name__}: {exc}",
            )

    return answer


async def offer_url_elicitations(
    server: str, handlers: McpHandlers, ctx: ToolContext, elicitations: Sequence[Any]
) -> bool:
    """Put each URL elicitation of a -32042 error to the call's (else the toolkit's)
    elicitation handler; True when every one was accepted, so the call may be sent again.

    A handler that fails counts as a refusal (logged): the call then fails, the toolkit
    carries on.
    """
    handler = ctx.elicitation or handlers.elicitation
    if handler is None:
        return False
    for params in elicitations:
        request = ServerRequest(
            server=server, params=params, call_id=ctx.call_id, tool_name=ctx.tool_name
        )
        try:
            answer = _elicit_result(await _answered(handler, request), params)
        except Exception:  # boundary: the application's handler must not end the call badly
            logger.exception("the elicitation handler failed for MCP server '%s'", server)
            return False
        if getattr(answer, "action", None) != "accept":
            return False
    return True


async def _answered(handler: Callable[[ServerRequest], Any], request: ServerRequest) -> Any:
    """The handler's answer. A sync handler runs on a worker thread: it is usually a person
    being asked (a terminal prompt, a UI round trip), and on the toolkit's loop thread it would
    stall every other call and session of the toolkit while it waits."""
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (an async __call__, not callable())
    ):
        return await handler(request)
    outcome = await run_in_worker(handler, request)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return outcome


def _elicit_result(outcome: Any, params: Any) -> mcp_types.ElicitResult | mcp_types.ErrorData:
    from mcp_types import ElicitResult, ErrorData

    if isinstance(outcome, ErrorData):
        return outcome
    if isinstance(outcome, ElicitResult):
        result = outcome
    elif outcome is None:
        return ElicitResult(action="decline")
    elif isinstance(outcome, Mapping):
        result = ElicitResult(action="accept", content=dict(outcome))
    else:
        raise TypeError(
            f"an elicitation handler returns an ElicitResult, a mapping or None, not "
            f"{type(outcome).__name__}"
        )
    if result.action != "accept":
        return result
    return result.model_copy(update={"content": _with_defaults(result.content, params)})


def _with_defaults(content: Mapping[str, Any] | None, params: Any) -> dict[str, Any] | None:
    """An accepted form answer with the fields it left out filled from the schema's defaults
    (SEP-1034): a person who accepts a form without touching a field accepts its default, and
    the server should not have to know that the answer came from a bare handler."""
    schema = getattr(params, "requested_schema", None)
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return None if content is None else dict(content)
    filled = dict(content or {})
    for name, field in properties.items():
        if name not in filled and isinstance(field, Mapping) and "default" in field:
            filled[name] = field["default"]
    return filled if filled or content is not None else None


def _sampling_result(outcome: Any, params: Any) -> Any:
    from mcp_types import CreateMessageResult, CreateMessageResultWithTools, ErrorData, TextContent

    if isinstance(outcome, CreateMessageResult | CreateMessageResultWithTools | ErrorData):
        return outcome
    if isinstance(outcome, str):
        return CreateMessageResult(
            role="assistant", content=TextContent(text=outcome), model="toolnexus-sampling"
        )
    raise TypeError(
        f"a sampling handler returns a CreateMessageResult or a string, not "
        f"{type(outcome).__name__}"
    )


def _logging_callback(server: str) -> Any:
    target = logging.getLogger(f"toolnexus.mcp.{server}")

    async def log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        data = params.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        if params.logger:
            text = f"[{params.logger}] {text}"
        target.log(_PYTHON_LEVELS.get(params.level, logging.INFO), "%s", text)

    return log


def _roots_callback(roots: Callable[[], Sequence[Path]]) -> Any:
    async def list_roots(context: Any) -> mcp_types.ListRootsResult:
        from mcp_types import ListRootsResult, Root

        return ListRootsResult(
            roots=[Root(uri=root.as_uri(), name=root.name or str(root)) for root in roots()]  # type: ignore[arg-type]
        )

    return list_roots


async def roots_changed(client: Any, server: str) -> None:
    """`notifications/roots/list_changed` on a handshake-era session (2026-07-28 has no
    client notifications: such a server asks again when it needs to)."""
    from mcp_types import RootsListChangedNotification
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return
    try:
        # The session's own method, not Client's: that one warns about 2026-07-28's deprecation.
        await client.session.send_notification(RootsListChangedNotification())
    except Exception as exc:  # noqa: BLE001 - a notification that cannot go costs nothing else
        logger.debug("MCP server '%s': roots/list_changed not sent: %s", server, exc)
