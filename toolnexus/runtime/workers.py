"""Worker threads for synchronous tool functions.

A sync function runs in a thread so that it can block without stalling the event loop. Not on
the loop's default executor (`asyncio.to_thread`): that pool holds min(32, CPUs + 4) threads (6
on 2 cores) and is shared with DNS lookups, so six functions stuck past their timeout would
queue every later sync call, and every `getaddrinfo`, behind them; and its threads are joined
at interpreter exit, so one function that never returns keeps the program from exiting.

Here every running call has a thread of its own, a daemon (exit does not wait for it); a thread
whose call has finished waits a moment for the next one, then ends. A thread cannot be stopped
from outside: a call cancelled by its timeout keeps running until the function returns, and
its result is dropped (`isolate: process` is the way to a function that is really stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["run_in_worker"]

IDLE_SECONDS = 0.5
"""How long a thread with nothing to do waits for another call before it ends."""


class _Pool:
    """The threads waiting for their next job, most recently busy last (reused first)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []

    def after_fork(self) -> None:
        """A forked child has none of these threads, and the lock may have been held."""
        self.lock = threading.Lock()
        self.idle.clear()


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.after_fork)


async def run_in_worker(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` on a worker thread, in a copy of the caller's context.

    Cancelling the await does not stop a function that has started: it runs on, and what it
    returns or raises is dropped.
    """
    loop = asyncio.get_running_loop()
    job = _Job(fn, args, kwargs, contextvars.copy_context(), loop)
    _submit(job)
    try:
        return await job.future
    except asyncio.CancelledError:
        job.abandoned = True  # not started yet: it never will
        raise
    except _Raised as raised:
        raise raised.error from None


class _Raised(Exception):
    """Carries a BaseException that is not an Exception out of a future.

    The awaiting task has a future's exception thrown into its coroutine, and a GeneratorExit
    thrown in closes every frame on the way instead of reaching the executor's handler.
    Raised again from the frame that awaited the future, it travels like any exception.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


class _Job:
    __slots__ = ("abandoned", "args", "context", "fn", "future", "kwargs", "loop")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        context: contextvars.Context,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.context = context
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.abandoned = False

    def run(self) -> None:
        if self.abandoned:
            return
        try:
            value = self.context.run(self.fn, *self.args, **self.kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting call, which reports it
            outcome: tuple[bool, Any] = (False, exc)
        else:
            outcome = (True, value)
        # The loop has closed (its toolkit closed while this ran): nobody waits for the result.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._settle, outcome)

    def _settle(self, outcome: tuple[bool, Any]) -> None:
        if self.future.done():  # the call was cancelled meanwhile: the result is dropped
            return
        ok, value = outcome
        if ok:
            self.future.set_result(value)
        elif isinstance(value, StopIteration | StopAsyncIteration):
            # An asyncio future refuses these (they would end the awaiting coroutine): report
            # them as coroutines do since PEP 479.
            error = RuntimeError(f"the function raised {type(value).__name__}")
            error.__cause__ = value
            self.future.set_exception(error)
        elif isinstance(value, Exception):
            self.future.set_exception(value)
        else:
            self.future.set_exception(_Raised(value))


def _submit(job: _Job) -> None:
    with _pool.lock:
        worker = _pool.idle.pop() if _pool.idle else None
    if worker is None:
        worker = _Worker()
        worker.inbox.put(job)
        threading.Thread(target=worker.serve, name="toolnexus-tool", daemon=True).start()
    else:
        worker.inbox.put(job)


class _Worker:
    """One thread and its inbox: a job is handed to one worker, never to whoever is first."""

    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[_Job] = queue.SimpleQueue()

    def serve(self) -> None:
        job = self.inbox.get()
        while True:
            job.run()
            del job
            with _pool.lock:
                _pool.idle.append(self)
            try:
                job = self.inbox.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with _pool.lock:
                    if self in _pool.idle:  # nobody claimed this thread meanwhile: it ends
                        _pool.idle.remove(self)
                        return
                job = self.inbox.get()  # claimed just as it timed out: the job is on its way
