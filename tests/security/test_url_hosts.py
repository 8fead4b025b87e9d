"""URL host guards, attacked: `host:` matchers, `domain:` permissions and the `fetch` tool.

A URL's host is known only when RFC 3986 (`urllib.parse`), httpx and the WHATWG URL Standard
all read the same host; otherwise it matches every deny and ask rule and no allow rule. The
WHATWG table below is written from the spec's parsing rules (special-scheme slashes and
backslashes, credentials, tab/newline removal, percent-decoding, IDNA, the IPv4 parser).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolnexus import Toolkit, create_toolkit
from toolnexus.approval import compile_permissions, compile_rules
from toolnexus.approval.hosts import _normal, _url_hosts, _whatwg_host
from toolnexus.base import Result, Tool

from ..conftest import QuietHandler, start_http_server, stop_http_server

# --- the WHATWG reader, against the spec's rules ----------------------------------------------

WHATWG = [
    ("http://example.com/", "example.com"),
    ("HTTP://EXAMPLE.COM/", "example.com"),
    ("http:/evil.com/", "evil.com"),  # special schemes: any number of slashes
    ("http:evil.com", "evil.com"),
    ("http:\\\\evil.com\\x", "evil.com"),  # backslashes are slashes
    ("http:///evil.com/", "evil.com"),
    ("https:\\/evil.com/", "evil.com"),
    ("http://evil.com\\@good.com/", "evil.com"),  # `\` ends the authority
    ("http://good.com\\@evil.com/", "good.com"),
    ("http://a@b@evil.com/", "evil.com"),  # credentials end at the last `@`
    ("http://evil.com:80@good.com/", "good.com"),
    ("http://@evil.com/", "evil.com"),
    ("http://evil.com@/", None),  # credentials without a host
    ("http://evil.com%2f@good.com/", "good.com"),
    ("http://evil.com;@good.com/", "good.com"),
    ("http://evil.com#@good.com", "evil.com"),
    ("http://evil.com?@good.com", "evil.com"),
    ("http://ev\til.com/", "evil.com"),  # tabs and newlines are removed anywhere
    ("http://evil.com\n/", "evil.com"),
    (" \x00http://evil.com/ \x1f", "evil.com"),  # leading/trailing C0 and spaces stripped
    ("http://%65vil.com/", "evil.com"),  # the host is percent-decoded
    ("http://evil%2ecom/", "evil.com"),
    ("http://ex%00ample.com/", None),  # ... and a decoded forbidden code point fails
    ("http://exa mple.com/", None),
    ("http://2130706433/", "127.0.0.1"),  # IPv4: one number
    ("http://0x7f.1/", "127.0.0.1"),  # hex, two parts
    ("http://0177.0.0.1/", "127.0.0.1"),  # octal
    ("http://127.1/", "127.0.0.1"),
    ("http://0x7f000001/", "127.0.0.1"),
    ("http://0/", "0.0.0.0"),
    ("http://127.0.0.1./", "127.0.0.1"),  # a trailing dot is dropped by the IPv4 parser
    ("http://0x/", "0.0.0.0"),
    ("http://1.2.3.4.5/", None),  # more than four parts
    ("http://256.0.0.1/", None),  # a part over 255
    ("http://4294967296/", None),  # over 32 bits
    ("http://0x100000000/", None),
    ("http://foo.09/", None),  # ends in a number that is not one (9 is no octal digit)
    ("http://evil.com./", "evil.com."),  # a domain keeps its trailing dot
    ("http://bücher.example/", "xn--bcher-kva.example"),  # IDNA (UTS 46)
    ("http://xn--bcher-kva.example/", "xn--bcher-kva.example"),
    ("http://ｅｖｉｌ.com/", "evil.com"),  # full-width letters map to ASCII
    ("http://evil。com/", "evil.com"),  # an ideographic full stop is a dot
    ("http://faß.de/", "xn--fa-hia.de"),  # non-transitional: ß stays ß
    ("http://[::1]:8080/", "::1"),
    ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
    ("http://[fe80::1%25eth0]/", None),  # no zone ids
    ("http://[::1/", None),
    ("http://evil.com:99999/", None),  # port out of range
    ("http://evil.com:8x/", None),
    ("http://evil.com:/", "evil.com"),
    ("http:", None),
    ("http://", None),
    ("ws://evil.com/", "evil.com"),
    ("foo://Evil.com/x", "Evil.com"),  # non-special: an opaque host, as written
    ("foo:evil.com", None),  # non-special without `//`: no host
    ("sc://ñ.com/", None),  # an opaque host is percent-encoded, not mapped by IDNA
    ("http://[::1]x/", None),
    ("http://user:pa:ss@evil.com/", "evil.com"),
    ("ht\ttp://evil.com/", "evil.com"),  # even inside the scheme
    ("mailto:x@evil.com", None),
    ("file://evil.com/x", None),  # file hosts are not network targets here
    ("evil.com/x", None),  # no scheme and no base URL: failure
]


@pytest.mark.parametrize(("url", "host"), WHATWG)
def test_whatwg_reading(url: str, host: str | None) -> None:
    assert _whatwg_host(url) == host


# --- the guard: all readings must agree -------------------------------------------------------

GUARD = [
    ("https://example.com/x", ("example.com",)),
    ("HTTP://EVIL.COM/", ("evil.com",)),
    ("http://evil.com./", ("evil.com",)),  # a name's trailing dot changes nothing
    ("http://127.0.0.1./", None),  # an address's does: httpx looks `127.0.0.1.` up as a name
    ("http://user:pass@evil.com/", ("evil.com",)),
    ("http://a@b@evil.com/", ("evil.com",)),
    ("http://evil.com:80@good.com/", ("good.com",)),
    ("http://evil.com;@good.com/", ("good.com",)),
    ("http://evil.com#@good.com/", ("evil.com",)),
    ("http://evil.com?@good.com/", ("evil.com",)),
    ("http://[::1]:8080/", ("::1",)),
    ("http://[::ffff:127.0.0.1]/", ("::ffff:7f00:1", "127.0.0.1")),  # also its IPv4 name
    ("http://bücher.example/", ("xn--bcher-kva.example",)),
    ("http://faß.de/", ("xn--fa-hia.de",)),
    ("https://evil。com/", ("evil.com",)),
    ("ws://evil.com/", ("evil.com",)),
    ("evil.com/path", ("evil.com",)),  # no scheme: read as http
    ("//evil.com/", ("evil.com",)),
    ("http:/evil.com/", None),  # WHATWG: evil.com; RFC 3986 and httpx: no host
    ("http:evil.com", None),
    ("http:\\\\evil.com", None),
    ("http:///evil.com/", None),
    ("http://evil.com\\@good.com/", None),  # WHATWG: evil.com; RFC 3986 and httpx: good.com
    ("http://good.com\\@evil.com/", None),
    ("http://evil.com\\x", None),
    ("http://%65vil.com/", None),  # httpx would look up `%65vil.com`
    ("http://2130706433/", None),  # WHATWG: 127.0.0.1; httpx: a name (getaddrinfo: loopback)
    ("http://0x7f.1/", None),
    ("http://127.1/", None),
    ("http://0177.0.0.1/", None),
    ("http://0/", None),
    ("http://ev\til.com/", None),  # httpx refuses the tab
    (" http://evil.com/", None),  # httpx: no host
    ("http://evil.com\n", None),
    ("http://ｅｖｉｌ.com/", None),  # httpx refuses the name
    ("http://evil.com:99999/", None),  # httpx accepts the port, WHATWG does not
    ("http://[fe80::1%25eth0]/", None),
    ("evil.com:80/x", None),  # `evil.com:` reads as a scheme
    ("file:///etc/passwd", None),
    ("", None),
    ("http://", None),
]


@pytest.mark.parametrize(("url", "hosts"), GUARD)
def test_guard_reading(url: str, hosts: tuple[str, ...] | None) -> None:
    assert _url_hosts(url) == hosts


@pytest.mark.parametrize(("url", "hosts"), [g for g in GUARD if g[1] is not None])
def test_a_known_host_is_the_one_httpx_connects_to(url: str, hosts: tuple[str, ...]) -> None:
    try:
        raw = httpx.URL(url).raw_host.decode()
    except httpx.InvalidURL:
        raw = ""
    # a URL without scheme has no host for httpx: it connects nowhere
    assert _normal(raw) == hosts[0] if raw else "://" not in url


RULE_TOOL = Tool(
    name="fetch",
    description="d",
    parameters={"type": "object", "properties": {"url": {"type": "string"}}},
    handler=lambda args, ctx: Result(content=""),
)


def rule_matches(decision: str, host: str, url: str) -> bool:
    default = "deny" if decision == "allow" else "allow"
    rules = compile_rules(
        {"default": default, "rules": [{"decision": decision, "when": {"url": {"host": host}}}]}
    )
    return rules.decide(RULE_TOOL, {"url": url}, Path("/ws")).matched


def permission_matches(decision: str, host: str, url: str) -> bool:
    default = "deny" if decision == "allow" else "allow"
    perms = compile_permissions(**{decision: [f"fetch(domain:{host})"]}, default=default)
    return perms.decide(RULE_TOOL, {"url": url}, Path("/ws")).decision.value == decision


@pytest.mark.parametrize(("url", "hosts"), GUARD)
@pytest.mark.parametrize("front", [rule_matches, permission_matches])
def test_deny_by_any_reading_allow_by_all(
    url: str, hosts: tuple[str, ...] | None, front: Any
) -> None:
    for target in ("evil.com", "127.0.0.1", "good.com"):
        expected_deny = hosts is None or target in hosts
        expected_allow = hosts is not None and all(h == target for h in hosts)
        assert front("deny", target, url) is expected_deny, ("deny", target)
        assert front("ask", target, url) is expected_deny, ("ask", target)
        assert front("allow", target, url) is expected_allow, ("allow", target)


def test_ipv6_patterns_are_normalised() -> None:
    assert rule_matches("deny", "[0:0::1]", "http://[::1]/")
    assert rule_matches("allow", "::1", "http://[0::1]:81/")


# --- end to end: the builtin fetch tool against a real server on 127.0.0.1 --------------------


class Server:
    """Counts requests, so a refused URL can be shown not to have reached it."""

    def __init__(self) -> None:
        self.hits = 0
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.hits += 1
                self.send(200, "text/plain", b"hello from 127.0.0.1")

        self.httpd = start_http_server(Handler)
        self.port = self.httpd.server_address[1]

    def close(self) -> None:
        stop_http_server(self.httpd)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


# Spellings of http://127.0.0.1:PORT/ (and URLs some reader sends there).
LOOPBACK = [
    "http://2130706433:{port}/",
    "http://0x7f.1:{port}/",
    "http://0x7f000001:{port}/",
    "http://127.1:{port}/",
    "http://0177.0.0.1:{port}/",
    "http://0:{port}/",
    "http:/127.0.0.1:{port}/",
    "http:127.0.0.1:{port}/",
    "http:\\\\127.0.0.1:{port}/",
    "http://%31%32%37.0.0.1:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://localhost\\@127.0.0.1:{port}/",  # (localhost: no DNS query leaves the machine)
    "http://127.0.0.1:{port}\\@localhost/",
    "http://127.0.0.1\t:{port}/",
    "HTTP://127.0.0.1:{port}/",
    "http://127.0.0.1.:{port}/",
]


def toolkit(
    tmp_path: Path, approval: Any = None, *, private: bool = True, **manifest: Any
) -> Toolkit:
    options: dict[str, Any] = {"allow_private": private}
    if approval is not None:
        options["approval"] = approval
    return create_toolkit(
        {"version": 1, "builtins": {"fetch": options}, **manifest}, workspace=tmp_path
    )


@pytest.mark.parametrize("spelling", LOOPBACK)
def test_deny_host_refuses_every_spelling_of_loopback(
    tmp_path: Path, server: Server, spelling: str
) -> None:
    url = spelling.format(port=server.port)
    before = server.hits
    for manifest in (
        {"permissions": {"deny": ["fetch(domain:127.0.0.1)"]}},
        {"approval": {"default": "allow",
                      "rules": [{"decision": "deny", "when": {"url": {"host": "127.0.0.1"}}}]}},
    ):  # fmt: skip
        approval = manifest.pop("approval", None)
        with toolkit(tmp_path, approval, **manifest) as tk:
            result = tk.execute("fetch", {"url": url})
        assert result.is_error, result.content
        assert server.hits == before, f"{url} reached the server"


@pytest.mark.parametrize("spelling", LOOPBACK)
def test_allow_host_allows_only_the_plain_spelling(
    tmp_path: Path, server: Server, spelling: str
) -> None:
    url = spelling.format(port=server.port)
    approval = {
        "default": "ask",  # no approver: asking refuses
        "rules": [{"decision": "allow", "when": {"url": {"host": "127.0.0.1"}}}],
    }
    with toolkit(tmp_path, approval) as tk:
        before = server.hits
        result = tk.execute("fetch", {"url": url})
    if spelling.startswith("HTTP://127.0.0.1:"):
        assert result.content == "hello from 127.0.0.1"  # all readers agree: 127.0.0.1
        assert server.hits == before + 1
    else:
        assert result.is_error
        assert "approv" in result.content.lower()
        assert server.hits == before


def test_the_plain_url_reaches_the_server(tmp_path: Path, server: Server) -> None:
    """The control for the tests above: the setup does reach the server."""
    with toolkit(tmp_path) as tk:
        result = tk.execute("fetch", {"url": f"http://127.0.0.1:{server.port}/"})
    assert result.content == "hello from 127.0.0.1"


@pytest.mark.parametrize("spelling", LOOPBACK)
def test_fetch_refuses_loopback_spellings_by_itself(
    tmp_path: Path, server: Server, spelling: str
) -> None:
    """Without any rule, fetch's own refusal of private addresses holds for every spelling:
    it checks the address httpx's host resolves to, and connects to that address only."""
    before = server.hits
    with toolkit(tmp_path, private=False) as tk:
        result = tk.execute("fetch", {"url": spelling.format(port=server.port)})
    assert result.is_error
    assert server.hits == before
