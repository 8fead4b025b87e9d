"""Shared state: what a Redis-backed `rate_limit` and `cache` cost per call, against the
in-process store, in the same run (a real `redis-server` on 127.0.0.1, started here).

    python benchmarks/run.py state     # as a section of the benchmarks
    python benchmarks/state.py         # alone

Wall time first: the Redis round trip is time the call waits on a socket. Toolkits are
measured in alternating batches so that the machine's drift hits them alike. CPU time per call
of this process is given beside it: on a shared machine it moves far less with the load than
the wait for Redis (and for a core to run on) does. The load average is in the title.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import Row, table


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis(folder: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", folder],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("redis-server did not start") from None
            time.sleep(0.05)  # polling a port: there is no event to wait on


async def _interleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], *, number: int, rounds: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median per-call µs of each entry, wall time and this process's CPU time, measured in
    alternating batches."""
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            gc.disable()
            start, used = time.perf_counter(), time.process_time()
            for _ in range(number):
                await fn()
            wall[name].append((time.perf_counter() - start) / number * 1e6)
            cpu[name].append((time.process_time() - used) / number * 1e6)
            gc.enable()
    return (
        {name: statistics.median(values) for name, values in wall.items()},
        {name: statistics.median(values) for name, values in cpu.items()},
    )


async def _measure(url: str) -> list[Row]:
    from toolnexus import acreate_toolkit, tool
    from toolnexus.middleware import cache, rate_limit

    @tool(read_only=True)
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    args = {"a": 2, "b": 3}
    # A limit no benchmark reaches: what is measured is the reservation, never a wait.
    limit = rate_limit(10**9, per=1.0)
    kits = {
        "plain": await acreate_toolkit(extra_tools=[add]),
        "memory limit": await acreate_toolkit(extra_tools=[add], middleware=[limit]),
        "redis limit": await acreate_toolkit(extra_tools=[add], middleware=[limit], state=url),
        "memory cache": await acreate_toolkit(extra_tools=[add], middleware=[cache(3600)]),
        "redis cache": await acreate_toolkit(
            extra_tools=[add], middleware=[cache(3600)], state=url
        ),
    }
    try:
        for kit in kits.values():  # warm up: validators, chains, connections, the script
            for _ in range(500):
                await kit.aexecute("add", args)
        store = kits["redis limit"].store
        times, cpu = await _interleaved(
            {
                **{name: (lambda k=kit: k.aexecute("add", args)) for name, kit in kits.items()},
                "ping": store.check,
            },
            number=1_000,
            rounds=9,
        )
    finally:
        for kit in kits.values():
            await kit.aclose()
    base = times["plain"]
    added = times["redis limit"] - times["memory limit"]
    return [
        ("`aexecute`, no middleware", base, "µs", "baseline"),
        (
            "`aexecute` + `rate_limit`, in-process store",
            times["memory limit"],
            "µs",
            f"overhead {times['memory limit'] - base:.2f} µs",
        ),
        (
            "`aexecute` + `rate_limit`, Redis store (one Lua script round trip)",
            times["redis limit"],
            "µs",
            f"Redis adds {added:.2f} µs over in-process; target ≤ 500 µs",
        ),
        (
            "CPU per call of this process: `rate_limit`, in-process store",
            cpu["memory limit"],
            "µs",
            "process time, in the same batches",
        ),
        (
            "CPU per call of this process: `rate_limit`, Redis store",
            cpu["redis limit"],
            "µs",
            f"the round trip costs {cpu['redis limit'] - cpu['memory limit']:.2f} µs of CPU "
            "here (redis-py packing, sending, parsing; the rest of the wall time is waiting)",
        ),
        (
            "`aexecute` + `cache` hit, in-process store",
            times["memory cache"],
            "µs",
            f"overhead {times['memory cache'] - base:.2f} µs (the result object itself, kept)",
        ),
        (
            "`aexecute` + `cache` hit, Redis store (one GET)",
            times["redis cache"],
            "µs",
            f"Redis adds {times['redis cache'] - times['memory cache']:.2f} µs over in-process",
        ),
        (
            "redis-py asyncio PING alone (the floor of any round trip here)",
            times["ping"],
            "µs",
            "informational",
        ),
    ]


def bench() -> None:
    """Print the section's table."""
    if shutil.which("redis-server") is None:
        raise SystemExit("the state benchmark needs redis-server (apt-get install redis-server)")
    before = _load()
    with tempfile.TemporaryDirectory() as folder:
        process, url = _start_redis(folder)
        try:
            rows = asyncio.run(_measure(url))
        finally:
            process.kill()
            process.wait(timeout=15)
    table(
        "Shared state: rate limit and cache per call, in-process vs Redis (wall time; load "
        f"average {before} before, {_load()} after)",
        rows,
    )


def _load() -> str:
    return "/".join(f"{figure:.1f}" for figure in os.getloadavg())


if __name__ == "__main__":
    bench()
