"""SIGKILL at random moments: a fork server whose children rewrite files forever, killed by the
test at a random instant, hundreds of times.

Starting Python and importing toolnexus for every kill would cost half a second each; the fork
server (this file, run as a script) imports once and forks a fresh child per kill. A child sets
up its job, prints `ready <pid>`, then alternates the target between two contents until it is
killed. The test waits for the child's exit through a pidfd, so the folder it inspects is the
one the kill left. Jobs:

- `write`, `edit`, `apply_patch`: the builtin tool rewrites (or patches) the files in `folder`;
- `tokens`: `TokenStore(path).update` stores a record with a big blob in it.

`mode: "named"` turns off `O_TMPFILE`, so the named-temp fallback is the one killed.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BIG = 4 * 1024 * 1024
"""The size of each file written: big enough that a write takes a while to land."""

LINES = BIG // 1024


def contents(i: int) -> str:
    """The two versions (`i` 0 or 1) a job alternates between: 4 MB of lines, the middle
    line differing, so an edit or a patch turns one into the other."""
    line = "x" * 1023 + "\n"
    half = line * (LINES // 2)
    return half + ("version A\n" if i == 0 else "version B\n") + half


class ForkServer:
    """The running fork server; `kill_one` runs one child and kills it at a random moment."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def kill_one(self, job: dict[str, Any], max_delay: float) -> None:
        """Start a child on `job`, let it run up to `max_delay` seconds, SIGKILL it, and return
        once it is dead."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line.startswith("ready "), f"the fork server said {line!r}"
        pid = int(line.split()[1])
        pidfd = os.pidfd_open(pid)
        try:
            time.sleep(random.uniform(0, max_delay))
            ended, _, _ = select.select([pidfd], [], [], 0)
            assert not ended, "the child ended before it was killed (see its stderr)"
            os.kill(pid, signal.SIGKILL)
            select.select([pidfd], [], [], 30)
        finally:
            os.close(pidfd)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@contextmanager
def fork_server() -> Iterator[ForkServer]:
    server = ForkServer()
    try:
        yield server
    finally:
        server.close()


# --- the fork server's side ------------------------------------------------------------------


def _child(job: dict[str, Any]) -> None:
    import anyio

    from toolnexus import ToolContext

    if job.get("mode") == "named":
        import builtin._common
        import toolnexus.mcp.tokens

        builtin._common._O_TMPFILE = 0
        toolnexus.mcp.tokens._O_TMPFILE = 0
    folder = Path(job["folder"])
    kind = job["kind"]
    versions = [contents(0), contents(1)]
    if kind == "tokens":
        from toolnexus.mcp.tokens import TokenStore

        store = TokenStore(Path(job["path"]))
        print(f"ready {os.getpid()}", flush=True)
        i = 0
        while True:
            blob = versions[i % 2]
            store.update("https://mcp.example/", lambda r, blob=blob: r.update(blob=blob))
            i += 1
    if kind == "apply_patch":
        from builtin.patch import patch_tools

        (tool,) = patch_tools({})
    else:
        from builtin.files import files_tools

        _, write, edit = files_tools({"require_read": False})
        tool = write if kind == "write" else edit
    ctx = ToolContext(
        call_id="crash", tool_name=tool.name, workspace=folder, roots=(folder,), state={}
    )
    names = job["names"]

    # Each file starts from the version a former child's kill left (a killed patch may have
    # changed some of its files and not the others: each file flips on its own).
    at = {name: 0 if "version A" in (folder / name).read_text() else 1 for name in names}

    def flip(name: str) -> tuple[str, str]:
        old, new = ("version A", "version B") if at[name] == 0 else ("version B", "version A")
        at[name] ^= 1
        return old, new

    def args() -> dict[str, Any]:
        if kind == "write":
            at[names[0]] ^= 1
            return {"path": names[0], "content": versions[at[names[0]]]}
        if kind == "edit":
            old, new = flip(names[0])
            return {"path": names[0], "old_string": old, "new_string": new}
        hunks = ""
        for name in names:
            old, new = flip(name)
            context = "x" * 1023
            hunks += f"*** Update File: {name}\n@@\n {context}\n-{old}\n+{new}\n {context}\n"
        return {"patch": f"*** Begin Patch\n{hunks}*** End Patch\n"}

    async def loop() -> None:
        print(f"ready {os.getpid()}", flush=True)
        while True:
            result = await tool.run(args(), ctx)
            assert not result.is_error, result.content

    anyio.run(loop)


def _serve() -> None:
    # Imported once here, so that each child starts at once.
    import anyio  # noqa: F401  (imported for the children)

    import builtin.files
    import builtin.patch  # noqa: F401
    import toolnexus.mcp.tokens  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in sys.stdin:
        job = json.loads(line)
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _child(job)
            finally:
                os._exit(1)


if __name__ == "__main__":
    _serve()
