"""Start-up: a fresh process to its first tool result, toolkit vs the bare SDK, same run.

Each sample starts a new interpreter that connects to one stdio `MCPServer` (the echo
fixture), calls `echo` once and prints the answer; the time is taken when the answer line
arrives (the process's shutdown is not counted). Runs alternate toolkit / SDK so that load
from other processes hits both alike.

    python benchmarks/startup.py        # or: python benchmarks/run.py startup
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import FIXTURES, ROOT, Row, spread, table

ECHO = str(FIXTURES / "echo_server.py")

TOOLKIT = f"""
import sys
from toolnexus import create_toolkit
tk = create_toolkit({{"version": 1, "mcp_servers": {{"s": {{"command": sys.executable,
                     "args": [{ECHO!r}]}}}}}})
print(tk.execute("echo", {{"text": "ready"}}).content, flush=True)
tk.close()
"""

SDK = f"""
import sys
import anyio
from mcp import Client, StdioServerParameters

async def main():
    params = StdioServerParameters(command=sys.executable, args=[{ECHO!r}])
    async with Client(params) as client:
        result = await client.call_tool("echo", {{"text": "ready"}})
        print(result.content[0].text, flush=True)

anyio.run(main)
"""

TOOLKIT_TWO = f"""
import sys
from toolnexus import create_toolkit
server = {{"command": sys.executable, "args": [{ECHO!r}]}}
tk = create_toolkit({{"version": 1, "mcp_servers": {{"a": {{**server, "prefix": "a_"}},
                     "b": {{**server, "prefix": "b_"}}}}}})
print(tk.execute("b_echo", {{"text": "ready"}}).content, flush=True)
tk.close()
"""

SDK_TWO = f"""
import sys
import anyio
from mcp import Client, StdioServerParameters

async def main():
    params = StdioServerParameters(command=sys.executable, args=[{ECHO!r}])
    clients, ready, done = [], anyio.Event(), anyio.Event()

    async def connect():  # a client is entered and left by one task
        async with Client(params) as client:
            clients.append(client)
            if len(clients) == 2:
                ready.set()
            await done.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(connect)
        tg.start_soon(connect)
        await ready.wait()
        result = await clients[1].call_tool("echo", {{"text": "ready"}})
        print(result.content[0].text, flush=True)
        done.set()

anyio.run(main)
"""

RELOAD = """
import sys, time
from pathlib import Path
from toolnexus import create_toolkit
manifest = Path(sys.argv[1])
with create_toolkit(manifest, watch=True) as tk:
    print(tk.execute("first", {}).content, flush=True)
    manifest.write_text(manifest.read_text() + sys.argv[2])
    start = time.perf_counter()
    while "echo" not in tk.names():
        time.sleep(0.005)
    result = tk.execute("echo", {"text": "ready"}).content
    print(f"{result} {(time.perf_counter() - start) * 1000:.1f}", flush=True)
"""
RELOAD_BASE = """version: 1
tools:
  - name: first
    command: [echo, first]
"""
RELOAD_ADD = f"""mcp_servers:
  s: {{command: {sys.executable!r}, args: [{ECHO!r}]}}
"""


def first_result_ms(code: str, *args: str) -> tuple[float, str]:
    """Milliseconds from starting `python -c code` to the first line it prints, and that
    line; the process is then left to finish on its own."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    elapsed = (time.perf_counter() - start) * 1000
    rest = process.stdout.read()
    process.wait(timeout=60)
    return elapsed, f"{line}\n{rest}".strip()


def bench_startup(runs: int = 9) -> None:
    toolkit: list[float] = []
    sdk: list[float] = []
    toolkit_two: list[float] = []
    sdk_two: list[float] = []
    bare: list[float] = []
    for i in range(runs):
        order = [(TOOLKIT, toolkit), (SDK, sdk), (TOOLKIT_TWO, toolkit_two), (SDK_TWO, sdk_two)]
        for code, into in order if i % 2 == 0 else reversed(order):
            ms, out = first_result_ms(code)
            assert out.startswith("ready"), out
            into.append(ms)
        bare.append(first_result_ms("print('ready', flush=True)")[0])
    ratios = [t / s for t, s in zip(toolkit, sdk, strict=True)]
    ratios_two = [t / s for t, s in zip(toolkit_two, sdk_two, strict=True)]
    rows: list[Row] = [
        ("bare interpreter (`python -c print`)", statistics.median(bare), "ms", spread(bare)),
        (
            "SDK: `import mcp` + `mcp.Client` connect + `call_tool`",
            statistics.median(sdk),
            "ms",
            f"runs {spread(sdk)} ms",
        ),
        (
            "toolnexus: `create_toolkit` + `execute`",
            statistics.median(toolkit),
            "ms",
            f"runs {spread(toolkit)} ms",
        ),
        (
            "ratio toolnexus / SDK (median of paired runs)",
            statistics.median(ratios),
            "×",
            f"target ≤ 0.8×; pairs {spread(ratios)}",
        ),
        (
            "SDK, two servers: two `mcp.Client`s connected concurrently + `call_tool`",
            statistics.median(sdk_two),
            "ms",
            f"runs {spread(sdk_two)} ms",
        ),
        (
            "toolnexus, two stdio servers: `create_toolkit` + `execute`",
            statistics.median(toolkit_two),
            "ms",
            f"**{statistics.median(ratios_two):.2f}×** the SDK's; pairs {spread(ratios_two)}",
        ),
    ]
    reload: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(max(3, runs // 3)):
            manifest = Path(folder) / "tools.yaml"
            manifest.write_text(RELOAD_BASE)
            _, out = first_result_ms(textwrap.dedent(RELOAD), str(manifest), RELOAD_ADD)
            last = out.splitlines()[-1].split()
            assert last[0] == "ready", out
            reload.append(float(last[1]))
    rows.append(
        (
            "hot reload adds the stdio server: file saved to its first result",
            statistics.median(reload),
            "ms",
            f"runs {spread(reload)} ms (includes the watcher's debounce)",
        )
    )
    table("Start-up: fresh process to the first result (one stdio MCPServer)", rows)


if __name__ == "__main__":
    bench_startup()
