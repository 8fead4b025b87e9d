"""Sync calls co-scheduled with the loop thread: the pin is real, and nothing stays pinned.

The wake-up latency this saves is measured by `benchmarks/run.py core`, not here; these tests
check what a user could notice: masks of their threads, of tool code, of the threads and
subprocesses tools start, and that refusals switch the feature off without failing a call.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from toolnexus import Toolkit, create_toolkit, tool
from toolnexus.runtime.affinity import ENV_VAR

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="co-scheduling applies to Linux with at least two CPUs allowed",
)

ALL = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


@tool
async def loop_mask() -> list[int]:
    """The CPU mask of the thread running async tool code (the loop thread)."""
    return sorted(os.sched_getaffinity(0))


@tool
def worker_mask() -> list[int]:
    """The CPU mask of the worker thread a sync tool runs on."""
    return sorted(os.sched_getaffinity(0))


@tool
async def child_mask() -> list[int]:
    """The CPU mask a subprocess started by tool code inherits."""
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [int(cpu) for cpu in out.stdout.strip().strip("[]").split(",")]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _toolkit() -> Toolkit:
    return create_toolkit(extra_tools=[loop_mask, worker_mask, child_mask, add])


def _loop_tid(tk: Toolkit) -> int:
    thread = tk._loop_thread
    assert thread is not None
    native = thread._thread.native_id
    assert native is not None
    return native


def _handoffs(tk: Toolkit) -> int:
    assert tk._loop_thread is not None
    return tk._loop_thread.pin.handoffs


def _in_thread(mask: set[int], work: Callable[[], Any]) -> Any:
    """Run `work` on a new thread whose CPU mask is `mask`; return what it returned."""
    box: list[Any] = []
    failed: list[BaseException] = []

    def main() -> None:
        os.sched_setaffinity(0, mask)
        try:
            box.append(work())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            failed.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return box[0]


def test_sync_calls_are_co_scheduled_but_tool_code_never_runs_pinned() -> None:
    with _toolkit() as tk:
        before = _handoffs(tk)
        for _ in range(20):
            assert tk.execute("loop_mask").structured == ALL
            assert tk.execute("worker_mask").structured == ALL
        assert tk.execute("child_mask").structured == ALL
        # A call finding the loop thread not yet back asleep is not co-scheduled; most are.
        assert _handoffs(tk) - before >= 20
        assert sorted(os.sched_getaffinity(0)) == ALL


def test_the_idle_loop_thread_is_pinned_only_until_it_wakes() -> None:
    with _toolkit() as tk:
        tid = _loop_tid(tk)
        assert tk._loop_thread is not None
        pin = tk._loop_thread.pin
        mask = pin.pin()
        assert mask is not None, "the loop thread is asleep between calls"
        try:
            assert len(os.sched_getaffinity(tid)) == 1
            assert os.sched_getaffinity(tid) == os.sched_getaffinity(0)
        finally:
            pin.restore(mask)
        assert sorted(os.sched_getaffinity(0)) == ALL
        assert tk.execute("loop_mask").structured == ALL
        assert sorted(os.sched_getaffinity(tid)) == ALL


def test_the_callers_own_mask_comes_back() -> None:
    with _toolkit() as tk:
        one = {ALL[-1]}

        def calls() -> tuple[list[int], list[int]]:
            assert tk.execute("loop_mask").structured == ALL
            many = tk.execute_many([])
            assert many == []
            return sorted(os.sched_getaffinity(0)), [tk.execute("add", {"a": 2, "b": 3}).text]

        mask, texts = _in_thread(one, calls)
        assert mask == sorted(one)
        assert texts == ["5"]
        mask, _ = _in_thread(set(ALL), calls)
        assert mask == ALL
        assert sorted(os.sched_getaffinity(_loop_tid(tk))) == ALL


def test_concurrent_sync_callers_all_get_answers_and_masks_back() -> None:
    with _toolkit() as tk:
        failures: list[str] = []

        def caller(n: int) -> None:
            mine = sorted(os.sched_getaffinity(0))
            for i in range(150):
                result = tk.execute("add", {"a": n, "b": i})
                if result.text != str(n + i):
                    failures.append(f"{n}+{i} gave {result.text!r}")
            if sorted(os.sched_getaffinity(0)) != mine:
                failures.append(f"caller {n} kept a pinned mask")

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert _handoffs(tk) > 0
        assert sorted(os.sched_getaffinity(_loop_tid(tk))) == ALL
        assert tk.execute("loop_mask").structured == ALL


def test_a_loop_thread_allowed_one_cpu_is_left_alone() -> None:
    one = {ALL[0]}
    tk = _in_thread(one, _toolkit)
    with tk:
        assert tk.execute("loop_mask").structured == sorted(one)
        assert _handoffs(tk) == 0
        assert sorted(os.sched_getaffinity(0)) == ALL


@pytest.mark.parametrize("value", ["0", "off"])
def test_the_environment_variable_turns_it_off(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    with _toolkit() as tk:
        assert tk.execute("add", {"a": 1, "b": 1}).text == "2"
        assert tk._loop_thread is not None
        assert tk._loop_thread.pin.enabled is False
        assert _handoffs(tk) == 0


@pytest.mark.parametrize("refused", ["sched_setaffinity", "sched_getaffinity"])
def test_a_refusing_kernel_turns_it_off_without_failing_a_call(
    monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    # A seccomp profile that forbids these calls cannot be installed here; stand in for it.
    def refuse(*args: Any) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    with _toolkit() as tk:
        before = _handoffs(tk)
        monkeypatch.setattr(os, refused, refuse)
        assert tk.execute("add", {"a": 2, "b": 2}).text == "4"
        assert tk.execute("add", {"a": 3, "b": 2}).text == "5"
        assert tk._loop_thread is not None
        assert tk._loop_thread.pin.enabled is False
        assert _handoffs(tk) == before
        monkeypatch.undo()
        assert sorted(os.sched_getaffinity(_loop_tid(tk))) == ALL
        assert sorted(os.sched_getaffinity(0)) == ALL


def test_a_call_in_flight_never_sees_a_pin_from_other_callers() -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    async def hold() -> list[int]:
        """Stay in flight until the test lets go, then report the loop thread's mask."""
        started.set()
        await asyncio.to_thread(release.wait)
        return sorted(os.sched_getaffinity(0))

    with create_toolkit(extra_tools=[hold, loop_mask]) as tk:
        results: list[Any] = []
        holder = threading.Thread(target=lambda: results.append(tk.execute("hold").structured))
        holder.start()
        try:
            started.wait()
            before = _handoffs(tk)
            for _ in range(20):
                assert tk.execute("loop_mask").structured == ALL
            assert _handoffs(tk) > before  # the loop sleeps while `hold` waits: pinned then
        finally:
            release.set()
            holder.join()
        assert results == [ALL]


def test_another_event_loop_policy_keeps_its_own_loop_and_no_pin() -> None:
    """uvloop and friends install a policy: the toolkit's loop then comes from it, unpinned."""

    class Custom(asyncio.DefaultEventLoopPolicy):
        made = 0

        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            Custom.made += 1
            return super().new_event_loop()

    before = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(Custom())
    try:
        with _toolkit() as tk:
            assert Custom.made == 1
            assert tk._loop_thread is not None
            assert tk._loop_thread.pin.enabled is False
            assert tk.execute("add", {"a": 1, "b": 2}).text == "3"
            assert _handoffs(tk) == 0
    finally:
        asyncio.set_event_loop_policy(before)
