"""Running commands for tools: bounded output, whole-group kills, sandboxing, no zombies.

`run_process` runs a command to completion (shell tools, the builtin `shell`); `start_process`
starts a background job read piece by piece (`shell_output`, `shell_kill`). Both:

- start the command in a new session, so that a timeout or a cancellation kills its whole process
  group (SIGTERM, `kill_grace` seconds, then SIGKILL), grandchildren included, and reap it;
- make "no process outlives its call" hold beyond the group: under bwrap the command's pid
  namespace ends with it; otherwise (no sandbox, Landlock) the command runs under the reaper
  (`reaper.py`), a child subreaper that also catches `setsid` and double-fork escapees, and
  that stops what the command left running as soon as the command exits (SIGTERM, the grace,
  SIGKILL), so a background child neither outlives the call nor holds it until its timeout;
- read output as it comes with bounded memory: the first and last `max_output / 2` bytes of each
  stream are kept and the bytes in between are only counted, so a command printing a gigabyte
  costs a few hundred kilobytes;
- decode UTF-8 with replacement for invalid bytes;
- confine the command with `sandbox.wrap_command` when a policy is given.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import os
import shutil
import signal
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypeVar

from . import reaper
from .resident import (
    Launchers,
    LaunchPipes,
    PidfdWatch,
    ResidentPlan,
    current_launchers,
    resident_plan,
)
from .sandbox import Mechanism, SandboxPolicy, WrappedCommand, wrap_command

__all__ = ["ProcessHandle", "ProcessResult", "run_process", "start_process"]

Launch = Literal["resident", "per-call"]

_CHUNK = 65536
_KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL (the `kill_grace` of shell tools)."""
# After the command ended (or was killed), how long to wait for its pipes to reach EOF: a process
# that escaped the group (a daemon that called setsid) may hold them open forever.
_DRAIN_TIMEOUT = 1.0
# After asking the reaper to SIGKILL everything, how long before it is itself killed as broken
# (a process stuck in uninterruptible sleep makes it give up after `reaper.GIVE_UP`).
_REAPER_GIVE_UP = reaper.GIVE_UP + 5.0


@dataclass(frozen=True, kw_only=True)
class ProcessResult:
    """What a finished command did."""

    exit_code: int
    """The exit status; `-N` when signal N ended the process (as in `subprocess`)."""
    stdout: str
    """The output (stdout and stderr in order when merged), head and tail when truncated, with a
    line saying how many bytes were left out between them."""
    stderr: str
    """Standard error ("" when merged into `stdout`)."""
    timed_out: bool = False
    truncated: bool = False
    """True when output was left out (`dropped_bytes` says how much)."""
    dropped_bytes: int = 0
    duration: float = 0.0
    """Seconds from start to reaping."""
    mechanism: Mechanism = "none"
    """The sandbox mechanism that confined the command."""
    unconfined: bool = False
    """True when a sandbox was asked for (with `required: false`) and could not be applied."""
    unenforced: tuple[str, ...] = ()
    """Aspects of the policy that could not be enforced (with `required: false`)."""
    killed_signal: int | None = None
    """The signal the toolkit sent to end the process group (timeout), if it had to."""
    stopped: int = 0
    """Processes the command left running when it exited (or that ran beside it when it was
    killed), stopped by the reaper. Not counted under bwrap, whose pid namespace SIGKILLs them
    when the command exits."""
    launch: Launch = "per-call"
    """How the command was started: `resident`, forked by the toolkit's resident launcher for
    its policy, or `per-call`, under a reaper started for it (bwrap, no toolkit, or no resident
    launcher could run it; see `resident.py`)."""


class _Ring:
    """The last `limit` bytes of a stream, with absolute offsets so that a reader knows what it
    missed: a background job's output, and the tail of `_HeadTail`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        self.total += len(data)
        while self.size > self.limit:
            excess = self.size - self.limit
            first = self.chunks[0]
            if len(first) <= excess:
                self.chunks.popleft()
                self.size -= len(first)
            else:
                self.chunks[0] = first[excess:]
                self.size -= excess

    def since(self, offset: int) -> tuple[bytes, int]:
        """Bytes written after `offset` that are still kept, and how many were lost before."""
        start = self.total - self.size
        data = b"".join(self.chunks)
        if offset >= start:
            return data[offset - start :], 0
        return data, start - offset


class _HeadTail:
    """Keeps the first and last `limit / 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int | None) -> None:
        self.head_limit = None if limit is None else limit - limit // 2
        self.head = bytearray()
        self.tail = _Ring(0 if limit is None else limit // 2)

    @property
    def dropped(self) -> int:
        """Bytes between the head and the tail that were not kept."""
        return self.tail.total - self.tail.size

    def feed(self, data: bytes) -> None:
        if self.head_limit is None:
            self.head += data
            return
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.feed(data)

    def text(self) -> str:
        if not self.dropped:
            return b"".join([bytes(self.head), *self.tail.chunks]).decode("utf-8", "replace")
        head = codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(self.head))
        tail = b"".join(self.tail.chunks)
        skip = 0
        while skip < min(3, len(tail)) and 0x80 <= tail[skip] <= 0xBF:
            skip += 1  # a character cut in half at the start of the tail
        marker = f"\n[... {self.dropped + skip} bytes of output omitted ...]\n"
        return head + marker + tail[skip:].decode("utf-8", "replace")


async def _pump(stream: asyncio.StreamReader | None, sink: _HeadTail | _Ring) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_CHUNK):
        sink.feed(chunk)


async def _feed_stdin(stream: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if stream is None:
        return
    try:
        if data:
            stream.write(data)
            await stream.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the command exited without reading all of its input: not our failure
    finally:
        stream.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await stream.wait_closed()


def _killpg(pgid: int, sig: int) -> None:
    if pgid <= 1:  # a reaper already gone (`resident._pid_of`): never our own group, nor all
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass(frozen=True)
class _Report:
    """What the reaper said (`reaper.py` describes the lines)."""

    error: tuple[int, str] | None = None
    """(exit code, message) when the command could not be started."""
    status: int | None = None
    stopped: int = 0
    ended_by: int = 0

    @classmethod
    def parse(cls, text: str) -> _Report:
        report = cls()
        for line in text.splitlines():
            word, _, rest = line.partition(" ")
            if word == "error":
                code, _, message = rest.partition(" ")
                report = replace(report, error=(int(code), message))
            elif word == "exit":
                status, stopped, ended_by = (int(x) for x in rest.split())
                report = replace(report, status=status, stopped=stopped, ended_by=ended_by)
        return report


@dataclass(eq=False)
class _Child:
    """A started command: its group leader (the reaper, or bwrap) and the reaper's report pipe."""

    proc: asyncio.subprocess.Process | _ResidentProc
    status: asyncio.StreamReader | None
    """The reaper's report, None when the command runs without it (under bwrap)."""
    transport: asyncio.BaseTransport | None
    head: bytes = b""
    """The report's first line when it was read already (a resident launcher's `started`)."""
    tail: asyncio.Future[bytes] | None = None
    """A resident reaper's report after `started`, read up to its `exit` line (`follow`)."""

    def follow(self) -> None:
        """Read a resident reaper's report as it comes, and end the process at its `exit`
        line: the reaper writes it once the command's whole tree is gone, so the call need not
        wait for the reaper's own exit (the teardown of a forked interpreter, which its
        launcher reaps)."""
        assert self.status is not None and isinstance(self.proc, _ResidentProc)
        self.tail = asyncio.ensure_future(_read_tail(self.status, self.proc))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def abort(self) -> None:
        """SIGKILL the whole tree now, without waiting (the reaper does it and exits)."""
        if self.status is None:
            _killpg(self.pid, signal.SIGKILL)
        elif isinstance(self.proc, _ResidentProc):
            self.proc.send(signal.SIGUSR1)
        elif self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGUSR1)

    async def terminate(self, grace: float) -> int:
        """SIGTERM the group (the reaper forwards it to escapees), give it `grace` seconds,
        SIGKILL it; return the signal that ended it.

        Under bwrap the SIGTERM goes to the processes inside the sandbox, not to bwrap: bwrap
        dies of it without passing it on, and its `--die-with-parent` then SIGKILLs them all
        at once, so the command would never get its grace."""
        if self.status is None:
            reaper.signal_all(reaper.descendants(self.pid), signal.SIGTERM)
        else:
            _killpg(self.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), grace)
        except TimeoutError:
            self.abort()
            try:
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), _REAPER_GIVE_UP)
            except TimeoutError:  # a reaper that cannot do its job (stopped, say): kill it
                _killpg(self.pid, signal.SIGKILL)
                await self.proc.wait()
            return signal.SIGKILL
        # The leader is gone; members that ignored SIGTERM are not waited for.
        self.abort()
        return signal.SIGTERM

    async def report(self) -> _Report:
        """The reaper's report, once it exited (an empty one without the reaper)."""
        if self.status is None:
            return _Report()
        try:
            rest = self.tail if self.tail is not None else self.status.read()
            text = self.head + await asyncio.wait_for(rest, _DRAIN_TIMEOUT)
        except TimeoutError:
            text = b""
        self.close()
        return _Report.parse(text.decode("utf-8", "replace"))

    def close(self) -> None:
        if self.tail is not None and not self.tail.done():
            self.tail.cancel()
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    @property
    def launch(self) -> Launch:
        return "resident" if isinstance(self.proc, _ResidentProc) else "per-call"

    def release(self) -> None:
        """Close what is left of the pipes once the output was read (or given up on)."""
        if isinstance(self.proc, _ResidentProc):
            self.proc.release()


async def _read_tail(status: asyncio.StreamReader, proc: _ResidentProc) -> bytes:
    """The report's lines up to the `exit` line (or its end), ending `proc` there."""
    text = b""
    while line := await status.readline():
        text += line
        if line.startswith(b"exit "):
            proc.reported()
            break
    return text


class _ResidentProc:
    """A reaper forked by a resident launcher, seen as much like `asyncio.subprocess.Process`
    as `_Child` needs: it is not the toolkit's child, so its end is watched through a pidfd."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        *,
        stdin: asyncio.StreamWriter | None,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader | None,
        transports: list[asyncio.BaseTransport],
    ) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._transports = transports
        self._loop = asyncio.get_running_loop()
        self._ended: asyncio.Future[int] = self._loop.create_future()
        self._end_watch = PidfdWatch(self._loop, pidfd, self._on_exit)

    def reported(self) -> None:
        """The reaper reported the command's end (its tree is gone): as good as its exit."""
        self._on_exit()

    def _on_exit(self) -> None:
        self._end_watch.close()
        # The reaper's own status is its launcher's to reap, not ours: its report says how the
        # command ended, and a reaper that ended without one was killed.
        self.returncode = -signal.SIGKILL
        if not self._ended.done():
            self._ended.set_result(self.returncode)

    async def wait(self) -> int:
        return await asyncio.shield(self._ended)

    def send(self, sig: int) -> None:
        """Signal the reaper through its pidfd (see `PidfdWatch.send`)."""
        self._end_watch.send(sig)

    def release(self) -> None:
        for transport in self._transports:
            transport.close()
        if self.returncode is not None:
            self._end_watch.close()


def _prepare(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None,
    sandbox: SandboxPolicy | None,
    workspace: Path | None,
) -> WrappedCommand:
    if sandbox is None:
        return WrappedCommand(argv=tuple(argv), env={**os.environ, **(env or {})}, mechanism="none")
    return wrap_command(argv, sandbox, workspace=workspace or cwd, cwd=cwd, env=env)


_Limit = TypeVar("_Limit", int, float)


def _limit(given: _Limit | None, policy: _Limit | None) -> _Limit | None:
    if given is None:
        return policy
    return given if policy is None else min(given, policy)


# The reaper is imported rather than run by path, so that its cached bytecode is used: compiling
# it would cost as much as the rest of its start-up. `sys.path` gets its folder last, so that
# nothing there shadows the standard library.
_REAPER_BOOT = (
    "import sys; sys.path.append(sys.argv.pop(1)); from reaper import main; "
    "sys.exit(main(sys.argv))"
)


def _reaper_argv(status_fd: int, grace: float) -> list[str]:
    """`python -I -S -c BOOT DIR FD PARENT GRACE --`: isolated mode keeps the command's
    environment and the user's site-packages out of the reaper (and start-up short)."""
    folder = os.path.dirname(reaper.__file__)
    return [sys.executable, "-I", "-S", "-c", _REAPER_BOOT, folder, str(status_fd),
            str(os.getpid()), repr(grace), "--"]  # fmt: skip


async def _spawn_resident(
    wrapped: WrappedCommand,
    launchers: Launchers,
    plan: ResidentPlan,
    *,
    cwd: Path,
    stdin: bool,
    merge_stderr: bool,
    grace: float,
) -> _Child | None:
    """Fork the command's reaper in the resident launcher for its policy; None when none can.

    The pipes are connected to the loop before the fork, so that nothing is awaited between
    the fork and the `_Child` that owns it (a cancellation there would leave it running)."""
    await launchers.prepare(plan.key, wrapper=plan.wrapper, mode=plan.mode)
    pipes = LaunchPipes(asyncio.get_running_loop())
    launched = None
    try:
        writer, in_r = await pipes.writer() if stdin else (None, None)
        out, out_w = await pipes.reader(_CHUNK)
        err, err_w = (None, None) if merge_stderr else await pipes.reader(_CHUNK)
        status, status_w = await pipes.reader(2**16)
        launched = launchers.launch(
            plan.key, argv=plan.argv, env=wrapped.env, cwd=plan.cwd, grace=grace,
            stdin=in_r, stdout=out_w, stderr=err_w, status=status_w,
            wrapper=plan.wrapper, mode=plan.mode,
        )  # fmt: skip
    finally:
        pipes.settle(launched=launched is not None)
    if launched is None:
        return None
    *loop_ends, status_transport = pipes.transports
    proc = _ResidentProc(
        launched.pid, launched.pidfd, stdin=writer, stdout=out, stderr=err, transports=loop_ends
    )
    return _Child(proc, status, status_transport)


async def _spawn(
    wrapped: WrappedCommand,
    *,
    cwd: Path,
    stdin: bool,
    merge_stderr: bool,
    grace: float,
    sandbox: SandboxPolicy | None = None,
) -> _Child:
    """Start the command in a new session, under the reaper unless bwrap's pid namespace
    already ends every process with the command: forked by the toolkit's resident launcher
    for the policy when there is one, else in a reaper started for it.

    The child runs as soon as it is forked, while asyncio still connects its pipes: a
    cancellation in that window must not leave the started group behind, so the spawn is
    shielded and, if cancelled, finished and its tree killed before the cancellation goes on.
    """
    launchers = current_launchers.get()
    plan = resident_plan(wrapped, sandbox, cwd=cwd)
    for _ in range(2):
        if launchers is None or plan is None:
            break
        child = await _spawn_resident(
            wrapped, launchers, plan, cwd=cwd, stdin=stdin, merge_stderr=merge_stderr, grace=grace
        )
        if child is None:
            break
        if await _started(child):
            child.follow()
            return child
        # Its launcher died between the answer and the start (under bwrap its forks outlive
        # the bwrap they die with by a moment): nothing ran; the launcher is started again.
    argv: Sequence[str] = wrapped.argv
    read_fd = write_fd = None
    if wrapped.mechanism != "bwrap":
        read_fd, write_fd = os.pipe()
        argv = [*_reaper_argv(write_fd, grace), *wrapped.argv]
    spawning = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=wrapped.env,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=_CHUNK,
            pass_fds=() if write_fd is None else (write_fd,),
        )
    )
    try:
        try:
            proc = await asyncio.shield(spawning)
        finally:
            if write_fd is not None:
                os.close(write_fd)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):  # it failed to start: nothing to kill
            child = _Child(await spawning, None, None)
            _killpg(child.pid, signal.SIGKILL)  # the reaper has not started anything yet
            await child.proc.wait()
        if read_fd is not None:
            os.close(read_fd)
        raise
    except BaseException:
        if read_fd is not None:
            os.close(read_fd)
        raise
    if read_fd is None:
        return _Child(proc, None, None)
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    return _Child(proc, reader, transport)


async def _started(child: _Child) -> bool:
    """Read a resident reaper's first report line (`started` or `error`); False, with the
    child released, when it ended before it started anything."""
    assert child.status is not None
    try:
        child.head = await child.status.readline()
    except BaseException:
        child.abort()
        child.close()
        child.release()
        raise
    if child.head:
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(child.proc.wait(), _DRAIN_TIMEOUT)
    child.close()
    child.release()
    return False


def _cleanup(wrapped: WrappedCommand) -> None:
    for folder in wrapped.cleanup:
        shutil.rmtree(folder, ignore_errors=True)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float | None,
    max_output: int | None,
    merge_stderr: bool = False,
    sandbox: SandboxPolicy | None = None,
    workspace: Path | None = None,
    kill_grace: float = _KILL_GRACE,
) -> ProcessResult:
    """Run a command to completion with bounded time and memory.

    The call returns as soon as the command itself has exited: processes it left running (a
    `cmd &`, a daemon that called `setsid`) are stopped then, SIGTERM first and SIGKILL after
    `kill_grace` seconds, and counted in `ProcessResult.stopped` (under bwrap the pid namespace
    SIGKILLs them at once, uncounted).

    Args:
        argv: The command; `argv[0]` is looked up on PATH.
        cwd: The folder it starts in.
        env: Variables to set. Without a sandbox they are added to the toolkit's environment;
            with one they are added to the variables the policy lets through.
        stdin: Bytes piped to the command (its stdin is empty otherwise).
        timeout: Seconds before the whole process tree is killed (the policy's own timeout,
            if shorter, wins).
        max_output: Bytes kept per stream, head and tail (None keeps everything).
        merge_stderr: Send stderr into `stdout`, in order.
        sandbox: The policy to confine the command with.
        workspace: The workspace for the policy (default `cwd`).
        kill_grace: Seconds between SIGTERM and SIGKILL, on timeout and for leftovers.

    Returns:
        The exit code, the output and how it ended. A command that does not exist gives exit
        code 127, as in a shell.

    Raises:
        SandboxUnavailable: the policy is required and cannot be enforced here.
        ConfigError: the policy cannot apply to a process (a network host list).
    """
    if sandbox is not None:
        timeout = _limit(timeout, sandbox.timeout)
        max_output = _limit(max_output, sandbox.max_output)
    wrapped = _prepare(argv, cwd=cwd, env=env, sandbox=sandbox, workspace=workspace)
    started = time.monotonic()
    out, err = _HeadTail(max_output), _HeadTail(max_output)
    try:
        if (folder := _missing_folder(argv, cwd)) is not None:  # a resident launcher's fork
            return _not_started(wrapped, started, 126, folder)  # would report it as exit 127
        try:
            child = await _spawn(
                wrapped,
                cwd=cwd,
                stdin=stdin is not None,
                merge_stderr=merge_stderr,
                grace=kill_grace,
                sandbox=sandbox,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            folder = _missing_folder(argv, cwd)
            if folder is not None:
                return _not_started(wrapped, started, 126, folder)
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return _not_started(wrapped, started, code, f"cannot run {argv[0]!r}: "
                                f"{exc.strerror or exc}")  # fmt: skip
        proc = child.proc
        tasks = [
            asyncio.ensure_future(_pump(proc.stdout, out)),
            asyncio.ensure_future(_pump(proc.stderr, err)),
            asyncio.ensure_future(_feed_stdin(proc.stdin, stdin)),
        ]
        timed_out, killed = False, None
        try:
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout)
            except TimeoutError:
                timed_out = True
                killed = await child.terminate(kill_grace)
            if child.status is None:
                # Whatever the command left running in its group goes with it.
                _killpg(proc.pid, signal.SIGKILL)
            report = await child.report()
            _, pending = await asyncio.wait(tasks, timeout=_DRAIN_TIMEOUT)
            for task in pending:
                task.cancel()
            child.release()
        except BaseException:
            # Cancelled (or failing) while the command runs: never leave its tree behind.
            # asyncio's child watcher reaps the leader once it is dead.
            child.abort()
            child.close()
            for task in tasks:
                task.cancel()
            child.release()
            raise
        if report.error is not None:
            return _not_started(wrapped, started, *report.error, launch=child.launch)
        code = report.status if report.status is not None else proc.returncode
        if timed_out and report.status is not None and not report.ended_by:
            timed_out, killed = False, None  # the command had ended; only leftovers ran on
        return ProcessResult(
            exit_code=code if code is not None else -signal.SIGKILL,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            truncated=bool(out.dropped or err.dropped),
            dropped_bytes=out.dropped + err.dropped,
            duration=time.monotonic() - started,
            mechanism=wrapped.mechanism,
            unconfined=wrapped.unconfined,
            unenforced=wrapped.unenforced,
            killed_signal=killed,
            stopped=report.stopped,
            launch=child.launch,
        )
    finally:
        _cleanup(wrapped)


def _missing_folder(argv: Sequence[str], cwd: Path) -> str | None:
    """The message for a command that could not start because its working folder is missing
    (the OS reports it as the program not found, which would send the reader the wrong way)."""
    if cwd.is_dir():
        return None
    what = "is not a folder" if cwd.exists() else "does not exist"
    return f"cannot run {argv[0]!r}: its working folder {str(cwd)!r} {what}"


def _not_started(
    wrapped: WrappedCommand,
    started: float,
    code: int,
    message: str,
    *,
    launch: Launch = "per-call",
) -> ProcessResult:
    return ProcessResult(
        launch=launch,
        exit_code=code,
        stdout="",
        stderr=message,
        duration=time.monotonic() - started,
        mechanism=wrapped.mechanism,
        unconfined=wrapped.unconfined,
        unenforced=wrapped.unenforced,
    )


@dataclass(kw_only=True, eq=False)
class ProcessHandle:
    """A background job started by `start_process`. Its output (stdout and stderr merged) is
    kept in a bounded ring buffer; `read_new` returns what arrived since the last call."""

    argv: tuple[str, ...]
    pid: int
    """The job's process group (the reaper's pid, or bwrap's)."""
    mechanism: Mechanism
    unconfined: bool
    started: float
    """`time.monotonic()` at start."""
    launch: Launch
    """How it was started (see `ProcessResult.launch`)."""
    _child: _Child = field(repr=False)
    _ring: _Ring = field(repr=False)
    _wrapped: WrappedCommand = field(repr=False)
    _pump: asyncio.Future[None] = field(repr=False)
    _offset: int = 0
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"), repr=False
    )
    _report: _Report | None = field(default=None, repr=False)

    @property
    def returncode(self) -> int | None:
        """The exit status once the job ended (`-N` for signal N), else None."""
        if self._report is not None and self._report.status is not None:
            return self._report.status
        return self._child.proc.returncode

    @property
    def running(self) -> bool:
        return self._child.proc.returncode is None

    @property
    def stopped(self) -> int:
        """Processes the job left running when it ended, stopped then (known after `wait`)."""
        return 0 if self._report is None else self._report.stopped

    def read_new(self) -> str:
        """Output that arrived since the previous call (a note says how much was lost if the
        buffer overflowed in between)."""
        data, lost = self._ring.since(self._offset)
        self._offset = self._ring.total
        note = ""
        if lost:
            self._decoder.reset()
            note = f"[... {lost} bytes of output lost: read more often ...]\n"
        final = not self.running and self._pump.done()
        return note + self._decoder.decode(data, final=final)

    async def wait(self, timeout: float | None = None) -> int:
        """Wait for the job to end and its output to be read; return its exit status.

        Raises:
            TimeoutError: it did not end within `timeout` seconds (it keeps running).
        """
        proc = self._child.proc
        code = await asyncio.wait_for(asyncio.shield(proc.wait()), timeout)
        if self._child.status is None:
            _killpg(self.pid, signal.SIGKILL)
        if self._report is None:
            self._report = await self._child.report()
        await asyncio.wait([self._pump], timeout=_DRAIN_TIMEOUT)
        if self._pump.done():
            self._child.release()
        _cleanup(self._wrapped)
        return self._report.status if self._report.status is not None else code

    async def kill(self, grace: float = _KILL_GRACE) -> int:
        """Stop the job's whole process tree (SIGTERM, `grace`, SIGKILL) and reap it."""
        if self.running:
            await self._child.terminate(grace)
        return await self.wait()

    def abort(self) -> None:
        """SIGKILL the job's whole tree now, without waiting: for finalizers and exit hooks,
        where `kill` cannot be awaited (a group kill would miss escapees the reaper holds)."""
        self._child.abort()


async def start_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    sandbox: SandboxPolicy | None = None,
    workspace: Path | None = None,
    max_buffer: int = 1_000_000,
    kill_grace: float = _KILL_GRACE,
) -> ProcessHandle:
    """Start a background job; stdout and stderr are merged into a ring buffer of `max_buffer`
    bytes. Stop it with `ProcessHandle.kill` (the toolkit must, before it closes). When the
    job's command exits, what it left running is stopped (SIGTERM, `kill_grace`, SIGKILL).

    Raises:
        SandboxUnavailable: the policy is required and cannot be enforced here.
        FileNotFoundError: the command does not exist.
        NotADirectoryError: its working folder does not exist (the message names it).
    """
    if (folder := _missing_folder(argv, cwd)) is not None:
        raise NotADirectoryError(errno.ENOTDIR, folder)
    wrapped = _prepare(argv, cwd=cwd, env=env, sandbox=sandbox, workspace=workspace)
    try:
        child = await _spawn(
            wrapped, cwd=cwd, stdin=False, merge_stderr=True, grace=kill_grace, sandbox=sandbox
        )
    except OSError as exc:
        _cleanup(wrapped)
        folder = _missing_folder(argv, cwd)
        if folder is not None:
            raise NotADirectoryError(errno.ENOTDIR, folder) from exc
        raise
    if child.status is not None:
        try:
            first = child.head or await child.status.readline()
        except BaseException:
            child.abort()
            child.close()
            _cleanup(wrapped)
            raise
        if first.startswith(b"error "):
            report = _Report.parse(first.decode("utf-8", "replace"))
            await child.proc.wait()
            child.close()
            child.release()
            _cleanup(wrapped)
            code, message = report.error or (127, "")
            if code == 127:
                raise FileNotFoundError(errno.ENOENT, message, argv[0])
            raise PermissionError(errno.EACCES, message, argv[0])
    ring = _Ring(max_buffer)
    return ProcessHandle(
        argv=tuple(argv),
        pid=child.pid,
        mechanism=wrapped.mechanism,
        unconfined=wrapped.unconfined,
        started=time.monotonic(),
        launch=child.launch,
        _child=child,
        _ring=ring,
        _wrapped=wrapped,
        _pump=asyncio.ensure_future(_pump(child.proc.stdout, ring)),
    )
