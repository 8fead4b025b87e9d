"""A `Toolkit` as OpenAI Agents SDK function tools: `Agent(..., tools=function_tools(toolkit))`.

What maps to what, and why:

- **Tools**: one `FunctionTool` per tool. Its schema is our strict conversion (`strict_schema`)
  when `strict=True` and the schema converts, else the tool's own schema, sent non-strict. The
  returned list is kept current: a reload (or an MCP server's new tool list) replaces the
  toolkit's entries in it in place, so the agent holding it sees the new tools on its next turn;
  other tools in the list stay where they are. A tool the toolkit no longer has is disabled at
  once (`is_enabled`), even before the list is refreshed.
- **Calls** go through `Toolkit.aexecute` with the model's JSON text, so the executor decodes and
  validates it (a strict call's `null` for an optional argument means "not given"): approval,
  middleware, sandbox and timeouts apply. A call never raises into the run.
- **Errors**: the SDK's tool outputs have no error flag, so an error result is its text prefixed
  with "Error: " (as in `openai_responses_result`); the model reads it and may call again, as
  after an invalid call.
- **`ask`**: `needs_approval` asks `Toolkit.check`, so a call whose verdict is `ask` interrupts
  the run (`result.interruptions`); the application approves or rejects it on the `RunState`
  (`state.approve(item)` / `state.reject(item)`) and resumes with `Runner.run(agent, state)`, its
  existing approval flow unchanged. An approved call runs with an approver that reads the SDK's
  decision for that call (deny rules still apply); a rejected one never runs and the model
  reads the SDK's rejection message.
- **Parts**: images become `ToolOutputImage` (data URLs) and PDFs `ToolOutputFileContent`, text
  `ToolOutputText`; other parts become a bracketed note in the text.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agents import (
    FunctionTool,
    RunContextWrapper,
    Tool,
    ToolOutputFileContent,
    ToolOutputImage,
    ToolOutputText,
)
from agents.tool_context import ToolContext

from .. import base
from ..adapters.results import openai_responses_result
from ..adapters.strict import strict_schema
from ..approval import ApprovalRequest, Decision
from ..errors import StrictSchemaError, UsageError
from ..toolkit import Toolkit

if TYPE_CHECKING:
    from ..reload import ReloadEvent

__all__ = ["ToolkitTools", "function_tools"]

ToolOutput = ToolOutputText | ToolOutputImage | ToolOutputFileContent


class ToolkitTools(list[Tool]):
    """The list `function_tools` returns: a plain list the toolkit keeps current on reload."""


def function_tools(
    toolkit: Toolkit, *, strict: bool = True, defer_approvals: bool = True
) -> ToolkitTools:
    """The toolkit's tools as `FunctionTool`s, for `Agent(tools=...)`.

    Pass the list itself (or add your own tools to it): a copy (`[*function_tools(tk)]`) is not
    refreshed on reload.

    Args:
        toolkit: the toolkit whose tools the agent calls.
        strict: send schemas in OpenAI's strict shape where they convert.
        defer_approvals: map `ask` to the SDK's approvals (`needs_approval`, interruptions,
            `RunState.approve`/`reject`); False lets the toolkit's own approver decide.
    """
    builder = _Builder(toolkit, strict=strict, defer_approvals=defer_approvals)
    tools = ToolkitTools(builder.build(toolkit.tools()))
    ref = weakref.ref(tools)

    def refresh(event: ReloadEvent) -> None:
        live = ref()
        if live is None:  # the agent and its list are gone: stop listening
            toolkit.on_reload.remove(refresh)
        elif event.kind != "error":
            others = [t for t in live if not builder.owns(t)]  # before `build` forgets the old
            live[:] = others + builder.build(toolkit.tools())

    toolkit.on_reload.append(refresh)
    return tools


class _Builder:
    """Makes the `FunctionTool`s of one `function_tools` list, reusing those of unchanged tools."""

    def __init__(self, toolkit: Toolkit, *, strict: bool, defer_approvals: bool) -> None:
        self.toolkit = toolkit
        self.strict = strict
        self.defer_approvals = defer_approvals
        self._made: dict[str, tuple[base.Tool, FunctionTool]] = {}

    def owns(self, tool: Tool) -> bool:
        return any(made is tool for _, made in self._made.values())

    def build(self, tools: Iterable[base.Tool]) -> list[Tool]:
        made: dict[str, tuple[base.Tool, FunctionTool]] = {}
        for tool in tools:
            entry = self._made.get(tool.name)
            if entry is None or entry[0] is not tool:
                entry = (tool, self._function_tool(tool))
            made[tool.name] = entry
        self._made = made
        return [function_tool for _, function_tool in made.values()]

    def _function_tool(self, tool: base.Tool) -> FunctionTool:
        toolkit, name = self.toolkit, tool.name
        schema, is_strict = dict(tool.parameters), False
        if self.strict:
            # A schema that does not convert is sent as it is, non-strict; the executor
            # validates either way.
            with contextlib.suppress(StrictSchemaError):
                schema, is_strict = strict_schema(tool.parameters), True

        async def needs_approval(ctx: RunContextWrapper[Any], args: dict[str, Any], _: str) -> bool:
            return toolkit.check(name, args).decision is Decision.ASK

        async def invoke(ctx: ToolContext[Any], arguments: str) -> str | list[ToolOutput]:
            def sdk_decision(request: ApprovalRequest) -> bool:
                return ctx.is_tool_approved(name, ctx.tool_call_id) is True

            result = await toolkit.aexecute(
                name,
                arguments,
                call_id=ctx.tool_call_id,
                approver=sdk_decision if self.defer_approvals else None,
            )
            return _output(result)

        def enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
            try:  # removed by a reload the list has not caught up with yet, or closed
                return toolkit.get(name) is not None
            except UsageError:
                return False

        return FunctionTool(
            name=name,
            description=tool.description,
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=is_strict,
            is_enabled=enabled,
            needs_approval=needs_approval if self.defer_approvals else False,
        )


def _output(result: base.Result) -> str | list[ToolOutput]:
    """The result as the SDK's tool output: the Responses mapping, in the SDK's own types."""
    call = base.ToolCall(name="", id="_")
    output = openai_responses_result(call, result)["output"]
    if isinstance(output, str):
        return output
    items: list[ToolOutput] = []
    for item in output:
        if item["type"] == "input_text":
            items.append(ToolOutputText(text=item["text"]))
        elif item["type"] == "input_image":
            items.append(ToolOutputImage(image_url=item["image_url"]))
        else:
            items.append(
                ToolOutputFileContent(file_data=item["file_data"], filename=item["filename"])
            )
    return items
