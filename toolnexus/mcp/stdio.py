"""The stdio transport for MCP servers: the SDK's, with a reader that cannot jam or be flooded.

The SDK's `stdio_client` decodes stdout strictly (one invalid UTF-8 byte kills its reader, and
every later call of that server waits out its timeout), hands an unparseable line to the session
as a value the session merely logs (the request it answered then waits forever), and splits
lines by concatenating and re-splitting its whole buffer on every chunk (a 20 MB answer took 7 s
of loop-thread CPU, quadratic in its size). This transport mirrors the SDK's process handling (a
session of its own, the spec's shutdown: close stdin, wait, SIGTERM the group, SIGKILL; written
here rather than imported, since those helpers are private to `mcp.client.stdio` and may change
in any 2.x release) and replaces the reader:

- lines are found in linear time and decoded leniently (`errors="replace"`);
- a line longer than `max_message` is never buffered: the request it answers (its id is read
  from the line's start) fails at once with `MESSAGE_TOO_LARGE`, and the rest of the line is
  skipped; a too-long line whose id cannot be read breaks the stream, as garbage does;
- a line that is not JSON-RPC means the stream can no longer be trusted (it may have been the
  answer to a call): the transport reports it through `on_broken` and ends the read stream, so
  calls in flight fail at once and the server is restarted like one that crashed.

Starting the process (`started_process`) is separate from the transport and imports nothing of
the SDK, so a server is started *before* the SDK is imported: `import mcp` takes most of a
second, and a Python server spends about as long importing it too; the two overlap. A
Landlock-sandboxed server is forked by the toolkit's resident launcher when it has one
(`forked`), which saves an interpreter start-up and puts the server under the reaper.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.to_thread
from anyio.abc import Process

from .forked import ForkedServer, fork_server

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

    from ..runtime.resident import Launchers, ResidentPlan

ServerProcess = Process | ForkedServer
"""A server started the per-call way (the toolkit's child) or forked by a resident launcher."""

__all__ = [
    "MESSAGE_TOO_LARGE",
    "ServerProcess",
    "bounded_stdio_client",
    "default_environment",
    "started_process",
]

MESSAGE_TOO_LARGE = -32050
"""JSON-RPC error code (implementation-defined range) of an answer refused for its size."""

_GRACE = 2.0
"""Seconds the server gets to exit once its stdin is closed, then again after SIGTERM."""
_FLUSH = 0.5
"""Seconds the writer gets to pass on messages already accepted, at shutdown."""
_QUOTE = 120
"""Characters of a bad line quoted in the reason."""
_OFF_LOOP = 1 << 20
"""Lines longer than this (bytes) are decoded and parsed in a worker thread: parsing a 40 MB
answer takes a fifth of a second, which other calls on the event loop would otherwise wait."""
_ID_AT_START = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.){0,200}")'
)
"""A message's id, read from its start: only where the SDK (and every server seen) puts it, the
first key or the one after `"jsonrpc"`, so an `"id"` nested in the result can never match."""
_INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""The variables the SDK's `get_default_environment` passes on (POSIX)."""


def default_environment() -> dict[str, str]:
    """The SDK's safe default environment for a server (`mcp.client.stdio.
    get_default_environment`: `_INHERITED`, minus exported shell functions), without
    importing the SDK."""
    return {
        key: value
        for key in _INHERITED
        if (value := os.environ.get(key)) is not None and not value.startswith("()")
    }


@asynccontextmanager
async def started_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
    errlog: TextIO,
    resident: tuple[Launchers, ResidentPlan] | None = None,
) -> AsyncIterator[ServerProcess]:
    """Start a server process and yield it; on leaving, a process still running gets the
    spec's shutdown (`bounded_stdio_client` normally gave it already).

    Args:
        argv: the command and its arguments.
        env: merged over `default_environment()`.
        cwd: the working directory (None: this process's).
        errlog: where the server's stderr goes.
        resident: the toolkit's launchers and the key of the one to fork the server from
            (`forked.resident_plan_for`); it is started the per-call way when none can.

    Raises:
        OSError: the command cannot be started (FileNotFoundError when it does not exist).
    """
    full_env = default_environment() | dict(env)
    process: ServerProcess | None = None
    if resident is not None:
        process = await fork_server(
            *resident,
            argv,
            # The wrapped environment is complete: the spawner's defaults it lacks are what a
            # per-call sandbox drops (the Landlock launcher's `unset`, bwrap's --unsetenv).
            env=dict(env),
            cwd=os.fspath(cwd) if cwd is not None else os.getcwd(),
            errlog=errlog.fileno(),
            grace=_GRACE,
        )
    if process is None:
        process = await anyio.open_process(
            list(argv),
            env=full_env,
            stderr=errlog,
            cwd=cwd,
            start_new_session=True,  # one process group: the shutdown reaches its children
        )
    try:
        if isinstance(process, ForkedServer):
            await process.first_report()
        yield process
    finally:
        if process.returncode is None:
            with anyio.CancelScope(shield=True):
                await _stop(process)
        if isinstance(process, ForkedServer):
            process.close()


@asynccontextmanager
async def bounded_stdio_client(
    process: ServerProcess,
    *,
    max_message: int,
    on_broken: Callable[[str], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """Yield `(read_stream, write_stream)` for `mcp.Client`, over a started server process
    (see `started_process`); on leaving, the server is shut down.

    Args:
        process: the server, with piped stdin and stdout.
        max_message: the longest line (in bytes) read from the server.
        on_broken: called with a reason when the server writes something that is not
            JSON-RPC; the read stream ends right after.
    """
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    def parse(line: bytes) -> SessionMessage | str:
        text = line.decode("utf-8", "replace")
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
        except ValueError:
            return f"it wrote a line that is not JSON-RPC: {_quote(text)}"

    def too_large(head: bytes) -> SessionMessage | str:
        found = _ID_AT_START.match(head)
        if found is None:
            return (
                f"it wrote a message larger than max_message ({max_message:,} bytes) whose "
                "request id is not at its start"
            )
        raw = found.group(1).decode("utf-8", "replace")
        request_id: int | str = int(raw) if raw[0] != '"' else raw[1:-1]
        error = types.ErrorData(
            code=MESSAGE_TOO_LARGE,
            message=f"the answer is larger than max_message ({max_message:,} bytes)",
        )
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))

    async def deliver(item: SessionMessage | str) -> bool:
        """Pass a message on; False when reading must stop (broken stream, session gone)."""
        if isinstance(item, str):
            on_broken(item)
            return False
        try:
            await read_writer.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    whole_line_max = min(max_message, _OFF_LOOP)

    async def read_lines() -> None:
        assert process.stdout is not None
        pending = bytearray()  # the current line; `+=` on a bytearray is amortised linear
        skipping = False  # inside a line already refused for its size
        async for chunk in process.stdout:
            start = 0
            while start <= len(chunk):
                end = chunk.find(b"\n", start)
                if 0 <= end - start <= whole_line_max and not pending and not skipping:
                    # A whole line within this chunk (most messages): parsed from the chunk,
                    # without going through `pending`.
                    line = chunk[start:end]
                    if line and not line.isspace() and not await deliver(parse(line)):
                        return
                    start = end + 1
                    continue
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if not skipping:
                    pending += piece
                    if len(pending) > max_message:
                        skipping = True
                        if not await deliver(too_large(bytes(pending[:512]))):
                            return
                        pending.clear()
                if end < 0:
                    break
                line_done = skipping or not pending or pending.isspace()
                skipping = False
                if not line_done:
                    line = bytes(pending)
                    if len(line) > _OFF_LOOP:
                        parsed = await anyio.to_thread.run_sync(parse, line)
                    else:
                        parsed = parse(line)
                    if not await deliver(parsed):
                        return
                pending.clear()
                start = end + 1

    async def reader() -> None:
        try:
            async with read_writer:
                await read_lines()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
            pass  # the pipe went away under the read (our shutdown, or the server's death)
        finally:
            await _drain(process)

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading (it may still run): end the read side too, so the
            # session sees the connection end instead of a request waiting forever.
            await read_writer.aclose()
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            # Bounded throughout, and shielded: a cancelled caller must not leak the process.
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(_FLUSH):
                    await writer_done.wait()
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            tg.cancel_scope.cancel()


def _quote(text: str) -> str:
    text = text.strip()
    shown = text[:_QUOTE] + ("..." if len(text) > _QUOTE else "")
    return repr(shown)


async def _drain(process: ServerProcess) -> None:
    """Read and drop what the server still writes, so one blocked on a full pipe can exit."""
    assert process.stdout is not None
    with (
        anyio.CancelScope(shield=True),
        suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError),
    ):
        while True:
            await process.stdout.receive()


async def _stop(process: ServerProcess) -> None:
    """The spec's shutdown: close stdin, wait; SIGTERM the process group, wait; SIGKILL (a
    forked server's reaper kills its whole tree, escapees included)."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, _GRACE):
        if isinstance(process, ForkedServer):
            await process.terminate_tree(_GRACE)
        else:
            await terminate_posix_process_tree(process, _GRACE)
        await _exited(process, _GRACE)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    # A descendant holding a pipe end would keep asyncio's transport open (and warning at GC).
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


async def _exited(process: ServerProcess, timeout: float) -> bool:
    """Whether the process exited within `timeout`, by polling: `wait()` also waits for the
    pipes to close, which a child that inherited them can hold open forever."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False
