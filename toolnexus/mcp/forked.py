"""A sandboxed stdio server started by the toolkit's resident launcher (`runtime.resident`).

Per call, a Landlock-confined server costs a fresh `python -I -S launcher.py` before the server
itself starts: an interpreter start-up and the compilation of the launcher, which runs by path
without cached bytecode (issue 21). The toolkit's resident launcher for the server's policy has
imported the reaper and the launcher once; it forks, the fork becomes the server's reaper and
forks again into the launcher's code, which confines itself and execs the server. Under bwrap
the launcher lives in a resident bwrap of the policy's binds, and its fork gives the server the
namespaces a bwrap per call would (`runtime.freshns`), without a bwrap or an interpreter started.
So the server also gets the reaper's guarantees, which a per-call start does not give it:

- its whole tree, `setsid` escapees included, is stopped when the server ends or is stopped;
- it dies with the toolkit's process even when that is SIGKILLed (the reaper's parent-death
  signal on the launcher, the launcher's on the toolkit).

`ForkedServer` is the process as `stdio.bounded_stdio_client` uses it (`stdin`, `stdout`,
`returncode`); it is not the toolkit's child, so its end is watched through a pidfd. Its stop
is the reaper's: SIGTERM to the group (the reaper passes it to every descendant), the grace,
then SIGUSR1 (the reaper SIGKILLs them all and exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from ..runtime import reaper
from ..runtime.resident import Launched, Launchers, LaunchPipes, PidfdWatch, ResidentPlan

if TYPE_CHECKING:
    from ..runtime.sandbox import SandboxPolicy, WrappedCommand

__all__ = ["ForkedServer", "fork_server", "resident_plan_for"]

_CHUNK = 65536
_FIRST_LINE = 10.0
"""Seconds for the reaper's first report (`started PID`), sent right after its fork: one that
says nothing is taken for broken, and the server for not started."""
_REAPER_GIVE_UP = reaper.GIVE_UP + 5.0
"""After SIGUSR1, how long the reaper may take to kill the tree before it is SIGKILLed."""


def resident_plan_for(wrapped: WrappedCommand, sandbox: SandboxPolicy) -> ResidentPlan | None:
    """The resident launcher a sandboxed server starts from (the one shell commands of the same
    policy use: under bwrap, of the same binds), or None when it starts the per-call way: one
    left unconfined (started directly, without a reaper), or a bwrap command without a
    resident form."""
    if wrapped.mechanism not in ("landlock", "bwrap"):
        return None
    from ..runtime.resident import resident_plan

    return resident_plan(wrapped, sandbox, cwd=Path.cwd())  # key and mode ignore the cwd


class _PipeReader(anyio.abc.ByteReceiveStream):
    """The server's stdout, read through asyncio."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader = reader
        self._transport = transport

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        data = await self._reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._reader.set_exception(anyio.ClosedResourceError())
        self._transport.close()


class _PipeWriter(anyio.abc.ByteSendStream):
    """The server's stdin, written through asyncio."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, item: bytes) -> None:
        if self._writer.is_closing():
            raise anyio.ClosedResourceError
        self._writer.write(item)
        try:
            await self._writer.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


class ForkedServer:
    """A server forked (under its reaper) by a resident launcher."""

    def __init__(
        self,
        launched: Launched,
        *,
        stdin: _PipeWriter,
        stdout: _PipeReader,
        status: asyncio.StreamReader,
        status_transport: asyncio.BaseTransport,
    ) -> None:
        self.pid = launched.pid
        """The reaper's pid, which is also the process group of the server's tree."""
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        """Set when the reaper has exited: the server's exit status from the reaper's report
        (`-N` for signal N), or -SIGKILL when the reaper said nothing (it was killed)."""
        self._status = status
        self._status_transport = status_transport
        self._loop = asyncio.get_running_loop()
        self._ended: asyncio.Future[None] = self._loop.create_future()
        self._report: asyncio.Task[None] | None = None
        self._end_watch = PidfdWatch(self._loop, launched.pidfd, self._on_exit)

    def _on_exit(self) -> None:
        self._end_watch.close()
        if not self._ended.done():
            self._ended.set_result(None)
        self._report = self._loop.create_task(self._read_report())

    async def _read_report(self) -> None:
        status = -signal.SIGKILL
        with contextlib.suppress(OSError, ValueError, asyncio.LimitOverrunError):
            for line in (await self._status.read()).decode("utf-8", "replace").splitlines():
                word, _, rest = line.partition(" ")
                if word == "exit" and rest:
                    status = int(rest.split()[0])
        self._status_transport.close()
        self.returncode = status

    async def _wait_reaper(self, timeout: float) -> bool:
        """Whether the reaper exited within `timeout` seconds."""
        with anyio.move_on_after(timeout):
            await asyncio.shield(self._ended)
            return True
        return False

    async def first_report(self) -> None:
        """Wait for the reaper's `started` line.

        Raises:
            FileNotFoundError: the command (or its folder) does not exist.
            PermissionError: it cannot be run.
            OSError: the reaper said nothing (it died, or did not answer in time).
        """
        line = b""
        with anyio.move_on_after(_FIRST_LINE):
            line = await self._status.readline()
        if line.startswith(b"started "):
            return
        word, _, rest = line.decode("utf-8", "replace").strip().partition(" ")
        code, _, why = rest.partition(" ")
        if word == "error" and code == "127":
            raise FileNotFoundError(errno.ENOENT, why)
        if word == "error":
            raise PermissionError(errno.EACCES, why)
        raise OSError(errno.ECHILD, "the resident launcher's fork did not report the start")

    async def terminate_tree(self, grace: float) -> None:
        """SIGTERM the server's tree, `grace` seconds, then SIGKILL all of it; reap it."""
        if self._ended.done():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)
        if await self._wait_reaper(grace):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGUSR1)
        if await self._wait_reaper(_REAPER_GIVE_UP):
            return
        # A reaper that cannot do its job (stopped, say): kill the group, and the reaper.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        await self._wait_reaper(_REAPER_GIVE_UP)

    def close(self) -> None:
        """Release the pidfd and the report pipe (the streams are closed by their users)."""
        self._end_watch.close()
        if self.returncode is None:
            self._status_transport.close()


async def fork_server(
    launchers: Launchers,
    plan: ResidentPlan,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    errlog: int,
    grace: float,
) -> ForkedServer | None:
    """Fork `argv` (a sandbox-wrapped command) in the resident launcher `plan` names; None when
    no resident launcher can run it (the caller starts it the per-call way). Under bwrap the
    fork runs the plan's command inside the resident bwrap, in the plan's folder, with the
    command's own namespaces (as a shell command's); `env` is then the complete environment
    the wrapped command gets (a bwrap per call unsets the spawner's defaults it lacks).

    The pipes are connected to the loop before the fork, and the fork is asked for on the loop's
    own thread, without an await between it and the result, so the fork is always owned. Not
    in a worker thread, although the first request waits for the launcher's start-up: the
    launcher's parent-death signal fires when the *thread* that started it ends, and an idle
    worker thread ends after a few seconds, killing the launcher and every server it forked.

    Args:
        errlog: the file descriptor the server's stderr goes to.
        grace: seconds the server's leftover processes get after it exits, before SIGKILL.
    """
    if plan.wrapper:
        argv, cwd = plan.argv, plan.cwd
    pipes = LaunchPipes(asyncio.get_running_loop())
    launched: Launched | None = None
    try:
        writer, in_r = await pipes.writer()
        out, out_w = await pipes.reader(_CHUNK)
        status, status_w = await pipes.reader(_CHUNK)  # the reaper's report
        launched = launchers.launch(
            plan.key, argv=argv, env=env, cwd=cwd, grace=grace,
            stdin=in_r, stdout=out_w, stderr=errlog, status=status_w, wrapper=plan.wrapper,
            mode=plan.mode,
        )  # fmt: skip
    finally:
        pipes.settle(launched=launched is not None)
    if launched is None:
        return None
    _, out_transport, status_transport = pipes.transports
    return ForkedServer(
        launched,
        stdin=_PipeWriter(writer),
        stdout=_PipeReader(out, out_transport),
        status=status,
        status_transport=status_transport,
    )
