"""Toolkit: sync and async APIs, the private loop thread, lifecycle."""

from __future__ import annotations

import asyncio
import threading

import pytest

from toolnexus import (
    Decision,
    Result,
    ToolCall,
    Toolkit,
    UsageError,
    acreate_toolkit,
    create_toolkit,
    tool,
)
from toolnexus.middleware import truncate

from .conftest import in_forked_child


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
def where() -> str:
    """Name the thread the tool runs on."""
    return threading.current_thread().name


def test_sync_api_runs_calls_and_lists_tools() -> None:
    with create_toolkit(extra_tools=[add, where]) as tk:
        assert [t.name for t in tk.tools()] == ["add", "where"]
        assert tk.execute("add", '{"a": 1, "b": 2}').content == "3"
        assert tk.get("add") is add
        assert tk.get("nope") is None
        assert "add" in tk
        assert tk.generation == 1
        assert tk.name is None  # no manifest
        assert tk.check("add", {"a": 1, "b": 2}).decision is Decision.ALLOW
        results = tk.execute_many([ToolCall(name="add", arguments={"a": 1, "b": 1})] * 3)
        assert [r.content for r in results] == ["2", "2", "2"]


def test_the_toolkit_carries_the_manifests_name() -> None:
    with create_toolkit("version: 1\nname: team-tools\n", extra_tools=[add]) as tk:
        assert tk.name == "team-tools"


def test_a_call_reaching_an_ended_loop_gets_a_result_and_close_still_works() -> None:
    tk = create_toolkit(extra_tools=[add])
    assert tk._loop_thread is not None
    tk._loop_thread.stop()  # what a concurrent close does between the state check and the call
    result = tk.execute("add", {"a": 1, "b": 2})
    assert result.is_error and "closed" in result.content
    assert [r.is_error for r in tk.execute_many([ToolCall(name="add", arguments={})])] == [True]
    tk.close()
    assert tk.closed


def test_a_forked_child_is_told_to_make_its_own_toolkit() -> None:
    """A child `fork()`s without the loop thread: its call must fail at once, not hang."""
    with create_toolkit(extra_tools=[add]) as tk:
        assert tk.execute("add", {"a": 1, "b": 1}).content == "2"
        outcome = in_forked_child(lambda: tk.execute("add", {"a": 1, "b": 2}))
        assert outcome.startswith("UsageError: ") and "forked" in outcome
        assert tk.execute("add", {"a": 1, "b": 2}).content == "3"  # the parent's is untouched


def test_a_forked_child_cannot_call_into_the_parents_loop() -> None:
    """Also for a toolkit on a loop of yours (acreate_toolkit), run by a thread of the parent."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    tk = asyncio.run_coroutine_threadsafe(acreate_toolkit(extra_tools=[add]), loop).result(10)
    try:
        assert tk.execute("add", {"a": 1, "b": 2}).content == "3"
        outcome = in_forked_child(lambda: tk.execute("add", {"a": 1, "b": 2}))
        assert outcome.startswith("UsageError: ") and "forked" in outcome
    finally:
        asyncio.run_coroutine_threadsafe(tk.aclose(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        loop.close()


def test_sync_api_works_inside_a_running_event_loop() -> None:
    tk = create_toolkit(extra_tools=[add])

    async def agent() -> Result:
        return tk.execute("add", {"a": 20, "b": 22})  # sync call from async code: no deadlock

    try:
        assert asyncio.run(agent()).content == "42"
    finally:
        tk.close()


def test_close_twice_and_use_after_close() -> None:
    tk = create_toolkit(extra_tools=[add])
    tk.close()
    tk.close()
    assert tk.closed
    with pytest.raises(UsageError, match="closed"):
        tk.tools()  # listing a closed toolkit is the program's mistake


def test_calls_on_a_closed_toolkit_are_error_results() -> None:
    tk = create_toolkit(extra_tools=[add])
    tk.close()
    result = tk.execute("add", {"a": 1, "b": 2})
    assert result.is_error
    assert result.metadata["error_type"] == "ToolkitClosed"
    assert "'add' was not run: the toolkit is closed" in result.content
    batch = tk.execute_many([ToolCall(name="add", arguments={"a": 1, "b": 2}, id="c1")])
    assert [r.metadata["error_type"] for r in batch] == ["ToolkitClosed"]
    assert batch[0].metadata["call_id"] == "c1"
    verdict = tk.check("add", {"a": 1, "b": 2})
    assert verdict.decision is Decision.DENY
    assert "closed" in verdict.reason


@pytest.mark.anyio
async def test_async_calls_on_a_closed_toolkit_are_error_results() -> None:
    tk = await acreate_toolkit(extra_tools=[add])
    await tk.aclose()
    result = await tk.aexecute("add", {"a": 1, "b": 2})
    assert result.is_error and result.metadata["error_type"] == "ToolkitClosed"
    batch = await tk.aexecute_many([ToolCall(name="add"), ToolCall(name="add")])
    assert [r.is_error for r in batch] == [True, True]


@pytest.mark.parametrize(
    "call",
    [
        {"name": "add", "arguments": {"a": 1, "b": 2}, "id": "c1"},
        {"name": "add", "arguments": '{"a": 1, "b": 2}', "id": "c1"},
        ("add", {"a": 1, "b": 2}),
        ("add", '{"a": 1, "b": 2}', "c1"),
    ],
    ids=["dict", "dict-json", "pair", "triple"],
)
def test_execute_many_takes_dicts_and_tuples(call: object) -> None:
    with create_toolkit(extra_tools=[add]) as tk:
        (result,) = tk.execute_many([call])  # type: ignore[list-item]
    assert result.content == "3"


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        ({"name": "add", "args": {"a": 1}}, "unknown key 'args'; did you mean 'arguments'?"),
        ({"arguments": {}}, "needs a 'name'"),
        ({"type": "function", "function": {"name": "add"}}, "parse_calls"),
        (("add",), "(name, arguments) or (name, arguments, id)"),
        ("add", "got str"),
        (42, "got int"),
    ],
)
def test_execute_many_refuses_other_shapes_naming_the_expected_ones(
    call: object, needle: str
) -> None:
    with create_toolkit(extra_tools=[add]) as tk:
        with pytest.raises(TypeError, match="ToolCall") as caught:
            tk.execute_many([call])  # type: ignore[list-item]
        assert needle in str(caught.value)
        assert "calls[0]" in str(caught.value)


def test_toolkit_middleware_applies() -> None:
    @tool
    def long() -> str:
        """Return a long text."""
        return "x" * 1000

    with create_toolkit(extra_tools=[long], middleware=[truncate(200)]) as tk:
        assert tk.execute("long").metadata["truncated"] is True


@pytest.mark.anyio
async def test_async_toolkit_on_the_callers_loop() -> None:
    async with await acreate_toolkit(extra_tools=[add]) as tk:
        assert isinstance(tk, Toolkit)
        assert (await tk.aexecute("add", {"a": 2, "b": 2})).content == "4"
        results = await tk.aexecute_many([ToolCall(name="add", arguments={"a": 1, "b": 1})])
        assert results[0].content == "2"
        with pytest.raises(UsageError, match="use the async API"):
            tk.execute("add", {"a": 1, "b": 1})
        # from another thread the sync API hops onto this loop
        other = await asyncio.to_thread(tk.execute, "add", {"a": 5, "b": 5})
        assert other.content == "10"


@pytest.mark.anyio
async def test_async_calls_on_a_sync_toolkit_hop_to_its_loop() -> None:
    tk = create_toolkit(extra_tools=[add])
    try:
        assert (await tk.aexecute("add", {"a": 1, "b": 1})).content == "2"
    finally:
        await asyncio.to_thread(tk.close)


def test_closing_while_a_sync_call_runs_answers_that_caller() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    async def hold() -> str:
        """Wait until released."""
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.01)
        return "released"

    tk = create_toolkit(extra_tools=[hold])
    box: list[Result] = []
    caller = threading.Thread(target=lambda: box.append(tk.execute("hold")))
    caller.start()
    assert started.wait(5)
    tk.close()
    caller.join(5)
    release.set()
    assert not caller.is_alive()
    assert box[0].is_error
    assert "closed while 'hold' was running" in box[0].content


@pytest.mark.anyio
async def test_closing_an_async_toolkit_answers_calls_in_flight() -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never finish on its own."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    tk = await acreate_toolkit(extra_tools=[hang])
    call = asyncio.ensure_future(tk.aexecute("hang"))
    await asyncio.wait_for(started.wait(), 5)
    await tk.aclose()
    result = await asyncio.wait_for(call, 5)
    assert result.is_error
    assert "closed while 'hang'" in result.content


def test_closing_under_a_running_sync_function_says_it_runs_on() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    def stuck() -> str:
        """Block until released."""
        started.set()
        release.wait(30)
        return "late"

    tk = create_toolkit(extra_tools=[stuck])
    box: list[Result] = []
    caller = threading.Thread(target=lambda: box.append(tk.execute("stuck")))
    caller.start()
    assert started.wait(5)
    tk.close()
    caller.join(5)
    release.set()
    assert "closed while 'stuck' was running" in box[0].content
    assert "keeps running in its worker thread until it returns" in box[0].content
    assert box[0].metadata["still_running"] is True


def test_async_calls_from_another_loop_on_a_closed_sync_toolkit_are_error_results() -> None:
    tk = create_toolkit(extra_tools=[add])
    tk.close()

    async def agent() -> tuple[Result, list[Result]]:
        one = await tk.aexecute("add", {"a": 1, "b": 2})
        many = await tk.aexecute_many([ToolCall(name="add", arguments={"a": 1, "b": 2})])
        return one, many

    one, many = asyncio.run(agent())
    assert one.metadata["error_type"] == "ToolkitClosed"
    assert [r.metadata["error_type"] for r in many] == ["ToolkitClosed"]


def test_closing_a_sync_toolkit_under_an_async_caller_on_another_loop_answers_it() -> None:
    started = threading.Event()

    @tool
    async def hold() -> str:
        """Wait for ever."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    tk = create_toolkit(extra_tools=[hold])

    async def agent() -> Result:
        return await tk.aexecute("hold")

    box: list[Result] = []
    caller = threading.Thread(target=lambda: box.append(asyncio.run(agent())))
    caller.start()
    assert started.wait(5)
    tk.close()
    caller.join(5)
    assert not caller.is_alive()
    assert box and box[0].is_error
    assert "closed while 'hold' was running" in box[0].content
