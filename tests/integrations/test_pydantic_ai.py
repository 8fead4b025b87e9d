"""A toolkit inside a pydantic-ai agent (`ToolnexusToolset`), driven by pydantic-ai's own offline
models: `FunctionModel` scripts each model turn, `TestModel` calls every tool once."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import (
    Agent,
    BinaryContent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolDenied,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from toolnexus import ApprovalRequest, ResourcePart, Result, acreate_toolkit, create_toolkit, tool
from toolnexus.integrations.pydantic_ai import ToolnexusToolset

from .conftest import MANIFEST_EXTRA_GREET, WriteManifest, wait_for_file, wait_gone

pytestmark = pytest.mark.anyio

Step = Callable[[list[ModelMessage], AgentInfo], Any]


class Script:
    """A `FunctionModel` answering each model request with the next step; records what the
    model was shown (the tools offered, the tool returns it read)."""

    def __init__(self, *steps: Step | ModelResponse) -> None:
        self.steps = list(steps)
        self.offered: list[list[str]] = []
        self.model = FunctionModel(self._respond)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append(sorted(t.name for t in info.function_tools))
        step = self.steps.pop(0)
        if isinstance(step, ModelResponse):
            return step
        answer = step(messages, info)
        return await answer if asyncio.iscoroutine(answer) else answer


def call(*calls: tuple[str, dict[str, Any], str]) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(tool_name=n, args=a, tool_call_id=i) for n, a, i in calls]
    )


def say(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content=text)])


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What the model read for one tool call."""

    outcome: str
    """`success`, `failed`, `denied` or `retried` (a retry prompt)."""
    text: str
    content: Any = None
    metadata: Any = None


def returns(messages: list[ModelMessage]) -> dict[str, Answer]:
    """Every tool answer the model was sent, by call id (the latest wins). A retry travels as a
    `RetryPromptPart` in older pydantic-ai releases and as a `retried` tool return in newer ones."""
    found: dict[str, Answer] = {}
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                found[part.tool_call_id] = Answer(
                    outcome=part.outcome,
                    text=part.model_response_str(wrap_if_error=False),
                    content=part.content,
                    metadata=part.metadata,
                )
            elif isinstance(part, RetryPromptPart) and part.tool_call_id:
                found[part.tool_call_id] = Answer(outcome="retried", text=str(part.content))
    return found


async def test_builtin_shell_http_and_mcp_tools_run_through_the_agent(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    manifest = write_manifest(mcp=True)
    script = Script(
        call(
            ("read", {"path": "notes.txt"}, "r1"),
            ("shout", {"text": "hi there"}, "s1"),
            ("fetch_json", {}, "h1"),
            ("add", {"a": 2, "b": 3}, "m1"),
        ),
        say("done"),
    )
    async with await acreate_toolkit(manifest, builtins=["read"]) as toolkit:
        agent = Agent(script.model, toolsets=[ToolnexusToolset(toolkit)])
        result = await agent.run("go")
    assert result.output == "done"
    assert {"read", "shout", "fetch_json", "add", "media", "make_file"} <= set(script.offered[0])
    seen = returns(result.all_messages())
    assert {k: seen[k].outcome for k in seen} == dict.fromkeys(["r1", "s1", "h1", "m1"], "success")
    assert "hello from notes" in seen["r1"].text
    assert seen["s1"].text.strip() == "hi there"
    assert '"items"' in seen["h1"].text
    assert seen["m1"].text == "5"
    assert seen["s1"].metadata["exit_code"] == 0  # the result's metadata, for the application


async def test_schemas_reach_the_model_as_the_toolkit_has_them(
    write_manifest: WriteManifest,
) -> None:
    seen: dict[str, Any] = {}

    def look(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t for t in info.function_tools})
        return say("ok")

    async with await acreate_toolkit(write_manifest()) as toolkit:
        await Agent(Script(look).model, toolsets=[ToolnexusToolset(toolkit)]).run("go")
        expected = {t.name: t for t in toolkit.tools()}
    assert seen.keys() == expected.keys()
    for name, definition in seen.items():
        assert definition.parameters_json_schema == expected[name].parameters
        assert definition.description == expected[name].description
    assert seen["make_file"].sequential  # not read-only: runs alone, as execute_many runs it
    assert not seen["shout"].sequential


async def test_a_denied_call_is_a_failed_return_the_model_reads(
    write_manifest: WriteManifest,
) -> None:
    script = Script(call(("read", {"path": ".env"}, "d1")), say("understood"))
    async with await acreate_toolkit(write_manifest(), builtins=["read"]) as toolkit:
        result = await Agent(script.model, toolsets=[ToolnexusToolset(toolkit)]).run("go")
    part = returns(result.all_messages())["d1"]
    assert part.outcome == "failed"
    assert "denied" in part.text and "TOKEN" not in part.text
    assert result.output == "understood"  # the run went on


async def test_ask_goes_to_deferred_approvals_approved_runs_refused_does_not(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    script = Script(
        call(("make_file", {"name": "yes.txt"}, "a1"), ("make_file", {"name": "no.txt"}, "a2")),
        say("all answered"),
    )
    async with await acreate_toolkit(write_manifest()) as toolkit:
        agent = Agent(
            script.model,
            toolsets=[ToolnexusToolset(toolkit)],
            output_type=[str, DeferredToolRequests],
        )
        first = await agent.run("make two files")
        assert isinstance(first.output, DeferredToolRequests)
        assert [c.tool_call_id for c in first.output.approvals] == ["a1", "a2"]
        assert "tools.yaml" in first.output.metadata["a1"]["origin"]
        assert not (tmp_path / "yes.txt").exists()  # nothing ran before the answer
        answers = DeferredToolResults(approvals={"a1": True, "a2": ToolDenied("not that one")})
        second = await agent.run(
            message_history=first.all_messages(), deferred_tool_results=answers
        )
    assert second.output == "all answered"
    assert (tmp_path / "yes.txt").exists()
    assert not (tmp_path / "no.txt").exists()
    seen = returns(second.all_messages())
    assert seen["a1"].outcome == "success"
    assert seen["a2"].outcome == "denied" and seen["a2"].text == "not that one"


async def test_an_approval_never_overrides_a_deny(write_manifest: WriteManifest) -> None:
    """`ToolApproved(override_args=...)` may change the arguments: the deny rules still hold."""
    from pydantic_ai import ToolApproved

    extra = """\
  - name: read_any
    description: Read a file after approval.
    command: [cat, "--", "{path}"]
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
    approval:
      default: ask
      rules: [{decision: deny, when: {path: {glob: "*.env"}}, reason: secrets}]
"""
    script = Script(call(("read_any", {"path": "notes.txt"}, "o1")), say("ok"))
    async with await acreate_toolkit(write_manifest(extra=extra)) as toolkit:
        agent = Agent(
            script.model,
            toolsets=[ToolnexusToolset(toolkit)],
            output_type=[str, DeferredToolRequests],
        )
        first = await agent.run("read")
        assert isinstance(first.output, DeferredToolRequests)
        answers = DeferredToolResults(
            approvals={"o1": ToolApproved(override_args={"path": "x.env"})}
        )
        second = await agent.run(
            message_history=first.all_messages(), deferred_tool_results=answers
        )
    part = returns(second.all_messages())["o1"]
    assert part.outcome == "failed" and "secrets" in part.text


async def test_an_invalid_call_is_retried_and_the_model_fixes_it(
    write_manifest: WriteManifest,
) -> None:
    script = Script(
        call(("add", {"a": "two", "b": 3}, "v1")),
        lambda messages, info: call(("add", {"a": 2, "b": 3}, "v2")),
        say("fixed"),
    )
    async with await acreate_toolkit(write_manifest(mcp=True)) as toolkit:
        result = await Agent(script.model, toolsets=[ToolnexusToolset(toolkit)]).run("add")
    seen = returns(result.all_messages())
    assert seen["v1"].outcome == "retried"
    assert "invalid arguments for 'add'" in seen["v1"].text
    assert "$.a:" in seen["v1"].text  # names the bad argument
    assert seen["v2"].outcome == "success" and seen["v2"].text == "5"
    assert result.output == "fixed"


async def test_invalid_calls_past_the_retry_budget_fail_instead_of_ending_the_run(
    write_manifest: WriteManifest,
) -> None:
    bad = ("shout", {"text": 7}, "")
    script = Script(
        call((*bad[:2], "b1")), call((*bad[:2], "b2")), call((*bad[:2], "b3")), say("gave up")
    )
    async with await acreate_toolkit(write_manifest()) as toolkit:
        toolset = ToolnexusToolset(toolkit, max_retries=1)
        result = await Agent(script.model, toolsets=[toolset]).run("shout")
    seen = returns(result.all_messages())
    assert seen["b1"].outcome == "retried"
    assert seen["b2"].outcome == "failed" and seen["b3"].outcome == "failed"
    assert "invalid arguments" in seen["b3"].text
    assert result.output == "gave up"


async def test_a_tool_timeout_comes_back_as_a_failure(write_manifest: WriteManifest) -> None:
    script = Script(call(("nap", {"seconds": 30}, "t1")), say("slow tool"))
    async with await acreate_toolkit(write_manifest()) as toolkit:
        result = await Agent(script.model, toolsets=[ToolnexusToolset(toolkit)]).run("nap")
    part = returns(result.all_messages())["t1"]
    assert part.outcome == "failed" and "timed out after 1s" in part.text


async def test_cancelling_the_run_stops_the_command(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    script = Script(call(("long_nap", {"seconds": 60}, "c1")), say("never"))
    async with await acreate_toolkit(write_manifest()) as toolkit:
        agent = Agent(script.model, toolsets=[ToolnexusToolset(toolkit)])
        run = asyncio.ensure_future(agent.run("nap"))
        pid = int(await asyncio.to_thread(wait_for_file, tmp_path / "nap.pid"))
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.to_thread(wait_gone, pid)


async def test_a_reload_shows_through_on_the_next_run_step(
    write_manifest: WriteManifest,
) -> None:
    manifest = write_manifest()
    toolkit = await acreate_toolkit(manifest)

    async def reload_then_shout(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        write_manifest(extra=MANIFEST_EXTRA_GREET)
        event = await toolkit.areload()
        assert event.added == ("greet",)
        return call(("shout", {"text": "before"}, "r1"))

    script = Script(reload_then_shout, call(("greet", {"who": "you"}, "r2")), say("done"))
    async with toolkit:
        result = await Agent(script.model, toolsets=[ToolnexusToolset(toolkit)]).run("go")
    assert "greet" not in script.offered[0]
    assert "greet" in script.offered[1]
    seen = returns(result.all_messages())
    assert seen["r2"].text.strip() == "hello you"


async def test_images_and_audio_reach_the_model_as_binary_content(
    write_manifest: WriteManifest,
) -> None:
    script = Script(call(("media", {}, "p1")), say("saw it"))
    async with await acreate_toolkit(write_manifest(mcp=True)) as toolkit:
        result = await Agent(script.model, toolsets=[ToolnexusToolset(toolkit)]).run("show")
    content = returns(result.all_messages())["p1"].content
    assert isinstance(content, list)
    binaries = [c for c in content if isinstance(c, BinaryContent)]
    assert [b.media_type for b in binaries] == ["image/png", "audio/wav"]
    assert binaries[0].data.startswith(b"\x89PNG")
    # in the order the server sent them: text, image, audio, then the later text and notes
    assert content[0] == "first"
    assert content[1] is binaries[0] and content[2] is binaries[1]
    assert content[3] == "second"
    text = "\n".join(c for c in content[4:] if isinstance(c, str))
    assert "embedded text" in text
    assert "file:///readme.md" in text  # a resource link is named in the text
    assert "mem://blob" in text  # a blob pydantic-ai cannot send is noted, not dropped


def test_a_sync_toolkit_serves_an_agent_on_another_loop(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    """`create_toolkit` runs on its own loop thread; `run_sync` drives the agent on another."""
    with create_toolkit(write_manifest()) as toolkit:
        agent = Agent(
            TestModel(call_tools=["shout"]),
            toolsets=[ToolnexusToolset(toolkit)],
        )
        result = agent.run_sync("go")
    assert result.output == '{"shout":"a"}'  # TestModel's text: the tool's answer


def test_importing_toolnexus_imports_no_framework() -> None:
    import subprocess

    code = (
        "import sys, toolnexus; toolnexus.create_toolkit; "
        "print(any(m.split('.')[0] in ('pydantic_ai', 'agents') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


async def test_without_deferral_the_toolkit_approver_decides(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    script = Script(
        call(("make_file", {"name": "yes.txt"}, "a1"), ("make_file", {"name": "no.txt"}, "a2")),
        say("done"),
    )
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.arguments["name"])
        return request.arguments["name"] == "yes.txt"

    async with await acreate_toolkit(write_manifest(), approver=approver) as toolkit:
        toolset = ToolnexusToolset(toolkit, defer_approvals=False)
        result = await Agent(script.model, toolsets=[toolset]).run("go")
    assert result.output == "done"  # no deferred requests: the approver answered in the run
    assert sorted(asked) == ["no.txt", "yes.txt"]
    assert (tmp_path / "yes.txt").exists() and not (tmp_path / "no.txt").exists()
    seen = returns(result.all_messages())
    assert seen["a1"].outcome == "success"
    assert seen["a2"].outcome == "failed" and "declined" in seen["a2"].text


async def test_a_pdf_goes_back_as_binary_content(write_manifest: WriteManifest) -> None:
    @tool
    def report() -> Result:
        """A PDF report."""
        pdf = ResourcePart(uri="file:///r.pdf", mime_type="application/pdf", data=b"%PDF-1.4")
        return Result(content="the report", parts=(pdf,))

    script = Script(call(("report", {}, "f1")), say("read it"))
    async with await acreate_toolkit(extra_tools=[report]) as toolkit:
        result = await Agent(script.model, toolsets=[ToolnexusToolset(toolkit)]).run("go")
    content = returns(result.all_messages())["f1"].content
    assert content[0] == "the report"
    assert content[1] == BinaryContent(data=b"%PDF-1.4", media_type="application/pdf")


async def test_a_closed_toolkit_offers_no_tools(write_manifest: WriteManifest) -> None:
    toolkit = await acreate_toolkit(write_manifest())
    toolset = ToolnexusToolset(toolkit)
    await toolkit.aclose()
    script = Script(say("no tools"))
    result = await Agent(script.model, toolsets=[toolset]).run("go")
    assert script.offered == [[]] and result.output == "no tools"
