"""A toolkit inside an OpenAI Agents SDK agent (`function_tools`), driven by a stub of the SDK's
`Model` interface that answers each turn from a script and records what the model was sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    Runner,
    ToolApprovalItem,
    Usage,
    set_tracing_disabled,
)
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from toolnexus import ApprovalRequest, ResourcePart, Result, acreate_toolkit, create_toolkit, tool
from toolnexus.adapters import strict_schema
from toolnexus.integrations.openai_agents import function_tools

from .conftest import MANIFEST_EXTRA_GREET, WriteManifest, wait_for_file, wait_gone

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)  # no trace export: nothing leaves 127.0.0.1

Output = list[Any]
Step = Callable[[], Any]


class StubModel(Model):
    """The SDK's `Model` interface, answering each request with the next scripted output."""

    def __init__(self, *steps: Output | Step) -> None:
        self.steps = list(steps)
        self.inputs: list[list[Any]] = []
        self.tools: list[list[FunctionTool]] = []

    async def get_response(  # noqa: PLR0917 - the SDK's signature
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        self.inputs.append(list(input) if isinstance(input, list) else [input])
        self.tools.append([t for t in tools if isinstance(t, FunctionTool)])
        step = self.steps.pop(0)
        output = step if isinstance(step, list) else step()
        if asyncio.iscoroutine(output):
            output = await output
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run without streaming")

    def offered(self, turn: int) -> list[str]:
        return sorted(t.name for t in self.tools[turn])

    def outputs(self) -> dict[str, Any]:
        """Every `function_call_output` the model was sent, by call id."""
        return {
            item["call_id"]: item["output"]
            for items in self.inputs
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        }


def call(*calls: tuple[str, dict[str, Any], str]) -> Output:
    return [
        ResponseFunctionToolCall(
            id=i, call_id=i, type="function_call", name=n, arguments=json.dumps(a)
        )
        for n, a, i in calls
    ]


def say(text: str) -> Output:
    content: list[Any] = [
        ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])
    ]
    return [
        ResponseOutputMessage(
            id="m", type="message", role="assistant", status="completed", content=content
        )
    ]


async def test_builtin_shell_http_and_mcp_tools_run_through_the_agent(
    write_manifest: WriteManifest,
) -> None:
    model = StubModel(
        call(
            ("read", {"path": "notes.txt", "offset": None, "limit": None}, "r1"),
            ("shout", {"text": "hi there"}, "s1"),
            ("fetch_json", {}, "h1"),
            ("add", {"a": 2, "b": 3}, "m1"),
        ),
        say("done"),
    )
    async with await acreate_toolkit(write_manifest(mcp=True), builtins=["read"]) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        result = await Runner.run(agent, "go")
    assert result.final_output == "done"
    assert {"read", "shout", "fetch_json", "add", "media", "make_file"} <= set(model.offered(0))
    out = model.outputs()
    assert "hello from notes" in out["r1"]  # strict mode's nulls for optionals mean "absent"
    assert out["s1"].strip() == "hi there"
    assert '"items"' in out["h1"]
    assert out["m1"] == "5"


async def test_schemas_are_strict_where_they_convert(write_manifest: WriteManifest) -> None:
    @tool
    def free_form(options: dict[str, Any]) -> str:
        """Takes any keys: no strict form."""
        return "ok"

    async with await acreate_toolkit(write_manifest(), extra_tools=[free_form]) as toolkit:
        tools = {t.name: t for t in function_tools(toolkit) if isinstance(t, FunctionTool)}
        shout = toolkit.get("shout")
        assert shout is not None
        assert tools["shout"].strict_json_schema
        assert tools["shout"].params_json_schema == strict_schema(shout.parameters)
        assert not tools["free_form"].strict_json_schema
        free = toolkit.get("free_form")
        assert free is not None and tools["free_form"].params_json_schema == free.parameters
        loose = function_tools(toolkit, strict=False)
        assert not any(isinstance(t, FunctionTool) and t.strict_json_schema for t in loose)


async def test_a_denied_call_is_an_error_the_model_reads(write_manifest: WriteManifest) -> None:
    model = StubModel(
        call(("read", {"path": ".env", "offset": None, "limit": None}, "d1")), say("understood")
    )
    async with await acreate_toolkit(write_manifest(), builtins=["read"]) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        result = await Runner.run(agent, "go")
    out = model.outputs()["d1"]
    assert out.startswith("Error: ") and "denied" in out and "TOKEN" not in out
    assert result.final_output == "understood"


async def test_ask_interrupts_the_run_approved_runs_rejected_does_not(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    model = StubModel(
        call(("make_file", {"name": "yes.txt"}, "a1"), ("make_file", {"name": "no.txt"}, "a2")),
        say("all answered"),
    )
    async with await acreate_toolkit(write_manifest()) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        first = await Runner.run(agent, "make two files")
        items = {i.call_id: i for i in first.interruptions if isinstance(i, ToolApprovalItem)}
        assert set(items) == {"a1", "a2"}
        assert not (tmp_path / "yes.txt").exists()  # nothing ran before the answer
        state = first.to_state()
        state.approve(items["a1"])
        state.reject(items["a2"], rejection_message="not that one")
        second = await Runner.run(agent, state)
    assert second.final_output == "all answered"
    assert (tmp_path / "yes.txt").exists()
    assert not (tmp_path / "no.txt").exists()
    out = model.outputs()
    assert out["a2"] == "not that one"
    assert "Error" not in out["a1"]


async def test_allowed_calls_do_not_interrupt(write_manifest: WriteManifest) -> None:
    model = StubModel(call(("shout", {"text": "x"}, "n1")), say("done"))
    async with await acreate_toolkit(write_manifest()) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        result = await Runner.run(agent, "go")
    assert result.interruptions == [] and result.final_output == "done"


async def test_an_invalid_call_is_an_error_and_the_model_fixes_it(
    write_manifest: WriteManifest,
) -> None:
    model = StubModel(
        call(("add", {"a": "two", "b": 3}, "v1")),
        call(("add", {"a": 2, "b": 3}, "v2")),
        say("fixed"),
    )
    async with await acreate_toolkit(write_manifest(mcp=True)) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        result = await Runner.run(agent, "add")
    out = model.outputs()
    assert out["v1"].startswith("Error: invalid arguments for 'add'") and "$.a:" in out["v1"]
    assert out["v2"] == "5"
    assert result.final_output == "fixed"


async def test_a_tool_timeout_comes_back_as_an_error(write_manifest: WriteManifest) -> None:
    model = StubModel(call(("nap", {"seconds": 30}, "t1")), say("slow tool"))
    async with await acreate_toolkit(write_manifest()) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        await Runner.run(agent, "nap")
    assert "timed out after 1s" in model.outputs()["t1"]


async def test_cancelling_the_run_stops_the_command(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    model = StubModel(call(("long_nap", {"seconds": 60}, "c1")), say("never"))
    async with await acreate_toolkit(write_manifest()) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        run = asyncio.ensure_future(Runner.run(agent, "nap"))
        pid = int(await asyncio.to_thread(wait_for_file, tmp_path / "nap.pid"))
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.to_thread(wait_gone, pid)


async def test_a_reload_between_two_turns_adds_the_new_tool(
    write_manifest: WriteManifest,
) -> None:
    toolkit = await acreate_toolkit(write_manifest())

    async def reload_then_shout() -> Output:
        write_manifest(extra=MANIFEST_EXTRA_GREET)
        event = await toolkit.areload()
        assert event.added == ("greet",)
        return call(("shout", {"text": "before"}, "r1"))

    model = StubModel(reload_then_shout, call(("greet", {"who": "you"}, "r2")), say("done"))
    async with toolkit:
        mine = FunctionTool(
            name="mine",
            description="the application's own tool",
            params_json_schema={"type": "object", "properties": {}},
            on_invoke_tool=lambda ctx, args: asyncio.sleep(0, "mine"),
            strict_json_schema=False,
        )
        tools = function_tools(toolkit)
        tools.append(mine)
        agent = Agent(name="a", model=model, tools=tools)
        result = await Runner.run(agent, "go")
        names = [t.name for t in agent.tools]
        assert sorted(names) == sorted([*toolkit.names(), "mine"])  # each once, the new ones
    assert "greet" not in model.offered(0)
    assert "greet" in model.offered(1) and "mine" in model.offered(1)
    assert model.outputs()["r2"].strip() == "hello you"
    assert result.final_output == "done"
    assert sum(t is mine for t in agent.tools) == 1  # the application's tool is kept, once


async def test_images_become_tool_output_images(write_manifest: WriteManifest) -> None:
    model = StubModel(call(("media", {}, "p1")), say("saw it"))
    async with await acreate_toolkit(write_manifest(mcp=True)) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        await Runner.run(agent, "show")
    out = model.outputs()["p1"]
    assert isinstance(out, list)
    kinds = [item["type"] for item in out]
    # in the order the server sent them: the text before the image, the image, what follows it
    assert kinds == ["input_text", "input_image", "input_text"]
    assert out[0]["text"] == "first"
    assert out[1]["image_url"].startswith("data:image/png;base64,iVBOR")
    later = out[2]["text"]
    assert "audio (audio/wav" in later  # what the SDK cannot carry is noted, in its place
    assert later.index("audio (audio/wav") < later.index("second") < later.index("embedded text")


def test_a_sync_toolkit_serves_an_agent_on_another_loop(write_manifest: WriteManifest) -> None:
    model = StubModel(call(("shout", {"text": "sync"}, "y1")), say("done"))
    with create_toolkit(write_manifest()) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        result = Runner.run_sync(agent, "go")
    assert result.final_output == "done"
    assert model.outputs()["y1"].strip() == "sync"


async def test_without_deferral_the_toolkit_approver_decides(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    model = StubModel(
        call(("make_file", {"name": "yes.txt"}, "a1"), ("make_file", {"name": "no.txt"}, "a2")),
        say("done"),
    )

    def approver(request: ApprovalRequest) -> bool:
        return request.arguments["name"] == "yes.txt"

    async with await acreate_toolkit(write_manifest(), approver=approver) as toolkit:
        tools = function_tools(toolkit, defer_approvals=False)
        result = await Runner.run(Agent(name="a", model=model, tools=tools), "go")
    assert result.interruptions == [] and result.final_output == "done"
    assert (tmp_path / "yes.txt").exists() and not (tmp_path / "no.txt").exists()
    assert "declined" in model.outputs()["a2"]


async def test_an_sdk_decision_to_always_approve_covers_later_calls(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    model = StubModel(
        call(("make_file", {"name": "one.txt"}, "a1")),
        call(("make_file", {"name": "two.txt"}, "a2")),
        say("done"),
    )
    async with await acreate_toolkit(write_manifest()) as toolkit:
        agent = Agent(name="a", model=model, tools=function_tools(toolkit))
        first = await Runner.run(agent, "go")
        (item,) = first.interruptions
        state = first.to_state()
        state.approve(item, always_approve=True)
        second = await Runner.run(agent, state)
    assert second.interruptions == [] and second.final_output == "done"
    assert (tmp_path / "one.txt").exists() and (tmp_path / "two.txt").exists()


async def test_a_pdf_becomes_tool_output_file_content() -> None:
    @tool
    def report() -> Result:
        """A PDF report."""
        pdf = ResourcePart(uri="file:///r.pdf", mime_type="application/pdf", data=b"%PDF-1.4")
        return Result(content="the report", parts=(pdf,))

    model = StubModel(call(("report", {}, "f1")), say("read it"))
    async with await acreate_toolkit(extra_tools=[report]) as toolkit:
        await Runner.run(Agent(name="a", model=model, tools=function_tools(toolkit)), "go")
    text, pdf = model.outputs()["f1"]
    assert text == {"type": "input_text", "text": "the report"}
    assert pdf["type"] == "input_file" and pdf["filename"] == "r.pdf"
    assert pdf["file_data"] == "data:application/pdf;base64,JVBERi0xLjQ="


async def test_a_reload_that_removes_a_tool_removes_it_from_the_list(
    write_manifest: WriteManifest,
) -> None:
    async with await acreate_toolkit(write_manifest(extra=MANIFEST_EXTRA_GREET)) as toolkit:
        tools = function_tools(toolkit)
        assert "greet" in [t.name for t in tools]
        write_manifest()
        await toolkit.areload()
        assert "greet" not in [t.name for t in tools]
        assert [t.name for t in tools] == toolkit.names()


async def test_a_dropped_list_stops_listening_to_reloads(write_manifest: WriteManifest) -> None:
    import gc

    async with await acreate_toolkit(write_manifest()) as toolkit:
        before = len(toolkit.on_reload)
        tools = function_tools(toolkit)
        assert len(toolkit.on_reload) == before + 1
        del tools
        gc.collect()
        await toolkit.areload()
        assert len(toolkit.on_reload) == before
