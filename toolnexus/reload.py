"""Hot reload: what a reload did (`ReloadEvent`) and the watcher that triggers one.

The toolkit rebuilds and swaps generations itself (`Toolkit.areload`); this module watches its
files and asks it to, through a function the toolkit hands down, so it never reaches into the
toolkit. A failed build keeps the last good generation running.

Folders are watched, not files: an editor's atomic save (write a temp file, rename it over the
original) replaces the inode, and a watch on the file itself goes deaf after the first save.
A watch on a folder follows the folder, not its name, so the folder's own parent is watched too,
and so is every symbolic link on the way to a file: a deployment that renames a new folder over
the old one, deletes and recreates it, or swaps a `..data` link (a Kubernetes ConfigMap volume)
changes a path on the way to the manifest, and the watcher then watches what is there now and
reloads. A file that is gone is reported (`Watcher.status`) and its nearest existing folder is
watched, so the watch recovers by itself when the file comes back.
Each folder set is watched by one watchfiles `RustNotify` (its documented Rust backend), built
synchronously so that the watch is in place when `Toolkit.watch()` returns and before a reload's
listeners hear of a new file set, and polled on a thread of its own that `Watcher.stop` joins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import ManifestError

if TYPE_CHECKING:
    from .base import Tool

__all__ = ["ReloadEvent", "Watcher", "code_changed", "diff_tools", "files_named_by"]

logger = logging.getLogger("toolnexus.reload")

ReloadKind = Literal["tools_changed", "unchanged", "error"]


@dataclass(frozen=True, kw_only=True)
class ReloadEvent:
    """What a reload did, as told to `on_reload` listeners and kept in `Toolkit.last_reload`."""

    kind: ReloadKind
    """`tools_changed` (names added, removed or changed), `unchanged` (a new generation with the
    same tool list, e.g. after a code edit) or `error` (nothing swapped)."""
    generation: int
    """The generation serving calls after this event."""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    """Tools whose description, parameters or flags differ (what a model sees)."""
    code_changed: tuple[str, ...] = ()
    """Tools a model sees unchanged whose code was edited (their module is among `trigger`):
    the edit was picked up, the agent needs no new tool list."""
    error: BaseException | None = None
    """Why the reload failed (a `ManifestError` carries file:line); the old tools still run."""
    duration: float = 0.0
    """Seconds from the start of the rebuild to the swap (or the failure)."""
    trigger: tuple[str, ...] = field(default_factory=tuple)
    """The files whose change triggered the reload (empty for a manual reload)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe(self) -> str:
        """One line for a terminal or a log: the generation and its diff of tools, or the error."""
        if self.error is not None:
            return f"reload failed, generation {self.generation} kept: {self.error}"
        parts = [f"+{n}" for n in self.added] + [f"-{n}" for n in self.removed]
        parts += [f"~{n}" for n in self.changed]
        if self.code_changed:
            parts.append(", ".join(self.code_changed) + ": code changed")
        if not parts and self.kind == "unchanged":
            return f"generation {self.generation}: no tool changed"
        return f"generation {self.generation}: " + (" ".join(parts) or "tools refreshed")


def diff_tools(
    old: Iterable[Tool], new: Iterable[Tool]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The names added, removed and changed (as a model sees them) from `old` to `new`."""
    before = {t.name: t for t in old}
    after = {t.name: t for t in new}
    added = tuple(sorted(after.keys() - before.keys()))
    removed = tuple(sorted(before.keys() - after.keys()))
    changed = tuple(
        sorted(
            n for n in before.keys() & after.keys() if _signature(before[n]) != _signature(after[n])
        )
    )
    return added, removed, changed


def code_changed(
    tools: Iterable[Tool], trigger: Iterable[str], skip: Iterable[str]
) -> tuple[str, ...]:
    """The tools (but those in `skip`, already reported) whose Python module files are among
    the `trigger` files: a reload caused by an edit of their code."""
    edited = {_resolved(p) for p in trigger}
    left_out = set(skip)
    return tuple(
        sorted(
            t.name
            for t in tools
            if t.name not in left_out
            and any(_resolved(str(f)) in edited for f in t.meta.get("files") or ())
        )
    )


def _resolved(path: str) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # a loop of links: compare as written
        return Path(path)


def _signature(tool: Tool) -> tuple[Any, ...]:
    """What a model sees of a tool: a change here is worth telling the agent about."""
    return (
        tool.title,
        tool.description,
        repr(tool.parameters),
        tool.read_only,
        tool.destructive,
        tool.idempotent,
        tool.open_world,
    )


def files_named_by(error: BaseException | None) -> set[Path]:
    """Files a failed build complained about: watched too, so that fixing one that the last
    good generation did not use (a new include) is seen."""
    if not isinstance(error, ManifestError):
        return set()
    return {Path(issue.file) for issue in error.issues if issue.file and Path(issue.file).is_file()}


class _Feed:
    """One folder set watched by a `RustNotify`, polled on its own thread.

    The notify object is built in the constructor, so the folders are watched from the moment
    the feed exists; changes are handed to the event loop in batches.
    """

    def __init__(
        self,
        folders: list[str],
        deliver: Callable[[set[tuple[int, str]]], None],
        *,
        debounce_ms: int,
        step_ms: int,
    ) -> None:
        from watchfiles._rust_notify import RustNotify

        # debug off, native events (polling misses same-second rewrites), not recursive,
        # and a folder we may not read is skipped rather than fatal.
        self._notify = RustNotify(folders, False, False, 300, False, True)
        self._deliver = deliver
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="toolnexus-watch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                got = self._notify.watch(self._debounce_ms, self._step_ms, 0, self._stop)
                if isinstance(got, set) and got and not self._stop.is_set():
                    self._deliver(got)
        finally:
            self._notify.close()

    def close(self) -> None:
        """Ask the thread to finish (within one step); `join` waits for it."""
        self._stop.set()


class Watcher:
    """Watches the folders of a toolkit's files and asks for a reload on every relevant change.

    `Toolkit.watch()` makes one; `stop()` ends it. `files` says which files to watch now (the
    current generation's); `reload` rebuilds, given the files whose change triggered it, and is
    run on `loop`.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        files: Callable[[], Iterable[Path]],
        reload: Callable[[tuple[str, ...]], Awaitable[Any]],
        debounce_ms: int,
    ) -> None:
        self.debounce_ms = debounce_ms
        self._loop = loop
        self._files_now = files
        self._reload = reload
        self._files: frozenset[str] = frozenset()
        self._points: frozenset[str] = frozenset()
        self._ancestors: frozenset[str] = frozenset()
        self._missing: frozenset[str] = frozenset()
        self._folders: list[tuple[str, tuple[int, int] | None]] = []
        self._feed: _Feed | None = None
        self._closed_feeds: list[_Feed] = []
        self._pending: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def files(self) -> frozenset[Path]:
        """The files whose change triggers a reload."""
        return frozenset(Path(f) for f in self._files)

    def status(self) -> dict[str, Any]:
        """`state` is `watching`, or `lost` while a watched file is gone (`missing` names
        them; the last good tools keep running, and the watch recovers when they return)."""
        missing = sorted(self._missing)
        return {
            "state": "lost" if missing else "watching",
            "missing": missing,
            "files": len(self._files),
        }

    def start(self) -> None:
        """Watch the current generation's files now; reload from the toolkit's loop.

        Callable from any thread: the watch is in place when this returns.
        """
        self.follow()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._begin()
        else:
            self._loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        if not self._stopped:
            self._task = self._loop.create_task(self._run(), name="toolnexus-reload")

    def follow(self, extra: Iterable[Path] = ()) -> None:
        """Watch the files `files` names now (plus `extra`), through whatever folders and links
        lead to them now.

        A new folder set gets a new feed before the old one is closed, so no change falls in
        between (a change seen by both only coalesces into the same reload). A file that was
        missing and is back is treated as changed: the reload that follows sees it.
        """
        if self._stopped:
            return
        paths = {Path(p) for p in self._files_now()} | set(extra)
        points = {point for p in paths for point in _watch_points(p)}
        self._files = frozenset(str(p) for p in paths)
        self._points = frozenset(str(p) for p in points)
        # A folder on the way renamed, deleted or created is a change to the files below it.
        self._ancestors = frozenset(str(a) for p in points for a in p.parents)
        missing = frozenset(str(p) for p in paths if not p.exists())
        back = self._missing - missing
        self._missing = missing
        if back:
            self._receive({(0, path) for path in back})
        folders = _folders_for(points)
        if folders == self._folders:
            return
        names = [name for name, _ in folders]
        try:
            feed = (
                _Feed(
                    names,
                    self._deliver,
                    debounce_ms=max(self.debounce_ms * 10, 500),
                    # A batch ends after one quiet step: between one and two steps after the
                    # last change, so half the debounce keeps the wait near `debounce_ms`.
                    step_ms=max(5, self.debounce_ms // 2),
                )
                if names
                else None
            )
        except OSError as exc:  # a folder vanished meanwhile: keep the watch we have
            logger.warning("cannot watch %s: %s; still watching %s", names, exc, self._folders)
            return
        old, self._feed, self._folders = self._feed, feed, folders
        self._closed_feeds = [f for f in self._closed_feeds if f.thread.is_alive()]
        if old is not None:
            old.close()
            self._closed_feeds.append(old)

    def _deliver(self, changes: set[tuple[int, str]]) -> None:
        """Called on a feed's thread: hand the batch to the loop."""
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is listening
            self._loop.call_soon_threadsafe(self._receive, changes)

    def _receive(self, changes: set[tuple[int, str]]) -> None:
        self._pending.update(path for _, path in changes)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            hits = sorted(p for p in self._pending if p in self._points or p in self._ancestors)
            self._pending.clear()
            if hits:
                # What a path on the way leads to may have changed: watch what is there now,
                # before the rebuild reads it, so that no later change falls in between.
                self.follow()
                await self._reload(tuple(hits))

    async def stop(self) -> None:
        """Stop reloading and end every watch thread. Safe to call twice."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        feeds = [f for f in (self._feed, *self._closed_feeds) if f is not None]
        self._feed, self._closed_feeds, self._folders = None, [], []
        for feed in feeds:
            feed.close()
        for feed in feeds:
            # A feed notices the stop within one step; wait without blocking the loop.
            while feed.thread.is_alive():
                await asyncio.sleep(self.debounce_ms / 1000)
            feed.thread.join()


_MAX_LINKS = 40
"""Symbolic links followed while resolving one path, as the kernel's own limit."""


def _watch_points(path: Path) -> set[Path]:
    """`path`, every symbolic link met while resolving it, and where it leads: a change to any
    of them (a `..data` link swapped, a link retargeted) changes what `path` reads."""
    path = path.absolute()
    points = {path}
    parts = list(path.parts[1:])
    current = Path(path.anchor)
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":  # `current` is a resolved prefix, so its parent is the real one
            current = current.parent
            continue
        candidate = current / part
        if candidate.is_symlink() and hops < _MAX_LINKS:
            hops += 1
            points.add(candidate)
            try:
                target = Path(os.readlink(candidate))
            except OSError:  # removed meanwhile: it stays a point, and is watched by name
                current = candidate
                continue
            if target.is_absolute():
                current = Path(target.anchor)
                parts = list(target.parts[1:]) + parts
            else:
                parts = list(target.parts) + parts
            continue
        current = candidate
    points.add(current)
    return points


def _folders_for(points: Iterable[Path]) -> list[tuple[str, tuple[int, int] | None]]:
    """The folders to watch for `points`, each with its identity (device, inode).

    For each point: its folder and that folder's parent (a watch follows the folder it was put
    on, so a folder renamed over is only seen from above); for a folder that is gone, its nearest
    existing ancestor, which sees it come back. The identities make a folder swapped under the
    same name a new folder set, so the watch moves to the new one.
    """
    folders: set[Path] = set()
    for point in points:
        folder = _existing(point.parent)
        folders.add(folder)
        if folder == point.parent:
            folders.add(_existing(folder.parent))
    return [(str(f), _identity(f)) for f in sorted(folders)]


def _existing(folder: Path) -> Path:
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        st = folder.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
