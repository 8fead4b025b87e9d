"""`toolnexus login` and `logout`: the browser flow of `auth: oauth`, with a loopback
redirect listener on 127.0.0.1 (RFC 8252), on the provider of `mcp.auth`.

The authorization page is opened with the system browser (`webbrowser`, in a thread: a browser
command may wait for its window to close) and its URL is always printed, for a machine without
one. The answer comes back to a one-shot listener, which takes only an answer carrying this
login's `state` (none before the authorization URL exists): any program on this machine can
reach it, so a refused answer gets an error page, is reported to the user, and the listener keeps
waiting for the real one. The SDK checks `state` and `iss` again.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import secrets
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigError, SourceError
from .auth import AuthSettings, _Browser, _StoredLogin, _user_login_class
from .tokens import LoginStore, TokenStore

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult

__all__ = ["LOGIN_TIMEOUT", "find_server", "login", "logout"]

logger = logging.getLogger("toolnexus.mcp")

LOGIN_TIMEOUT = 300.0
"""Seconds `login` waits for the browser to come back to the loopback listener."""

Opener = Callable[[str], object]
"""Shows the user a URL: `webbrowser.open` by default; tests pass a scripted browser."""


async def login(
    server: str,
    url: str,
    settings: AuthSettings,
    *,
    out: TextIO,
    open_browser: Opener | None = None,
    store: LoginStore | None = None,
    timeout: float = LOGIN_TIMEOUT,
) -> str:
    """Log in to the MCP server at `url` through the browser and store the tokens (in `store`:
    the user's token file by default, or a shared state store, `tokens.login_store_for`).

    The authorization page is opened with `open_browser` (the system browser by default) and
    its URL is always printed to `out`; the answer comes back to a listener on 127.0.0.1.
    The login is fresh whatever is stored, and replaces the stored one only when it succeeds;
    the client registration is kept while its redirect port can be had again.

    Returns:
        What was done, in words (for the command line).

    Raises:
        SourceError: the flow failed, or no answer came within `timeout` seconds.
    """
    if settings.grant == "client_credentials":
        return f"'{server}' uses client credentials: no login needed, nothing was stored"
    store = store or TokenStore()
    storage = _StoredLogin(store, url)
    record = await storage.record()
    wanted_port = _registered_port(record.get("client"))

    def report(peer: str) -> None:
        out.write(
            f"warning: refused an answer on the login listener (from {peer}) that is not for "
            "this login (its state is not this login's); if you did not send it, another "
            "program on this machine tried to take over the login. Still waiting for yours.\n"
        )
        out.flush()

    async with _Loopback.open(wanted_port, report) as listener:
        # Nothing stored is dropped here: the provider ignores the stored tokens (and a client
        # registered for another port) and the new login replaces them only once it has
        # succeeded, so an abandoned login leaves the one that worked.

        async def send_user(authorization_url: str) -> None:
            listener.expect(authorization_url)
            out.write(f"Open this URL to log in to '{server}':\n  {authorization_url}\n")
            out.flush()
            import webbrowser

            opener = open_browser or webbrowser.open
            try:
                # In a thread: a browser command may wait for its window to close, and the
                # answer it brings must find this loop free to serve the listener.
                outcome = await asyncio.to_thread(opener, authorization_url)
                if asyncio.iscoroutine(outcome):
                    await outcome
            except Exception as exc:  # noqa: BLE001 - no browser here: the printed URL serves
                logger.debug("opening a browser failed: %s", exc)

        async def answer() -> AuthorizationCodeResult:
            try:
                return await asyncio.wait_for(listener.answer, timeout)
            except TimeoutError:
                raise SourceError(
                    f"no answer from the browser within {timeout:g} s; run `toolnexus login "
                    f"{server}` again"
                ) from None

        browser = _Browser(redirect_uri=listener.redirect_uri, send_user=send_user, answer=answer)
        cls = _user_login_class()
        auth = cls(
            url=url,
            settings=settings,
            storage=storage,
            browser=browser,
            on_problem=lambda problem: None,
        )
        tools = await _handshake(server, url, auth)
    saved = (await storage.record()).get("tokens")
    granted = (await storage.get_tokens()) if saved and saved != record.get("tokens") else None
    if granted is None:
        raise SourceError(f"the login to '{server}' finished without tokens")
    scopes = f" (scopes: {granted.scope})" if granted.scope else ""
    return f"logged in to '{server}'{scopes}; {tools} tools; tokens saved in {store.where}"


async def logout(server: str, url: str, *, store: LoginStore | None = None) -> str:
    """Forget the stored login of the server at `url`."""
    store = store or TokenStore()
    if await store.aremove(url):
        return f"logged out of '{server}' (its tokens were removed from {store.where})"
    return f"no login stored for '{server}'"


async def _handshake(server: str, url: str, auth: httpx2.Auth) -> int:
    """Connect with `auth` (which runs the flow on the first 401) and count the tools."""
    import httpx2
    from mcp import Client
    from mcp.client.auth import OAuthFlowError
    from mcp.client.streamable_http import streamable_http_client

    failure: BaseException | None = None
    try:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0)) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return len((await client.list_tools()).tools)
    except Exception as exc:  # noqa: BLE001 - the SDK wraps failures in exception groups
        failure = _leaf(exc)
    if isinstance(failure, SourceError):
        raise failure
    if isinstance(failure, OAuthFlowError):
        raise SourceError(f"the login to '{server}' failed: {failure}") from failure
    raise SourceError(
        f"the login to '{server}' failed: {type(failure).__name__}: {failure}"
    ) from failure


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _registered_port(client: object) -> int | None:
    if not isinstance(client, Mapping):
        return None
    uris = client.get("redirect_uris") or []
    if not uris:
        return None
    parts = urlsplit(str(uris[0]))
    return parts.port if parts.hostname == "127.0.0.1" else None


class _Loopback:
    """A one-shot HTTP listener on 127.0.0.1 for the authorization redirect (RFC 8252 §7.3)."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self.answer: asyncio.Future[AuthorizationCodeResult] = (
            asyncio.get_running_loop().create_future()
        )
        self.port = 0
        self._server: asyncio.Server | None = None
        self._state: str | None = None
        self._report = report

    def expect(self, authorization_url: str) -> None:
        """Take answers only for this authorization request: any page in a browser on this
        machine can reach the listener, and a planted code or error must not end the login.
        Until this is called there is no request, so every answer is refused.

        One login may make several authorizations (the server moved to another authorization
        server): each waits for its own answer, never the one an earlier one received."""
        if self.answer.done():
            self.answer = asyncio.get_running_loop().create_future()
        self._state = parse_qs(urlsplit(authorization_url).query).get("state", [None])[0]

    def _ours(self, state: str | None) -> bool:
        expected = self._state
        return (
            expected is not None
            and state is not None
            and secrets.compare_digest(state.encode(), expected.encode())
        )

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, port: int | None, report: Callable[[str], None]
    ) -> AsyncGenerator[_Loopback, None]:
        """Listen on `port` (another free one when it is taken); `report` is told the peer of
        every refused answer."""
        listener = cls(report)
        try:
            server = await asyncio.start_server(listener._serve, "127.0.0.1", port or 0)
        except OSError:
            server = await asyncio.start_server(listener._serve, "127.0.0.1", 0)
        listener._server = server
        listener.port = server.sockets[0].getsockname()[1]
        try:
            yield listener
        finally:
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from mcp.shared.auth import AuthorizationCodeResult

        try:
            line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.split()
            target = urlsplit(parts[1]) if len(parts) >= 2 else urlsplit("/")
            if target.path != "/callback":
                await _reply(writer, 404, "Not found.")
                return
            query = {k: v[0] for k, v in parse_qs(target.query).items()}
            if not self._ours(query.get("state")):
                await _reply(writer, 400, "This answer is not for the login toolnexus started.")
                peer = writer.get_extra_info("peername")
                self._report(f"{peer[0]}:{peer[1]}" if peer else "an unknown address")
                return
            if "error" in query:
                said = query.get("error_description") or query["error"]
                await _reply(writer, 400, f"The login was refused: {said}")
                if not self.answer.done():
                    self.answer.set_exception(SourceError(f"the login was refused: {said}"))
                return
            if "code" not in query:
                await _reply(writer, 400, "No authorization code in this answer.")
                return
            await _reply(writer, 200, "Logged in. You can close this tab and return to toolnexus.")
            if not self.answer.done():
                self.answer.set_result(
                    AuthorizationCodeResult(
                        code=query["code"], state=query.get("state"), iss=query.get("iss")
                    )
                )
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()


async def _reply(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    body = f"<!doctype html><title>toolnexus</title><p>{html.escape(text)}</p>".encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


def find_server(manifest: Any, server: str) -> tuple[str, str, AuthSettings]:
    """The name, URL and auth of `server`: a name under the manifest's `mcp_servers:` (a path
    loaded here), or an http(s) URL (then `auth: oauth` with no options).

    Raises:
        ConfigError: the server is not in the manifest, is not HTTP, or has no `auth:`.
        ManifestError: the manifest does not load.
    """
    from ..manifest import load_manifest
    from .spec import McpServerSpec

    if server.startswith(("http://", "https://")):
        return server, server, AuthSettings(grant="authorization_code")
    loaded = load_manifest(manifest)
    decls = {decl.name: decl for decl in loaded.mcp_servers}
    decl = decls.get(server)
    if decl is None:
        known = ", ".join(sorted(decls)) or "none"
        raise ConfigError(f"no MCP server {server!r} in {manifest} (its servers: {known})")
    spec = McpServerSpec.from_mapping(decl.name, decl.spec, base_dir=decl.base_dir)
    if spec.url is None:
        raise ConfigError(f"the MCP server {server!r} runs over stdio: nothing to log in to")
    if spec.auth is None:
        raise ConfigError(
            f"the MCP server {server!r} has no `auth:`; add `auth: oauth` to its entry in "
            f"{manifest} first"
        )
    return spec.name, spec.url, spec.auth
