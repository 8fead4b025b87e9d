"""`fetch`: read a web page as Markdown, text or raw, safely.

Safety first, because the model chooses the URL:

- **No private targets.** Every hop's host is resolved once; if any address it resolves to is
  loopback, private, link-local (cloud metadata included), unspecified, multicast, reserved or
  otherwise not global (IPv4-mapped, 6to4 and NAT64 forms are unwrapped first), the request is
  refused unless the options allow it (`allow_private: true`, or `allow_hosts` listing the host
  name, a `*.domain` glob, the address or its network).
- **One reading of the URL.** The host that is checked, resolved, pinned, matched against the
  sandbox's host list and compared on redirects is httpx's reading of the URL, the one the
  connection uses; an IPv4 shorthand such as `http://2130706433/` is caught on the address it
  resolves to. Approval rules (`host:`, `fetch(domain:...)`) count a host only when the WHATWG
  URL Standard, RFC 3986 and httpx read the same one, so a URL a browser reads differently
  (`http://a.com\\@b.com/`, `http:/a.com`) is never allowed by such a rule.
- **No DNS-rebinding window.** The connection goes to the exact address that was checked: a
  custom network backend under httpx connects to the pinned IP while the URL keeps its host
  name, so the `Host` header, TLS SNI and certificate verification all use the name. No second
  lookup happens between the check and the connection. Proxies from the environment are not
  used (they would resolve the name themselves).
- **Redirects**: followed by the tool, hop by hop (each re-resolved and re-checked), only on the
  same host; a redirect to another host is reported to the model, which may fetch it itself.
- **Bounded**: the body is read as a stream and cut at `max_bytes` (after decompression, so a
  compressed bomb costs only the cap); the whole fetch has one deadline; the returned text is
  capped too.
- `http://` is upgraded to `https://` for hosts whose addresses are all public and that use the
  default port (as Claude Code does); local services, allowed by the options, stay on http.
- A sandbox policy on the tool applies: `network: false` refuses every fetch and a host list
  limits the hosts.

Responses are cached per toolkit (in `ctx.state`) for 15 minutes by URL, format and size cap.
"""

from __future__ import annotations

import asyncio
import codecs
import fnmatch
import ipaddress
import json
import re
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urljoin

from toolnexus import ConfigError, Result, Tool, ToolContext, ToolError

from ._common import parse_options

if TYPE_CHECKING:
    import httpx

__all__ = ["fetch_tools"]

_CACHE_KEY = "builtin.fetch.cache"
"""`ctx.state` key: OrderedDict {(url, format, max_bytes): (expires, Result)}."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_METADATA = (ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_REDIRECTS = (301, 302, 303, 307, 308)
_ACCEPT = "text/html, text/markdown, text/plain, application/json;q=0.9, */*;q=0.5"
_TEXT_TYPES = (
    "application/javascript",
    "application/x-javascript",
    "application/xml",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
    "application/x-sh",
    "application/sql",
    "application/graphql",
    "image/svg+xml",
)


@dataclass(frozen=True, kw_only=True)
class _FetchOptions:
    """Options of `fetch` (`builtins: {fetch: {...}}`)."""

    max_bytes: int = 5 * 1024 * 1024
    """Default and largest body size read (a call may ask for less)."""
    max_output_chars: int = 100_000
    """Characters returned after conversion; the rest is cut with a note."""
    timeout_ms: int = 30_000
    """Deadline of a whole fetch, redirects and body included."""
    max_redirects: int = 5
    cache_ttl_s: int = 900
    cache_entries: int = 64
    allow_private: bool = False
    """Let requests reach loopback, private and link-local addresses."""
    allow_hosts: tuple[str, ...] = ()
    """Host names (`*.example.com` globs), addresses or networks (`10.0.0.0/8`) whose private
    addresses may be reached."""
    upgrade_http: bool = True
    user_agent: str = "toolnexus-fetch/0.1 (+https://github.com/toolnexus)"


def _options(options: Mapping[str, Any]) -> _FetchOptions:
    special = ("allow_hosts", "user_agent")
    opts: _FetchOptions = parse_options(
        {k: v for k, v in options.items() if k not in special}, _FetchOptions, "fetch"
    )
    hosts = options.get("allow_hosts", ())
    if isinstance(hosts, str) or not all(isinstance(h, str) and h for h in hosts):
        raise ConfigError(
            f"expected a list of host names, addresses or networks, got {hosts!r}",
            field="allow_hosts",
        )
    agent = options.get("user_agent", opts.user_agent)
    if not isinstance(agent, str) or not agent.strip():
        raise ConfigError(f"expected a non-empty string, got {agent!r}", field="user_agent")
    return replace(opts, allow_hosts=tuple(h.lower() for h in hosts), user_agent=agent)


# --- addresses --------------------------------------------------------------------------------


def _unwrap(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), else `ip`."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _forbidden(ip: IPAddress) -> str | None:
    """What kind of non-public address `ip` is, or None for a public one."""
    inner = _unwrap(ip)
    checks = (
        (inner in _METADATA or ip in _METADATA, "cloud metadata"),
        (inner.is_loopback, "loopback"),
        (inner.is_link_local, "link-local"),
        (inner.is_unspecified, "unspecified"),
        (inner.is_multicast, "multicast"),
        (inner.is_private, "private"),
        (inner.is_reserved, "reserved"),
        (not inner.is_global, "non-public"),
    )
    for hit, kind in checks:
        if hit:
            return kind
    return None


class _Policy:
    """Which hosts and addresses a fetch may reach."""

    def __init__(self, opts: _FetchOptions) -> None:
        self.allow_private = opts.allow_private
        self.networks: list[IPNetwork] = []
        self.hosts: list[str] = []
        for entry in opts.allow_hosts:
            try:
                self.networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                self.hosts.append(entry)

    def allows(self, host: str, ip: IPAddress) -> bool:
        if self.allow_private:
            return True
        if any(ip in net or _unwrap(ip) in net for net in self.networks):
            return True
        return any(fnmatch.fnmatchcase(host, pattern) for pattern in self.hosts)


async def _resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (an address literal is its own answer)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError(
            f"cannot resolve host {host!r}: {exc.strerror}. Check the URL's spelling."
        ) from exc
    addresses: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise ToolError(f"host {host!r} has no address")
    return addresses


# --- the pinned transport -------------------------------------------------------------------


def _transport(pinned_host: str, ip: IPAddress) -> httpx.AsyncBaseTransport:
    """An httpx transport whose every TCP connection goes to `ip`, whatever name the URL has.

    httpx's own transport cannot take a network backend, so this one drives an httpcore pool
    directly (as httpx does) and maps httpcore's errors to httpx's.
    """
    import httpcore
    import httpx

    class PinnedBackend(httpcore.AsyncNetworkBackend):
        def __init__(self) -> None:
            # httpcore declares a placeholder `AnyIOBackend` (no methods) for when anyio is
            # missing, and the checker sees that one; anyio comes with httpx, so this is the
            # real backend.
            self.inner = cast(httpcore.AsyncNetworkBackend, httpcore.AnyIOBackend())

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.AsyncNetworkStream:
            if host.lower().strip("[]") != pinned_host:
                raise httpcore.ConnectError(f"connection to unchecked host {host!r}")
            return await self.inner.connect_tcp(
                str(ip),
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )

        async def sleep(self, seconds: float) -> None:
            await self.inner.sleep(seconds)

    def mapped(exc: Exception, request: httpx.Request) -> httpx.HTTPError:
        if isinstance(exc, httpcore.TimeoutException):
            return httpx.TimeoutException(str(exc) or "timed out", request=request)
        if isinstance(exc, httpcore.ConnectError):
            return httpx.ConnectError(str(exc) or "connection failed", request=request)
        return httpx.TransportError(str(exc) or type(exc).__name__, request=request)

    httpcore_errors = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError)

    class Stream(httpx.AsyncByteStream):
        def __init__(self, inner: Any, request: httpx.Request) -> None:
            self.inner = inner
            self.request = request

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for part in self.inner:
                    yield part
            except httpcore_errors as exc:
                raise mapped(exc, self.request) from exc

        async def aclose(self) -> None:
            await self.inner.aclose()

    class PinnedTransport(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            import certifi

            context = ssl.create_default_context(cafile=certifi.where())
            self.pool = httpcore.AsyncConnectionPool(
                ssl_context=context, network_backend=PinnedBackend(), max_connections=1
            )

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            core = httpcore.Request(
                method=request.method,
                url=httpcore.URL(
                    scheme=request.url.raw_scheme,
                    host=request.url.raw_host,
                    port=request.url.port,
                    target=request.url.raw_path,
                ),
                headers=request.headers.raw,
                content=request.stream,
                extensions=request.extensions,
            )
            try:
                response = await self.pool.handle_async_request(core)
            except httpcore_errors as exc:
                raise mapped(exc, request) from exc
            return httpx.Response(
                status_code=response.status,
                headers=response.headers,
                stream=Stream(response.stream, request),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self.pool.aclose()

    return PinnedTransport()


# --- conversion -------------------------------------------------------------------------------


def _media_type(content_type: str) -> tuple[str, str | None]:
    """(`type/subtype` in lower case, charset or None)."""
    parts = [p.strip() for p in content_type.split(";")]
    charset = None
    for p in parts[1:]:
        key, _, value = p.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip("\"'")
    return parts[0].lower(), charset


def _decode(body: bytes, charset: str | None) -> str:
    try:
        codec = codecs.lookup(charset or "utf-8").name
    except LookupError:
        codec = "utf-8"
    return body.decode(codec, "replace")


def _is_text(media: str, head: bytes) -> bool:
    if media.startswith("text/") or media in _TEXT_TYPES:
        return True
    if media.endswith(("+json", "+xml", "/json")):
        return True
    if not media or media == "application/octet-stream":
        return b"\0" not in head[:8192] and _decode(head[:8192], "utf-8").count("\ufffd") < 8
    return False


def _html_to_markdown(html: str) -> str:
    from markdownify import markdownify

    text = markdownify(html, heading_style="ATX")
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _html_to_text(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    text = soup.get_text("\n")
    lines = (line.strip() for line in text.splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _convert(text: str, media: str, fmt: str) -> tuple[str, str]:
    """(converted text, what was done) for the requested format."""
    if fmt == "raw":
        return text, "raw"
    if media in ("text/html", "application/xhtml+xml"):
        if fmt == "markdown":
            return _html_to_markdown(text), "HTML converted to Markdown"
        return _html_to_text(text), "HTML converted to text"
    if media.endswith(("/json", "+json")):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False), "JSON formatted"
        except ValueError:
            return text, "invalid JSON, shown as is"
    return text, "text"


# --- the tool -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Page:
    url: str
    status: int
    media: str
    charset: str | None
    body: bytes
    truncated: bool


class _Fetcher:
    def __init__(self, opts: _FetchOptions) -> None:
        self.opts = opts
        self.policy = _Policy(opts)

    def _check_sandbox(self, ctx: ToolContext, host: str) -> None:
        policy = ctx.sandbox
        if policy is None or policy.network is True:
            return
        if policy.network is False:
            raise ToolError(
                "the sandbox policy of this toolkit allows no network access; fetch cannot be "
                "used here."
            )
        if not any(fnmatch.fnmatchcase(host, p.lower()) for p in policy.network):
            raise ToolError(
                f"host {host!r} is not on the sandbox's network list "
                f"({', '.join(policy.network)}); fetch a page from one of those hosts."
            )

    async def _target(self, ctx: ToolContext, url: httpx.URL) -> tuple[httpx.URL, IPAddress]:
        """The URL to request (maybe upgraded to https) and the checked address to connect to.

        Raises:
            ToolError: the host resolves to an address the options do not allow.
        """
        host = url.host.lower()
        self._check_sandbox(ctx, host)
        addresses = await _resolve(host, url.port or (443 if url.scheme == "https" else 80))
        public = True
        for ip in addresses:
            kind = _forbidden(ip)
            if kind is None:
                continue
            public = False
            if not self.policy.allows(host, ip):
                raise ToolError(
                    f"refused to fetch {url}: host {host!r} resolves to {ip}, a {kind} address. "
                    "Fetching local or internal addresses is not allowed; the toolkit's "
                    "configuration can allow it (fetch options allow_private or allow_hosts). "
                    "Use a public URL."
                )
        if public and url.scheme == "http" and url.port is None and self.opts.upgrade_http:
            url = url.copy_with(scheme="https")
        return url, addresses[0]

    async def _hop(self, url: httpx.URL, ip: IPAddress, max_bytes: int) -> tuple[_Page, str]:
        """One request; returns the page and, for a redirect, its absolute target ("" if none)."""
        import httpx

        transport = _transport(url.host.lower().strip("[]"), ip)
        async with (
            httpx.AsyncClient(
                transport=transport,
                follow_redirects=False,
                trust_env=False,
                timeout=httpx.Timeout(self.opts.timeout_ms / 1000),
                headers={
                    "User-Agent": self.opts.user_agent,
                    "Accept": _ACCEPT,
                },
            ) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code in _REDIRECTS and "location" in response.headers:
                target = urljoin(str(url), response.headers["location"])
                page = _Page(
                    url=str(url),
                    status=response.status_code,
                    media="",
                    charset=None,
                    body=b"",
                    truncated=False,
                )
                return page, target
            media, charset = _media_type(response.headers.get("content-type", ""))
            body = bytearray()
            truncated = False
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    del body[max_bytes:]
                    truncated = True
                    break
                if len(body) >= 8192 and not _is_text(media, bytes(body[:8192])):
                    break  # binary: no need to read further to refuse it
            page = _Page(
                url=str(url),
                status=response.status_code,
                media=media,
                charset=charset,
                body=bytes(body),
                truncated=truncated,
            )
            return page, ""

    async def _follow(self, ctx: ToolContext, start: httpx.URL, max_bytes: int) -> Result | _Page:
        import httpx

        url = start
        for _ in range(self.opts.max_redirects + 1):
            url, ip = await self._target(ctx, url)
            page, target = await self._hop(url, ip, max_bytes)
            if not target:
                return page
            nxt = httpx.URL(target)
            if nxt.scheme not in ("http", "https"):
                raise ToolError(f"{url} redirects to {target}, which is not an http(s) URL")
            if nxt.host.lower() != url.host.lower():
                return Result(
                    content=(
                        f"{url} redirects (HTTP {page.status}) to another host: {target}\n"
                        "Redirects to another host are not followed. To read that page, call "
                        "fetch again with this URL."
                    ),
                    metadata={"redirect": target, "status": page.status},
                )
            url = nxt
        raise ToolError(
            f"{start} redirected more than {self.opts.max_redirects} times; giving up. Try the "
            "final URL directly."
        )

    async def fetch(self, args: dict[str, Any], ctx: ToolContext) -> Result:
        import httpx

        raw_url: str = args["url"].strip()
        fmt: str = args.get("format", "markdown")
        max_bytes = min(args.get("max_bytes") or self.opts.max_bytes, self.opts.max_bytes)
        try:
            url = httpx.URL(raw_url)
        except httpx.InvalidURL as exc:
            raise ToolError(f"invalid URL {raw_url!r}: {exc}; give a full http(s) URL") from exc
        if url.scheme not in ("http", "https") or not url.host:
            raise ToolError(
                f"cannot fetch {raw_url!r}: give a full http:// or https:// URL with a host"
            )
        url = url.copy_with(fragment=None)
        cache: OrderedDict[tuple[str, str, int], tuple[float, Result]] = ctx.state.setdefault(
            _CACHE_KEY, OrderedDict()
        )
        key = (str(url), fmt, max_bytes)
        hit = cache.get(key)
        if hit is not None and hit[0] > time.monotonic():
            cache.move_to_end(key)
            return hit[1].with_metadata(cached=True)
        timeout = self.opts.timeout_ms / 1000
        remaining = ctx.remaining()
        if remaining is not None:
            timeout = min(timeout, remaining)
        try:
            outcome = await asyncio.wait_for(self._follow(ctx, url, max_bytes), timeout)
        except TimeoutError:
            raise ToolError(
                f"fetching {url} took longer than {timeout:g} s and was stopped; the site may "
                "be slow or the page too large. Try again later or another URL."
            ) from None
        except httpx.HTTPError as exc:
            raise ToolError(f"could not fetch {url}: {exc or type(exc).__name__}") from exc
        result = outcome if isinstance(outcome, Result) else self._result(outcome, fmt)
        if not result.is_error:
            cache[key] = (time.monotonic() + self.opts.cache_ttl_s, result)
            while len(cache) > self.opts.cache_entries:
                cache.popitem(last=False)
        return result

    def _result(self, page: _Page, fmt: str) -> Result:
        if not _is_text(page.media, page.body[:8192]):
            raise ToolError(
                f"{page.url} returned {page.media or 'an unknown type'} content, which is not "
                "text; fetch reads web pages and text only."
            )
        text, how = _convert(_decode(page.body, page.charset), page.media, fmt)
        notes = []
        if page.truncated:
            notes.append(
                f"[The page is larger than {len(page.body)} bytes; only the beginning was read. "
                "Pass a larger max_bytes to read more.]"
            )
        limit = self.opts.max_output_chars
        cut = len(text) > limit
        if cut:
            notes.append(
                f"[Cut at {limit} of {len(text)} characters. Use format 'text' for less "
                "markup, or fetch a more specific page.]"
            )
            text = text[:limit]
        status = "" if 200 <= page.status < 300 else f"HTTP {page.status} from {page.url}\n\n"
        content = "\n\n".join([status + text, *notes]) if notes else status + text
        return Result(
            content=content,
            is_error=page.status >= 400,
            metadata={
                "url": page.url,
                "status": page.status,
                "content_type": page.media,
                "bytes": len(page.body),
                "conversion": how,
                "truncated": page.truncated or cut,
            },
        )


_DESCRIPTION = """\
Fetch a web page or text resource over HTTP(S) and return its content: HTML converted to \
Markdown (format 'markdown', the default) or to plain text ('text'), or the body as is \
('raw'); JSON is pretty-printed. Binary content (images, PDFs, archives) is refused.
At most max_bytes of the body are read (default and maximum {max_bytes} bytes) and about \
{max_chars} characters returned; a note says when the page was cut. http:// is upgraded to \
https:// for public hosts. A redirect to another host is not followed: the result gives the \
new URL, which you may fetch next. Local, private and cloud-metadata addresses are refused. \
Results are cached for {ttl} minutes. Fetching takes at most {timeout} s."""


def fetch_tools(options: Mapping[str, Any]) -> list[Tool]:
    """The `fetch` tool.

    Args:
        options: `max_bytes`, `max_output_chars`, `timeout_ms`, `max_redirects`, `cache_ttl_s`,
            `cache_entries` (positive integers), `allow_private`, `upgrade_http` (booleans),
            `allow_hosts` (list of host names, `*.domain` globs, addresses or networks whose
            private addresses may be reached) and `user_agent`.

    Raises:
        ConfigError: an unknown option or a bad value.
    """
    opts = _options(options)
    fetcher = _Fetcher(opts)
    return [
        Tool(
            name="fetch",
            description=_DESCRIPTION.format(
                max_bytes=opts.max_bytes,
                max_chars=opts.max_output_chars,
                ttl=opts.cache_ttl_s // 60,
                timeout=opts.timeout_ms // 1000,
            ),
            parameters={
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The http:// or https:// URL."},
                    "format": {
                        "type": "string",
                        "enum": ["markdown", "text", "raw"],
                        "default": "markdown",
                        "description": "How to return HTML: Markdown, plain text, or as is.",
                    },
                    "max_bytes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": opts.max_bytes,
                        "description": "Read at most this many bytes of the body.",
                    },
                },
                "required": ["url"],
                "additionalProperties": False,
            },
            handler=fetcher.fetch,
            source="builtin",
            read_only=True,
            destructive=False,
            idempotent=True,
            open_world=True,
            # Its network rules are its own options and its own `sandbox:` block: the
            # manifest's `defaults.sandbox` (network off for processes) must not cut it off.
            meta={"sandbox_defaults": False},
        )
    ]
