"""The executor: decoding, validation, approval, middleware order, and never raising."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolnexus import (
    ApprovalRequest,
    Call,
    Decision,
    Executor,
    Registry,
    Result,
    Tool,
    ToolCall,
    ToolContext,
    ToolError,
    Verdict,
    tool,
)
from toolnexus.middleware import Next, timeout

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def greet(name: str, punctuation: str | None = None) -> str:
    """Greet someone."""
    return f"hello {name}{punctuation or ''}"


@tool
async def fail_for_model(reason: str) -> str:
    """Fail with a message meant for the model."""
    raise ToolError(f"cannot do that: {reason}")


@tool
async def crash() -> str:
    """Crash with an ordinary exception."""
    raise ValueError("internal detail")


@tool
async def interrupt() -> str:
    """Raise a BaseException subclass."""
    raise KeyboardInterrupt


@tool
async def exit_process() -> str:
    """Raise SystemExit."""
    raise SystemExit(3)


@tool
async def generator_exit() -> str:
    """Raise GeneratorExit, as code closing a generator by hand may."""
    raise GeneratorExit


class Unusual(BaseException):
    """A BaseException that is neither cancellation nor one of Python's own."""


@tool
async def unusual() -> str:
    """Raise a custom BaseException subclass."""
    raise Unusual("odd")


@tool
def sync_exit() -> str:
    """Call sys.exit from a sync function (argparse does this on bad options)."""
    raise SystemExit(2)


@tool
async def sleepy(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "woke"


def make(*tools: Tool, **kwargs: Any) -> Executor:
    return Executor(Registry(tools or (add, greet)), **kwargs)


async def test_runs_with_dict_and_with_json_text() -> None:
    ex = make()
    assert (await ex.execute("add", {"a": 2, "b": 3})).content == "5"
    result = await ex.execute("add", '{"a": 2, "b": 40}')
    assert result.content == "42"
    assert result.structured == 42
    assert not result.is_error


async def test_unknown_tool_is_an_error_result_with_suggestion() -> None:
    result = await make().execute("ad", {})
    assert result.is_error
    assert "unknown tool 'ad'" in result.content
    assert "did you mean 'add'" in result.content
    assert result.metadata["error_type"] == "ToolNotFound"


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ('{"a": 1, "a": 2, "b": 3}', "repeat the key 'a'"),
        (b'{"a": 1, "b": "\xff"}', "not valid UTF-8"),
        ('{"a": 1, "b": "\\ud800"}', "surrogate"),
        ("[1, 2]", "must be a JSON object"),
        ('{"a": 1,', "not valid JSON"),
    ],
)
async def test_bad_json_is_refused(raw: str | bytes, needle: str) -> None:
    result = await make().execute("add", raw)
    assert result.is_error
    assert needle in result.content
    assert result.metadata["error_type"] == "InvalidArguments"


async def test_every_validation_problem_is_listed_with_its_path() -> None:
    result = await make().execute("add", {"a": "two", "extra": 1})
    assert result.is_error
    text = result.content
    assert "$.a" in text
    assert "'b' is a required property" in text
    assert "extra" in text
    assert len(result.metadata["problems"]) == 3


async def test_null_for_optional_parameter_is_treated_as_absent() -> None:
    result = await make().execute("greet", {"name": "ada", "punctuation": None})
    assert result.content == "hello ada"
    still_bad = await make().execute("greet", {"name": None})
    assert still_bad.is_error


async def test_tool_error_reaches_the_model_verbatim() -> None:
    result = await make(fail_for_model).execute("fail_for_model", {"reason": "no disk"})
    assert result.is_error
    assert result.content == "cannot do that: no disk"


async def test_crash_shows_type_and_message_and_keeps_traceback_out_of_content() -> None:
    result = await make(crash).execute("crash", {})
    assert result.is_error
    assert "ValueError: internal detail" in result.content
    assert "Traceback" not in result.content
    assert "Traceback" in result.metadata["traceback"]


@pytest.mark.parametrize("name", ["interrupt", "exit_process"])
async def test_base_exceptions_from_a_tool_become_results(name: str) -> None:
    result = await make(interrupt, exit_process).execute(name, {})
    assert result.is_error
    assert result.metadata["error_type"] in ("KeyboardInterrupt", "SystemExit")


@pytest.mark.parametrize(
    ("name", "error_type"),
    [
        ("generator_exit", "GeneratorExit"),
        ("unusual", "Unusual"),
        ("sync_exit", "SystemExit"),
    ],
)
async def test_every_base_exception_a_tool_raises_is_a_result(name: str, error_type: str) -> None:
    seen: list[Result] = []

    async def record(call: Call, nxt: Next) -> Result:
        seen.append(await nxt(call))
        return seen[-1]

    ex = make(generator_exit, unusual, sync_exit, middleware=[record])
    result = await ex.execute(name, {})
    assert result.is_error
    assert result.metadata["error_type"] == error_type
    assert f"tool {name!r} failed: {error_type}" in result.content
    assert seen == [result]  # middleware saw a result, not an exception


class _Suspend:
    def __await__(self) -> Any:
        yield "suspended"


@tool
async def suspends() -> str:
    """Suspend once, on an awaitable that needs no event loop."""
    await _Suspend()
    return "resumed"


def test_closing_a_suspended_call_closes_it() -> None:
    # GeneratorExit thrown in by `coroutine.close()` (a pending task destroyed, an abandoned
    # coroutine collected) also becomes a result at the tool, yet close() must still close:
    # a middleware that awaited again after its `next` would make close() raise.
    async def then_suspend(call: Call, nxt: Next) -> Result:
        result = await nxt(call)
        await _Suspend()
        return result

    coro = make(suspends, middleware=[then_suspend]).execute("suspends", {})
    assert coro.send(None) == "suspended"
    coro.close()


async def test_caller_cancellation_propagates() -> None:
    ex = make(sleepy)
    with anyio.fail_after(5):
        task = asyncio.ensure_future(ex.execute("sleepy", {"seconds": 30}))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_tool_raising_cancelled_itself_is_a_result() -> None:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> Result:
        raise asyncio.CancelledError

    weird = Tool(name="weird", handler=handler)
    result = await make(weird).execute("weird", {})
    assert result.is_error
    assert "cancelled" in result.content


async def test_timeout_middleware_stops_the_call() -> None:
    ex = make(sleepy, middleware=[timeout(0.05)])
    with anyio.fail_after(5):
        result = await ex.execute("sleepy", {"seconds": 10})
    assert result.is_error
    assert "timed out after 50ms" in result.content
    assert result.metadata["retryable"] is True


class _Rules:
    def __init__(self, decision: Decision, rule: str = "test-rule") -> None:
        self.decision = decision
        self.rule = rule

    def decide(self, t: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        return Verdict(decision=self.decision, rule=self.rule, origin="tools.yaml:3")


ASK = _Rules(Decision.ASK)
DENY = _Rules(Decision.DENY)


class _Broken:
    def decide(self, t: Tool, arguments: Mapping[str, Any], workspace: Path) -> Verdict:
        raise RuntimeError("bug in a rule")


async def test_deny_names_the_rule_and_does_not_run() -> None:
    ran: list[int] = []

    async def handler(args: dict[str, Any], ctx: ToolContext) -> Result:
        ran.append(1)
        return Result(content="ran")

    guarded = Tool(name="guarded", handler=handler, approval=_Rules(Decision.DENY, "deny x"))
    result = await make(guarded).execute("guarded", {})
    assert result.is_error
    assert "denied by rule 'deny x' (tools.yaml:3)" in result.content
    assert result.metadata["error_type"] == "ApprovalDenied"
    assert not ran


async def test_ask_without_approver_fails_closed() -> None:
    t = Tool(
        name="t", handler=add.handler, parameters=add.parameters, approval=_Rules(Decision.ASK)
    )
    result = await make(t).execute("t", {"a": 1, "b": 2})
    assert result.is_error
    assert "no approver is configured" in result.content


async def test_ask_goes_to_sync_and_async_approvers() -> None:
    seen: list[ApprovalRequest] = []

    def yes(request: ApprovalRequest) -> bool:
        seen.append(request)
        return True

    async def no(request: ApprovalRequest) -> bool:
        return False

    t = Tool(
        name="t", handler=add.handler, parameters=add.parameters, approval=_Rules(Decision.ASK)
    )
    assert (await make(t, approver=yes).execute("t", {"a": 1, "b": 2})).content == "3"
    assert seen[0].verdict.rule == "test-rule"
    assert seen[0].arguments == {"a": 1, "b": 2}
    refused = await make(t, approver=yes).execute("t", {"a": 1, "b": 2}, approver=no)
    assert refused.is_error
    assert "declined" in refused.content


async def test_an_approver_refusing_with_a_tool_error_gives_the_model_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def busy(request: ApprovalRequest) -> bool:
        raise ToolError("the reviewer is away until Monday; do something read-only")

    t = Tool(
        name="t", handler=add.handler, parameters=add.parameters, approval=_Rules(Decision.ASK)
    )
    with caplog.at_level("ERROR", logger="toolnexus"):
        result = await make(t, approver=busy).execute("t", {"a": 1, "b": 2})
    assert result.is_error
    assert "the reviewer is away until Monday; do something read-only" in result.content
    assert result.metadata["error_type"] == "ApprovalDenied"
    assert caplog.records == []  # an expected refusal, not a crash: no traceback logged


async def test_crashing_approver_and_crashing_policy_fail_closed() -> None:
    def boom(request: ApprovalRequest) -> bool:
        raise OSError("tty gone")

    t = Tool(
        name="t", handler=add.handler, parameters=add.parameters, approval=_Rules(Decision.ASK)
    )
    r1 = await make(t, approver=boom).execute("t", {"a": 1, "b": 2})
    assert r1.is_error
    assert "could not be obtained" in r1.content
    b = Tool(name="b", handler=add.handler, parameters=add.parameters, approval=_Broken())
    r2 = await make(b).execute("b", {"a": 1, "b": 2})
    assert r2.is_error
    assert "could not be evaluated" in r2.content


async def test_permissions_deny_beats_tool_allow() -> None:
    t = Tool(
        name="t", handler=add.handler, parameters=add.parameters, approval=_Rules(Decision.ALLOW)
    )
    ex = make(t, permissions=_Rules(Decision.DENY, "deny t"))
    assert ex.check("t", {"a": 1, "b": 2}).decision is Decision.DENY
    assert (await ex.execute("t", {"a": 1, "b": 2})).is_error


async def test_check_reports_without_running() -> None:
    ex = make()
    assert ex.check("add", {"a": 1, "b": 2}).decision is Decision.ALLOW
    bad = ex.check("add", {"a": 1})
    assert bad.decision is Decision.DENY
    assert "'b' is a required property" in bad.reason
    assert "unknown tool" in ex.check("nope", {}).reason


async def test_middleware_order_first_is_outermost_and_extras_inside() -> None:
    trace: list[str] = []

    def recorder(label: str) -> Any:
        async def mw(call: Call, nxt: Next) -> Result:
            trace.append(f"{label}>")
            result = await nxt(call)
            trace.append(f"<{label}")
            return result

        return mw

    own = Tool(
        name="own",
        handler=add.handler,
        parameters=add.parameters,
        middleware=(recorder("tool"),),
    )
    ex = make(own, middleware=[recorder("outer"), recorder("inner")])
    await ex.execute("own", {"a": 1, "b": 1}, middleware=[recorder("extra")])
    assert trace == ["outer>", "inner>", "extra>", "tool>", "<tool", "<extra", "<inner", "<outer"]


async def test_denied_calls_still_pass_through_middleware() -> None:
    seen: list[Decision] = []

    async def observe(call: Call, nxt: Next) -> Result:
        seen.append(call.verdict.decision)
        return await nxt(call)

    t = Tool(
        name="t", handler=add.handler, parameters=add.parameters, approval=_Rules(Decision.DENY)
    )
    result = await make(t, middleware=[observe]).execute("t", {"a": 1, "b": 2})
    assert result.is_error
    assert seen == [Decision.DENY]


async def test_execute_many_runs_read_only_calls_together_in_call_order() -> None:
    both_started = anyio.Event()
    started: list[str] = []

    async def waits_for_peer(args: dict[str, Any], ctx: ToolContext) -> Result:
        started.append(args["id"])
        if len(started) == 2:
            both_started.set()
        await both_started.wait()  # would deadlock if the two ran one after the other
        return Result(content=args["id"])

    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    ro = Tool(name="ro", handler=waits_for_peer, parameters=schema, read_only=True)
    order: list[str] = []

    async def writes(args: dict[str, Any], ctx: ToolContext) -> Result:
        order.append(args["id"])
        await asyncio.sleep(0)
        return Result(content=args["id"])

    w = Tool(name="w", handler=writes, parameters=schema)
    ex = make(ro, w)
    calls = [
        ToolCall(name="w", arguments={"id": "w1"}),
        ToolCall(name="ro", arguments={"id": "r1"}, id="c2"),
        ToolCall(name="ro", arguments=json.dumps({"id": "r2"})),
        ToolCall(name="w", arguments={"id": "w2"}),
        ToolCall(name="w", arguments={"id": "w3"}),
    ]
    with anyio.fail_after(5):
        results = await ex.execute_many(calls)
    assert [r.content for r in results] == ["w1", "r1", "r2", "w2", "w3"]
    assert order == ["w1", "w2", "w3"]


async def test_context_is_injected_and_state_is_shared() -> None:
    @tool
    def count(ctx: ToolContext) -> int:
        """Count calls in the toolkit state."""
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        return ctx.state["n"]

    assert "ctx" not in count.parameters["properties"]
    ex = make(count)
    await ex.execute("count", {})
    assert (await ex.execute("count", {}, call_id="abc")).content == "2"
