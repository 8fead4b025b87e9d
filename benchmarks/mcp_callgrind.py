"""Instructions per MCP call in the client process: a direct `mcp.Client.call_tool` vs
`toolkit.aexecute` of the same tool, counted by valgrind's callgrind (steady where wall time on
a loaded machine is not).

    python benchmarks/mcp_callgrind.py          # needs valgrind; about two minutes

Each side runs in a process of its own under callgrind (the servers run natively): after a
warm-up, `callgrind_control --dump` before and after N calls, so the second dump holds exactly
those calls. Not run by CI.
"""

from __future__ import annotations

import asyncio
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ECHO = str(ROOT / "benchmarks" / "fixtures" / "echo_server.py")
CALLS = 200


async def _calls(side: str) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from toolnexus import acreate_toolkit

    args = {"text": "hello"}
    entry = {"command": sys.executable, "args": [ECHO], "connect_timeout": 600}
    kit = await acreate_toolkit({"version": 1, "mcp_servers": {"bench": entry}})
    try:
        async with Client(StdioServerParameters(command=sys.executable, args=[ECHO])) as client:
            await client.list_tools()

            def call() -> object:
                if side == "toolkit":
                    return kit.aexecute("echo", args)
                return client.call_tool("echo", args)

            for _ in range(50):
                await call()
            _dump(1)
            for _ in range(CALLS):
                await call()
            _dump(2)
    finally:
        await kit.aclose()


def _dump(number: int) -> None:
    """Ask callgrind for dump `number` and wait until it is written: callgrind reads the request
    between two blocks of this process, so going on at once would count calls on the wrong
    side of it."""
    subprocess.run(
        ["callgrind_control", "-d", str(os.getpid())], check=True, stdout=subprocess.DEVNULL
    )
    written = Path(f"{os.environ['CALLGRIND_OUT'].replace('%p', str(os.getpid()))}.{number}")
    while not written.exists():
        time.sleep(0.01)


def _count(side: str, folder: str) -> float:
    out = os.path.join(folder, f"{side}.%p")
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
         __file__, "--side", side],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONHASHSEED": "0", "CALLGRIND_OUT": out}, cwd=ROOT,
    )  # fmt: skip
    (second,) = glob.glob(os.path.join(folder, f"{side}.*.2"))
    for line in Path(second).read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1]) / CALLS
    raise RuntimeError(f"no summary in {second}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--side":
        sys.path.insert(0, str(ROOT))
        asyncio.run(_calls(sys.argv[2]))
        return
    with tempfile.TemporaryDirectory() as folder:
        direct = _count("direct", folder)
        toolkit = _count("toolkit", folder)
    print(f"\n## MCP: instructions per call in the client (callgrind, {CALLS} calls)\n")
    print("| measurement | instructions | note |")
    print("|---|---:|---|")
    print(f"| direct `mcp.Client.call_tool` (stdio MCPServer, echo) | {direct:,.0f} | |")
    print(
        f"| `toolkit.aexecute` of the same tool | {toolkit:,.0f} | "
        f"**{toolkit / direct:.3f}×** direct; {toolkit - direct:,.0f} more per call |"
    )


if __name__ == "__main__":
    main()
