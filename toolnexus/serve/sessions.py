"""Handshake-era MCP sessions that any replica can serve (`serve --http --state redis://...`).

The SDK keeps a session in the memory of the process that opened it: another replica answers
its `Mcp-Session-Id` with 404, so replicas behind a load balancer had to be pinned (`ip_hash`).
With a shared state store, `SharedSessions` sits in front of the SDK's session manager:

- **Opening.** When the manager answers an `initialize` with a new session id, a record of it is
  written to the store *before* the client sees the id: the `initialize` parameters the client
  sent (protocol version, capabilities, client info) and a digest of the caller that opened it.
- **Every request with a session id** first reads that record. No record (never opened, closed
  with DELETE, or idle past `SESSION_TTL_S`) or another caller's record: 404, exactly the SDK's
  answer to an unknown session, so a stolen id tells its thief nothing. The store unreachable:
  503 with a message saying so. The record's life is then extended (`StateBackend.touch`,
  which never brings a deleted record back).
- **Adoption.** A request for a session this replica does not hold (its manager answers 404)
  re-creates the session under the same id: a transport of the SDK's, driven by the SDK's
  `serve_loop`, to which the recorded `initialize` and `notifications/initialized` are replayed
  as the client sent them. Then the request is served there.
- **Closing.** A DELETE that ended a session removes its record and search state before it is
  answered: no replica adopts it again, and replicas that still hold a copy answer 404 and end
  it.
- **Questions.** A request the server sends the client mid-call (an approval's elicitation, an
  upstream server's forwarded question) waits in the replica that sent it, while the balancer
  may bring the client's answer to another. So its id is rewritten on the way out to name the
  asking replica (`tnx:NONCE:ID`); an answer that reaches another replica is left in the store,
  where the asking one looks for it (every `_ANSWER_POLL_S`), and is handed to its session with
  the original id.

What moves with a session: its protocol version, the client's capabilities and info (so
elicitation and sampling still know what the client declared), the caller it belongs to, and
its tool-search state (`toolnexus.search.sessions`). What restarts on the new replica: requests
in flight on a replica that died (they fail there, the client sees the error; so do questions
it had asked), the GET event stream (the client reopens it), and a `logging/setLevel` choice
(back to the default).

Reliance on the SDK is kept to its public pieces: `StreamableHTTPServerTransport` (its
constructor, `connect`, `handle_request`, `terminate`, `is_terminated`, `idle_scope`),
`mcp.server.runner.serve_loop`, the server's `lifespan`, and the manager answering 404 to a
session it does not hold. `check_sdk` fails at start-up, naming what changed, if they are not
as expected.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StateUnavailable, UsageError
from .identity import scope_caller
from .responses import ASGIApp, send_json

if TYPE_CHECKING:
    import anyio.abc
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    from ..base import Caller
    from ..state import StateBackend

__all__ = ["SESSION_TTL_S", "SharedSessions", "caller_key", "check_sdk", "session_keys"]

logger = logging.getLogger("toolnexus.serve")

SESSION_TTL_S = 30 * 60.0
"""A session's record lives this long after its last request (the SDK's own idle timeout for
the sessions it holds): an abandoned session leaves nothing behind in the store."""
_REFRESH_EVERY_S = SESSION_TTL_S / 10
"""A record is touched at most this often per session and replica (not on every request)."""
_MAX_BODY = 4 * 1024 * 1024
"""The SDK's bound on a request body: a bigger one is refused before it is read whole."""
_MAX_SESSION_ID = 256
"""Longer ids are not ours (the SDK mints 32 hex digits) and never reach the store."""
_RECORD_VERSION = 1
_ADOPTION_ID = "toolnexus-adopt"
_QUESTION = "tnx:"
"""How the id of a question a replica asks the client starts (`tnx:NONCE:ID`)."""
_ANSWER_POLL_S = 0.1
"""How often a replica that asked looks in the store for an answer another replica took:
questions wait on a person, so a tenth of a second is not felt."""
"""The JSON-RPC id of the replayed `initialize` (its answer is read here, never sent)."""


@dataclass(frozen=True, kw_only=True)
class SessionKeys:
    """Where one session's state lives in the store."""

    record: str
    """The session's record (the `initialize` parameters and its caller)."""
    search: str
    """Its tool-search state: keyed by the caller too, so one caller never reads another's."""


def caller_key(caller: Caller | None) -> str:
    """A digest naming `caller` (issuer, subject and OAuth client); "" for nobody identified."""
    if caller is None:
        return ""
    who = json.dumps([caller.issuer, caller.subject, caller.client_id])
    return hashlib.sha256(who.encode()).hexdigest()


def session_keys(session_id: str, caller: str) -> SessionKeys:
    """The keys of session `session_id` opened by `caller` (a `caller_key`)."""
    search = hashlib.sha256(f"{caller}\0{session_id}".encode()).hexdigest()
    return SessionKeys(record=f"mcp-session:{session_id}", search=f"mcp-search:{search}")


def check_sdk() -> None:
    """Fail now, naming what changed, if the SDK pieces adoption drives are not as expected.

    Raises:
        UsageError: the installed `mcp` lacks one of them.
    """
    from mcp.server import runner, streamable_http
    from mcp.server.lowlevel import Server

    missing: list[str] = []
    transport = getattr(streamable_http, "StreamableHTTPServerTransport", None)
    if transport is None:
        missing.append("mcp.server.streamable_http.StreamableHTTPServerTransport")
    else:
        wanted = {"mcp_session_id", "is_json_response_enabled", "security_settings"}
        wanted |= {"idle_timeout"}
        params = set(inspect.signature(transport.__init__).parameters)
        missing += [f"StreamableHTTPServerTransport({p}=)" for p in sorted(wanted - params)]
        for name in ("connect", "handle_request", "terminate", "is_terminated"):
            if not hasattr(transport, name):
                missing.append(f"StreamableHTTPServerTransport.{name}")
        if not missing and not hasattr(transport(mcp_session_id="x", idle_timeout=1), "idle_scope"):
            missing.append("StreamableHTTPServerTransport().idle_scope")
    loop = getattr(runner, "serve_loop", None)
    if loop is None:
        missing.append("mcp.server.runner.serve_loop")
    else:
        params = set(inspect.signature(loop).parameters)
        missing += [
            f"serve_loop({p}=)" for p in ("lifespan_state", "session_id") if p not in params
        ]
    if "lifespan" not in inspect.signature(Server.__init__).parameters:
        missing.append("Server(lifespan=)")
    if missing:
        from importlib.metadata import version

        raise UsageError(
            "sessions shared through the state store re-create an MCP session on another "
            f"replica with parts of the mcp SDK that the installed mcp {version('mcp')} lacks: "
            f"{', '.join(missing)}. Install the mcp version toolnexus requires (pip install "
            "'mcp>=2.3,<3'), or serve without a shared store (--state memory://) and pin "
            "sessions to one replica"
        )


class SharedSessions:
    """ASGI app in front of the SDK's session manager: session records in `store`, and
    adoption of sessions other replicas opened (see the module's docstring).

    Enter `run()` in the app's lifespan, after the manager's own `run()`.
    """

    def __init__(
        self,
        manager_app: ASGIApp,
        *,
        server: Server[Any],
        store: StateBackend,
        security: Any,
        answer_wait: float = 600.0,
        max_sessions: int = 10_000,
    ) -> None:
        check_sdk()
        self.manager_app = manager_app
        self.server = server
        self.store = store
        self.security = security
        self.answer_wait = answer_wait
        """How long a question this replica asked waits for its answer (the approval timeout)."""
        self.max_sessions = max_sessions
        self._nonce = secrets.token_hex(8)
        """This replica, in the ids of the questions it asks."""
        self._waiting: dict[str, Any] = {}
        """Per question asked here: the cancel scope of its watch on the store."""
        self._adopted: dict[str, StreamableHTTPServerTransport] = {}
        self._touched: dict[str, float] = {}
        """Per session: when this replica last extended its record (monotonic seconds)."""
        self._group: anyio.abc.TaskGroup | None = None
        self._lifespan_state: Any = None
        self._lock: Any = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Hold the adopted sessions' tasks; they end with the block."""
        import anyio

        self._lock = anyio.Lock()
        async with (
            self.server.lifespan(self.server) as state,
            anyio.create_task_group() as group,
        ):
            self._group, self._lifespan_state = group, state
            try:
                yield
            finally:
                group.cancel_scope.cancel()
                self._group = None
                self._adopted.clear()

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        headers = _headers(scope)
        version = headers.get(b"mcp-protocol-version")
        if scope["type"] != "http" or (
            version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
        ):  # 2026-07-28 requests carry no session
            await self.manager_app(scope, receive, send)
            return
        session_id = headers.get(b"mcp-session-id")
        caller = caller_key(scope_caller(scope))
        try:
            if session_id is None:
                await self._opening(scope, receive, send, caller)
            else:
                await self._continuing(session_id.decode("latin-1"), scope, receive, send, caller)
        except StateUnavailable as exc:
            logger.warning("MCP session store: %s", exc)
            await _jsonrpc_error(send, 503, f"the session store is unreachable: {exc}")

    # --- a request without a session id: the one that may open a session ----------------------

    async def _opening(
        self, scope: MutableMapping[str, Any], receive: Any, send: Any, caller: str
    ) -> None:
        if scope["method"] != "POST":
            await self.manager_app(scope, receive, send)
            return
        body = await _body(receive)
        if body is None:
            await _jsonrpc_error(send, 413, "the request body is too large")
            return
        params = _initialize_params(body)
        if params is None:  # not an initialize: the manager refuses it as it should
            await self.manager_app(scope, _replay(body, receive), send)
            return
        record = json.dumps({"v": _RECORD_VERSION, "caller": caller, "initialize": params})
        failed: list[StateUnavailable] = []

        async def recording(message: MutableMapping[str, Any]) -> None:
            if failed:  # the 503 went out instead of this answer
                return
            if message["type"] == "http.response.start" and message["status"] == 200:
                opened = dict(message.get("headers", [])).get(b"mcp-session-id")
                if opened is not None:
                    keys = session_keys(opened.decode("latin-1"), caller)
                    try:  # before the client learns the id, so any replica knows it at once
                        await self.store.put(keys.record, record.encode(), ttl=SESSION_TTL_S)
                    except StateUnavailable as exc:
                        failed.append(exc)
                        logger.warning("MCP session store: %s", exc)
                        await _jsonrpc_error(send, 503, f"the session store is unreachable: {exc}")
                        return
            await send(message)

        await self.manager_app(scope, _replay(body, receive), recording)

    # --- a request in a session ----------------------------------------------------------------

    async def _continuing(
        self,
        session_id: str,
        scope: MutableMapping[str, Any],
        receive: Any,
        send: Any,
        caller: str,
    ) -> None:
        keys = session_keys(session_id, caller)
        record = None
        if len(session_id) <= _MAX_SESSION_ID:
            record = _record(await self.store.get(keys.record))
        if record is None or not hmac.compare_digest(record["caller"], caller):
            if record is None:  # closed or expired elsewhere: a copy held here ends too
                await self._end(session_id)
            await _jsonrpc_error(send, 404, "Session not found", code=-32600)
            return
        if scope["method"] == "DELETE":
            await self._close(session_id, keys, scope, receive, send)
            return
        await self._refresh(session_id, keys)
        send = self._asking(send, session_id, scope)
        body = await _body(receive)
        if body is None:
            await _jsonrpc_error(send, 413, "the request body is too large")
            return
        answer = _answer_to(body)
        if answer is not None:  # the client answers a question a replica asked it
            asked, nonce, original = answer
            if nonce != self._nonce:  # another replica asked: leave it where that one looks
                key = _answer_key(session_id, asked)
                await self.store.put(key, body, ttl=self.answer_wait)
                await _accepted(send)
                return
            self._answered(asked)
            body = _with_id(body, original)
        held = self._adopted.get(session_id)
        if held is not None and not held.is_terminated:
            await held.handle_request(scope, _replay(body, receive), send)
            return
        probe = _Probe(send)
        await self.manager_app(scope, _replay(body, receive), probe)
        if not probe.unknown:  # the manager holds the session and answered
            return
        adopted = await self._adopt(session_id, record["initialize"], scope)
        if adopted is None:
            await probe.flush()  # its 404: nothing else can be done here
            return
        await adopted.handle_request(scope, _replay(body, receive), send)

    # --- questions the server asks the client (approvals, forwarded elicitation, sampling) ---

    def _asking(self, send: Any, session_id: str, scope: MutableMapping[str, Any]) -> Any:
        """The `send` of a request in a session: each question the server sends the client
        gets an id naming this replica (`tnx:NONCE:ID`), and this replica watches the store
        for its answer, which the client may send to any replica."""
        streaming = False

        async def asking(message: MutableMapping[str, Any]) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers", [])).get(b"content-type", b"")
                streaming = kind.startswith(b"text/event-stream")
            elif streaming and message["type"] == "http.response.body":
                chunk, asked = _name_questions(message.get("body", b""), self._nonce)
                if asked:
                    message = {**message, "body": chunk}
                    for new, original in asked:
                        self._watch(session_id, new, original, scope)
            await send(message)

        return asking

    def _watch(
        self, session_id: str, asked: str, original: Any, scope: MutableMapping[str, Any]
    ) -> None:
        import anyio

        if self._group is None:
            return
        watch = anyio.CancelScope(deadline=anyio.current_time() + self.answer_wait)
        self._waiting[asked] = watch
        self._group.start_soon(self._await_answer, session_id, asked, original, scope, watch)

    def _answered(self, asked: str) -> None:
        """The answer to `asked` reached this replica itself: stop watching the store."""
        watch = self._waiting.pop(asked, None)
        if watch is not None:
            watch.cancel()

    async def _await_answer(
        self,
        session_id: str,
        asked: str,
        original: Any,
        scope: MutableMapping[str, Any],
        watch: Any,
    ) -> None:
        """Poll the store for the answer another replica received, then hand it to the
        session here as if the client had sent it here."""
        import anyio

        key = _answer_key(session_id, asked)
        try:
            with watch:
                while True:
                    await anyio.sleep(_ANSWER_POLL_S)
                    try:
                        raw = await self.store.get(key)
                        if raw is None:
                            continue
                        await self.store.delete(key)
                    except StateUnavailable as exc:  # the question times out if it stays so
                        logger.warning("MCP session store, awaiting an answer: %s", exc)
                        continue
                    message = json.loads(_with_id(raw, original))
                    held = self._adopted.get(session_id)
                    app = held.handle_request if held is not None else self.manager_app
                    await _post(app, scope, session_id, message)
                    return
        finally:
            if self._waiting.get(asked) is watch:
                del self._waiting[asked]

    async def _refresh(self, session_id: str, keys: SessionKeys) -> None:
        now = time.monotonic()
        if now - self._touched.get(session_id, -_REFRESH_EVERY_S) < _REFRESH_EVERY_S:
            return
        if len(self._touched) > 2 * self.max_sessions:  # forget sessions idle past their life
            self._touched = {s: t for s, t in self._touched.items() if now - t < SESSION_TTL_S}
        self._touched[session_id] = now
        await self.store.touch(keys.record, ttl=SESSION_TTL_S)
        await self.store.touch(keys.search, ttl=SESSION_TTL_S)

    async def _close(
        self,
        session_id: str,
        keys: SessionKeys,
        scope: MutableMapping[str, Any],
        receive: Any,
        send: Any,
    ) -> None:
        """A DELETE: the record and search state go first (the store unreachable, nothing is
        closed and the client is told so), so no replica adopts the session from then on; then
        the copy held here ends, and the manager's, if it holds one."""
        await self.store.delete(keys.record)
        await self.store.delete(keys.search)
        self._touched.pop(session_id, None)
        held = self._adopted.pop(session_id, None)
        if held is not None and not held.is_terminated:
            await held.handle_request(scope, receive, send)  # ends it and answers 200
            return
        probe = _Probe(send)
        await self.manager_app(scope, receive, probe)
        if probe.unknown:  # held nowhere here: closed all the same
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    async def _end(self, session_id: str) -> None:
        held = self._adopted.pop(session_id, None)
        if held is not None and not held.is_terminated:
            import anyio

            with anyio.CancelScope(shield=True):
                await held.terminate()

    # --- adoption ------------------------------------------------------------------------------

    async def _adopt(
        self, session_id: str, initialize: dict[str, Any], scope: MutableMapping[str, Any]
    ) -> StreamableHTTPServerTransport | None:
        """The session re-created here under `session_id`, or None (at the session limit, or
        the replayed handshake was refused)."""
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        assert self._lock is not None and self._group is not None, "run() is not entered"
        async with self._lock:
            held = self._adopted.get(session_id)
            if held is not None and not held.is_terminated:
                return held  # a request beside this one adopted it first
            if len(self._adopted) >= self.max_sessions:
                logger.warning(
                    "not adopting session %s: %d held", session_id[:64], self.max_sessions
                )
                return None
            transport = StreamableHTTPServerTransport(
                mcp_session_id=session_id,
                security_settings=self.security,
                idle_timeout=SESSION_TTL_S,
            )
            await self._group.start(self._serve, session_id, transport)
            self._adopted[session_id] = transport
            try:
                await self._handshake(transport, session_id, initialize, scope)
            except (_Refused, TimeoutError) as exc:
                logger.warning("not adopting session %s: %s", session_id[:64], exc)
                await self._end(session_id)
                return None
            logger.info("adopted MCP session %s", session_id[:64])
            return transport

    async def _serve(
        self,
        session_id: str,
        transport: StreamableHTTPServerTransport,
        *,
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        """The session's message loop, as the SDK's manager runs its own."""
        import anyio
        from mcp.server.runner import serve_loop

        try:
            async with transport.connect() as (read_stream, write_stream):
                task_status.started()
                with transport.idle_scope or anyio.CancelScope():
                    await serve_loop(
                        self.server,
                        read_stream,
                        write_stream,
                        lifespan_state=self._lifespan_state,
                        session_id=session_id,
                    )
        except Exception:
            logger.exception("adopted session %s crashed", session_id[:64])
        finally:
            if self._adopted.get(session_id) is transport:
                del self._adopted[session_id]
            if not transport.is_terminated:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()

    async def _handshake(
        self,
        transport: StreamableHTTPServerTransport,
        session_id: str,
        initialize: dict[str, Any],
        scope: MutableMapping[str, Any],
    ) -> None:
        """Replay the client's `initialize` and `notifications/initialized` to `transport`."""
        opening = {"jsonrpc": "2.0", "id": _ADOPTION_ID, "method": "initialize"}
        post = transport.handle_request
        answer = await _post(post, scope, session_id, {**opening, "params": initialize})
        if answer.status != 200 or b'"result"' not in answer.body:
            raise _Refused(f"the replayed initialize was answered {answer.status}")
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        answer = await _post(post, scope, session_id, ready)
        if answer.status != 202:
            raise _Refused(f"the replayed notifications/initialized was answered {answer.status}")


class _Refused(Exception):
    """A replayed handshake the re-created session did not accept."""


@dataclass
class _Answer:
    status: int
    body: bytes


async def _post(
    app: ASGIApp,
    scope: MutableMapping[str, Any],
    session_id: str,
    message: dict[str, Any],
) -> _Answer:
    """POST `message` to `app` (a session's transport, or the manager) as the client would
    (its Host, Origin and identity kept, for the transport's checks and the server's
    middleware), and read the whole answer."""
    import anyio

    body = json.dumps(message).encode()
    kept = [(k, v) for k, v in scope["headers"] if k in (b"host", b"origin", b"authorization")]
    headers = [
        *kept,
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-length", str(len(body)).encode()),
        (b"mcp-session-id", session_id.encode()),
    ]
    synthetic = {**scope, "method": "POST", "headers": headers, "query_string": b""}
    status, chunks, done = 0, list[bytes](), anyio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def collect(event: MutableMapping[str, Any]) -> None:
        nonlocal status
        if event["type"] == "http.response.start":
            status = event["status"]
        elif event["type"] == "http.response.body":
            chunks.append(event.get("body", b""))
            if not event.get("more_body", False):
                done.set()

    with anyio.fail_after(30):  # the server answers a handshake at once; never wait forever
        await app(synthetic, receive, collect)
    done.set()
    return _Answer(status=status, body=b"".join(chunks))


class _Probe:
    """The `send` of a request forwarded to the manager: passes the answer on, except a 404
    (the manager does not hold the session), which is held back so the session can be adopted
    instead."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.status: int | None = None
        self.unknown = False
        self.held: list[MutableMapping[str, Any]] = []

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.unknown = self.status == 404
        if self.unknown:
            self.held.append(message)
        else:
            await self.send(message)

    async def flush(self) -> None:
        for message in self.held:
            await self.send(message)


def _answer_key(session_id: str, asked: str) -> str:
    return f"mcp-answer:{session_id}:{asked}"


def _name_questions(chunk: bytes, nonce: str) -> tuple[bytes, list[tuple[str, Any]]]:
    """`chunk` of an event stream with each server-to-client request's id made
    `tnx:NONCE:ID`; and the (new id, original id) pairs."""
    if b'"method"' not in chunk:
        return chunk, []
    lines = chunk.split(b"\n")
    asked: list[tuple[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.startswith(b"data:"):
            continue
        try:
            message = json.loads(line[5:])
        except (ValueError, RecursionError):
            continue
        if isinstance(message, dict) and "method" in message and "id" in message:
            new = f"{_QUESTION}{nonce}:{json.dumps(message['id'])}"
            asked.append((new, message["id"]))
            message["id"] = new
            end = b"\r" if line.endswith(b"\r") else b""
            lines[i] = b"data: " + json.dumps(message, separators=(",", ":")).encode() + end
    return b"\n".join(lines), asked


def _answer_to(body: bytes) -> tuple[str, str, Any] | None:
    """For a client's answer to a question `_name_questions` named: its id, the replica's
    nonce and the question's original id; None for anything else."""
    if _QUESTION.encode() not in body:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" in message:
        return None
    asked = message.get("id")
    if not isinstance(asked, str) or not asked.startswith(_QUESTION) or len(asked) > 128:
        return None  # longer ids are not ones a replica gave: they never become store keys
    nonce, _, original = asked[len(_QUESTION) :].partition(":")
    try:
        return asked, nonce, json.loads(original)
    except (ValueError, RecursionError):
        return None


def _with_id(body: bytes, original: Any) -> bytes:
    """A client's answer with the id the session's own question had."""
    message = json.loads(body)
    message["id"] = original
    return json.dumps(message).encode()


async def _accepted(send: Any) -> None:
    """202, as the SDK answers a response the client sends."""
    await send({"type": "http.response.start", "status": 202, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _headers(scope: MutableMapping[str, Any]) -> dict[bytes, bytes]:
    return {k.lower(): v for k, v in scope.get("headers", [])}


async def _body(receive: Any) -> bytes | None:
    """The whole request body, or None when it is over the SDK's bound."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > _MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[Any]]:
    """A `receive` that gives `body` again, then what the client sends (its disconnect)."""
    given = False

    async def again() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def _initialize_params(body: bytes) -> dict[str, Any] | None:
    """The params of an `initialize` request, or None for anything else."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    return params if isinstance(params, dict) else None


def _record(raw: bytes | None) -> dict[str, Any] | None:
    """A session record as `_opening` wrote it, or None (missing, or not of that shape)."""
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(record, dict)
        or record.get("v") != _RECORD_VERSION
        or not isinstance(record.get("caller"), str)
        or not isinstance(record.get("initialize"), dict)
    ):
        return None
    return record


async def _jsonrpc_error(send: Any, status: int, message: str, *, code: int = -32603) -> None:
    """A JSON-RPC error without a request id, as the SDK answers session errors."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    await send_json(send, status, body)
