"""Tools a server marks `execution.taskSupport: "required"` run through the tasks API: created,
polled, their result fetched, and cancelled when the call times out or its caller gives up."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from toolnexus import acreate_toolkit

from .conftest import HERE, manifest

pytestmark = pytest.mark.anyio

SERVER = str(HERE / "tasks_server.py")


def entry(log: Path, *flags: str, **extra: Any) -> dict[str, Any]:
    args = [SERVER, str(log), *flags]
    return {"command": sys.executable, "args": args, "connect_timeout": 60, **extra}


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def wait_for(log: Path, word: str) -> list[str]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen = lines(log)
        if any(line.startswith(word) for line in seen):
            return seen
        await asyncio.sleep(0.05)
    raise AssertionError(f"the server never logged {word!r}: {lines(log)}")


async def test_a_required_task_tool_runs_as_a_task(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    async with await acreate_toolkit(manifest(t=entry(log))) as tk:
        result = await tk.aexecute("crunch", {"seconds": 0.2})
        quick = await tk.aexecute("quick", {"seconds": 1})
    assert not result.is_error and result.content == "crunched for 0.2 s"
    assert quick.content == "quick 1"
    kinds = [line.split()[0] for line in lines(log)]
    # required: created as a task, its result fetched; optional: a plain call
    assert kinds == ["created", "result", "plain"]


async def test_without_the_servers_task_capability_the_tool_is_not_listed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    async with await acreate_toolkit(manifest(t=entry(log, "--no-task-capability"))) as tk:
        assert tk.names() == ["quick"]
        skipped = tk.status()["t"]["skipped"]
    assert [s["tool"] for s in skipped] == ["crunch"]
    assert "taskSupport: required" in skipped[0]["reason"]


async def test_a_task_that_times_out_is_cancelled_on_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    async with await acreate_toolkit(manifest(t=entry(log, timeout=0.5))) as tk:
        result = await tk.aexecute("crunch", {"seconds": 30})
        assert result.is_error and result.metadata["error_type"] == "ToolTimeout"
        seen = await wait_for(log, "cancelled")
        after = await tk.aexecute("quick", {})
    task_id = seen[0].split()[1]
    assert f"cancel {task_id}" in seen and f"cancelled {task_id}" in seen
    assert after.content == "quick 0"


async def test_a_cancelled_caller_cancels_the_task(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    async with await acreate_toolkit(manifest(t=entry(log))) as tk:
        call = asyncio.create_task(tk.aexecute("crunch", {"seconds": 30}))
        await wait_for(log, "created")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        seen = await wait_for(log, "cancelled")
    task_id = seen[0].split()[1]
    assert f"cancel {task_id}" in seen


async def test_with_reset_timeout_on_progress_a_working_task_keeps_its_call_alive(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    idle = entry(log, timeout=0.5, reset_timeout_on_progress=True, max_total_timeout=30)
    async with await acreate_toolkit(manifest(t=idle)) as tk:
        # polled every 50 ms, each answer "working" restarts the 0.5 s window
        result = await tk.aexecute("crunch", {"seconds": 1.5})
    assert not result.is_error and result.content == "crunched for 1.5 s"


async def test_the_timeout_bounds_the_whole_task_its_creation_included(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    async with await acreate_toolkit(manifest(t=entry(log, "--slow-create", timeout=2))) as tk:
        start = time.monotonic()
        result = await tk.aexecute("crunch", {"seconds": 30})
        took = time.monotonic() - start
        await wait_for(log, "cancelled")
    assert result.is_error and result.metadata["error_type"] == "ToolTimeout"
    # 1.6 s to create the task, then polling: the 2 s are for both (it used to be 3.6 s)
    assert took < 3.0, took


async def test_an_sdk_without_the_private_parts_tasks_use_fails_the_call_with_a_reason(
    tmp_path: Path,
) -> None:
    """The tasks path uses the SDK's private `_stamp`/`_dispatcher` (no public raw request):
    a release that renames them must fail the call saying so."""
    log = tmp_path / "server.log"
    async with await acreate_toolkit(manifest(t=entry(log))) as tk:
        assert tk._generation is not None
        (server,) = tk._generation.carry["mcp"].values()
        session = server._conn.client.session
        del session._stamp  # an instance attribute, set at the handshake
        result = await tk.aexecute("crunch", {"seconds": 0.1})
    assert result.is_error
    assert "installed mcp SDK" in result.content and "_stamp" in result.content
    assert "AttributeError" not in result.content
