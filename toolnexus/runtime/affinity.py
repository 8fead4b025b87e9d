"""Co-scheduling a synchronous caller with the toolkit's idle loop thread.

Why it exists: a synchronous call hands its work to the loop thread and waits, so every call
costs two thread wake-ups. When the other CPU is idle the kernel wakes the thread there, and on
a virtual machine waking an idle vCPU costs tens of microseconds (measured on our 2-vCPU VM: a
bare two-thread ping-pong takes 66 µs when idle against 6 µs when busy, and a sync call took
130-140 µs). Restricting the waiting caller and the sleeping loop thread to the CPU the caller
runs on turns both wake-ups into plain context switches on a CPU that is already awake (about
45 µs per call on the same VM).

What keeps it harmless:
- The loop thread is pinned only while it sleeps in `select()`, never while it runs code: it
  holds `_running` whenever it is not blocked there, a caller pins it only after taking that
  lock, and on waking it takes the lock back and widens its own mask before it returns from
  `select()`. So tool code, the threads it starts and the subprocesses it spawns (both inherit
  affinity) never see the pin.
- The caller is pinned only while it blocks waiting, and gets its own mask back on waking.
- The CPU must be in both threads' masks, so a mask the user set (taskset, cpusets) is never
  widened; any refusal from the kernel switches the feature off for this loop.
- `TOOLNEXUS_COLOCATE=0` switches it off; so does a platform without `sched_setaffinity` or
  `sched_getcpu` (anything but Linux), an event loop policy other than asyncio's default
  (uvloop...), or a loop thread allowed a single CPU.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import selectors
import sys
import threading
import warnings
from collections.abc import Callable

__all__ = ["ENV_VAR", "LoopPin", "PinningSelector", "enabled_by_env", "pinning_loop"]

ENV_VAR = "TOOLNEXUS_COLOCATE"
"""Set to 0 (or false, no, off) to keep sync calls from pinning threads."""

logger = logging.getLogger("toolnexus")


def enabled_by_env() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() not in {"0", "false", "no", "off"}


@functools.cache
def _current_cpu() -> Callable[[], int] | None:
    """libc's `sched_getcpu` (a vDSO read, no syscall), loaded on first use: importing ctypes
    costs milliseconds that `import toolnexus` and `create_toolkit` should not pay."""
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (ImportError, OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return fn


class LoopPin:
    """Pins one loop thread next to whichever synchronous caller is handing it work.

    Built by the thread that creates the loop thread (which inherits its mask); the loop
    thread calls `bind()` before its loop runs. Caller's side: `pin()` before waking the loop,
    `restore()` after waking. Loop's side: `PinningSelector` calls `idle()` and `awake()`
    around every blocking `select()`.
    """

    def __init__(self, *, enabled: bool) -> None:
        self._tid = 0
        self._mask: frozenset[int] = frozenset()
        if enabled and sys.platform.startswith("linux") and hasattr(os, "sched_setaffinity"):
            self._mask = frozenset(os.sched_getaffinity(0))
        self.enabled = len(self._mask) > 1
        self.handoffs = 0
        """How many hand-offs were co-scheduled (the benchmark and the tests read it)."""
        self._running = threading.Lock()
        """Held by the loop thread whenever it is not asleep in `select()`."""
        self._running.acquire()
        self._pinned = False

    def bind(self) -> None:
        """On the loop thread, before its loop runs."""
        self._tid = threading.get_native_id()

    # -- the loop thread's side ------------------------------------------------------------

    def idle(self) -> None:
        self._running.release()

    def awake(self) -> None:
        self._running.acquire()
        if self._pinned:
            self._pinned = False
            try:
                os.sched_setaffinity(0, self._mask)
            except OSError as exc:
                self._refused(exc)

    # -- the caller's side -----------------------------------------------------------------

    def pin(self) -> set[int] | None:
        """Pin the loop thread, if it is asleep, and the calling thread to the caller's CPU.

        Returns the caller's own mask, to hand to `restore()` once the call is back, or None
        when this hand-off is not co-scheduled.
        """
        if not self.enabled:
            return None
        getcpu = _current_cpu()
        if getcpu is None:
            self.enabled = False
            return None
        cpu = getcpu()  # -1 on failure: in no mask
        try:
            mine = os.sched_getaffinity(0)
        except OSError as exc:
            self._refused(exc)
            return None
        if cpu not in self._mask or cpu not in mine:
            return None
        if not self._running.acquire(blocking=False):
            return None  # the loop thread is running code: never pin it then
        try:
            os.sched_setaffinity(self._tid, (cpu,))
            self._pinned = True
        except OSError as exc:
            self._refused(exc)
            return None
        finally:
            self._running.release()
        if len(mine) > 1:
            try:
                os.sched_setaffinity(0, (cpu,))
            except OSError as exc:
                self._refused(exc)  # the loop thread widens its own mask when it wakes
                return None
        self.handoffs += 1
        return mine

    def restore(self, mask: set[int]) -> None:
        """On the caller's thread once it is awake again: its own mask back."""
        if len(mask) > 1:
            try:
                os.sched_setaffinity(0, mask)
            except OSError as exc:
                self._refused(exc)

    def _refused(self, exc: OSError) -> None:
        self.enabled = False
        logger.debug("co-scheduling sync calls with the loop thread is off: %s", exc)


class PinningSelector(selectors.DefaultSelector):
    """The platform's default selector, telling `pin` when the loop thread sleeps and wakes.

    A `select()` with a zero timeout does not sleep, so the loop thread keeps `_running`."""

    def __init__(self, pin: LoopPin) -> None:
        super().__init__()
        self._pin = pin

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            return super().select(timeout)
        self._pin.idle()
        try:
            return super().select(timeout)
        finally:
            self._pin.awake()


def pinning_loop(pin: LoopPin) -> asyncio.AbstractEventLoop:
    """A new event loop whose sleeps `pin` can see, or the policy's own loop (and `pin` off)
    when co-scheduling is off or another event loop policy (uvloop...) is installed."""
    if pin.enabled and _default_policy():
        return asyncio.SelectorEventLoop(PinningSelector(pin))
    pin.enabled = False
    return asyncio.new_event_loop()


def _default_policy() -> bool:
    # Python 3.14 deprecates policies; until they are gone they still decide new_event_loop().
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return type(asyncio.get_event_loop_policy()) is asyncio.DefaultEventLoopPolicy
