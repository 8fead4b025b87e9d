"""The private event-loop thread behind the synchronous API.

Every session a toolkit opens (MCP, HTTP) lives on one loop. For a toolkit made by the sync
`create_toolkit`, that loop runs on this thread, so plain scripts and sync agent loops can call
tools, even from inside some other running event loop, without deadlocking.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ._affinity import LoopPin, enabled_by_env
from .errors import UsageError

T = TypeVar("T")

__all__ = ["LoopThread", "run_on"]


class LoopThread:
    """An asyncio loop running forever on a daemon thread until `stop()`.

    `pin` co-schedules synchronous callers with this thread (see `_affinity`); `colocate`
    defaults to the `TOOLNEXUS_COLOCATE` environment variable (on unless it says 0).
    """

    pin: LoopPin

    def __init__(self, name: str = "toolnexus-loop", *, colocate: bool | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self._colocate = enabled_by_env() if colocate is None else colocate
        started = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()

    def _main(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.pin = LoopPin(enabled=self._colocate)
        self.loop.call_soon(started.set)
        try:
            self.loop.run_forever()
        finally:
            # Whatever still runs is cancelled and awaited, so every waiting thread is woken
            # (its call ends with CancelledError) instead of waiting forever.
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    @property
    def thread_id(self) -> int | None:
        return self._thread.ident

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop thread and wait for its result."""
        return run_on(self.loop, coro, self._thread.ident, self.pin)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.get_ident() != self._thread.ident:
            self._thread.join(timeout=10)


def run_on(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, T],
    owner: int | None,
    pin: LoopPin | None = None,
) -> T:
    """Run `coro` on `loop` (owned by thread `owner`) from another thread, and wait.

    A lock used as a one-shot signal is cheaper than `concurrent.futures.Future` on this path,
    which every synchronous call takes. With `pin` (only for a loop thread the toolkit owns),
    the hand-off is co-scheduled on the caller's CPU.

    Raises:
        UsageError: called from the loop's own thread, which would deadlock.
    """
    if threading.get_ident() == owner:
        coro.close()
        raise UsageError(
            "the synchronous toolkit API was called from the event loop that runs the toolkit; "
            "use the async API there (await toolkit.aexecute(...), await toolkit.aclose())"
        )
    done = threading.Lock()
    done.acquire()
    box: list[Any] = []
    failed: list[BaseException] = []

    async def runner() -> None:
        # Releasing from inside the task saves the loop iteration a done-callback costs.
        try:
            box.append(await coro)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, re-raised there
            failed.append(exc)
        finally:
            done.release()

    def start() -> None:
        if pin is not None:
            pin.release()
        loop.create_task(runner())

    mask = pin.pin() if pin is not None else None
    try:
        loop.call_soon_threadsafe(start)
        done.acquire()
    finally:
        if pin is not None and mask is not None:
            pin.restore(mask)
    if failed:
        raise failed[0]
    return box[0]
