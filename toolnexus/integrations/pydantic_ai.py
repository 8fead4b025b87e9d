"""A `Toolkit` as a pydantic-ai toolset: `Agent(model, toolsets=[ToolnexusToolset(toolkit)])`.

What maps to what, and why:

- **Tools**: the toolkit's current tools, read at every run step, so a reload (or an MCP server's
  new tool list) shows through on the next step. A tool's JSON Schema goes to the model as it is;
  pydantic-ai checks only that the arguments are a JSON object, because the executor validates
  them against the schema (with its own messages) the same way for every caller.
  A tool that may not run alongside others is marked `sequential`, as `execute_many` would run it.
- **Calls** go through `Toolkit.aexecute`: approval, middleware, sandbox and timeouts apply.
- **Errors**: an error result becomes `ToolFailed`, which the model reads as a failed tool
  return and which spends no retry budget, since pydantic-ai aborts the whole run
  (`UnexpectedModelBehavior`) once a tool's retries are used up. Only invalid arguments become
  `ModelRetry` (pydantic-ai's "fix the arguments" prompt), and only while the tool's retry budget
  lasts; after that they are a `ToolFailed` too, so a model that cannot get a call right reads
  the error instead of ending the run. Denials, timeouts and tool failures are never retries:
  calling again would not change them.
- **`ask`**: with `defer_approvals=True` (the default) a call whose `Toolkit.check` verdict is
  `ask` raises `ApprovalRequired`, so the run ends with `DeferredToolRequests` and the
  application's approval UI answers with `DeferredToolResults`, as for any pydantic-ai tool. An
  approved call then runs with an approver that says yes to that one call (deny rules still
  apply: approval never overrides a deny); a refused one never runs and the model reads
  pydantic-ai's denial message. The request's metadata carries the rule, where it is written and
  the reason. With `defer_approvals=False` the toolkit's own approver decides instead.
- **Parts**: images, audio and PDFs become `BinaryContent` in the tool return, which pydantic-ai
  sends natively where the model accepts it; other parts become a bracketed note in the text.
  `ToolReturn.metadata` keeps the result's metadata for the application.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_ai import (
    ApprovalRequired,
    BinaryContent,
    ModelRetry,
    RunContext,
    ToolFailed,
    ToolReturn,
)
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from ..adapters.results import _part_text
from ..approval import ApprovalRequest, Decision
from ..base import AudioPart, ImagePart, Part, ResourcePart, Result, Tool
from ..errors import UsageError
from ..toolkit import Toolkit

__all__ = ["ToolnexusToolset"]

# Any JSON object: the executor holds the arguments to the tool's schema.
_OBJECT = SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))
_BINARY_TYPES = ("image/", "audio/", "application/pdf")


class ToolnexusToolset(AbstractToolset[Any]):
    """The tools of a `Toolkit`, for a pydantic-ai `Agent` (`toolsets=[...]`).

    The toolkit stays the application's: entering or leaving the agent does not open or close
    it. One toolset may serve many agents and runs at once.
    """

    def __init__(
        self,
        toolkit: Toolkit,
        *,
        id: str | None = None,
        max_retries: int = 1,
        defer_approvals: bool = True,
    ) -> None:
        """
        Args:
            toolkit: the toolkit whose tools the agent calls.
            id: the toolset's id (needed for durable execution, e.g. Temporal).
            max_retries: how many invalid calls of one tool the model may correct through
                `ModelRetry`; later ones come back as a failed tool return.
            defer_approvals: map `ask` to pydantic-ai's deferred approvals (True), or let the
                toolkit's own approver decide (False).
        """
        self.toolkit = toolkit
        self._id = id
        self.max_retries = max_retries
        self.defer_approvals = defer_approvals
        self._cache: dict[str, tuple[Tool, ToolsetTool[Any]]] = {}

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools: dict[str, ToolsetTool[Any]] = {}
        cache: dict[str, tuple[Tool, ToolsetTool[Any]]] = {}
        try:
            current = self.toolkit.tools()
        except UsageError:  # closed (by a shutdown handler, say): nothing left to call
            return {}
        for tool in current:
            cached = self._cache.get(tool.name)
            if cached is None or cached[0] is not tool:  # new, or replaced by a reload
                cached = (tool, self._toolset_tool(tool))
            cache[tool.name] = cached
            tools[tool.name] = cached[1]
        self._cache = cache
        return tools

    def _toolset_tool(self, tool: Tool) -> ToolsetTool[Any]:
        definition = ToolDefinition(
            name=tool.name,
            description=tool.description or None,
            parameters_json_schema=tool.parameters,
            sequential=not tool.may_run_concurrently,
            metadata={"source": tool.source, "origin": tool.origin, "read_only": tool.read_only},
        )
        return ToolsetTool(
            toolset=self, tool_def=definition, max_retries=self.max_retries, args_validator=_OBJECT
        )

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        approver = None
        if self.defer_approvals:
            if ctx.tool_call_approved:
                approver = _approve_once
            else:
                verdict = self.toolkit.check(name, tool_args)
                if verdict.decision is Decision.ASK:
                    raise ApprovalRequired(
                        metadata={
                            "rule": verdict.rule,
                            "origin": verdict.origin,
                            "reason": verdict.reason,
                        }
                    )
        result = await self.toolkit.aexecute(
            name, tool_args, call_id=ctx.tool_call_id, approver=approver
        )
        if not result.is_error:
            return _tool_return(result)
        if result.metadata.get("error_type") == "InvalidArguments" and ctx.retry < ctx.max_retries:
            raise ModelRetry(result.content)
        raise ToolFailed(result.text or f"tool {name!r} failed without a message")


def _approve_once(request: ApprovalRequest) -> bool:
    """The approver of a call the application approved through `DeferredToolResults`."""
    return True


def _tool_return(result: Result) -> ToolReturn[Any]:
    """The result as pydantic-ai's tool return: text and media (`BinaryContent`) in the order
    the tool sent them, so "the image above" still reads right."""
    metadata: Mapping[str, Any] = result.metadata
    if not result.parts:
        return ToolReturn(return_value=result.text, metadata=dict(metadata))
    content: list[Any] = [result.text] if result.text else []
    for part in result.parts:
        binary = _binary(part)
        if binary is None:
            content.append(_part_text(part, "only images, audio and PDFs are sent as files"))
        else:
            content.append(binary)
    return ToolReturn(return_value=content, metadata=dict(metadata))


def _binary(part: Part) -> BinaryContent | None:
    if isinstance(part, ImagePart | AudioPart):
        return BinaryContent(data=part.data, media_type=part.mime_type)
    if (
        isinstance(part, ResourcePart)
        and part.data is not None
        and (part.mime_type or "").startswith(_BINARY_TYPES)
    ):
        return BinaryContent(data=part.data, media_type=part.mime_type or "")
    return None
