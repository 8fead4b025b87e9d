"""Middleware: `async (call, next) -> Result`, composed so that the first is outermost.

`next` always returns a `Result` (tool failures and denials arrive as error results), so a
middleware only has to look at results. The named built-ins below are what a manifest's
`middleware:` list refers to; `from_config` builds one from its YAML form.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import inspect
import json
import logging
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ._suggest import did_you_mean
from .approval import Decision, Verdict
from .base import Caller, Result, Tool, ToolContext
from .errors import ConfigError, StateUnavailable
from .redaction import SECRET_KEYS, redact_arguments
from .state.codec import dump_result, load_result
from .state.memory import MemoryState
from .tracing import trace

if TYPE_CHECKING:
    from .state import StateBackend

__all__ = [
    "BUILTIN_MIDDLEWARE",
    "Call",
    "Middleware",
    "Next",
    "allow",
    "audit",
    "cache",
    "deny",
    "from_config",
    "rate_limit",
    "redact",
    "retry",
    "timeout",
    "trace",
    "truncate",
]

logger = logging.getLogger("toolnexus")


@dataclass(kw_only=True)
class Call:
    """One validated call on its way through the middleware chain."""

    tool: Tool
    arguments: dict[str, Any]
    ctx: ToolContext
    verdict: Verdict
    """The approval decision. A denied call still passes through (so `audit` records it);
    the innermost step returns the denial without running the tool."""
    attempt: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    """Scratch space for middleware to pass facts to each other."""

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def allowed(self) -> bool:
        return self.verdict.decision is Decision.ALLOW


Next = Callable[[Call], Awaitable[Result]]
Middleware = Callable[[Call, Next], Awaitable[Result]]


def timeout(seconds: float | str) -> Middleware:
    """Cancel the call after `seconds`; the model gets a retryable timeout error.

    The tool's `ctx.deadline` is tightened so that it can plan (and pass the budget on). A sync
    Python function on a worker thread cannot be cancelled: the error says that it runs on and
    that its result will be dropped, and `metadata["still_running"]` is True.
    """
    seconds = _duration(seconds)
    if seconds <= 0:
        raise ConfigError(f"timeout must be positive, got {seconds}")

    async def timeout_middleware(call: Call, nxt: Next) -> Result:
        if not call.allowed:
            return await nxt(call)
        deadline = time.monotonic() + seconds
        if call.ctx.deadline is None or deadline < call.ctx.deadline:
            call.ctx.deadline = deadline
        # A bare timer instead of `asyncio.timeout`: the same semantics on the hot path for
        # less than half the cost (every call through a manifest pays it).
        task = asyncio.current_task()
        if task is None:
            return await nxt(call)
        cancelling = task.cancelling()
        fired = False

        def expire() -> None:
            nonlocal fired
            fired = True
            task.cancel()

        handle = asyncio.get_running_loop().call_later(seconds, expire)
        try:
            return await nxt(call)
        except asyncio.CancelledError:
            if not fired or task.uncancel() > cancelling:
                raise  # cancelled from outside (the caller, or also the caller): let it go
            if call.tool.meta.get("worker_thread"):
                return Result.error(
                    f"tool {call.name!r} timed out after {_seconds(seconds)}. {STILL_RUNNING}; "
                    "try a smaller request or a narrower input",
                    error_type="ToolTimeout",
                    retryable=True,
                    still_running=True,
                    call_id=call.ctx.call_id,
                )
            return Result.error(
                f"tool {call.name!r} timed out after {_seconds(seconds)} and was stopped; "
                "try a smaller request or a narrower input",
                error_type="ToolTimeout",
                retryable=True,
                call_id=call.ctx.call_id,
            )
        finally:
            handle.cancel()

    return timeout_middleware


STILL_RUNNING = (
    "It is a synchronous Python function, which cannot be interrupted: it keeps running in its "
    "worker thread until it returns, and its result will be dropped (a function that must "
    "really be stopped needs `isolate: process`)"
)
"""What happens to a sync function's call that is given up on: threads cannot be stopped."""


def _duration(value: object, field: str = "timeout") -> float:
    """Seconds from a number or a duration string (`30s`, `500ms`), as Python callers may
    write them too.

    Raises:
        ConfigError: anything else.
    """
    from .manifest.units import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ConfigError(str(exc), field=field) from exc


def truncate(max_chars: int = 30_000) -> Middleware:
    """Keep the head and tail of long text results and say how much was cut."""
    if max_chars < 100:
        raise ConfigError(f"truncate needs at least 100 characters, got {max_chars}")

    async def truncate_middleware(call: Call, nxt: Next) -> Result:
        result = await nxt(call)
        if len(result.content) <= max_chars:
            return result
        return _truncated(result, max_chars)

    return truncate_middleware


def _truncated(result: Result, max_chars: int) -> Result:
    text = result.content
    cut = len(text) - max_chars
    head = text[: max_chars // 2]
    tail = text[len(text) - (max_chars - len(head)) :]
    marker = f"\n\n[... {cut} characters cut from the middle of {len(text)} ...]\n\n"
    return Result(
        content=head + marker + tail,
        parts=result.parts,
        structured=result.structured,
        is_error=result.is_error,
        metadata={**result.metadata, "truncated": True, "cut_chars": cut},
    )


def retry(
    attempts: int = 3, *, backoff: float = 0.5, max_backoff: float = 8.0, jitter: float = 0.1
) -> Middleware:
    """Try again after a failure, with exponential backoff.

    Only where a retry is safe: the tool is marked idempotent, or the error itself says it
    is retryable (a timeout, an HTTP 429/503...). Denials and invalid calls are never retried.
    """
    if attempts < 1:
        raise ConfigError(f"retry attempts must be at least 1, got {attempts}")

    async def retry_middleware(call: Call, nxt: Next) -> Result:
        delay = backoff
        while True:
            result = await nxt(call)
            if not result.is_error or call.attempt >= attempts or not _retryable(call, result):
                if call.attempt > 1:
                    result = result.with_metadata(attempts=call.attempt)
                return result
            await asyncio.sleep(delay * (1 + random.uniform(-jitter, jitter)))
            delay = min(delay * 2, max_backoff)
            call.attempt += 1

    return retry_middleware


def _retryable(call: Call, result: Result) -> bool:
    if not call.allowed or result.metadata.get("error_type") in ("ApprovalDenied",):
        return False
    return bool(result.metadata.get("retryable")) or call.tool.idempotent


def rate_limit(
    calls: int,
    per: float | str = 1.0,
    *,
    per_tool: bool = True,
    per_caller: bool = False,
    max_wait: float | str | None = None,
    key: Callable[[Call], str] | None = None,
) -> Middleware:
    """Allow at most `calls` calls per `per` seconds (token bucket); later calls wait their turn.

    With `per_tool`, each tool has its own bucket; otherwise one bucket covers them all. The
    buckets live in the toolkit's state store: in-process by default, in Redis with
    `state="redis://..."`, where every toolkit and replica sharing it holds the limit together
    (the reservation is one atomic script on the server). The same limit declared twice on one
    call's path counts the call once.

    Args:
        calls: calls allowed per `per` seconds, and at once after a quiet spell.
        per: seconds (or a duration: `"1m"`).
        per_tool: one bucket per tool (default) or one for all.
        per_caller: one bucket per caller of `serve` (issuer and subject of the OAuth token;
            with `per_tool`, per caller and tool). Calls without a caller (a local toolkit,
            stdio) share one bucket of their own.
        max_wait: refuse a call (a retryable error result) rather than make it wait longer than
            this; None waits as long as it takes.
        key: the bucket a call counts against (e.g. per caller); replaces `per_tool`.

    Raises:
        ConfigError: `calls` < 1, `per` <= 0, or a `key` that is not a function.
    """
    per = _duration(per, "per")
    if calls < 1 or per <= 0:
        raise ConfigError("rate_limit needs calls >= 1 and per > 0")
    if key is not None and not callable(key):
        raise ConfigError(
            f"rate_limit key must be a function of the call, got {key!r}", field="key"
        )
    wait_limit = None if max_wait is None else _duration(max_wait, "max_wait")
    interval = per / calls
    scope = f"rate:{calls}/{per:g}:"
    local = MemoryState()  # only when a call comes without a toolkit's store

    async def rate_limit_middleware(call: Call, nxt: Next) -> Result:
        if not call.allowed:
            return await nxt(call)
        if key is not None:
            bucket = scope + key(call)
        else:
            bucket = scope + (call.name if per_tool else "*")
            if per_caller:
                caller = call.ctx.caller
                bucket += "|caller:" + (caller.key if caller is not None else "-")
        taken: set[str] = call.extra.setdefault("rate_limited", set())
        if bucket in taken:  # the same limit again (a manifest's and a tool's): count once
            return await nxt(call)
        store = call.ctx.store or local
        try:
            granted, wait = await store.reserve(
                bucket, interval=interval, burst=calls, max_wait=wait_limit
            )
        except StateUnavailable as exc:
            return Result.error(
                f"rate limit state unavailable: {exc}; the call was not run, try again later",
                error_type="StateUnavailable",
                retryable=True,
                call_id=call.ctx.call_id,
            )
        if not granted:
            return Result.error(
                f"rate limit reached for {call.name!r} ({calls} calls per {_seconds(per)}); "
                f"try again in {_seconds(wait)}",
                error_type="RateLimited",
                retryable=True,
                retry_after=round(wait, 3),
                call_id=call.ctx.call_id,
            )
        taken.add(bucket)
        if wait > 0:
            await asyncio.sleep(wait)
        return await nxt(call)

    return rate_limit_middleware


def audit(
    path: str | Path | None = None,
    *,
    stream: IO[str] | None = None,
    secret_keys: str | None = None,
    max_error_chars: int = 500,
) -> Middleware:
    """Append one JSON line per call: time, tool, call id, the caller (under `serve` with
    OAuth: `caller: {subject, issuer, client_id, groups, roles}`, else null), redacted
    arguments, decision and the rule behind it, duration, and the error if any.

    Values under secret-looking keys (`secret_keys`) become `***`, and so does every value
    `${VAR}` interpolation substituted, wherever it shows up: an argument equal to a token, a
    templated URL or a server's echo inside an error message.

    Writes to `path` (created with its folder, appended to) or to `stream`; with neither, to the
    `toolnexus.audit` logger.
    """
    from .manifest.interpolate import mask_secrets

    pattern = re.compile(secret_keys, re.IGNORECASE) if secret_keys else SECRET_KEYS
    lock = threading.Lock()
    audit_logger = logging.getLogger("toolnexus.audit")
    handle: list[IO[str]] = []

    def write(line: str) -> None:
        with lock:
            if stream is not None:
                stream.write(line + "\n")
                stream.flush()
            elif path is not None:
                if not handle:
                    target = Path(path)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    handle.append(target.open("a", encoding="utf-8"))
                handle[0].write(line + "\n")
                handle[0].flush()
            else:
                audit_logger.info(line)

    async def audit_middleware(call: Call, nxt: Next) -> Result:
        started = time.monotonic()
        result = await nxt(call)
        record: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "tool": call.name,
            "call_id": call.ctx.call_id,
            "caller": _caller_record(call.ctx.caller),
            "args": _masked(redact_arguments(call.arguments, pattern)),
            "decision": call.verdict.decision.value,
            "rule": mask_secrets(call.verdict.rule) if call.verdict.rule else call.verdict.rule,
            "origin": call.verdict.origin,
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
            "is_error": result.is_error,
        }
        if result.is_error:
            record["error"] = mask_secrets(result.content)[:max_error_chars]
            record["error_type"] = result.metadata.get("error_type")
        write(json.dumps(record, ensure_ascii=False, default=str))
        return result

    return audit_middleware


def _caller_record(caller: Caller | None) -> dict[str, Any] | None:
    """Who the call was made for, as an audit record names them (None without a caller)."""
    if caller is None:
        return None
    return {
        "subject": caller.subject,
        "issuer": caller.issuer,
        "client_id": caller.client_id,
        "groups": list(caller.groups),
        "roles": list(caller.roles),
    }


def _masked(value: Any) -> Any:
    """A copy of `value` with interpolated secrets masked in every string, keys included."""
    from .manifest.interpolate import mask_secrets

    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {_masked(k): _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    if isinstance(value, int | float | bool) or value is None:
        return value
    return mask_secrets(str(value))


def redact(patterns: Sequence[str] = (), *, values: Iterable[str] = ()) -> Middleware:
    """Mask secrets in what the model reads: regex `patterns` and literal `values` (e.g. tokens
    interpolated from the environment) become `[REDACTED]` in result text."""
    compiled = [re.compile(p) for p in patterns]
    literals = sorted((v for v in values if v), key=len, reverse=True)
    if literals:
        compiled.append(re.compile("|".join(re.escape(v) for v in literals)))

    async def redact_middleware(call: Call, nxt: Next) -> Result:
        result = await nxt(call)
        text = result.content
        for rx in compiled:
            text = rx.sub("[REDACTED]", text)
        if text == result.content:
            return result
        return Result(
            content=text,
            parts=result.parts,
            structured=result.structured,
            is_error=result.is_error,
            metadata={**result.metadata, "redacted": True},
        )

    return redact_middleware


def _matches(name: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in globs)


def allow(*globs: str) -> Middleware:
    """Only tools whose name matches one of `globs` may run; others get an error result."""
    patterns = _globs(globs)

    async def allow_middleware(call: Call, nxt: Next) -> Result:
        if _matches(call.name, patterns):
            return await nxt(call)
        return Result.error(
            f"tool {call.name!r} is not enabled here (allowed: {', '.join(patterns)})",
            error_type="ApprovalDenied",
        )

    return allow_middleware


def deny(*globs: str) -> Middleware:
    """Tools whose name matches one of `globs` may not run; they get an error result."""
    patterns = _globs(globs)

    async def deny_middleware(call: Call, nxt: Next) -> Result:
        if _matches(call.name, patterns):
            return Result.error(
                f"tool {call.name!r} is disabled here; choose another tool",
                error_type="ApprovalDenied",
            )
        return await nxt(call)

    return deny_middleware


def _globs(globs: Sequence[str]) -> tuple[str, ...]:
    flat: list[str] = []
    for g in globs:
        flat.extend([g] if isinstance(g, str) else list(g))
    if not flat:
        raise ConfigError("give at least one tool-name glob")
    return tuple(flat)


def cache(ttl: float | str = 60.0, *, max_entries: int = 256) -> Middleware:
    """Serve repeated calls of read-only tools from the state store for `ttl` seconds (errors
    are not cached; tools not marked read-only always run).

    In-process by default (the `Result` objects themselves, at most `max_entries`); with
    `state="redis://..."` every toolkit and replica sharing that Redis shares the cache:
    results stored as JSON (binary parts as base64) that Redis expires after `ttl`. A result
    that is not JSON (an object in `structured` or `metadata`) is returned but not stored there.
    """
    ttl = _duration(ttl, "ttl")
    if ttl <= 0 or max_entries < 1:
        raise ConfigError("cache needs ttl > 0 and max_entries >= 1")
    entries: OrderedDict[tuple[str, str], tuple[float, Result]] = OrderedDict()

    async def cache_middleware(call: Call, nxt: Next) -> Result:
        if not call.tool.read_only or not call.allowed:
            return await nxt(call)
        try:
            text = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError):
            return await nxt(call)
        store = call.ctx.store
        if store is not None and not isinstance(store, MemoryState):
            return await _shared_cache(call, nxt, store, text, ttl)
        # In-process: the results themselves, no serialising (a hit costs a dict lookup).
        key = (call.name, text)
        now = time.monotonic()
        hit = entries.get(key)
        if hit is not None and hit[0] > now:
            entries.move_to_end(key)
            return hit[1].with_metadata(cached=True)
        result = await nxt(call)
        if not result.is_error:
            entries[key] = (now + ttl, result)
            entries.move_to_end(key)
            while len(entries) > max_entries:
                entries.popitem(last=False)
        return result

    return cache_middleware


async def _shared_cache(
    call: Call, nxt: Next, store: StateBackend, arguments: str, ttl: float
) -> Result:
    """The `cache` middleware over a store outside the process: one GET, and one SET (with
    its TTL) after a miss."""
    entry = f"cache:{call.name}:{hashlib.sha256(arguments.encode()).hexdigest()}"
    try:
        hit = await store.get(entry)
    except StateUnavailable as exc:
        return Result.error(
            f"cache state unavailable: {exc}; the call was not run, try again later",
            error_type="StateUnavailable",
            retryable=True,
            call_id=call.ctx.call_id,
        )
    if hit is not None:
        return load_result(hit).with_metadata(cached=True)
    result = await nxt(call)
    if result.is_error:
        return result
    try:
        data = dump_result(result)
    except (TypeError, ValueError):
        return result
    try:
        await store.put(entry, data, ttl=ttl)
    except StateUnavailable as exc:  # the call ran: its result still counts
        logger.warning("cache: result of %r not stored: %s", call.name, exc)
        return result.with_metadata(cache_error=str(exc))
    return result


def _seconds(value: float) -> str:
    return f"{value:g}s" if value >= 1 else f"{value * 1000:g}ms"


BUILTIN_MIDDLEWARE: dict[str, Callable[..., Middleware]] = {
    "allow": allow,
    "audit": audit,
    "cache": cache,
    "deny": deny,
    "rate_limit": rate_limit,
    "redact": redact,
    "retry": retry,
    "timeout": timeout,
    "trace": trace,
    "truncate": truncate,
}


def from_config(name: str, options: Any = None, *, base_dir: Path | None = None) -> Middleware:
    """Build a named built-in from its YAML form.

    `options` may be None (defaults), a scalar or list (the first positional argument: `{timeout:
    30}`, `{deny: [shell]}`), or a mapping of keyword arguments. A relative `audit` path resolves
    against `base_dir`.

    Raises:
        ConfigError: unknown name (with a suggestion) or options the middleware rejects.
    """
    factory = BUILTIN_MIDDLEWARE.get(name)
    if factory is None:
        hint = did_you_mean(name, BUILTIN_MIDDLEWARE)
        raise ConfigError(
            f"unknown middleware {name!r}{hint} (built-ins: {', '.join(BUILTIN_MIDDLEWARE)}; "
            "use {use: 'module:factory'} for your own)"
        )
    try:
        if options is None:
            return factory()
        if isinstance(options, Mapping):
            kwargs = dict(options)
            _check_option_names(name, factory, kwargs)
            if name == "audit" and base_dir is not None and kwargs.get("path"):
                p = Path(str(kwargs["path"])).expanduser()
                kwargs["path"] = p if p.is_absolute() else base_dir / p
            return factory(**kwargs)
        if name in ("allow", "deny"):
            values = options if isinstance(options, list | tuple) else [options]
            return factory(*values)
        if name == "audit" and base_dir is not None:
            p = Path(str(options)).expanduser()
            return factory(p if p.is_absolute() else base_dir / p)
        return factory(options)
    except TypeError as exc:
        raise ConfigError(f"bad options for middleware {name!r}: {exc}") from exc


def _check_option_names(name: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """An option the middleware does not take is an error at that key, with the closest name:
    Python's own "unexpected keyword argument" names neither the field nor the fix.

    Raises:
        ConfigError: an unknown option.
    """
    params = inspect.signature(factory).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    known = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for key in options:
        if key not in known:
            raise ConfigError(
                f"bad options for middleware {name!r}: no option {key!r}"
                f"{did_you_mean(str(key), known)} "
                f"(options: {', '.join(known)})",
                field=f"{name}.{key}",
            )
