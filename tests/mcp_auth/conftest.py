"""Fixtures for OAuth: the protected MCP server and its authorization server in a subprocess,
a token store in tmp_path, and a scripted browser."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..conftest import wait_for_port

SERVERS = Path(__file__).parent / "servers.py"


@dataclass
class Protected:
    """The running pair: the MCP endpoint and the authorization server."""

    url: str
    issuer: str

    def state(self) -> dict[str, Any]:
        return httpx.get(f"{self.issuer}/test/state").json()

    def revoke(self) -> None:
        """Every token dies, refresh tokens too."""
        httpx.post(f"{self.issuer}/test/revoke").raise_for_status()

    def expire(self) -> None:
        """Access tokens die; refresh tokens stay good."""
        httpx.post(f"{self.issuer}/test/expire").raise_for_status()


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def start_protected(access_ttl: int = 3600) -> tuple[Protected, subprocess.Popen[bytes]]:
    # Bound here and handed over: a port that was free a moment ago may not be by the time
    # another process binds it (seen in CI: 'address already in use').
    as_sock, mcp_sock = _listening(), _listening()
    as_port, mcp_port = as_sock.getsockname()[1], mcp_sock.getsockname()[1]
    with as_sock, mcp_sock:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(SERVERS),
                "--as-port",
                str(as_port),
                "--as-fd",
                str(as_sock.fileno()),
                "--mcp-port",
                str(mcp_port),
                "--mcp-fd",
                str(mcp_sock.fileno()),
                "--access-ttl",
                str(access_ttl),
            ],
            pass_fds=(as_sock.fileno(), mcp_sock.fileno()),
        )
    wait_for_port(as_port, proc, 30)
    wait_for_port(mcp_port, proc, 30)
    return Protected(f"http://127.0.0.1:{mcp_port}/mcp", f"http://127.0.0.1:{as_port}"), proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def protected() -> Iterator[Protected]:
    server, proc = start_protected()
    yield server
    _stop(proc)


@pytest.fixture
def token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "toolnexus" / "tokens.json"
    monkeypatch.setenv("TOOLNEXUS_TOKEN_STORE", str(path))
    return path


class ScriptedBrowser:
    """A "user" who follows the authorization page's redirect back to the loopback listener
    (the authorization server approves at once), recording the URLs it was sent to."""

    def __init__(self) -> None:
        self.visited: list[str] = []

    async def __call__(self, url: str) -> None:
        self.visited.append(url)
        async with httpx.AsyncClient(follow_redirects=True, timeout=10) as client:
            answer = await client.get(url)
        assert answer.status_code == 200, answer.text


@pytest.fixture
def browser() -> ScriptedBrowser:
    return ScriptedBrowser()
