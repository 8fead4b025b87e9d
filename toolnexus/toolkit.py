"""Toolkit: the object an agent holds. It owns the current Generation (registry, executor and
live resources such as MCP sessions), runs calls on it, and swaps in a new one on reload.

`create_toolkit` (sync) runs everything on a private event-loop thread; `acreate_toolkit`
(async) runs on the caller's loop. Both return the same `Toolkit` with both APIs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .approval import ApprovalPolicy, Approver, Decision, Verdict
from .base import Caller, Result, Tool, acting_as, current_caller
from .errors import ManifestIssue, ToolnexusError, UsageError
from .executor import CallLike, as_tool_calls
from .generation import Generation, Source, ToolkitOptions
from .middleware import Middleware
from .runtime.loop import LoopEnded, LoopThread, fork_count, refuse_after_fork, run_on
from .runtime.resident import Launchers, current_launchers
from .state.memory import MemoryState
from .tracing import carry_context

if TYPE_CHECKING:
    from .base import ProgressCallback
    from .build import Builtins
    from .mcp.callbacks import ElicitationHandler, SamplingHandler
    from .mcp.server import McpServer
    from .reload import ReloadEvent, Watcher
    from .search import SearchState, ToolSearchSettings
    from .state import StateBackend

T = TypeVar("T")

# Reloads are logged where they always were: under "toolnexus.reload".
logger = logging.getLogger("toolnexus.reload")

__all__ = ["Toolkit", "ToolkitState", "acreate_toolkit", "create_toolkit"]


class ToolkitState(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class Toolkit:
    """A ready set of tools: list them for the model, execute the model's calls.

    Use it as a context manager (`with` or `async with`), or call `close()` / `aclose()`.
    """

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop,
        loop_thread: LoopThread | None,
        builder: Callable[[int, Generation | None], Any],
        source: Source = None,
    ) -> None:
        self._loop = loop
        self._loop_thread = loop_thread
        self._owner = loop_thread.thread_id if loop_thread else threading.get_ident()
        self._fork = fork_count()
        self._builder = builder
        self.source = source
        # The manifest's path as given, made absolute now (before the cwd may change): None for
        # YAML text (a string with a newline), a mapping or no manifest.
        self._source_path: Path | None = None
        if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source):
            self._source_path = Path(source).absolute()
        self._generation: Generation | None = None
        self._calls: set[asyncio.Task[Any]] = set()
        """Tasks running a call right now: closing the toolkit cancels them."""
        self._launchers = Launchers()
        """This toolkit's resident process launchers (`runtime/resident.py`), set for its
        calls: commands fork from them instead of starting a reaper each."""
        self._retiring: dict[asyncio.Task[None], Generation] = {}
        """Retired generations still waiting for their last call before they close."""
        self._state = ToolkitState.OPEN
        self._lock = asyncio.Lock()
        self._watcher: Watcher | None = None
        self.last_reload: ReloadEvent | None = None
        """The outcome of the latest reload (success, or the error that kept the old tools)."""
        self.on_reload: list[Callable[[ReloadEvent], Any]] = []
        self.store: StateBackend = MemoryState()
        """Where rate limits and cached results live: in-process, or the Redis that
        `create_toolkit(state=...)` named (`await toolkit.store.check()` says if it answers)."""
        self._owned_store: StateBackend | None = None
        """The store this toolkit opened from a URL, and so closes."""

    # -- the current generation ----------------------------------------------------------

    @property
    def name(self) -> str | None:
        """The manifest's `name:`, or None (no manifest, or none given). Serving the toolkit
        over MCP announces it as the server name."""
        return self._current().name

    @property
    def generation(self) -> int:
        """Increases by one each time a reload swaps in new tools."""
        return self._current().number

    def _current(self) -> Generation:
        gen = self._generation
        if gen is None or self._state is not ToolkitState.OPEN:
            raise UsageError(f"this toolkit is {self._state.value}; create a new one")
        return gen

    async def _install(self, gen: Generation) -> None:
        """Swap `gen` in; retire the previous generation once its calls have finished."""
        old, self._generation = self._generation, gen
        if old is not None:
            old.retired = True
            task = self._loop.create_task(self._retire(old))
            self._retiring[task] = old
            task.add_done_callback(self._retiring.pop)

    async def _retire(self, gen: Generation) -> None:
        await gen.wait_idle()
        await gen.resources.aclose()

    # -- listing ---------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """Every tool the model may call, sorted by name (stable across requests)."""
        return self._current().tools()

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        gen = self._current()
        if name in gen.hidden or gen.invisible(name) is not None:
            return None
        return gen.registry.get(name)

    def names(self) -> list[str]:
        return [t.name for t in self.tools()]

    def search_state(self, saved: str | bytes | Mapping[str, Any] | None = None) -> SearchState:
        """A new conversation's `SearchState` (which deferred tools it has loaded), or one
        restored from `saved` (what `SearchState.to_json` or `to_dict` wrote). Give it to the
        adapters (`adapter.tools(toolkit.tools(), state=state)`); see the README's
        "Large tool sets"."""
        from .search import SearchState

        if saved is None:
            return SearchState()
        if isinstance(saved, Mapping):
            return SearchState.from_dict(saved)
        return SearchState.from_json(saved)

    def status(self) -> dict[str, Any]:
        """Per-source status: for each MCP server, its state now (ready, crashed, restarting,
        failed...), its tool count, skipped tools and last error. Read live from the servers,
        not kept from the build."""
        gen = self._current()
        live = {s.name: s.status.to_dict() for s in list(gen.carry.get("mcp", {}).values())}
        return {**gen.status, **live}

    def warnings(self) -> list[ManifestIssue]:
        """Rules, include filters and overrides of the manifest that met no tool, where a tool
        an MCP server lists could still meet them (a typo, or a tool the server no longer
        offers), each located with a suggestion, as of the last build (a reload builds them
        afresh). Logged at build; `toolnexus validate --connect` fails on them and `toolnexus
        doctor` reports them."""
        return list(self._current().pending)

    def __len__(self) -> int:
        return len(self.tools())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    # -- calls -----------------------------------------------------------------------------

    async def aexecute(
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
        """Run one call; never raises (failures are error results the model can read).

        `progress` receives the call's `Progress` reports (an MCP server's progress
        notifications, a Python tool's `ctx.report_progress`), on the toolkit's loop.
        `elicitation` and `sampling` answer the questions an MCP server asks during this call,
        instead of the handlers given to `create_toolkit`."""
        hooks: dict[str, Any] = {
            "progress": progress,
            "elicitation": elicitation,
            "sampling": sampling,
        }
        if self._state is not ToolkitState.OPEN:
            return self._closed_result(name, call_id)
        if asyncio.get_running_loop() is not self._loop:
            coro = self.aexecute(
                name, arguments, call_id=call_id, middleware=middleware, approver=approver, **hooks
            )
            try:
                handed = asyncio.run_coroutine_threadsafe(coro, self._loop)
            except RuntimeError:  # the loop closed since the check above
                coro.close()
                return self._closed_result(name, call_id)
            return await asyncio.wrap_future(handed)
        gen = self._generation
        if gen is None or self._state is not ToolkitState.OPEN:
            return self._closed_result(name, call_id)
        if name in gen.hidden:
            return Result.error(
                f"tool {name!r} is denied by the toolkit's permissions; choose another tool",
                error_type="ApprovalDenied",
            )
        gen.inflight += 1
        task = asyncio.current_task()
        if task is not None:
            self._calls.add(task)
        launchers = current_launchers.set(self._launchers)
        try:
            return await gen.executor.execute(
                name, arguments, call_id=call_id, middleware=middleware, approver=approver, **hooks
            )
        except asyncio.CancelledError:
            if task is None or self._state is ToolkitState.OPEN:
                raise
            task.uncancel()  # cancelled by `aclose`, not by the caller: answer, don't raise
            return _closed_during_call(name, gen.registry.get(name))
        finally:
            current_launchers.reset(launchers)
            if task is not None:
                self._calls.discard(task)
            gen.leave()

    def _closed_result(self, name: str, call_id: str | None) -> Result:
        """A call made once the toolkit is closing or closed: an answer, not an exception,
        since another thread (a shutdown handler) may close it under a running agent loop."""
        return Result.error(
            f"tool {name!r} was not run: the toolkit is {self._state.value}, so no tool can "
            "run any more",
            error_type="ToolkitClosed",
            call_id=call_id,
        )

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the toolkit's loop from a plain thread and wait for it."""
        refuse_after_fork(self._fork, coro)  # whichever thread runs the loop stayed behind
        # A plain thread's hand-off drops its contextvars (`run_coroutine_threadsafe` keeps
        # them): the caller's trace context goes along, so spans nest under the agent's.
        coro = carry_context(coro)
        if self._loop_thread is not None:
            return self._loop_thread.run(coro)
        return run_on(self._loop, coro, self._owner)

    def execute(
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
        """Synchronous `aexecute`: safe from plain threads and from inside other event loops.

        The `progress`, `elicitation` and `sampling` callbacks run on the toolkit's own loop
        thread, not on the calling thread: keep them quick, or hand the work to your thread."""
        if self._state is not ToolkitState.OPEN:
            return self._closed_result(name, call_id)
        hooks: dict[str, Any] = {
            "progress": progress,
            "elicitation": elicitation,
            "sampling": sampling,
        }
        try:
            return self._run(
                _as_caller(
                    current_caller(),
                    lambda: self.aexecute(
                        name,
                        arguments,
                        call_id=call_id,
                        middleware=middleware,
                        approver=approver,
                        **hooks,
                    ),
                )
            )
        except (asyncio.CancelledError, LoopEnded):  # closed by another thread meanwhile
            return _closed_during_call(name)

    async def aexecute_many(self, calls: Iterable[CallLike]) -> list[Result]:
        """Run a batch of calls: adjacent read-only/concurrent ones together, the rest in order;
        results in call order; never raises for a call (each failure is its error result).

        Args:
            calls: `ToolCall`s (what adapters' `parse_calls` return), mappings with `name`,
                `arguments` and `id`, or tuples `(name, arguments)` / `(name, arguments, id)`.

        Raises:
            TypeError: a call of another shape (nothing runs then).
        """
        batch = as_tool_calls(calls)
        if self._state is not ToolkitState.OPEN:
            return [self._closed_result(c.name, c.id) for c in batch]
        if asyncio.get_running_loop() is not self._loop:
            coro = self.aexecute_many(batch)
            try:
                handed_many = asyncio.run_coroutine_threadsafe(coro, self._loop)
            except RuntimeError:  # the loop closed since the check above
                coro.close()
                return [self._closed_result(c.name, c.id) for c in batch]
            return await asyncio.wrap_future(handed_many)
        gen = self._generation
        if gen is None or self._state is not ToolkitState.OPEN:
            return [self._closed_result(c.name, c.id) for c in batch]
        hidden = [c for c in batch if c.name in gen.hidden]
        if hidden:
            # Route hidden names through aexecute one by one so they get the same refusal.
            results: list[Result] = []
            for c in batch:
                results.append(await self.aexecute(c.name, c.arguments, call_id=c.id))
            return results
        gen.inflight += 1
        task = asyncio.current_task()
        if task is not None:
            self._calls.add(task)
        launchers = current_launchers.set(self._launchers)
        try:
            return await gen.executor.execute_many(batch)
        except asyncio.CancelledError:
            if task is None or self._state is ToolkitState.OPEN:
                raise
            task.uncancel()
            return [_closed_during_call(c.name, gen.registry.get(c.name)) for c in batch]
        finally:
            current_launchers.reset(launchers)
            if task is not None:
                self._calls.discard(task)
            gen.leave()

    def execute_many(self, calls: Iterable[CallLike]) -> list[Result]:
        """Synchronous `aexecute_many` (the same shapes of calls)."""
        batch = as_tool_calls(calls)
        if self._state is not ToolkitState.OPEN:
            return [self._closed_result(c.name, c.id) for c in batch]
        try:
            return self._run(_as_caller(current_caller(), lambda: self.aexecute_many(batch)))
        except (asyncio.CancelledError, LoopEnded):
            return [_closed_during_call(c.name) for c in batch]

    def check(self, name: str, arguments: str | bytes | Mapping[str, Any] | None = None) -> Verdict:
        """The approval decision a call would get (allow / ask / deny and the rule), without
        running it. Unknown tools, invalid arguments and a closed toolkit come back as deny
        with the reason."""
        gen = self._generation
        if gen is None or self._state is not ToolkitState.OPEN:
            return Verdict(decision=Decision.DENY, reason=f"the toolkit is {self._state.value}")
        if name in gen.hidden:
            return Verdict(decision=Decision.DENY, reason="denied by the toolkit's permissions")
        return gen.executor.check(name, arguments)

    # -- reload ----------------------------------------------------------------------------

    async def areload(self) -> ReloadEvent:
        """Rebuild from the source now; keep the current tools if the new build fails.

        Never raises for a bad manifest or a module that fails to import: the error is in the
        event, in `last_reload`, told to the `on_reload` listeners and logged.

        Raises:
            UsageError: the toolkit is closed.
        """
        return await self._rebuild(())

    def reload(self) -> ReloadEvent:
        """Synchronous `areload`."""
        self._current()
        return self._run(self.areload())

    def watch(self, *, debounce_ms: int = 25) -> None:
        """Start watching the source files; every change triggers a reload.

        The watch is in place when this returns. Files: the manifest, its includes, OpenAPI
        documents and the local Python modules its tools were imported from. `debounce_ms` is
        about how long files must stay quiet before the reload starts; changes closer together
        coalesce into one reload.
        """
        from .reload import Watcher

        self._current()
        if self._watcher is None:
            self._watcher = Watcher(
                self._loop, files=self._watched_files, reload=self._rebuild, debounce_ms=debounce_ms
            )
            self._watcher.start()

    def watch_status(self) -> dict[str, Any] | None:
        """The watcher's state (None when not watching): `state` is `watching`, or `lost` while
        a watched file is gone (`missing`); the last good tools keep running meanwhile, and the
        watch recovers by itself when the files come back. Apart from `status()`, which is keyed
        by source name, so that it cannot clash with an MCP server's."""
        return self._watcher.status() if self._watcher is not None else None

    def _watched_files(self) -> tuple[Path, ...]:
        """The files of the generation serving calls now, and the manifest's path as given (the
        generation's are resolved; a link on the way, such as a ConfigMap's `..data`, is seen
        only from the path as given)."""
        gen = self._generation
        files = gen.files if gen is not None else ()
        return files if self._source_path is None else (*files, self._source_path)

    async def _rebuild(self, trigger: Iterable[str]) -> ReloadEvent:
        """Build the next generation and swap it in (or keep this one); tell the listeners.

        When the toolkit is watched, the files of the new generation are watched before any
        listener hears of it, so an edit made in response to the event is never missed.
        """
        from .reload import ReloadEvent, code_changed, diff_tools, files_named_by

        trigger = tuple(trigger)  # read twice: the event's record and the code-change check
        started = time.monotonic()
        async with self._lock:
            current = self._current()
            try:
                new = await self._builder(current.number + 1, current)
            except Exception as exc:  # boundary: any build failure keeps the last good tools
                event = ReloadEvent(
                    kind="error",
                    generation=current.number,
                    error=exc,
                    duration=time.monotonic() - started,
                    trigger=tuple(trigger),
                )
                # Our own errors explain themselves; anything else is a bug worth its traceback.
                logger.error("%s", event.describe(), exc_info=not isinstance(exc, ToolnexusError))
            else:
                added, removed, changed = diff_tools(current.tools(), new.tools())
                await self._install(new)
                event = ReloadEvent(
                    kind="tools_changed" if (added or removed or changed) else "unchanged",
                    generation=new.number,
                    added=added,
                    removed=removed,
                    changed=changed,
                    code_changed=code_changed(new.tools(), trigger, (*added, *changed)),
                    duration=time.monotonic() - started,
                    trigger=tuple(trigger),
                )
                logger.info("%s", event.describe())
            if self._watcher is not None:
                self._watcher.follow(files_named_by(event.error))
        await self._notify(event)
        return event

    async def _server_tools_changed(self, server: McpServer) -> None:
        """An MCP server said its tools changed: swap in a generation with its new list.

        Everything else (other tools, sessions, state) carries over; the new generation takes
        over the live resources, so retiring the old one closes nothing.
        """
        from .build import with_server_tools
        from .reload import ReloadEvent, diff_tools

        started = time.monotonic()
        async with self._lock:
            if self._generation is None or self._state is not ToolkitState.OPEN:
                return
            current = self._generation
            new = with_server_tools(current, server)
            if new is None:
                return
            added, removed, changed = diff_tools(current.tools(), new.tools())
            await self._install(new)
            event = ReloadEvent(
                kind="tools_changed",
                generation=new.number,
                added=added,
                removed=removed,
                changed=changed,
                duration=time.monotonic() - started,
                trigger=(f"mcp:{server.name}",),
            )
        await self._notify(event)

    async def _notify(self, event: ReloadEvent) -> None:
        self.last_reload = event
        for callback in list(self.on_reload):
            try:
                outcome = callback(event)
                if asyncio.iscoroutine(outcome):
                    await outcome
            except Exception:  # a listener's bug must not stop reloads
                logger.exception("on_reload callback failed")

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._state is ToolkitState.CLOSED

    async def aclose(self) -> None:
        """Close every session and process the toolkit opened. Safe to call twice."""
        if self._state is not ToolkitState.OPEN:
            return
        if asyncio.get_running_loop() is not self._loop:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.aclose(), self._loop))
            return
        self._state = ToolkitState.CLOSING
        try:
            if self._watcher is not None:
                await self._watcher.stop()
            # Calls still running are cancelled (their callers get an error result), so that
            # no session closes under a call and no caller waits forever.
            current = asyncio.current_task()
            running = [t for t in self._calls if t is not current]
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            retiring = dict(self._retiring)
            for task in retiring:
                task.cancel()
            await asyncio.gather(*retiring, return_exceptions=True)
            for old in retiring.values():
                await old.resources.aclose()
            gen, self._generation = self._generation, None
            if gen is not None:
                await gen.resources.aclose()
                await _close_state(gen.executor.state)
            if self._owned_store is not None:
                await self._owned_store.aclose()
        finally:
            self._launchers.close()
            self._state = ToolkitState.CLOSED

    def close(self) -> None:
        """Synchronous `aclose`; also stops the private loop thread."""
        if self._state is ToolkitState.OPEN:
            try:
                self._run(self.aclose())
            except LoopEnded:  # nothing left running to close
                self._state = ToolkitState.CLOSED
        if self._loop_thread is not None:
            self._loop_thread.stop()

    def __enter__(self) -> Toolkit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Toolkit:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        if self._loop_thread is not None:
            self._loop_thread.stop()

    def __repr__(self) -> str:
        if self._generation is None:
            return f"<Toolkit {self._state.value}>"
        gen = self._generation
        return f"<Toolkit {len(gen.registry)} tools, generation {gen.number}>"


def _closed_during_call(name: str, tool: Tool | None = None) -> Result:
    if tool is not None and tool.meta.get("worker_thread"):
        from .middleware import STILL_RUNNING

        return Result.error(
            f"the toolkit was closed while {name!r} was running. {STILL_RUNNING}",
            error_type="Cancelled",
            still_running=True,
        )
    return Result.error(
        f"the toolkit was closed while {name!r} was running; the call was stopped",
        error_type="Cancelled",
    )


async def _close_state(state: dict[str, Any]) -> None:
    """Close what tools keep in the toolkit's state (background shell jobs...).

    State outlives generations (a reload keeps the todo list and running jobs), so it closes
    with the toolkit, not with a generation.
    """
    for value in list(state.values()):
        aclose = getattr(value, "aclose", None)
        if callable(aclose):
            outcome = aclose()
            if asyncio.iscoroutine(outcome):
                await outcome


async def acreate_toolkit(
    source: Source = None,
    *,
    extra_tools: Iterable[Tool] = (),
    middleware: Sequence[Middleware] = (),
    approver: Approver | None = None,
    permissions: ApprovalPolicy | None = None,
    builtins: Builtins = None,
    workspace: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    watch: bool = False,
    tool_search: bool | Mapping[str, Any] | ToolSearchSettings | None = None,
    elicitation: ElicitationHandler | None = None,
    sampling: SamplingHandler | None = None,
    state: str | StateBackend | None = None,
) -> Toolkit:
    """Build a toolkit on the running event loop (see `create_toolkit` for the arguments).

    Its sessions live on this loop: use the async API here; the sync API works from other
    threads.
    """
    options = _options(
        source=source,
        extra_tools=extra_tools,
        middleware=middleware,
        approver=approver,
        permissions=permissions,
        builtins=builtins,
        workspace=workspace,
        env=env,
        tool_search=tool_search,
        elicitation=elicitation,
        sampling=sampling,
    )
    return await _create(options, asyncio.get_running_loop(), None, watch=watch, state=state)


def create_toolkit(
    source: Source = None,
    *,
    extra_tools: Iterable[Tool] = (),
    middleware: Sequence[Middleware] = (),
    approver: Approver | None = None,
    permissions: ApprovalPolicy | None = None,
    builtins: Builtins = None,
    workspace: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    watch: bool = False,
    tool_search: bool | Mapping[str, Any] | ToolSearchSettings | None = None,
    elicitation: ElicitationHandler | None = None,
    sampling: SamplingHandler | None = None,
    state: str | StateBackend | None = None,
) -> Toolkit:
    """Load a manifest (or nothing) and return a ready `Toolkit`.

    Args:
        source: a manifest path (`tools.yaml`, `.mcp.json`), YAML text, a mapping, a
            `Manifest`, or None for a toolkit of `extra_tools` and `builtins` only.
        extra_tools: `Tool`s to add (e.g. from `@tool`).
        middleware: toolkit-wide middleware, outside the manifest's own.
        approver: decides calls that a rule marks `ask`; without one they are refused.
        permissions: toolkit-wide approval policy (e.g. `compile_permissions(...)`), in
            addition to the manifest's `permissions:`.
        builtins: builtin tools to add: True or `"all"` (every one), a name (`"read"`), a list
            of names, or a mapping name -> options (`{"read": {"max_lines": 500}}`); False
            or None for none.
        workspace: root for file tools and sandboxes (default: the manifest's folder, else the
            current directory).
        env: the environment used for `${VAR}` interpolation (default: `os.environ`).
        watch: reload automatically when the manifest or a tool's code changes.
        tool_search: defer tool definitions behind a search (README "Large tool sets"): True,
            or a mapping with the manifest block's keys (`max_tools`, `max_bytes`, `always`,
            `defer`, `limit`); replaces the manifest's `tool_search:` when given.
        elicitation: answers MCP servers' `elicitation/create` (form and URL modes), sync or
            async; without it the capability is not declared and servers cannot ask.
        sampling: answers MCP servers' `sampling/createMessage`, likewise.
        state: where rate limits and cached results live: a URL (`"redis://host:6379/0"`,
            shared by every toolkit and replica using that Redis; `"memory://"`, in-process)
            or a `StateBackend` (the caller keeps ownership). Default: `TOOLNEXUS_STATE_URL`,
            else in-process. A URL's store closes with the toolkit.

    Raises:
        ManifestError: the manifest (or an include) is invalid; every problem is listed.
        SourceError: an MCP server marked `required` did not start.
        UsageError: `builtins` (or a Python tool's schema) is not of a shape described here.
        ConfigError: `state` is a URL of an unknown scheme.
        ImportError: a Redis URL without the `redis` extra installed.
    """
    options = _options(
        source=source,
        extra_tools=extra_tools,
        middleware=middleware,
        approver=approver,
        permissions=permissions,
        builtins=builtins,
        workspace=workspace,
        env=env,
        tool_search=tool_search,
        elicitation=elicitation,
        sampling=sampling,
    )
    loop_thread = LoopThread()
    try:
        return loop_thread.run(
            _create(options, loop_thread.loop, loop_thread, watch=watch, state=state)
        )
    except BaseException:
        loop_thread.stop()
        raise


def _options(
    *,
    source: Source,
    extra_tools: Iterable[Tool],
    middleware: Sequence[Middleware],
    approver: Approver | None,
    permissions: ApprovalPolicy | None,
    builtins: Builtins,
    workspace: str | Path | None,
    env: Mapping[str, str] | None,
    tool_search: Any = None,
    elicitation: ElicitationHandler | None = None,
    sampling: SamplingHandler | None = None,
) -> ToolkitOptions:
    from .build import builtin_options

    return ToolkitOptions(
        source=source,
        extra_tools=tuple(extra_tools),
        middleware=tuple(middleware),
        approver=approver,
        permissions=permissions,
        builtins=builtin_options(builtins),
        workspace=Path(workspace).resolve() if workspace is not None else None,
        env=env,
        tool_search=tool_search,
        elicitation=elicitation,
        sampling=sampling,
    )


async def _create(
    options: ToolkitOptions,
    loop: asyncio.AbstractEventLoop,
    loop_thread: LoopThread | None,
    *,
    watch: bool,
    state: str | StateBackend | None = None,
) -> Toolkit:
    from .build import build_generation
    from .state import open_state, state_url_from_env

    if state is None or isinstance(state, str):
        store, owned = open_state(state or state_url_from_env()), True
    else:
        store, owned = state, False
    options = dataclasses.replace(options, state=store)
    toolkit: Toolkit | None = None

    async def builder(number: int, previous: Generation | None) -> Generation:
        # The toolkit hears of a server's new tool list through a callback handed down.
        changed = toolkit._server_tools_changed if toolkit is not None else None
        # The toolkit's launchers, for the MCP servers this build starts (a sandboxed stdio
        # server is forked from the resident launcher of its policy).
        launchers = current_launchers.set(toolkit._launchers if toolkit is not None else None)
        try:
            return await build_generation(
                options, number=number, previous=previous, on_tools_changed=changed
            )
        finally:
            current_launchers.reset(launchers)

    toolkit = Toolkit(loop=loop, loop_thread=loop_thread, builder=builder, source=options.source)
    toolkit.store = store
    if owned:
        toolkit._owned_store = store
    try:
        gen = await builder(1, None)
    except BaseException:
        if owned:
            await store.aclose()
        raise
    await toolkit._install(gen)
    if watch:
        toolkit.watch()
    return toolkit


def _as_caller(
    caller: Caller | None, call: Callable[[], Coroutine[Any, Any, T]]
) -> Coroutine[Any, Any, T]:
    """`call()`, run as `caller` on the toolkit's loop thread: the sync API's hand-off starts
    from that thread's context, where the calling thread's `current_caller()` is unknown."""
    if caller is None:
        return call()

    async def run() -> T:
        with acting_as(caller):
            return await call()

    return run()
