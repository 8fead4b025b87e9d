"""The private event-loop thread behind the synchronous API.

Every session a toolkit opens (MCP, HTTP) lives on one loop. For a toolkit made by the sync
`create_toolkit`, that loop runs on this thread, so plain scripts and sync agent loops can call
tools, even from inside some other running event loop, without deadlocking.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections import deque
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar, cast

from ..errors import UsageError
from .affinity import LoopPin, enabled_by_env, pinning_loop

T = TypeVar("T")

_EVENTFD = hasattr(os, "eventfd")

_forks = [0]
"""Bumped in every child `fork()` makes: a loop thread belongs to the process that made it."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))

__all__ = ["LoopEnded", "LoopThread", "fork_count", "refuse_after_fork", "run_on"]


class LoopEnded(UsageError):
    """A call reached a loop thread that has already ended (its toolkit closed meanwhile)."""


class LoopThread:
    """An asyncio loop running forever on a daemon thread until `stop()`.

    Sync calls reach it through an inbox rather than `call_soon_threadsafe`: the caller appends
    a hand-off and bumps an eventfd the loop watches, and the loop starts every queued hand-off
    in one callback. That skips asyncio's self-pipe (two reads, the second failing with EAGAIN)
    and a callback per call: about 5 µs of a ~45 µs sync call on our VM. `pin` co-schedules
    sync callers with this thread (see `runtime.affinity`); `colocate` defaults to the
    `TOOLNEXUS_COLOCATE` environment variable (on unless it says 0).
    """

    def __init__(self, name: str = "toolnexus-loop", *, colocate: bool | None = None) -> None:
        self.pin = LoopPin(enabled=enabled_by_env() if colocate is None else colocate)
        self.loop = pinning_loop(self.pin)
        self._inbox: deque[_Handoff[Any]] = deque()
        self._gate = threading.Lock()
        """Orders hand-offs against the loop's end: none is queued after its last drain."""
        self._ended = False
        self._stopping = False
        self._started: set[_Handoff[Any]] = set()
        """Hand-offs whose task exists but has not answered (loop thread only)."""
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) if _EVENTFD else -1
        started = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()

    def _main(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.pin.bind()
        if self._wake_fd >= 0:
            self.loop.add_reader(self._wake_fd, self._drain)
        self.loop.call_soon(started.set)
        try:
            self.loop.run_forever()
        finally:
            # Whatever still runs is cancelled and awaited, and every hand-off not answered by
            # then (queued, or its task cancelled before it ever ran) is answered with
            # CancelledError: no waiting thread is left waiting forever.
            self._stopping = True
            if self._wake_fd >= 0:
                self.loop.remove_reader(self._wake_fd)
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            with self._gate:  # before close(): a caller past the gate may still wake the loop
                self._ended = True
                leftovers = [*self._started, *self._inbox]
                self._inbox.clear()
                if self._wake_fd >= 0:
                    os.close(self._wake_fd)
            self.loop.close()
            for handoff in leftovers:
                handoff.abandon()

    def _drain(self) -> None:
        if self._wake_fd >= 0:
            try:  # noqa: SIM105 - suppress() adds a context manager to every sync call
                os.eventfd_read(self._wake_fd)
            except BlockingIOError:
                pass  # an earlier drain took this wake-up along with its hand-off
        inbox, started = self._inbox, self._started
        while inbox and not self._stopping:
            handoff = inbox.popleft()
            started.add(handoff)
            handoff.start(self.loop, started)

    @property
    def thread_id(self) -> int | None:
        return self._thread.ident

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop thread and wait for its result.

        Raises:
            UsageError: called from the loop thread itself, which would deadlock.
            LoopEnded: the loop thread has ended.
        """
        _refuse_own_thread(self._thread.ident, coro)
        handoff = _Handoff(coro)
        mask = self.pin.pin()
        try:
            with self._gate:  # the loop closes the eventfd under it too: never a stale fd
                if self._ended:
                    coro.close()
                    raise LoopEnded("this toolkit's event loop has ended; create a new toolkit")
                self._inbox.append(handoff)
                if self._wake_fd >= 0:
                    os.eventfd_write(self._wake_fd, 1)
                else:
                    self.loop.call_soon_threadsafe(self._drain)
            return handoff.wait()
        finally:
            if mask is not None:
                self.pin.restore(mask)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):  # it ended between the check and this call
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.get_ident() != self._thread.ident:
            self._thread.join(timeout=10)


class _Handoff(Generic[T]):
    """One coroutine handed to a loop by another thread, and the lock that thread waits on.

    A lock used as a one-shot signal is cheaper than `concurrent.futures.Future` on this path,
    which every synchronous call takes."""

    __slots__ = ("_coro", "_done", "_error", "_released", "_result")

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self._coro = coro
        self._done = threading.Lock()
        self._done.acquire()
        self._error: BaseException | None = None
        self._result: T | None = None
        self._released = False

    def start(
        self, loop: asyncio.AbstractEventLoop, started: set[_Handoff[Any]] | None = None
    ) -> asyncio.Task[None]:
        return loop.create_task(self._run(started))

    def start_settled(self, loop: asyncio.AbstractEventLoop) -> None:
        """`start`, for a loop with no `LoopThread` to answer it if its task never runs."""
        self.start(loop).add_done_callback(self._settle)

    async def _run(self, started: set[_Handoff[Any]] | None) -> None:
        # Releasing from inside the task saves the loop iteration a done-callback costs.
        try:
            self._result = await self._coro
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, re-raised there
            self._error = exc
        finally:
            if started is not None:
                started.discard(self)
            self._release()

    def _release(self) -> None:
        # Only ever called on the loop's thread: no race between the task and `abandon`.
        if not self._released:
            self._released = True
            self._done.release()

    def _settle(self, task: asyncio.Task[None]) -> None:
        self.abandon()  # a no-op unless the task was cancelled before its body ran

    def abandon(self) -> None:
        """Never run (the loop ended first, or the task was cancelled before its first step):
        the waiting thread gets CancelledError."""
        if self._released:
            return
        self._coro.close()
        self._error = asyncio.CancelledError()
        self._release()

    def wait(self) -> T:
        self._done.acquire()
        if self._error is not None:
            raise self._error
        return cast(T, self._result)


def fork_count() -> int:
    """How many `fork()`s separate this process from the first one (0 there)."""
    return _forks[0]


def refuse_after_fork(made_at: int, coro: Coroutine[Any, Any, Any]) -> None:
    """Refuse a call into a loop whose thread lives in the process this one forked from."""
    if made_at != _forks[0]:
        coro.close()
        raise UsageError(
            "this toolkit was created before the process forked, and its event loop's thread "
            "did not come along: create the toolkit in the child (or use the spawn start method)"
        )


def _refuse_own_thread(owner: int | None, coro: Coroutine[Any, Any, Any]) -> None:
    if threading.get_ident() == owner:
        coro.close()
        raise UsageError(
            "the synchronous toolkit API was called from the event loop that runs the toolkit; "
            "use the async API there (await toolkit.aexecute(...), await toolkit.aclose())"
        )


def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], owner: int | None) -> T:
    """Run `coro` on `loop` (owned by thread `owner`) from another thread, and wait.

    For a loop the toolkit does not own (one `acreate_toolkit` was given); `LoopThread.run`
    is the faster path for its own.

    Raises:
        UsageError: called from the loop's own thread, which would deadlock.
    """
    _refuse_own_thread(owner, coro)
    handoff = _Handoff(coro)
    loop.call_soon_threadsafe(handoff.start_settled, loop)
    return handoff.wait()
