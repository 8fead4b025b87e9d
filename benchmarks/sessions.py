"""Sessions shared through Redis: what the session check adds to a call in a handshake-era
session, and what adopting a session costs the replica that did not open it. Real `toolnexus
serve --http` processes and a real `redis-server`, all on 127.0.0.1.

    python benchmarks/run.py sessions  # as a section of the benchmarks
    python benchmarks/sessions.py      # alone

Calls go straight to a replica (no balancer: nginx is measured by `replicas`), one at a time,
in batches that take turns, so the machine's drift hits every row alike.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replicas import _process
from run import Row, table
from state import _free_port, _start_redis

BATCH, ROUNDS = 40, 9
"""Calls per batch, and batches per row."""
ADOPTIONS = 60
"""Sessions opened on one replica and first used on another."""

MANIFEST = """
version: 1
tools:
  - name: add
    python: benchtool:add
"""
TOOL = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


async def _open(http: Any, url: str) -> str:
    response = await http.post(url, json=INITIALIZE, headers=ACCEPT)
    sid = response.headers["mcp-session-id"]
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    answer = await http.post(url, json=ready, headers={**ACCEPT, "Mcp-Session-Id": sid})
    if answer.status_code != 202:
        raise SystemExit(f"initialized was answered {answer.status_code}")
    return sid


async def _send(http: Any, url: str, sid: str, message: dict[str, Any]) -> None:
    response = await http.post(url, json=message, headers={**ACCEPT, "Mcp-Session-Id": sid})
    if response.status_code != 200 or b'"result"' not in response.content:
        raise SystemExit(f"a request failed: {response.status_code} {response.content[:300]!r}")


async def _calls(urls: dict[str, str], redis_url: str) -> dict[str, float]:
    """Median ms of one `tools/call` in a session, per replica, in alternating batches; under
    "ping", a bare Redis PING from this process in the same turns (what one round trip to
    another process costs on this machine at this moment)."""
    import httpx2
    import redis.asyncio

    samples: dict[str, list[float]] = {key: [] for key in [*urls, "ping"]}
    store = redis.asyncio.Redis.from_url(redis_url)
    async with httpx2.AsyncClient(timeout=60) as http:
        sessions = {key: await _open(http, url) for key, url in urls.items()}
        for key, url in urls.items():  # warm up each path
            for _ in range(100):
                await _send(http, url, sessions[key], CALL)
        for _ in range(ROUNDS):
            for key, url in urls.items():
                begin = time.perf_counter()
                for _ in range(BATCH):
                    await _send(http, url, sessions[key], CALL)
                samples[key].append((time.perf_counter() - begin) / BATCH * 1e3)
            begin = time.perf_counter()
            for _ in range(BATCH):
                await store.ping()
            samples["ping"].append((time.perf_counter() - begin) / BATCH * 1e3)
    await store.aclose()
    return {key: statistics.median(values) for key, values in samples.items()}


async def _adoptions(opener: str, other: str) -> tuple[float, float]:
    """Median ms of a session's first request on a replica that did not open it (adoption:
    the record read, the handshake replayed, the request served), and of its second there."""
    import httpx2

    first: list[float] = []
    second: list[float] = []
    async with httpx2.AsyncClient(timeout=60) as http:
        for _ in range(ADOPTIONS):
            sid = await _open(http, opener)
            begin = time.perf_counter()
            await _send(http, other, sid, LIST)
            first.append((time.perf_counter() - begin) * 1e3)
            begin = time.perf_counter()
            await _send(http, other, sid, LIST)
            second.append((time.perf_counter() - begin) * 1e3)
            await http.delete(other, headers={"Mcp-Session-Id": sid})
    return statistics.median(first), statistics.median(second)


def bench() -> None:
    """Print the section's table."""
    import os

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        (folder / "benchtool.py").write_text(TOOL)
        (folder / "tools.yaml").write_text(MANIFEST)
        redis, redis_url = _start_redis(tmp)
        stack.callback(redis.wait, 15)
        stack.callback(redis.kill)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
        env["PYTHONPATH"] = os.pathsep.join([str(folder), str(Path(__file__).resolve().parents[1])])
        urls: dict[str, str] = {}
        for key, state in (("memory", "memory://"), ("redis", redis_url), ("redis2", redis_url)):
            port = _free_port()
            argv = [sys.executable, "-m", "toolnexus", "serve", str(folder / "tools.yaml")]
            argv += ["--http", f"127.0.0.1:{port}", "--state", state]
            stack.enter_context(_process(argv, folder, port, env))
            urls[key] = f"http://127.0.0.1:{port}/mcp"
        calls = asyncio.run(_calls({"memory": urls["memory"], "redis": urls["redis"]}, redis_url))
        adopted, held = asyncio.run(_adoptions(urls["redis"], urls["redis2"]))
    added = (calls["redis"] - calls["memory"]) * 1e3
    rows: list[Row] = [
        (
            "`tools/call` in a session, in-process store",
            calls["memory"],
            "ms",
            f"median of {ROUNDS} batches of {BATCH}, taking turns with the next row",
        ),
        (
            "the same, sessions shared through Redis",
            calls["redis"],
            "ms",
            f"the session check adds {added:.0f} µs per request (one GET; a touch at most "
            "every 3 minutes)",
        ),
        (
            "a bare Redis PING from the load generator, in the same turns",
            calls["ping"],
            "ms",
            "informational: one round trip to another process on this machine now",
        ),
        (
            "a session's first request on a replica that did not open it (`tools/list`)",
            adopted,
            "ms",
            f"median of {ADOPTIONS}: adoption, then the request; {adopted / held:.1f}× the next",
        ),
        ("its second request there", held, "ms", "the session is held: no adoption"),
    ]
    table("Sessions shared through Redis (one replica answering, no balancer)", rows)
    print(json.dumps({"load average": os.getloadavg()}))


if __name__ == "__main__":
    bench()
