"""fetch against a real threaded HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builtin.fetch import fetch_tools
from toolnexus import ConfigError, Result, SandboxPolicy, ToolContext, ToolError

from ..conftest import QuietHandler, start_http_server, stop_http_server

pytestmark = pytest.mark.anyio

PAGE = b"""<html><head><title>T</title><script>var secret = 1;</script></head>
<body><h1>Title</h1><p>Some <b>bold</b> text and a <a href="/next">link</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""


class Server:
    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.release = threading.Event()
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                port = self.server.server_address[1]
                if self.path == "/page.html":
                    self.send(200, "text/html; charset=utf-8", PAGE)
                elif self.path == "/data.json":
                    self.send(200, "application/json", b'{"a":[1,2],"b":{"c":"\xc3\xa9"}}')
                elif self.path == "/image.png":
                    self.send(200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
                elif self.path == "/host":
                    self.send(200, "text/plain", self.headers["Host"].encode())
                elif self.path == "/counter":
                    self.send(200, "text/plain", f"hit {server.hits[self.path]}".encode())
                elif self.path == "/missing":
                    self.send(404, "text/plain", b"no such page")
                elif self.path == "/same-host":
                    self.send(302, "text/plain", b"", Location="/page.html")
                elif self.path == "/other-host":
                    location = f"http://localhost:{port}/page.html"
                    self.send(302, "text/plain", b"", Location=location)
                elif self.path == "/loop":
                    self.send(302, "text/plain", b"", Location="/loop")
                elif self.path == "/endless":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    try:
                        while not server.release.is_set():
                            self.wfile.write(b"x" * 65536)
                    except (BrokenPipeError, ConnectionResetError):
                        return
                elif self.path == "/hang":
                    server.release.wait(10)
                else:
                    self.send(404, "text/plain", b"unknown")

        self.httpd = start_http_server(Handler)
        self.port = self.httpd.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.release.set()
        stop_http_server(self.httpd)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


async def fetch(
    tmp_path: Path, options: dict[str, Any] | None = None, sandbox: SandboxPolicy | None = None,
    state: dict[str, Any] | None = None, **args: Any,
) -> Result:  # fmt: skip
    (tool,) = fetch_tools(options if options is not None else {"allow_hosts": ["127.0.0.1"]})
    ctx = ToolContext(
        call_id="c1",
        tool_name="fetch",
        workspace=tmp_path,
        sandbox=sandbox,
        state=state if state is not None else {},
    )
    return await tool.run(args, ctx)


async def test_loopback_is_refused_unless_allowed(tmp_path: Path, server: Server) -> None:
    with pytest.raises(ToolError, match=r"resolves to 127\.0\.0\.1, a loopback address"):
        await fetch(tmp_path, {}, url=server.url("/page.html"))
    with pytest.raises(ToolError, match="a loopback address"):
        await fetch(tmp_path, {}, url=server.url("/page.html", host="localhost"))
    allowed = await fetch(tmp_path, {"allow_private": True}, url=server.url("/page.html"))
    assert "# Title" in allowed.content
    by_network = await fetch(
        tmp_path, {"allow_hosts": ["127.0.0.0/8"]}, url=server.url("/page.html")
    )
    assert "# Title" in by_network.content
    with pytest.raises(ToolError, match="a private address"):
        await fetch(tmp_path, {"allow_hosts": ["127.0.0.1", "localhost"]}, url="http://10.0.0.1/")


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[fd00:ec2::254]/latest/", "cloud metadata"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://192.168.0.1/", "private"),
        ("http://0.0.0.0:8080/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://[fe80::1]/", "link-local"),
    ],
)
async def test_internal_addresses_are_refused(tmp_path: Path, url: str, kind: str) -> None:
    with pytest.raises(ToolError, match=f"a {kind} address"):
        await fetch(tmp_path, {}, url=url)


async def test_html_becomes_markdown_text_or_raw(tmp_path: Path, server: Server) -> None:
    md = await fetch(tmp_path, url=server.url("/page.html"))
    assert "# Title" in md.content
    assert "Some **bold** text and a [link](/next)." in md.content
    assert "* one" in md.content or "- one" in md.content
    assert "secret" not in md.content
    assert md.metadata["conversion"] == "HTML converted to Markdown"
    text = await fetch(tmp_path, url=server.url("/page.html"), format="text")
    assert "Title" in text.content and "#" not in text.content and "secret" not in text.content
    raw = await fetch(tmp_path, url=server.url("/page.html"), format="raw")
    assert raw.content == PAGE.decode()


async def test_json_is_pretty_printed(tmp_path: Path, server: Server) -> None:
    result = await fetch(tmp_path, url=server.url("/data.json"))
    assert result.content == json.dumps(
        {"a": [1, 2], "b": {"c": "é"}}, indent=2, ensure_ascii=False
    )


async def test_binary_content_is_refused_with_its_type(tmp_path: Path, server: Server) -> None:
    with pytest.raises(ToolError, match="returned image/png content, which is not text"):
        await fetch(tmp_path, url=server.url("/image.png"))


async def test_an_endless_body_is_cut_at_max_bytes(tmp_path: Path, server: Server) -> None:
    result = await fetch(tmp_path, url=server.url("/endless"), max_bytes=50_000)
    body, note = result.content.split("\n\n", 1)
    assert body == "x" * 50_000
    assert "larger than 50000 bytes" in note
    assert result.metadata["truncated"]


async def test_same_host_redirects_are_followed(tmp_path: Path, server: Server) -> None:
    result = await fetch(tmp_path, url=server.url("/same-host"))
    assert "# Title" in result.content
    assert result.metadata["url"] == server.url("/page.html")


async def test_redirects_to_another_host_are_reported_not_followed(
    tmp_path: Path, server: Server
) -> None:
    before = server.hits.get("/page.html", 0)
    result = await fetch(tmp_path, url=server.url("/other-host"))
    target = server.url("/page.html", host="localhost")
    assert f"redirects (HTTP 302) to another host: {target}" in result.content
    assert "call fetch again with this URL" in result.content
    assert result.metadata["redirect"] == target
    assert server.hits.get("/page.html", 0) == before


async def test_redirect_loops_stop(tmp_path: Path, server: Server) -> None:
    with pytest.raises(ToolError, match="redirected more than 2 times"):
        await fetch(
            tmp_path, {"allow_hosts": ["127.0.0.1"], "max_redirects": 2}, url=server.url("/loop")
        )


async def test_host_header_keeps_the_name_while_connecting_to_the_checked_address(
    tmp_path: Path, server: Server
) -> None:
    result = await fetch(
        tmp_path, {"allow_hosts": ["localhost"]}, url=server.url("/host", "localhost")
    )
    assert result.content == f"localhost:{server.port}"


async def test_repeated_urls_come_from_the_cache(tmp_path: Path, server: Server) -> None:
    state: dict[str, Any] = {}
    first = await fetch(tmp_path, state=state, url=server.url("/counter"))
    second = await fetch(tmp_path, state=state, url=server.url("/counter"))
    assert first.content == second.content
    assert second.metadata["cached"]
    assert server.hits["/counter"] == 1


async def test_http_errors_are_error_results_with_the_body(tmp_path: Path, server: Server) -> None:
    result = await fetch(tmp_path, url=server.url("/missing"))
    assert result.is_error
    assert result.content == f"HTTP 404 from {server.url('/missing')}\n\nno such page"


async def test_a_server_that_never_answers_times_out(tmp_path: Path, server: Server) -> None:
    options = {"allow_hosts": ["127.0.0.1"], "timeout_ms": 300}
    with pytest.raises(ToolError, match=r"took longer than 0\.3 s"):
        await fetch(tmp_path, options, url=server.url("/hang"))


async def test_the_sandbox_network_setting_applies(tmp_path: Path, server: Server) -> None:
    with pytest.raises(ToolError, match="allows no network access"):
        await fetch(tmp_path, sandbox=SandboxPolicy(network=False), url=server.url("/page.html"))
    with pytest.raises(ToolError, match="not on the sandbox's network list"):
        await fetch(
            tmp_path, sandbox=SandboxPolicy(network=("example.com",)), url=server.url("/page.html")
        )


async def test_bad_urls_are_explained(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="give a full http:// or https:// URL"):
        await fetch(tmp_path, url="file:///etc/passwd")
    with pytest.raises(ToolError, match="give a full http:// or https:// URL"):
        await fetch(tmp_path, url="example.com/page")


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown option 'allow_privat'"):
        fetch_tools({"allow_privat": True})
    with pytest.raises(ConfigError, match="expected a list of host names"):
        fetch_tools({"allow_hosts": "localhost"})
    (tool,) = fetch_tools({})
    assert (tool.read_only, tool.open_world, tool.destructive) == (True, True, False)
