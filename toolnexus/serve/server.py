"""A Toolkit served as an MCP server (`toolnexus serve`): stdio and streamable HTTP.

Built on the SDK's low-level `Server` so the toolkit stays in charge: the tool list is the
toolkit's current generation (annotations included), every call goes through
`Toolkit.aexecute`, so validation, approval rules, sandboxes and middleware hold for remote
callers exactly as for a local agent.

Approval. A call a rule marks `ask` is put to the *client's user* through MCP elicitation:
mid-call (`elicitation/create`) on handshake-era connections, or as an `InputRequiredResult`
the client answers and retries on 2026-07-28 connections. The question shows the arguments
whole (or the call is refused unasked when they are too long to show), and the retry's
`requestState` is a ticket the server signed over the whole call, which expires and is used up
by the call it approves (`serve.approvals`): it works on stateless HTTP and across workers that
share `TOOLNEXUS_APPROVAL_SECRET`. A client that did not declare elicitation cannot ask anyone,
so the call is refused with a message saying so. The toolkit's own `approver` is never
consulted for remote calls.

Reload. With `watch`, each reload that changed tools is announced to every connected client:
`notifications/tools/list_changed` on handshake-era connections and a `ToolsListChanged` event
on 2026-07-28 `subscriptions/listen` streams.

Scale-out. `http_app` builds the toolkit in the ASGI app's lifespan, so every uvicorn worker
has its own; `app_from_env` is the import-string factory uvicorn needs for `workers > 1`.

This module imports `mcp`, `starlette` and `uvicorn` inside functions only: `import
toolnexus.serve` stays cheap, and `import toolnexus` never loads it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import ipaddress
import logging
import math
import os
import secrets
import sys
import time
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..approval import Decision
from ..errors import ApprovalDenied, ConfigError, StateUnavailable, ToolError
from .approvals import (
    APPROVAL_SECRET_ENV,
    SHOWN_MAX,
    Approvals,
    StoreUsedApprovals,
    call_digest,
    show_arguments,
)
from .approvals import approval_secret as approval_secret_from_env
from .drain import DEFAULT_GRACE, Drain, draining_server
from .identity import TOKEN_CALLER, remember_caller
from .metrics import INSTALL_HINT, METRICS_PATH, Metrics, answer_label, outcome, tool_label
from .responses import ASGIApp, send_json

if TYPE_CHECKING:
    import mcp.types
    from mcp.server.lowlevel import Server
    from starlette.applications import Starlette

    from ..approval import ApprovalRequest, Approver, Verdict
    from ..manifest.model import ServeAuth
    from ..reload import ReloadEvent
    from ..toolkit import Toolkit

__all__ = [
    "APPROVAL_TIMEOUT_S",
    "HEALTH_PATH",
    "MCP_PATH",
    "ServeOptions",
    "app_from_env",
    "build_server",
    "http_app",
    "serve",
    "serve_stdio",
]

MCP_PATH = "/mcp"
"""Where the streamable HTTP endpoint lives."""
HEALTH_PATH = "/healthz"
"""`GET` answers 200 once the worker's toolkit is built (no token needed: it reveals nothing)."""
APPROVAL_TIMEOUT_S = 600.0
"""How long an approval question waits for the client's user before the call is refused (a
question nobody answers would otherwise hold the call, and its worker, forever); on 2026-07-28
connections, how long the signed approval of the retry stays valid."""

_ENV_MANIFEST = "TOOLNEXUS_SERVE_MANIFEST"
_ENV_TOKEN = "TOOLNEXUS_SERVE_TOKEN"
_ENV_HOST = "TOOLNEXUS_SERVE_HOST"
_ENV_STATELESS = "TOOLNEXUS_SERVE_STATELESS"
_ENV_WATCH = "TOOLNEXUS_SERVE_WATCH"
_ENV_APPROVAL_TIMEOUT = "TOOLNEXUS_SERVE_APPROVAL_TIMEOUT"
_ENV_METRICS_PUBLIC = "TOOLNEXUS_SERVE_METRICS_PUBLIC"
_ENV_STATE = "TOOLNEXUS_SERVE_STATE"
"""`--state` for the workers: apart from `TOOLNEXUS_STATE_URL`, which the manifest overrides."""

_APPROVAL_KEY = "toolnexus/approval"
"""The key of our question in an `InputRequiredResult` and of its answer in the retry."""
_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Allow this call",
            "description": "Untick (or decline) to refuse the call.",
            "default": True,
        }
    },
    "required": ["approve"],
}


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    """How `toolnexus serve` runs; `serve` checks every field before starting anything."""

    manifest: Path
    http: str | None = None
    """`HOST:PORT`, `:PORT` or `PORT` for streamable HTTP (host 127.0.0.1 by default); None
    serves stdio."""
    token: str | None = None
    """Bearer token every HTTP request must carry; required on a non-loopback host. Unused on
    stdio, whose only client is the process that started the server."""
    watch: bool = False
    """Reload on file changes and tell connected clients that the tool list changed."""
    stateless: bool = False
    """Stateless streamable HTTP: no session, any worker answers any request."""
    workers: int = 1
    """uvicorn worker processes (HTTP only; more than one needs `stateless`)."""
    grace: float = DEFAULT_GRACE
    """Seconds a SIGTERM waits for calls in flight before the server shuts down (HTTP)."""
    approval_timeout: float = APPROVAL_TIMEOUT_S
    """Seconds the client's user has to answer an approval question."""
    state: str | None = None
    """The state store's URL (`redis://...`) every worker shares; None: the manifest's `serve:
    {state: ...}`, else `TOOLNEXUS_STATE_URL`, else each process alone."""
    metrics_public: bool = False
    """Serve `/metrics` without authentication (for a scraper on a cluster-internal network)."""


# --- options ----------------------------------------------------------------------------------


def _parse_http(value: str) -> tuple[str, int]:
    """`HOST:PORT`, `[::1]:PORT`, `:PORT` or `PORT` -> (host, port)."""
    text = value.strip()
    if text.isdigit():
        host, port_text = "", text
    elif text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise ConfigError(
                f"{value!r} is not HOST:PORT; write an IPv6 host in brackets, e.g. [::1]:8000",
                field="--http",
            )
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ConfigError(
                f"{value!r} is not HOST:PORT; e.g. 127.0.0.1:8000 or :8000", field="--http"
            )
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(
            f"port {port_text!r} in {value!r} is not a number from 0 to 65535", field="--http"
        )
    return host or "127.0.0.1", int(port_text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def _require_token(host: str, token: str | None, auth: ServeAuth | None = None) -> None:
    if token and auth is not None:
        # Two ways in would make the static token a skeleton key past every identity check.
        raise ConfigError(
            "the manifest's serve.auth checks each caller's OAuth token, and a static bearer "
            "token would let anyone holding it in without one; drop --token (and unset "
            "TOOLNEXUS_TOKEN) or remove serve.auth",
            field="--token",
        )
    if not token and auth is None and not _is_loopback(host):
        raise ConfigError(
            f"refusing to serve on {host}, which is not a loopback address, without a bearer "
            "token: anyone who can reach it could run the tools. Add `serve: {auth: {issuer, "
            "audience}}` to the manifest (OAuth), or pass --token TOKEN or set "
            'TOOLNEXUS_TOKEN (make one with: python -c "import secrets; '
            'print(secrets.token_urlsafe(32))"), or bind to 127.0.0.1',
            field="--token",
        )


def _check(options: ServeOptions, auth: ServeAuth | None = None) -> tuple[str, int] | None:
    if options.state is not None:
        from ..state import open_state

        open_state(options.state)  # an unknown scheme or a missing extra fails before starting
    if options.workers < 1:
        raise ConfigError(f"must be at least 1, got {options.workers}", field="--workers")
    if not options.grace >= 0:  # also refuses NaN
        raise ConfigError(f"must be 0 or more seconds, got {options.grace}", field="--grace")
    if not (math.isfinite(options.approval_timeout) and options.approval_timeout > 0):
        raise ConfigError(
            f"must be a positive number of seconds, got {options.approval_timeout:g}",
            field="--approval-timeout",
        )
    approval_secret_from_env()  # a secret too short to be one fails before anything starts
    if options.http is None:
        if options.workers > 1 or options.stateless:
            flag = "--workers" if options.workers > 1 else "--stateless"
            raise ConfigError("applies to streamable HTTP only; add --http HOST:PORT", field=flag)
        return None
    host, port = _parse_http(options.http)
    _require_token(host, options.token, auth)
    if options.workers > 1 and not options.stateless:
        raise ConfigError(
            "several workers need --stateless: a session lives in one worker, and a load "
            "balancer would send its requests to others",
            field="--workers",
        )
    return host, port


# --- the server -------------------------------------------------------------------------------


class _Announcer:
    """Tells connected clients that the tool list changed.

    Handshake-era connections are tracked weakly (a closed connection simply disappears);
    2026-07-28 clients listen on `subscriptions/listen` streams fed by the bus.
    """

    def __init__(self) -> None:
        from mcp.server.subscriptions import InMemorySubscriptionBus

        self.bus = InMemorySubscriptionBus()
        self.connections: weakref.WeakSet[Any] = weakref.WeakSet()
        self.loop: asyncio.AbstractEventLoop | None = None

    async def track(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        """Server middleware: remember the connection of every handshake-era message."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        self.loop = asyncio.get_running_loop()
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # The low-level request context does not expose the connection (the SDK's newer
            # `Context.connection` is not built by its runner yet); the session holds it.
            self.connections.add(ctx.session._connection)
        return await call_next(ctx)

    async def on_reload(self, event: ReloadEvent) -> None:
        if event.kind != "tools_changed" or self.loop is None:
            return
        if asyncio.get_running_loop() is self.loop:
            await self.announce()
        else:  # a toolkit on its own loop thread (create_toolkit) serving this server's loop
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.announce(), self.loop))

    async def announce(self) -> None:
        from mcp.server.subscriptions import ToolsListChanged

        await self.bus.publish(ToolsListChanged())
        for connection in list(self.connections):
            await connection.send_tool_list_changed()


def build_server(
    toolkit: Toolkit,
    *,
    name: str | None = None,
    approval_timeout: float = APPROVAL_TIMEOUT_S,
    approval_secret: bytes | None = None,
) -> Server[Any]:
    """An MCP `Server` (low-level SDK) that lists and runs `toolkit`'s tools.

    Serve it with `serve_stdio`, `http_app`, any SDK transport, or in-process with
    `mcp.Client(server)`. It advertises `tools.listChanged` and announces every reload that
    changed tools (`toolkit.watch()` or `toolkit.areload()`).

    Args:
        toolkit: the tools to serve; the caller keeps ownership (close it after serving).
        name: the server name clients see; default: the manifest's `name:`, else `toolnexus`.
        approval_timeout: seconds an approval question waits for the client's user (then the
            call is refused with a message saying so); on 2026-07-28 connections, how long the
            signed approval the client sends back stays valid.
        approval_secret: the secret approvals are signed with, shared by every server that
            must accept the others' (at least 32 bytes); default: `TOOLNEXUS_APPROVAL_SECRET`,
            else one made for this server alone.

    Raises:
        ConfigError: `TOOLNEXUS_APPROVAL_SECRET` is shorter than 32 bytes, or the timeout is
            not a positive number.
    """
    return _build_server(toolkit, name, approval_timeout, approval_secret)[0]


def _build_server(
    toolkit: Toolkit,
    name: str | None,
    approval_timeout: float = APPROVAL_TIMEOUT_S,
    secret: bytes | None = None,
    metrics: Metrics | None = None,
) -> tuple[Server[Any], Callable[[ReloadEvent], Awaitable[None]]]:
    """The server, and the reload listener it added to `toolkit.on_reload` (for removal when
    the toolkit outlives the server); `metrics` counts its calls and approvals."""
    from mcp import types
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.models import InitializationOptions
    from mcp.server.subscriptions import ListenHandler
    from mcp.shared.exceptions import MCPDeprecationWarning

    from ..adapters import mcp_result, mcp_tools
    from ..base import Result
    from ..search.sessions import SessionStates
    from .log import ClientLogLevels, forward_logs

    name = name or toolkit.name or "toolnexus"
    approvals = Approvals(
        secret=secret or approval_secret_from_env(),
        ttl=approval_timeout,
        used=StoreUsedApprovals(store=toolkit.store),  # Redis with `--state`: one record for all
    )

    announcer = _Announcer()
    from ..state.memory import MemoryState

    # Each session's loaded deferred tools: in the store when replicas share one.
    searches = SessionStates(None if isinstance(toolkit.store, MemoryState) else toolkit.store)
    log_levels = ClientLogLevels()

    class ToolkitServer(Server[Any]):
        def create_initialization_options(
            self,
            notification_options: NotificationOptions | None = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: dict[str, dict[str, Any]] | None = None,
        ) -> InitializationOptions:
            # Every transport (stdio, each HTTP session, in-process) asks for these: the
            # handshake then advertises tools.listChanged, which reloads make true.
            return super().create_initialization_options(
                notification_options or NotificationOptions(tools_changed=True),
                experimental_capabilities,
                extensions,
            )

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            state = await searches.state(ctx)
        except StateUnavailable as exc:
            from mcp.shared.exceptions import MCPError

            raise MCPError(
                code=types.INTERNAL_ERROR,
                message=f"cannot list this session's tools: the state store: {exc}",
            ) from exc
        return types.ListToolsResult(tools=mcp_tools(toolkit.tools(), state=state))

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        started = time.perf_counter()
        arguments = params.arguments or {}
        written = toolkit.check(params.name, arguments)
        verdict = _from_the_manifests_folder(written, toolkit)
        label = tool_label(toolkit, params.name)
        approver: Approver = _refuse
        if verdict.decision is Decision.ASK:
            gate = await _approval_gate(
                ctx,
                name,
                params=params,
                arguments=arguments,
                verdict=verdict,
                approvals=approvals,
                metrics=None if metrics is None else _ApprovalCounts(metrics, label),
            )
            if isinstance(gate, types.CallToolResult) and metrics is not None:
                metrics.call(label, "denied", time.perf_counter() - started)  # always a refusal
            if isinstance(gate, types.CallToolResult | types.InputRequiredResult):
                return gate
            approver = gate
        from .forward import forwarding

        async with forward_logs(ctx, params.name, log_levels.threshold(ctx)) as logs:
            result = await toolkit.aexecute(
                params.name,
                arguments,
                call_id=f"mcp-{ctx.request_id}",
                approver=approver,
                middleware=logs,
                **forwarding(ctx),  # progress and the servers' questions go to this client
            )
        try:
            await searches.observe(ctx, result)
        except StateUnavailable as exc:  # the search ran; what it found cannot be kept
            result = Result.error(
                f"tool_search found tools, but they could not be loaded for this session: {exc}",
                error_type="StateUnavailable",
            )
        if metrics is not None:
            metrics.call(label, outcome(result), time.perf_counter() - started)
        if result.is_error and written.origin and written.origin != verdict.origin:
            content = result.content.replace(f"({written.origin})", f"({verdict.origin})")
            result = dataclasses.replace(result, content=content)
        return mcp_result(result)

    def input_schema(tool_name: str) -> dict[str, Any] | None:
        tool = toolkit.get(tool_name)
        return tool.parameters if tool is not None else None

    with warnings.catch_warnings():
        # `logging/setLevel` is deprecated as of 2026-07-28, and still what handshake-era
        # clients send; newer ones ask per request (see `serve.log`).
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = ToolkitServer(
            name,
            version=_version(),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_subscriptions_listen=ListenHandler(announcer.bus),
            get_tool_input_schema=input_schema,
            on_set_logging_level=log_levels.set_level,
        )
    server.middleware.append(announcer.track)
    from .identity import bind_caller

    server.middleware.append(bind_caller)  # current_caller() while a request is handled
    toolkit.on_reload.append(announcer.on_reload)
    return server, announcer.on_reload


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolnexus")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return ""


def _from_the_manifests_folder(verdict: Verdict, toolkit: Toolkit) -> Verdict:
    """The verdict with the rule's file shown relative to the manifest's folder, as a local
    toolkit run there shows it: a client is told `tools.yaml:6`, not the server's own
    absolute paths (which tell it nothing it can use, and more than it needs)."""
    source = toolkit.source
    origin = verdict.origin
    if origin is None or not isinstance(source, str | os.PathLike) or "\n" in str(source):
        return verdict
    given = os.path.dirname(os.fspath(source))
    for prefix in {given, str(Path(source).absolute().parent)}:
        if prefix and origin.startswith(prefix + os.sep):
            return dataclasses.replace(verdict, origin=origin[len(prefix) + 1 :])
    return verdict


def _refuse(request: ApprovalRequest) -> bool:
    """The approver of calls that did not need approval when they arrived: if a reload made
    one need it since, nobody was asked, so it is refused."""
    return False


# --- approval over MCP ------------------------------------------------------------------------


def _question(name: str, shown: str, verdict: Verdict) -> str:
    return f"Allow tool {name!r} with arguments {shown}? ({verdict.describe()})"


def _caller(ctx: Any) -> str:
    """Who is calling, as far as the request tells: a digest of the bearer credential it
    carried over HTTP ("" on stdio and in process, where the one client is the connection)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    credential = headers.get("authorization", "") if headers is not None else ""
    return hashlib.sha256(credential.encode()).hexdigest() if credential else ""


_NO_QUESTION_FIX = "Use an MCP client that supports elicitation"


def _refusal(
    name: str, verdict: Verdict, why: str, fix: str = _NO_QUESTION_FIX
) -> mcp.types.CallToolResult:
    return _refused(
        f"tool {name!r} needs the user's approval ({verdict.describe()}), and {why}. {fix}, "
        "or ask the server's operator to allow this call in the manifest."
    )


def _accepted(answer: mcp.types.ElicitResult) -> bool:
    """True for an approval; otherwise raises `ToolError` saying which answer it was (the
    executor refuses the call with that reason), so the model is never told "the user
    declined" when the user did something else."""
    if answer.action == "decline":
        raise ToolError("the user declined this call")
    if answer.action == "cancel":
        raise ToolError(
            "the user dismissed the approval question without answering it (cancel), so the "
            "call was not run"
        )
    approve = (answer.content or {}).get("approve")
    if approve is True:
        return True
    if approve is False:
        raise ToolError(
            "the user answered the approval question without approving the call "
            "(accept with approve: false), so the call was not run"
        )
    sent = repr(answer.content or {})
    raise ToolError(
        "the client accepted the approval question but sent no approval with it (accept "
        f"without approve: true; it sent {sent[:200]}), so the call was not run"
    )


async def _approval_gate(
    ctx: Any,
    server: str,
    *,
    params: mcp.types.CallToolRequestParams,
    arguments: Any,
    verdict: Verdict,
    approvals: Approvals,
    metrics: _ApprovalCounts | None = None,
) -> Approver | mcp.types.CallToolResult | mcp.types.InputRequiredResult:
    """How this call's `ask` is answered: an approver for the executor, or the result to send
    instead of running the call (a refusal, or the question as an `InputRequiredResult`)."""
    from mcp import types
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    name = params.name
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    if not modern and not ctx.session.can_send_request:
        # Checked first: such a connection never saw the client's capabilities either.
        return _refusal(
            name,
            verdict,
            "this connection cannot carry the question back to the client (stateless HTTP "
            "with a pre-2026-07-28 protocol); serve with sessions or use a 2026-07-28 client",
        )
    wants = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    if not ctx.session.check_client_capability(wants):
        return _refusal(
            name, verdict, "this client cannot ask its user: it did not declare elicitation"
        )
    try:
        shown = show_arguments(arguments)
        call = call_digest(server, name, arguments, _caller(ctx))
    except (TypeError, ValueError):  # only in process: MCP arguments arrive as JSON
        return _refusal(
            name, verdict, "its arguments are not plain JSON, so nobody can be shown them"
        )
    if len(shown) > SHOWN_MAX:
        return _refusal(
            name,
            verdict,
            f"its arguments are too long to show: {len(shown)} characters, more than the "
            f"{SHOWN_MAX} an approval question shows whole, and nobody is asked to approve "
            "what they were not shown, so the call was not run",
            fix="Make the call smaller (split the work into several calls)",
        )
    question = _question(name, shown, verdict)
    if modern:
        answer = (params.input_responses or {}).get(_APPROVAL_KEY)
        if answer is None:
            if metrics is not None:
                metrics.asked()
            return types.InputRequiredResult(
                input_requests={
                    _APPROVAL_KEY: types.ElicitRequest(
                        params=types.ElicitRequestFormParams(
                            message=question, requested_schema=_APPROVAL_SCHEMA
                        )
                    )
                },
                request_state=approvals.issue(call),
            )
        try:
            await approvals.redeem(params.request_state, call)
        except ApprovalDenied as exc:
            return _refused(exc.message)
        if not isinstance(answer, types.ElicitResult):
            return _refused(
                "the client answered the approval question with something other than an "
                "elicitation result, so the call was not run"
            )
        if metrics is not None:
            metrics.answered(answer.action, answer.content)
        return lambda request: _accepted(answer)

    async def elicit(request: ApprovalRequest) -> bool:
        import anyio

        if metrics is not None:
            metrics.asked()
        try:
            with anyio.fail_after(approvals.ttl):
                answer = await ctx.session.elicit_form(
                    question, _APPROVAL_SCHEMA, related_request_id=ctx.request_id
                )
        except TimeoutError:
            if metrics is not None:
                metrics.answered("timeout", None)
            raise ToolError(
                f"nobody answered the approval question within {approvals.ttl:g} s, so the "
                "call was not run"
            ) from None
        if metrics is not None:
            metrics.answered(answer.action, answer.content)
        return _accepted(answer)

    return elicit


@dataclass
class _ApprovalCounts:
    """The approval counters of one call's tool, for `_approval_gate`."""

    metrics: Metrics
    tool: str

    def asked(self) -> None:
        self.metrics.asked.labels(self.tool).inc()

    def answered(self, action: str, content: dict[str, Any] | None) -> None:
        label = "timeout" if action == "timeout" else answer_label(action, content)
        self.metrics.answered.labels(self.tool, label).inc()


def _refused(message: str) -> mcp.types.CallToolResult:
    from ..adapters import mcp_result
    from ..base import Result

    return mcp_result(Result.error(message, error_type="ApprovalDenied"))


# --- stdio ------------------------------------------------------------------------------------


async def serve_stdio(
    toolkit: Toolkit,
    *,
    name: str | None = None,
    approval_timeout: float = APPROVAL_TIMEOUT_S,
    approval_secret: bytes | None = None,
) -> None:
    """Serve `toolkit` on this process's stdin/stdout until the client closes stdin.

    The SDK moves the process's own stdout onto stderr while serving, so a tool that prints
    cannot corrupt the protocol stream. `approval_timeout` and `approval_secret` are
    `build_server`'s.
    """
    from mcp.server.stdio import stdio_server

    server = build_server(
        toolkit, name=name, approval_timeout=approval_timeout, approval_secret=approval_secret
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def _serve_stdio_manifest(
    manifest: Path,
    *,
    watch: bool,
    approval_timeout: float,
    approval_secret: bytes | None,
    state: str | None,
) -> None:
    from ..toolkit import acreate_toolkit
    from .forward import refuse_unforwarded as ask

    toolkit = acreate_toolkit(manifest, watch=watch, elicitation=ask, sampling=ask, state=state)
    async with await toolkit as tk:
        await serve_stdio(tk, approval_timeout=approval_timeout, approval_secret=approval_secret)


# --- streamable HTTP --------------------------------------------------------------------------


class _BearerAuth:
    """ASGI middleware: every HTTP request but the `exempt` paths (the health check, and
    `/metrics` when made public) carries the bearer token."""

    def __init__(self, app: ASGIApp, token: str, exempt: frozenset[str]) -> None:
        self.app = app
        self.token = token.encode()
        self.exempt = exempt

    def _refusal(self, scope: MutableMapping[str, Any]) -> tuple[dict[str, str], bytes] | None:
        """None when the request carries the token; else the 401's body and challenge, saying
        whether no token came or the one sent was refused (RFC 6750 §3.1: `invalid_token` only
        for a token that was sent), and nothing about the token expected."""
        given = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, credentials = given.partition(b" ")
        # The scheme is case-insensitive (RFC 9110); the token is compared in constant time.
        if scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.token):
            return None
        if not given:
            detail = "no token was sent: send Authorization: Bearer <token>"
            body = {"error": "unauthorized", "detail": detail}
            return body, b'Bearer realm="toolnexus"'
        body = {"error": "invalid_token", "detail": "the token was refused"}
        challenge = b'Bearer realm="toolnexus", error="invalid_token", '
        return body, challenge + b'error_description="the token was refused"'

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in self.exempt:
            refused = self._refusal(scope)
            if refused is not None:
                body, challenge = refused
                await send_json(send, 401, body, headers=[(b"www-authenticate", challenge)])
                return
            remember_caller(scope, TOKEN_CALLER)
        await self.app(scope, receive, send)


class _Endpoint:
    """The MCP endpoint, bound once the lifespan has built the toolkit and its server."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None
        self.toolkit: Toolkit | None = None

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if self.app is None:
            detail = "the app's lifespan has not run: serve it with ASGI lifespan enabled"
            await send_json(send, 503, {"error": "not started", "detail": detail})
            return
        await self.app(scope, receive, send)


def _security(host: str) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    if not _is_loopback(host):
        # Behind a load balancer the Host header is whatever name clients use, which the server
        # cannot know; DNS rebinding protection exists for unauthenticated local servers, and a
        # non-loopback server always requires the bearer token, which a rebinding page lacks.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ["127.0.0.1", "localhost", "[::1]"]
    bracketed = f"[{host}]" if ":" in host else host
    if bracketed not in names:
        names.append(bracketed)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names] + names,
        allowed_origins=[f"http://{n}:*" for n in names] + [f"http://{n}" for n in names],
    )


def http_app(
    source: Toolkit | str | Path,
    *,
    token: str | None = None,
    auth: ServeAuth | None = None,
    stateless: bool = False,
    watch: bool = False,
    host: str = "127.0.0.1",
    drain: Drain | None = None,
    approval_timeout: float = APPROVAL_TIMEOUT_S,
    approval_secret: bytes | None = None,
    metrics_public: bool = False,
    state: str | None = None,
) -> Starlette:
    """An ASGI app serving a toolkit over streamable HTTP at `/mcp`, with `GET /healthz` and
    the Prometheus metrics at `GET /metrics` (see `toolnexus.serve.metrics`).

    Args:
        source: a `Toolkit` (the caller keeps ownership), or a manifest path: the app then
            builds its own toolkit in its lifespan and closes it on shutdown, so each worker
            process has its own.
        token: bearer token required on every request but the health check (compared in
            constant time); None serves without authentication, allowed on loopback only.
        auth: check callers' OAuth access tokens instead (see `toolnexus.serve.identity`);
            default: the manifest's `serve: {auth: ...}` when `source` is a manifest path.
            The protected resource metadata is then served for clients to discover it.
        stateless: no sessions: each request stands alone, so any worker can answer it.
        watch: with a manifest path, reload on changes and notify clients.
        host: the address the app is bound to. On loopback the SDK's DNS-rebinding protection
            accepts only loopback Host and Origin headers.
        drain: counts the requests in flight and, once draining, refuses new sessions and
            answers `/healthz` with 503 (`toolnexus serve` drains on SIGTERM; see `drain`).
        approval_timeout: seconds the client's user has to answer an approval question.
        approval_secret: what approvals are signed with; give every worker and replica the
            same one (default: `TOOLNEXUS_APPROVAL_SECRET`, else one for this app alone).
        metrics_public: serve `/metrics` without authentication, for a Prometheus scraper on
            a network only it reaches; by default it needs what `/mcp` needs (the counts name
            the tools and how they are used).
        state: with a manifest path, the URL of the state store its toolkit uses (`--state`);
            default: the manifest's `serve: {state: ...}`, else `TOOLNEXUS_STATE_URL`, else
            in process. Unused with a `Toolkit`, which has its store already.

    Raises:
        ConfigError: `host` is not a loopback address and no token or auth was given, both a
            token and auth were, or `TOOLNEXUS_APPROVAL_SECRET` is too short.
        ManifestError: `source` is a manifest path, and the manifest is invalid.
    """
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from ..state.memory import MemoryState

    if (auth is None or state is None) and isinstance(source, str | Path):
        from ..manifest import load_manifest

        declared = load_manifest(Path(source))
        auth = auth or declared.serve_auth
        state = state or declared.serve_state  # then TOOLNEXUS_STATE_URL, in acreate_toolkit
    _require_token(host, token, auth)
    secret = approval_secret or approval_secret_from_env()
    endpoint = _Endpoint()
    validator = None
    if auth is not None:
        from .identity import TokenValidator

        validator = TokenValidator(auth)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from ..toolkit import Toolkit, acreate_toolkit

        async with AsyncExitStack() as stack:
            if isinstance(source, Toolkit):
                toolkit = source
            else:
                from .forward import refuse_unforwarded as ask

                toolkit = await acreate_toolkit(
                    Path(source), watch=watch, elicitation=ask, sampling=ask, state=state
                )
                stack.push_async_callback(toolkit.aclose)
            server, listener = _build_server(toolkit, None, approval_timeout, secret, metrics)
            stack.callback(toolkit.on_reload.remove, listener)
            manager = StreamableHTTPSessionManager(
                app=server,
                stateless=stateless,
                security_settings=_security(host),
            )
            mcp_app: ASGIApp = StreamableHTTPASGIApp(manager)
            shared = None
            if not stateless and not isinstance(toolkit.store, MemoryState):
                from .sessions import SharedSessions

                # Replicas sharing the store serve each other's sessions (serve.sessions);
                # made first, so an SDK it cannot drive fails start-up plainly.
                shared = SharedSessions(
                    mcp_app,
                    server=server,
                    store=toolkit.store,
                    security=_security(host),
                    answer_wait=approval_timeout,
                )
            await stack.enter_async_context(manager.run())
            if shared is not None:
                await stack.enter_async_context(shared.run())
                mcp_app = shared
            if validator is not None:
                stack.push_async_callback(validator.aclose)
                await validator.prepare()
            endpoint.toolkit = toolkit
            endpoint.app = mcp_app
            try:
                yield
            finally:
                endpoint.app = None
                endpoint.toolkit = None

    async def healthz(request: Request) -> JSONResponse:
        toolkit = endpoint.toolkit
        if toolkit is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        if drain is not None and drain.draining:  # the balancer stops routing here
            return JSONResponse({"status": "draining", "inflight": drain.inflight}, 503)
        try:
            await toolkit.store.check()
        except StateUnavailable as exc:  # the details go to the log: no token is needed here
            logging.getLogger("toolnexus.serve").warning("healthz: state store: %s", exc)
            return JSONResponse(
                {"status": "unavailable", "reason": "state store unreachable"}, status_code=503
            )
        body: dict[str, Any] = {"status": "ok", "generation": toolkit.generation}
        watch = toolkit.watch_status()
        if watch is not None:  # how many files are gone, never which (no token is needed here)
            body["watch"] = {"state": watch["state"], "missing": len(watch["missing"])}
        return JSONResponse(body)

    metrics = Metrics.create()

    async def scrape(request: Request) -> Response:
        if metrics is None:
            return JSONResponse({"error": "not installed", "detail": INSTALL_HINT}, 501)
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    routes = [
        Route(HEALTH_PATH, healthz, methods=["GET"]),
        Route(METRICS_PATH, scrape, methods=["GET"]),
        Route(MCP_PATH, endpoint),
    ]
    public = frozenset({HEALTH_PATH, METRICS_PATH} if metrics_public else {HEALTH_PATH})
    middleware = [Middleware(_BearerAuth, token=token, exempt=public)] if token else []
    if validator is not None:
        from .identity import OAuthGate
        from .metadata import metadata_paths, metadata_routes, metadata_url

        assert auth is not None
        routes += metadata_routes(auth, MCP_PATH)
        exempt = metadata_paths(auth, MCP_PATH) | public
        middleware = [
            Middleware(
                OAuthGate, validator=validator, metadata_url=metadata_url(auth), exempt=exempt
            )
        ]
    if drain is not None:  # inside authentication: only admitted requests count
        middleware.append(Middleware(drain.middleware))
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def app_from_env() -> Starlette:
    """The app of one uvicorn worker, configured by the environment `serve` sets:
    `TOOLNEXUS_SERVE_MANIFEST`, `TOOLNEXUS_SERVE_TOKEN`, `TOOLNEXUS_SERVE_HOST`,
    `TOOLNEXUS_SERVE_STATELESS` and `TOOLNEXUS_SERVE_WATCH` (`1` for on),
    `TOOLNEXUS_SERVE_APPROVAL_TIMEOUT` (seconds), `TOOLNEXUS_SERVE_METRICS_PUBLIC` (`1`) and
    `TOOLNEXUS_APPROVAL_SECRET` (which the worker then removes from its environment, so the
    tools it runs never inherit it).

    Use it as `uvicorn toolnexus.serve:app_from_env --factory` when running uvicorn (or
    another ASGI server) yourself; then set `TOOLNEXUS_APPROVAL_SECRET` for every worker, or
    a 2026-07-28 client's approval works only if its retry reaches the worker that asked.
    """
    manifest = os.environ.get(_ENV_MANIFEST)
    if not manifest:
        raise ConfigError(
            f"{_ENV_MANIFEST} is not set; set it to the manifest to serve (toolnexus serve sets "
            "it for its workers)"
        )
    timeout_text = os.environ.get(_ENV_APPROVAL_TIMEOUT) or repr(APPROVAL_TIMEOUT_S)
    try:
        timeout = float(timeout_text)
    except ValueError:
        raise ConfigError(
            f"{timeout_text!r} is not a number of seconds", field=_ENV_APPROVAL_TIMEOUT
        ) from None
    return http_app(
        manifest,
        token=os.environ.get(_ENV_TOKEN) or None,
        stateless=os.environ.get(_ENV_STATELESS) == "1",
        watch=os.environ.get(_ENV_WATCH) == "1",
        host=os.environ.get(_ENV_HOST, "127.0.0.1"),
        approval_timeout=timeout,
        approval_secret=_take_secret(),
        metrics_public=os.environ.get(_ENV_METRICS_PUBLIC) == "1",
        state=os.environ.get(_ENV_STATE) or None,
    )


def _take_secret() -> bytes | None:
    """The approval secret from the environment, removed from it: the tools this process runs
    (commands, MCP servers over stdio) inherit its environment, and must not sign approvals."""
    secret = approval_secret_from_env()
    os.environ.pop(APPROVAL_SECRET_ENV, None)
    return secret


# --- the command ------------------------------------------------------------------------------


def serve(options: ServeOptions) -> None:
    """Serve a manifest until interrupted (stdio: until the client closes stdin).

    Raises:
        ConfigError: an option is wrong (a `ValueError`: the command exits with code 2).
        ManifestError: the manifest is invalid.
    """
    from ..manifest import load_manifest

    manifest = options.manifest.resolve()
    declared = load_manifest(manifest)  # a broken manifest fails here, before uvicorn
    auth = declared.serve_auth if options.http is not None else None
    if options.http is not None and declared.access and auth is None and not options.token:
        sys.stderr.write(
            "toolnexus: warning: the manifest's access: entries apply to identified callers "
            "(serve.auth, or the caller `token` of --token); this server identifies nobody, "
            "so every client sees and may call every tool\n"
        )
    address = _check(options, auth)
    secret = _take_secret()
    if address is None:
        asyncio.run(
            _serve_stdio_manifest(
                manifest,
                watch=options.watch,
                approval_timeout=options.approval_timeout,
                approval_secret=secret,
                state=options.state or declared.serve_state,
            )
        )
        return

    import uvicorn

    from ..build import check_manifest

    check_manifest(manifest)  # a broken manifest fails here, not once per worker
    host, port = address
    shown = f"[{host}]" if ":" in host else host
    mode = (
        f"{options.workers} workers, stateless"
        if options.workers > 1
        else ("stateless" if options.stateless else "sessions")
    )
    if auth is not None:
        admits = f"OAuth tokens of {auth.issuer} for {auth.audience}"
    else:
        admits = "bearer token required" if options.token else "no token"
    sys.stderr.write(
        f"toolnexus: serving {options.manifest} at http://{shown}:{port}{MCP_PATH} "
        f"({mode}; {admits}; health check GET {HEALTH_PATH})\n"
    )
    sys.stderr.flush()
    if options.workers == 1:
        drain = Drain(MCP_PATH)
        app = http_app(
            manifest,
            token=options.token,
            auth=auth,
            stateless=options.stateless,
            watch=options.watch,
            host=host,
            drain=drain,
            approval_timeout=options.approval_timeout,
            approval_secret=secret,
            metrics_public=options.metrics_public,
            state=options.state,
        )
        # Drained first, so what is left at shutdown are idle event streams: close them soon.
        config = uvicorn.Config(
            app, host=host, port=port, log_level="info", timeout_graceful_shutdown=2
        )
        draining_server(config, drain, options.grace).run()
        return
    os.environ.update(
        {
            _ENV_MANIFEST: str(manifest),
            _ENV_TOKEN: options.token or "",
            _ENV_HOST: host,
            _ENV_STATELESS: "1" if options.stateless else "0",
            _ENV_WATCH: "1" if options.watch else "0",
            _ENV_APPROVAL_TIMEOUT: repr(options.approval_timeout),
            _ENV_METRICS_PUBLIC: "1" if options.metrics_public else "0",
            _ENV_STATE: options.state or "",
            # One secret for every worker, so a retry may reach any of them: the operator's,
            # else one made now (the workers take it out of their environment).
            APPROVAL_SECRET_ENV: (secret or secrets.token_urlsafe(32).encode()).decode(),
        }
    )
    uvicorn.run(
        f"{__name__}:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=options.workers,
        log_level="info",
        # Stateless: no event streams stay open, so uvicorn's own wait for open connections is
        # the drain (each worker stops accepting, then finishes its requests).
        timeout_graceful_shutdown=math.ceil(options.grace),  # uvicorn takes whole seconds
    )
