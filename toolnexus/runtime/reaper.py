"""The process reaper: `main([_, STATUS_FD, PARENT, GRACE, "--", *argv])`, in a `python -I -S`
child of the toolkit (`process._reaper_argv`).

A process group kill misses a child that called `setsid` (or a double fork that did): it leaves
the group and, orphaned, is re-parented to init, out of the toolkit's reach. This launcher sits
between the toolkit and the command to close that gap where no pid namespace (bwrap) does:

- it makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every orphan of the command's
  tree, escaped from the group or not, is re-parented to it instead of to init;
- it spawns the command and, once the command has exited, stops whatever it left running
  (SIGTERM, GRACE seconds, then SIGKILL) before it exits itself, so the call answers as soon as
  the command is done and no background child outlives it;
- asked to stop (SIGTERM: forwarded to every descendant; SIGUSR1: SIGKILL them all now), or when
  its parent dies (`PR_SET_PDEATHSIG`), it kills the whole tree and reaps it.

Its own stdin, stdout and stderr go to /dev/null once the command started, so that the pipes
reach end-of-file when the command's tree is gone. It reports on STATUS_FD, one line each:
`started PID`, or `error CODE MESSAGE` when the command cannot be started; then at the end
`exit STATUS STOPPED SIGNAL`: the command's exit status (`-N` for signal N), how many other
processes were still running and were stopped, and the signal that ended the command when it
was asked to stop (0 if the command ended by itself).

Imported by a `python -I -S -c` bootstrap (so that its cached bytecode is used), it imports
only the standard library and stays small: its start-up is paid on every call (see
`benchmarks/run.py`, section `process`). For that reason it uses the C modules `_signal` and
`_ctypes` directly: the `signal` package builds enums and `ctypes` defines every C type,
together some 10 ms of start-up for a few constants and one function (`prctl`).
"""

from __future__ import annotations

import _ctypes
import _signal as signal  # pyright: ignore[reportMissingImports] (no stub: `signal` re-exports it)
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__: list[str] = []

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_CONTROL = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
_STOP = frozenset(_CONTROL) - {signal.SIGCHLD}
_WAITED = (*_CONTROL, signal.SIGIO)
"""What the reaper waits for: SIGIO says a prepared process told the command's status."""
# A process in uninterruptible sleep cannot die even of SIGKILL: past this many seconds of
# killing, the reaper gives up on it (and says so) instead of hanging the call.
GIVE_UP = 10.0
_RESCAN = 0.1


def descendants(root: int | None = None) -> set[int]:
    """Every live (not zombie) descendant of `root` (default: this process), read from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found: set[int] = set()
    todo = [os.getpid() if root is None else root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def _kill_each(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:  # noqa: SIM105 (contextlib costs ~5 ms of start-up, paid on every call)
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def signal_all(pids: set[int], sig: int) -> None:
    """Send `sig` to every process in `pids`, as if at once.

    Signals land one process at a time: a shell whose child got its SIGTERM a moment before
    its own would report "Terminated" into the call's output. So the processes are stopped
    first and continued once every signal is pending (a pending SIGTERM acts before a
    continued process runs a single instruction of its own; SIGKILL acts on the stopped)."""
    _kill_each(pids, signal.SIGSTOP)
    _kill_each(pids, sig)
    _kill_each(pids, signal.SIGCONT)


class _Tree:
    """The command and everything re-parented to this reaper."""

    def __init__(self, main: int) -> None:
        self.main = main
        self.status: int | None = None
        self.signalled: set[int] = set()
        """Processes other than the command that were sent a signal to stop them."""

    def reap(self) -> bool:
        """Reap every child that ended; True while children remain."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.main:
                self.status = os.waitstatus_to_exitcode(status)

    def send(self, sig: int, *, skip: set[int] | frozenset[int] = frozenset()) -> set[int]:
        """Send `sig` to every descendant not in `skip`; return the descendants found."""
        pids = descendants()
        self.signalled |= pids - {self.main}
        signal_all(pids - skip, sig)
        return pids

    def stop(self, grace: float | None) -> int:
        """SIGTERM the tree and wait `grace` seconds (None: until SIGUSR1) for it to end, then
        SIGKILL what is left; return the signal that ended the command (0: it had ended).

        Processes that appear meanwhile get their SIGTERM too (looked for at each child's end
        and every `_RESCAN` seconds): a shell SIGTERMed in the middle of a vfork leaves the
        new child behind, which must not wait for the grace to end."""
        ended_by = 0 if self.status is not None else signal.SIGTERM
        termed = self.send(signal.SIGTERM)
        deadline = None if grace is None else time.monotonic() + grace
        while self.reap():
            wait = _RESCAN if deadline is None else min(_RESCAN, deadline - time.monotonic())
            if wait <= 0:
                break
            got = signal.sigtimedwait(_CONTROL, wait)
            if got is not None and got.si_signo == signal.SIGUSR1:
                break
            termed |= self.send(signal.SIGTERM, skip=termed)
        if self.status is None:
            ended_by = signal.SIGKILL
        self.kill()
        return ended_by

    def kill(self) -> None:
        """SIGKILL every descendant, round after round (orphans of the killed are re-parented
        here), until none is left."""
        give_up = time.monotonic() + GIVE_UP
        while self.reap() and time.monotonic() < give_up:
            self.send(signal.SIGKILL)
            signal.sigtimedwait([signal.SIGCHLD], 0.05)


class _CInt(_ctypes._SimpleCData):
    _type_ = "i"


class _CFunction(_ctypes.CFuncPtr):
    _flags_ = _ctypes.FUNCFLAG_CDECL
    _restype_ = _CInt


def _prctl(option: int, value: int) -> None:
    # dlopen(NULL): the program itself, where libc's symbols are found whichever libc it is.
    libc = _ctypes.dlopen(None)  # pyright: ignore[reportArgumentType]
    _CFunction(_ctypes.dlsym(libc, "prctl"))(option, value, 0, 0, 0)


_RESET = (signal.SIGPIPE, signal.SIGXFSZ, *_CONTROL)
"""Signals the command gets with their default action (Python ignores SIGPIPE and SIGXFSZ)."""
_SANDBOX_LAUNCHER = os.path.join(os.path.dirname(__file__), "launcher.py")


def _spawn(command: list[str], fresh: dict[str, object] | None = None) -> int:
    """Start the command with default signal actions and an empty signal mask.

    The Landlock launcher (`python -I -S launcher.py CONFIG -- argv`) is not started as a
    second interpreter: a fork of this one runs it (it confines itself, then execs the command),
    which saves an interpreter start-up per call. In a resident bwrap (`fresh`), the child is
    pid 1 of the command's own namespaces (`freshns.enter`), and, as bwrap's own init would,
    it runs the command as its child and reaps orphans, unless the launcher is pid 1 itself
    (bwrap's `--as-pid-1`, with the network off).
    """
    launcher = command[:4] == [sys.executable, "-I", "-S", _SANDBOX_LAUNCHER]
    if not launcher and fresh is None:
        return os.posix_spawnp(command[0], command, os.environ, setsigmask=(), setsigdef=_RESET)
    pid = os.fork()
    if pid == 0:
        try:
            for sig in _RESET:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, ())
            if fresh is not None:
                import freshns

                freshns.enter(fresh)
                os.chdir(str(fresh["cwd"]))  # through the new mounts
                if fresh["init"]:
                    os._exit(_init(command, launcher))
            os._exit(_become(command, launcher))
        except BaseException as exc:  # noqa: BLE001 (the child must never return into the reaper)
            os.write(2, f"toolnexus sandbox: cannot start the command: {exc}\n".encode())
        os._exit(126)
    return pid


def _become(command: list[str], launcher: bool) -> int:
    """Run the launcher in this process, or exec the command (returns only on failure)."""
    import launcher as sandbox_launcher  # loaded by a resident launcher already

    if launcher:
        return sandbox_launcher.main(command[3:])
    try:
        sandbox_launcher.execvpe(command)
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        os.write(2, f"bwrap: execvp {command[0]}: {exc.strerror or exc}\n".encode())
        return code


def _init(command: list[str], launcher: bool) -> int:
    """pid 1 of a command's namespace: run it as pid 2, reap what is orphaned, and exit as
    bwrap does (the command's code, 128 + N for signal N); the kernel then kills the rest."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(_become(command, launcher))
        except BaseException:  # noqa: BLE001
            os._exit(126)
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 126
        if got == pid:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


def _report(fd: int, line: str) -> None:
    try:  # noqa: SIM105 (as above)
        os.write(fd, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass  # nobody listens any more: the reaper still does its job


def main(argv: list[str]) -> int:
    if len(argv) < 6 or argv[4] != "--":
        print("usage: reaper.py STATUS_FD PARENT GRACE -- command [args...]", file=sys.stderr)
        return 2
    return run(int(argv[1]), int(argv[2]), float(argv[3]), argv[5:])


def run(
    fd: int,
    parent: int,
    grace: float,
    command: list[str],
    *,
    fresh: dict[str, object] | None = None,
    prepared: _Prepared | None = None,
    env: dict[str, str] | None = None,
    on_started: Callable[[], object] | None = None,
) -> int:
    """Be the command's reaper (see the module's docstring); return this process's exit code.

    `parent` is the process whose death ends the command: the toolkit for a fresh reaper, the
    resident launcher for a forked one (which itself dies with the toolkit). `fresh`: in a
    resident bwrap, what the command's own namespaces hold (`freshns`). `prepared`: the
    command's process, forked (and under bwrap set up) before the request came, which gets
    `env` (this process's environment when None). `on_started` runs once the command runs and
    `started` was reported (a resident launcher's fork answers the toolkit then: see
    `_spare`)."""
    os.set_inheritable(fd, False)
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would auto-reap
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1)
    if os.getppid() != parent:
        return 125  # the toolkit died before the command started: start nothing
    try:
        if prepared is not None:
            pid = prepared.start(command, dict(os.environ) if env is None else env)
        else:
            if fresh is not None:
                import freshns

                freshns.new_pid_namespace()
            pid = _spawn(command, fresh)
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        _report(fd, f"error {code} cannot run {command[0]!r}: {exc.strerror or exc}")
        return code
    if fresh is not None and not (prepared is not None and prepared.dropped):
        try:
            import freshns

            freshns.drop_capabilities()
        except OSError as exc:
            _Tree(pid).kill()
            _report(fd, f"error 126 cannot drop the reaper's capabilities: {exc}")
            return 126
    _report(fd, f"started {pid}")
    if on_started is not None:
        on_started()
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)
    os.close(null)
    tree = _Tree(pid)
    ended_by = 0
    told = False
    while tree.status is None:
        got = signal.sigwaitinfo(_WAITED)
        if got.si_signo == signal.SIGIO:
            if prepared is not None and (code := prepared.told()) is not None:
                tree.status, told = code, True
            continue
        if got.si_signo == signal.SIGUSR1:
            ended_by = signal.SIGKILL
            break
        if got.si_signo in _STOP:
            ended_by = tree.stop(None)
            break
        tree.reap()
    if ended_by == signal.SIGKILL:
        tree.kill()
    elif told:
        pass  # nothing of the command's is left; its prepared process is ending (see below)
    elif tree.reap():
        tree.stop(grace)  # the command exited and left processes running
    status = tree.status if tree.status is not None else -signal.SIGKILL
    _report(fd, f"exit {status} {len(tree.signalled)} {ended_by}")
    if told:
        os.waitpid(pid, 0)  # reaped here, not left to whoever adopts it
    return status if status >= 0 else 128 - status


# --- the resident launcher ------------------------------------------------------------------
# `resident([_, SOCKET_FD, PARENT])`, in a `python -I -S` child of the toolkit started once per
# toolkit and policy (`resident.py` is the toolkit's side; under bwrap, inside a resident bwrap,
# PARENT 0); it says `ready` once it listens. It has imported this module and the sandbox
# launcher once, and always keeps one fork of itself waiting for the next request (`_spare`):
# that fork reads it, answers, and becomes the command's reaper exactly as a fresh
# `python -I -S reaper` would (`run`), without an interpreter start-up and without a fork on
# the call's path; the launcher then makes the next spare.
#
# A request is one SOCK_SEQPACKET message: JSON {"argv", "env", "cwd", "grace", "stdin",
# "merge", and under bwrap "fresh" (`freshns.enter`)} with, as SCM_RIGHTS, the command's stdin
# (when "stdin" is true), stdout, stderr (unless "merge") and the status pipe. The answer is
# `pid N` with a pidfd of the fork (so the toolkit waits for a process that is not its child,
# without a pid-reuse race: the fork answers before it can end), or `error MESSAGE`.

SPARE_AFTER = 0.05
"""Seconds a running command delays the making of the next spare at most (see `resident`)."""
REQUEST_MAX = 150_000
"""Bytes of one request at most (a larger one, say a huge environment, runs the per-call way):
well under the socket buffer, which bounds a SOCK_SEQPACKET message."""


def resident(argv: list[str]) -> int:
    import array  # noqa: F401 (loaded once here, for every spare)
    import fcntl  # noqa: F401 (as array)
    import gc
    import json
    import socket

    import launcher  # imported once here, so that Landlock forks find it loaded

    launcher._libc()  # and libc loaded, which every confined fork calls

    # Every fork would otherwise write to pages of this heap (collections, reference counts of
    # the objects a collection visits), copying them: the heap is done growing, so freeze it.
    gc.disable()
    gc.freeze()

    sock = socket.socket(fileno=int(argv[1]))
    parent = int(argv[2])
    mode: dict[str, Any] = json.loads(argv[3]) if len(argv) > 3 else {}
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent == 0:  # inside a resident bwrap (its --die-with-parent watches the toolkit)
        import freshns

        freshns.undumpable()
    elif os.getppid() != parent:
        return 125
    me = os.getpid()
    sample = json.dumps(
        {"argv": ["true"], "env": dict(os.environ), "cwd": "/", "grace": 1.0, "stdin": False,
         "merge": False}, separators=(",", ":")
    ).encode()  # fmt: skip
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    # Children are reaped in the loop below only; the signal only wakes the loop up.
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    import select

    sock.send(b"ready")  # the toolkit waits for this in a thread, not on its event loop

    # The fork that will serve the next request is made in advance (a spare): forking this
    # interpreter costs most of a millisecond, which is then not on any call's path. Nor, as a
    # rule, on the path of the command the last spare took: made at once, its fork and set-up
    # (1 to 3 ms of CPU under a sandbox) would run beside that command's start, which on a
    # small machine it delays by as much. So it is made once that command has ended (`e`), or
    # a request waits for it, or SPARE_AFTER seconds have passed, whichever comes first; but at
    # once when the last spare was taken within SPARE_AFTER of being made (calls in a loop:
    # the next one would wait for the set-up).
    while True:
        taken_r, taken_w = os.pipe()
        made = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 126
            try:
                signal.set_wakeup_fd(-1)
                for fd in (wake_r, wake_w, taken_r):
                    os.close(fd)
                code = _spare(sock, taken_w, parent=me, mode=mode, sample=sample)
            except BaseException as exc:  # noqa: BLE001 (the fork never returns into the loop)
                os.write(2, f"toolnexus: the resident launcher's fork failed: {exc}\n".encode())
            os._exit(code)
        os.close(taken_w)
        while True:
            ready, _, _ = select.select([taken_r, wake_r], [], [])
            if wake_r in ready:
                os.read(wake_r, 4096)
                _reap_forks()
            if taken_r in ready:
                said = os.read(taken_r, 1)
                break
        if said == b"c":
            return 0  # the toolkit closed its end: the forks die with this process
        # b"t": it took a request (b"": it died idle): make the next one when due.
        if said == b"t" and time.monotonic() - made > SPARE_AFTER:
            deadline = time.monotonic() + SPARE_AFTER
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([taken_r, wake_r, sock], [], [], left)
                if wake_r in ready:
                    os.read(wake_r, 4096)
                    _reap_forks()
                if taken_r in ready or sock in ready:
                    break
        os.close(taken_r)


def _rehearse(sample: bytes) -> None:
    """Do on `sample` (a request like the next one, with the launcher's own environment) what
    handling a request does in Python, before it comes.

    A fork shares its launcher's memory copy on write: the first write to each page (the
    allocator's pools, `os.environ` and the C environment, the JSON decoder's objects, reference
    counts) costs a page fault, about 2.5 µs each and some 200 for a request, half a
    millisecond on the call's path. The same work on a sample while the fork idles takes those
    faults before the call. Setting the launcher's environment again changes nothing."""
    import json

    request = json.loads(sample)
    _environ(request["env"])
    json.dumps(request)  # as a prepared process's request is passed on


def _environ(env: dict[str, str]) -> None:
    """Make `os.environ` (and the C environment under it) `env`, changing only what differs:
    each change rewrites the C environment's array."""
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _spare(sock: Any, taken: int, *, parent: int, mode: dict[str, Any], sample: bytes) -> int:
    """A fork of the resident launcher waiting for the next request: it reads one, becomes the
    command's reaper and starts the command, then answers with its own pid and a pidfd of
    itself and tells the launcher, which makes the next spare.

    The answer comes once the command runs, not before: the toolkit has nothing to do until
    then, and the launcher's fork of the next spare (most of a millisecond of CPU) then runs
    beside the command instead of delaying its start. Whatever way the request ends, the
    toolkit gets an answer (it waits for one), and the launcher its `t`.

    With the Landlock launcher or in a resident bwrap (`mode`), the command's own process is
    forked before the request too (`_Prepared`), and under bwrap its namespaces are made then:
    a call finds them ready."""
    import array
    import json
    import socket

    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # idle, it dies with the launcher
    if os.getppid() != parent:
        return 125
    os.setsid()  # the command's session, its prepared process included
    prepared = None
    if mode:
        try:
            prepared = _Prepared(mode, sample)
        except OSError:
            prepared = None  # forked at the request instead (which reports what fails)
    _rehearse(sample)
    fds = array.array("i")
    while True:
        try:
            data, ancdata, _, _ = sock.recvmsg(REQUEST_MAX, socket.CMSG_SPACE(4 * fds.itemsize))
            break
        except InterruptedError:
            continue
    if not data:
        os.write(taken, b"c")
        return 0  # the prepared process sees its socket end and leaves
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    try:
        request = json.loads(data)
        pidfd = os.pidfd_open(os.getpid())
    except (OSError, ValueError) as exc:
        for fd in fds:
            os.close(fd)
        sock.send(f"error {exc}".encode())
        os.write(taken, b"te")
        return 0

    def answer() -> None:
        # Never raises: called with the command running, it must not take its reaper away.
        nonlocal pidfd
        if pidfd < 0:
            return
        try:
            sock.sendmsg([f"pid {os.getpid()}".encode()], [
                (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]).tobytes())
            ])  # fmt: skip
        except OSError:
            pass  # the toolkit is gone: its launcher goes too, and this reaper's tree with it
        finally:
            os.close(pidfd)
            pidfd = -1
            os.write(taken, b"t")
            sock.close()

    try:
        return _forked(
            request, list(fds), parent=parent, mode=mode, prepared=prepared, on_started=answer
        )
    finally:
        answer()  # it ended before the command started: the report says why
        try:  # noqa: SIM105 (as above)
            os.write(taken, b"e")  # the command has ended: the launcher makes the next spare
        except OSError:
            pass  # it made one already, and stopped listening


def _reap_forks() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _forked(
    request: dict[str, object],
    fds: list[int],
    *,
    parent: int,
    mode: dict[str, Any],
    prepared: _Prepared | None,
    on_started: Callable[[], object],
) -> int:
    """In the spare: become the command's reaper, with its pipes, folder and environment."""
    status = fds.pop()
    stdin = fds.pop(0) if request["stdin"] else os.open(os.devnull, os.O_RDONLY)
    stdout = fds.pop(0)
    stderr = stdout if request["merge"] else fds.pop(0)
    for fd, std in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, std)
    for fd in {stdin, stdout, stderr}:
        if fd > 2:
            os.close(fd)
    command = [str(a) for a in request["argv"]]  # type: ignore[union-attr]
    try:
        os.chdir(str(request["cwd"]))
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        _report(status, f"error {code} cannot run {command[0]!r}: {exc.strerror or exc}")
        return code
    env: dict[str, str] = request["env"]  # type: ignore[assignment]
    if prepared is None:
        _environ(env)  # what `_spawn`, and the launcher it may run, read
    fresh = mode.get("fresh")
    if isinstance(fresh, dict):
        fresh = {**fresh, "cwd": request["cwd"]}
    grace = float(request["grace"])  # type: ignore[arg-type]
    return run(
        status, parent, grace, command, fresh=fresh, prepared=prepared, env=env,
        on_started=on_started,
    )  # fmt: skip


class _Prepared:
    """The command's process, forked by a spare before the request (`_await_command`): in a
    resident bwrap it is pid 1 of the command's new pid namespace and has made its other
    namespaces and dropped its capabilities already. `start` hands it the command, with the
    reaper's standard streams, folder and environment, over a socket pair."""

    def __init__(self, mode: dict[str, Any], sample: bytes) -> None:
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if mode.get("fresh"):
            import freshns

            freshns.new_pid_namespace()
        pid = os.fork()
        if pid == 0:
            code = 126
            try:
                ours.close()
                code = _await_command(theirs, mode, sample)
            except BaseException as exc:  # noqa: BLE001 (never return into the spare)
                os.write(2, f"toolnexus sandbox: cannot start the command: {exc}\n".encode())
            os._exit(code)
        theirs.close()
        self.pid = pid
        self.sock = ours
        self.dropped = False
        """Whether this process (the command's reaper) has dropped its capabilities."""
        if mode.get("fresh"):
            # Its namespaces made, the reaper needs no capability: dropped now, off the call's
            # path (`run` drops them after the start otherwise, and fails closed there).
            import freshns

            try:
                freshns.drop_capabilities()
                self.dropped = True
            except OSError:
                pass

    def start(self, command: list[str], env: dict[str, str]) -> int:
        """Run `command` in the prepared process with `env`; its pid (OSError: it is gone).

        The environment travels in the request: setting it in `os.environ` here and again
        there would rewrite the C environment variable by variable twice per call."""
        import array
        import fcntl
        import json
        import socket

        fields = {"argv": command, "env": env, "cwd": os.getcwd()}
        try:
            # SIGIO (blocked: `run` waits for it) when the prepared process tells the status.
            fcntl.fcntl(self.sock.fileno(), fcntl.F_SETOWN, os.getpid())
            fcntl.fcntl(self.sock.fileno(), fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
            self.sock.sendmsg([json.dumps(fields).encode()], [
                (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]).tobytes())
            ])  # fmt: skip
        except OSError:
            self.sock.close()
            raise
        return self.pid

    def told(self) -> int | None:
        """The status the prepared process told, once the command has ended, when nothing
        else of the command's tree is left (no child of this reaper but that process): the
        call can then end without waiting for that process's own exit (its memory and, under
        bwrap, namespaces torn down). None: nothing told, or processes are left, which are
        stopped as usual once it has exited."""
        try:
            said = self.sock.recv(16)
        except OSError:
            return None  # nothing yet (a SIGIO for room to write, or a closed end)
        me = os.getpid()
        try:
            with open(f"/proc/{me}/task/{me}/children", "rb") as listed:
                children = listed.read().split()
        except OSError:
            return None
        if not said or any(int(child) != self.pid for child in children):
            return None
        return int(said)


def _await_command(sock: Any, mode: dict[str, Any], sample: bytes) -> int:
    """The prepared process: set up what does not depend on the command, wait for it, run it
    as `_spawn`'s child would have. A set-up that failed is reported on the command's stderr
    once there is one, and nothing runs."""
    import json

    import launcher as sandbox_launcher  # loaded by the resident launcher already

    for sig in _RESET:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    fresh = mode.get("fresh")
    failure = None
    if fresh:
        import freshns

        try:
            freshns.enter(fresh)
        except OSError as exc:
            failure = exc
    confined = None
    config = mode.get("config")
    if isinstance(config, str) and failure is None and not (fresh and fresh["init"]):
        settings = json.loads(config)
        if sandbox_launcher.supervised(settings):
            try:
                confined = sandbox_launcher.Supervised(settings)
            except OSError:
                confined = None  # confined at the request instead (which reports what fails)
    _rehearse(sample)
    data = sandbox_launcher.take_request(sock, REQUEST_MAX)
    if not data:
        return 0  # the spare is gone, or took no request
    if failure is not None:
        os.write(2, f"toolnexus sandbox: cannot start the command: {failure}\n".encode())
        return 126
    request = json.loads(data)
    command = [str(a) for a in request["argv"]]
    os.chdir(request["cwd"])
    env: dict[str, str] = request["env"]
    launcher = command[:4] == [sys.executable, "-I", "-S", _SANDBOX_LAUNCHER]
    if confined is not None:
        # The command's own process waits, confined already, for exactly this configuration
        # (and the files its rules name are the same): the launcher's work is done.
        if launcher and command[4:6] == [config, "--"] and confined.current():
            unset = set(confined.config.get("unset", ()))
            kept = {name: value for name, value in env.items() if name not in unset}

            def tell(code: int) -> None:
                # Processes left in this pid namespace (it adopts them under bwrap) die
                # with this process: then the reaper waits for its exit.
                try:
                    while os.waitpid(-1, os.WNOHANG)[0]:
                        pass
                except ChildProcessError:
                    try:  # noqa: SIM105 (as above)
                        sock.send(str(code).encode())
                    except OSError:
                        pass  # the reaper is gone: nobody waits

            return confined.run(command[6:], kept, request["cwd"], tell=tell)
        confined.discard()
    _environ(env)  # what the launcher, or the command, reads
    if fresh and fresh["init"]:
        return _init(command, launcher)
    return _become(command, launcher)
