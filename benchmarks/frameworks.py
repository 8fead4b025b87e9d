"""Agent frameworks: the per-call cost of a toolkit inside pydantic-ai and the OpenAI Agents SDK,
against each framework's own function tool (the peer) for the same `add(a, b)`.

Two levels: the tool call alone (what the framework calls for each tool call the model makes:
pydantic-ai's argument check and `call_tool`, the SDK's `on_invoke_tool` with the JSON text),
and a whole offline agent run of one tool call and one answer (pydantic-ai `FunctionModel`, an
Agents SDK `Model` stub), which is what an application pays. Needs the `pydantic-ai` and
`openai-agents` extras. Run through `python benchmarks/run.py frameworks`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from run import Row, amedian_us, table

Call = Callable[[], Awaitable[Any]]


async def _interleaved(*calls: Call, number: int, repeat: int = 9) -> list[float]:
    """Medians (µs per call) of each of `calls`, measured in alternating batches so that the
    load of a shared machine falls on all of them alike."""
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(repeat):
        for call, got in zip(calls, samples, strict=True):
            got.append(await amedian_us(call, number=number, repeat=1))
    return [sorted(got)[repeat // 2] for got in samples]


def bench_frameworks() -> None:
    rows = asyncio.run(_measure())
    table("Agent frameworks: a toolkit tool vs the framework's own (add(a, b))", rows)


async def _measure() -> list[Row]:
    from toolnexus import acreate_toolkit, tool

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def native_add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    rows: list[Row] = []
    toolkit = await acreate_toolkit(extra_tools=[add])
    try:
        args = {"a": 2, "b": 3}
        rows += await _pydantic_ai(toolkit, native_add, args)
        rows += await _openai_agents(toolkit, native_add, args)
    finally:
        await toolkit.aclose()
    return rows


async def _pydantic_ai(toolkit: Any, native_add: Any, args: dict[str, int]) -> list[Row]:
    from pydantic_ai import Agent, FunctionToolset, RunContext
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    from toolnexus.integrations.pydantic_ai import ToolnexusToolset

    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage(), tool_call_id="c1")
    ours = ToolnexusToolset(toolkit)
    theirs = FunctionToolset([native_add])
    our_tool = (await ours.get_tools(ctx))["add"]
    their_tool = (await theirs.get_tools(ctx))["native_add"]

    async def call_ours() -> Any:
        checked = our_tool.args_validator.validate_python(args)
        return await ours.call_tool("add", checked, ctx, our_tool)

    async def call_theirs() -> Any:
        checked = their_tool.args_validator.validate_python(args)
        return await theirs.call_tool("native_add", checked, ctx, their_tool)

    def model_for(name: str) -> FunctionModel:
        def respond(messages: list[Any], info: Any) -> ModelResponse:
            if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
                return ModelResponse(parts=[TextPart(content="5")])
            return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args)])

        return FunctionModel(respond)

    our_agent = Agent(model_for("add"), toolsets=[ours])
    their_agent = Agent(model_for("native_add"), toolsets=[theirs])
    base, ours_us, theirs_us = await _interleaved(
        lambda: toolkit.aexecute("add", args), call_ours, call_theirs, number=2_000
    )
    our_run, their_run = await _interleaved(
        lambda: our_agent.run("add"), lambda: their_agent.run("add"), number=30
    )
    return [
        ("pydantic-ai: `toolkit.aexecute` alone (arguments as a dict)", base, "µs", "floor"),
        ("pydantic-ai: native function tool, call", theirs_us, "µs", "peer"),
        (
            "pydantic-ai: `ToolnexusToolset`, call",
            ours_us,
            "µs",
            f"{ours_us / theirs_us:.1f}× the peer; {ours_us - base:.1f} µs over the floor",
        ),
        ("pydantic-ai: agent run (1 call + answer), native tool", their_run, "µs", "peer"),
        (
            "pydantic-ai: agent run (1 call + answer), `ToolnexusToolset`",
            our_run,
            "µs",
            f"{our_run / their_run:.2f}× the peer",
        ),
    ]


async def _openai_agents(toolkit: Any, native_add: Any, args: dict[str, int]) -> list[Row]:
    from agents import (
        Agent,
        FunctionTool,
        ModelResponse,
        Runner,
        Usage,
        function_tool,
        set_tracing_disabled,
    )
    from agents.models.interface import Model
    from agents.tool_context import ToolContext
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from toolnexus.integrations.openai_agents import function_tools

    set_tracing_disabled(True)
    text = json.dumps(args)
    (ours,) = function_tools(toolkit)
    assert isinstance(ours, FunctionTool)
    theirs = function_tool(native_add)
    ctx = ToolContext(context=None, tool_name="add", tool_call_id="c1", tool_arguments=text)

    class OneCall(Model):
        def __init__(self, name: str) -> None:
            self.name = name

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = kwargs["input"] if "input" in kwargs else args[1]
            if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items):
                content: list[Any] = [
                    ResponseOutputText(text="5", type="output_text", annotations=[], logprobs=[])
                ]
                output: list[Any] = [
                    ResponseOutputMessage(
                        id="m",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=content,
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id="c1", call_id="c1", type="function_call", name=self.name, arguments=text
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError

    base, ours_us, theirs_us = await _interleaved(
        lambda: toolkit.aexecute("add", text),
        lambda: ours.on_invoke_tool(ctx, text),
        lambda: theirs.on_invoke_tool(ctx, text),
        number=2_000,
    )
    our_agent = Agent(name="a", model=OneCall("add"), tools=function_tools(toolkit))
    their_agent = Agent(name="a", model=OneCall("native_add"), tools=[theirs])
    our_run, their_run = await _interleaved(
        lambda: Runner.run(our_agent, "add"), lambda: Runner.run(their_agent, "add"), number=30
    )
    return [
        ("Agents SDK: `toolkit.aexecute` alone (arguments as JSON text)", base, "µs", "floor"),
        ("Agents SDK: `function_tool`, `on_invoke_tool`", theirs_us, "µs", "peer"),
        (
            "Agents SDK: `function_tools(toolkit)`, `on_invoke_tool`",
            ours_us,
            "µs",
            f"{ours_us / theirs_us:.1f}× the peer; {ours_us - base:.1f} µs over the floor",
        ),
        ("Agents SDK: `Runner.run` (1 call + answer), native tool", their_run, "µs", "peer"),
        (
            "Agents SDK: `Runner.run` (1 call + answer), `function_tools`",
            our_run,
            "µs",
            f"{our_run / their_run:.2f}× the peer",
        ),
    ]
