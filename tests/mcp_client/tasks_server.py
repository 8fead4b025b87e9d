"""A handshake-era (2025-11-25) MCP server with task tools, built on the low-level `Server`:
`crunch` must run as a task (`taskSupport: required`), `quick` may (`optional`).

argv: [LOG] [--no-task-capability] [--slow-create]. `--slow-create` takes 1.6 s to create a
task. Every tasks/* request and every cancellation is appended to
LOG, so tests can see what the server saw."""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

LOG = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else None
TASKS = "--no-task-capability" not in sys.argv
POLL_MS = 50
CREATE_DELAY = 1.6 if "--slow-create" in sys.argv else 0.0


def note(line: str) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


class _Task:
    def __init__(self) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.status: types.TaskStatus = "working"
        self.result: types.CallToolResult | None = None
        self.done = asyncio.Event()
        self.job: asyncio.Task[None] | None = None
        self.created = datetime.now(UTC).isoformat()

    def model(self) -> dict[str, Any]:
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": datetime.now(UTC).isoformat(),
            "ttl": None,
            "pollInterval": POLL_MS,
        }


tasks: dict[str, _Task] = {}


class TaskServer(Server[Any]):
    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        caps = super().get_capabilities(*args, **kwargs)
        if TASKS:
            caps.tasks = types.ServerTasksCapability(
                cancel=types.TasksCancelCapability(),
                requests=types.ServerTasksRequestsCapability(
                    tools=types.TasksToolsCapability(call=types.TasksCallCapability())
                ),
            )
        return caps


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"seconds": {"type": "number"}}}
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="crunch",
                input_schema=schema,
                execution=types.ToolExecution(task_support="required"),
            ),
            types.Tool(
                name="quick",
                input_schema=schema,
                execution=types.ToolExecution(task_support="optional"),
            ),
        ]
    )


async def _run(task: _Task, seconds: float) -> None:
    try:
        await asyncio.sleep(seconds)
        task.result = types.CallToolResult(
            content=[types.TextContent(text=f"crunched for {seconds:g} s")]
        )
        task.status = "completed"
    except asyncio.CancelledError:
        task.status = "cancelled"
        note(f"cancelled {task.id}")
        raise
    finally:
        task.done.set()


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    seconds = float((params.arguments or {}).get("seconds", 0))
    if params.name == "crunch":
        raise MCPError(types.INVALID_PARAMS, "crunch must be called as a task")
    note(f"plain {params.name}")
    return types.CallToolResult(content=[types.TextContent(text=f"quick {seconds:g}")])


async def task_calls(ctx: Any, call_next: Any) -> Any:
    """Middleware: a `tools/call` with `task` answers with the task (a middleware's result is
    sent as it is; the handler's would be checked as a CallToolResult)."""
    params = ctx.params or {}
    if ctx.method != "tools/call" or "task" not in params:
        return await call_next(ctx)
    seconds = float((params.get("arguments") or {}).get("seconds", 0))
    await asyncio.sleep(CREATE_DELAY)
    task = _Task()
    tasks[task.id] = task
    task.job = asyncio.get_running_loop().create_task(_run(task, seconds))
    note(f"created {task.id} {params['name']}")
    return {"task": task.model()}


def _find(task_id: str) -> _Task:
    if task_id not in tasks:
        raise MCPError(types.INVALID_PARAMS, f"no task {task_id}")
    return tasks[task_id]


async def get_task(ctx: Any, params: types.GetTaskRequestParams) -> dict[str, Any]:
    return _find(params.task_id).model()


async def task_result(ctx: Any, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
    task = _find(params.task_id)
    await task.done.wait()
    note(f"result {task.id}")
    assert task.result is not None
    return task.result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def cancel_task(ctx: Any, params: types.CancelTaskRequestParams) -> dict[str, Any]:
    task = _find(params.task_id)
    note(f"cancel {task.id}")
    if task.job is not None:
        task.job.cancel()
        await task.done.wait()
    return task.model()


server = TaskServer("tasks", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
server.middleware.append(task_calls)
server.add_request_handler("tasks/get", types.GetTaskRequestParams, get_task)
server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, task_result)
server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel_task)


async def main() -> None:
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        await serve_loop(
            server,
            read,
            write,
            lifespan_state=state,
            init_options=server.create_initialization_options(),
        )


if __name__ == "__main__":
    anyio.run(main)
