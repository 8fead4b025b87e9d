"""Resident launchers: the toolkit's side of `reaper.resident`.

Starting a fresh `python -I -S` reaper for every command costs an interpreter start-up and the
import of the reaper and the sandbox launcher, several times what the command itself costs for
`true` (issue 21). A resident launcher is one such interpreter, started on first use, that has
imported that code once and forks per command (in advance: a spare fork waits for the next
request); the fork becomes the command's reaper, so the reaper's guarantees (subreaper,
parent-death signal, whole-tree kill, kill grace, leftovers stopped and counted) are the same
code as before, only without the start-up.

- A `Launchers` belongs to one toolkit (it is closed with it) and holds one resident launcher
  per sandbox policy: never shared between toolkits, nor across policies. Under bwrap the
  launcher runs inside one bwrap per policy and exact set of binds (`sandbox.ResidentBwrap`),
  and its forks give each command the namespaces a bwrap per call gave it (`freshns.py`).
- A launcher that died is started again, and the call that found it dead retries once; a call
  that still cannot use one runs the per-call way (`ProcessResult.launch` says which ran).
- Each launcher dies with the toolkit's process (`PR_SET_PDEATHSIG`), and its forks with it, so
  no command outlives the toolkit; it is also closed at interpreter exit.
- A launcher is started on one keeper thread that lives as long as the process (its
  parent-death signal follows the thread that started it, not the process), and
  `Launchers.prepare` waits for that without holding the toolkit's event loop; the exchange
  per command (a request, then a pid and a pidfd back) is synchronous: the fork answers in
  well under a millisecond, less than handing it to a thread would cost.
"""

from __future__ import annotations

import array
import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import functools
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from . import launcher as _lx
from . import reaper
from .sandbox import SandboxPolicy, WrappedCommand

__all__ = ["Launchers", "ResidentPlan", "current_launchers", "resident_plan", "unavailable"]

current_launchers: contextvars.ContextVar[Launchers | None] = contextvars.ContextVar(
    "toolnexus_launchers", default=None
)
"""The launchers of the toolkit whose call is running (set by `Toolkit` around each call);
`run_process` and `start_process` use them, and start a fresh reaper per command without."""

_BOOT = (
    "import sys; sys.path.append(sys.argv.pop(1)); from reaper import resident; "
    "sys.exit(resident(sys.argv))"
)
# The first request waits for the launcher's start-up (an interpreter and two imports); a
# launcher that does not answer within this many seconds is taken for dead.
_ANSWER_TIMEOUT = 10.0


@functools.cache
def unavailable() -> str | None:
    """Why resident launchers cannot run here (None: they can): the toolkit waits for a fork
    that is not its child through a pidfd (Linux 5.3)."""
    if not hasattr(os, "pidfd_open"):
        return "no os.pidfd_open on this platform: every command starts its own reaper"
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError as exc:
        return (
            f"pidfd_open: {exc.strerror} (Linux 5.3 or later): every command starts its own reaper"
        )
    return None


@dataclass(frozen=True)
class ResidentPlan:
    """How a wrapped command runs on a resident launcher: the arguments of `Launchers.prepare`
    and `Launchers.launch` besides the command's streams and environment."""

    key: str
    """The launcher it uses: one per mechanism and exact policy (under bwrap, and exact set of
    binds: `ResidentBwrap.key`)."""
    argv: tuple[str, ...]
    """What the launcher's fork runs (under bwrap, what runs inside it)."""
    cwd: str
    wrapper: tuple[str, ...]
    """The resident bwrap's command line (empty without bwrap)."""
    mode: Mapping[str, object]
    """What the launcher prepares before each request (see `Launchers.launch`)."""


def resident_plan(
    wrapped: WrappedCommand, policy: SandboxPolicy | None, *, cwd: Path
) -> ResidentPlan | None:
    """The plan for `wrapped` (made by `sandbox.wrap_command` for `policy`, or unwrapped),
    or None when it must run the per-call way (a bwrap command without a resident form)."""
    if wrapped.mechanism == "bwrap":
        inside = wrapped.resident
        if inside is None:
            return None
        config = _launcher_config(inside.inner, wrapped)
        return ResidentPlan(
            key=f"bwrap {policy!r} {inside.key}",
            argv=inside.inner,
            cwd=inside.cwd,
            wrapper=inside.wrapper,
            mode={"fresh": dict(inside.fresh)} | ({"config": config} if config else {}),
        )
    if wrapped.mechanism != "landlock":
        return ResidentPlan(
            key=f"{wrapped.mechanism} {policy!r}", argv=wrapped.argv, cwd=str(cwd), wrapper=(),
            mode={},
        )  # fmt: skip
    config = _launcher_config(wrapped.argv, wrapped)
    return ResidentPlan(
        key=f"landlock {policy!r}",
        argv=wrapped.argv,
        cwd=str(cwd),
        wrapper=(),
        mode={"launcher": True} | ({"config": config} if config else {}),
    )


def _launcher_config(argv: Sequence[str], wrapped: WrappedCommand) -> str | None:
    """The sandbox launcher's configuration in `argv` (`python -I -S launcher.py CONFIG --
    ...`) when the next calls of the policy will likely have the same: the launcher's forks
    then confine the command's process with it before the request comes
    (`reaper._await_command`; a request with another configuration runs the usual way).
    None when the call made folders of its own (they are in the configuration) or the
    configuration is in a file (`@PATH`)."""
    if wrapped.cleanup:
        return None
    if len(argv) > 5 and argv[3] == _lx.__file__ and argv[5] == "--" and argv[4][:1] == "{":
        return argv[4]
    return None


class _Dead(Exception):
    """The resident launcher did not answer: start it again."""


class LaunchPipes:
    """The pipes between the loop and a command a resident launcher is about to fork.

    They are connected to the loop before the fork, so that nothing is awaited between the
    fork and the object that owns it (a cancellation there would leave the command running).
    `settle` then closes the launcher's ends, which its fork holds by now, and, if the fork
    did not happen, the loop's ends too: nothing leaks whichever way the launch went.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._theirs: list[int] = []
        self.transports: list[asyncio.BaseTransport] = []
        """The loop's transports, in the order the pipes were made."""

    async def writer(self) -> tuple[asyncio.StreamWriter, int]:
        """A pipe the loop writes to: its writer and the command's read end."""
        read, write = os.pipe()
        self._theirs.append(read)
        transport, protocol = await self._loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
            os.fdopen(write, "wb", buffering=0),
        )
        self.transports.append(transport)
        return asyncio.StreamWriter(transport, protocol, None, self._loop), read

    async def reader(self, limit: int) -> tuple[asyncio.StreamReader, int]:
        """A pipe the loop reads from (`limit` bytes buffered at most): its reader and the
        command's write end."""
        read, write = os.pipe()
        self._theirs.append(write)
        stream = asyncio.StreamReader(limit=limit, loop=self._loop)
        transport, _ = await self._loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read, "rb", buffering=0)
        )
        self.transports.append(transport)
        return stream, write

    def settle(self, *, launched: bool) -> None:
        """Close the command's ends; the loop's too when nothing was `launched`."""
        for fd in self._theirs:
            os.close(fd)
        self._theirs.clear()
        if not launched:
            for transport in self.transports:
                transport.close()


class PidfdWatch:
    """The end of a command a resident launcher forked, watched on the loop through its pidfd:
    it is not the toolkit's child, so no SIGCHLD or waitpid tells of it."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, pidfd: int, on_exit: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._pidfd: int | None = pidfd
        loop.add_reader(pidfd, on_exit)

    def send(self, sig: int) -> None:
        """Signal the process through its pidfd: no pid reuse race, and it works on a process
        inside a resident bwrap's pid namespace as well. Nothing once closed."""
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def close(self) -> None:
        """Stop watching and close the pidfd (again: nothing)."""
        if self._pidfd is not None:
            with contextlib.suppress(ValueError, RuntimeError):  # the loop is closed
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None


@dataclass(frozen=True)
class Launched:
    """A command forked by a resident launcher: its reaper's pid and a pidfd to wait on."""

    pid: int
    pidfd: int


class _Resident:
    """One resident launcher process and the socket to it; `wrapper` (a resident bwrap's
    command line) runs it inside the policy's sandbox."""

    def __init__(
        self, wrapper: Sequence[str] = (), mode: Mapping[str, object] | None = None
    ) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        folder = os.path.dirname(reaper.__file__)
        try:
            self.proc = subprocess.Popen(
                [
                    *wrapper,
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    _BOOT,
                    folder,
                    str(theirs.fileno()),
                    # Inside bwrap the toolkit's pid means nothing: bwrap's --die-with-parent
                    # watches it instead.
                    "0" if wrapper else str(os.getpid()),
                    json.dumps(dict(mode or {})),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # a terminal's Ctrl-C is the toolkit's to handle
                cwd="/",
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock.settimeout(_ANSWER_TIMEOUT)
        self.ready = False

    def wait_ready(self) -> None:
        """Wait for the launcher's start-up (an interpreter, its imports; under bwrap, bwrap's
        set-up too): it says `ready` once it listens.

        Raises:
            _Dead: it exited or did not answer in time.
        """
        if self.ready:
            return
        try:
            answer = self.sock.recv(16)
        except OSError as exc:
            raise _Dead from exc
        if answer != b"ready":
            raise _Dead
        self.ready = True

    def launch(self, request: bytes, fds: Sequence[int]) -> Launched | None:
        """Fork a command; None when the launcher cannot fork (say, out of processes).

        Raises:
            _Dead: the launcher is gone or does not answer.
        """
        self.wait_ready()
        rights = array.array("i", fds).tobytes()
        try:
            self.sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
            answer, ancdata, _, _ = self.sock.recvmsg(256, socket.CMSG_SPACE(4))
        except OSError as exc:  # EPIPE, ECONNRESET, a timeout
            raise _Dead from exc
        pidfds = array.array("i")
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                pidfds.frombytes(payload[: len(payload) - len(payload) % pidfds.itemsize])
        if not answer:
            raise _Dead
        word = answer.decode().partition(" ")[0]
        if word != "pid" or len(pidfds) != 1:
            for fd in pidfds:
                os.close(fd)
            return None
        return Launched(pid=_pid_of(pidfds[0]), pidfd=pidfds[0])

    def kill(self) -> None:
        self.proc.kill()
        self.close()

    def close(self) -> None:
        """Close the socket (the launcher exits at its end, and its forks with it: their
        parent-death signal stops every command still running) and reap the launcher."""
        self.sock.close()
        try:
            self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _pid_of(pidfd: int) -> int:
    """The process's pid as the toolkit sees it (inside a resident bwrap's pid namespace it has
    another): from the pidfd's fdinfo; 0 when it was reaped already (nothing left to signal)."""
    with open(f"/proc/self/fdinfo/{pidfd}", "rb") as info:
        for line in info:
            if line.startswith(b"Pid:"):
                return max(int(line.split()[1]), 0)
    return 0


_MAX_RESIDENTS = 8
"""Resident launchers per toolkit at most: under bwrap there is one per exact set of binds
(the working folder, a program, a new denied file can change them); past this many, a new set
of binds runs the per-call way."""


class Launchers:
    """A toolkit's resident launchers, one per sandbox policy, started on first use."""

    def __init__(self) -> None:
        self._by_policy: dict[str, _Resident] = {}
        self._broken: set[str] = set()
        """Policies whose launcher died twice in a row: they run the per-call way from then on
        (a bwrap that cannot start one would otherwise be tried on every call)."""
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        _open.add(self)

    @property
    def running(self) -> int:
        """How many resident launchers are running now."""
        return len(self._by_policy)

    def launch(
        self,
        policy: str,
        *,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        grace: float,
        stdin: int | None,
        stdout: int,
        stderr: int | None,
        status: int,
        wrapper: Sequence[str] = (),
        mode: Mapping[str, object] | None = None,
    ) -> Launched | None:
        """Fork `argv` under its reaper in the launcher for `policy` (a key naming the sandbox
        policy exactly); None when no resident launcher can run it (closed, forked toolkit,
        a request too large, a launcher that died twice, too many): the caller runs it the
        per-call way.

        `stderr` None merges it into `stdout`; `stdin` None reads /dev/null. `wrapper` starts
        the launcher inside a resident bwrap (`policy` must then name its binds too). `mode`
        says what the launcher prepares before each request (`reaper._spare`): the command's
        process for the Landlock launcher (`{"launcher": true}`), and in a resident bwrap its
        namespaces too (`{"fresh": ...}`, `freshns.enter`); both are fixed per `policy`."""
        if self._closed or os.getpid() != self._pid or unavailable():
            return None  # a forked toolkit must not talk to its parent's launchers
        fields = {"argv": list(argv), "env": dict(env), "cwd": cwd, "grace": grace}
        fields |= {"stdin": stdin is not None, "merge": stderr is None}
        request = json.dumps(fields, separators=(",", ":")).encode()
        if len(request) > reaper.REQUEST_MAX:
            return None
        fds = [fd for fd in (stdin, stdout, stderr) if fd is not None] + [status]
        with self._lock:
            for attempt in (1, 2):
                if self._closed:
                    return None
                resident = self._by_policy.get(policy)
                if resident is not None and resident.proc.poll() is not None:
                    # Its process is gone (under bwrap, the forks inside may answer a moment
                    # longer, then die with the namespace): start a new one now.
                    del self._by_policy[policy]
                    resident.kill()
                    resident = None
                if policy in self._broken or (
                    resident is None and len(self._by_policy) >= _MAX_RESIDENTS
                ):
                    return None
                try:
                    if resident is None:
                        resident = _on_keeper(functools.partial(_Resident, wrapper, mode))
                        self._by_policy[policy] = resident
                    return resident.launch(request, fds)
                except _Dead:
                    # Found dead (or hung): start a new one, and retry this call once.
                    del self._by_policy[policy]
                    resident.kill()  # pyright: ignore[reportOptionalMemberAccess]
                    if attempt == 2:
                        self._broken.add(policy)
                        return None
                except OSError:
                    return None  # cannot start an interpreter: the per-call way says why
        return None

    async def prepare(
        self,
        policy: str,
        *,
        wrapper: Sequence[str] = (),
        mode: Mapping[str, object] | None = None,
    ) -> None:
        """Start the launcher for `policy` if none runs, in a thread: its start-up (tens of
        milliseconds, more under bwrap) must not hold the toolkit's event loop, whose other
        tasks go on meanwhile. `launch` then finds it ready; a start that fails here is left
        to `launch`, which retries and falls back to the per-call way."""
        with self._lock:
            if (
                self._closed
                or policy in self._by_policy
                or policy in self._broken
                or os.getpid() != self._pid
                or unavailable()
            ):
                return
        try:
            resident = await asyncio.wrap_future(
                _keeper().submit(functools.partial(_started, wrapper, mode))
            )
        except (OSError, _Dead):
            return
        with self._lock:
            if self._closed or policy in self._by_policy:
                resident.kill()  # closed meanwhile, or another call started one first
                return
            self._by_policy[policy] = resident

    def close(self) -> None:
        """Stop every launcher (and what its forks still run). Safe to call twice."""
        with self._lock:
            self._closed = True
            residents = list(self._by_policy.values())
            self._by_policy.clear()
        if os.getpid() != self._pid:
            return
        for resident in residents:
            resident.close()
        _open.discard(self)


_T = TypeVar("_T")


class _Keeper:
    """The one thread every launcher of this process is started from.

    A launcher's parent-death signal fires when the *thread* that started it ends, not the
    process (prctl(2), PR_SET_PDEATHSIG). Started from a loop's executor thread, a launcher
    would die, with every command and server it forked, when that loop's executor shuts down
    (the end of `asyncio.run`) or when an idle pool thread retires (anyio's do after seconds).
    This daemon thread ends only with the process, as the launcher should.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], object], concurrent.futures.Future[object]]
        ] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="toolnexus-launchers", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            job, future = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(job())
                except BaseException as exc:  # noqa: BLE001 - handed to the waiter, which raises it
                    future.set_exception(exc)

    def submit(self, job: Callable[[], _T]) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        self._jobs.put((job, future))  # pyright: ignore[reportArgumentType]
        return future


_keeper_lock = threading.Lock()
_keepers: dict[int, _Keeper] = {}
"""The keeper by process id: a forked child has no thread of its parent's, and starts its own."""


def _keeper() -> _Keeper:
    """This process's keeper thread."""
    with _keeper_lock:
        keeper = _keepers.get(os.getpid())
        if keeper is None:
            _keepers.clear()
            keeper = _keepers[os.getpid()] = _Keeper()
        return keeper


def _on_keeper(job: Callable[[], _T]) -> _T:
    """Run `job` on the keeper thread and wait for it (directly when already there)."""
    keeper = _keeper()
    if threading.current_thread() is keeper.thread:
        return job()
    return keeper.submit(job).result()


def _started(wrapper: Sequence[str], mode: Mapping[str, object] | None) -> _Resident:
    """A new launcher, once ready (run on the keeper thread by `Launchers.prepare`)."""
    resident = _Resident(wrapper, mode)
    try:
        resident.wait_ready()
    except BaseException:
        resident.kill()
        raise
    return resident


_open: weakref.WeakSet[Launchers] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for launchers in list(_open):
        launchers.close()
