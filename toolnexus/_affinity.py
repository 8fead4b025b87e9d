"""Co-scheduling a synchronous caller with the toolkit's loop thread, one hand-off at a time.

Why it exists: a synchronous call hands its work to the loop thread and waits, so every call
costs two thread wake-ups. When the other CPU is idle the kernel wakes the thread there, and on
a virtual machine waking an idle vCPU costs tens of microseconds (measured on our 2-vCPU VM: a
bare two-thread ping-pong takes 66 µs when idle against 6 µs when busy, and a sync call took
130-140 µs). Restricting the waiting caller and the sleeping loop thread to the CPU the caller
runs on turns both wake-ups into plain context switches on a CPU that is already awake (about
45 µs per call on the same VM).

What keeps it harmless:
- The loop thread widens its mask back before it runs anything else (`LoopPin.release` is the
  first callback after its wake-up), so tool code, the threads it starts and the subprocesses it
  spawns (both inherit affinity) never see the pin.
- The caller is pinned only while it blocks, and gets its own mask back as soon as it wakes.
- Only one hand-off is co-located at a time; concurrent callers take the ordinary path.
- The CPU must be in both threads' masks, so a mask the user set (taskset, cpusets) is never
  widened; any refusal from the kernel switches the feature off for this loop.
- `TOOLNEXUS_COLOCATE=0` switches it off; so does a platform without `sched_setaffinity` or
  `sched_getcpu` (anything but Linux), or a loop thread allowed a single CPU.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Callable

__all__ = ["ENV_VAR", "LoopPin", "enabled_by_env"]

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

    Created on the loop thread itself (it reads that thread's id and mask). The caller's side
    is `pin()` before it wakes the loop and `restore()` after it wakes; the loop's side is
    `release()`, run first thing after its wake-up.
    """

    def __init__(self, *, enabled: bool) -> None:
        self._tid = threading.get_native_id()
        self._mask: frozenset[int] = frozenset()
        if enabled and sys.platform.startswith("linux") and hasattr(os, "sched_setaffinity"):
            self._mask = frozenset(os.sched_getaffinity(0))
        self.enabled = len(self._mask) > 1
        self.handoffs = 0
        """How many hand-offs were co-located (the benchmark and the tests read it)."""
        self._busy = threading.Lock()
        self._pinned = False

    def pin(self) -> set[int] | None:
        """On the caller's thread: pin it and the (sleeping) loop thread to the caller's CPU.

        Returns the caller's own mask, to hand to `restore()` once the call is back, or None
        when this hand-off is not co-located.
        """
        if not self.enabled or not self._busy.acquire(blocking=False):
            return None
        try:
            mine = self._pin_both()
        finally:
            if not self._pinned:
                self._busy.release()
        if mine is not None:
            self.handoffs += 1
        return mine

    def _pin_both(self) -> set[int] | None:
        getcpu = _current_cpu()
        if getcpu is None:
            self.enabled = False
            return None
        cpu = getcpu()
        mine = os.sched_getaffinity(0)
        if cpu not in self._mask or cpu not in mine:
            return None
        only = {cpu}
        try:
            os.sched_setaffinity(self._tid, only)
            self._pinned = True
            if mine != only:
                os.sched_setaffinity(0, only)
        except OSError as exc:
            self._refused(exc)
            if self._pinned:
                self._pinned = False
                self._unpin(self._tid)
            return None
        return mine

    def release(self) -> None:
        """On the loop thread, before it runs anything else: give it its whole mask back."""
        if self._pinned:
            self._pinned = False
            self._unpin(0)

    def restore(self, mask: set[int]) -> None:
        """On the caller's thread once it is awake again: its own mask back, and the next
        hand-off may be co-located."""
        try:
            if len(mask) > 1:
                os.sched_setaffinity(0, mask)
        except OSError as exc:
            self._refused(exc)
        finally:
            self._busy.release()

    def _unpin(self, tid: int) -> None:
        try:
            os.sched_setaffinity(tid, self._mask)
        except OSError as exc:
            self._refused(exc)

    def _refused(self, exc: OSError) -> None:
        self.enabled = False
        logger.debug("co-scheduling sync calls with the loop thread is off: %s", exc)
