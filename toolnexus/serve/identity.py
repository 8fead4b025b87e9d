"""Who is calling `serve`: OAuth 2.1 access tokens checked as a resource server does.

The MCP authorization spec makes an HTTP MCP server an OAuth 2.1 *resource server*: it never
logs anyone in, it checks the access tokens the team's authorization server issued. This module
does the checking, and nothing else:

- JWT access tokens (RFC 9068) are verified against the issuer's keys, found through its
  metadata (OpenID Connect discovery or RFC 8414) or a given `jwks_url`. The keys are cached; a
  token naming an unknown `kid` makes one refetch (the issuer rotated its keys), at most once per
  `JWKS_REFETCH_FLOOR_S`, so a stream of made-up `kid`s cannot turn this server into a flood on
  the issuer. When the key endpoint is unreachable the keys in hand keep working.
- Only asymmetric algorithms a key allows are accepted: `alg` must be one its key type can
  verify (and the key's own `alg`, when it names one). `none` and every HS* are refused before a
  key is looked at, so a token "signed" with the public key as an HMAC secret never verifies.
- `iss` must be the issuer, `aud` this server's canonical URL (RFC 8707), `exp` is required and
  `exp`/`nbf`/`iat` are checked with `CLOCK_SKEW_S` of tolerance.
- Opaque tokens go to the issuer's introspection endpoint (RFC 7662) with this server's client
  credentials; an active answer is cached until the token's `exp`.

Every refusal is a `Refusal`: what the client is told (`error`, nothing more) apart from why
(`reason`, for the server's log only), so a client learns what to do and an attacker learns
nothing about which check failed.

A token verified once is remembered until it expires (and while the key that verified it is
still the issuer's), so the signature of a token an MCP client sends with every request is
checked once, not per request.

The caller a token stands for is a `Caller`; `current_caller()` returns it while a request of
that caller is handled (the toolkit's call runs inside it).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ..base import Caller, acting_as, current_caller
from ..manifest.model import ServeAuth
from .responses import ASGIApp, send_json

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CLOCK_SKEW_S",
    "JWKS_MAX_AGE_S",
    "JWKS_REFETCH_FLOOR_S",
    "TOKEN_CALLER",
    "Caller",
    "Refusal",
    "TokenValidator",
    "current_caller",
]

CLOCK_SKEW_S = 30.0
"""Seconds of disagreement between this server's clock and the issuer's that `exp`, `nbf` and
`iat` tolerate."""
JWKS_REFETCH_FLOOR_S = 30.0
"""The least time between two fetches of the issuer's keys (or its metadata): an unknown `kid`
refetches only after it, and so does a failed fetch."""
JWKS_MAX_AGE_S = 3600.0
"""Keys older than this are refetched before use, so a key the issuer withdrew stops working
within the hour even when no unknown `kid` comes along."""
_CACHE_SIZE = 4096
"""Verified tokens remembered (least recently used dropped first)."""
_FETCH_TIMEOUT_S = 5.0

logger = logging.getLogger(__name__)

# Algorithms each kind of key verifies; symmetric keys (`oct`) verify nothing here.
_RSA_ALGS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_ALGS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
_OKP_CURVES = frozenset({"Ed25519", "Ed448"})
_ASYMMETRIC = _RSA_ALGS | frozenset(_EC_ALGS.values()) | {"EdDSA"}
_JWT_TYPES = frozenset({"jwt", "at+jwt", "application/at+jwt"})


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A token that was not accepted: what the client is told, and why (for the log only)."""

    status: Literal[401, 403, 503]
    """401 the token is not valid here; 403 it lacks a scope; 503 the issuer could not be asked
    (introspection unreachable)."""
    error: Literal["invalid_token", "insufficient_scope", "temporarily_unavailable"]
    """The RFC 6750 error code sent in `WWW-Authenticate`."""
    reason: str
    """Exactly why, for the server's operator; never sent to the client."""
    scope: str = ""
    """insufficient_scope: the scopes needed, space-separated."""


# --- keys --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Key:
    kid: str | None
    key: Any
    """A `cryptography` public key."""
    algorithms: frozenset[str]


def _algorithms(jwk: Mapping[str, Any]) -> frozenset[str]:
    """What a JWK may verify: by its key type and curve, narrowed to its own `alg` if it names
    one; nothing for symmetric keys, encryption keys and unknown types."""
    if jwk.get("use", "sig") != "sig":
        return frozenset()
    ops = jwk.get("key_ops")
    if isinstance(ops, list) and "verify" not in ops:
        return frozenset()
    kty, crv = jwk.get("kty"), jwk.get("crv")
    if kty == "RSA":
        allowed = _RSA_ALGS
    elif kty == "EC" and isinstance(crv, str) and crv in _EC_ALGS:
        allowed = frozenset({_EC_ALGS[crv]})
    elif kty == "OKP" and crv in _OKP_CURVES:
        allowed = frozenset({"EdDSA"})
    else:
        return frozenset()
    alg = jwk.get("alg")
    if alg is None:
        return allowed
    return allowed & {alg} if isinstance(alg, str) else frozenset()


def _load_keys(document: Any, source: str) -> dict[str | None, _Key]:
    """The verification keys of a JWKS document (keys that cannot verify are left out)."""
    from jwt import PyJWK
    from jwt.exceptions import PyJWKError

    raw = document.get("keys") if isinstance(document, Mapping) else None
    if not isinstance(raw, list):
        raise ValueError(f"{source} is not a JSON Web Key Set (no `keys` list)")
    keys: dict[str | None, _Key] = {}
    for jwk in raw:
        if not isinstance(jwk, Mapping):
            continue
        algorithms = _algorithms(jwk)
        if not algorithms:
            continue
        kid = jwk.get("kid")
        try:
            # The algorithm given only picks the parser for this key type.
            key = PyJWK(dict(jwk), algorithm=min(algorithms)).key
        except (PyJWKError, ValueError, TypeError) as exc:
            logger.warning("skipped a key (kid %r) of %s: %s", kid, source, exc)
            continue
        keys[kid if isinstance(kid, str) else None] = _Key(
            kid=kid if isinstance(kid, str) else None, key=key, algorithms=algorithms
        )
    return keys


# --- the validator ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Remembered:
    caller: Caller
    until: float
    """Epoch seconds after which the token must be checked again (its `exp` plus the skew)."""
    key: _Key | None
    """The key that verified a JWT (None for an introspected token)."""


class TokenValidator:
    """Checks bearer tokens for one `ServeAuth`; one per server process (it holds the caches).

    Use `await validate(token)` for each request, `await prepare()` at start (fetches the keys
    ahead, so the first caller does not wait) and `await aclose()` at the end.
    """

    def __init__(
        self,
        auth: ServeAuth,
        *,
        clock: Callable[[], float] = time.monotonic,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        """
        Args:
            auth: what to accept.
            clock: monotonic seconds for the refetch floor and key age (tests move it on).
            http: the client for the issuer's endpoints; default: one of our own, closed by
                `aclose`.
        """
        self.auth = auth
        self._clock = clock
        self._http = http
        self._own_http = http is None
        audience = auth.audience
        # A trailing slash does not make another resource (RFC 8707 canonical URIs drop it).
        self._audiences = [
            audience,
            audience.rstrip("/") if audience.endswith("/") else audience + "/",
        ]
        self._keys: dict[str | None, _Key] = {}
        self._keys_at: float | None = None
        self._last_fetch: float | None = None
        self._metadata: Mapping[str, Any] | None = None
        self._lock = asyncio.Lock()
        self._remembered: OrderedDict[str, _Remembered] = OrderedDict()

    # -- life -----------------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Fetch the issuer's metadata and keys now; a failure is logged, not raised (the issuer
        may come up after this server: the first token retries)."""
        await self._refresh("start")

    async def aclose(self) -> None:
        if self._http is not None and self._own_http:
            await self._http.aclose()
            self._http = None

    # -- checking -------------------------------------------------------------------------------

    async def validate(self, token: str) -> Caller | Refusal:
        """The caller `token` stands for, or why it is refused."""
        found = self._remembered.get(token)
        if found is not None:
            if time.time() <= found.until and (
                found.key is None or self._keys.get(found.key.kid) is found.key
            ):
                self._remembered.move_to_end(token)
                return self._scoped(found.caller)
            del self._remembered[token]
        header = _jwt_header(token)
        if header is None:
            if self.auth.client_id is None:
                return _invalid(
                    "the token is not a JWT (three base64url parts with a JSON header) and no "
                    "introspection is configured for opaque tokens"
                )
            return await self._introspect(token)
        return await self._verify_jwt(token, header)

    def _scoped(self, caller: Caller) -> Caller | Refusal:
        missing = [s for s in self.auth.required_scopes if s not in caller.scopes]
        if not missing:
            return caller
        return Refusal(
            status=403,
            error="insufficient_scope",
            reason=f"token of {_who(caller)} lacks the scope(s) {' '.join(missing)} "
            f"(it has: {' '.join(sorted(caller.scopes)) or 'none'})",
            scope=" ".join(self.auth.required_scopes),
        )

    def _remember(self, token: str, caller: Caller, key: _Key | None) -> None:
        if caller.expires_at is None:
            return
        self._remembered[token] = _Remembered(
            caller=caller, until=caller.expires_at + CLOCK_SKEW_S, key=key
        )
        if len(self._remembered) > _CACHE_SIZE:
            self._remembered.popitem(last=False)

    async def _verify_jwt(self, token: str, header: Mapping[str, Any]) -> Caller | Refusal:
        import jwt

        alg, kid, typ = header.get("alg"), header.get("kid"), header.get("typ")
        if not isinstance(alg, str) or alg not in _ASYMMETRIC:
            kind = "no signature" if alg == "none" else "a symmetric or unknown algorithm"
            return _invalid(
                f"the token's alg {alg!r} is refused ({kind}); accepted: asymmetric "
                f"algorithms the issuer's keys allow ({', '.join(sorted(_ASYMMETRIC))})"
            )
        if kid is not None and not isinstance(kid, str):
            return _invalid(f"the token's kid is not a string: {kid!r}")
        if isinstance(typ, str) and typ.lower() not in _JWT_TYPES:
            return _invalid(f"the token's typ {typ!r} is not an access token's (at+jwt or JWT)")
        key = await self._key(kid, alg)
        if key is None:
            return _invalid(
                f"no key of the issuer matches kid {kid!r} (alg {alg}); known kids: "
                f"{sorted(str(k) for k in self._keys) or 'none (the key set could not be fetched)'}"
            )
        if alg not in key.algorithms:
            return _invalid(
                f"alg {alg} is not one key {kid!r} allows ({', '.join(sorted(key.algorithms))})"
            )
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self._audiences,
                issuer=self.auth.issuer,
                leeway=CLOCK_SKEW_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            return _invalid(
                f"the token expired at {_claim_time(token, 'exp')} (skew {CLOCK_SKEW_S:g} s)"
            )
        except jwt.ImmatureSignatureError:
            return _invalid(
                f"the token is not valid yet (nbf {_claim_time(token, 'nbf')}, iat "
                f"{_claim_time(token, 'iat')}; skew {CLOCK_SKEW_S:g} s)"
            )
        except jwt.InvalidAudienceError:
            return _invalid(
                f"the token's aud {_unverified(token, 'aud')!r} does not name this server "
                f"({self.auth.audience})"
            )
        except jwt.InvalidIssuerError:
            return _invalid(
                f"the token's iss {_unverified(token, 'iss')!r} is not {self.auth.issuer!r}"
            )
        except jwt.InvalidSignatureError:
            return _invalid(f"the token's signature does not verify with key {kid!r} ({alg})")
        except jwt.MissingRequiredClaimError as exc:
            return _invalid(f"the token has no {exc.claim!r} claim")
        except jwt.InvalidTokenError as exc:  # the family's remaining members: malformed parts
            return _invalid(f"the token is malformed: {exc}")
        caller = self._caller(claims)
        self._remember(token, caller, key)
        return self._scoped(caller)

    async def _introspect(self, token: str) -> Caller | Refusal:
        import httpx

        url = self.auth.introspection_url or self._named("introspection_endpoint")
        if url is None:
            await self._refresh("looking for the introspection endpoint")
            url = self._named("introspection_endpoint")
        if url is None:
            return Refusal(
                status=503,
                error="temporarily_unavailable",
                reason="the issuer's metadata names no introspection_endpoint (and none is "
                "configured): opaque tokens cannot be checked",
            )
        assert self.auth.client_id is not None and self.auth.client_secret is not None
        try:
            response = await self._client().post(
                url,
                data={"token": token, "token_type_hint": "access_token"},
                auth=httpx.BasicAuth(self.auth.client_id, self.auth.client_secret),
                headers={"accept": "application/json"},
            )
            answer = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            return Refusal(
                status=503,
                error="temporarily_unavailable",
                reason=f"introspection at {url} failed: {type(exc).__name__}: {exc}",
            )
        if not isinstance(answer, dict):
            return Refusal(
                status=503,
                error="temporarily_unavailable",
                reason=f"introspection at {url} answered HTTP {response.status_code}, not a JSON "
                "object (are this server's client_id and client_secret right?)",
            )
        if answer.get("active") is not True:
            return _invalid(
                "introspection says the token is not active (expired, revoked or unknown)"
            )
        now = time.time()
        exp, nbf = answer.get("exp"), answer.get("nbf")
        if isinstance(exp, int | float) and exp + CLOCK_SKEW_S < now:
            return _invalid(f"introspection says the token expired at {_iso(exp)}")
        if isinstance(nbf, int | float) and nbf - CLOCK_SKEW_S > now:
            return _invalid(f"introspection says the token is not valid before {_iso(nbf)}")
        iss = answer.get("iss", self.auth.issuer)
        if iss != self.auth.issuer:
            return _invalid(
                f"introspection says the token's iss is {iss!r}, not {self.auth.issuer!r}"
            )
        aud = answer.get("aud")
        named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(a in self._audiences for a in named):
            return _invalid(
                f"introspection names audience {aud!r}, not this server ({self.auth.audience}); "
                "the token was not issued for it"
            )
        caller = self._caller({**answer, "iss": iss})
        self._remember(token, caller, None)
        return self._scoped(caller)

    def _caller(self, claims: Mapping[str, Any]) -> Caller:
        scope = claims.get("scope", claims.get("scp"))
        scopes = (
            scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else []
        )
        client = claims.get("client_id", claims.get("azp"))
        exp = claims.get("exp")
        sub = claims.get("sub")
        return Caller(
            subject=sub if isinstance(sub, str) else None,
            issuer=str(claims.get("iss")),
            client_id=client if isinstance(client, str) else None,
            scopes=frozenset(s for s in scopes if isinstance(s, str)),
            groups=_strings(claims, self.auth.groups_claim),
            roles=_strings(claims, self.auth.roles_claim),
            expires_at=float(exp) if isinstance(exp, int | float) else None,
            claims=MappingProxyType(dict(claims)),
        )

    # -- the issuer's keys and metadata ----------------------------------------------------------

    async def _key(self, kid: str | None, alg: str) -> _Key | None:
        now = self._clock()
        if self._keys_at is None or now - self._keys_at > JWKS_MAX_AGE_S:
            await self._refresh("the keys are older than an hour" if self._keys_at else "first use")
        key = self._lookup(kid, alg)
        if key is None:
            await self._refresh(f"unknown kid {kid!r}")
            key = self._lookup(kid, alg)
        return key

    def _lookup(self, kid: str | None, alg: str) -> _Key | None:
        if kid is not None:
            return self._keys.get(kid)
        # No kid: only a key set with exactly one key for this algorithm says which one.
        matches = [k for k in self._keys.values() if alg in k.algorithms]
        return matches[0] if len(matches) == 1 else None

    async def _refresh(self, why: str) -> None:
        """Refetch the keys (and the issuer's metadata, until it was fetched once), unless a
        fetch happened less than `JWKS_REFETCH_FLOOR_S` ago."""
        started = self._last_fetch
        async with self._lock:
            if self._last_fetch != started:
                return  # another request refetched while this one waited
            now = self._clock()
            if self._last_fetch is not None and now - self._last_fetch < JWKS_REFETCH_FLOOR_S:
                return
            self._last_fetch = now
            wants_metadata = self.auth.jwks_url is None or (
                self.auth.client_id is not None and self.auth.introspection_url is None
            )
            if self._metadata is None and wants_metadata:
                self._metadata = await self._fetch_metadata()
            url = self.auth.jwks_url or self._named("jwks_uri")
            if url is None:
                return
            try:
                keys = _load_keys(await self._get_json(url), url)
            except (ValueError, OSError) as exc:
                held = (
                    f"keeping the {len(self._keys)} key(s) in hand"
                    if self._keys
                    else "no keys in hand"
                )
                logger.warning(
                    "could not fetch the issuer's keys from %s (%s): %s; %s", url, why, exc, held
                )
                return
            self._keys, self._keys_at = keys, now
            logger.info(
                "fetched %d key(s) from %s (%s): kids %s",
                len(keys),
                url,
                why,
                sorted(str(k) for k in keys),
            )

    def _named(self, name: str) -> str | None:
        """An endpoint the issuer's metadata names (None before it was fetched, or if not)."""
        value = (self._metadata or {}).get(name)
        return value if isinstance(value, str) else None

    async def _fetch_metadata(self) -> Mapping[str, Any] | None:
        """The issuer's metadata: OpenID Connect discovery, then RFC 8414 (path inserted after
        the host), then the OpenID form with the path inserted; the document must name this
        issuer exactly (RFC 8414 section 3.3), else it is someone else's."""
        from urllib.parse import urlsplit

        issuer = self.auth.issuer.rstrip("/")
        parts = urlsplit(issuer)
        origin = f"{parts.scheme}://{parts.netloc}"
        candidates = [
            f"{issuer}/.well-known/openid-configuration",
            f"{origin}/.well-known/oauth-authorization-server{parts.path}",
            f"{origin}/.well-known/openid-configuration{parts.path}",
        ]
        problems: list[str] = []
        for url in dict.fromkeys(candidates):
            try:
                document = await self._get_json(url)
            except (ValueError, OSError) as exc:
                problems.append(f"{url}: {exc}")
                continue
            if not isinstance(document, Mapping):
                problems.append(f"{url}: not a JSON object")
            elif document.get("issuer") != self.auth.issuer:
                problems.append(
                    f"{url}: names issuer {document.get('issuer')!r}, not {self.auth.issuer!r}"
                )
            else:
                return document
        logger.warning(
            "could not discover the metadata of issuer %s: %s",
            self.auth.issuer,
            "; ".join(problems),
        )
        return None

    async def _get_json(self, url: str) -> Any:
        """GET a JSON document; any failure is an `OSError` or `ValueError` saying what."""
        import httpx

        try:
            response = await self._client().get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            raise OSError(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from exc

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            import httpx

            # No redirects: the issuer's endpoints are named in its metadata, exactly.
            self._http = httpx.AsyncClient(timeout=_FETCH_TIMEOUT_S, follow_redirects=False)
        return self._http


# --- small parts --------------------------------------------------------------------------------


def _invalid(reason: str) -> Refusal:
    return Refusal(status=401, error="invalid_token", reason=reason)


def _b64json(segment: str) -> Any:
    padded = segment + "=" * (-len(segment) % 4)
    try:
        return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (binascii.Error, ValueError, UnicodeError):
        return None


def _jwt_header(token: str) -> Mapping[str, Any] | None:
    """The JOSE header of a compact JWS (three dot-separated parts, a JSON object with `alg`
    first), or None for anything else (an opaque token)."""
    if token.count(".") != 2:
        return None
    header = _b64json(token.partition(".")[0])
    return header if isinstance(header, dict) and "alg" in header else None


def _unverified(token: str, claim: str) -> Any:
    """A claim of a token that failed verification, for the log line only."""
    payload = _b64json(token.split(".")[1]) if token.count(".") == 2 else None
    return payload.get(claim) if isinstance(payload, dict) else None


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _claim_time(token: str, claim: str) -> str:
    value = _unverified(token, claim)
    return _iso(value) if isinstance(value, int | float) else "absent"


def _strings(claims: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """The strings at dotted `path` (`realm_access.roles`): a list of strings, or one string."""
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def _who(caller: Caller) -> str:
    return f"subject {caller.subject!r}" + (
        f" (client {caller.client_id!r})" if caller.client_id else ""
    )


# --- the HTTP side -----------------------------------------------------------------------------

_CALLER_KEY = "toolnexus.caller"
"""Where the gate leaves the `Caller` in the ASGI scope (the MCP handlers read it from there)."""

TOKEN_CALLER = Caller(subject="token", issuer="")
"""The caller of every request a static `--token` admits: one person, known by no claim. So
`access:` entries apply to it as to anyone (a tool an entry names is hidden unless an entry
admits `subjects: [token]`), rather than a static token seeing what no OAuth caller may."""


def remember_caller(scope: MutableMapping[str, Any], caller: Caller) -> None:
    """Leave `caller` in an ASGI request's scope, for `bind_caller`."""
    scope[_CALLER_KEY] = caller


def scope_caller(scope: Any) -> Caller | None:
    """The caller `remember_caller` left in an ASGI scope (None: nobody was identified)."""
    caller = scope.get(_CALLER_KEY) if isinstance(scope, Mapping) else None
    return caller if isinstance(caller, Caller) else None


class OAuthGate:
    """ASGI middleware: every HTTP request but `exempt` paths carries a token `validator`
    accepts; the answers a refused request gets are the ones MCP clients act on (RFC 6750 and
    RFC 9728: `WWW-Authenticate: Bearer resource_metadata=...`)."""

    def __init__(
        self,
        app: ASGIApp,
        validator: TokenValidator,
        metadata_url: str,
        exempt: frozenset[str],
    ) -> None:
        self.app = app
        self.validator = validator
        self.metadata_url = metadata_url
        self.exempt = exempt
        self.scope = " ".join(validator.auth.required_scopes)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        if token is None:
            await self._challenge(send, None)
            return
        verdict = await self.validator.validate(token)
        if isinstance(verdict, Refusal):
            client = scope.get("client")
            logger.warning(
                "refused a request from %s to %s (%d %s): %s",
                f"{client[0]}:{client[1]}" if client else "an unknown address",
                scope["path"],
                verdict.status,
                verdict.error,
                verdict.reason,
            )
            await self._challenge(send, verdict)
            return
        from mcp.server.auth.middleware.auth_context import auth_context_var
        from starlette.authentication import AuthCredentials

        user = _principal(token, verdict, self.validator.auth.audience)
        # The SDK binds a session (and approval state) to the principal in `user`: a session
        # opened by one caller is unknown to every other.
        scope["user"] = user
        scope["auth"] = AuthCredentials(sorted(verdict.scopes))
        remember_caller(scope, verdict)
        reset = auth_context_var.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(reset)

    async def _challenge(
        self, send: Callable[[Any], Awaitable[None]], refusal: Refusal | None
    ) -> None:
        params = []
        if refusal is not None:
            params.append(f'error="{refusal.error}"')
            params.append(f'error_description="{_ADVICE[refusal.error]}"')
        if refusal is not None and refusal.scope:
            params.append(f'scope="{refusal.scope}"')
        elif self.scope:
            params.append(f'scope="{self.scope}"')
        params.append(f'resource_metadata="{self.metadata_url}"')
        status = 401 if refusal is None else refusal.status
        body = {
            "error": "unauthorized" if refusal is None else refusal.error,
            "error_description": _ADVICE["missing" if refusal is None else refusal.error],
        }
        headers = [(b"www-authenticate", ("Bearer " + ", ".join(params)).encode())]
        if status == 503:
            headers.append((b"retry-after", b"5"))
        await send_json(send, status, body, headers=headers)


_ADVICE = {
    "missing": "this server takes OAuth access tokens: send Authorization: Bearer <token>, "
    "obtained from the authorization server named in the resource metadata",
    "invalid_token": "the access token was not accepted; obtain a new one from the "
    "authorization server named in the resource metadata",
    "insufficient_scope": "the access token lacks a scope this server needs; obtain one with "
    "the scopes named in `scope`",
    "temporarily_unavailable": "the token could not be checked right now; retry shortly",
}


def _bearer(scope: Mapping[str, Any]) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, credentials = value.partition(b" ")
            # The scheme is case-insensitive (RFC 9110).
            if scheme.lower() != b"bearer" or not credentials.strip():
                return None
            try:
                return credentials.strip().decode("ascii")
            except UnicodeDecodeError:
                return None
    return None


def _principal(token: str, caller: Caller, audience: str) -> Any:
    """The SDK's `AuthenticatedUser` for `caller`: what its transports bind sessions to."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(
        AccessToken(
            token=token,
            client_id=caller.client_id or "",
            scopes=sorted(caller.scopes),
            expires_at=int(caller.expires_at) if caller.expires_at is not None else None,
            resource=audience,
            subject=caller.subject,
            claims={"iss": caller.issuer},
        )
    )


async def bind_caller(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: `current_caller()` is the caller of the HTTP request that carried
    this message while it is handled (tool calls included)."""
    caller = scope_caller(getattr(getattr(ctx, "request", None), "scope", None))
    with acting_as(caller):
        return await call_next(ctx)
