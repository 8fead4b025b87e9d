"""The private loop thread: hand-offs from many threads, and its end never strands a caller."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from toolnexus.errors import UsageError
from toolnexus.runtime.loop import LoopEnded, LoopThread, _Handoff


async def _double(n: int) -> int:
    await asyncio.sleep(0)
    return 2 * n


async def _fail() -> None:
    raise KeyError("missing")


@pytest.mark.parametrize("colocate", [True, False])
def test_hand_offs_from_many_threads_each_get_their_own_answer(colocate: bool) -> None:
    lt = LoopThread(colocate=colocate)
    wrong: list[str] = []

    def caller(base: int) -> None:
        for i in range(200):
            got = lt.run(_double(base + i))
            if got != 2 * (base + i):
                wrong.append(f"{base + i} -> {got}")

    threads = [threading.Thread(target=caller, args=(1000 * k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lt.stop()
    assert wrong == []


def test_an_exception_reaches_the_caller_as_itself() -> None:
    lt = LoopThread()
    try:
        with pytest.raises(KeyError, match="missing"):
            lt.run(_fail())
        assert lt.run(_double(4)) == 8
    finally:
        lt.stop()


def test_calling_from_the_loop_thread_itself_is_refused() -> None:
    lt = LoopThread()
    try:

        async def nested() -> str:
            coro = _double(1)
            try:
                lt.run(coro)
            except UsageError as exc:
                return str(exc)
            return "no error"

        assert "use the async API there" in lt.run(nested())
    finally:
        lt.stop()


def _then_stop(lt: LoopThread, action: Callable[[], object]) -> None:
    """Run `action` on the loop thread and stop its loop in the same iteration."""

    def run() -> None:
        action()
        lt.loop.stop()

    lt.loop.call_soon_threadsafe(run)


def test_a_hand_off_queued_when_the_loop_ends_is_answered_not_stranded() -> None:
    lt = LoopThread()
    queued = _Handoff(_double(3))
    _then_stop(lt, lambda: lt._inbox.append(queued))  # queued, never drained (no wake-up)
    with pytest.raises(asyncio.CancelledError):
        queued.wait()
    lt._thread.join(timeout=10)
    assert not lt._thread.is_alive()
    with pytest.raises(LoopEnded, match="event loop has ended"):
        lt.run(_double(1))
    lt.stop()  # stopping an ended loop thread is a no-op


def test_a_hand_off_cancelled_before_its_first_step_is_answered() -> None:
    """A task cancelled before it ever ran never enters its body: its caller is answered all
    the same, on the toolkit's loop thread and on a foreign loop."""
    lt = LoopThread()
    queued = _Handoff(_double(3))

    def start() -> None:
        lt._started.add(queued)
        queued.start(lt.loop, lt._started)  # its first step would run next iteration

    _then_stop(lt, start)
    with pytest.raises(asyncio.CancelledError):
        queued.wait()
    lt.stop()

    loop = asyncio.new_event_loop()
    try:
        foreign = _Handoff(_double(5))

        def start_then_cancel() -> None:
            foreign.start_settled(loop)
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon(start_then_cancel)
        for _ in range(3):  # the cancelled step, then its done-callback
            loop.call_soon(loop.stop)
            loop.run_forever()
        with pytest.raises(asyncio.CancelledError):
            foreign.wait()
    finally:
        loop.close()
