"""The live connection to one MCP server, through the official `mcp` SDK (2.x) as a client.

Its configuration is an `McpServerSpec` (`spec`). An `McpServer` is the live connection:
stdio (a child process with a minimal environment, optionally sandboxed) or streamable HTTP.
It turns the server's tools into `Tool`s, follows `tools/list_changed`, restarts a crashed
server on the next call, and shuts down without leaving processes or tasks behind.

Each connection lives in a task of its own, because the SDK's client is an async context manager
whose task groups must be entered and left by one task, while the toolkit starts and closes
servers from whatever task it is in. Every wait on the server is bounded: the connect by
`connect_timeout` (the SDK's own discovery probe would wait 10 s), a call by `timeout` or the
call's deadline.

What comes back is bounded and screened too: stdio goes through this package's `stdio`
(lenient decoding, linear line splitting, `max_message`, a line that is not JSON-RPC ends the
connection as a crash), HTTP through `http` (`max_message` on JSON answers) and the SDK's SSE
event limit; every `tools/list` answer is screened before the SDK parses it, so one malformed
tool is skipped (and reported in `status`) instead of failing the listing; results keep
`max_output` characters.
`status` is computed when read: it tells the state of now, not of the build.

What a server sends back during a call is handled beside this module: progress, timeouts
restarted by progress and task tools in `call` and `tasks`; elicitation and sampling questions,
log messages and roots in `callbacks`.

`import mcp` costs about a second, so the SDK is imported only when a server connects.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

import anyio

from ..base import Result, Tool, ToolContext, ToolHandler
from ..errors import SourceError, ToolError, UsageError
from ..runtime.resident import current_launchers
from .auth import (
    LoginProblem,
    describe_flow_error,
    describe_refusal,
    oauth_hint,
)
from .call import call_tool, set_log_level
from .callbacks import (
    InFlight,
    McpHandlers,
    client_options,
    offer_url_elicitations,
    roots_changed,
)
from .convert import (
    HttpStatus,
    build_tools,
    check_tool,
    describe_http_status,
    leaf_exception,
    listing_surface,
    session_lost,
    to_result,
    translate_error,
)
from .forked import ForkedServer
from .spec import McpServerSpec, redact_url
from .tasks import task_tools

if TYPE_CHECKING:
    import mcp_types
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp import Client
    from mcp.client.session import MessageHandlerFnT

    from ..runtime.resident import Launchers, ResidentPlan
    from ..runtime.sandbox import SandboxPolicy
    from .tokens import LoginStore

__all__ = [
    "McpServer",
    "McpServerState",
    "McpServerStatus",
    "SkippedTool",
    "connect_all",
]

logger = logging.getLogger("toolnexus.mcp")

_RESTART_BACKOFF = 0.5
"""Seconds before the second restart attempt in a row; doubles with each failure after."""
_RESTART_BACKOFF_CAP = 30.0
_MAX_PAGES = 1000
"""A `tools/list` walk longer than this is a server bug, not a big server."""
_STDERR_TAIL = 2000
"""Characters of a failed server's stderr quoted in its status."""


class McpServerState(enum.StrEnum):
    """Where a server's connection stands."""

    NEW = "new"
    """Not started yet."""
    CONNECTING = "connecting"
    READY = "ready"
    FAILED = "failed"
    """Did not start, or a restart failed; `reason` says why, `retry_in` when it is retried."""
    CRASHED = "crashed"
    """Was ready, then its connection ended (it exited, broke the protocol, or an HTTP call
    found it dropped or its session forgotten); the next call restarts it."""
    RESTARTING = "restarting"
    CLOSED = "closed"


@dataclass(frozen=True, kw_only=True)
class SkippedTool:
    """A tool the server listed that could not be used, and why (the others are kept)."""

    tool: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"tool": self.tool, "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class McpServerStatus:
    """One server as it is now (`McpServer.status` is computed on each read), for
    `Toolkit.status()`."""

    name: str
    transport: Literal["stdio", "http"]
    state: McpServerState
    tool_count: int = 0
    """Tools this server contributes (after include/exclude)."""
    reason: str | None = None
    """Why the server is failed or restarting, in words."""
    last_error: str | None = None
    """The latest problem seen, even if the server recovered since."""
    restarts: int = 0
    protocol_version: str | None = None
    retry_in: float | None = None
    """Seconds until the next restart attempt is allowed, when the server is down."""
    sandbox: str | None = None
    """How a sandboxed stdio server is confined: `bwrap`, `landlock` or `none`."""
    launch: Literal["resident", "per-call"] | None = None
    """How a stdio server's process was last started: `resident`, forked by the toolkit's
    resident launcher for its sandbox policy (Landlock or bwrap), or `per-call`, a process of
    its own (no sandbox, or no resident launcher could run it); None before the first start
    and for HTTP servers."""
    unconfined: bool = False
    """True when a sandbox was asked for (with `required: false`) and none could be applied."""
    skipped: tuple[SkippedTool, ...] = ()
    """Tools of the latest listing left out as malformed."""
    tools_changed: int = 0
    """How many times the tool list changed after start (notifications, restarts)."""
    login: str | None = None
    """`auth: oauth` servers that refused the stored login: `missing`, `expired` or
    `insufficient_scope` (`reason` or `last_error` names the `toolnexus login` to run)."""
    started_in: float | None = None
    """Seconds the first start took, to ready or to failure (None before it ends)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state.value,
            "tool_count": self.tool_count,
            "reason": self.reason,
            "last_error": self.last_error,
            "restarts": self.restarts,
            "protocol_version": self.protocol_version,
            "retry_in": self.retry_in,
            "sandbox": self.sandbox,
            "launch": self.launch,
            "unconfined": self.unconfined,
            "skipped": [s.to_dict() for s in self.skipped],
            "tools_changed": self.tools_changed,
            "login": self.login,
            "started_in": self.started_in,
        }


ToolsChangedCallback = Callable[["McpServer"], Awaitable[None] | None]


class _Connection:
    """One session with the server, owned by one task from connect to close."""

    def __init__(self, on_crash: Callable[[_Connection], None]) -> None:
        self.on_crash = on_crash
        """Called once if the transport of a ready connection ends without `closing`."""
        self.scope = anyio.CancelScope()
        self.ready = anyio.Event()
        """Set once the session is usable or has failed."""
        self.ended = anyio.Event()
        """Set when the transport has gone (the server exited, or we are closing)."""
        self.client: Client | None = None
        self.alive = False
        self.closing = False
        self.error: BaseException | None = None
        self.crashed = False
        self.calls = 0
        """Calls running on this connection."""
        self.retired = False
        """A call found this connection broken: new calls reconnect, and it closes after its
        last call (`McpServer._retire`)."""
        self.cleanup: tuple[Path, ...] = ()
        """Folders the sandbox made for this server's process, removed once it has ended."""
        self.stderr: TextIO | None = None
        self.final_stderr = ""
        """The tail of stderr, kept when the file is closed (for messages after the end)."""
        self.broken: str | None = None
        """How the server broke the protocol (stdio), which ended this connection."""
        self.http_status: HttpStatus | None = None
        """The latest HTTP error answer on this connection (the SDK keeps only a stand-in)."""
        self.www_authenticate: str | None = None
        """The `WWW-Authenticate` header of that answer, if any."""
        self.session: Client | None = None
        """The SDK client, from its creation (for the negotiated protocol version)."""
        self.skipped: dict[str, str] = {}
        """Tools of the listing being read that were left out, by name, with the reason."""
        send, receive = anyio.create_memory_object_stream[None](1)
        self.changes: tuple[MemoryObjectSendStream[None], MemoryObjectReceiveStream[None]] = (
            send,
            receive,
        )

    def mark_ended(self) -> None:
        """The transport is gone. Reported at once (not when the task has finished cleaning
        up), so the next call already sees the crash and its backoff."""
        if self.client is not None and not self.closing and not self.crashed:
            self.crashed = True
            self.on_crash(self)
        self.alive = False
        self.ended.set()

    def set_broken(self, reason: str) -> None:
        if self.broken is None:
            self.broken = reason

    async def record_http_error(self, response: Any) -> None:
        """httpx2 response hook: remember the latest HTTP error status."""
        if response.status_code >= 400:
            url = str(response.request.url) if response.request is not None else ""
            self.http_status = (response.status_code, response.reason_phrase, redact_url(url))
            self.www_authenticate = response.headers.get("www-authenticate")

    def screen_listing(self, result: dict[str, Any]) -> None:
        """Drop the malformed entries of a raw `tools/list` answer, recording why, so the SDK
        parses the rest instead of failing the whole listing for one bad tool."""
        version = self.session.protocol_version if self.session is not None else None
        surface = listing_surface(result, version)
        kept: list[Any] = []
        names: set[str] = set()
        for i, raw in enumerate(result["tools"]):
            reason = check_tool(raw, surface)
            name = raw.get("name") if isinstance(raw, dict) else None
            label = name if isinstance(name, str) and name else f"#{i + 1}"
            if reason is None and label in names:
                reason = "the server listed this name twice; the first one is kept"
            if reason is not None:
                self.skipped[label] = reason
                continue
            names.add(label)
            kept.append(raw)
        result["tools"] = kept

    def tools_changed(self) -> None:
        """Ask for a refresh of the tool list (coalesced: one pending request is enough)."""
        with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.changes[0].send_nowait(None)

    def stderr_tail(self) -> str:
        """The end of what the server wrote to stderr (read without moving the shared offset)."""
        if self.stderr is None or self.stderr.closed:
            return self.final_stderr
        fd = self.stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - _STDERR_TAIL)
        return os.pread(fd, size - start, start).decode("utf-8", "replace").strip()


class McpServer:
    """A live connection to one MCP server, and the `Tool`s it provides.

    `start()` connects (bounded by `connect_timeout`), `tools()` lists the tools, `status`
    reports the state, `aclose()` shuts the server down. Calls go through the `Tool`s. When the
    connection drops (a stdio server that dies, an HTTP server that went away), the next call
    reconnects, after a backoff if reconnecting already failed; the result of that call carries
    `metadata["restarted"] = True`. Over HTTP only the calls in flight on a dropped connection
    fail (a call that may have run is never sent again); one the server provably did not run
    (it answered that it does not know the session) is sent once more in a new session.
    """

    def __init__(
        self,
        spec: McpServerSpec,
        *,
        sandbox: SandboxPolicy | None = None,
        workspace: Path,
        on_tools_changed: ToolsChangedCallback | None = None,
        handlers: McpHandlers | None = None,
        roots: Sequence[Path] = (),
        logins: LoginStore | None = None,
        launchers: Launchers | None = None,
    ) -> None:
        """Prepare the connection; nothing runs until `start()`.

        Args:
            spec: the server's configuration.
            sandbox: confines a stdio server's process (ignored for HTTP: nothing local runs).
            workspace: root of the sandbox's writable area.
            on_tools_changed: called (sync or async) with this server whenever its tool list
                changes after `start()`: a `tools/list_changed` notification, or a restart
                that brought different tools.
            handlers: the application's elicitation and sampling handlers; a capability is
                declared to the server only when its handler is given.
            roots: folders offered to the server on `roots/list` (after the workspace).
            logins: where `auth: oauth` keeps its login (the toolkit's shared state store);
                None: the user's token file.
            launchers: the resident launchers a Landlock-sandboxed server is forked from
                (default: those of the toolkit being built, `current_launchers`); with none,
                every start is a process of its own.
        """
        self.spec = spec
        self.handlers = handlers or McpHandlers()
        self.roots = tuple(dict.fromkeys((workspace, *roots)))
        self._inflight = InFlight()
        self._task_support: dict[str, str] = {}
        """The server's tool names whose `execution.taskSupport` is given, with its value."""
        self.sandbox = sandbox if spec.transport == "stdio" else None
        self._launchers = launchers if launchers is not None else current_launchers.get()
        self._launch: Literal["resident", "per-call"] | None = None
        self.workspace = workspace
        self.logins = logins
        self.on_tools_changed = on_tools_changed
        self._state = McpServerState.NEW
        self._reason: str | None = None
        self._last_error: str | None = None
        self._tools: list[Tool] = []
        self._conn: _Connection | None = None
        """The connection calls use (possibly dead, until the next call restarts it)."""
        self._live: set[_Connection] = set()
        """Every connection whose task has not finished, including one still connecting."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._restart_lock = anyio.Lock()
        self._restarts = 0
        self._failures = 0
        """Consecutive failures (crashes, failed restarts) since the last successful call."""
        self._retry_at = 0.0
        self._protocol_version: str | None = None
        self._mechanism: str | None = None
        self._unconfined = False
        self._skipped: tuple[SkippedTool, ...] = ()
        self._tools_changed = 0
        self._login: LoginProblem | None = None
        """Why the server refused the stored OAuth login, until a request succeeds."""
        self._started_in: float | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return f"<McpServer {self.spec.name!r} {self._state.value}>"

    @property
    def status(self) -> McpServerStatus:
        """The server as it is now: computed on each read, never a snapshot."""
        retry_in = None
        down = (McpServerState.FAILED, McpServerState.CRASHED)
        if self._state in down and self._conn is not None:
            retry_in = max(0.0, self._retry_at - time.monotonic())
        return McpServerStatus(
            name=self.spec.name,
            transport=self.spec.transport,
            state=self._state,
            tool_count=len(self._tools),
            reason=self._reason,
            last_error=self._last_error,
            restarts=self._restarts,
            protocol_version=self._protocol_version,
            retry_in=retry_in,
            sandbox=self._mechanism,
            launch=self._launch,
            unconfined=self._unconfined,
            skipped=self._skipped,
            tools_changed=self._tools_changed,
            login=self._login.kind if self._login is not None else None,
            started_in=self._started_in,
        )

    def tools(self) -> list[Tool]:
        """The server's tools as last listed (empty until `start()` succeeds)."""
        return list(self._tools)

    async def start(self) -> None:
        """Connect, handshake and list the tools, all within `spec.connect_timeout`.

        Raises:
            SourceError: the server did not start; `status` holds the same reason.
            UsageError: the server was already started or closed.
        """
        if self._state is not McpServerState.NEW:
            raise UsageError(
                f"MCP server '{self.spec.name}' is {self._state.value}; start() runs once, "
                "create a new McpServer to connect again"
            )
        self._state = McpServerState.CONNECTING
        began = time.monotonic()
        try:
            await self._connect()
        except SourceError:
            if self._state is not McpServerState.CLOSED:
                self._state = McpServerState.FAILED
            raise
        finally:
            self._started_in = time.monotonic() - began

    async def set_roots(self, roots: Sequence[Path]) -> None:
        """Offer other roots (after the workspace) from now on, and tell a connected server
        (`notifications/roots/list_changed`, on handshake-era sessions)."""
        new = tuple(dict.fromkeys((self.workspace, *roots)))
        if new == self.roots:
            return
        self.roots = new
        conn = self._conn
        if conn is not None and conn.alive and conn.client is not None:
            await roots_changed(conn.client, self.spec.name)

    async def aclose(self) -> None:
        """Shut the server down (stdio: close stdin, then SIGTERM, then SIGKILL, each bounded)
        and wait until its process and tasks are gone. Safe to call twice."""
        self._state = McpServerState.CLOSED
        self._reason = None
        self._tools = []
        for conn in list(self._live):
            self._close_connection(conn)
        while self._tasks:
            # Shielded: a cancelled caller must not leave the server's process behind.
            with anyio.CancelScope(shield=True):
                await asyncio.wait(set(self._tasks))

    # -- connecting ---------------------------------------------------------------------------

    async def _connect(self) -> _Connection:
        conn = _Connection(self._crashed)
        self._live.add(conn)
        task = asyncio.get_running_loop().create_task(
            self._own(conn), name=f"toolnexus-mcp-{self.spec.name}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        timeout = self.spec.connect_timeout
        try:
            with anyio.move_on_after(timeout):
                await conn.ready.wait()
        except BaseException:
            self._close_connection(conn)
            raise
        if self._state is McpServerState.CLOSED:  # aclose() ran while this connected
            self._close_connection(conn)
            raise SourceError(f"MCP server '{self.spec.name}' was closed while it connected")
        if conn.alive:
            self._conn = conn
            return conn
        if not conn.ready.is_set():
            reason = f"no answer to the MCP handshake within {timeout:g} s (connect_timeout)"
            reason += self._stderr_note(conn)
            self._close_connection(conn)
        else:
            reason = self._describe_start_failure(conn)
        self._reason = self._last_error = reason
        raise SourceError(f"MCP server '{self.spec.name}' did not start: {reason}")

    def _close_connection(self, conn: _Connection) -> None:
        conn.closing = True
        conn.alive = False
        conn.scope.cancel()

    async def _own(self, conn: _Connection) -> None:
        """The connection's task: open it, serve until it ends, then clean up.

        A stdio server's stderr goes to a file: quoted when the server fails, and kept out of
        the terminal of the agent that runs the toolkit.
        """
        try:
            if self.spec.transport == "stdio":
                with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
                    conn.stderr = errlog
                    await self._serve(conn)
                for folder in conn.cleanup:
                    shutil.rmtree(folder, ignore_errors=True)
            else:
                await self._serve(conn)
        finally:
            self._live.discard(conn)

    async def _serve(self, conn: _Connection) -> None:
        try:
            with conn.scope:
                async with AsyncExitStack() as stack:
                    transport = await self._transport(stack, conn)  # stdio: the server runs
                    from mcp import Client  # about a second, overlapping the server's start

                    client = Client(
                        _watched(transport, conn),
                        message_handler=self._message_handler(conn),
                        cache=None,
                        **client_options(
                            self.spec.name,
                            handlers=self.handlers,
                            inflight=self._inflight,
                            roots=lambda: self.roots,
                            log_level=self.spec.log_level,
                        ),
                    )
                    conn.session = client
                    try:
                        await stack.enter_async_context(client)
                        await set_log_level(client, self.spec.log_level, self.spec.name)
                        listing = await _list_all(client, conn)
                    except Exception as exc:
                        # Reported at once: the transport's shutdown (seconds, for a stdio
                        # server that does not exit) comes after, in this task.
                        conn.error = exc
                        conn.ready.set()
                        raise
                    self._install(listing, client.protocol_version, conn)
                    conn.client = client
                    conn.alive = not conn.ended.is_set()
                    conn.ready.set()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._follow_changes, conn, client)
                        await conn.ended.wait()
                        tg.cancel_scope.cancel()
        except Exception as exc:  # noqa: BLE001 - the boundary: whatever the SDK raised
            # ends this connection; it is recorded in the status and reported to its waiter.
            conn.error = conn.error or exc
            if conn.client is not None and not conn.closing:
                logger.warning("MCP server '%s' failed: %s", self.spec.name, leaf_exception(exc))
        finally:
            conn.mark_ended()
            if not conn.closing:
                conn.final_stderr = conn.stderr_tail()
            conn.changes[0].close()
            conn.changes[1].close()
            conn.ready.set()

    async def _transport(self, stack: AsyncExitStack, conn: _Connection) -> Any:
        """The SDK transport for this server (not yet entered). A stdio server's process is
        started here, before anything imports the SDK (see `mcp.stdio`)."""
        spec = self.spec
        if spec.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            from .http import BoundedTransport

            auth = None
            if spec.auth is not None:
                from .auth import make_auth

                auth = make_auth(spec.url, spec.auth, on_problem=self._set_login, store=self.logins)
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    auth=auth,
                    headers=dict(spec.headers),
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    transport=BoundedTransport(spec.max_message),
                    event_hooks={"response": [conn.record_http_error]},
                )
            )
            return streamable_http_client(
                spec.url, http_client=http, max_sse_event_size=spec.max_message
            )
        from .stdio import bounded_stdio_client, started_process

        assert spec.command is not None and conn.stderr is not None
        argv = [spec.command, *spec.args]
        env = dict(spec.env)
        resident: tuple[Launchers, ResidentPlan] | None = None
        if self.sandbox is not None:
            from ..runtime.sandbox import wrap_command
            from .forked import resident_plan_for

            wrapped = wrap_command(
                argv,
                self.sandbox,
                workspace=self.workspace,
                cwd=spec.cwd or self.workspace,
                env=env,
            )
            conn.cleanup = wrapped.cleanup
            self._unconfined = wrapped.unconfined
            self._mechanism = wrapped.mechanism
            # The wrapped environment is complete; the SDK adds its few defaults (HOME, PATH...)
            # and the sandbox chains drop those the policy does not allow.
            argv, env = list(wrapped.argv), wrapped.env
            plan = resident_plan_for(wrapped, self.sandbox)
            if plan is not None and self._launchers is not None:
                resident = (self._launchers, plan)
        process = await stack.enter_async_context(
            started_process(argv, env=env, cwd=spec.cwd, errlog=conn.stderr, resident=resident)
        )
        self._launch = "resident" if isinstance(process, ForkedServer) else "per-call"
        return bounded_stdio_client(
            process, max_message=spec.max_message, on_broken=conn.set_broken
        )

    def _stderr_note(self, conn: _Connection) -> str:
        """The end of the server's stderr, and when it shows a file refusal on a path the
        sandbox keeps from the server, which policy did it and what would allow it."""
        tail = conn.stderr_tail()
        note = _quoted_stderr(tail)
        if self.sandbox is not None and tail:
            why = self.sandbox.explain_refusal(tail, self.workspace)
            if why:
                note += f"; {why}"
        return note

    def _describe_start_failure(self, conn: _Connection) -> str:
        import httpx2
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        exc = leaf_exception(conn.error) if conn.error is not None else None
        tail = self._stderr_note(conn)
        if conn.broken is not None:
            return f"the server broke the MCP protocol on stdout: {conn.broken}{tail}"
        if conn.http_status is not None and isinstance(exc, MCPError):
            refusal = self._refusal(conn)
            if refusal is not None:
                return refusal
            described = describe_http_status(
                conn.http_status,
                sent_token=self.spec.sends_token,
                json_syntax=self.spec.json_syntax,
            )
            return f"the server answered {described}"
        if isinstance(exc, FileNotFoundError) and self.spec.transport == "stdio":
            return f"command {self.spec.command!r} not found (is it installed and on PATH?)"
        if isinstance(exc, PermissionError):
            return f"command {self.spec.command!r} is not executable: {exc}"
        if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            if self.spec.transport == "stdio":
                return "the server exited during start-up" + tail
            return f"the server at {redact_url(self.spec.url or '')} closed the connection"
        if isinstance(exc, httpx2.HTTPError):
            target = self.spec.url or ""
            with suppress(RuntimeError):  # an error raised without its request
                target = str(exc.request.url)
            # The request that failed may be the OAuth flow's own (metadata, token endpoint).
            via_oauth = self.spec.auth is not None and target != self.spec.url
            note = f" (OAuth for '{self.spec.name}')" if via_oauth else ""
            return f"cannot reach {redact_url(target)}{note}: {exc}"
        if exc is None:
            return "the connection ended before the handshake finished" + tail
        if self.spec.auth is not None and (
            flow := describe_flow_error(self.spec.name, self.spec.auth, exc)
        ):
            return flow
        return f"{type(exc).__name__}: {exc}{tail}"

    def _set_login(self, problem: LoginProblem | None) -> None:
        self._login = problem

    def _refusal(self, conn: _Connection) -> str | None:
        """A 401/403 in words: which login is missing, expired or short of scope, and the
        command that fixes it; None for other failures."""
        status = conn.http_status
        if status is None or status[0] not in (401, 403):
            return None
        if self.spec.auth is None:
            return oauth_hint(self.spec.name, status[0], conn.www_authenticate)
        return describe_refusal(self.spec.name, self.spec.auth, status[0], self._login)

    def _install(
        self, listing: Sequence[mcp_types.Tool], protocol_version: str | None, conn: _Connection
    ) -> bool:
        """Replace the tool list; True when it differs from the previous one."""
        if self._state is McpServerState.CLOSED:
            return False
        capabilities = conn.session.server_capabilities if conn.session is not None else None
        listing, self._task_support, no_task = task_tools(listing, capabilities)
        conn.skipped.update(no_task)
        self._skipped = tuple(
            SkippedTool(tool=name, reason=reason) for name, reason in conn.skipped.items()
        )
        for skipped in self._skipped:
            logger.warning(
                "MCP server '%s': tool '%s' skipped: %s",
                self.spec.name,
                skipped.tool,
                skipped.reason,
            )
        tools = build_tools(
            listing,
            server=self.spec.name,
            prefix=self.spec.prefix,
            include=self.spec.include,
            exclude=self.spec.exclude,
            handler_for=self._handler,
        )
        changed = tools != self._tools
        self._tools = tools
        self._protocol_version = protocol_version
        self._state = McpServerState.READY
        self._reason = None
        return changed

    def _crashed(self, conn: _Connection) -> None:
        """The transport of a ready connection ended without us closing it."""
        if self._state is McpServerState.CLOSED or conn is not self._conn:
            return
        self._failures += 1
        self._retry_at = time.monotonic() + _backoff(self._failures)
        if conn.broken is not None:
            what = f"the server broke the MCP protocol ({conn.broken})"
        else:
            cause = f": {leaf_exception(conn.error)}" if conn.error is not None else ""
            what = f"the server's connection ended unexpectedly{cause}"
        self._state = McpServerState.CRASHED
        stderr = self._stderr_note(conn)
        self._reason = self._last_error = f"{what}{stderr}; it is restarted on the next call"
        logger.warning("MCP server '%s': %s", self.spec.name, self._reason)

    # -- tool list changes --------------------------------------------------------------------

    def _message_handler(self, conn: _Connection) -> MessageHandlerFnT:
        """Legacy (handshake-era) sessions announce tool list changes as plain notifications."""
        import mcp_types as types

        async def handle(message: object) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                conn.tools_changed()
            elif isinstance(message, Exception):
                self._last_error = f"transport error: {message}"
                logger.debug("MCP server '%s': %s", self.spec.name, message)

        return handle

    async def _follow_changes(self, conn: _Connection, client: Client) -> None:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        async with anyio.create_task_group() as tg:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                tg.start_soon(self._listen, conn, client)
            async for _ in conn.changes[1]:
                await self._refresh(conn, client)

    async def _listen(self, conn: _Connection, client: Client) -> None:
        """2026-07-28 sessions announce changes only to a `subscriptions/listen` stream."""
        from mcp.client.subscriptions import SubscriptionLost
        from mcp.shared.exceptions import MCPError

        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    conn.tools_changed()
        except (MCPError, SubscriptionLost) as exc:
            # A server that does not offer the stream, or a dropped stream: tools stay as listed;
            # if the whole connection dropped, the crash path takes over.
            logger.debug("MCP server '%s': no tool change stream: %s", self.spec.name, exc)

    async def _refresh(self, conn: _Connection, client: Client) -> None:
        from mcp.shared.exceptions import MCPError

        try:
            listing = await _list_all(client, conn)
        except (MCPError, TimeoutError, SourceError) as exc:
            self._last_error = f"refreshing the tool list failed: {exc}"
            logger.warning("MCP server '%s': %s", self.spec.name, self._last_error)
            return
        if self._install(listing, client.protocol_version, conn):
            self._tools_changed += 1
            await self._notify_tools_changed()

    async def _notify_tools_changed(self) -> None:
        callback = self.on_tools_changed
        if callback is None:
            return
        try:
            outcome = callback(self)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # boundary: the application's callback must not kill the session
            logger.exception("on_tools_changed callback failed for MCP server '%s'", self.spec.name)

    # -- calls --------------------------------------------------------------------------------

    def _handler(self, mcp_name: str) -> ToolHandler:
        # A partial rather than an `async def` wrapper: one coroutine less to create and to
        # resume at each step of every call.
        return functools.partial(self._call, mcp_name)

    async def _call(self, mcp_name: str, arguments: dict[str, Any], ctx: ToolContext) -> Result:
        conn = self._conn
        restarted = False
        if conn is None or not conn.alive:
            conn, restarted = await self._restart(conn)
        raw = await self._send(conn, mcp_name, arguments, ctx, resend=True)
        if raw is _UNSENT:
            # The server did not know the session, so it did not run the call: once more, in a
            # new session.
            conn, _ = await self._restart(conn)
            restarted = True
            raw = await self._send(conn, mcp_name, arguments, ctx, resend=False)
        for _ in range(_URL_ROUNDS):
            if not isinstance(raw, _UrlElicitations):
                break
            # The server needs the user to visit a page first (-32042): ask, then call again.
            accepted = await offer_url_elicitations(
                self.spec.name, self.handlers, ctx, raw.elicitations
            )
            if not accepted:
                raise ToolError(
                    f"'{mcp_name}' needs the user to open a page first ({raw.message}), and "
                    "that was declined or no elicitation handler was given; nothing was run"
                )
            raw = await self._send(conn, mcp_name, arguments, ctx, resend=False)
        if isinstance(raw, _UrlElicitations):
            raise ToolError(
                f"'{mcp_name}' still needs the user to open a page after {_URL_ROUNDS} rounds "
                f"({raw.message}); giving up"
            )
        self._failures = 0
        result = to_result(
            raw, server=self.spec.name, tool=mcp_name, max_output=self.spec.max_output
        )
        if restarted or self._unconfined:
            extra = {"restarted": True} if restarted else {}
            if self._unconfined:
                extra["unconfined"] = True
            result = result.with_metadata(**extra)
        return result

    async def _send(
        self,
        conn: _Connection,
        mcp_name: str,
        arguments: dict[str, Any],
        ctx: ToolContext,
        *,
        resend: bool,
    ) -> Any:
        """One `tools/call` on `conn`: the raw result, or `_UNSENT` when the server did not run
        it and `resend` allows sending it again after a reconnect.

        Raises:
            ToolError: the call failed (every SDK and transport failure, in words).
        """
        client = conn.client
        assert client is not None
        timeout = self.spec.timeout
        remaining = ctx.remaining()
        if remaining is not None and (timeout is None or remaining < timeout):
            timeout = remaining
        conn.calls += 1
        try:
            running = self._inflight.enter(ctx)
            try:
                raw = await call_tool(
                    client,
                    mcp_name,
                    arguments,
                    ctx=ctx,
                    timeout=self.spec.timeout if self.spec.reset_timeout_on_progress else timeout,
                    reset_on_progress=self.spec.reset_timeout_on_progress,
                    max_total=self.spec.max_total_timeout,
                    as_task=self._task_support.get(mcp_name) == "required",
                )
            finally:
                self._inflight.leave(ctx, running)
        except Exception as exc:  # boundary: every SDK/transport failure becomes a ToolError
            urls = _url_elicitations(exc)
            if urls is not None:
                return urls
            if self.spec.transport == "http":
                if session_lost(exc, conn.http_status):
                    # The server answers 404 to a session it does not know before it runs
                    # anything, so sending the call again cannot run it twice.
                    lost = translate_error(
                        exc,
                        server=self.spec.name,
                        tool=mcp_name,
                        timeout=timeout,
                        http_status=conn.http_status,
                    )
                    self._retire(conn, lost.message)
                    if resend:
                        return _UNSENT
                    raise lost from exc
                if _dropped(exc, conn.http_status):
                    dropped = ToolError(self._dropped_message(mcp_name, exc, conn))
                    self._retire(conn, dropped.message)
                    raise dropped from exc
            refusal = self._refusal(conn) if _http_stand_in(exc) else None
            if refusal is not None:
                self._last_error = refusal
                raise ToolError(f"'{mcp_name}' was refused: {refusal}") from exc
            auth = self.spec.auth
            flow = auth and describe_flow_error(self.spec.name, auth, leaf_exception(exc))
            if flow:
                self._last_error = flow
                raise ToolError(f"'{mcp_name}' failed: {flow}") from exc
            error = translate_error(
                exc,
                server=self.spec.name,
                tool=mcp_name,
                timeout=timeout,
                http_status=conn.http_status,
                broken=conn.broken,
                sent_token=self.spec.sends_token,
                json_syntax=self.spec.json_syntax,
            )
            self._last_error = error.message
            raise error from exc
        finally:
            conn.calls -= 1
            if conn.retired and conn.calls == 0:
                self._close_connection(conn)
        return raw

    def _dropped_message(self, mcp_name: str, exc: BaseException, conn: _Connection) -> str:
        status = conn.http_status
        if _http_stand_in(exc) and status is not None:
            how = f"a proxy answered {status[0]} {status[1]}".rstrip()
        else:
            how = f"{type(leaf_exception(exc)).__name__}: {leaf_exception(exc)}".rstrip(": ")
        url = redact_url(self.spec.url or "")
        return (
            f"the MCP server '{self.spec.name}' at {url} dropped the connection during "
            f"'{mcp_name}' ({how}; a replica of it may have died); it was not retried because "
            "it may have run. The next call reconnects"
        )

    def _retire(self, conn: _Connection, reason: str) -> None:
        """A call found `conn` broken (over HTTP: a replica died, or the server forgot the
        session). The next call reconnects at once, the restart path of a crashed stdio
        server; calls still running on `conn` finish there (behind a load balancer another
        replica may be answering them), and the connection closes after the last."""
        self._last_error = reason
        if conn.retired or conn.closing:
            return
        counted = conn.crashed  # its transport ended first: `_crashed` counted this failure
        conn.retired = True
        conn.alive = False
        conn.crashed = True  # its transport ending later is this loss, not another crash
        if conn.calls == 0:
            self._close_connection(conn)
        if conn is not self._conn or self._state is McpServerState.CLOSED:
            return
        if not counted:
            self._failures += 1
            self._retry_at = time.monotonic() + _backoff(self._failures)
        self._state = McpServerState.CRASHED
        self._reason = reason
        logger.warning("MCP server '%s': %s", self.spec.name, reason)

    async def _restart(self, dead: _Connection | None) -> tuple[_Connection, bool]:
        """A live connection for a call, restarting the server if it is down and its backoff
        has passed. Concurrent calls share one restart."""
        async with self._restart_lock:
            conn = self._conn
            if conn is not None and conn.alive:
                return conn, conn is not dead
            if self._state is McpServerState.CLOSED or conn is None:
                raise ToolError(
                    f"the MCP server '{self.spec.name}' is {self._state.value}"
                    f"{': ' + self._reason if self._reason else ''}"
                )
            wait = self._retry_at - time.monotonic()
            if wait > 0:
                raise ToolError(self._down_message(wait), retryable=True)
            self._state = McpServerState.RESTARTING
            before = self._tools
            try:
                new = await self._connect()
            except SourceError as exc:
                if self._state is McpServerState.CLOSED:
                    raise ToolError(f"the MCP server '{self.spec.name}' is closed") from exc
                self._failures += 1
                delay = _backoff(self._failures)
                self._retry_at = time.monotonic() + delay
                self._state = McpServerState.FAILED
                raise ToolError(self._down_message(delay), retryable=True) from exc
            self._restarts += 1
            logger.info("MCP server '%s' restarted", self.spec.name)
        if self._tools != before:
            self._tools_changed += 1
            await self._notify_tools_changed()
        return new, True

    def _down_message(self, wait: float) -> str:
        return (
            f"the MCP server '{self.spec.name}' is down ({self._reason}); "
            f"it will be retried in {wait:.1f} s"
        )


def _http_stand_in(exc: BaseException) -> bool:
    """The SDK's error for a request the server answered with an HTTP error status."""
    from mcp.shared.exceptions import MCPError

    leaf = leaf_exception(exc)
    return isinstance(leaf, MCPError) and leaf.error.message == "Server returned an error response"


_UNSENT = object()
"""What `McpServer._send` returns for a call the server did not run."""

_URL_ROUNDS = 3
"""URL elicitation rounds (-32042) one call goes through before it gives up: a server that
keeps asking after the user accepted would otherwise loop forever."""


@dataclass(frozen=True, kw_only=True)
class _UrlElicitations:
    """A call the server refused with -32042 (URL elicitation required): what it asks."""

    elicitations: list[Any]
    message: str


def _url_elicitations(exc: BaseException) -> _UrlElicitations | None:
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
    from mcp_types import URL_ELICITATION_REQUIRED

    leaf = leaf_exception(exc)
    if not isinstance(leaf, MCPError) or leaf.code != URL_ELICITATION_REQUIRED:
        return None
    try:
        needed = UrlElicitationRequiredError.from_error(leaf.error)
    except ValueError:  # malformed elicitations: the error goes to the model as it is
        return None
    return _UrlElicitations(elicitations=list(needed.elicitations), message=leaf.message)


def _dropped(exc: BaseException, http_status: HttpStatus | None) -> bool:
    """The connection broke while the call was running (the server died, or a proxy in front
    of it says its upstream did): the tool may have run."""
    import httpx2
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    leaf = leaf_exception(exc)
    if isinstance(leaf, MCPError):
        if leaf.code == CONNECTION_CLOSED:
            return True
        return _http_stand_in(leaf) and http_status is not None and http_status[0] in (502, 504)
    if isinstance(leaf, httpx2.TimeoutException):
        return False  # a timeout, said as one by `translate_error`
    return isinstance(
        leaf,
        httpx2.TransportError
        | anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream,
    )


def _backoff(failures: int) -> float:
    """Seconds before the next restart: none after a first crash, then 0.5 s doubling."""
    if failures <= 1:
        return 0.0
    return min(_RESTART_BACKOFF_CAP, _RESTART_BACKOFF * 2 ** (failures - 2))


def _quoted_stderr(tail: str) -> str:
    if not tail:
        return ""
    lines = tail.splitlines()[-5:]
    return " (stderr: " + " | ".join(line.strip() for line in lines if line.strip()) + ")"


async def _list_all(client: Client, conn: _Connection) -> list[mcp_types.Tool]:
    """Every tool, following `next_cursor` (the SDK returns one page per call). The skipped
    tools of the walk collect in `conn.skipped`."""
    conn.skipped = {}
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if cursor in seen:
            raise SourceError(f"the server repeated the tools/list cursor {cursor!r}")
        seen.add(cursor)
    raise SourceError(f"tools/list did not end after {_MAX_PAGES} pages")


@asynccontextmanager
async def _watched(transport: Any, conn: _Connection) -> AsyncIterator[tuple[Any, Any]]:
    """`transport`, with its read stream reporting its end to `conn` (the server is gone) and
    screening tool listings (`_Connection.screen_listing`)."""
    async with transport as (read, write):
        yield _EndWatch(read, conn), write


class _EndWatch:
    """A read stream that tells its connection when it ends, and screens tool listings;
    otherwise it is the stream."""

    def __init__(self, stream: Any, conn: _Connection) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCResponse

        self._stream = stream
        self._conn = conn
        # Looked up once: `_screened` runs for every message of the session.
        self._session_message: type[Any] = SessionMessage
        self._response: type[Any] = JSONRPCResponse

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aenter__(self) -> _EndWatch:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> bool | None:
        try:
            return await self._stream.__aexit__(*exc_info)
        finally:
            self._conn.mark_ended()

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return self._screened(await self._stream.__anext__())
        except StopAsyncIteration:
            self._conn.mark_ended()
            raise

    async def receive(self) -> Any:
        return self._screened(await self._stream.receive())

    def _screened(self, item: Any) -> Any:
        """`item`, with malformed tools taken out if it answers `tools/list`: the only MCP
        result that holds a `tools` list."""
        if isinstance(item, self._session_message) and isinstance(item.message, self._response):
            result = item.message.result
            if isinstance(result, dict) and isinstance(result.get("tools"), list):
                self._conn.screen_listing(result)
        return item

    async def aclose(self) -> None:
        await self._stream.aclose()


async def connect_all(servers: Iterable[McpServer]) -> None:
    """Start every server at once, each under its own `connect_timeout`.

    A server that fails is recorded in its `status` and does not stop the others.

    Raises:
        SourceError: a server marked `required` did not start (all of them are named).
    """
    failed: list[tuple[McpServer, SourceError]] = []

    async def start(server: McpServer) -> None:
        # Each server's start and end is a log record carrying `mcp_progress`, so a listener on
        # another thread (the CLI's live lines, an application's log) sees servers as they
        # finish, not after the slowest one.
        logger.debug("MCP server %r starting", server.name, extra={"mcp_progress": server.status})
        try:
            await server.start()
        except SourceError as exc:
            failed.append((server, exc))
            logger.warning("%s", exc, extra={"mcp_progress": server.status})
        else:
            status = server.status
            logger.info(
                "MCP server %r ready in %.1f s (%d tools)",
                server.name,
                status.started_in or 0.0,
                status.tool_count,
                extra={"mcp_progress": status},
            )

    async with anyio.create_task_group() as tg:
        for server in servers:
            tg.start_soon(start, server)
    required = [(server, exc) for server, exc in failed if server.spec.required]
    if required:
        reasons = "; ".join(str(exc) for _, exc in required)
        raise SourceError(
            f"{reasons}. The server is marked `required: true`; fix it, or set `required: false` "
            "to start without it"
        )
