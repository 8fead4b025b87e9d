"""todo: replaces the list, at most one item in progress, state kept per toolkit."""

from __future__ import annotations

from pathlib import Path

import pytest

from builtin.todo import todo_tools
from toolnexus import ConfigError, Tool, ToolContext, ToolError, create_toolkit

pytestmark = pytest.mark.anyio


def _ctx(tmp_path: Path, state: dict[str, object]) -> ToolContext:
    return ToolContext(
        call_id="call-1", tool_name="todo", workspace=tmp_path, roots=(tmp_path,), state=state
    )


@pytest.fixture
def todo() -> Tool:
    (tool,) = todo_tools({})
    return tool


async def test_the_list_is_rendered_and_replaced_on_each_call(tmp_path: Path, todo: Tool) -> None:
    state: dict[str, object] = {}
    result = await todo.run(
        {
            "todos": [
                {"content": "Write the parser", "status": "completed"},
                {
                    "content": "Run the tests",
                    "status": "in_progress",
                    "active_form": "Running the tests",
                },
                {"content": "Update the docs", "status": "pending"},
            ]
        },
        _ctx(tmp_path, state),
    )
    assert result.content.splitlines() == [
        "Todo list (3 items: 1 completed, 1 in progress, 1 pending):",
        "1. [x] Write the parser",
        "2. [~] Run the tests (now: Running the tests)",
        "3. [ ] Update the docs",
    ]
    assert result.structured == {
        "todos": [
            {"content": "Write the parser", "status": "completed"},
            {
                "content": "Run the tests",
                "status": "in_progress",
                "active_form": "Running the tests",
            },
            {"content": "Update the docs", "status": "pending"},
        ]
    }
    second = await todo.run(
        {"todos": [{"content": "Ship it", "status": "pending"}]}, _ctx(tmp_path, state)
    )
    assert "1. [ ] Ship it" in second.content
    assert "Write the parser" not in second.content
    assert "Nothing is in progress" in second.content
    cleared = await todo.run({"todos": []}, _ctx(tmp_path, state))
    assert cleared.content == "The todo list is now empty."


async def test_two_items_in_progress_are_refused_and_the_list_kept(
    tmp_path: Path, todo: Tool
) -> None:
    state: dict[str, object] = {}
    await todo.run({"todos": [{"content": "A", "status": "pending"}]}, _ctx(tmp_path, state))
    before = dict(state)
    with pytest.raises(ToolError, match=r"items 1, 2 are all in_progress; at most one"):
        await todo.run(
            {
                "todos": [
                    {"content": "A", "status": "in_progress"},
                    {"content": "B", "status": "in_progress"},
                ]
            },
            _ctx(tmp_path, state),
        )
    assert state == before


async def test_bad_items_are_refused(tmp_path: Path, todo: Tool) -> None:
    with pytest.raises(ToolError, match="empty content"):
        await todo.run({"todos": [{"content": "  ", "status": "pending"}]}, _ctx(tmp_path, {}))
    with pytest.raises(ToolError, match="use pending, in_progress or completed"):
        await todo.run({"todos": [{"content": "A", "status": "done"}]}, _ctx(tmp_path, {}))
    (small,) = todo_tools({"max_items": 1})
    with pytest.raises(ToolError, match="over the limit of 1"):
        await small.run({"todos": [{"content": "A", "status": "pending"}] * 2}, _ctx(tmp_path, {}))


def test_todo_lists_are_per_toolkit(tmp_path: Path) -> None:
    one = [{"content": "First kit's task", "status": "in_progress"}]
    with (
        create_toolkit(builtins=["todo"], workspace=tmp_path) as first,
        create_toolkit(builtins=["todo"], workspace=tmp_path) as second,
    ):
        assert not first.execute("todo", {"todos": one}).is_error
        result = second.execute("todo", {"todos": [{"content": "Other", "status": "pending"}]})
        assert "First kit's task" not in result.content
        invalid = first.execute("todo", {"todos": [{"content": "A", "status": "doing"}]})
        assert invalid.is_error


def test_tool_flags_and_options() -> None:
    (tool,) = todo_tools({})
    assert (tool.read_only, tool.destructive, tool.idempotent, tool.open_world) == (
        False,
        False,
        True,
        False,
    )
    with pytest.raises(ConfigError, match="did you mean 'max_items'"):
        todo_tools({"max_item": 3})
