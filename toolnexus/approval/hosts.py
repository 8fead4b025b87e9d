"""Hosts: the host of a URL argument and host patterns (`api.example.com`, `*.example.com`).

Case-insensitive and IDNA-normalised. A URL whose host cannot be read for sure never matches an
allow rule and always matches a deny or ask rule.

Separate because both front ends (the `host` matcher of `rules` and `domain:` in `permissions`)
share it, and URL parsing has its own pitfalls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..errors import ConfigError

__all__: list[str] = []


_HOST_CHARS = re.compile(r"[a-z0-9_.:\-]+")


def _ascii_host(host: str) -> str | None:
    host = host.lower().rstrip(".")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host if _HOST_CHARS.fullmatch(host) else None


def _url_host(value: str) -> str | None:
    """The host a URL argument points at, or None when it cannot be told for sure (parsers
    disagree on `\\` in the authority; control characters; undecodable names)."""
    text = value.strip()
    if "://" not in text and not text.startswith("//"):
        text = "//" + text
    authority = re.split(r"[/?#]", text.split("//", 1)[1], maxsplit=1)[0]
    if "\\" in authority or any(ord(ch) < 0x21 for ch in authority):
        return None
    from urllib.parse import unquote, urlsplit

    try:
        host = urlsplit(text).hostname
    except ValueError:
        return None
    if not host:
        return None
    return _ascii_host(unquote(host) if "%" in host else host)


def _compile_host(pattern: str, field: str) -> Callable[[str], bool]:
    text = pattern.strip().lower().rstrip(".")
    if "/" in text or "@" in text or not text:
        raise ConfigError(
            f"expected a host name such as api.example.com or *.example.com, got {pattern!r}",
            field=field,
        )
    if text == "*":
        return lambda host: True
    subdomains = text.startswith("*.")
    labels = text[2:] if subdomains else text
    converted = [label if "*" in label else _ascii_host(label) for label in labels.split(".")]
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
    host = _url_host(value)
    if host is None:
        return not strict
    return any(p(host) for p in patterns)
