"""HTTP tools against a misbehaving server (real, on 127.0.0.1): it hangs before the headers,
drips its body, streams for ever, sends a huge body, hangs up, redirects in a loop, answers
garbage JSON, or is not there. Each case checks what the model reads, that the toolkit keeps
serving, and (through `no_leaks`) that no fd, thread or child process is left behind.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from toolnexus import Toolkit, create_toolkit

from .conftest import SOAK


@dataclass
class _State:
    release: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def _headers(self, status: int, length: int | None, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()

    def do_GET(self) -> None:
        release = self.server.state.release
        self.close_connection = True
        try:
            if self.path == "/ok":
                self._headers(200, 2)
                self.wfile.write(b"ok")
            elif self.path == "/hang":  # never a status line
                release.wait(30)
            elif self.path == "/drip":  # headers at once, then a byte now and then
                self._headers(200, 1_000_000)
                while not release.wait(0.05):
                    self.wfile.write(b"d")
                    self.wfile.flush()
            elif self.path == "/endless":  # no length, no end
                self._headers(200, None)
                while not release.is_set():
                    self.wfile.write(b"e" * 65536)
            elif self.path == "/huge":  # 50 MB, announced
                self._headers(200, 50_000_000)
                for _ in range(50_000_000 // 65536):
                    if release.is_set():
                        break
                    self.wfile.write(b"h" * 65536)
            elif self.path == "/drop":  # read the request, hang up without a word
                self.connection.shutdown(socket.SHUT_RDWR)
            elif self.path == "/loop":
                self.send_response(302)
                self.send_header("Location", "/loop")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/garbage":
                body = b'{"items": [1, 2,, }\x00\xff'
                self._headers(200, len(body), "application/json")
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up on us: expected


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # clients hanging up is the point of these tests


@pytest.fixture
def server(no_leaks: None) -> Iterator[tuple[str, _State]]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.state = _State()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.state
    finally:
        httpd.state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def _tool(name: str, url: str, **http: Any) -> dict[str, Any]:
    return {"name": name, "http": {"url": url, "timeout": 1, **http}}


@pytest.fixture
def toolkit(server: tuple[str, _State]) -> Iterator[Toolkit]:
    base, _ = server
    manifest = {
        "version": 1,
        "tools": [
            _tool("ok", f"{base}/ok"),
            _tool("hang", f"{base}/hang"),
            _tool("drip", f"{base}/drip"),
            _tool("endless", f"{base}/endless", max_response=100_000),
            _tool("huge", f"{base}/huge"),
            _tool("drop", f"{base}/drop"),
            _tool("loop", f"{base}/loop", follow_redirects=True),
            _tool("loop_reported", f"{base}/loop"),
            _tool("garbage", f"{base}/garbage"),
            _tool("garbage_strict", f"{base}/garbage", response={"format": "json"}),
            _tool("absent", "http://127.0.0.1:9/nothing-listens-here"),
        ],
    }
    tk = create_toolkit(manifest)
    try:
        yield tk
    finally:
        tk.close()


def _serves(tk: Toolkit) -> None:
    assert tk.execute("ok").content == "ok"


@pytest.mark.parametrize("name", ["hang", "drip"])
def test_a_server_that_never_finishes_answering_is_a_timeout(toolkit: Toolkit, name: str) -> None:
    started = time.monotonic()
    result = toolkit.execute(name)
    assert result.is_error and result.metadata["retryable"] is True
    assert "timed out after 1s" in result.content
    assert time.monotonic() - started < 10  # bounded generously: the point is "not for ever"
    _serves(toolkit)


@pytest.mark.parametrize(("name", "cap"), [("endless", 100_000), ("huge", 1_000_000)])
def test_an_endless_or_huge_body_is_cut_at_max_response(
    toolkit: Toolkit, name: str, cap: int
) -> None:
    result = toolkit.execute(name)
    assert not result.is_error
    assert result.metadata["truncated"] is True
    assert f"[response cut at {cap:,} bytes" in result.content
    assert len(result.content) < 40_000  # and max_output keeps head and tail of what was read
    _serves(toolkit)


def test_a_server_that_hangs_up_is_a_retryable_error(toolkit: Toolkit) -> None:
    result = toolkit.execute("drop")
    assert result.is_error and result.metadata["retryable"] is True
    assert "failed: the server broke the HTTP protocol" in result.content
    _serves(toolkit)


def test_a_redirect_loop_is_cut_short_or_reported(toolkit: Toolkit) -> None:
    followed = toolkit.execute("loop")
    assert followed.is_error and "redirected more than 10 times" in followed.content
    reported = toolkit.execute("loop_reported")
    assert reported.is_error and "redirects to /loop" in reported.content
    _serves(toolkit)


def test_garbage_json_is_text_or_an_error_saying_so(toolkit: Toolkit) -> None:
    lenient = toolkit.execute("garbage")
    assert not lenient.is_error and lenient.content.startswith('{"items": [1, 2,, }')
    strict = toolkit.execute("garbage_strict")
    assert strict.is_error and "the response is not valid JSON" in strict.content
    _serves(toolkit)


def test_nothing_listening_is_a_retryable_connect_error(toolkit: Toolkit) -> None:
    result = toolkit.execute("absent")
    assert result.is_error and "could not connect to the server" in result.content
    _serves(toolkit)


def test_faults_side_by_side_do_not_hold_up_a_good_call(toolkit: Toolkit) -> None:
    from toolnexus import ToolCall

    names = ["hang", "drip", "endless", "drop", "garbage", "ok"]
    results = toolkit.execute_many([ToolCall(name=n) for n in names])
    assert results[-1].content == "ok"
    assert [r.is_error for r in results] == [True, True, False, True, False, False]


@pytest.mark.skipif(not SOAK, reason="soak variant: set TOOLNEXUS_SOAK=1")
def test_soak_faulty_endpoints_for_a_while(toolkit: Toolkit) -> None:
    for _ in range(500):
        for name in ("drop", "garbage", "loop", "endless", "absent"):
            assert toolkit.execute(name).content
        _serves(toolkit)
