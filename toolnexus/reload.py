"""Hot reload: rebuild a toolkit's generation when its files change, swap it in atomically,
and keep the last good generation running when the new build fails.

Folders are watched, not files: an editor's atomic save (write a temp file, rename it over the
original) replaces the inode, and a watch on the file itself goes deaf after the first save.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError

if TYPE_CHECKING:
    from .toolkit import Generation, Toolkit

__all__ = ["ReloadEvent", "Watcher", "refresh_server_tools", "reload_toolkit", "start_watching"]

logger = logging.getLogger("toolnexus.reload")


@dataclass(frozen=True, kw_only=True)
class ReloadEvent:
    """What a reload did. `kind` is `tools_changed`, `unchanged` or `error`."""

    kind: str
    generation: int
    """The generation serving calls after this event."""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    error: BaseException | None = None
    """Why the reload failed (a `ManifestError` carries file:line); the old tools still run."""
    duration: float = 0.0
    trigger: tuple[str, ...] = field(default_factory=tuple)
    """The files whose change triggered the reload (empty for a manual reload)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe(self) -> str:
        if self.error is not None:
            return f"reload failed, generation {self.generation} kept: {self.error}"
        if self.kind == "unchanged":
            return f"generation {self.generation}: no tool changed"
        parts = [f"+{n}" for n in self.added] + [f"-{n}" for n in self.removed]
        parts += [f"~{n}" for n in self.changed]
        return f"generation {self.generation}: " + (" ".join(parts) or "tools refreshed")


def _diff(old: Generation, new: Generation) -> tuple[tuple[str, ...], ...]:
    before = {t.name: t for t in old.tools()}
    after = {t.name: t for t in new.tools()}
    added = tuple(sorted(after.keys() - before.keys()))
    removed = tuple(sorted(before.keys() - after.keys()))
    changed = tuple(
        sorted(
            n for n in before.keys() & after.keys() if _signature(before[n]) != _signature(after[n])
        )
    )
    return added, removed, changed


def _signature(tool: Any) -> tuple[Any, ...]:
    return (tool.description, repr(tool.parameters), tool.read_only, tool.destructive)


async def reload_toolkit(toolkit: Toolkit, trigger: Iterable[str] = ()) -> ReloadEvent:
    """Build the next generation and swap it in; on failure keep the current one.

    Never raises for a bad manifest or a module that fails to import: the error is reported
    through the event, `toolkit.last_reload`, the `on_reload` callbacks and logging.
    """
    started = time.monotonic()
    async with toolkit._lock:
        current = toolkit._current()
        try:
            new = await toolkit._builder(current.number + 1, current)
        except Exception as exc:  # noqa: BLE001 - any build failure keeps the last good tools
            event = ReloadEvent(
                kind="error",
                generation=current.number,
                error=exc,
                duration=time.monotonic() - started,
                trigger=tuple(trigger),
            )
            logger.error("%s", event.describe())
        else:
            added, removed, changed = _diff(current, new)
            await toolkit._install(new)
            event = ReloadEvent(
                kind="tools_changed" if (added or removed or changed) else "unchanged",
                generation=new.number,
                added=added,
                removed=removed,
                changed=changed,
                duration=time.monotonic() - started,
                trigger=tuple(trigger),
            )
            logger.info("%s", event.describe())
    await _notify(toolkit, event)
    return event


async def refresh_server_tools(toolkit: Toolkit, server: Any) -> ReloadEvent | None:
    """An MCP server said its tools changed: swap in a generation with its new tool list.

    Everything else (other tools, sessions, state) carries over unchanged; the new generation
    takes over the live resources, so retiring the old one closes nothing.
    """
    import dataclasses
    from contextlib import AsyncExitStack

    from .build import server_tools
    from .executor import Executor
    from .registry import Registry

    started = time.monotonic()
    async with toolkit._lock:
        try:
            current = toolkit._current()
        except UsageError:
            return None
        carry = current.carry
        key = next((k for k, s in carry.get("mcp", {}).items() if s is server), None)
        if key is None:
            return None
        fresh = server_tools(server, carry["decls"][key])
        stale = {t.name for t in current.registry.tools() if t.meta.get("server") == server.name}
        kept = [t for t in current.registry.tools() if t.name not in stale]
        registry = Registry([*kept, *fresh])
        old = current.executor
        executor = Executor(
            registry,
            middleware=old.middleware,
            permissions=old.permissions,
            approver=old.approver,
            workspace=old.workspace,
            roots=old.roots[1:],
            state=old.state,
        )
        new = dataclasses.replace(
            current,
            number=current.number + 1,
            registry=registry,
            executor=executor,
            inflight=0,
            retired=False,
        )
        new.status[server.name] = server.status.to_dict()
        current.resources = AsyncExitStack()
        current.carry = {}
        added, removed, changed = _diff(current, new)
        await toolkit._install(new)
        event = ReloadEvent(
            kind="tools_changed",
            generation=new.number,
            added=added,
            removed=removed,
            changed=changed,
            duration=time.monotonic() - started,
            trigger=(f"mcp:{server.name}",),
        )
    await _notify(toolkit, event)
    return event


async def _notify(toolkit: Toolkit, event: ReloadEvent) -> None:
    toolkit.last_reload = event
    for callback in list(toolkit.on_reload):
        try:
            outcome = callback(event)
            if asyncio.iscoroutine(outcome):
                await outcome
        except Exception:  # a listener's bug must not stop reloads
            logger.exception("on_reload callback failed")


class Watcher:
    """Watches the folders of a toolkit's files and reloads on every relevant change."""

    def __init__(self, toolkit: Toolkit, *, debounce_ms: int) -> None:
        self.toolkit = toolkit
        self.debounce_ms = debounce_ms
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        """Set once the watcher is watching (tests and benchmarks wait on it)."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _files(self) -> set[Path]:
        gen = self.toolkit._generation
        return {p.resolve() for p in gen.files} if gen is not None else set()

    async def _run(self) -> None:
        import watchfiles

        while not self._stop.is_set():
            files = self._files()
            if not files:
                self.ready.set()
                await self._stop.wait()
                return
            folders = sorted({str(p.parent) for p in files if p.parent.exists()})
            watched = {str(p) for p in files}
            restart = False
            self.ready.set()
            async for changes in watchfiles.awatch(
                *folders,
                stop_event=self._stop,
                debounce=self.debounce_ms * 10,
                step=self.debounce_ms,
                recursive=False,
                watch_filter=None,
            ):
                hits = sorted({path for _, path in changes if path in watched})
                if not hits:
                    continue
                await reload_toolkit(self.toolkit, hits)
                if self._files() != files:
                    restart = True  # includes or modules changed: watch the new set
                    break
            if not restart:
                return


def start_watching(toolkit: Toolkit, *, debounce_ms: int = 50) -> Watcher:
    """Start a `Watcher` on the toolkit's loop."""
    watcher = Watcher(toolkit, debounce_ms=debounce_ms)
    loop = toolkit._loop
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        watcher.start()
    else:
        loop.call_soon_threadsafe(watcher.start)
    return watcher
