"""The data a tool call is made of: `Tool`, `Result` and its parts, `ToolCall`, `ToolContext`,
and the `Caller` a call is made for.

These types carry no I/O. Sources (python, shell, http, mcp, builtin) produce `Tool`s, the
executor runs them, adapters turn them into provider shapes and back.
"""

from __future__ import annotations

import base64
import contextvars
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .approval import ApprovalPolicy, Approver
    from .curation import Curation
    from .mcp.callbacks import ElicitationHandler, SamplingHandler
    from .middleware import Middleware
    from .runtime.sandbox import SandboxPolicy
    from .state import StateBackend

__all__ = [
    "JSON",
    "AudioPart",
    "Caller",
    "ImagePart",
    "Part",
    "Progress",
    "ProgressCallback",
    "ResourcePart",
    "Result",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolHandler",
    "ToolSource",
    "acting_as",
    "current_caller",
    "empty_parameters",
    "to_result",
]

JSON = Any
"""A JSON value: dict, list, str, int, float, bool or None."""

ToolSource = Literal["python", "shell", "http", "mcp", "builtin"]


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who a call is made for: the identity `serve` read from the request's access token.

    Made from the token's claims (a JWT) or the introspection answer (an opaque token); claims
    the issuer did not send are empty, never guessed. A local toolkit has no caller (`None`):
    `access:` entries and `caller:` conditions are about the callers of `serve`.
    """

    subject: str | None
    """`sub`: the user (or, for a client-credentials token, often the client); unique per
    issuer."""
    issuer: str
    """`iss`: the authorization server that issued the token ("" for the static `--token`)."""
    client_id: str | None = None
    """The OAuth client the token was issued to (`client_id`, else `azp`)."""
    scopes: frozenset[str] = frozenset()
    """`scope` (space-separated) or `scp` (a list)."""
    groups: tuple[str, ...] = ()
    """The claim `groups_claim` names (default `groups`)."""
    roles: tuple[str, ...] = ()
    """The claim `roles_claim` names (default `roles`)."""
    expires_at: float | None = None
    """`exp`, seconds since the epoch."""
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    """Every claim, read-only (the JWT's payload or the introspection answer)."""

    @property
    def key(self) -> str:
        """One string per caller (issuer and subject), for rate-limit buckets and logs."""
        return f"{self.issuer}|{self.subject or ''}"


_current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "toolnexus_caller", default=None
)


def current_caller() -> Caller | None:
    """The caller whose request is being handled, or None (a local toolkit, stdio, or
    outside a request). Tool listings, `access:` entries, `caller:` rules, rate limits, audit
    records and trace spans all read it."""
    return _current_caller.get()


@contextmanager
def acting_as(caller: Caller | None) -> Iterator[None]:
    """Make `caller` the `current_caller()` inside the block (what `serve` does for each
    request; also how a test or an application serving its own protocol sets it)."""
    reset = _current_caller.set(caller)
    try:
        yield
    finally:
        _current_caller.reset(reset)


@dataclass(frozen=True, kw_only=True)
class ImagePart:
    """An image returned by a tool (providers that accept images receive it as one)."""

    data: bytes
    """The raw image bytes."""
    mime_type: str = "image/png"
    """`image/png`, `image/jpeg`, `image/gif` or `image/webp`."""
    annotations: Mapping[str, Any] | None = None
    """MCP content annotations as sent (`audience`, `priority`, `lastModified`), if any."""

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True, kw_only=True)
class AudioPart:
    """Audio returned by a tool."""

    data: bytes
    mime_type: str = "audio/wav"
    annotations: Mapping[str, Any] | None = None

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True, kw_only=True)
class ResourcePart:
    """A resource a tool points at or embeds (MCP resource links and embedded resources)."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    """The resource's text when it is embedded as text."""
    data: bytes | None = None
    """The resource's bytes when it is embedded as a blob."""
    annotations: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class TextPart:
    """Text that came after a media part, kept in its place: `Result.content` holds the text
    before the first part, and `parts` the rest in the order the tool sent it (so "the image
    above" still reads right). Also carries the annotations of a text block."""

    text: str
    annotations: Mapping[str, Any] | None = None


Part = ImagePart | AudioPart | ResourcePart | TextPart


def _empty_metadata() -> dict[str, Any]:
    return {}


@dataclass(frozen=True, kw_only=True)
class Result:
    """What a tool call produced, in a form every provider adapter understands."""

    content: str = ""
    """Text for the model. For an error, the message the model reads to recover."""
    parts: tuple[Part, ...] = ()
    """Images, audio and resources, after `content`."""
    structured: JSON = None
    """A JSON value for programs (MCP `structuredContent`); None when there is none."""
    is_error: bool = False
    """True when the call failed; `content` then explains why."""
    metadata: Mapping[str, Any] = field(default_factory=_empty_metadata)
    """For the application only, never shown to the model: error type, traceback, exit code,
    duration, the approval rule that decided, `truncated`, `unconfined`..."""

    @classmethod
    def error(cls, message: str, **metadata: Any) -> Result:
        """An error result whose `content` is `message`."""
        return cls(content=message, is_error=True, metadata=metadata)

    def with_metadata(self, **extra: Any) -> Result:
        """A copy with `extra` merged into `metadata`."""
        return Result(
            content=self.content,
            parts=self.parts,
            structured=self.structured,
            is_error=self.is_error,
            metadata={**self.metadata, **extra},
        )

    @property
    def text(self) -> str:
        """`content`, or the JSON of `structured` when there is no text."""
        if self.content or self.structured is None:
            return self.content
        return json.dumps(self.structured, ensure_ascii=False)


def to_result(value: Any) -> Result:
    """Map whatever a Python tool returned to a `Result`.

    `str` becomes the content; a `Result` is kept; `bytes` and parts become parts; a list of
    strings and parts is spread over both; None is an empty success; anything else becomes JSON
    text plus `structured`.
    """
    if isinstance(value, Result):
        return value
    if isinstance(value, str):
        return Result(content=value)
    if value is None:
        return Result()
    if isinstance(value, bool):
        return Result(content="true" if value else "false", structured=value)
    if isinstance(value, int):
        return Result(content=str(value), structured=value)
    if isinstance(value, float):
        return Result(content=json.dumps(value), structured=value)
    if isinstance(value, ImagePart | AudioPart | ResourcePart):
        return Result(parts=(value,))
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return Result(parts=(ImagePart(data=data, mime_type=_sniff_image(data)),))
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, str | ImagePart | AudioPart | ResourcePart) for v in value)
    ):
        texts = [v for v in value if isinstance(v, str)]
        parts = tuple(v for v in value if not isinstance(v, str))
        if parts:
            return Result(content="\n".join(texts), parts=parts)
    structured = _jsonable(value)
    # Compact: the C encoder is ~20x faster than the indenting one, and models read both.
    text = json.dumps(structured, ensure_ascii=False)
    return Result(content=text, structured=structured)


def _sniff_image(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def _jsonable(value: Any) -> JSON:
    """Convert dataclasses, pydantic models, enums, sets and paths to plain JSON values."""
    import dataclasses
    import enum

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _jsonable(dump(mode="json"))
    if isinstance(value, Path):
        return str(value)
    return str(value)


@dataclass(frozen=True, kw_only=True)
class Progress:
    """One progress report of a running call: from an MCP server's `notifications/progress`
    or a Python tool's `ctx.report_progress`."""

    progress: float
    """How far the call is; increases with each report, even when `total` is unknown."""
    total: float | None
    message: str | None
    call_id: str
    tool_name: str


ProgressCallback = Callable[[Progress], Awaitable[None] | None]
"""Receives a call's `Progress` reports (sync or async); see `Toolkit.aexecute(progress=...)`."""

_progress_logger = logging.getLogger("toolnexus.progress")


@dataclass(kw_only=True)
class ToolContext:
    """What a running tool may know about its call and its toolkit.

    A Python tool receives it by declaring a parameter `ctx: ToolContext`; it is never part of
    the tool's schema.
    """

    call_id: str
    """The provider's tool-call id, or one made up by the executor."""
    tool_name: str
    workspace: Path
    """Root for relative paths, file tools and sandboxes."""
    roots: tuple[Path, ...] = ()
    """Every folder file tools may touch: the workspace first, then extra roots."""
    deadline: float | None = None
    """`time.monotonic()` value after which the call is cancelled, if any."""
    approver: Approver | None = None
    state: dict[str, Any] = field(default_factory=_empty_metadata)
    """Per-toolkit state shared by every call (the todo list, read-before-write stamps...)."""
    store: StateBackend | None = None
    """The toolkit's state store (rate-limit buckets, cached results): in-process by default,
    Redis when replicas share it (`create_toolkit(state=...)`)."""
    sandbox: SandboxPolicy | None = None
    """The tool's effective sandbox policy, if any."""
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("toolnexus.tool"))
    progress: ProgressCallback | None = None
    """Where this call's progress reports go (`report_progress`, MCP progress), if anywhere."""
    elicitation: ElicitationHandler | None = None
    """Answers an MCP server's `elicitation/create` for this call (overrides the toolkit's)."""
    sampling: SamplingHandler | None = None
    """Answers an MCP server's `sampling/createMessage` for this call (overrides the toolkit's)."""
    caller: Caller | None = None
    """Who the call is made for (`current_caller()` when it started); None for a local
    toolkit."""

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the caller how far the call is. A no-op without a progress callback; a
        callback that raises is logged and never breaks the call."""
        callback = self.progress
        if callback is None:
            return
        report = Progress(
            progress=progress,
            total=total,
            message=message,
            call_id=self.call_id,
            tool_name=self.tool_name,
        )
        try:
            outcome = callback(report)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # boundary: the application's callback must not break the call
            _progress_logger.exception("progress callback failed for call %s", self.call_id)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None without one; never negative)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[Result]]
"""`async (arguments, ctx) -> Result`: what a `Tool` runs once its call is validated and allowed."""


def empty_parameters() -> dict[str, Any]:
    """The schema of a tool that takes no arguments."""
    return {"type": "object", "properties": {}, "additionalProperties": False}


def _no_middleware() -> tuple[Middleware, ...]:
    return ()


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A named, described, schema'd operation an agent can call.

    Immutable: derive variants with `dataclasses.replace` (prefixing, stricter approval...).
    The flags `read_only`, `destructive`, `idempotent` and `open_world` mean what MCP tool
    annotations mean and default to MCP's defaults; `concurrent` says the tool may run
    alongside others in `execute_many` (read-only tools always may).
    """

    name: str
    """1-64 characters of `[A-Za-z0-9_-]`: accepted by OpenAI, Anthropic and Gemini alike."""
    handler: ToolHandler = field(repr=False, compare=False)
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=empty_parameters)
    """JSON Schema (Draft 2020-12) of the arguments object."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of `Result.structured`, when the tool declares one."""
    source: ToolSource = "python"
    title: str | None = None
    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True
    concurrent: bool = False
    approval: ApprovalPolicy | None = field(default=None, compare=False)
    """Decides allow/ask/deny from the arguments; None leaves it to the toolkit's rules."""
    sandbox: SandboxPolicy | None = field(default=None, compare=False)
    """How the tool's processes are confined, for sources that start processes."""
    middleware: tuple[Middleware, ...] = field(default_factory=_no_middleware, compare=False)
    """The tool's own middleware, inside the toolkit-wide stack."""
    origin: str | None = None
    """Where the tool was declared (`tools.yaml:12`, `mcp:time`, `module:attr`), for messages."""
    meta: Mapping[str, Any] = field(default_factory=_empty_metadata, compare=False)
    """Source-specific facts (the MCP server name, the HTTP method...), for listings."""
    curation: Curation | None = field(default=None, compare=False)
    """Set by `toolnexus.curate`: `parameters` is then the curated schema, and this maps a
    call's arguments back to the upstream ones (the executor applies it before approval)."""

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> Result:
        """Run the tool directly, without validation, approval or middleware (nor curation:
        `arguments` go to the handler as given, under the upstream names).

        Use `Toolkit.aexecute` in an agent: it adds all three and never raises.
        """
        return await self.handler(arguments, ctx)

    @property
    def may_run_concurrently(self) -> bool:
        return self.read_only or self.concurrent


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A model's request to call a tool, as parsed from a provider response."""

    name: str
    arguments: str | Mapping[str, Any] | None = None
    """JSON text (what models emit) or an already-decoded mapping."""
    id: str | None = None
    """The provider's call id, echoed back in the result message."""
