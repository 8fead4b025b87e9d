"""Hosts: the host of a URL argument and host patterns (`api.example.com`, `*.example.com`).

A URL is read three ways, and its host is known only when all three agree:

- as RFC 3986 reads it (`urllib.parse`),
- as httpx reads it (the client the `fetch` tool and HTTP tools connect with),
- as the WHATWG URL Standard reads it (browsers, and many clients and proxies written to it):
  `\\` is a `/` in http(s) URLs, `http:/x` and `http:x` mean host `x`, tabs and newlines are
  dropped, percent-escapes in the host are decoded, IDNA (UTS 46) maps the name, and a host
  that ends in a number is an IPv4 address in any of its shorthand spellings
  (`2130706433`, `0x7f.1`, `0177.0.0.1`).

When the readings disagree, or one of them fails, the host is unknown: it matches every deny
and ask rule and no allow rule. So the host a rule decides on is the one httpx would connect
to, and the one a browser-minded reader (a model, a proxy) sees. Comparison is
case-insensitive, IDNA-normalised (`bücher.example` = `xn--bcher-kva.example`), ignores a
trailing dot, and an IPv4-mapped IPv6 address (`[::ffff:127.0.0.1]`) is also read as its IPv4
address.

Separate because both front ends (the `host` matcher of `rules` and `domain:` in `permissions`)
share it, and URL parsing has its own pitfalls. The WHATWG reader is written here (only the
part that finds the host) rather than taken from a package: the maintained Python ports are
either bindings to a C++ library (`ada-url`) or unmaintained, and the host part is small.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Sequence
from urllib.parse import unquote_to_bytes, urlsplit

from ..errors import ConfigError

__all__: list[str] = []


_HOST_CHARS = re.compile(r"[a-z0-9_\-]+(?:\.[a-z0-9_\-]+)*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_C0_OR_SPACE = "".join(chr(i) for i in range(0x21))
_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
_SPECIAL = frozenset({"http", "https", "ws", "wss", "ftp", "file"})
# WHATWG "forbidden host code points", and the extra ones forbidden in a domain
_FORBIDDEN_HOST = frozenset("\0\t\n\r #/:<>?@[\\]^|")
_FORBIDDEN_DOMAIN = _FORBIDDEN_HOST | frozenset(chr(i) for i in range(0x20)) | {"%", "\x7f"}


def _idna(name: str) -> str | None:
    """`name` in ASCII by UTS 46 (non-transitional, as WHATWG and httpx's `idna` do)."""
    import idna

    try:
        return idna.encode(name, uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        return None


def _normal(host: str) -> str | None:
    """One reading of a host, normalised for comparison: lower case, no trailing dot, ASCII
    (IDNA), IPv6 compressed without brackets; None when it is not a plain host name."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        if "%" in host:  # a zone id: WHATWG refuses it, and it names no single address
            return None
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            return None
    host = host.lower()
    if host and _ends_in_number(host):
        # an address: only its canonical spelling is one every reader connects to alike
        # (httpx looks `127.0.0.1.` and `127.1` up as names)
        try:
            return host if str(ipaddress.IPv4Address(host)) == host else None
        except ValueError:
            return None
    return _normal_name(host)


def _normal_name(name: str) -> str | None:
    """A host name (or one label of it) in lower-case ASCII without its trailing dot."""
    name = name.lower().rstrip(".")
    if not name.isascii():
        converted = _idna(name)
        if converted is None:
            return None
        name = converted
    return name if _HOST_CHARS.fullmatch(name) else None


# --- the WHATWG reading ---------------------------------------------------------------------


def _ipv4_number(text: str) -> int | None:
    if not text:
        return None
    radix = 10
    if len(text) >= 2 and text[:2] in ("0x", "0X"):
        text, radix = text[2:], 16
    elif len(text) >= 2 and text[0] == "0":
        text, radix = text[1:], 8
    if not text:
        return 0
    digits = "0123456789abcdef"[:radix]
    if any(ch not in digits for ch in text.lower()):
        return None
    return int(text, radix)


def _ends_in_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    if last and all(ch in "0123456789" for ch in last):
        return True
    return _ipv4_number(last) is not None


def _ipv4(domain: str) -> str | None:
    """The WHATWG IPv4 parser: 1 to 4 parts, each decimal, octal (`0`) or hex (`0x`)."""
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        return None
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        return None
    address = values[-1] + sum(n * 256 ** (3 - i) for i, n in enumerate(values[:-1]))
    return str(ipaddress.IPv4Address(address))


def _whatwg_host(text: str) -> str | None:
    """The host of `text` as the WHATWG URL parser (no base URL) finds it, or None when the
    parser fails or the URL has no host."""
    text = _TAB_OR_NEWLINE.sub("", text.strip(_C0_OR_SPACE))
    match = _SCHEME.match(text)
    if match is None:
        return None
    scheme = match.group()[:-1].lower()
    rest = text[match.end() :]
    special = scheme in _SPECIAL
    if scheme == "file":
        return None  # a file URL's host is no network target a rule could mean
    if special:
        rest = rest.lstrip("/\\")
        authority = re.split(r"[/?#\\]", rest, maxsplit=1)[0]
    elif rest.startswith("//"):
        authority = re.split(r"[/?#]", rest[2:], maxsplit=1)[0]
    else:
        return None  # no authority, no host
    authority = authority[authority.rfind("@") + 1 :]  # credentials end at the last `@`
    host, port = _split_port(authority)
    if host is None or not host:
        return None
    if port and (not port.isdigit() or not port.isascii() or int(port) > 65535):
        return None
    if host.startswith("["):
        if not host.endswith("]"):
            return None
        return _normal(host)
    if not special:
        # an opaque host: kept as written, non-ASCII percent-encoded (so never a plain name)
        if not host.isascii() or any(ch in _FORBIDDEN_HOST for ch in host):
            return None
        return host
    domain = unquote_to_bytes(host).decode("utf-8", "replace")
    if domain.isascii() and not any(
        label.lower().startswith("xn--") for label in domain.split(".")
    ):
        ascii_domain = domain.lower()
    else:
        converted = _idna(domain)
        if converted is None:
            return None
        ascii_domain = converted
    if not ascii_domain or any(ch in _FORBIDDEN_DOMAIN for ch in ascii_domain):
        return None
    if _ends_in_number(ascii_domain):
        return _ipv4(ascii_domain)
    return ascii_domain


def _split_port(authority: str) -> tuple[str | None, str]:
    """(host, port text) of an authority without credentials; a `:` inside `[...]` is part of
    the host. None as the host when a port comes without one."""
    inside = False
    for i, ch in enumerate(authority):
        if ch == "[":
            inside = True
        elif ch == "]":
            inside = False
        elif ch == ":" and not inside:
            return (authority[:i] or None), authority[i + 1 :]
    return authority, ""


# --- the RFC 3986 readings ------------------------------------------------------------------


def _urllib_host(text: str) -> str | None:
    try:
        return urlsplit(text).hostname or None
    except ValueError:
        return None


def _httpx_host(text: str) -> str | None:
    """The host httpx would connect to (its `raw_host`: IDNA applied, brackets removed)."""
    import httpx

    try:
        raw = httpx.URL(text).raw_host
    except (httpx.InvalidURL, UnicodeError, ValueError):
        return None
    return raw.decode("ascii", "replace") or None


@functools.lru_cache(maxsize=256)
def _url_hosts(value: str) -> tuple[str, ...] | None:
    """The names a URL argument's host goes by (the host, and the IPv4 address an
    IPv4-mapped IPv6 host carries), or None when the readings disagree or one fails.

    A value without a scheme (`example.com/x`, `//example.com/x`) is read as an http URL.
    Cached: every host rule of a call reads the same URL (three parsers cost about 70 µs).
    """
    if _SCHEME.match(_TAB_OR_NEWLINE.sub("", value.lstrip(_C0_OR_SPACE))) is None:
        value = ("http:" if value.startswith("//") else "http://") + value
    readings = {_normal(h) if h is not None else None for h in _readings(value)}
    if len(readings) != 1:
        return None
    host = readings.pop()
    if host is None:
        return None
    if ":" in host:
        mapped = ipaddress.IPv6Address(host).ipv4_mapped
        if mapped is not None:
            return host, str(mapped)
    return (host,)


def _readings(value: str) -> tuple[str | None, str | None, str | None]:
    return _whatwg_host(value), _urllib_host(value), _httpx_host(value)


# --- patterns -------------------------------------------------------------------------------


def _compile_host(pattern: str, field: str) -> Callable[[str], bool]:
    text = pattern.strip().lower().rstrip(".")
    if "/" in text or "@" in text or not text:
        raise ConfigError(
            f"expected a host name such as api.example.com or *.example.com, got {pattern!r}",
            field=field,
        )
    if text == "*":
        return lambda host: True
    if ":" in text:
        address = _normal(text)
        if address is None:
            raise ConfigError(f"invalid IPv6 address {pattern!r}", field=field)
        return lambda host: host == address
    if "*" not in text and _ends_in_number(text):
        address = _normal(text)
        if address is None:
            raise ConfigError(
                f"invalid IPv4 address {pattern!r}: write it as four decimal numbers",
                field=field,
            )
        return lambda host: host == address
    subdomains = text.startswith("*.")
    labels = text[2:] if subdomains else text
    converted = [label if "*" in label else _normal_name(label) for label in labels.split(".")]
    if any(not label for label in converted):
        raise ConfigError(f"invalid host pattern {pattern!r}", field=field)
    base = ".".join(label for label in converted if label)
    if "*" not in base:
        if subdomains:
            suffix = "." + base
            return lambda host: host.endswith(suffix)
        return lambda host: host == base
    body = r"\.".join(
        "[^.]*".join(re.escape(p) for p in label.split("*")) for label in base.split(".")
    )
    regex = re.compile((r"(?:[^.]+\.)+" if subdomains else "") + body)
    return lambda host: regex.fullmatch(host) is not None


def _host_matches(patterns: Sequence[Callable[[str], bool]], value: str, strict: bool) -> bool:
    """Whether the host of URL `value` matches: for an allow rule (`strict`) every name the
    host goes by must match a pattern, for deny and ask one is enough; an unknown host
    matches deny and ask only."""
    hosts = _url_hosts(value)
    if hosts is None:
        return not strict
    hit = (any(p(host) for p in patterns) for host in hosts)
    return all(hit) if strict else any(hit)
