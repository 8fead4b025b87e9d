"""Running commands for tools: bounded output, whole-group kills, sandboxing, no zombies.

`run_process` runs a command to completion (shell tools, the builtin `shell`); `start_process`
starts a background job read piece by piece (`shell_output`, `shell_kill`). Both:

- start the command in a new session, so that a timeout or a cancellation kills its whole process
  group (SIGTERM, a short grace, then SIGKILL), grandchildren included, and reap it;
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
import os
import shutil
import signal
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from .sandbox import Mechanism, SandboxPolicy, WrappedCommand, wrap_command

__all__ = ["ProcessHandle", "ProcessResult", "run_process", "start_process"]

_CHUNK = 65536
_KILL_GRACE = 2.0
# After the command ended (or was killed), how long to wait for its pipes to reach EOF: a process
# that escaped the group (a daemon that called setsid) may hold them open forever.
_DRAIN_TIMEOUT = 1.0


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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _terminate(proc: asyncio.subprocess.Process, grace: float) -> int:
    """SIGTERM the group, give it `grace` seconds, SIGKILL it; return the signal that ended it."""
    _killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        _killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return signal.SIGKILL
    # The leader is gone; members that ignored SIGTERM are not waited for.
    _killpg(proc.pid, signal.SIGKILL)
    return signal.SIGTERM


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


async def _spawn(
    wrapped: WrappedCommand, *, cwd: Path, stdin: bool, merge_stderr: bool
) -> asyncio.subprocess.Process:
    """Start the command in a new session.

    The child runs as soon as it is forked, while asyncio still connects its pipes: a
    cancellation in that window must not leave the started group behind, so the spawn is
    shielded and, if cancelled, finished and its group killed before the cancellation goes on.
    """
    spawning = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *wrapped.argv,
            cwd=cwd,
            env=wrapped.env,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=_CHUNK,
        )
    )
    try:
        return await asyncio.shield(spawning)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):  # it failed to start: nothing to kill
            proc = await spawning
            _killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        raise


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

    Args:
        argv: The command; `argv[0]` is looked up on PATH.
        cwd: The folder it starts in.
        env: Variables to set. Without a sandbox they are added to the toolkit's environment;
            with one they are added to the variables the policy lets through.
        stdin: Bytes piped to the command (its stdin is empty otherwise).
        timeout: Seconds before the whole process group is killed (the policy's own timeout,
            if shorter, wins).
        max_output: Bytes kept per stream, head and tail (None keeps everything).
        merge_stderr: Send stderr into `stdout`, in order.
        sandbox: The policy to confine the command with.
        workspace: The workspace for the policy (default `cwd`).
        kill_grace: Seconds between SIGTERM and SIGKILL on timeout.

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
        try:
            proc = await _spawn(
                wrapped, cwd=cwd, stdin=stdin is not None, merge_stderr=merge_stderr
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            return ProcessResult(
                exit_code=127 if isinstance(exc, FileNotFoundError) else 126,
                stdout="",
                stderr=f"cannot run {argv[0]!r}: {exc.strerror or exc}",
                duration=time.monotonic() - started,
                mechanism=wrapped.mechanism,
                unconfined=wrapped.unconfined,
                unenforced=wrapped.unenforced,
            )
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
                killed = await _terminate(proc, kill_grace)
            # Whatever the command left running in its group goes with it.
            _killpg(proc.pid, signal.SIGKILL)
            _, pending = await asyncio.wait(tasks, timeout=_DRAIN_TIMEOUT)
            for task in pending:
                task.cancel()
        except BaseException:
            # Cancelled (or failing) while the command runs: never leave its group behind.
            # asyncio's child watcher reaps the leader once it is dead.
            _killpg(proc.pid, signal.SIGKILL)
            for task in tasks:
                task.cancel()
            raise
        code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        return ProcessResult(
            exit_code=code,
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
        )
    finally:
        _cleanup(wrapped)


@dataclass(kw_only=True, eq=False)
class ProcessHandle:
    """A background job started by `start_process`. Its output (stdout and stderr merged) is
    kept in a bounded ring buffer; `read_new` returns what arrived since the last call."""

    argv: tuple[str, ...]
    pid: int
    mechanism: Mechanism
    unconfined: bool
    started: float
    """`time.monotonic()` at start."""
    _proc: asyncio.subprocess.Process = field(repr=False)
    _ring: _Ring = field(repr=False)
    _wrapped: WrappedCommand = field(repr=False)
    _pump: asyncio.Future[None] = field(repr=False)
    _offset: int = 0
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"), repr=False
    )

    @property
    def returncode(self) -> int | None:
        """The exit status once the job ended (`-N` for signal N), else None."""
        return self._proc.returncode

    @property
    def running(self) -> bool:
        return self._proc.returncode is None

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
        code = await asyncio.wait_for(asyncio.shield(self._proc.wait()), timeout)
        _killpg(self.pid, signal.SIGKILL)
        await asyncio.wait([self._pump], timeout=_DRAIN_TIMEOUT)
        _cleanup(self._wrapped)
        return code

    async def kill(self, grace: float = _KILL_GRACE) -> int:
        """Stop the job's whole process group (SIGTERM, `grace`, SIGKILL) and reap it."""
        if self.running:
            await _terminate(self._proc, grace)
        return await self.wait()


async def start_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    sandbox: SandboxPolicy | None = None,
    workspace: Path | None = None,
    max_buffer: int = 1_000_000,
) -> ProcessHandle:
    """Start a background job; stdout and stderr are merged into a ring buffer of `max_buffer`
    bytes. Stop it with `ProcessHandle.kill` (the toolkit must, before it closes).

    Raises:
        SandboxUnavailable: the policy is required and cannot be enforced here.
        FileNotFoundError: the command does not exist.
    """
    wrapped = _prepare(argv, cwd=cwd, env=env, sandbox=sandbox, workspace=workspace)
    try:
        proc = await _spawn(wrapped, cwd=cwd, stdin=False, merge_stderr=True)
    except OSError:
        _cleanup(wrapped)
        raise
    ring = _Ring(max_buffer)
    return ProcessHandle(
        argv=tuple(argv),
        pid=proc.pid,
        mechanism=wrapped.mechanism,
        unconfined=wrapped.unconfined,
        started=time.monotonic(),
        _proc=proc,
        _ring=ring,
        _wrapped=wrapped,
        _pump=asyncio.ensure_future(_pump(proc.stdout, ring)),
    )
