"""MCP client protocol features: what progress forwarding costs per call, through the toolkit
and through the bare SDK client in the same run, against the same MCPServer script (each its
own copy), batches interleaved A-B-B-A so that other processes' load hits both alike."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from run import Row, table

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp_client" / "features_server.py"
STEPS = 5


def bench_mcp_client() -> None:
    table("MCP client: progress (stdio, 5 notifications per call)", asyncio.run(_bench()))


async def _bench() -> list[Row]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from toolnexus import acreate_toolkit

    entry = {"command": sys.executable, "args": [str(SERVER)], "connect_timeout": 60}
    toolkit = await acreate_toolkit({"version": 1, "mcp_servers": {"f": entry}})
    seen: list[Any] = []

    async def sdk_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    args = {"steps": STEPS}
    samples: dict[str, list[float]] = {"sdk": [], "toolkit": [], "toolkit_plain": []}
    try:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        async with Client(params) as client:
            await client.list_tools()
            calls: dict[str, Callable[[], Any]] = {
                "sdk": lambda: client.call_tool("work", args, progress_callback=sdk_progress),
                "toolkit": lambda: toolkit.aexecute("work", args, progress=seen.append),
                "toolkit_plain": lambda: toolkit.aexecute("work", args),
            }
            check = await calls["toolkit"]()
            assert check.content == f"did {STEPS} steps", check
            number = 10
            order = list(calls)
            for i in range(20):
                for name in order if i % 2 == 0 else reversed(order):
                    start = time.perf_counter()
                    for _ in range(number):
                        await calls[name]()
                    samples[name].append((time.perf_counter() - start) / number * 1e3)
    finally:
        await toolkit.aclose()
    sdk, kit, plain = (statistics.median(samples[k]) for k in ("sdk", "toolkit", "toolkit_plain"))
    return [
        ("bare mcp.Client call_tool with progress_callback", sdk, "ms", "the peer"),
        ("toolkit aexecute(progress=...)", kit, "ms", f"{kit / sdk:.2f}x the SDK"),
        ("toolkit aexecute, no progress callback", plain, "ms", f"{plain / sdk:.2f}x the SDK"),
    ]


if __name__ == "__main__":
    bench_mcp_client()
