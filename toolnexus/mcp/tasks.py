"""Tools called through the MCP tasks API (protocol 2025-11-25), for tools a server marks
`execution.taskSupport: "required"`.

The SDK (2.3) defines the task types but not their methods (they left the core protocol in
2026-07-28 and continue as an extension), and it rejects a `tools/call` answered with a task,
so the requests go out here through the session's own dispatcher, stamped as the session
stamps its own: `tools/call` with `task: {}`, then `tasks/get` every `pollInterval` until the
task ends (or needs input: then `tasks/result`, which waits while the server asks), then
`tasks/result` for the `CallToolResult`. A call that times out or is cancelled sends
`tasks/cancel` (shielded, bounded) before it gives up, so the server stops the work.

Which tools run as tasks: `required` ones always (they cannot run otherwise). `optional` ones
run as plain calls: a plain call answers in one round trip and carries progress and questions
on its own request, while a task adds at least two requests and a poll delay for no gain to a
call that an agent waits on anyway. A `required` tool on a server that does not declare
`tasks.requests.tools.call` cannot be called, so it is not listed (it is in `skipped`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ToolError

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client
    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import ProgressFnT

__all__ = ["call_as_task", "task_tools"]

_DEFAULT_POLL = 0.5
"""Seconds between `tasks/get` when the server suggests no `pollInterval`."""
_POLL_BOUNDS = (0.01, 5.0)
_CANCEL_WAIT = 2.0
"""Seconds a `tasks/cancel` may take when a call is given up."""


def task_tools(
    listing: Sequence[mcp_types.Tool], capabilities: mcp_types.ServerCapabilities | None
) -> tuple[list[mcp_types.Tool], dict[str, str], dict[str, str]]:
    """The callable tools of a listing, each listed tool's `taskSupport`, and the tools left
    out with the reason."""
    tasks = capabilities.tasks if capabilities is not None else None
    can_call = bool(tasks and tasks.requests and tasks.requests.tools and tasks.requests.tools.call)
    kept: list[mcp_types.Tool] = []
    support: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for tool in listing:
        mode = tool.execution.task_support if tool.execution is not None else None
        if mode is not None:
            support[tool.name] = mode
        if mode == "required" and not can_call:
            skipped[tool.name] = (
                "the tool must run as a task (execution.taskSupport: required), but the server "
                "does not declare task-augmented tools/call "
                "(capabilities.tasks.requests.tools.call)"
            )
            continue
        kept.append(tool)
    return kept, support, skipped


async def call_as_task(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    *,
    progress: ProgressFnT | None,
    timeout: float | None,
    alive: Callable[[], None] = lambda: None,
) -> mcp_types.CallToolResult:
    """Create the task, wait for it, return its result; cancel it when given up. `alive` is
    called for each poll that finds the task still working.

    Raises:
        TimeoutError: `timeout` (the whole task's) passed; the task was cancelled.
        ToolError: the server cancelled or lost the task.
        MCPError: a request failed.
    """
    from mcp_types import CallToolResult

    session = client.session
    deadline = None if timeout is None else anyio.current_time() + timeout
    created = await _request(
        session,
        "tools/call",
        {"name": name, "arguments": arguments, "task": {}},
        progress=progress,
        timeout=timeout,
    )
    if not isinstance(created.get("task"), dict):  # the server ran it as a plain call
        return CallToolResult.model_validate(created, by_name=False)
    task: dict[str, Any] = created["task"]
    task_id = str(task.get("taskId"))
    try:
        # The time the creation took counts: `timeout` bounds the whole task.
        left = None if deadline is None else max(0.0, deadline - anyio.current_time())
        with anyio.fail_after(left):
            while task.get("status") == "working":
                await anyio.sleep(_poll_seconds(task))
                task = await _request(session, "tasks/get", {"taskId": task_id})
                if task.get("status") == "working":
                    alive()  # the server says it still works on it, like a progress report
            if task.get("status") == "cancelled":
                raise ToolError(
                    f"the server cancelled the task of '{name}'"
                    + (f": {task['statusMessage']}" if task.get("statusMessage") else "")
                )
            payload = await _request(session, "tasks/result", {"taskId": task_id})
    except BaseException:
        if task.get("status") not in ("completed", "failed", "cancelled"):
            await _cancel(session, task_id)
        raise
    return CallToolResult.model_validate(payload, by_name=False)


def _poll_seconds(task: dict[str, Any]) -> float:
    interval = task.get("pollInterval")
    if isinstance(interval, int | float) and not isinstance(interval, bool):
        low, high = _POLL_BOUNDS
        return min(high, max(low, interval / 1000))
    return _DEFAULT_POLL


async def _cancel(session: ClientSession, task_id: str) -> None:
    """`tasks/cancel`, even from a cancelled caller; a failure only costs the server's work."""
    import logging

    with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT):
        try:
            await _request(session, "tasks/cancel", {"taskId": task_id})
        except Exception as exc:  # noqa: BLE001 - the call is already failing; say so and go
            logging.getLogger("toolnexus.mcp").info("tasks/cancel %s failed: %s", task_id, exc)


async def _request(
    session: ClientSession,
    method: str,
    params: dict[str, Any],
    *,
    progress: ProgressFnT | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """A raw request on the session, stamped (protocol headers) as the SDK stamps its own."""
    data: dict[str, Any] = {"method": method, "params": params}
    opts: Any = {}
    # The SDK offers no public raw request: these are its private parts, checked so that a
    # release that renames them fails the call with a reason, not an AttributeError.
    stamp: Any = getattr(session, "_stamp", None)
    send: Any = getattr(getattr(session, "_dispatcher", None), "send_raw_request", None)
    if stamp is None or send is None:
        raise ToolError(_sdk_changed())
    stamp(data, opts)
    if timeout is not None:
        opts["timeout"] = timeout
    if progress is not None:
        opts["on_progress"] = progress
    return await send(method, data["params"], opts)


def _sdk_changed() -> str:
    from importlib.metadata import version

    return (
        f"this tool must run as an MCP task, and the installed mcp SDK ({version('mcp')}) no "
        "longer has the private parts toolnexus sends task requests with "
        "(ClientSession._stamp, ._dispatcher.send_raw_request); install the mcp version "
        "toolnexus was released with"
    )
