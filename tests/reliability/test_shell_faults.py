"""Shell tools under faults: commands that hang, fork trees, escape their process group, close
their output, spew it, ignore SIGTERM, leave children behind, die of a signal, or are given up
on by the caller. Each case checks the result the model sees, that the toolkit keeps serving,
and (through `no_leaks`) that no fd, thread or child process is left; escapees, which leave the
toolkit's process tree when they are orphaned, are checked by the pids they write.

Every case runs with no sandbox, under bwrap, and under Landlock (`TOOLNEXUS_SANDBOX_DISABLE`
switches the other mechanism off, as in tests/test_sandbox.py). Under bwrap a pid a command
writes is one of its own namespace, meaningless outside: `no_leaks` sees the namespace's
processes, which stay in the toolkit's tree.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from toolnexus import Toolkit, acreate_toolkit
from toolnexus.runtime.sandbox import detect

from ..conftest import only_mechanism

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_leaks")]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    # Commands write their pids in a subfolder: under Landlock the workspace's root takes no
    # new file while a protected path (.git/hooks, even absent) lies beneath it.
    (workspace / "run").mkdir(parents=True)
    return workspace

MECHANISMS = ("none", "bwrap", "landlock")


@pytest.fixture(params=MECHANISMS)
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name: str = request.param
    if name != "none":
        only_mechanism(name, monkeypatch)
    yield name
    detect.cache_clear()


@contextlib.asynccontextmanager
async def toolkit(
    ws: Path, mechanism: str, script: str, **entry: Any
) -> AsyncIterator[Toolkit]:
    """A toolkit with the faulty tool `t` (a `shell: true` script) and a healthy `echo`."""
    manifest: dict[str, Any] = {
        "version": 1,
        "tools": [
            {"name": "t", "shell": True, "command": script, **entry},
            {"name": "echo", "command": ["echo", "still serving"]},
        ],
    }
    if mechanism != "none":
        manifest["defaults"] = {"sandbox": {"filesystem": "workspace-write"}}
    # Beside the workspace, not in it: under Landlock the manifest, a protected path, would
    # make the workspace's root folder one where no new file can be created.
    path = ws.parent / "tools.yaml"
    path.write_text(yaml.safe_dump(manifest))
    async with await acreate_toolkit(path, workspace=ws) as tk:
        yield tk
        await still_serving(tk)


async def still_serving(tk: Toolkit) -> None:
    result = await tk.aexecute("echo", {})
    assert (result.is_error, result.content) == (False, "still serving")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def survivors(pidfile: Path, mechanism: str) -> list[int]:
    """Pids the command wrote that are still alive after a generous while (SIGKILLed then, so
    that a failure leaks nothing)."""
    if mechanism == "bwrap" or not pidfile.exists():
        return []
    pids = [int(p) for p in pidfile.read_text().split()]
    deadline = anyio.current_time() + 10
    while any(_alive(p) for p in pids) and anyio.current_time() < deadline:
        await anyio.sleep(0.02)
    alive = [p for p in pids if _alive(p)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return alive


async def test_a_hanging_command_times_out_and_its_group_is_killed(
    ws: Path, mechanism: str
) -> None:
    async with toolkit(ws, mechanism, "echo started; sleep 300", timeout="1s") as tk:
        result = await tk.aexecute("t", {})
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content == (
        "started\ntimed out after 1s: the command and its children were killed"
    )


async def test_a_forked_tree_is_killed_on_timeout(ws: Path, mechanism: str) -> None:
    pids = ws / "run" / "pids"
    script = (
        f"for i in 1 2 3; do (sleep 300 & echo $! >> {pids}; wait) & sh -c 'sleep 300' & done; "
        "echo forked; wait"
    )
    async with toolkit(ws, mechanism, script, timeout="1s", kill_grace="200ms") as tk:
        result = await tk.aexecute("t", {})
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content.startswith("forked\ntimed out")
    assert await survivors(pids, mechanism) == []


ESCAPES = {
    "setsid": "setsid sleep 300 > /dev/null 2>&1 & echo $! >> {pids}",
    "double fork": "(setsid sh -c 'echo $$ >> {pids}; exec sleep 300' > /dev/null 2>&1 &)",
    "daemon holding the pipes": "setsid sh -c 'echo $$ >> {pids}; exec sleep 300' &",
}


@pytest.mark.parametrize("how", sorted(ESCAPES))
async def test_escapees_do_not_outlive_the_call(ws: Path, mechanism: str, how: str) -> None:
    pids = ws / "run" / "pids"
    script = ESCAPES[how].format(pids=pids) + "\nsleep 0.3; echo done"
    async with toolkit(ws, mechanism, script, timeout="20s") as tk:
        result = await tk.aexecute("t", {})
    assert not result.is_error
    assert result.metadata["timed_out"] is False
    assert result.content.startswith("done")
    if mechanism != "bwrap":
        assert result.metadata["stopped"] >= 1
        assert "was stopped (no process outlives its tool call)" in result.content
    assert await survivors(pids, mechanism) == []


@pytest.mark.parametrize("how", sorted(ESCAPES))
async def test_escapees_are_killed_with_a_timed_out_command(
    ws: Path, mechanism: str, how: str
) -> None:
    pids = ws / "run" / "pids"
    script = ESCAPES[how].format(pids=pids) + "\necho started; sleep 300"
    async with toolkit(ws, mechanism, script, timeout="1s", kill_grace="200ms") as tk:
        result = await tk.aexecute("t", {})
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content.startswith("started\ntimed out")
    assert await survivors(pids, mechanism) == []


async def test_a_command_that_closes_its_output_still_times_out(
    ws: Path, mechanism: str
) -> None:
    script = "echo bye; exec > /dev/null 2>&1; sleep 300"
    async with toolkit(ws, mechanism, script, timeout="1s") as tk:
        result = await tk.aexecute("t", {})
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content.startswith("bye\ntimed out after 1s")


async def test_a_command_spewing_100_mb_is_bounded(ws: Path, mechanism: str) -> None:
    script = "head -c 100000000 /dev/zero | tr '\\0' x; echo; echo END"
    async with toolkit(ws, mechanism, script, timeout="60s", max_output=2000) as tk:
        result = await tk.aexecute("t", {})
    assert not result.is_error and result.metadata["truncated"] is True
    assert result.content.startswith("x" * 1000)
    assert result.content.endswith("x\nEND")
    assert "bytes of output omitted" in result.content
    assert len(result.content) < 2100


async def test_a_command_ignoring_sigterm_is_killed_after_the_grace(
    ws: Path, mechanism: str
) -> None:
    pids = ws / "run" / "pids"
    script = f"trap '' TERM; echo $$ >> {pids}; echo stubborn; while :; do sleep 0.05; done"
    async with toolkit(ws, mechanism, script, timeout="500ms", kill_grace="300ms") as tk:
        result = await tk.aexecute("t", {})
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content.startswith("stubborn\ntimed out after 0.5s")
    assert await survivors(pids, mechanism) == []


@pytest.mark.parametrize("network", [False, True])
async def test_a_timed_out_command_gets_its_grace_to_clean_up(
    ws: Path, mechanism: str, network: bool
) -> None:
    """SIGTERM must reach the command itself, whatever stands between: under bwrap it is sent
    inside the sandbox (bwrap would die of it and SIGKILL everything at once)."""
    script = "trap 'echo cleaned; exit 3' TERM; echo ready; while :; do sleep 0.05; done"
    sandbox = {"sandbox": {"filesystem": "workspace-write", "network": network}}
    entry = {} if mechanism == "none" else sandbox
    async with toolkit(ws, mechanism, script, timeout="3s", kill_grace="10s", **entry) as tk:
        result = await tk.aexecute("t", {})
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content.startswith("ready\ncleaned\n"), result.content
    assert result.metadata["exit_code"] == 3


async def test_a_background_child_does_not_hold_the_call(ws: Path, mechanism: str) -> None:
    pids = ws / "run" / "pids"
    script = f"sleep 300 & echo $! >> {pids}; echo started"
    async with toolkit(ws, mechanism, script, timeout="20s") as tk:
        result = await tk.aexecute("t", {})
    assert not result.is_error and result.metadata["timed_out"] is False
    assert result.content.startswith("started")
    if mechanism != "bwrap":
        assert result.metadata["stopped"] == 1
        assert result.content.endswith(
            "note: 1 background process was still running when the command exited and was "
            "stopped (no process outlives its tool call)"
        )
    assert await survivors(pids, mechanism) == []


async def test_a_command_killed_by_a_signal_is_an_error(ws: Path, mechanism: str) -> None:
    async with toolkit(ws, mechanism, "echo before; kill -SEGV $$", timeout="20s") as tk:
        result = await tk.aexecute("t", {})
    code = 128 + signal.SIGSEGV if mechanism == "bwrap" else -signal.SIGSEGV
    assert result.is_error and result.metadata["exit_code"] == code
    assert result.content == f"before\nexit code {code}"


async def test_a_cancelled_call_kills_everything(ws: Path, mechanism: str) -> None:
    pids = ws / "run" / "pids"
    script = (
        f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' > /dev/null 2>&1 & "
        f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; touch {pids}.ready; wait"
    )
    async with (
        toolkit(ws, mechanism, script, timeout="60s") as tk,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(tk.aexecute, "t", {})
        with anyio.fail_after(20):
            while not (ws / "run" / "pids.ready").exists():
                await anyio.sleep(0.01)
        await anyio.sleep(0.1)  # the escapee wrote its pid before exec'ing sleep
        tg.cancel_scope.cancel()
    assert await survivors(pids, mechanism) == []
