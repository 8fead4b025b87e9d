"""MCP SDK objects turned into toolnexus ones: tool listings into `Tool`s (after `check_tool`
has set aside the malformed ones), call results into bounded `Result`s, and SDK/transport
exceptions into `ToolError`s (the one place they are translated).

Loaded only with `sources/mcp.py`; the SDK itself is imported inside the functions that need
it, so this module stays cheap to import.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..base import AudioPart, ImagePart, Part, ResourcePart, Result, TextPart, Tool, ToolHandler
from ..errors import ConfigError, ToolError, ToolTimeout
from ..sources._template import head_tail
from .stdio import MESSAGE_TOO_LARGE

if TYPE_CHECKING:
    import mcp_types

__all__ = [
    "HttpStatus",
    "build_tools",
    "check_tool",
    "describe_http_status",
    "leaf_exception",
    "listing_surface",
    "session_lost",
    "to_result",
    "translate_error",
]

_TOOL_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
"""A name we can call: MCP asks for `[A-Za-z0-9._-]`, but a server that uses spaces or `/`
keeps its tool (our name for it is sanitized; calls use the server's own); control characters
or an absurd length mean a broken listing."""
_SDK_HTTP_STAND_INS = ("Server returned an error response", "Not Found")
"""What the SDK says in place of an HTTP error status (which it drops)."""

HttpStatus = tuple[int, str, str]
"""An HTTP error answer seen on a server's connection: status code, reason phrase, URL."""


def check_tool(raw: object, surface: Callable[[Any], None] | None) -> str | None:
    """Why one entry of a `tools/list` answer cannot become a tool, or None when it can.

    Checked on the raw JSON, before the SDK parses the listing (which would fail whole for one
    bad entry): a name we can call (`_TOOL_NAME`), an `inputSchema` that is a valid JSON
    Schema for an object, a valid `outputSchema` if any, and the entry as MCP defines it
    (`surface`, from `listing_surface`, checks it as the negotiated protocol version does).
    """
    if not isinstance(raw, Mapping):
        return f"the entry is not an object but {type(raw).__name__}"
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return "it has no name"
    if not _TOOL_NAME.fullmatch(name):
        return f"its name {name[:80]!r} is longer than 128 characters or holds control characters"
    for key, needed in (("inputSchema", True), ("outputSchema", False)):
        if key not in raw and not needed:
            continue
        problem = _schema_problem(raw.get(key), key)
        if problem is not None:
            return problem
    return _model_problem(raw, surface)


def _schema_problem(schema: object, key: str) -> str | None:
    from ..schema import check_schema

    if schema is None:
        return f"it has no {key}"
    if not isinstance(schema, Mapping):
        return f"its {key} is not a JSON object but {type(schema).__name__}"
    declared = schema.get("type", "object")
    if declared != "object":
        return f"its {key} describes {declared!r}, not an object of arguments"
    try:
        check_schema(dict(schema), field=key)
    except ConfigError as exc:
        return f"its {key} is {exc.message}"
    return None


def listing_surface(result: Mapping[str, Any], version: str | None) -> Callable[[Any], None] | None:
    """A check of one tool as the SDK will check this `tools/list` answer (its protocol
    `version`'s schema, with the answer's other fields), or None when that check cannot be
    made per tool: an unknown version, or an answer whose other fields are wrong already (the
    SDK then refuses the listing whole, rightly)."""
    import pydantic
    from mcp_types import methods

    if version is None:
        return None
    envelope = {k: v for k, v in result.items() if k != "tools"}

    def check(tool: Any) -> None:
        methods.validate_server_result("tools/list", version, {**envelope, "tools": [tool]})

    try:
        methods.validate_server_result("tools/list", version, {**envelope, "tools": []})
    except (KeyError, ValueError, pydantic.ValidationError):
        return None
    return check


def _model_problem(raw: Mapping[str, Any], surface: Callable[[Any], None] | None) -> str | None:
    import mcp_types
    import pydantic

    try:
        if surface is not None:
            surface(dict(raw))
        mcp_types.Tool.model_validate(dict(raw), by_name=False)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if p not in ("tools", 0))
        return f"it does not follow the MCP schema: {where or 'entry'}: {first['msg']}"
    return None


def build_tools(
    listing: Sequence[mcp_types.Tool],
    *,
    server: str,
    prefix: str,
    include: Sequence[str],
    exclude: Sequence[str],
    handler_for: Callable[[str], ToolHandler],
) -> list[Tool]:
    """The server's tools that pass the filters, prefixed, sanitized and flagged.

    `include`/`exclude` are globs over the server's own names (before the prefix): a tool is
    kept when it matches some include glob (or there are none) and no exclude glob. Names that
    collide after sanitizing get `_2`, `_3`... in listing order, so every tool stays callable.
    """
    from ..schema import sanitize_name

    tools: list[Tool] = []
    taken: set[str] = set()
    for mcp_tool in listing:
        original = mcp_tool.name
        if include and not _matches(original, include):
            continue
        if exclude and _matches(original, exclude):
            continue
        name = _unique(sanitize_name(prefix + original), taken)
        taken.add(name)
        tools.append(_to_tool(mcp_tool, name=name, server=server, handler=handler_for(original)))
    return tools


def _matches(name: str, globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    n = 2
    while True:
        suffix = f"_{n}"
        candidate = name[: 64 - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


def _to_tool(mcp_tool: mcp_types.Tool, *, name: str, server: str, handler: ToolHandler) -> Tool:
    hints = mcp_tool.annotations
    # MCP's defaults for absent hints: not read-only, destructive, not idempotent, open world.
    # A read-only tool cannot be destructive (MCP: destructiveHint only means something when
    # readOnlyHint is false).
    read_only = bool(hints and hints.read_only_hint)
    destructive = not read_only and (
        hints is None or hints.destructive_hint is None or hints.destructive_hint
    )
    idempotent = bool(hints and hints.idempotent_hint)
    open_world = hints is None or hints.open_world_hint is None or hints.open_world_hint
    parameters = dict(mcp_tool.input_schema)
    parameters.setdefault("type", "object")
    meta: dict[str, Any] = {"server": server, "mcp_name": mcp_tool.name}
    primary = _primary_argument(parameters)
    if primary is not None:
        meta["primary_argument"] = primary
    return Tool(
        name=name,
        handler=handler,
        description=mcp_tool.description or "",
        parameters=parameters,
        output_schema=dict(mcp_tool.output_schema) if mcp_tool.output_schema else None,
        source="mcp",
        title=mcp_tool.title or (hints.title if hints else None),
        read_only=read_only,
        destructive=destructive,
        idempotent=idempotent,
        open_world=open_world,
        origin=f"mcp:{server}",
        meta=meta,
    )


def _primary_argument(parameters: Mapping[str, Any]) -> str | None:
    """The first required string argument: what a `tool(pattern)` permission rule matches."""
    properties = parameters.get("properties")
    required = parameters.get("required")
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    for arg in required:
        prop = properties.get(arg)
        if isinstance(prop, Mapping) and prop.get("type") == "string":
            return str(arg)
    return None


def to_result(
    result: mcp_types.CallToolResult, *, server: str, tool: str, max_output: int
) -> Result:
    """`CallToolResult` → `Result`, in the order the server sent it: the text before the first
    media or resource block is `content` (joined), every block after it a part in its place
    (text as `TextPart`), so "the image above" stays above. Content annotations (`audience`,
    `priority`) stay on their parts; those of the leading text blocks are in
    `metadata["text_annotations"]` (one entry per block, None for a block without).
    `structured_content` becomes `structured`, `is_error` is kept.

    Text longer than `max_output` characters in all keeps its head and tail with a notice, as
    shell and HTTP output do (it is then all in `content`, after which the parts follow);
    structured content whose JSON is that long is left out (`metadata["structured_dropped"]`;
    the model reads `content`). Either sets `metadata["truncated"]`."""
    texts: list[str] = []
    parts: list[Part] = []
    text_annotations: list[dict[str, Any] | None] = []
    later_text = 0
    try:
        for block in result.content:
            notes = _annotations(block)
            # compared on `block.type` itself, which narrows the ContentBlock union
            if block.type == "text":
                if parts:
                    parts.append(TextPart(text=block.text, annotations=notes))
                    later_text += len(block.text)
                else:
                    texts.append(block.text)
                    text_annotations.append(notes)
            elif block.type == "image":
                parts.append(
                    ImagePart(data=_b64(block.data), mime_type=block.mime_type, annotations=notes)
                )
            elif block.type == "audio":
                parts.append(
                    AudioPart(data=_b64(block.data), mime_type=block.mime_type, annotations=notes)
                )
            elif block.type == "resource_link":
                parts.append(
                    ResourcePart(uri=str(block.uri), mime_type=block.mime_type, annotations=notes)
                )
            elif block.type == "resource":
                parts.append(_embedded(block.resource, notes))
    except (binascii.Error, ValueError) as exc:
        raise ToolError(
            f"the MCP server '{server}' returned undecodable base64 data from '{tool}': {exc}"
        ) from exc
    if later_text and sum(map(len, texts)) + later_text > max_output:
        # Too long to keep in place: bound all the text together, the old way.
        texts += [p.text for p in parts if isinstance(p, TextPart)]
        parts = [p for p in parts if not isinstance(p, TextPart)]
    content = "\n".join(texts)
    if result.is_error and not content:
        content = f"the MCP tool '{tool}' on server '{server}' failed without a message"
    content, cut = head_tail(content, max_output)
    structured = result.structured_content
    metadata: dict[str, Any] = {"server": server, "truncated": cut > 0}
    if any(text_annotations):
        metadata["text_annotations"] = text_annotations
    if structured is not None and _json_longer_than(structured, max_output):
        structured = None
        metadata["structured_dropped"] = metadata["truncated"] = True
        if not content:
            content = (
                f"[the structured answer of '{tool}' is longer than max_output "
                f"({max_output:,} characters) and was left out]"
            )
    return Result(
        content=content,
        parts=tuple(parts),
        structured=structured,
        is_error=bool(result.is_error),
        metadata=metadata,
    )


def _json_longer_than(value: object, limit: int) -> bool:
    """Whether `json.dumps(value, ensure_ascii=False, default=str)` is longer than `limit`.

    Most structured results are far shorter than `max_output`: a bound on their length, read
    from the sizes of their strings, settles it without encoding them (encoding even a small
    dict costs several times more, on every call)."""
    if _json_bound(value, limit) <= limit:
        return False
    return len(json.dumps(value, ensure_ascii=False, default=str)) > limit


def _json_bound(value: object, budget: int) -> float:
    """An upper bound on the length of `value` as JSON, or infinity once past `budget` (or for
    a value JSON does not hold, which `default=str` would turn into something of any length).

    A string takes at most 6 characters per character (`\\u001f`) plus its quotes; a container
    its brackets and the `", "` and `": "` separators; a number its text (and `Infinity`)."""
    todo: list[object] = [value]
    total = 0
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            total += 2 + 6 * len(item)
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            for key, inner in item.items():
                if not isinstance(key, str):
                    return math.inf
                total += 2 + 6 * len(key)
                todo.append(inner)
        elif isinstance(item, list):
            total += 2 + 2 * len(item)
            todo.extend(item)
        elif item is None or isinstance(item, bool):
            total += 5
        elif isinstance(item, int | float):
            total += len(repr(item)) + 6  # `inf` is written `Infinity`
        else:
            return math.inf
        if total > budget:
            return math.inf
    return total


def _b64(data: str) -> bytes:
    return base64.b64decode(data, validate=True)


def _embedded(
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
    annotations: dict[str, Any] | None = None,
) -> Part:
    import mcp_types  # loaded already: `resource` is one of its models

    if isinstance(resource, mcp_types.TextResourceContents):
        return ResourcePart(
            uri=str(resource.uri),
            mime_type=resource.mime_type,
            text=resource.text,
            annotations=annotations,
        )
    return ResourcePart(
        uri=str(resource.uri),
        mime_type=resource.mime_type,
        data=_b64(resource.blob),
        annotations=annotations,
    )


def _annotations(block: Any) -> dict[str, Any] | None:
    """A block's annotations as sent (camelCase keys, absent ones left out), or None."""
    notes = getattr(block, "annotations", None)
    if notes is None:
        return None
    return notes.model_dump(by_alias=True, mode="json", exclude_none=True) or None


def leaf_exception(exc: BaseException) -> BaseException:
    """The first real failure inside (nested) exception groups, which anyio task groups and the
    SDK's transports wrap everything in; cancellations are skipped when something else failed."""
    while isinstance(exc, BaseExceptionGroup):
        inner = list(exc.exceptions)
        exc = next((e for e in inner if isinstance(e, Exception)), inner[0])
    return exc


def translate_error(
    exc: BaseException,
    *,
    server: str,
    tool: str,
    timeout: float | None,
    http_status: HttpStatus | None = None,
    broken: str | None = None,
    sent_token: bool = False,
    json_syntax: bool = False,
) -> ToolError:
    """One failure of an MCP call (SDK, transport, anyio, HTTP) as a `ToolError` for the model.

    Timeouts become `ToolTimeout` (retryable); a lost connection and network errors are
    retryable too; errors the server answered with are not. `http_status` is the HTTP error
    the connection last saw (the SDK reports it only as "Server returned an error response");
    `broken` says how a stdio server broke the protocol, when it did; `sent_token` and
    `json_syntax` shape the advice for a 401 (see `describe_http_status`).
    """
    import anyio
    import httpx2
    import mcp_types as types
    import pydantic
    from mcp.shared.exceptions import MCPError

    exc = leaf_exception(exc)
    where = f"the MCP server '{server}'"
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, MCPError):
        if exc.code == types.REQUEST_TIMEOUT:
            return ToolTimeout(_timed_out(tool, where, timeout))
        if exc.code == MESSAGE_TOO_LARGE or "byte limit" in exc.error.message:
            # stdio: refused by our reader; HTTP: the SDK's SSE event limit (max_message).
            return ToolError(
                f"the answer of '{tool}' from {where} is larger than its max_message limit "
                "and was refused unread; ask for less, or raise `max_message` for this server"
            )
        if session_lost(exc, http_status):
            return ToolError(
                f"{where} no longer knows this session (it was restarted?) during '{tool}'; "
                "it is reconnected on the next call",
                retryable=True,
            )
        if exc.code == types.CONNECTION_CLOSED:
            if broken is not None:
                return ToolError(_broken(tool, where, broken), retryable=True)
            return ToolError(_closed(tool, where), retryable=True)
        if http_status is not None and exc.error.message in _SDK_HTTP_STAND_INS:
            code = http_status[0]
            return ToolError(
                f"{where} answered '{tool}' with "
                + describe_http_status(http_status, sent_token=sent_token, json_syntax=json_syntax),
                retryable=code >= 500 or code == 429,
            )
        if exc.code == types.INVALID_PARAMS:
            return ToolError(f"{where} rejected the arguments of '{tool}': {exc.error.message}")
        if exc.code == types.METHOD_NOT_FOUND:
            return ToolError(f"{where} does not support tool calls: {exc.error.message}")
        return ToolError(f"{where} answered '{tool}' with error {exc.code}: {exc.error.message}")
    if isinstance(exc, TimeoutError):
        return ToolTimeout(_timed_out(tool, where, timeout))
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream):
        if broken is not None:
            return ToolError(_broken(tool, where, broken), retryable=True)
        return ToolError(_closed(tool, where), retryable=True)
    if isinstance(exc, httpx2.HTTPError):
        return ToolError(f"HTTP error talking to {where} during '{tool}': {exc}", retryable=True)
    if isinstance(exc, pydantic.ValidationError):
        return ToolError(f"{where} returned a malformed result for '{tool}': {exc}")
    if isinstance(exc, OSError):
        return ToolError(f"{where} is unreachable during '{tool}': {exc}", retryable=True)
    if isinstance(exc, RuntimeError):
        # The SDK raises RuntimeError when structured content breaks the tool's output schema.
        return ToolError(f"{where} returned an unusable result for '{tool}': {exc}")
    return ToolError(f"{where} failed during '{tool}': {type(exc).__name__}: {exc}")


def _timed_out(tool: str, where: str, timeout: float | None) -> str:
    after = f" after {round(timeout, 2):g} s" if timeout is not None else ""
    return f"'{tool}' on {where} timed out{after}; try again, or ask for less work per call"


def _closed(tool: str, where: str) -> str:
    return (
        f"{where} closed the connection during '{tool}' (it may have crashed); "
        "it is restarted on the next call"
    )


def session_lost(exc: BaseException, http_status: HttpStatus | None) -> bool:
    """An HTTP server that no longer knows the session (it restarted): a 404 once a session
    exists, which the SDK reports as "Session terminated", or the server's own JSON-RPC error
    (the SDK's server says "Session not found")."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_REQUEST

    leaf = leaf_exception(exc)
    if not isinstance(leaf, MCPError):
        return False
    if leaf.error.message == "Session terminated":
        return True
    said = leaf.error.message.lower()
    return (
        leaf.code == INVALID_REQUEST
        and http_status is not None
        and http_status[0] == 404
        and "session" in said
    )


def _broken(tool: str, where: str, broken: str) -> str:
    return (
        f"{where} broke the MCP protocol during '{tool}': {broken}; its connection was closed "
        "and it is restarted on the next call"
    )


def describe_http_status(
    status: HttpStatus, *, sent_token: bool = False, json_syntax: bool = False
) -> str:
    """An HTTP error answer in words, with what to do about it.

    Args:
        status: the answer.
        sent_token: an `Authorization` header was sent, so a 401 refused it (else none was).
        json_syntax: the server was declared in a `.mcp.json` file: the example is in JSON.
    """
    code, reason, url = status
    said = f"HTTP {code}{' ' + reason if reason else ''}"
    example = (
        '`"headers": {"Authorization": "Bearer ${TOKEN}"}` in its .mcp.json entry'
        if json_syntax
        else '`headers: {Authorization: "Bearer ${TOKEN}"}` in its manifest entry'
    )
    if code == 401 and not sent_token:
        return f"{said}: no token was sent and the server requires one; give one, e.g. {example}"
    if code == 401:
        return (
            f"{said}: the token was refused (wrong or expired); check the token that the "
            f"Authorization header sends, e.g. {example}"
        )
    if code == 403:
        return (
            f"{said}: the token was refused (wrong, expired, or without access); check the "
            f"token the entry sends, e.g. {example}"
        )
    if code == 404:
        return f"{said} for {url}: the URL is likely wrong (MCP endpoints usually end in /mcp)"
    if code >= 500:
        return f"{said}: the server failed; its own logs say why"
    return said
