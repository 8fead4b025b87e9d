"""Shared fixtures: anyio runs async tests on asyncio."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from toolnexus.runtime.sandbox import detect

FIXTURES = Path(__file__).parent / "fixtures"
MCP_SERVERS = Path(__file__).parent / "mcp_servers"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def http_server() -> Iterator[Any]:
    """A real HTTP server on 127.0.0.1 (see tests/fixtures/http/server.py for its routes)."""
    module = sys.modules.get("toolnexus_test_http_server") or _load(
        "toolnexus_test_http_server", FIXTURES / "http" / "server.py"
    )
    with module.serve() as running:
        yield running


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler for a test server's own routes: it logs nothing, and `send` writes a
    whole answer."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, status: int, ctype: str, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


def start_http_server(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """A threaded HTTP server on a free port of 127.0.0.1, serving `handler` from a daemon
    thread, for tests whose server needs its own routes; end it with `stop_http_server`."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def stop_http_server(httpd: ThreadingHTTPServer) -> None:
    httpd.shutdown()
    httpd.server_close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for a server in another process."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], seconds: float) -> None:
    """Until the server `proc` accepts connections on 127.0.0.1:`port`; RuntimeError when it
    exits, or `seconds` pass, first."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the HTTP MCP server did not start") from None
            time.sleep(0.05)  # polling a port: there is no event to wait on


def only_mechanism(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave only the sandbox mechanism `name` ("bwrap" or "landlock") enabled, through
    TOOLNEXUS_SANDBOX_DISABLE; skip the test when it does not work on this machine."""
    monkeypatch.setenv("TOOLNEXUS_SANDBOX_DISABLE", "landlock" if name == "bwrap" else "bwrap")
    detect.cache_clear()
    status = getattr(detect(), name)
    if not status.available:
        pytest.skip(f"{name} does not work on this machine: {status.reason}")


def in_forked_child(action: Callable[[], object]) -> str:
    """Run `action` in a child made by `fork()`; return the name of the exception it raised
    (with its message) or "returned"."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, then leave at once
        try:
            action()
            outcome = "returned"
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            outcome = f"{type(exc).__name__}: {exc}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(pid, 0)
    return outcome


class OutputLines:
    """A child's output read line by line on a thread: a wait for a line is bounded, and the
    pipe is drained meanwhile, so a chatty child never blocks on a full pipe."""

    def __init__(self, stream: Any) -> None:
        import queue

        self._stream = stream
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        for line in self._stream:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(
        self, match: Callable[[str], bool], *, what: str, seconds: float, count: int = 1
    ) -> str:
        """The `count`-th line `match` accepts; AssertionError naming `what` (with the output so
        far) when the child ends or `seconds` pass first."""
        import queue

        deadline = time.monotonic() + seconds
        seen = 0
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{what} did not start:\n" + "".join(self.log)) from None
            if line is None:
                raise AssertionError(f"{what} exited:\n" + "".join(self.log))
            self.log.append(line)
            seen += match(line)
            if seen >= count:
                return line

    def close(self) -> None:
        """Once the child has ended: let the reader finish, then close the stream."""
        self._reader.join(timeout=15)
        self._stream.close()
