"""`todo`: the model's task list, kept per toolkit.

Each call replaces the whole list (as Claude Code's TodoWrite does): the model always sends the
list as it wants it, so there is no drift between its view and ours, and no ids to track. At most
one item is in progress, which keeps the model working on one thing at a time and makes the
rendered list say what it is doing now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolnexus import Result, Tool, ToolContext, ToolError

from ._common import parse_options

__all__ = ["todo_tools"]

_STATE_KEY = "builtin.todo.items"
"""`ctx.state` key holding the current list, as plain dicts."""

_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


@dataclass(frozen=True, kw_only=True)
class _TodoOptions:
    """Options of `todo`."""

    max_items: int = 100
    """Longest list accepted (keeps the rendered list, sent back on every call, small)."""


def _render(items: list[dict[str, str]]) -> str:
    if not items:
        return "The todo list is now empty."
    counts = {status: sum(1 for i in items if i["status"] == status) for status in _MARKS}
    lines = [
        f"Todo list ({len(items)} items: {counts['completed']} completed, "
        f"{counts['in_progress']} in progress, {counts['pending']} pending):"
    ]
    for n, item in enumerate(items, start=1):
        text = item["content"]
        if item["status"] == "in_progress" and item.get("active_form"):
            text = f"{text} (now: {item['active_form']})"
        lines.append(f"{n}. {_MARKS[item['status']]} {text}")
    if counts["in_progress"] == 0 and counts["pending"]:
        lines.append("Nothing is in progress: mark the item you start next as in_progress.")
    return "\n".join(lines)


def _todo_sync(ctx: ToolContext, opts: _TodoOptions, todos: list[dict[str, Any]]) -> Result:
    if len(todos) > opts.max_items:
        raise ToolError(
            f"the list has {len(todos)} items, over the limit of {opts.max_items}; merge small "
            f"steps or drop completed ones."
        )
    items: list[dict[str, str]] = []
    for n, todo in enumerate(todos, start=1):
        content = todo["content"].strip()
        if not content:
            raise ToolError(f"item {n} has empty content; describe the task in a few words.")
        if todo["status"] not in _MARKS:
            raise ToolError(
                f"item {n} has status {todo['status']!r}; use pending, in_progress or completed."
            )
        item = {"content": content, "status": todo["status"]}
        if todo.get("active_form"):
            item["active_form"] = todo["active_form"].strip()
        items.append(item)
    active = [n for n, item in enumerate(items, start=1) if item["status"] == "in_progress"]
    if len(active) > 1:
        raise ToolError(
            f"items {', '.join(map(str, active))} are all in_progress; at most one item may be "
            f"in progress. Mark the others pending (or completed, if they are done). The list "
            f"was not changed."
        )
    ctx.state[_STATE_KEY] = items
    return Result(content=_render(items), structured={"todos": items})


_DESCRIPTION = """\
Keep a todo list for multi-step work, and show it. Each call replaces the whole list: send \
every item, in order, each with `content` (imperative, e.g. "Run the tests"), `status` \
(pending, in_progress or completed) and optionally `active_form` (e.g. "Running the tests"). \
At most one item may be in_progress: mark an item in_progress when you start it and completed \
as soon as it is fully done. Send an empty list to clear it. Returns the rendered list."""


def todo_tools(options: Mapping[str, Any]) -> list[Tool]:
    """The `todo` tool; its list lives in the toolkit's state, shared by every call.

    Args:
        options: `max_items` (positive integer, default 100).

    Raises:
        ConfigError: an unknown option or a value of the wrong kind.
    """
    opts: _TodoOptions = parse_options(options, _TodoOptions, "todo")

    async def todo(args: dict[str, Any], ctx: ToolContext) -> Result:
        return _todo_sync(ctx, opts, args["todos"])

    return [
        Tool(
            name="todo",
            description=_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "description": "The whole list, in order; replaces the current one.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1},
                                "status": {
                                    "type": "string",
                                    "enum": ["pending", "in_progress", "completed"],
                                },
                                "active_form": {
                                    "type": "string",
                                    "description": "The task in present continuous form, "
                                    "shown while it is in progress.",
                                },
                            },
                            "required": ["content", "status"],
                            "additionalProperties": False,
                        },
                    }
                },
                "required": ["todos"],
                "additionalProperties": False,
            },
            handler=todo,
            source="builtin",
            read_only=False,
            destructive=False,
            idempotent=True,
            open_world=False,
            concurrent=False,
        )
    ]
