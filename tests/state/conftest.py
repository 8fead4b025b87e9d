"""A real `redis-server` (the Debian package) on a free port, in the test's folder."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..conftest import free_port

STARTUP = 20.0
"""Bound on redis-server answering after it starts (the machine is shared)."""


def _answers(port: int) -> bool:
    """True when something on `port` answers PING like Redis."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    """One redis-server process; `stop` and `start` again on the same port (a Redis that goes
    away mid-run and comes back)."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + STARTUP
        while not _answers(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)  # polling a port: there is no event to wait on

    def stop(self) -> None:
        """Kill it (SIGKILL: no goodbye to its clients) and reap it."""
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait(timeout=15)


@contextlib.contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    """A started `RedisServer` in `folder`, killed on the way out: what the `redis_server`
    fixtures of other folders (serve, mcp_auth) yield too."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed: apt-get install redis-server (see .ci/run)")
    server = RedisServer(folder=folder)
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


LIMITED = """
version: 1
middleware:
  - rate_limit: {calls: 3, per: 1h, max_wait: 0}
tools:
  - name: ping
    command: [echo, pong]
"""
"""Three calls an hour, refused past that (`max_wait: 0`): what the shared-limit tests count."""
