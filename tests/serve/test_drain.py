"""Graceful drain of `toolnexus serve --http` on SIGTERM, through a real process and client.

A rollout sends SIGTERM, then SIGKILL after a grace period: the calls in flight must finish
with their real answers, new sessions must go elsewhere (503, and `/healthz` says `draining`
so the balancer stops routing here), and the process must exit by itself once idle, or once
the grace period is over.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client

from ..conftest import free_port

SLOW = '''
import asyncio

async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"
'''


@contextmanager
def served(tmp_path: Path, *flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    (tmp_path / "slowmod.py").write_text(textwrap.dedent(SLOW), encoding="utf-8")
    manifest = tmp_path / "tools.yaml"
    manifest.write_text("version: 1\ntools:\n  - {name: slow, python: 'slowmod:slow'}\n")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "toolnexus", "serve", str(manifest), "--http", f"127.0.0.1:{port}",
         *flags],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    try:
        for line in process.stderr:  # bounded by the test's timeout
            if "Application startup complete" in line:
                break
        yield process, f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.stderr.close()


def exited(process: subprocess.Popen[str], within: float) -> bool:
    deadline = time.monotonic() + within
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return process.poll() is not None


@pytest.mark.anyio
async def test_sigterm_finishes_the_call_in_flight_and_refuses_new_sessions(
    tmp_path: Path,
) -> None:
    with served(tmp_path, "--grace", "20") as (process, base):
        async with httpx2.AsyncClient(timeout=30) as http:
            streams = streamable_http_client(f"{base}/mcp", http_client=http)
            async with mcp.Client(streams) as client:
                with anyio.fail_after(30):
                    async with anyio.create_task_group() as group:
                        answers: list[str] = []

                        async def call() -> None:
                            result = await client.call_tool("slow", {"seconds": 2.0})
                            answers.append(result.content[0].text)  # type: ignore[union-attr]

                        group.start_soon(call)
                        await anyio.sleep(0.5)  # the call is running on the server
                        process.send_signal(signal.SIGTERM)
                        await anyio.sleep(0.3)
                        async with httpx2.AsyncClient(timeout=5) as other:
                            health = await other.get(f"{base}/healthz")
                            assert health.status_code == 503
                            assert health.json() == {"status": "draining", "inflight": 1}
                            fresh = await other.post(
                                f"{base}/mcp",
                                json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {}},
                                headers={"Accept": "application/json, text/event-stream"},
                            )
                            assert fresh.status_code == 503
                            assert fresh.json()["error"] == "draining"
                        assert process.poll() is None  # still serving the call
                    assert answers == ["slept 2.0"]  # the real answer, not a cut connection
        assert exited(process, 10), "the server did not exit once idle"


def hold_a_call(base: str, seconds: float) -> threading.Thread:
    """A handshake-era client, in a thread, whose call runs `seconds` on the server."""

    def run() -> None:
        headers = {"Accept": "application/json, text/event-stream"}
        hello = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "drain-test", "version": "1"}},
        }
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": seconds}}}
        with httpx.Client(timeout=seconds + 30) as http, contextlib.suppress(httpx.HTTPError):
            opened = http.post(f"{base}/mcp", json=hello, headers=headers)
            headers["mcp-session-id"] = opened.headers.get("mcp-session-id", "")
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            http.post(f"{base}/mcp", json=done, headers=headers)
            http.post(f"{base}/mcp", json=call, headers=headers)  # cut when the server stops

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_call_longer_than_the_grace_period_does_not_hold_the_exit(tmp_path: Path) -> None:
    with served(tmp_path, "--grace", "1") as (process, base):
        hold_a_call(base, 60.0)
        time.sleep(1.0)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert process.poll() is None  # draining: the call is in flight
        # The grace (1 s), then uvicorn's close of what is left (2 s at most).
        assert exited(process, 8), "the server outlived its grace period"


def test_a_second_signal_stops_at_once(tmp_path: Path) -> None:
    with served(tmp_path, "--grace", "60") as (process, base):
        hold_a_call(base, 60.0)
        time.sleep(1.0)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert process.poll() is None  # draining, waiting on the call
        process.send_signal(signal.SIGTERM)
        assert exited(process, 8), "a second signal must stop the server"
