"""HTTP tools: one manifest entry with an `http:` block becomes one tool that makes one request.

```yaml
- name: weather
  parameters: {type: object, properties: {city: {type: string}}, required: [city]}
  http:
    method: GET
    url: "https://api.example.com/v1/weather/{city}"     # path values are percent-encoded
    query: {units: metric, lang: "{lang?}"}              # absent optional arguments drop out
    headers: {Authorization: "Bearer ${WEATHER_TOKEN}"}  # never shown in results or errors
    body: {json: {...}} | {form: {...}} | {raw: "{text}", content_type: text/plain}
    timeout: 10s
    response: {format: json, pick: "$.data.items[0]"}
    max_response: 1MB
    follow_redirects: false
    allow_hosts: [api.example.com]
```

Placeholders follow `_template.py`. In the URL every substituted value is percent-encoded,
`/` included, so a value is always one path segment; only a placeholder that opens the URL
(`{base_url}/v1/items`, or a whole `{url}`) goes in verbatim, and then `allow_hosts` is
required. The request goes to a host on `allow_hosts` (default: the URL's host) or not at all;
redirects are reported, not followed, unless `follow_redirects: true`, and then every hop is
checked against the list too and loses the manifest's headers when it leaves the original origin.

Responses: 2xx JSON is pretty-printed (and becomes `Result.structured`), `pick` selects a part
of it, text is returned as text, `format: status` returns only the status line. 4xx/5xx become
error results with the status line and a bounded excerpt of the body; 429, 502, 503 and 504 are
marked `retryable` in metadata. Bodies are streamed and cut at `max_response` bytes.

`pick` is a small JSONPath subset: `$` then any of `.key`, `["key"]` (for keys with dots or
spaces), `[n]` (negative counts from the end), `[*]` / `.*` (every item of a list or value of an
object). With a wildcard the result is the list of every match.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..base import Result, Tool, ToolContext
from ..errors import ConfigError, ToolError
from ..manifest.interpolate import mask_secrets
from ..tracing import inject_headers
from . import BuildContext
from ._template import ABSENT, Parameters, Slot, Template, head_tail, label, parse_template

if TYPE_CHECKING:
    import httpx

__all__ = ["build_http_tool"]

DEFAULT_MAX_RESPONSE = 1_000_000
"""Bytes of response body read before the rest is cut off."""
DEFAULT_MAX_OUTPUT = 30_000
"""Characters of result text kept (head and tail) when the entry does not say."""
DEFAULT_TIMEOUT = 30.0
_EXCERPT = 2_000
"""Characters of an error response's body shown to the model."""
_RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
_MAX_REDIRECTS = 10
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_FORMATS = ("json", "text", "status")

ResponseFormat = Literal["auto", "json", "text", "status"]


# --- pick: the JSONPath subset ---------------------------------------------------------------

_PICK_TOKEN = re.compile(
    r"""\.(?P<key>[^.\[\]]+)|\[(?P<index>-?\d+)\]|\[(?P<q>["'])(?P<qkey>.*?)(?P=q)\]|(?P<star>\[\*\])"""
)

PickStep = str | int | None
"""A key, an index, or None for a wildcard."""


@dataclass(frozen=True, kw_only=True)
class Pick:
    """A compiled `pick` expression."""

    text: str
    steps: tuple[PickStep, ...]

    def apply(self, document: Any) -> Any:
        """The part of `document` the expression selects.

        Raises:
            ToolError: a key or index is missing where no wildcard allows it to be.
        """
        nodes = [document]
        wild = False
        where = "$"
        for step in self.steps:
            found: list[Any] = []
            for node in nodes:
                if step is None:
                    if isinstance(node, list):
                        found.extend(node)
                    elif isinstance(node, dict):
                        found.extend(node.values())
                    elif not wild:
                        raise ToolError(
                            f"pick {self.text}: {where} is {_kind(node)}, not a list or object"
                        )
                elif isinstance(step, int):
                    if isinstance(node, list) and -len(node) <= step < len(node):
                        found.append(node[step])
                    elif not wild:
                        size = f"a list of {len(node)}" if isinstance(node, list) else _kind(node)
                        raise ToolError(f"pick {self.text}: no item [{step}] in {where} ({size})")
                elif isinstance(node, dict) and step in node:
                    found.append(node[step])
                elif not wild:
                    if isinstance(node, dict):
                        keys = ", ".join(sorted(node)[:20]) or "none"
                        raise ToolError(
                            f"pick {self.text}: no key {step!r} in {where} (keys: {keys})"
                        )
                    raise ToolError(f"pick {self.text}: {where} is {_kind(node)}, not an object")
            if step is None:
                wild = True
            where += "[*]" if step is None else f"[{step}]" if isinstance(step, int) else f".{step}"
            nodes = found
        return nodes if wild else nodes[0]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), "a number"
    )


def parse_pick(text: str, *, field: str) -> Pick:
    """Compile a pick expression.

    Raises:
        ConfigError: the expression does not start with `$` or has an unknown step.
    """
    if not text.startswith("$"):
        raise ConfigError(f"pick {text!r} must start with '$' (e.g. $.data.items[0])", field=field)
    steps: list[PickStep] = []
    pos = 1
    while pos < len(text):
        match = _PICK_TOKEN.match(text, pos)
        if match is None:
            raise ConfigError(
                f'pick {text!r}: cannot read {text[pos:]!r}; use .key, ["key"], [n] or [*]',
                field=field,
            )
        if match.group("star") is not None or match.group("key") == "*":
            steps.append(None)
        elif match.group("index") is not None:
            steps.append(int(match.group("index")))
        elif match.group("qkey") is not None:
            steps.append(match.group("qkey"))
        else:
            steps.append(match.group("key"))
        pos = match.end()
    return Pick(text=text, steps=tuple(steps))


# --- the request an HTTP tool makes ----------------------------------------------------------

JsonNode = Any
"""A compiled JSON body: dicts and lists of nodes, `Template`s for strings, other scalars."""


@dataclass(frozen=True, kw_only=True)
class Body:
    """A compiled request body: exactly one of `json`, `form` or `raw` is used."""

    kind: Literal["json", "form", "raw"]
    json: JsonNode = None
    form: tuple[tuple[str, Template], ...] = ()
    raw: Template | None = None
    content_type: str = "text/plain; charset=utf-8"


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Everything an HTTP tool needs to make its request; shared with the OpenAPI source."""

    method: str
    url: Template = field(repr=False)
    """Substituted values are percent-encoded (`/` too). Like the query, headers and body, it
    stays out of `repr` (error reporters print the locals of failing frames): manifests put
    `${TOKEN}` values in all four (`/bot${TOKEN}/send`, `?key=${KEY}`)."""
    query: tuple[tuple[str, Template], ...] = field(default=(), repr=False)
    headers: tuple[tuple[str, Template], ...] = field(default=(), repr=False)
    """From the manifest: their values are never shown (they often hold secrets)."""
    body: Body | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    response_format: ResponseFormat = "auto"
    pick: Pick | None = None
    max_response: int = DEFAULT_MAX_RESPONSE
    max_output: int = DEFAULT_MAX_OUTPUT
    follow_redirects: bool = False
    allow_hosts: tuple[str, ...] = ()
    """Lower-case host names or globs (`*.example.com`) requests may go to."""
    network: tuple[str, ...] | None = None
    """The sandbox's host list, when it has one: a host must be on both lists."""
    parameters: Parameters
    client: Callable[[], httpx.AsyncClient] | None = None
    """The toolkit's shared client; None makes a client per call."""
    keep_slashes: frozenset[str] = frozenset()
    """Arguments whose value may span URL path segments (a file path): each segment is
    percent-encoded and `/` kept; a `.` or `..` segment is refused (see `_quote`)."""

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Result:
        """Make the request for `arguments` and map the response to a `Result`."""
        import anyio
        import httpx

        args = self.parameters.with_defaults(arguments)
        url = self._url(args)
        headers = inject_headers(self._headers(args))  # W3C traceparent, when tracing
        timeout = self.timeout
        remaining = ctx.remaining()
        if remaining is not None:
            timeout = min(timeout, remaining)
        started = time.monotonic()
        try:
            with anyio.fail_after(timeout):
                if self.client is not None:
                    result = await self._send(self.client(), url, headers, args, timeout)
                else:
                    async with httpx.AsyncClient() as client:
                        result = await self._send(client, url, headers, args, timeout)
        except TimeoutError as exc:
            raise ToolError(
                f"{self.method} {_safe_url(url)} timed out after {timeout:g}s; try again later "
                "or ask for less",
                retryable=True,
            ) from exc
        except _httpx_errors() as exc:
            secrets = [value for _, value in headers]
            raise translate_httpx_error(exc, self.method, url, secrets) from exc
        return result.with_metadata(duration=time.monotonic() - started)

    def _url(self, args: Mapping[str, Any]) -> httpx.URL:
        import httpx

        # A placeholder that opens the URL is a URL or base URL and goes in verbatim; every
        # later value is data and is percent-encoded.
        pieces = self.url.pieces
        lead = Template(field=self.url.field, pieces=pieces[:1])
        if lead.whole is None:
            lead = Template.literal("", field=self.url.field)
        rest = Template(field=self.url.field, pieces=pieces[len(lead.pieces) :])
        head = lead.render(args)
        tail = "".join(self._url_piece(piece, args) for piece in rest.pieces)
        assert head is not None and tail is not None  # check_url admits only `{name}`
        text = head + tail
        try:
            url = httpx.URL(text)
        except httpx.InvalidURL as exc:
            raise ToolError(f"the arguments make an invalid URL: {mask_secrets(str(exc))}") from exc
        if url.scheme not in ("http", "https"):
            raise ToolError(f"the URL must use http or https, not {url.scheme or 'nothing'!r}")
        params = tuple(
            (key, value) for key, template in self.query for value in template.render_each(args)
        )
        if params:
            url = url.copy_merge_params(params)
        return url

    def _url_piece(self, piece: str | Slot, args: Mapping[str, Any]) -> str:
        if isinstance(piece, str):
            return piece
        one = Template(field=self.url.field, pieces=(piece,))
        spans = piece.name in self.keep_slashes
        text = one.render(args, encode=lambda value: _quote(value, piece.name, spans=spans))
        assert text is not None  # check_url admits only `{name}`
        return text

    def _headers(self, args: Mapping[str, Any]) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        for name, template in self.headers:
            value = template.render(args)
            if value is None:
                continue
            if any(c in value for c in "\r\n\0"):
                raise ToolError(
                    f"header {name} cannot hold a line break or NUL character; pass a value "
                    "on one line"
                )
            headers.append((name, value))
        return headers

    def _check_host(self, url: httpx.URL) -> None:
        host = url.host.lower()
        for hosts in (self.allow_hosts, self.network):
            if hosts is not None and not any(fnmatch.fnmatchcase(host, p) for p in hosts):
                allowed = ", ".join(hosts) or "none"
                raise ToolError(
                    mask_secrets(
                        f"requests to host {host!r} are not allowed for this tool "
                        f"(allowed: {allowed})"
                    )
                )

    def _content(self, args: Mapping[str, Any]) -> dict[str, Any]:
        body = self.body
        if body is None:
            return {}
        if body.kind == "json":
            value = _render_json(body.json, args)
            return {} if value is ABSENT else {"json": value}
        if body.kind == "form":
            form: dict[str, list[str]] = {}
            for key, template in body.form:
                values = template.render_each(args)
                if values:
                    form.setdefault(key, []).extend(values)
            return {"data": form}
        assert body.raw is not None  # a raw body always has its template (see _compile_body)
        text = body.raw.render(args)
        if text is None:
            return {}
        return {"content": text.encode(), "headers": {"Content-Type": body.content_type}}

    async def _send(
        self,
        client: httpx.AsyncClient,
        url: httpx.URL,
        headers: list[tuple[str, str]],
        args: Mapping[str, Any],
        timeout: float,
    ) -> Result:
        self._check_host(url)
        content = self._content(args)
        extra_headers = content.pop("headers", {})
        # UTF-8 bytes: httpx would refuse a non-ASCII str, and many servers accept UTF-8 values.
        sent = [(name, value.encode()) for name, value in [*headers, *extra_headers.items()]]
        request = client.build_request(self.method, url, headers=sent, timeout=timeout, **content)
        origin = (url.scheme, url.host, url.port)
        for _ in range(_MAX_REDIRECTS + 1):
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                next_request = response.next_request
                if next_request is None:
                    body, cut = await _read_capped(response, self.max_response)
                    return self._result(response, body, cut)
                if not self.follow_redirects:
                    return self._redirect_result(response)
                self._check_host(next_request.url)
                target = next_request.url
                if (target.scheme, target.host, target.port) != origin:
                    for name, _ in headers:
                        next_request.headers.pop(name, None)
                request = next_request
            finally:
                await response.aclose()
        raise ToolError(
            f"{self.method} {_safe_url(url)} redirected more than {_MAX_REDIRECTS} times; "
            "the server is probably misconfigured"
        )

    def _redirect_result(self, response: httpx.Response) -> Result:
        location = mask_secrets(response.headers.get("location", ""))
        return Result.error(
            f"HTTP {_status_line(response)}: the server redirects to {location}; this tool does "
            "not follow redirects",
            status=response.status_code,
            location=location,
            url=_safe_url(response.request.url),
            method=self.method,
            truncated=False,
        )

    def _result(self, response: httpx.Response, body: bytes, cut: bool) -> Result:
        status = response.status_code
        meta: dict[str, Any] = {
            "status": status,
            "method": self.method,
            "url": _safe_url(response.request.url),
            "content_type": response.headers.get("content-type", ""),
            "truncated": cut,
        }
        text = body.decode(response.charset_encoding or "utf-8", errors="replace")
        if status >= 400:
            retryable = status in _RETRYABLE_STATUS
            meta["retryable"] = retryable
            if retryable and "retry-after" in response.headers:
                meta["retry_after"] = response.headers["retry-after"]
            # a server may echo the credentials it refuses
            excerpt, _ = head_tail(mask_secrets(text.strip()), _EXCERPT, keep_head=1.0)
            message = f"HTTP {_status_line(response)}"
            if excerpt:
                message += f"\n{excerpt}"
            return Result(content=message, is_error=True, metadata=meta)
        fmt = self.response_format
        if fmt == "status" or (not body and fmt != "text"):
            return Result(content=f"HTTP {_status_line(response)}", metadata=meta)
        cut_note = (
            f"\n[response cut at {self.max_response:,} bytes: it is larger than max_response]"
            if cut
            else ""
        )
        strict = fmt == "json" or self.pick is not None
        if not strict and not (fmt == "auto" and _is_json_type(meta["content_type"])):
            return self._text_result(text + cut_note, meta)
        if cut:
            if strict:
                return Result.error(
                    f"the JSON response is larger than max_response ({self.max_response:,} bytes)"
                    " and cannot be parsed once cut; ask for less (filters, pagination)",
                    **meta,
                )
            return self._text_result(text + cut_note, meta)
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            if not strict:
                return self._text_result(text, meta)
            excerpt, _ = head_tail(mask_secrets(text), _EXCERPT, keep_head=1.0)
            return Result.error(f"the response is not valid JSON ({exc}):\n{excerpt}", **meta)
        if self.pick is not None:
            document = self.pick.apply(document)
        rendered = (
            document
            if isinstance(document, str)
            else json.dumps(document, ensure_ascii=False, indent=2)
        )
        content, trimmed = head_tail(rendered, self.max_output)
        meta["truncated"] = trimmed > 0
        return Result(content=content, structured=document, metadata=meta)

    def _text_result(self, text: str, meta: dict[str, Any]) -> Result:
        content, trimmed = head_tail(text, self.max_output)
        truncated = meta["truncated"] or trimmed > 0
        return Result(content=content, metadata={**meta, "truncated": truncated})


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Read at most `limit` bytes of the body; True when more was there (and was not read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > limit:
            chunks.append(chunk[: limit - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _status_line(response: httpx.Response) -> str:
    return f"{response.status_code} {response.reason_phrase}".strip()


def _safe_url(url: httpx.URL) -> str:
    """The URL without query, fragment or credentials (query strings often carry API keys),
    and with interpolated values masked (`/bot${TOKEN}/send`)."""
    port = f":{url.port}" if url.port is not None else ""
    path = url.raw_path.split(b"?", 1)[0].decode("ascii")
    return mask_secrets(f"{url.scheme}://{url.host}{port}{path}")


def _quote(text: str, name: str, *, spans: bool = False) -> str:
    """Percent-encode the value of argument `name` for the URL, `/` included, or, when the
    value `spans` path segments (`docs/a b.md` -> `docs/a%20b.md`), each segment alone with
    `/` kept, as the official clients of such APIs send it (go-github's contents calls,
    GitHub's `x-multi-segment` parameters).

    Raises:
        ToolError: the value is `.` or `..`, or holds such a segment, also once percent-decoded
            (`%2e%2e`, `%252e`, overlong `%c0%ae`), split at a backslash (`..\\`), cut at a
            `;` or NUL (`..;`) or Unicode-normalised (`\uff0e\uff0e`): a server that decodes
            `%2F` or any of these before resolving dot segments would move the request to
            another path. A one-segment value is held to the same rule, since `/` sent as
            `%2F` is decoded back by many servers and proxies.
    """
    plain = _decoded(text)
    dots = [s for s in re.split(r"[/\\]", plain) if _is_dot_segment(s)]
    if dots:
        if not spans and _is_dot_segment(plain):
            raise ToolError(
                f"argument '{name}': a URL path value may not be {text!r}: it would point the "
                "request at another path; pass a name"
            )
        raise ToolError(
            f"argument '{name}': a URL path value may not hold a {dots[0]!r} segment "
            f"({text!r}): it would point the request at another path; pass a path without "
            ". or .. parts"
        )
    if not spans:
        return urllib.parse.quote(text, safe="")
    return "/".join(urllib.parse.quote(segment, safe="") for segment in text.split("/"))


_OVERLONG = re.compile(r"(?i)%c0%ae|%e0%80%ae|%c0%af|%e0%80%af|%c1%9c")
_OVERLONG_AS = {"ae": ".", "af": "/", "9c": "\\"}
"""Overlong UTF-8 forms of `.`, `/` and `\\` that lax decoders (old IIS, some proxies) read as
the characters themselves."""


def _is_dot_segment(segment: str) -> bool:
    """Whether a decoded segment is `.` or `..` to some server: after a `;` (a path
    parameter to Tomcat and Spring) or a NUL (C string end) is cut, Unicode dots folded."""
    cut = re.split(r"[;\x00]", segment, maxsplit=1)[0]
    return unicodedata.normalize("NFKC", cut) in (".", "..")


def _decoded(text: str) -> str:
    """`text` percent-decoded until it no longer changes (bounded: `%25` nests)."""
    for _ in range(8):
        if "%" not in text:
            break
        text = _OVERLONG.sub(lambda m: _OVERLONG_AS[m.group(0)[-2:].lower()], text)
        decoded = urllib.parse.unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


# --- httpx errors, translated in one place ---------------------------------------------------

_HTTPX_ERRORS: dict[str, tuple[str, bool]] = {
    # name of the httpx class -> (what happened, for the model; whether trying again may help)
    "ConnectTimeout": ("timed out while connecting", True),
    "ReadTimeout": ("timed out waiting for the response", True),
    "WriteTimeout": ("timed out while sending the request", True),
    "PoolTimeout": ("timed out waiting for a free connection", True),
    "TimeoutException": ("timed out", True),
    "ConnectError": ("could not connect to the server", True),
    "ReadError": ("the connection failed while reading the response", True),
    "WriteError": ("the connection failed while sending the request", True),
    "CloseError": ("the connection failed while closing", True),
    "NetworkError": ("a network error interrupted the request", True),
    "ProxyError": ("the proxy refused or failed the request", False),
    "UnsupportedProtocol": ("the URL's scheme is not supported (use http or https)", False),
    "RemoteProtocolError": ("the server broke the HTTP protocol (it may have crashed)", True),
    "LocalProtocolError": ("the request is not valid HTTP (check header values)", False),
    "ProtocolError": ("the HTTP exchange broke the protocol", False),
    "DecodingError": ("the response body could not be decoded (bad Content-Encoding)", False),
    "TooManyRedirects": ("the server redirected too many times", False),
    "TransportError": ("the request could not be carried out", False),
    "RequestError": ("the request failed", False),
    "HTTPStatusError": ("the server answered with an error status", False),
    "HTTPError": ("the HTTP request failed", False),
    "InvalidURL": ("the URL is not valid", False),
    "CookieConflict": ("the server set conflicting cookies", False),
    "StreamConsumed": ("the request body was already sent once and cannot be replayed", False),
    "StreamClosed": ("the response stream was closed before it was read", False),
    "ResponseNotRead": ("the response was used before being read", False),
    "RequestNotRead": ("the request was used before being read", False),
    "StreamError": ("the request or response stream was misused", False),
}


def _httpx_errors() -> tuple[type[Exception], ...]:
    """Every exception family httpx raises (its errors do not share one base class)."""
    import httpx

    return (httpx.HTTPError, httpx.InvalidURL, httpx.CookieConflict, httpx.StreamError)


def translate_httpx_error(
    exc: Exception, method: str, url: httpx.URL | None, secrets: Sequence[str] = ()
) -> ToolError:
    """The `ToolError` for an httpx exception: the most specific known class decides.

    The message names the request without its query string and never repeats a header value.
    """
    what, retryable = "the HTTP request failed", False
    for cls in type(exc).__mro__:
        if cls.__name__ in _HTTPX_ERRORS:
            what, retryable = _HTTPX_ERRORS[cls.__name__]
            break
    detail = str(exc)
    if url is not None:
        detail = detail.replace(str(url), _safe_url(url))
    for secret in secrets:
        if secret:
            detail = detail.replace(secret, "***")
    target = f"{method} {_safe_url(url)}" if url is not None else method
    message = f"{target} failed: {what}"
    if detail:
        message += f" ({type(exc).__name__}: {detail})"
    if retryable:
        message += "; trying again later may work"
    return ToolError(mask_secrets(message), retryable=retryable)


# --- building from the manifest --------------------------------------------------------------


def build_http_tool(decl: Mapping[str, Any], ctx: BuildContext) -> Tool:
    """Build the tool of one `http:` manifest entry.

    Raises:
        ConfigError: a bad method, URL, placeholder, body, pick or host list.
    """
    spec = decl.get("http")
    if not isinstance(spec, Mapping):
        raise ConfigError("http must be a mapping with at least a url", field="http")
    endpoint = compile_endpoint(
        spec, decl.get("parameters"), ctx, field="http", max_output=decl.get("max_output")
    )
    method = endpoint.method
    safe = method in _SAFE_METHODS
    return Tool(
        name=decl["name"],
        handler=endpoint.call,
        description=decl.get("description") or f"{method} {_url_label(endpoint.url)}",
        parameters=endpoint.parameters.schema,
        source="http",
        title=decl.get("title"),
        read_only=decl.get("read_only", safe),
        destructive=decl.get("destructive", not safe),
        idempotent=decl.get("idempotent", safe or method in ("PUT", "DELETE")),
        open_world=decl.get("open_world", True),
        concurrent=decl.get("concurrent", False),
        origin=ctx.origin,
        meta={"method": method, "url": _url_label(endpoint.url)},
    )


def compile_endpoint(
    spec: Mapping[str, Any],
    parameters: Mapping[str, Any] | None,
    ctx: BuildContext,
    *,
    field: str,
    max_output: int | None = None,
) -> Endpoint:
    """Parse and check an `http:` block into an `Endpoint`.

    `parameters` None derives the arguments schema from the placeholders; `max_output` is the
    entry's own (it sits beside `http:`, as it does beside a shell tool's `command:`).
    """
    method = str(spec.get("method", "GET")).upper()
    if method not in _METHODS:
        raise ConfigError(
            f"unknown method {spec.get('method')!r}; expected one of {', '.join(_METHODS)}",
            field=f"{field}.method",
        )
    url_text = spec.get("url")
    if not isinstance(url_text, str) or not url_text:
        raise ConfigError("url is required: the address to call", field=f"{field}.url")
    url = parse_template(url_text, field=f"{field}.url")
    query = tuple(
        (str(key), _compile_value(value, f"{field}.query.{key}"))
        for key, value in _mapping(spec.get("query"), f"{field}.query").items()
    )
    headers = tuple(
        (str(key), _compile_value(value, f"{field}.headers.{key}"))
        for key, value in _mapping(spec.get("headers"), f"{field}.headers").items()
    )
    body = _compile_body(spec.get("body"), f"{field}.body")
    response = _mapping(spec.get("response"), f"{field}.response")
    fmt = response.get("format", "auto")
    if fmt != "auto" and fmt not in _FORMATS:
        raise ConfigError(
            f"unknown response format {fmt!r}; expected one of {', '.join(_FORMATS)}",
            field=f"{field}.response.format",
        )
    pick = None
    if response.get("pick") is not None:
        pick = parse_pick(str(response["pick"]), field=f"{field}.response.pick")
        if fmt in ("text", "status"):
            raise ConfigError(
                f"pick needs a JSON response, but format is {fmt!r}",
                field=f"{field}.response.pick",
            )
    # Query and form values may be a whole `{list...}` (the key repeats once per item);
    # the URL must always render in full, so it takes only `{name}` placeholders.
    repeatable = [t for _, t in query] + ([t for _, t in body.form] if body else [])
    others = [t for _, t in headers] + _body_templates(body)
    params = (
        Parameters.from_schema(parameters)
        if parameters is not None
        else Parameters.derive([url, *repeatable, *others])
    )
    check_url(url, params)
    for template in repeatable:
        params.check(template, spread="whole")
    for template in others:
        params.check(template)
    return Endpoint(
        method=method,
        url=url,
        query=query,
        headers=headers,
        body=body,
        timeout=_positive(spec.get("timeout", ctx.timeout or DEFAULT_TIMEOUT), f"{field}.timeout"),
        response_format=fmt,
        pick=pick,
        max_response=int(
            _positive(spec.get("max_response", DEFAULT_MAX_RESPONSE), f"{field}.max_response")
        ),
        max_output=int(_positive(max_output or DEFAULT_MAX_OUTPUT, "max_output")),
        follow_redirects=bool(spec.get("follow_redirects", False)),
        allow_hosts=allow_hosts(spec.get("allow_hosts"), url, f"{field}.allow_hosts"),
        network=sandbox_hosts(ctx),
        parameters=params,
        client=ctx.http_client,
    )


def sandbox_hosts(ctx: BuildContext) -> tuple[str, ...] | None:
    """The hosts a sandbox block lets an HTTP tool reach (None: no limit beyond allow_hosts).

    Raises:
        ConfigError: the sandbox says `network: false`, which no HTTP tool can honour usefully.
    """
    if ctx.sandbox is None or ctx.sandbox.network is True:
        return None
    if ctx.sandbox.network is False:
        raise ConfigError(
            "network is false (in the tool's sandbox block or defaults.sandbox), so this HTTP "
            "tool could never make a request; list the hosts it may reach instead, e.g. "
            "network: [api.example.com]",
            field="sandbox.network",
        )
    return tuple(host.lower() for host in ctx.sandbox.network)


def check_url(url: Template, params: Parameters) -> None:
    """A URL cannot be left out, so its placeholders must all be plain `{name}`s."""
    params.check(url)
    for slot in url.slots:
        if slot.kind != "value":
            raise ConfigError(
                f"{slot.written()} cannot be in the url, which is never left out; put optional "
                "values and flags under query:",
                field=url.field,
            )


def allow_hosts(value: Any, url: Template, field: str) -> tuple[str, ...]:
    """The hosts requests may go to: `value` as given, else the URL's written-out host."""
    if value is not None:
        if isinstance(value, str) or not isinstance(value, Sequence) or not value:
            raise ConfigError(
                "allow_hosts must be a non-empty list of host names or globs "
                "(e.g. [api.example.com, '*.example.org'])",
                field=field,
            )
        return tuple(str(host).lower() for host in value)
    host = _static_host(url)
    if host is None:
        raise ConfigError(
            "the host of the url comes from an argument, so list the hosts it may take in "
            "allow_hosts",
            field=field,
        )
    return (host,)


def _static_host(url: Template) -> str | None:
    """The URL's host when it is written out before any placeholder; None when templated."""
    first = url.pieces[0] if url.pieces and isinstance(url.pieces[0], str) else ""
    if not url.slots:
        first += "/"
    match = re.match(r"(?i)([a-z][a-z0-9+.-]*)://([^/?#]*)[/?#]", first)
    scheme = re.match(r"(?i)([a-z][a-z0-9+.-]*)://", first)
    if scheme is not None and scheme.group(1).lower() not in ("http", "https"):
        raise ConfigError(f"url {_url_label(url)!r} must use http:// or https://", field=url.field)
    if match is None:
        if url.slots and (not first or scheme is not None):
            return None  # the host (or the whole URL) comes from an argument
        raise ConfigError(
            f"url {_url_label(url)!r} must start with http:// or https:// and a host",
            field=url.field,
        )
    host = match.group(2).rsplit("@", 1)[-1]
    if not host.endswith("]"):
        host = host.rsplit(":", 1)[0]
    if not host.strip("[]"):
        raise ConfigError(f"url {_url_label(url)!r} has no host", field=url.field)
    return host.strip("[]").lower()


def _url_label(url: Template) -> str:
    """The URL as written, without its query string (which may hold a secret)."""
    return label(url).split("?", 1)[0]


def _compile_value(value: Any, field: str) -> Template:
    if isinstance(value, str):
        return parse_template(value, field=field)
    if isinstance(value, bool | int | float):
        return Template.literal(json.dumps(value), field=field)
    raise ConfigError(f"expected a string or a number, not {_kind(value)}", field=field)


def _compile_body(value: Any, field: str) -> Body | None:
    if value is None:
        return None
    body = _mapping(value, field)
    kinds = [k for k in ("json", "form", "raw") if k in body]
    if len(kinds) != 1:
        raise ConfigError(
            "body needs exactly one of json, form or raw (with an optional content_type)",
            field=field,
        )
    kind = kinds[0]
    unknown = set(body) - {kind, "content_type"}
    if unknown or ("content_type" in body and kind != "raw"):
        raise ConfigError(
            f"unexpected key(s) {', '.join(sorted(unknown or {'content_type'}))} in a {kind} "
            "body; content_type goes with raw only",
            field=field,
        )
    if kind == "json":
        return Body(kind="json", json=_compile_json(body["json"], f"{field}.json"))
    if kind == "form":
        form = _mapping(body["form"], f"{field}.form")
        return Body(
            kind="form",
            form=tuple((str(k), _compile_value(v, f"{field}.form.{k}")) for k, v in form.items()),
        )
    if not isinstance(body["raw"], str):
        raise ConfigError("raw must be a string (a template)", field=f"{field}.raw")
    return Body(
        kind="raw",
        raw=parse_template(body["raw"], field=f"{field}.raw"),
        content_type=str(body.get("content_type", "text/plain; charset=utf-8")),
    )


def _compile_json(value: Any, field: str) -> JsonNode:
    if isinstance(value, str):
        return parse_template(value, field=field)
    if isinstance(value, Mapping):
        return {str(k): _compile_json(v, f"{field}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_compile_json(v, f"{field}[{i}]") for i, v in enumerate(value)]
    return value


def _body_templates(body: Body | None) -> list[Template]:
    """The templates of a body other than its form values."""
    if body is None:
        return []
    if body.raw is not None:
        return [body.raw]
    return _json_templates(body.json)


def _json_templates(node: JsonNode) -> list[Template]:
    if isinstance(node, Template):
        return [node]
    if isinstance(node, dict):
        return [t for v in node.values() for t in _json_templates(v)]
    if isinstance(node, list):
        return [t for v in node for t in _json_templates(v)]
    return []


def _render_json(node: JsonNode, args: Mapping[str, Any]) -> Any:
    if isinstance(node, Template):
        return node.value(args)
    if isinstance(node, dict):
        rendered = {k: _render_json(v, args) for k, v in node.items()}
        return {k: v for k, v in rendered.items() if v is not ABSENT}
    if isinstance(node, list):
        items = [_render_json(v, args) for v in node]
        return [v for v in items if v is not ABSENT]
    return node


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected a mapping, not {_kind(value)}", field=field)
    return value


def _positive(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"expected a positive number, not {value!r}", field=field)
    return float(value)
