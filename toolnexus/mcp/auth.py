"""OAuth 2.1 for streamable-HTTP MCP servers, on the SDK's own `mcp.client.auth`.

The SDK's `OAuthClientProvider` (an `httpx2.Auth`, the same httpx2 the SDK's streamable-HTTP
transport uses) does the protocol: protected-resource metadata from the 401's
`WWW-Authenticate`, authorization-server metadata, dynamic client registration or a client ID
metadata document, authorization code with PKCE, refresh, and the scope union of a step-up on
`insufficient_scope`. `ClientCredentialsOAuthProvider` does the headless grant. What this
module adds is what a library that runs agents without a person at the keyboard needs and the
SDK leaves to its caller:

- `_StoredLogin`, the SDK's `TokenStorage` over a `LoginStore` (`toolnexus.mcp.tokens`: the
  user's token file, or the toolkit's shared state store when replicas share one), which also
  keeps the absolute expiry and the discovered metadata: the SDK forgets both between
  processes, so a fresh process would send an expired token first and refresh against a guessed
  `/token` on the MCP server's own host.
- Refresh tokens rotate, and the store is shared (by a person's processes, or by replicas): a
  refresh is made under the store's hold (`LoginStore.hold_refresh`) and only when the store
  still holds the tokens this process holds; else the newer tokens are taken. A refused refresh
  ends the login only if the store still holds the refused tokens.
- `_UserLogin`, the provider for `auth: oauth`. Run by `create_toolkit` it never starts a
  browser flow: a 401 or an `insufficient_scope` 403 on a request is handed back as it is (the
  transport turns it into an error for that request; the connection stays usable), after one
  silent refresh when a refresh token is held, and the reason is recorded as a `LoginProblem`
  whose message names `toolnexus login <server>`. Run by `toolnexus login` (`mcp.login`) it
  does the whole flow in the browser.
- For both grants, a request made with a valid token in hand goes straight out: the SDK's flow
  holds one lock until each answer's headers arrive, which made concurrent calls on a
  connection run one after the other.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ..errors import ConfigError
from .tokens import LoginStore, TokenStore, Unlock

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

__all__ = [
    "AuthSettings",
    "LoginProblem",
    "describe_flow_error",
    "describe_refusal",
    "make_auth",
    "oauth_hint",
    "parse_auth",
]

_OAUTH_KEYS = ("scopes", "client_id", "client_secret", "client_metadata_url")
_CREDENTIALS_KEYS = ("client_id", "client_secret", "private_key_file", "scopes", "issuer")
_PLACEHOLDER_REDIRECT = "http://127.0.0.1/callback"
"""The redirect URI of a provider that never redirects (the non-interactive one)."""


@dataclass(frozen=True, kw_only=True, repr=False)
class AuthSettings:
    """A server's `auth:` entry, checked. Part of `McpServerSpec`, so it is frozen and compares
    by value (hot reload keeps a session whose auth did not change)."""

    grant: Literal["authorization_code", "client_credentials"]
    """`authorization_code` for `auth: oauth` (a person logs in), or `client_credentials`."""
    scopes: tuple[str, ...] = ()
    """Scopes asked for on top of those the server's challenge names."""
    client_id: str | None = None
    """A client registered beforehand; without it the client registers itself (or uses
    `client_metadata_url`)."""
    client_secret: str | None = None
    """The secret of `client_id`: client_credentials, or a confidential client registered
    beforehand for `oauth` (sent with HTTP Basic at the token endpoint); hidden from `repr`."""
    client_metadata_url: str | None = None
    """An https URL of a client ID metadata document, used as the client ID where the
    authorization server supports it (else dynamic registration)."""
    issuer: str | None = None
    """client_credentials: the authorization server the secret belongs to; tokens are asked
    only from it."""
    private_key_file: str | None = None
    """client_credentials with `private_key_jwt` (RFC 7523): a PEM private key (RSA: RS256,
    EC P-256: ES256) that signs the client's assertion instead of a shared secret."""

    def __repr__(self) -> str:
        shown = [f"grant={self.grant!r}"]
        if self.scopes:
            shown.append(f"scopes={list(self.scopes)!r}")
        if self.client_id is not None:
            shown.append(f"client_id={self.client_id!r}")
        if self.client_secret is not None:
            shown.append("client_secret='***'")
        for key in ("client_metadata_url", "issuer", "private_key_file"):
            if getattr(self, key) is not None:
                shown.append(f"{key}={getattr(self, key)!r}")
        return f"AuthSettings({', '.join(shown)})"


def parse_auth(value: object) -> AuthSettings | None:
    """Check a server's `auth:` value: `oauth`, `{oauth: {...}}` or `{client_credentials:
    {...}}` (secrets come from `${VAR}`; a manifest never holds tokens).

    Raises:
        ConfigError: the value is of the wrong shape (`field` names where).
    """
    if value is None:
        return None
    if value == "oauth":
        return AuthSettings(grant="authorization_code")
    if not isinstance(value, Mapping) or len(value) != 1:
        raise ConfigError(
            "expected `oauth`, `{oauth: {scopes, client_id, client_secret, client_metadata_url}}` "
            "or "
            f"`{{client_credentials: {{client_id, client_secret, scopes}}}}`, got {_kind(value)}",
            field="auth",
        )
    ((kind, body),) = value.items()
    if kind not in ("oauth", "client_credentials"):
        raise ConfigError(
            f"unknown kind of auth {kind!r}; expected oauth or client_credentials",
            field=f"auth.{kind}",
        )
    where = f"auth.{kind}"
    body = {} if body is None else body
    if not isinstance(body, Mapping):
        raise ConfigError(f"expected a mapping, got {_kind(body)}", field=where)
    allowed = _OAUTH_KEYS if kind == "oauth" else _CREDENTIALS_KEYS
    for key in body:
        if key not in allowed:
            raise ConfigError(
                f"unknown key {key!r}; expected one of {', '.join(allowed)}",
                field=f"{where}.{key}",
            )
    scopes = _scopes(body.get("scopes"), f"{where}.scopes")
    strings = {key: _string(body.get(key), f"{where}.{key}") for key in allowed if key != "scopes"}
    if kind == "oauth":
        url = strings["client_metadata_url"]
        if url is not None and not _metadata_url(url):
            raise ConfigError(
                f"expected an https URL with a path (the client ID metadata document), got {url!r}",
                field=f"{where}.client_metadata_url",
            )
        if strings["client_secret"] is not None and strings["client_id"] is None:
            raise ConfigError(
                "a `client_secret` belongs to a client registered beforehand: give its "
                "`client_id` too (e.g. `client_id: ${MY_CLIENT_ID}`)",
                field=f"{where}.client_id",
            )
        return AuthSettings(
            grant="authorization_code",
            scopes=scopes,
            client_id=strings["client_id"],
            client_secret=strings["client_secret"],
            client_metadata_url=url,
        )
    if strings["client_id"] is None:
        raise ConfigError(
            "client_credentials needs `client_id` (e.g. `client_id: ${MY_CLIENT_ID}`)",
            field=f"{where}.client_id",
        )
    if (strings["client_secret"] is None) == (strings["private_key_file"] is None):
        raise ConfigError(
            "client_credentials needs one of `client_secret` (e.g. `client_secret: "
            "${MY_CLIENT_SECRET}`) or `private_key_file` (a PEM key that signs a JWT, "
            "private_key_jwt), not both",
            field=f"{where}.client_secret",
        )
    return AuthSettings(
        grant="client_credentials",
        scopes=scopes,
        client_id=strings["client_id"],
        client_secret=strings["client_secret"],
        private_key_file=strings["private_key_file"],
        issuer=strings["issuer"],
    )


def _kind(value: object) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:80]


def _scopes(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list | tuple) or not all(
        isinstance(s, str) and s and not any(c.isspace() for c in s) for s in value
    ):
        raise ConfigError(f"expected a list of scope names, got {_kind(value)}", field=where)
    return tuple(value)


def _string(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"expected a non-empty string, got {_kind(value)}", field=where)
    return value


def _metadata_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" and bool(parts.netloc) and parts.path not in ("", "/")


# -- what went wrong --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LoginProblem:
    """Why a server refused this user's login, for messages and `status`."""

    kind: Literal["missing", "expired", "insufficient_scope"]
    status: int
    """The HTTP status of the refusal (401 or 403)."""
    scope: str | None = None
    """insufficient_scope: the scopes the server asked for."""

    def message(self, server: str) -> str:
        fix = f"run `toolnexus login {server}`"
        if self.kind == "missing":
            return f"HTTP {self.status}: the MCP server '{server}' needs a login; {fix}"
        if self.kind == "expired":
            return (
                f"HTTP {self.status}: the login for the MCP server '{server}' has expired and "
                f"could not be refreshed; {fix}"
            )
        needs = f" (it asks for: {self.scope})" if self.scope else ""
        return (
            f"HTTP {self.status} insufficient_scope: the login for the MCP server '{server}' "
            f"lacks a scope this needs{needs}; {fix} to grant it"
        )


def oauth_hint(server: str, status: int, www_authenticate: str | None) -> str | None:
    """For a server without `auth:` whose 401/403 says it takes OAuth: what to add."""
    if status not in (401, 403) or not www_authenticate:
        return None
    said = www_authenticate.lower()
    if not said.startswith("bearer") or "resource_metadata" not in said:
        return None
    return (
        f"HTTP {status}: the MCP server '{server}' uses OAuth; add `auth: oauth` to its manifest "
        f"entry and run `toolnexus login {server}`"
    )


def describe_refusal(
    server: str, settings: AuthSettings, status: int, problem: LoginProblem | None
) -> str:
    """A 401/403 from a server with `auth:`, in words, with the command that fixes it."""
    if problem is not None and problem.status == status:
        return problem.message(server)
    if settings.grant == "client_credentials":
        return (
            f"HTTP {status}: the MCP server '{server}' refused the token obtained with its client "
            "credentials; check that the client has access (and the `scopes` it asks for)"
        )
    if status == 403:
        return (
            f"HTTP 403: the MCP server '{server}' refused this login (it is valid but has no "
            f"access here); log in as someone who has access with `toolnexus login {server}`"
        )
    return LoginProblem(kind="missing", status=status).message(server)


def describe_flow_error(server: str, settings: AuthSettings, exc: BaseException) -> str | None:
    """An error of the SDK's OAuth flow (metadata, registration, token endpoint) in words;
    None for any other exception."""
    from mcp.client.auth import OAuthFlowError

    if not isinstance(exc, OAuthFlowError):
        return None
    if settings.grant == "client_credentials":
        return (
            f"the authorization server of '{server}' refused its client credentials ({exc}); "
            "check `client_id` and `client_secret` (and `issuer`, if given)"
        )
    return f"OAuth for '{server}' failed ({exc}); run `toolnexus login {server}`"


# -- the login store as the SDK's TokenStorage ------------------------------------------------


class _StoredLogin:
    """The SDK's `TokenStorage` for one server, over a `LoginStore`."""

    def __init__(self, store: LoginStore, url: str) -> None:
        self.store = store
        self.url = url

    async def record(self) -> dict[str, Any]:
        return await self.store.aget(self.url) or {}

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        raw = (await self.record()).get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None

        def change(record: dict[str, Any]) -> None:
            record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
            record["expires_at"] = expires_at
            record["saved_at"] = time.time()
            record.pop("expired", None)
            wanted = record.get("wanted_scope")
            if wanted and set(wanted.split()) <= set((tokens.scope or "").split()):
                record.pop("wanted_scope")

        await self.store.aupdate(self.url, change)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        raw = (await self.record()).get("client")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        dumped = client_info.model_dump(mode="json", exclude_none=True)
        await self.store.aupdate(self.url, lambda record: record.__setitem__("client", dumped))

    async def save_metadata(self, context: Any) -> None:
        """Keep what discovery found, so a later process refreshes at the real endpoint."""
        found: dict[str, Any] = {}
        if context.oauth_metadata is not None:
            found["server_metadata"] = context.oauth_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if context.protected_resource_metadata is not None:
            found["resource_metadata"] = context.protected_resource_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if context.auth_server_url is not None:
            found["auth_server"] = context.auth_server_url
        stored = await self.record() if found else {}
        if found and any(stored.get(k) != v for k, v in found.items()):
            await self.store.aupdate(self.url, lambda record: record.update(found))

    async def mark(self, **values: Any) -> None:
        await self.store.aupdate(self.url, lambda record: record.update(values))

    async def newer(self, held: OAuthToken | None) -> dict[str, Any] | None:
        """The record, when its tokens are not those `held`: another process (a running
        toolkit, another replica, `toolnexus login`) has refreshed or logged in since they
        were read."""
        record = await self.record()
        return record if _other_tokens(record, held) else None

    async def refresh_refused(self, held: OAuthToken | None) -> dict[str, Any] | None:
        """The refresh of `held` was refused: mark the login expired, unless the store holds
        newer tokens by now (refresh tokens rotate, so another process's refresh kills the one
        this process holds); then leave them and return the record."""
        found: dict[str, Any] = {}

        def change(record: dict[str, Any]) -> None:
            found.clear()  # a shared store may run this again, on what another replica wrote
            if _other_tokens(record, held):
                found.update(record)
            else:
                record.update(expired=True, tokens=None)

        await self.store.aupdate(self.url, change)
        return found or None


def _other_tokens(record: Mapping[str, Any], held: OAuthToken | None) -> bool:
    raw = record.get("tokens")
    if not isinstance(raw, Mapping) or not raw.get("access_token"):
        return False
    if held is None:
        return True
    return (raw.get("access_token"), raw.get("refresh_token")) != (
        held.access_token,
        held.refresh_token,
    )


class _MemoryLogin:
    """`TokenStorage` in memory: client-credentials tokens are re-obtained with one request
    per process, so they are not written anywhere."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


# -- the providers ----------------------------------------------------------------------------

ProblemCallback = Callable[[LoginProblem | None], None]


@dataclass(frozen=True, kw_only=True)
class _Browser:
    """How `login` sends the user to the authorization page and gets the answer back."""

    redirect_uri: str
    send_user: Callable[[str], Awaitable[None]]
    answer: Callable[[], Awaitable[AuthorizationCodeResult]]


@functools.cache
def _user_login_class() -> type[Any]:
    """`_UserLogin`, defined on first use: its base class is in the SDK, imported lazily."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
    from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata

    class _UserLogin(OAuthClientProvider):
        """`auth: oauth`: the SDK's provider, with the stored login restored whole, and without
        a browser unless `browser` is given."""

        def __init__(
            self,
            *,
            url: str,
            settings: AuthSettings,
            storage: _StoredLogin,
            browser: _Browser | None,
            on_problem: ProblemCallback,
        ) -> None:
            from mcp.shared.auth import OAuthClientMetadata

            redirect = browser.redirect_uri if browser is not None else _PLACEHOLDER_REDIRECT
            metadata = OAuthClientMetadata(
                client_name="toolnexus",
                redirect_uris=[redirect],  # type: ignore[list-item]  # pydantic coerces
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
                scope=" ".join(settings.scopes) or None,
            )
            super().__init__(
                url,
                metadata,
                storage,
                redirect_handler=browser.send_user if browser is not None else None,
                callback_handler=browser.answer if browser is not None else None,
                client_metadata_url=settings.client_metadata_url,
            )
            self._settings = settings
            self._storage = storage
            self._browser = browser
            self._on_problem = on_problem
            self._metadata_saved = False
            # The issuer a 2025-03-26 server's own metadata names (`_origin_metadata_issuer`).
            self._legacy_issuer: str | None = None

        async def _initialize(self) -> None:
            await super()._initialize()
            record = await self._storage.record()
            context = self.context
            if self._browser is not None:
                # `toolnexus login`: a fresh authorization whatever is stored (which stays until
                # the new tokens replace it), by a client registered for this redirect.
                context.current_tokens = None
                client = context.client_info
                uris = [str(uri) for uri in (client.redirect_uris or [])] if client else []
                if self._browser.redirect_uri not in uris:
                    context.client_info = None
            if context.current_tokens is not None:
                # The SDK keeps the expiry only for tokens it obtained in this process.
                expires_at = record.get("expires_at")
                context.token_expiry_time = float(expires_at) if expires_at else None
            if context.client_info is None and self._settings.client_id is not None:
                from mcp.shared.auth import OAuthClientInformationFull

                # A confidential client authenticates with HTTP Basic, the method every
                # authorization server must support (RFC 6749 2.3.1); a public one with none.
                secret = self._settings.client_secret
                context.client_info = OAuthClientInformationFull(
                    client_id=self._settings.client_id,
                    client_secret=secret,
                    redirect_uris=context.client_metadata.redirect_uris,
                    token_endpoint_auth_method="client_secret_basic" if secret else "none",
                )
            if context.oauth_metadata is None and record.get("server_metadata"):
                context.oauth_metadata = OAuthMetadata.model_validate(record["server_metadata"])
            if context.protected_resource_metadata is None and record.get("resource_metadata"):
                context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                    record["resource_metadata"]
                )
            if context.auth_server_url is None and record.get("auth_server"):
                context.auth_server_url = record["auth_server"]
            if context.auth_server_url is None and context.oauth_metadata is not None:
                # Accepted at the login by the 2025-03-26 rule; a later discovery expects it.
                self._legacy_issuer = _same_origin_issuer(
                    self.context.server_url, str(context.oauth_metadata.issuer)
                )

        def _expected_issuer(self) -> str:
            if self.context.auth_server_url is None and self._legacy_issuer is not None:
                return self._legacy_issuer
            return super()._expected_issuer()

        async def _perform_authorization(self) -> httpx2.Request:
            # Scopes the manifest asks for, and those a refused step-up recorded, join the
            # scopes the server's challenge named.
            context = self.context
            wanted = (await self._storage.record()).get("wanted_scope")
            scope = union_scopes(context.client_metadata.scope, " ".join(self._settings.scopes))
            context.client_metadata.scope = union_scopes(scope, wanted)
            return await super()._perform_authorization()

        async def _auth_flow(
            self, request: httpx2.Request
        ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            if _token_in_hand(self):
                # The SDK's flow holds its lock until the answer's headers arrive, which
                # serializes every call on the connection; with a valid token there is nothing
                # to guard. A challenge falls through to the whole flow.
                self._add_auth_header(request)
                response = yield request
                if _challenge(response, extract_field_from_www_auth) is None:
                    return
            if self._initialized and not self.context.is_token_valid():
                # About to refresh: another process may have done it already, and spending
                # the refresh token it replaced would fail (and, with reuse detection, end
                # the login for both).
                self._adopt(await self._storage.newer(self.context.current_tokens))
            base_flow = super()._auth_flow
            flow = base_flow(request)
            refresh_failed = False
            retried = False
            adopted = False
            looked = False
            unlock: Unlock | None = None

            async def release() -> None:
                nonlocal unlock
                if unlock is not None:
                    done, unlock = unlock, None
                    await done()

            async def afresh(
                newer: Mapping[str, Any] | None = None, *, or_expire: bool = False
            ) -> httpx2.Request:
                """The SDK's flow again from the start, with the tokens `newer` found (or,
                `or_expire`, the held ones taken as expired: a refresh): its first request."""
                nonlocal flow
                await flow.aclose()
                if not self._adopt(newer) and or_expire:
                    self.context.token_expiry_time = 1.0  # long past (0: never)
                flow = base_flow(request)
                return await flow.__anext__()

            try:
                outgoing = await flow.__anext__()
                while True:
                    if _is_refresh(outgoing) and unlock is None:
                        # About to spend the refresh token: under the store's hold, and only
                        # when nobody (another replica, process or login) has refreshed since
                        # this process read the tokens; else theirs, and the request again.
                        unlock = await self._storage.store.hold_refresh(self._storage.url)
                        newer = await self._storage.newer(self.context.current_tokens)
                        if newer is not None and not looked:
                            looked = True  # once: a store that keeps changing cannot loop
                            await release()
                            outgoing = await afresh(newer)
                            continue
                    response = yield outgoing
                    if outgoing is request:
                        challenge = _challenge(response, extract_field_from_www_auth)
                        if challenge is None:
                            self._on_problem(None)
                            if not self._metadata_saved:  # once: it costs a read of the store
                                self._metadata_saved = True
                                await self._storage.save_metadata(self.context)
                        elif self._browser is None:
                            newer = None
                            if not retried:
                                newer = await self._storage.newer(self.context.current_tokens)
                            if challenge == 403 and newer is not None:
                                # A scope step-up: a login since (`toolnexus login`, in another
                                # process) may have granted the scope. Its tokens, then the
                                # request again, once.
                                retried = True
                                outgoing = await afresh(newer)
                                continue
                            if challenge == 401 and not retried and (newer or self._can_refresh()):
                                # Refused before its known expiry (revoked, clock skew, or
                                # refreshed by another process): the stored tokens, else one
                                # refresh, then the request again.
                                retried = True
                                outgoing = await afresh(newer, or_expire=True)
                                continue
                            await self._refused(response, challenge, refresh_failed)
                            return
                    elif (
                        self._legacy_issuer is None
                        and self.context.auth_server_url is None
                        and (
                            issuer := await _origin_metadata_issuer(
                                self.context.server_url, outgoing, response
                            )
                        )
                    ):
                        # A 2025-03-26 server (no protected-resource metadata) publishes its
                        # authorization server's metadata at its own origin, and that spec let
                        # the issuer have a path there; the SDK holds it to the bare origin. The
                        # flow again, expecting the issuer this origin's own document names.
                        self._legacy_issuer = issuer
                        outgoing = await afresh()
                        continue
                    elif _is_refresh(outgoing):
                        refresh_failed = response.status_code != 200
                        if refresh_failed:
                            newer = await self._storage.refresh_refused(self.context.current_tokens)
                            if newer is not None and not adopted:
                                adopted = True  # once: a file that keeps changing cannot loop
                                await release()
                                outgoing = await afresh(newer)
                                continue
                        # The SDK saves the new tokens as it takes this answer: then the
                        # others may look.
                        outgoing = await flow.asend(response)
                        await release()
                        continue
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await release()
                await flow.aclose()

        def _adopt(self, record: Mapping[str, Any] | None) -> bool:
            """Use the tokens of a record `newer` found; False when there are none."""
            if record is None:
                return False
            from mcp.shared.auth import OAuthToken

            self.context.current_tokens = OAuthToken.model_validate(record["tokens"])
            expires_at = record.get("expires_at")
            self.context.token_expiry_time = float(expires_at) if expires_at else None
            return True

        def _can_refresh(self) -> bool:
            tokens = self.context.current_tokens
            return bool(tokens and tokens.refresh_token and self.context.client_info)

        async def _refused(
            self, response: httpx2.Response, challenge: int, refresh_failed: bool
        ) -> None:
            if challenge == 403:
                scope = extract_field_from_www_auth(response, "scope")
                granted = self.context.current_tokens.scope if self.context.current_tokens else None
                await self._storage.mark(wanted_scope=union_scopes(granted, scope))
                problem = LoginProblem(kind="insufficient_scope", status=403, scope=scope)
            else:
                record = await self._storage.record()
                had = refresh_failed or record.get("expired") or record.get("tokens")
                problem = LoginProblem(kind="expired" if had else "missing", status=401)
            self._on_problem(problem)

    return _UserLogin


_LEGACY_METADATA_PATH = "/.well-known/oauth-authorization-server"


async def _origin_metadata_issuer(
    server_url: str, request: httpx2.Request, response: httpx2.Response
) -> str | None:
    """The issuer named by the authorization server metadata at the MCP server's own origin,
    when `request` fetched it there (the 2025-03-26 discovery, taken only without
    protected-resource metadata) and it names an issuer on that origin other than the bare
    origin; else None.

    Only that document, and only an issuer on the same origin: whoever serves the origin's
    metadata controls that origin's endpoints anyway, so this trusts nothing new. An issuer on
    another origin stays refused, as the SDK refuses it.
    """
    server = urlsplit(server_url)
    if (
        request.method != "GET"
        or response.status_code != 200
        or str(request.url) != f"{server.scheme}://{server.netloc}{_LEGACY_METADATA_PATH}"
    ):
        return None
    try:
        await response.aread()
        issuer = response.json().get("issuer")
    except Exception:  # noqa: BLE001 - not a metadata document: the SDK reports it
        return None
    if not isinstance(issuer, str):
        return None
    return _same_origin_issuer(server_url, issuer)


def _same_origin_issuer(server_url: str, issuer: str) -> str | None:
    """`issuer` when it is a URL with a path on `server_url`'s origin, else None."""
    server, named = urlsplit(server_url), urlsplit(issuer)
    same = (named.scheme.lower(), named.netloc.lower()) == (
        server.scheme.lower(),
        server.netloc.lower(),
    )
    if not same or named.path in ("", "/") or named.query or named.fragment:
        return None
    return issuer


def _challenge(response: httpx2.Response, field: Callable[[Any, str], str | None]) -> int | None:
    """401, or 403 for a scope step-up, when the response asks for (other) credentials."""
    if response.status_code == 401:
        return 401
    if response.status_code == 403 and field(response, "error") == "insufficient_scope":
        return 403
    return None


def _token_in_hand(provider: Any) -> bool:
    """The provider holds a token that is not known to be expired, and no flow is running."""
    return bool(
        provider._initialized
        and provider.context.is_token_valid()
        and not provider.context.lock.locked()
    )


def _is_refresh(request: httpx2.Request) -> bool:
    return request.method == "POST" and b"grant_type=refresh_token" in request.content


def make_auth(
    url: str,
    settings: AuthSettings,
    *,
    on_problem: ProblemCallback,
    store: LoginStore | None = None,
) -> httpx2.Auth:
    """The `httpx2.Auth` of a server's connection, for `create_toolkit`: it never opens a
    browser; what stops it is reported to `on_problem` (None once a request succeeds). Logins
    come from `store`: the toolkit's (`tokens.login_store_for`), else the user's file."""
    if settings.grant == "client_credentials":
        return _client_credentials(url, settings)
    storage = _StoredLogin(store or TokenStore(), url)
    cls = _user_login_class()
    return cls(url=url, settings=settings, storage=storage, browser=None, on_problem=on_problem)


def _client_credentials(url: str, settings: AuthSettings) -> httpx2.Auth:
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
    from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
    from mcp.shared.exceptions import MCPDeprecationWarning

    class _HeadlessFlow:
        """The SDK's client-credentials flow, asking for the manifest's scopes too: on a 401
        the SDK replaces them with the scopes the server's challenge names. Mixed into the
        secret's provider and the signed JWT's."""

        context: Any

        async def _auth_flow(
            self, request: httpx2.Request
        ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            if _token_in_hand(self):  # as in `_UserLogin._auth_flow`
                self._add_auth_header(request)  # type: ignore[attr-defined]
                response = yield request
                if _challenge(response, extract_field_from_www_auth) is None:
                    return
            flow = super()._auth_flow(request)  # type: ignore[misc]
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()

        async def _perform_authorization(self) -> httpx2.Request:
            metadata = self.context.client_metadata
            metadata.scope = union_scopes(metadata.scope, " ".join(settings.scopes) or None)
            return await super()._perform_authorization()  # type: ignore[misc]

    assert settings.client_id is not None
    scope = " ".join(settings.scopes) or None
    with warnings.catch_warnings():
        # Without `issuer` the SDK warns that 3.0 will require it; the README says to give it.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if settings.private_key_file is not None:
            from mcp.client.auth.extensions.client_credentials import PrivateKeyJWTOAuthProvider

            class _Signed(_HeadlessFlow, PrivateKeyJWTOAuthProvider):
                pass

            return _Signed(
                url,
                _MemoryLogin(),
                settings.client_id,
                _assertion_provider(settings),
                scope=scope,
                issuer=settings.issuer,
            )

        class _Headless(_HeadlessFlow, ClientCredentialsOAuthProvider):
            pass

        assert settings.client_secret is not None
        return _Headless(
            url,
            _MemoryLogin(),
            settings.client_id,
            settings.client_secret,
            scope=scope,
            issuer=settings.issuer,
        )


def _assertion_provider(settings: AuthSettings) -> Callable[[str], Awaitable[str]]:
    """Signs the client's assertions (RFC 7523) with its key: RS256 for an RSA key, ES256 for
    an EC P-256 one. The key is read and checked here, when the connection is made.

    Raises:
        ConfigError: the key file cannot be read or holds no usable key.
    """
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from mcp.client.auth.extensions.client_credentials import SignedJWTParameters

    assert settings.client_id is not None and settings.private_key_file is not None
    where = "auth.client_credentials.private_key_file"
    try:
        pem = Path(settings.private_key_file).expanduser().read_bytes()
        key = load_pem_private_key(pem, password=None)
    except OSError as exc:
        message = f"cannot read the private key: {exc.strerror or exc}"
        raise ConfigError(message, field=where) from exc
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"not an unencrypted PEM private key ({exc}); export it with `openssl pkey`",
            field=where,
        ) from exc
    if isinstance(key, rsa.RSAPrivateKey):
        algorithm = "RS256"
    elif isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1":
        algorithm = "ES256"
    else:
        raise ConfigError("expected an RSA or an EC P-256 private key", field=where)
    signer = SignedJWTParameters(
        issuer=settings.client_id,
        subject=settings.client_id,
        signing_key=pem.decode(),
        signing_algorithm=algorithm,
    )
    return signer.create_assertion_provider()
