"""The caller cancels `aexecute` mid-call, for every source: a sync and an async Python
function, a shell command, an HTTP request, an MCP tool (stdio). The cancellation reaches the
caller (it is the one case that is not a result), the toolkit keeps serving, and (through
`no_leaks`) nothing is left running once the toolkit closes: no process, no thread, no fd.
Both kinds of toolkit: one on the caller's loop, and a sync one reached from another loop.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolnexus import Toolkit, acreate_toolkit, create_toolkit, tool

from .conftest import SOAK, descendants, resident_launchers

pytestmark = pytest.mark.anyio

MCP_SERVER = '''
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("waits")


@server.tool()
async def wait(marker: str) -> str:
    """Touch the marker, then take long."""
    Path(marker).touch()
    await anyio.sleep(30)
    return "done"


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


server.run()
'''

SYNC_STARTED = threading.Event()
RELEASE = threading.Event()
ASYNC_STARTED: list[asyncio.Event] = []
HTTP_STARTED = threading.Event()


@tool
def py_sync() -> str:
    """Block until released."""
    SYNC_STARTED.set()
    RELEASE.wait(30)
    return "late"


@tool
async def py_async() -> str:
    """Wait for ever."""
    ASYNC_STARTED[-1].set()
    await asyncio.Event().wait()
    return "never"


@tool
def quick() -> str:
    """Answer at once."""
    return "quick"


class _Hang(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        HTTP_STARTED.set()
        RELEASE.wait(30)


@pytest.fixture
def http_url(no_leaks: None) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hang)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hang"
    finally:
        RELEASE.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def _manifest(tmp_path: Path, http_url: str) -> dict[str, Any]:
    (tmp_path / "waits.py").write_text(MCP_SERVER)
    marker = tmp_path / "shell-started"
    return {
        "version": 1,
        "workspace": str(tmp_path),
        "tools": [
            {"name": "shell", "command": ["sh", "-c", f"touch {marker}; exec sleep 30"]},
            {"name": "http", "http": {"url": http_url, "timeout": 30}},
        ],
        "mcp_servers": {
            "mcp": {
                "command": sys.executable,
                "args": [str(tmp_path / "waits.py")],
                "prefix": "mcp_",
            }
        },
    }


Opened = Callable[[], Awaitable[Toolkit]]


@pytest.fixture(params=["caller-loop", "own-loop"])
async def toolkit(
    request: pytest.FixtureRequest, tmp_path: Path, http_url: str
) -> AsyncIterator[Toolkit]:
    SYNC_STARTED.clear()
    RELEASE.clear()
    HTTP_STARTED.clear()
    ASYNC_STARTED.clear()
    manifest = _manifest(tmp_path, http_url)
    tools = [py_sync, py_async, quick]
    if request.param == "caller-loop":
        tk = await acreate_toolkit(manifest, extra_tools=tools)
    else:
        tk = await asyncio.to_thread(create_toolkit, manifest, extra_tools=tools)
    try:
        assert tk.status()["mcp"]["state"] == "ready", tk.status()
        yield tk
    finally:
        RELEASE.set()
        if request.param == "caller-loop":
            await tk.aclose()
        else:
            await asyncio.to_thread(tk.close)


async def _started(name: str, tmp_path: Path) -> None:
    """Until the call under test is really running in its tool."""
    while True:
        if name == "py_sync" and SYNC_STARTED.is_set():
            return
        if name == "py_async" and ASYNC_STARTED[-1].is_set():
            return
        if name == "http" and HTTP_STARTED.is_set():
            return
        if name == "shell" and (tmp_path / "shell-started").exists():
            return
        if name == "mcp_wait" and (tmp_path / "mcp-started").exists():
            return
        await asyncio.sleep(0.01)


def _arguments(name: str, tmp_path: Path) -> dict[str, Any]:
    return {"marker": str(tmp_path / "mcp-started")} if name == "mcp_wait" else {}


@pytest.mark.parametrize("name", ["py_sync", "py_async", "shell", "http", "mcp_wait"])
async def test_the_caller_cancelling_mid_call_gets_its_cancellation_and_the_toolkit_serves(
    toolkit: Toolkit, tmp_path: Path, name: str
) -> None:
    ASYNC_STARTED.append(asyncio.Event())
    children = descendants()
    with anyio.fail_after(20):
        call = asyncio.ensure_future(toolkit.aexecute(name, _arguments(name, tmp_path)))
        await _started(name, tmp_path)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await toolkit.aexecute("quick")).content == "quick"
        assert (await toolkit.aexecute("mcp_echo", {"text": "still"})).content == "still"
        if name == "shell":  # the command's process is gone, not left to run its 30 s
            while descendants() - children - resident_launchers():
                await asyncio.sleep(0.01)
    assert toolkit.status()["mcp"]["state"] == "ready"


@pytest.mark.skipif(not SOAK, reason="soak variant: set TOOLNEXUS_SOAK=1")
async def test_soak_cancel_mcp_and_shell_calls_over_and_over(
    toolkit: Toolkit, tmp_path: Path
) -> None:
    for _ in range(500):
        for name in ("shell", "mcp_wait"):
            for marker in ("shell-started", "mcp-started"):
                (tmp_path / marker).unlink(missing_ok=True)
            call = asyncio.ensure_future(toolkit.aexecute(name, _arguments(name, tmp_path)))
            await _started(name, tmp_path)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
    assert (await toolkit.aexecute("mcp_echo", {"text": "still"})).content == "still"
