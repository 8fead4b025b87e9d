"""Approvals over MCP that hold for exactly what the client's user was shown, once, for a while.

A 2026-07-28 client answers an approval question by retrying the call with the answer and the
`requestState` the server gave it; the client is not trusted with anything. The state is a
ticket the server signs (HMAC-SHA256 under a server secret) over the whole call: the server's
name, the tool, the canonical JSON of every argument and the caller (the bearer credential the
request carried). It expires (`ttl`), and it is single-use: each ticket's nonce is claimed in a
`UsedApprovals` record the first time it is redeemed. A ticket for another call, another server,
another caller, a replayed or an expired one, or one the server did not sign, approves nothing.

The question itself shows the arguments whole (`show_arguments`): every character, with the
characters that print as nothing (controls, bidirectional overrides, zero-width and line
separators) written as JSON escapes, so nothing can hide or reorder what the user reads. A call
whose arguments are too long to show (`SHOWN_MAX`) is refused without asking.

The secret comes from `TOOLNEXUS_APPROVAL_SECRET` (at least 32 bytes), shared by every worker
and replica; without it each server makes its own, and a ticket works only on the worker that
issued it. `toolnexus serve --workers N` makes one for its workers when none is set. The used
record is kept where the toolkit keeps its state (`StoreUsedApprovals`): in process by default,
and with a Redis store (`serve --state`) in Redis, claimed there with one atomic `SET NX`, so a
ticket redeemed on one worker or replica is refused as used on every other. A store that does
not answer refuses the call: a ticket whose single use cannot be recorded approves nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..errors import ApprovalDenied, ConfigError, StateUnavailable

if TYPE_CHECKING:
    from ..state import StateBackend

__all__ = [
    "APPROVAL_SECRET_ENV",
    "SHOWN_MAX",
    "Approvals",
    "InProcessUsedApprovals",
    "StoreUsedApprovals",
    "UsedApprovals",
    "approval_secret",
    "call_digest",
    "show_arguments",
]

APPROVAL_SECRET_ENV: Final = "TOOLNEXUS_APPROVAL_SECRET"
"""The environment variable holding the secret every worker signs approvals with."""
SHOWN_MAX: Final = 20_000
"""Characters of arguments an approval question shows whole; a longer call is refused unasked
(nobody reviews more, and client interfaces cut long messages where we cannot see)."""

_MIN_SECRET: Final = 32
_PREFIX: Final = "ta1."
"""Format and version of a ticket, signed with it (a ticket of another format never verifies)."""
_KEY_LABEL: Final = b"toolnexus/serve/approval/v1"


def _now() -> float:
    """The server's clock (a seam for tests: no test waits for a ticket to expire)."""
    return time.time()


# --- what the user is shown -------------------------------------------------------------------


def show_arguments(arguments: Any) -> str:
    """The arguments as the approval question shows them: all of them.

    JSON with sorted keys, every character kept; those that are not printable (categories Cc,
    Cf, Cs, Co, Cn, Zl, Zp and the spaces other than U+0020) become `\\uXXXX` escapes. An
    allow-list: a character is shown as itself only when it prints as itself. The caller
    refuses a call whose text is longer than `SHOWN_MAX` instead of asking about it.

    Raises:
        TypeError, ValueError: the arguments are not plain JSON (only possible in process).
    """
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, allow_nan=False)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: a JSON surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


# --- what an approval is bound to -------------------------------------------------------------


def call_digest(server: str, tool: str, arguments: Any, caller: str) -> str:
    """The SHA-256 of the whole call: server name, tool, canonical JSON of every argument
    (sorted keys, no whitespace, ASCII escapes so any string encodes), and the caller."""
    canonical = json.dumps(
        [server, tool, arguments, caller],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


# --- single use -------------------------------------------------------------------------------


class UsedApprovals(Protocol):
    """Where redeemed tickets are recorded, so that each approves one call.

    In process by default; a store shared by replicas (Redis) implements the same one call.
    """

    async def claim(self, nonce: str, expires_at: float) -> bool:
        """Record `nonce` as used; True the first time, False ever after (until `expires_at`,
        after which the ticket is refused as expired anyway and the record may go)."""
        ...


@dataclass(kw_only=True)
class InProcessUsedApprovals:
    """`UsedApprovals` in this process's memory. Expired records are dropped whenever the
    record has doubled since the last sweep, so claims stay cheap however many are live."""

    _used: dict[str, float] = field(default_factory=dict)
    _sweep_at: int = 64

    async def claim(self, nonce: str, expires_at: float) -> bool:
        if len(self._used) >= self._sweep_at:
            now = _now()
            self._used = {n: t for n, t in self._used.items() if t > now}
            self._sweep_at = max(64, 2 * len(self._used))
        if nonce in self._used:
            return False
        self._used[nonce] = expires_at
        return True


_CLOCK_SKEW: Final = 60.0
"""Seconds a shared record outlives its ticket: replicas' clocks differ a little, and one whose
clock is behind must still find the record while it thinks the ticket valid."""


@dataclass(kw_only=True)
class StoreUsedApprovals:
    """`UsedApprovals` on a state store (`toolkit.store`): with Redis, one record for every
    worker and replica, each nonce claimed by one atomic `SET NX` with an expiry."""

    store: StateBackend
    prefix: str = "approval:"

    async def claim(self, nonce: str, expires_at: float) -> bool:
        """As `UsedApprovals.claim`.

        Raises:
            StateUnavailable: the store did not answer.
        """
        ttl = max(expires_at - _now(), 0.0) + _CLOCK_SKEW
        return await self.store.claim(self.prefix + nonce, ttl=ttl)


# --- tickets ----------------------------------------------------------------------------------


def approval_secret(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The shared secret from `TOOLNEXUS_APPROVAL_SECRET`, or None when it is not set.

    Raises:
        ConfigError: it is set but shorter than 32 bytes.
    """
    text = (os.environ if environ is None else environ).get(APPROVAL_SECRET_ENV)
    if not text:
        return None
    secret = text.encode()
    if len(secret) < _MIN_SECRET:
        raise ConfigError(
            f"is {len(secret)} bytes long; it must hold at least {_MIN_SECRET} bytes of "
            "randomness: make one with "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"',
            field=APPROVAL_SECRET_ENV,
        )
    return secret


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(raw) != text:
        raise ValueError("not canonical base64url")
    return raw


class Approvals:
    """Issues and redeems the signed tickets of one server."""

    def __init__(
        self, *, secret: bytes | None, ttl: float, used: UsedApprovals | None = None
    ) -> None:
        """
        Args:
            secret: shared by the workers that must accept each other's tickets; None makes
                one for this server alone.
            ttl: seconds a ticket (the question) stays valid.
            used: the record of redeemed tickets; in process when None.
        """
        if not (math.isfinite(ttl) and ttl > 0):
            raise ConfigError(
                f"must be a positive number of seconds, got {ttl!r}", field="approval_timeout"
            )
        self.shared = secret is not None
        self.ttl = ttl
        self._key = hmac.new(secret or secrets.token_bytes(32), _KEY_LABEL, "sha256").digest()
        self._used = used if used is not None else InProcessUsedApprovals()

    def issue(self, call: str) -> str:
        """A ticket approving the call whose `call_digest` is `call`, once, for `ttl` seconds."""
        claims = {"call": call, "exp": _now() + self.ttl, "n": secrets.token_urlsafe(16)}
        body = _PREFIX + _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._sign(body))}"

    async def redeem(self, ticket: object, call: str) -> None:
        """Accept `ticket` for the call `call`, using it up.

        Raises:
            ApprovalDenied: the ticket is not this server's, is for another call, has expired
                or was used already (the message says which, for the model and the user).
        """
        claims = self._verified(ticket)
        if claims is None:
            raise ApprovalDenied(
                "the approval sent with this call was not issued by this server (or not under "
                "its current secret), so the call was not run; call the tool again to be asked"
            )
        if not hmac.compare_digest(str(claims.get("call")), call):
            raise ApprovalDenied(
                "the approval sent with this call was given for another call (other arguments, "
                "another tool, server or caller), so this one was not run; call the tool again "
                "to have the user asked about this call"
            )
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or not _now() < expires:
            raise ApprovalDenied(
                f"the approval expired: an approval question holds for {self.ttl:g} s, so the "
                "call was not run; call the tool again to have the user asked again"
            )
        try:
            fresh = await self._used.claim(str(claims.get("n")), float(expires))
        except StateUnavailable as exc:
            raise ApprovalDenied(
                f"this approval could not be checked for single use ({exc}), so the "
                "call was not run; call the tool again once the state store answers"
            ) from exc
        if not fresh:
            raise ApprovalDenied(
                "this approval was already used for a call: each approval runs one call, so "
                "this one was not run; call the tool again to have the user asked again"
            )

    def _sign(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode(), "sha256").digest()

    def _verified(self, ticket: object) -> dict[str, Any] | None:
        """The claims of a ticket this server signed, or None."""
        if not isinstance(ticket, str) or not ticket.startswith(_PREFIX):
            return None
        body, _, signature = ticket.rpartition(".")
        try:
            if not hmac.compare_digest(_unb64(signature), self._sign(body)):
                return None
            claims = json.loads(_unb64(body[len(_PREFIX) :]))
        except ValueError:
            return None
        return claims if isinstance(claims, dict) else None
