"""LangChain and LangGraph: a `Toolkit` as LangChain tools, in process, with `ask` as an interrupt.

```python
from langchain.agents import create_agent
from toolnexus.integrations.langchain import ToolnexusMiddleware

agent = create_agent(model, middleware=[ToolnexusMiddleware(toolkit)], checkpointer=saver)
```

Every call goes through `Toolkit.aexecute` (or `execute` on LangChain's sync path), so
validation, approval, the sandbox, middleware and reload stay ours; LangChain never validates
the arguments itself (the schema is handed over as a JSON Schema dict). Our results come back as
`ToolMessage`s: an error result has `status="error"` and text the model reads, images and other
files are standard content blocks (audio, which tool messages cannot carry, becomes a note), and
the `artifact` carries `structured` and the scalar metadata for the application.

Approval. A call a rule marks `ask`, made inside a LangGraph run with a checkpointer, calls
`langgraph.types.interrupt` with the same value as `HumanInTheLoopMiddleware` in its
`per_call` mode (a `ToolApprovalRequest`: `type: "tool_approval"`, `tool_call_id`, `name`,
`args`, `description`) plus `rule`, `origin` and `reason`; the run is resumed with
`Command(resume=decision)` where the decision is `{"type": "approve"}`,
`{"type": "reject", "message": ...}` or `{"type": "edit", "edited_action": {"name", "args"}}`
(also accepted: `{"decisions": [decision]}`, and True / False). With several interrupts pending,
resume with `{interrupt.id: decision}`. Anything else refuses the call (fail closed). The asking
calls of one `toolnexus_tool_node` step reach their interrupts in the model's order, which is
how LangGraph matches decisions to them. Outside a
graph run, or without a checkpointer to resume from, the toolkit's own approver decides.

Reload. `langchain_tools(toolkit)` is the tool list of now; `ToolnexusMiddleware` (for
`create_agent`) and `toolnexus_tool_node` (for a hand-built graph) look the tools up again on
every model turn and tool call, so a reload shows through on the next turn.

`import toolnexus` never imports this module; it needs the `langchain` extra.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import ToolMessage
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

from ..adapters.results import _flagged_text, _part_text
from ..approval import ApprovalRequest, Approver, Decision, Verdict
from ..base import AudioPart, ImagePart, ResourcePart, Result
from ..errors import ToolError
from ..toolkit import Toolkit

__all__ = [
    "ToolnexusMiddleware",
    "ToolnexusTool",
    "langchain_tools",
    "toolnexus_tool_node",
]

_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "toolnexus_langchain_call_id", default=None
)
"""The call id of the `ToolCall` being run: LangChain keeps it from `_run`, we need it there."""

# langgraph's keys for the run's scratchpad (interrupt bookkeeping) and checkpointer: both must
# be present for `interrupt` to pause a run that can later be resumed.
_SCRATCHPAD = "__pregel_scratchpad"
_CHECKPOINTER = "__pregel_checkpointer"

_DECISION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"type": {"const": "approve"}},
            "required": ["type"],
        },
        {
            "type": "object",
            "properties": {"type": {"const": "reject"}, "message": {"type": "string"}},
            "required": ["type"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "edit"},
                "edited_action": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
                    "required": ["name", "args"],
                },
            },
            "required": ["type", "edited_action"],
        },
    ]
}
"""What `Command(resume=...)` may carry, published with the interrupt for clients' forms."""


class ToolnexusTool(BaseTool):
    """One toolkit tool as a LangChain tool; calls run through the toolkit's executor.

    Invoked with a `ToolCall` (as `ToolNode` and `create_agent` do), it returns a `ToolMessage`
    for that call id; invoked with plain arguments, the message's content.
    """

    toolkit: Toolkit
    """The toolkit that runs the calls (its current generation, whatever reloads since)."""

    def run(self, tool_input: str | dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        token = _CALL_ID.set(kwargs.get("tool_call_id"))
        try:
            return super().run(tool_input, *args, **kwargs)
        finally:
            _CALL_ID.reset(token)

    async def arun(self, tool_input: str | dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        token = _CALL_ID.set(kwargs.get("tool_call_id"))
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _CALL_ID.reset(token)

    def _run(self, /, **arguments: Any) -> Any:
        call_id = _CALL_ID.get()
        approver, arguments = _approval(self.toolkit, self.name, arguments, call_id)
        result = self.toolkit.execute(self.name, arguments, call_id=call_id, approver=approver)
        return self._output(result, call_id)

    async def _arun(self, /, **arguments: Any) -> Any:
        call_id = _CALL_ID.get()
        approver, arguments = _approval(self.toolkit, self.name, arguments, call_id)
        result = await self.toolkit.aexecute(
            self.name, arguments, call_id=call_id, approver=approver
        )
        return self._output(result, call_id)

    def _output(self, result: Result, call_id: str | None) -> Any:
        content = _content(result)
        if call_id is None:
            return content
        return ToolMessage(
            content=content,
            tool_call_id=call_id,
            name=self.name,
            status="error" if result.is_error else "success",
            artifact=_artifact(result),
        )


def langchain_tools(toolkit: Toolkit) -> list[ToolnexusTool]:
    """The toolkit's current tools as LangChain tools, sorted by name.

    A snapshot: call it again after a reload (or use `ToolnexusMiddleware` /
    `toolnexus_tool_node`, which do) to see added and removed tools.
    """
    return [
        ToolnexusTool(
            name=tool.name,
            description=tool.description or tool.title or tool.name,
            args_schema=tool.parameters,
            toolkit=toolkit,
        )
        for tool in toolkit.tools()
    ]


class _CurrentTools:
    """The toolkit's tools as LangChain tools, rebuilt when its generation changes."""

    def __init__(self, toolkit: Toolkit) -> None:
        self.toolkit = toolkit
        self._generation = -1
        self._by_name: dict[str, ToolnexusTool] = {}

    def by_name(self) -> dict[str, ToolnexusTool]:
        generation = self.toolkit.generation
        if generation != self._generation:
            self._by_name = {t.name: t for t in langchain_tools(self.toolkit)}
            self._generation = generation
        return self._by_name

    def route(self, request: ToolCallRequest) -> ToolCallRequest:
        """The request with the toolkit's current tool for its name: ours, or a name no tool
        of the graph has (the toolkit then answers with its "not found" message, naming the
        closest tools). Other tools' requests pass unchanged."""
        tool = request.tool
        if tool is not None and not (
            isinstance(tool, ToolnexusTool) and tool.toolkit is self.toolkit
        ):
            return request
        name = request.tool_call["name"]
        current = self.by_name().get(name)
        if current is None:
            current = ToolnexusTool(
                name=name, description=name, args_schema={"type": "object"}, toolkit=self.toolkit
            )
        return request.override(tool=current)

    def with_tools(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The model request offering the toolkit's current tools (and any other tools)."""
        others = [
            t
            for t in request.tools
            if not (isinstance(t, ToolnexusTool) and t.toolkit is self.toolkit)
        ]
        return request.override(tools=[*others, *self.by_name().values()])


class ToolnexusMiddleware(AgentMiddleware[Any, Any, Any]):
    """`create_agent` middleware offering a toolkit's current tools on every model turn and
    running their calls through it: one line, and a reload shows through on the next turn.

    `create_agent(model, middleware=[ToolnexusMiddleware(toolkit)], checkpointer=...)`; other
    tools passed to `create_agent` keep working beside the toolkit's.
    """

    def __init__(self, toolkit: Toolkit) -> None:
        super().__init__()
        self.tools = []
        self._current = _CurrentTools(toolkit)

    @property
    def name(self) -> str:
        # Distinct per toolkit, so an agent may take two toolkits' middleware.
        return f"ToolnexusMiddleware[{self._current.toolkit.name or id(self._current.toolkit)}]"

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(self._current.with_tools(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(self._current.with_tools(request))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        return handler(self._current.route(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        return await handler(self._current.route(request))


def toolnexus_tool_node(toolkit: Toolkit, **options: Any) -> ToolNode:
    """A LangGraph `ToolNode` running calls on the toolkit's current tools (for hand-built
    graphs; `create_agent` users take `ToolnexusMiddleware`). Bind the model to
    `langchain_tools(toolkit)` on each turn so it sees a reload too.

    Args:
        toolkit: the toolkit whose tools run.
        options: passed to `ToolNode` (e.g. `name`, `messages_key`).
    """
    current = _CurrentTools(toolkit)
    order = _AskOrder(toolkit)

    def wrap(
        request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        with order.turn(request):
            return handler(current.route(request))

    async def awrap(
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        async with order.aturn(request):
            return await handler(current.route(request))

    return _ToolnexusToolNode([], wrap_tool_call=wrap, awrap_tool_call=awrap, **options)


class _AskOrder:
    """The asking calls of one `ToolNode` step, run one after another in the model's order.

    LangGraph hands a node's resume values to its interrupts in the order they are reached.
    The calls of one step run at once (in threads on the sync path), so a slow call could
    otherwise take the decision the reviewer made for another: an approval given for one call
    would run a different one. Calls that do not ask run as before, at once.
    """

    def __init__(self, toolkit: Toolkit) -> None:
        self.toolkit = toolkit
        self._lock = threading.Condition()

    def _place(self, request: ToolCallRequest) -> tuple[_Step, str, list[str]] | None:
        """The step, this call's id and the asking calls before it that it waits for (none
        unless it asks too); None for a step of one call. Every call of a longer step says
        when it is through, asking or not, so that a call whose verdict changed with a reload
        since its neighbours looked cannot leave them waiting."""
        step, call_id = _STEP.get(), request.tool_call.get("id")
        if step is None or call_id is None or len(step.calls) < 2:
            return None
        asking = [
            c["id"]
            for c in step.calls
            if c.get("id") and self.toolkit.check(c["name"], c.get("args")).decision is Decision.ASK
        ]
        before = asking[: asking.index(call_id)] if call_id in asking else []
        return step, call_id, before

    @contextlib.contextmanager
    def turn(self, request: ToolCallRequest) -> Iterator[None]:
        place = self._place(request)
        if place is None:
            yield
            return
        step, call_id, before = place
        with self._lock:
            self._lock.wait_for(lambda: step.done.issuperset(before))
        try:
            yield
        finally:
            self._leave(step, call_id)

    @contextlib.asynccontextmanager
    async def aturn(self, request: ToolCallRequest) -> AsyncIterator[None]:
        place = self._place(request)
        if place is None:
            yield
            return
        step, call_id, before = place
        while True:  # the calls of an async step share one loop: an event each, no thread
            with self._lock:
                if step.done.issuperset(before):
                    break
                wakeup = asyncio.Event()
                step.wakeups.append(wakeup)
            await wakeup.wait()
        try:
            yield
        finally:
            self._leave(step, call_id)

    def _leave(self, step: _Step, call_id: str) -> None:
        with self._lock:
            step.done.add(call_id)
            wakeups, step.wakeups = step.wakeups, []
            for wakeup in wakeups:
                wakeup.set()
            self._lock.notify_all()


@dataclass(eq=False)
class _Step:
    """One run of a `ToolNode`: its calls (which run at once) and those that are through."""

    calls: list[Any]
    done: set[str] = field(default_factory=set)
    wakeups: list[asyncio.Event] = field(default_factory=list)


_STEP: contextvars.ContextVar[_Step | None] = contextvars.ContextVar(
    "toolnexus_langchain_step", default=None
)
"""The `ToolNode` step being run, seen by its calls' threads and tasks."""


class _ToolnexusToolNode(ToolNode):
    """A `ToolNode` that tells its calls which calls share their step, for `_AskOrder`."""

    def _parse_input(self, input: Any) -> Any:
        tool_calls, input_type = super()._parse_input(input)
        _STEP.set(_Step(list(tool_calls)))  # the calls' threads and tasks copy this context
        return tool_calls, input_type


# -- approval ------------------------------------------------------------------------------


def _approval(
    toolkit: Toolkit, name: str, arguments: dict[str, Any], call_id: str | None
) -> tuple[Approver | None, dict[str, Any]]:
    """The approver for this call and the arguments to run it with.

    None keeps the toolkit's approver: the call does not ask, or no resumable graph run is
    there to pause. Inside one, an `ask` pauses the run; on resume the reviewer's decision
    becomes an approver that says it (the executor decides again on the arguments it runs, so a
    deny rule still wins over an approval, and an edit is checked like any call).
    """
    verdict = toolkit.check(name, arguments)
    if verdict.decision is not Decision.ASK or not _resumable():
        return None, arguments
    answer = interrupt(
        _request(name, arguments, call_id, verdict), response_schema=_DECISION_SCHEMA
    )
    return _decide(name, arguments, answer)


def _resumable() -> bool:
    """Inside a LangGraph run that has a checkpointer, so an interrupt can be resumed."""
    config = var_child_runnable_config.get()
    configurable = (config or {}).get("configurable") or {}
    return configurable.get(_SCRATCHPAD) is not None and configurable.get(_CHECKPOINTER) is not None


def _request(
    name: str, arguments: dict[str, Any], call_id: str | None, verdict: Verdict
) -> dict[str, Any]:
    """The interrupt's value: langchain's `ToolApprovalRequest`, plus the rule that asked."""
    return {
        "type": "tool_approval",
        "tool_call_id": call_id or "",
        "name": name,
        "args": arguments,
        "description": f"{name} needs approval: {verdict.describe()}",
        "rule": verdict.rule,
        "origin": verdict.origin,
        "reason": verdict.reason,
    }


def _decide(name: str, arguments: dict[str, Any], answer: Any) -> tuple[Approver, dict[str, Any]]:
    """The reviewer's resume value as an approver (and the arguments, edited or not)."""
    if isinstance(answer, Mapping) and "decisions" in answer:  # HumanInTheLoopMiddleware's shape
        decisions = answer["decisions"]
        if not (isinstance(decisions, list) and len(decisions) == 1):
            return _refuse("the reviewer's answer did not hold exactly one decision"), arguments
        answer = decisions[0]
    if answer is True:
        return _approve, arguments
    if answer is False:
        return _refuse("the user declined this call"), arguments
    kind = answer.get("type") if isinstance(answer, Mapping) else None
    if kind == "approve":
        return _approve, arguments
    if kind == "reject":
        message = answer.get("message")
        if isinstance(message, str) and message:
            return _refuse(f"the user declined this call: {message}"), arguments
        return _refuse("the user declined this call"), arguments
    if kind == "edit":
        action = answer.get("edited_action")
        if isinstance(action, Mapping) and action.get("name") == name:
            edited = action.get("args")
            if isinstance(edited, Mapping):
                return _approve, dict(edited)
        return _refuse("the reviewer's edit was not a call of this tool"), arguments
    return _refuse(f"the reviewer's answer {answer!r} is not an approval decision"), arguments


def _approve(request: ApprovalRequest) -> bool:
    return True


def _refuse(reason: str) -> Approver:
    def refuse(request: ApprovalRequest) -> bool:
        raise ToolError(reason)  # the executor denies with this reason, for the model to read

    return refuse


# -- results -------------------------------------------------------------------------------

_NO_AUDIO = "LangChain tool messages carry text, images and files"


def _content(result: Result) -> str | list[str | dict[str, Any]]:
    """The message content: the text (marked as an error for models whose providers drop the
    status), then the parts as standard content blocks."""
    text = _flagged_text(result)
    if not result.parts:
        return text
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for part in result.parts:
        if isinstance(part, ImagePart):
            blocks.append({"type": "image", "base64": part.base64, "mime_type": part.mime_type})
        elif isinstance(part, AudioPart):  # not a tool-message block type: ToolNode would
            # turn the whole list into JSON text
            blocks.append({"type": "text", "text": _part_text(part, _NO_AUDIO)})
        elif isinstance(part, ResourcePart) and part.data is not None:
            kind = "image" if (part.mime_type or "").startswith("image/") else "file"
            blocks.append(_data_block(kind, part))
        else:
            blocks.append({"type": "text", "text": _part_text(part, "")})
    return blocks


def _data_block(kind: str, part: ResourcePart) -> dict[str, Any]:
    data = base64.b64encode(part.data or b"").decode("ascii")
    return {"type": kind, "base64": data, "mime_type": part.mime_type or "application/octet-stream"}


def _artifact(result: Result) -> dict[str, Any]:
    """For the application (never sent to the model): JSON only, so checkpointers store it."""
    metadata = {
        key: value
        for key, value in result.metadata.items()
        if value is None or isinstance(value, str | int | float | bool)
    }
    return {"structured": result.structured, "metadata": metadata}
