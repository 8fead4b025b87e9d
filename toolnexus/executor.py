"""Executor: find the tool, decode and validate the arguments, decide approval, run the
middleware chain and the tool, and turn every failure into a `Result` the model can read.

This is the one place where arbitrary exceptions are caught: an agent loop must never see a
tool call raise (except when the agent itself is being cancelled).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import logging
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._suggest import did_you_mean
from .approval import (
    ALLOW_BY_DEFAULT,
    ApprovalPolicy,
    ApprovalRequest,
    Approver,
    Decision,
    Verdict,
    combine_verdicts,
)
from .base import Result, Tool, ToolCall, ToolContext, current_caller, to_result
from .curation import rules_view
from .errors import ApprovalDenied, InvalidArguments, ToolError, ToolNotFound
from .middleware import Call, Middleware, Next
from .registry import Registry
from .schema import Validator, compile_validator
from .state.memory import MemoryState

if TYPE_CHECKING:
    from .approval import AccessRules
    from .base import ProgressCallback
    from .mcp.callbacks import ElicitationHandler, SamplingHandler
    from .state import StateBackend

__all__ = ["CallLike", "Executor", "as_tool_calls", "decode_arguments"]

logger = logging.getLogger("toolnexus")

CallLike = ToolCall | Mapping[str, Any] | tuple[Any, ...]
"""A call for `execute_many`: a `ToolCall`, a mapping with `name` (and `arguments`, `id`), or
a tuple `(name, arguments)` / `(name, arguments, id)`."""

_CALL_KEYS = ("name", "arguments", "id")


class Executor:
    """Runs calls against a `Registry`. Never raises into the caller (except cancellation)."""

    def __init__(
        self,
        registry: Registry,
        *,
        middleware: Sequence[Middleware] = (),
        permissions: ApprovalPolicy | None = None,
        approver: Approver | None = None,
        workspace: Path | None = None,
        roots: Sequence[Path] = (),
        state: dict[str, Any] | None = None,
        store: StateBackend | None = None,
        access: AccessRules | None = None,
        missing: Callable[[], str] | None = None,
    ) -> None:
        self.registry = registry
        self.access = access
        """Which callers may see and call which tools (`access:`); None: every caller."""
        self.missing = missing
        """Why tools may be missing now (the MCP servers that are not ready), added to the
        answer for an unknown name: the model and the user learn the cause, not only the
        symptom."""
        self.middleware = tuple(middleware)
        self.permissions = permissions
        self.approver = approver
        self.workspace = (workspace or Path.cwd()).resolve()
        self.roots = (self.workspace, *(Path(r).resolve() for r in roots))
        self.state: dict[str, Any] = state if state is not None else {}
        self.store: StateBackend = store if store is not None else MemoryState()
        """Where rate limits and cached results live (`ToolContext.store`)."""
        # Per tool: (tool, validator, composed chain). Keyed by name, checked by identity so a
        # replaced tool gets a fresh entry.
        # The last item is the tool as rules see it (its upstream schema, when curated).
        self._prepared: dict[str, tuple[Tool, Validator, Next, Tool]] = {}
        self._ids = itertools.count(1)
        self._id_prefix = f"call_{os.getpid():x}_{id(self) & 0xFFFF:x}_"
        self._tool_logger = logging.getLogger("toolnexus.tool")

    # -- the call path -------------------------------------------------------------------

    async def execute(
        self,
        name: str,
        arguments: str | bytes | Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        middleware: Sequence[Middleware] = (),
        approver: Approver | None = None,
        progress: ProgressCallback | None = None,
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
    ) -> Result:
        """Run one call and return its result; failures come back as error results.

        Args:
            name: the tool's name, as the model gave it.
            arguments: JSON text (as models emit it), bytes, or a mapping.
            call_id: the provider's call id (one is made up when missing).
            middleware: extra middleware for this call only, inside the executor's own.
            approver: overrides the executor's approver for this call.
            progress: receives this call's progress reports (`ToolContext.progress`).
            elicitation, sampling: answer an MCP server's questions asked during this call,
                instead of the toolkit's handlers (`ToolContext.elicitation`, `.sampling`).
        """
        call_id = call_id or f"{self._id_prefix}{next(self._ids)}"
        try:
            tool, args, chain = self._validated(name, arguments)
            ctx = ToolContext(
                call_id=call_id,
                tool_name=tool.name,
                workspace=self.workspace,
                roots=self.roots,
                approver=approver or self.approver,
                state=self.state,
                store=self.store,
                sandbox=tool.sandbox,
                logger=self._tool_logger,
                progress=progress,
                elicitation=elicitation,
                sampling=sampling,
                caller=current_caller(),
            )
            verdict = self._decide(tool, args)
            if verdict.decision is Decision.ASK:
                verdict = await self._ask(tool, args, verdict, ctx)
            if middleware:
                chain = _compose((*self.middleware, *middleware, *tool.middleware), _run_inner)
            return await chain(Call(tool=tool, arguments=args, ctx=ctx, verdict=verdict))
        except ToolError as exc:
            return _tool_error_result(exc, call_id)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the agent itself is being cancelled: let it go
            return Result.error(
                f"tool {name!r} was cancelled before it finished",
                error_type="Cancelled",
                call_id=call_id,
            )
        except Exception as exc:  # noqa: BLE001 - the boundary: every failure becomes a result
            return _crash_result(exc, name, call_id)
        except BaseException as exc:  # noqa: BLE001 - raised by a middleware: see `_run_inner`
            return _crash_result(exc, name, call_id)

    async def execute_many(self, calls: Iterable[CallLike]) -> list[Result]:
        """Run calls in order, running adjacent read-only/concurrent ones together.

        Results come back in call order whatever the scheduling.

        Raises:
            TypeError: a call is not a `ToolCall`, a mapping or a tuple (see `as_tool_calls`).
        """
        batch = as_tool_calls(calls)
        results: list[Result | None] = [None] * len(batch)
        index = 0
        while index < len(batch):
            end = index
            while end < len(batch) and self._concurrent(batch[end].name):
                end += 1
            if end - index >= 2:
                group = await asyncio.gather(*(self._run_call(batch[i]) for i in range(index, end)))
                results[index:end] = group
                index = end
            else:
                results[index] = await self._run_call(batch[index])
                index += 1
        return [r for r in results if r is not None]

    def check(self, name: str, arguments: str | bytes | Mapping[str, Any] | None = None) -> Verdict:
        """The approval decision this call would get, without running it.

        An unknown tool or invalid arguments come back as a `deny` verdict whose reason says why.
        """
        try:
            tool, args, _ = self._validated(name, arguments)
        except ToolError as exc:
            return Verdict(decision=Decision.DENY, reason=exc.message)
        return self._decide(tool, args)

    # -- internals -----------------------------------------------------------------------

    async def _run_call(self, call: ToolCall) -> Result:
        return await self.execute(call.name, call.arguments, call_id=call.id)

    def _concurrent(self, name: str) -> bool:
        tool = self.registry.get(name)
        return tool is None or tool.may_run_concurrently

    def _validated(
        self, name: str, arguments: str | bytes | Mapping[str, Any] | None
    ) -> tuple[Tool, dict[str, Any], Next]:
        """The tool, its decoded and validated arguments, and its middleware chain.

        Raises:
            ToolNotFound: unknown name.
            InvalidArguments: undecodable arguments, or every schema violation.
        """
        tool, validator, chain, upstream = self._prepare(name)
        args = decode_arguments(arguments)
        curation = tool.curation
        if curation is not None and (refused := curation.refusals(args)):
            raise InvalidArguments(_invalid_message(tool, refused), refused)
        if None in args.values():
            args = validator.drop_null_optionals(args)
        problems = validator.errors(args)
        if problems:
            raise InvalidArguments(_invalid_message(tool, problems), problems)
        if curation is not None:
            # From here on the call is the upstream tool's: rules, the approver, middleware and
            # the handler see the final arguments, under the names the tool itself knows.
            return upstream, curation.upstream(args), chain
        return tool, args, chain

    def _prepare(self, name: str) -> tuple[Tool, Validator, Next, Tool]:
        tool = self.registry.get(name)
        if tool is None:
            raise ToolNotFound(self._not_found(name))
        if self.access is not None:
            caller = current_caller()
            why = self.access.refusal(tool, caller)
            if why is not None:
                # Told exactly what an unknown name is told, so that a caller cannot learn which
                # tools exist beyond its own; the operator's log says why.
                logger.warning("refused a call of %r by access: %s", name, why)
                raise ToolNotFound(self._not_found(name))
        prepared = self._prepared.get(name)
        if prepared is None or prepared[0] is not tool:
            chain = _compose((*self.middleware, *tool.middleware), _run_inner)
            prepared = (tool, compile_validator(tool.parameters), chain, rules_view(tool))
            self._prepared[name] = prepared
        return prepared

    def _not_found(self, name: str) -> str:
        """The answer for an unknown (or, to this caller, hidden) name, with why tools may be
        missing now."""
        message = self.registry.not_found_message(name, names=self._visible())
        if self.missing is not None and (why := self.missing()):
            message += f"; {why}"
        return message

    def _visible(self) -> list[str] | None:
        """The names the current caller may see (None: every one), for "did you mean"."""
        access = self.access
        caller = current_caller()
        if access is None or caller is None:
            return None
        return [t.name for t in self.registry.tools() if access.refusal(t, caller) is None]

    def _decide(self, tool: Tool, args: Mapping[str, Any]) -> Verdict:
        permissions = self.permissions
        policy = tool.approval
        try:
            if permissions is None:
                if policy is None:
                    return ALLOW_BY_DEFAULT
                return policy.decide(tool, args, self.workspace)
            verdicts = [permissions.decide(tool, args, self.workspace)]
            if policy is not None:
                verdicts.append(policy.decide(tool, args, self.workspace))
            return combine_verdicts(verdicts)
        except Exception as exc:  # a broken rule must fail closed, not open
            logger.exception("approval policy for %r failed; denying the call", tool.name)
            return Verdict(
                decision=Decision.DENY,
                reason=f"the approval rules could not be evaluated ({type(exc).__name__})",
            )

    async def _ask(
        self, tool: Tool, args: dict[str, Any], verdict: Verdict, ctx: ToolContext
    ) -> Verdict:
        approver = ctx.approver
        if approver is None:
            return Verdict(
                decision=Decision.DENY,
                rule=verdict.rule,
                origin=verdict.origin,
                reason=(
                    "this call needs approval and no approver is configured; "
                    "ask the user to run it or to allow it"
                ),
            )
        request = ApprovalRequest(tool=tool, arguments=args, verdict=verdict, call_id=ctx.call_id)
        try:
            answer = approver(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except ToolError as exc:  # the approver's own reason for refusing, meant for the model
            return Verdict(
                decision=Decision.DENY, rule=verdict.rule, origin=verdict.origin, reason=str(exc)
            )
        except Exception as exc:  # an approver crash must fail closed
            logger.exception("approver failed for %r; denying the call", tool.name)
            return Verdict(
                decision=Decision.DENY,
                rule=verdict.rule,
                origin=verdict.origin,
                reason=f"the approval could not be obtained ({type(exc).__name__})",
            )
        if answer is True:
            return Verdict(
                decision=Decision.ALLOW,
                rule=verdict.rule,
                origin=verdict.origin,
                reason="approved by the approver",
            )
        return Verdict(
            decision=Decision.DENY,
            rule=verdict.rule,
            origin=verdict.origin,
            reason="the user declined this call",
        )


def _compose(middleware: Sequence[Middleware], inner: Next) -> Next:
    """Fold middleware around `inner`; the first is outermost. No extra await layers."""
    handler = inner
    for mw in reversed(middleware):
        handler = _bind(mw, handler)
    return handler


def _bind(mw: Middleware, nxt: Next) -> Next:
    def step(call: Call) -> Any:
        return mw(call, nxt)

    return step


async def _run_inner(call: Call) -> Result:
    """The innermost step: refuse a denied call, or run the tool.

    Failures become results here, so every middleware's `next` returns a `Result` and never
    raises (cancellation aside, which must reach the `timeout` middleware and the caller).
    """
    verdict = call.verdict
    if verdict.decision is not Decision.ALLOW:
        denied = ApprovalDenied(_denied_message(call.tool, verdict))
        return _tool_error_result(denied, call.ctx.call_id).with_metadata(
            decision=verdict.decision.value, rule=verdict.rule, origin=verdict.origin
        )
    try:
        result = await call.tool.handler(call.arguments, call.ctx)
    except ToolError as exc:
        return _tool_error_result(exc, call.ctx.call_id)
    except Exception as exc:  # noqa: BLE001 - the boundary: a tool crash becomes a result
        return _crash_result(exc, call.tool.name, call.ctx.call_id)
    except asyncio.CancelledError:
        raise  # the timeout middleware and the caller tell their cancellations apart
    except BaseException as exc:  # noqa: BLE001 - the boundary, for what is not an Exception
        # KeyboardInterrupt, SystemExit (argparse in a wrapped CLI), GeneratorExit, custom
        # BaseExceptions: raised by the tool's own code, so the model reads them like any crash.
        # A real Ctrl-C never lands here: the sync API's caller waits in its own thread (the
        # signal interrupts that wait), and `asyncio.run` turns it into cancellation.
        # `coroutine.close()` on a suspended call still closes it: Python raises GeneratorExit
        # again in every frame awaiting this one, whatever this frame returns.
        return _crash_result(exc, call.tool.name, call.ctx.call_id)
    return result if isinstance(result, Result) else to_result(result)


def _denied_message(tool: Tool, verdict: Verdict) -> str:
    text = f"call to {tool.name!r} denied"
    if verdict.rule:
        text += f" by rule {verdict.rule!r}"
        if verdict.origin:
            text += f" ({verdict.origin})"
    if verdict.reason:
        text += f": {verdict.reason}"
    return text + ". Do not retry the same call; choose another approach or ask the user."


def decode_arguments(arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    """Arguments as a dict. JSON text must be I-JSON (RFC 7493): valid UTF-8, no duplicate keys.

    Raises:
        InvalidArguments: not JSON, not an object, duplicate keys, or invalid UTF-8.
    """
    if isinstance(arguments, dict):
        return dict(arguments)
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, bytes | bytearray):
        try:
            arguments = bytes(arguments).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArguments(
                f"arguments are not valid UTF-8 (byte {exc.start}); send JSON text in UTF-8"
            ) from exc
    if not isinstance(arguments, str):
        raise InvalidArguments(f"arguments must be a JSON object, got {type(arguments).__name__}")
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise InvalidArguments(
            f"arguments repeat the key {exc.key!r}; send each key once"
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidArguments(
            f"arguments are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "send a JSON object"
        ) from None
    if not isinstance(value, dict):
        raise InvalidArguments(
            f"arguments must be a JSON object, got {type(value).__name__}: {arguments[:80]!r}"
        )
    _check_surrogates(arguments)
    return value


def as_tool_calls(calls: Iterable[CallLike]) -> list[ToolCall]:
    """The calls of a batch as `ToolCall`s: programs build them by hand as often as adapters
    parse them, so the two obvious hand-made shapes are accepted too.

    Raises:
        TypeError: anything else, naming the item and the shapes accepted (checked before any
            call runs, so a bad batch runs nothing).
    """
    return [_as_tool_call(item, index) for index, item in enumerate(calls)]


def _as_tool_call(item: object, index: int) -> ToolCall:
    if isinstance(item, ToolCall):
        return item
    where = f"calls[{index}]"
    shapes = (
        "a ToolCall(name=..., arguments=..., id=...), a mapping with 'name' (and 'arguments', "
        "'id'), or a tuple (name, arguments) or (name, arguments, id)"
    )
    if isinstance(item, Mapping):
        unknown = [str(k) for k in item if k not in _CALL_KEYS]
        if "function" in item:
            raise TypeError(
                f"{where} is a provider's raw tool call; turn a response into ToolCalls with "
                f"get_adapter(...).parse_calls(response), or pass {shapes}"
            )
        if unknown:
            raise TypeError(
                f"{where} has unknown key {unknown[0]!r}{did_you_mean(unknown[0], _CALL_KEYS)}; "
                f"expected {shapes}"
            )
        name = item.get("name")
        if not isinstance(name, str):
            raise TypeError(f"{where} needs a 'name' (a string); expected {shapes}")
        return ToolCall(name=name, arguments=item.get("arguments"), id=item.get("id"))
    if isinstance(item, tuple) and len(item) in (2, 3) and isinstance(item[0], str):
        return ToolCall(name=item[0], arguments=item[1], id=item[2] if len(item) == 3 else None)
    if isinstance(item, tuple):
        raise TypeError(
            f"{where} is a tuple of {len(item)}; a tuple must be (name, arguments) or "
            f"(name, arguments, id) with a string name; expected {shapes}"
        )
    raise TypeError(f"{where} got {type(item).__name__}; expected {shapes}")


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def _check_surrogates(text: str) -> None:
    """JSON `\\ud800` escapes decode to lone surrogates, which are not valid Unicode text."""
    if "\\u" not in text and "\\U" not in text:
        return
    try:
        json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArguments(
            "arguments contain an unpaired UTF-16 surrogate escape; send valid Unicode text"
        ) from exc


def _invalid_message(tool: Tool, problems: Sequence[tuple[str, str]]) -> str:
    lines = [f"invalid arguments for {tool.name!r}:"]
    lines += [f"- {path}: {message}" for path, message in problems]
    lines.append("Fix these and call the tool again.")
    return "\n".join(lines)


def _tool_error_result(exc: ToolError, call_id: str) -> Result:
    metadata: dict[str, Any] = {"error_type": type(exc).__name__, "call_id": call_id}
    if exc.retryable:
        metadata["retryable"] = True
    if isinstance(exc, InvalidArguments) and exc.problems:
        metadata["problems"] = list(exc.problems)
    return Result(content=exc.message, is_error=True, metadata=metadata)


def _crash_result(exc: BaseException, name: str, call_id: str) -> Result:
    logger.error("tool %r raised %s", name, type(exc).__name__, exc_info=exc)
    message = str(exc) or "no message"
    return Result.error(
        f"tool {name!r} failed: {type(exc).__name__}: {message}",
        error_type=type(exc).__name__,
        traceback="".join(traceback.format_exception(exc)),
        call_id=call_id,
    )
