"""The fault suite's shared check: after a fault, the toolkit keeps serving and nothing leaked.

`no_leaks` snapshots this process's open fds, live threads and child processes (every
descendant, found through /proc) before the test and compares after it. Resources close
asynchronously (a killed child is reaped, a reader thread ends), so the comparison retries for
a generous while before it fails: the suite asserts that nothing is left, never how fast.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SOAK = os.environ.get("TOOLNEXUS_SOAK") == "1"
"""Long soak variants run only when asked: `TOOLNEXUS_SOAK=1 pytest tests/reliability`."""


def descendants(pid: int | None = None) -> set[int]:
    """Every live descendant of `pid` (default: this process), read from /proc."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":  # a zombie is dead; its parent reaps it
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def resident_launchers() -> set[int]:
    """The toolkits' resident launchers (`runtime/resident.py`) among the live processes: they
    outlive a call by design, until their toolkit closes; what they fork does not."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"import resident" in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


@dataclass(frozen=True)
class Snapshot:
    fds: set[int]
    threads: set[int]
    children: set[int]

    @classmethod
    def take(cls) -> Snapshot:
        threads = {t.ident for t in threading.enumerate() if t.ident is not None}
        return cls(open_fds(), threads, descendants())

    def leaks_since(self, before: Snapshot) -> list[str]:
        leaks = []
        if extra := self.fds - before.fds:
            leaks.append(f"fds still open: {sorted(extra)}")
        if extra := self.threads - before.threads:
            names = [t.name for t in threading.enumerate() if t.ident in extra]
            leaks.append(f"threads still running: {names}")
        if extra := self.children - before.children:
            leaks.append(f"child processes still alive: {sorted(extra)}")
        return leaks


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Fail the test if it leaves fds, threads or child processes behind (retried for 10 s)."""
    before = Snapshot.take()
    yield
    deadline = time.monotonic() + 10.0
    while True:
        leaks = Snapshot.take().leaks_since(before)
        if not leaks or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not leaks, "; ".join(leaks)
