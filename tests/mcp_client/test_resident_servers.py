"""Sandboxed stdio MCP servers started by the toolkit's resident launcher (issue 21): the server
is forked by the launcher of its policy, under its reaper (under bwrap, inside the resident
bwrap of its binds, in namespaces of its own, as a shell command is). Either way the server
stays confined, its whole process tree ends with its session and with the toolkit's process,
its stderr and the sandbox's refusals are still explained, and `status` says how it was
started.

Every test runs under bwrap and under Landlock (`TOOLNEXUS_SANDBOX_DISABLE=bwrap`), with real
`MCPServer` processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolnexus import create_toolkit
from toolnexus.base import Result, ToolContext
from toolnexus.errors import ToolError
from toolnexus.mcp.server import McpServer, McpServerState
from toolnexus.mcp.spec import McpServerSpec
from toolnexus.runtime.resident import Launchers
from toolnexus.runtime.sandbox import SandboxPolicy

from ..conftest import only_mechanism

SPAWNER = Path(__file__).with_name("spawner_server.py")
LAUNCH = {"landlock": "resident", "bwrap": "resident"}
"""How each mechanism starts a sandboxed server."""
POLICY = SandboxPolicy(filesystem="workspace-write", network=False)
SANDBOXED = {
    "command": sys.executable,
    "args": [str(SPAWNER)],
    "sandbox": {"filesystem": "workspace-write", "network": False},
    "connect_timeout": 60,
}
"""The spawner under POLICY, as a manifest's `mcp_servers` entry (for the toolkit-level tests)."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["bwrap", "landlock"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    only_mechanism(request.param, monkeypatch)
    return request.param


@pytest.fixture
def launchers() -> Iterator[Launchers]:
    owned = Launchers()
    yield owned
    owned.close()


def spec(*args: str) -> McpServerSpec:
    mapping = {"command": sys.executable, "args": [str(SPAWNER), *args], "connect_timeout": 60}
    return McpServerSpec.from_mapping("spawner", mapping, base_dir=SPAWNER.parent)


async def call(server: McpServer, name: str, /, **arguments: object) -> Result:
    found = {t.name: t for t in server.tools()}
    context = ToolContext(call_id="c1", tool_name=name, workspace=SPAWNER.parent)
    with anyio.fail_after(30):
        return await found[name].run(dict(arguments), context)


def sleepers(marker: str) -> set[int]:
    """Pids of the `sleep MARKER` processes running now (found by their command line, since a
    pid from inside bwrap's pid namespace means nothing here)."""
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline == f"sleep\0{marker}\0".encode() and state != b"Z":
            found.add(int(name))
    return found


async def gone(marker: str) -> bool:
    """Whether every `sleep MARKER` has ended within 10 s (polled: a process's end elsewhere
    in the system has no event to wait on)."""
    with anyio.move_on_after(10):
        while sleepers(marker):
            await anyio.sleep(0.05)
        return True
    return False


def marker() -> str:
    """A `sleep` duration no other process on the machine uses."""
    return f"300.{uuid.uuid4().int % 10**9}"


async def started_with_escapee(server: McpServer) -> str:
    """Start `server` and have it leave a `setsid` sleeper behind; the sleeper's marker."""
    seconds = marker()
    await server.start()
    await call(server, "escape", seconds=seconds)
    return seconds


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


@pytest.mark.anyio
async def test_a_sandboxed_server_starts_as_its_mechanism_allows_and_stays_confined(
    tmp_path: Path, mechanism: str, launchers: Launchers
) -> None:
    server = McpServer(spec(), sandbox=POLICY, workspace=tmp_path, launchers=launchers)
    try:
        await server.start()
        status = server.status
        assert (status.sandbox, status.launch) == (mechanism, LAUNCH[mechanism])
        assert status.to_dict()["launch"] == LAUNCH[mechanism]
        if mechanism == "landlock":
            # server <- ... (its reaper, Landlock's supervisor) <- the resident launcher <- us
            line = [int((await call(server, "pid")).content)]
            while line[-1] not in (os.getpid(), 1):
                line.append(parent(line[-1]))
            assert line[-1] == os.getpid()
            assert b"resident" in Path(f"/proc/{line[-2]}/cmdline").read_bytes()
        assert launchers.running == 1
        inside = await call(server, "write", path=str(tmp_path / "in.txt"), text="ok")
        assert inside.content == "written" and (tmp_path / "in.txt").read_text() == "ok"
        outside = SPAWNER.parent / f"escape-{uuid.uuid4().hex}.txt"
        refused = await call(server, "write", path=str(outside), text="no")
        assert "write failed" in refused.content
        assert not outside.exists()
    finally:
        await server.aclose()
    assert server.status.state is McpServerState.CLOSED


@pytest.mark.anyio
async def test_closing_the_server_ends_its_whole_tree_escapees_included(
    tmp_path: Path, mechanism: str, launchers: Launchers
) -> None:
    server = McpServer(spec(), sandbox=POLICY, workspace=tmp_path, launchers=launchers)
    try:
        seconds = await started_with_escapee(server)
        assert sleepers(seconds), "the escapee did not start"
    finally:
        await server.aclose()
    assert await gone(seconds), f"a {mechanism} server's setsid child outlived its session"


@pytest.mark.anyio
async def test_a_crashed_server_is_restarted_the_same_way_and_its_leftovers_end(
    tmp_path: Path, mechanism: str, launchers: Launchers
) -> None:
    server = McpServer(spec(), sandbox=POLICY, workspace=tmp_path, launchers=launchers)
    try:
        seconds = await started_with_escapee(server)
        first = (await call(server, "pid")).content
        with pytest.raises(ToolError, match="closed the connection"):
            await call(server, "crash")
        assert await gone(seconds), "the crashed server's escapee outlived it"
        again = await call(server, "pid")
        assert not again.is_error, again.content
        assert again.metadata.get("restarted") is True
        if mechanism == "landlock":  # under bwrap every server is pid 2 of its namespace
            assert again.content != first
        status = server.status
        assert (status.restarts, status.launch) == (1, LAUNCH[mechanism])
    finally:
        await server.aclose()


CHILD = """
import os, sys, time
from toolnexus import create_toolkit
kit = create_toolkit({manifest!r}, workspace={workspace!r})
assert kit.status()["spawner"]["state"] == "ready", kit.status()
print(kit.status()["spawner"]["launch"], flush=True)
print(kit.execute("escape", {{"seconds": {seconds!r}}}).content, flush=True)
time.sleep(600)
"""


def test_the_servers_tree_dies_with_the_toolkits_process(tmp_path: Path, mechanism: str) -> None:
    seconds = marker()
    manifest = {
        "version": 1,
        "mcp_servers": {"spawner": SANDBOXED},
    }
    code = CHILD.format(manifest=manifest, workspace=str(tmp_path), seconds=seconds)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == LAUNCH[mechanism]
        assert child.stdout.readline().strip().isdigit()
        assert sleepers(seconds)
    finally:
        child.send_signal(signal.SIGKILL)  # nothing of the toolkit runs after this
        child.wait(30)
    assert anyio.run(gone, seconds), "the server's tree outlived the toolkit's process"


@pytest.mark.anyio
async def test_a_refused_start_quotes_stderr_and_names_the_policy(
    tmp_path: Path, mechanism: str, launchers: Launchers
) -> None:
    data = SPAWNER.parent / f"data-{uuid.uuid4().hex}.jsonl"
    server = McpServer(
        spec("--data", str(data)), sandbox=POLICY, workspace=tmp_path, launchers=launchers
    )
    try:
        with pytest.raises(Exception, match="did not start"):
            await server.start()
        status = server.status
        assert status.state is McpServerState.FAILED
        assert (status.sandbox, status.launch) == (mechanism, LAUNCH[mechanism])
        reason = status.reason or ""
        assert data.name in reason, reason  # the server's own error, from its stderr
        assert "the sandbox (filesystem: workspace-write) does not let it write" in reason
        assert f"add `writable: [{SPAWNER.parent}]`" in reason
    finally:
        await server.aclose()
        data.unlink(missing_ok=True)


def test_the_toolkit_status_reports_how_a_server_was_started(
    tmp_path: Path, mechanism: str
) -> None:
    manifest = {
        "version": 1,
        "mcp_servers": {
            "spawner": SANDBOXED,
            "plain": {"command": sys.executable, "args": [str(SPAWNER)], "prefix": "plain_"},
        },
    }
    with create_toolkit(manifest, workspace=tmp_path) as kit:
        status = kit.status()
        assert status["spawner"]["launch"] == LAUNCH[mechanism]
        assert status["spawner"]["sandbox"] == mechanism
        assert status["plain"]["launch"] == "per-call"  # no sandbox: started directly
        assert kit.execute("pid", {}).content.isdigit()


@pytest.mark.anyio
async def test_the_launcher_is_asked_for_on_the_loops_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launchers: Launchers
) -> None:
    """The launcher dies when the *thread* that started it ends (its parent-death signal): it
    must be started by the loop's thread, which lives as long as the toolkit, never by a
    worker thread that is retired when idle."""
    only_mechanism("landlock", monkeypatch)
    asked_from: list[int] = []
    launch = launchers.launch

    def recording(*args: Any, **keys: Any) -> Any:
        asked_from.append(threading.get_ident())
        return launch(*args, **keys)

    monkeypatch.setattr(launchers, "launch", recording)
    server = McpServer(spec(), sandbox=POLICY, workspace=tmp_path, launchers=launchers)
    try:
        await server.start()
        assert server.status.launch == "resident"
    finally:
        await server.aclose()
    assert asked_from == [threading.get_ident()]


@pytest.mark.anyio
async def test_without_a_resident_launcher_a_landlock_server_starts_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only_mechanism("landlock", monkeypatch)
    closed = Launchers()
    closed.close()
    for launchers in (None, closed):
        server = McpServer(spec(), sandbox=POLICY, workspace=tmp_path, launchers=launchers)
        try:
            await server.start()
            assert (server.status.sandbox, server.status.launch) == ("landlock", "per-call")
            assert (await call(server, "pid")).content.isdigit()
        finally:
            await server.aclose()
