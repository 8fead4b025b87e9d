"""OpenTelemetry for tool calls: the `trace` middleware and trace-context propagation.

`trace()` opens one span per call as the OpenTelemetry GenAI semantic conventions describe tool
execution (`execute_tool {name}`, kind INTERNAL, `gen_ai.*` attributes, `error.type`), plus
`toolnexus.*` attributes for what only we know: the approval decision and the rule (with the
file:line it was written at), the tool's source and the sandbox that confined it. Under `serve`
with OAuth, the caller too: `enduser.id` (the token's subject, as the OpenTelemetry
conventions name the end user), `toolnexus.caller.subject`, `toolnexus.caller.groups`,
`toolnexus.caller.client_id`.

Trace context crosses processes so one trace spans agent -> toolkit -> tool server:
- MCP: the mcp SDK's own client injects W3C `traceparent`/`tracestate` into every request's
  `_meta`, and its server opens a span from the incoming `_meta`; `serve` runs calls inside that
  span, so both directions need nothing from us beyond keeping the caller's context current.
- HTTP tools: `inject_headers` adds the headers (httpx is not instrumented by default).
- The toolkit's private loop thread: `carry_context` takes the caller's context along, which a
  thread hand-off would otherwise drop.
All of it goes through `opentelemetry.propagate`, so an application's configured propagator (B3,
baggage...) is used.

Cost: nothing here imports opentelemetry when toolnexus is imported. The middleware imports it
when it is built; the propagation helpers look at `sys.modules` first and do nothing while
opentelemetry is not loaded, and with no tracer provider configured the middleware only checks
that and calls on (well under a microsecond).
"""

from __future__ import annotations

import contextvars
import json
import re
import sys
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigError
from .redaction import SECRET_KEYS

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .base import Result
    from .middleware import Call, Middleware, Next

__all__ = ["TRACER_NAME", "carry_context", "inject_headers", "trace"]

T = TypeVar("T")

TRACER_NAME = "toolnexus"
"""The instrumentation scope of our spans."""

_UNKNOWN = object()
"""Stands for opentelemetry's provider global, should a future release rename it."""

_INSTALL_HINT = "install the otel extra: pip install 'toolnexus[otel]'"


def trace(
    enabled: bool = True,
    *,
    record_arguments: bool = False,
    record_results: bool = False,
    max_chars: int = 4096,
    tracer_provider: TracerProvider | None = None,
) -> Middleware:
    """One OpenTelemetry span per call, following the GenAI conventions for tool execution.

    Spans go to `tracer_provider`, or else to the globally configured one; with neither set
    (no SDK configured) the middleware does nothing but check that.

    Args:
        enabled: False gives a middleware that only calls on (`trace: false` in YAML).
        record_arguments: record the arguments as `gen_ai.tool.call.arguments` (JSON). Off by
            default: arguments can hold secrets. Values under secret-looking keys become `***`,
            and so does every value `${VAR}` interpolation substituted, wherever it appears.
        record_results: record the result text the model reads as `gen_ai.tool.call.result`,
            masked the same way. Off by default for the same reason.
        max_chars: longest recorded arguments, result or error text; longer ones are cut.
        tracer_provider: where the spans go instead of the global provider (Python only).

    Raises:
        ConfigError: opentelemetry-api is not installed, or `max_chars` is below 1.
    """
    if max_chars < 1:
        raise ConfigError(f"trace max_chars must be at least 1, got {max_chars}")
    if not enabled:
        return _passthrough
    try:
        from opentelemetry import context as otel_context
        from opentelemetry import trace as otel_trace
    except ImportError as exc:
        raise ConfigError(f"the trace middleware needs opentelemetry-api: {_INSTALL_HINT}") from exc

    from .manifest.interpolate import mask_secrets

    fixed = tracer_provider.get_tracer(TRACER_NAME, _version()) if tracer_provider else None
    resolved: list[otel_trace.Tracer | None] = [fixed]
    internal = otel_trace.SpanKind.INTERNAL
    error_status = otel_trace.StatusCode.ERROR
    attach, detach = otel_context.attach, otel_context.detach
    in_context = otel_trace.set_span_in_context

    def global_tracer() -> otel_trace.Tracer | None:
        # The global provider is set once per process and never replaced, so one real
        # provider seen is kept for good. Until then `get_tracer_provider` costs about 1 µs
        # (it reads os.environ each time): the module global it returns is read first.
        if getattr(otel_trace, "_TRACER_PROVIDER", _UNKNOWN) is None:
            return None  # no SDK configured: the whole cost of this middleware
        provider = otel_trace.get_tracer_provider()
        if isinstance(provider, otel_trace.ProxyTracerProvider | otel_trace.NoOpTracerProvider):
            return None
        resolved[0] = provider.get_tracer(TRACER_NAME, _version())
        return resolved[0]

    def trace_middleware(call: Call, nxt: Next) -> Awaitable[Result]:
        # A plain function: with no tracer it hands back `next`'s awaitable untouched, so the
        # chain gains no coroutine of its own.
        tracer = resolved[0] or global_tracer()
        if tracer is None:
            return nxt(call)
        return traced(tracer, call, nxt)

    async def traced(tracer: otel_trace.Tracer, call: Call, nxt: Next) -> Result:
        # Everything known before the call goes in at the start: the SDK takes a start
        # span's attributes in one pass, each later `set_attribute` costs a lock and a check.
        attributes = _start_attributes(call, mask_secrets)
        if record_arguments:
            attributes["gen_ai.tool.call.arguments"] = _arguments_text(
                call, mask_secrets, max_chars
            )
        span = tracer.start_span(f"execute_tool {call.name}", kind=internal, attributes=attributes)
        token = attach(in_context(span))
        try:
            result = await nxt(call)
        except BaseException as exc:  # cancellation (the only thing `next` raises): mark, re-raise
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(error_status, "the call was cancelled")
            raise
        else:
            if (result.is_error or record_results or result.metadata) and span.is_recording():
                mask = _masker(call, mask_secrets) if result.is_error or record_results else None
                ended = _end_attributes(
                    result,
                    attributes.get("toolnexus.sandbox.mechanism"),
                    mask or mask_secrets,
                    record_results=record_results,
                    max_chars=max_chars,
                )
                if ended:
                    span.set_attributes(ended)
                if result.is_error:
                    span.set_status(
                        error_status, (mask or mask_secrets)(result.content)[:max_chars]
                    )
            return result
        finally:
            detach(token)
            span.end()

    return trace_middleware


def _passthrough(call: Call, nxt: Next) -> Awaitable[Result]:
    return nxt(call)


def _start_attributes(call: Call, mask_secrets: Callable[[str], str]) -> dict[str, Any]:
    """What is known before the call runs: the conventions' attributes and the decision."""
    tool, verdict = call.tool, call.verdict
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool.name,
        "gen_ai.tool.call.id": call.ctx.call_id,
        # The conventions' "function": the model writes the arguments, the application runs
        # the tool. That holds for every source here (HTTP and MCP tools too: the toolkit, not
        # the model's provider, makes the request); `toolnexus.tool.source` tells them apart.
        "gen_ai.tool.type": "function",
        "toolnexus.tool.source": tool.source,
        "toolnexus.approval.decision": verdict.decision.value,
    }
    if tool.description:
        attributes["gen_ai.tool.description"] = mask_secrets(tool.description)
    if verdict.rule:
        attributes["toolnexus.approval.rule"] = mask_secrets(verdict.rule)
    if verdict.origin:
        attributes["toolnexus.approval.origin"] = verdict.origin
    caller = call.ctx.caller
    if caller is not None:
        if caller.subject is not None:
            attributes["enduser.id"] = caller.subject
            attributes["toolnexus.caller.subject"] = caller.subject
        if caller.groups:
            attributes["toolnexus.caller.groups"] = list(caller.groups)
        if caller.client_id:
            attributes["toolnexus.caller.client_id"] = caller.client_id
    if call.allowed and tool.source != "mcp" and (tool.sandbox is None or tool.source == "http"):
        # Runs in the toolkit's own process (an HTTP tool's host list is checked there too):
        # known now. An MCP tool's server is confined per server, not per call (see its
        # `status.sandbox`); a process-running tool's result says which sandbox ran it.
        attributes["toolnexus.sandbox.mechanism"] = "none"
    return attributes


def _end_attributes(
    result: Result,
    mechanism: str | None,
    mask_secrets: Callable[[str], str],
    *,
    record_results: bool,
    max_chars: int,
) -> dict[str, Any]:
    """What the result tells and the start did not: the error type, the sandbox that ran it
    (when it is not the `mechanism` already recorded), the result if asked."""
    attributes: dict[str, Any] = {}
    meta = result.metadata
    ran_in = meta.get("mechanism")  # process-running tools say which sandbox ran them
    if ran_in is not None and str(ran_in) != mechanism:
        attributes["toolnexus.sandbox.mechanism"] = str(ran_in)
    if meta.get("unconfined"):
        attributes["toolnexus.sandbox.unconfined"] = True
    if result.is_error:
        attributes["error.type"] = str(meta.get("error_type") or "_OTHER")
    if record_results:
        attributes["gen_ai.tool.call.result"] = mask_secrets(result.content)[:max_chars]
    return attributes


def _masker(call: Call, mask_secrets: Callable[[str], str]) -> Callable[[str], str]:
    """`mask_secrets`, also masking the string values under the call's secret-looking argument
    keys: a tool's error often echoes its arguments, and the error text is always recorded."""
    secret_keys = SECRET_KEYS
    found: set[str] = set()

    def collect(value: Any, secret: bool) -> None:
        if isinstance(value, str):
            if secret and len(value) >= _MIN_SECRET:
                found.add(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                collect(item, secret or (isinstance(key, str) and bool(secret_keys.search(key))))
        elif isinstance(value, list | tuple):
            for item in value:
                collect(item, secret)

    collect(call.arguments, False)
    if not found:
        return mask_secrets
    values = sorted(found, key=len, reverse=True)

    def mask(text: str) -> str:
        for value in values:
            text = text.replace(value, "***")
        return mask_secrets(text)

    return mask


_MIN_SECRET = 4
"""Shorter secret-keyed values are not masked in free text: "abc" would mask every word
holding it, and a value that short protects nothing."""


def _arguments_text(call: Call, mask_secrets: Callable[[str], str], max_chars: int) -> str:
    """The arguments as JSON, as the audit log writes them (`_masked(redact_arguments(...))`:
    secret-keyed values `***`, `${VAR}` values masked), in one pass: this runs on every call."""
    cleaned = _cleaned(call.arguments, mask_secrets, SECRET_KEYS)
    return json.dumps(cleaned, ensure_ascii=False, default=str)[:max_chars]


def _cleaned(value: Any, mask: Callable[[str], str], secret: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return mask(value)
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict | Mapping):
        return {
            _cleaned(key, mask, secret): "***"
            if isinstance(key, str) and secret.search(key)
            else _cleaned(item, mask, secret)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_cleaned(item, mask, secret) for item in value]
    return mask(str(value))


_SCALARS = (bool, int, float)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolnexus")
    except PackageNotFoundError:
        return "0"


# -- propagation ------------------------------------------------------------------------------


def inject_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`headers` plus the current trace context's (W3C `traceparent`...), for an HTTP tool.

    Headers the manifest already sets win. Returns `headers` itself when opentelemetry is not
    loaded or there is no context to send.
    """
    if "opentelemetry.propagate" not in sys.modules:
        return headers
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    if not carrier:
        return headers
    taken = {name.lower() for name, _ in headers}
    return headers + [(k, v) for k, v in carrier.items() if k.lower() not in taken]


def carry_context(coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """`coro`, made to run in the caller's OpenTelemetry context wherever it is scheduled.

    For the sync API's hand-off to the toolkit's loop thread: a task there starts from that
    thread's context, so a call's span would lose the agent's span as its parent (an async
    caller's `run_coroutine_threadsafe` keeps it without help). Returns `coro` itself when
    opentelemetry is not loaded or no trace context is current.
    """
    if "opentelemetry.context" not in sys.modules:
        return coro
    from opentelemetry import context

    current = context.get_current()
    if not current:
        return coro
    return _Carried(coro, current)


class _Carried(Coroutine[Any, Any, T]):
    """`coro` stepped in its own copy of the running task's context, with a trace context
    attached to it before the first step.

    A class rather than an `async def` wrapper so that closing it closes `coro` even when it
    never started (a refused hand-off closes what it was given: no "never awaited" warning).
    """

    __slots__ = ("_context", "_coro", "_trace")

    def __init__(self, coro: Coroutine[Any, Any, T], trace_context: Any) -> None:
        self._coro = coro
        self._trace = trace_context
        self._context: contextvars.Context | None = None

    def _step(self, method: Callable[..., Any], *args: Any) -> Any:
        if self._context is None:
            from opentelemetry import context

            self._context = contextvars.copy_context()
            self._context.run(context.attach, self._trace)
        return self._context.run(method, *args)

    def send(self, value: Any) -> Any:
        return self._step(self._coro.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = typ if val is None else val
        if tb is not None:
            exc = exc.with_traceback(tb)
        return self._step(self._coro.throw, exc)

    def close(self) -> None:
        if self._context is None:
            self._coro.close()
        else:
            self._context.run(self._coro.close)

    def __await__(self) -> Generator[Any, None, T]:
        return self  # type: ignore[return-value]  # an iterator with send/throw, as `await` wants

    def __iter__(self) -> _Carried[T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)
