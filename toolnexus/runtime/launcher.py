"""The sandbox launcher: `python -I -S launcher.py '<json>' -- argv...`.

It runs in the child, between the spawner and the real command: it removes environment
variables a spawner may have added, sets rlimits, applies Landlock (filesystem rights, TCP
bind/connect, scoping) and `execvp`s the command. When the command needs a supervisor (Unix
sockets with the network off, or writes Landlock cannot grant), it forks first: the child
confines itself, installs a seccomp filter with a user-notification listener and execs the
command; the parent stays, without capabilities and outside Landlock, answers the
notifications (`_Supervisor`, `_Broker`) and exits with the command's status.

Landlock restrictions cannot be undone, which is why they are never applied in the toolkit's
own process (nor in a `preexec_fn`, which is not thread-safe). It fails closed: if anything
cannot be applied, the command does not run.

This file is run by path with `python -I -S`, so it imports only the standard library. The
toolkit also imports it for the Landlock constants and the ABI probe.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import select
import signal
import stat
import sys

TYPE_CHECKING = False  # typing itself is not imported: the launcher starts faster

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, NoReturn

__all__: list[str] = []

# Syscall numbers are the same on every architecture that has Landlock (asm-generic table).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_GET_SECUREBITS = 27
_PR_SET_SECUREBITS = 28
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_KEEP_CAPS_LOCKED, each with its lock bit: uid 0
# gets no capabilities back on exec, and nothing can undo that.
_SECUREBITS = 0b111111
_CAP_VERSION_3 = 0x20080522

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights Landlock accepts on a rule for a file (the others only make sense on folders)."""


def handled_fs(abi: int) -> int:
    """Every filesystem right the kernel's ABI knows: all are denied unless a rule grants them."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def read_rights(abi: int) -> int:
    return (EXECUTE | READ_FILE | READ_DIR | (IOCTL_DEV if abi >= 5 else 0)) & handled_fs(abi)


def write_rights(abi: int) -> int:
    return handled_fs(abi) & ~read_rights(abi)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_LIBC: list[Any] = []


def _libc() -> Any:
    """libc, loaded once per process (and kept across forks): confining a command calls it a
    few times, and loading it costs some 70 µs each time."""
    if not _LIBC:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        _LIBC.append(libc)
    return _LIBC[0]


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers, or 0 when there is none."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = _libc()
    except OSError:
        return 0
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _apply_landlock(config: dict[str, Any]) -> None:
    abi = int(config["abi"])
    fs, net, scope = (
        int(config.get("fs", 0)),
        int(config.get("net", 0)),
        int(config.get("scope", 0)),
    )
    if not (fs or net or scope):
        return
    libc = _libc()
    attr = _RulesetAttr(fs, net, scope)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _check(
        libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    try:
        for path, granted in config.get("rules", ()):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # removed since the rules were computed: nothing to grant
            try:
                rights = granted if os.path.isdir(f"/proc/self/fd/{fd}") else granted & FILE_RIGHTS
                if rights:
                    rule = _PathBeneathAttr(rights, fd)
                    _check(
                        libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH,
                                     ctypes.byref(rule), 0),
                        f"landlock_add_rule({path})",
                    )  # fmt: skip
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _drop_capabilities() -> None:
    """Make root an ordinary user for the command: a root process keeps capabilities such as
    CAP_SYS_MODULE or CAP_SYS_ADMIN that Landlock does not cover."""
    libc = _libc()
    cap = 0
    while libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    # Set once and locked: a second drop (a process confined ahead that was not used, then
    # confined again) finds them so, and may not set them again.
    if libc.prctl(_PR_GET_SECUREBITS, 0, 0, 0, 0) != _SECUREBITS:
        _check(libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capset")


# seccomp. With the network off: refuse socket(AF_INET/AF_INET6, ...) (UDP too, which Landlock's
# TCP rules miss; only without a network namespace) and io_uring (which can open sockets without
# the socket syscall). Unix-domain sockets: only stream and seqpacket ones may be created (a
# datagram socket can send to any path with sendto, which the filter cannot read), socketpair()
# stays, and every connect() goes to the supervisor (see `_supervise`), which decides on the path
# and connects the socket itself. Everything else is allowed.
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 1 << 3
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_SECCOMP_RET_USER_NOTIF = 0x7FC00000
_EACCES = 13
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_SOCK_STREAM, _SOCK_SEQPACKET = 1, 5
# machine -> AUDIT_ARCH_*, and the numbers of seccomp, socket, socketpair, connect, io_uring_setup
_ARCHES = {
    "x86_64": (0xC000003E, {"seccomp": 317, "socket": 41, "socketpair": 53, "connect": 42,
                            "io_uring_setup": 425, "open": 2, "creat": 85, "mkdir": 83,
                            "rmdir": 84, "rename": 82, "unlink": 87, "symlink": 88, "openat": 257,
                            "mkdirat": 258, "unlinkat": 263, "renameat": 264, "symlinkat": 266,
                            "renameat2": 316, "openat2": 437}),
    "aarch64": (0xC00000B7, {"seccomp": 277, "socket": 198, "socketpair": 199, "connect": 203,
                             "io_uring_setup": 425, "openat": 56, "mkdirat": 34, "unlinkat": 35,
                             "symlinkat": 36, "renameat2": 276, "openat2": 437}),
}  # fmt: skip
_BROKERED = ("creat", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "rename", "renameat",
             "renameat2", "symlink", "symlinkat")  # fmt: skip
_O_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC
_ENOSYS = 38
SECCOMP_MACHINES = frozenset(_ARCHES)
_BPF_LD_W_ABS, _BPF_ALU_AND_K = 0x20, 0x54
_BPF_JEQ_K, _BPF_JGE_K, _BPF_JSET_K, _BPF_RET_K = 0x15, 0x35, 0x45, 0x06


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter)))


def _filter_program(
    *, no_inet: bool, unix: bool, broker: bool = False
) -> list[tuple[int, int, int, int]]:
    """The BPF program, assembled with labels (jump offsets are computed, not hand-counted)."""
    machine = os.uname().machine
    if machine not in _ARCHES:
        raise OSError(0, f"no seccomp network filter for {machine}")
    arch, nr = _ARCHES[machine]
    deny = _SECCOMP_RET_ERRNO | _EACCES
    code: list[tuple[int, str | int, str | int, int] | str] = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, arch),
        (_BPF_RET_K, 0, 0, deny),  # another ABI (32-bit compat): refuse the call
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_BPF_JGE_K, "deny", 0, 0x40000000),  # x32 syscalls
        (_BPF_JEQ_K, "deny", 0, nr["io_uring_setup"]),
        (_BPF_JEQ_K, "socket", 0, nr["socket"]),
    ]
    if unix:
        code += [
            (_BPF_JEQ_K, "socketpair", 0, nr["socketpair"]),
            (_BPF_JEQ_K, "notify", 0, nr["connect"]),
        ]
    if broker:
        # Creating, removing, renaming and opening for writing go to the supervisor (it judges
        # them by path); openat2 (whose flags sit in memory) says "not here" and libc falls back.
        code += [(_BPF_JEQ_K, "notify", 0, nr[name]) for name in _BROKERED if name in nr]
        code += [(_BPF_JEQ_K, "enosys", 0, nr["openat2"])]
        if "open" in nr:
            code += [(_BPF_JEQ_K, "flags_in_1", 0, nr["open"])]
        code += [(_BPF_JEQ_K, "flags_in_2", 0, nr["openat"])]
    code += [
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        "socket",
        (_BPF_LD_W_ABS, 0, 0, 16),  # seccomp_data.args[0] (the address family), low half
    ]
    if no_inet:
        code += [(_BPF_JEQ_K, "deny", 0, _AF_INET), (_BPF_JEQ_K, "deny", 0, _AF_INET6)]
    if not unix:
        code += [(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)]
    if unix:
        code += [
            (_BPF_JEQ_K, "unix_type", "allow", _AF_UNIX),
            "socketpair",
            (_BPF_LD_W_ABS, 0, 0, 16),
            (_BPF_JEQ_K, "unix_type", "allow", _AF_UNIX),
            "unix_type",
            (_BPF_LD_W_ABS, 0, 0, 24),  # args[1], the type, without SOCK_NONBLOCK/SOCK_CLOEXEC
            (_BPF_ALU_AND_K, 0, 0, 0xF),
            (_BPF_JEQ_K, "allow", 0, _SOCK_STREAM),
            (_BPF_JEQ_K, "allow", "deny", _SOCK_SEQPACKET),
        ]
    if broker:
        code += [
            "flags_in_1",
            (_BPF_LD_W_ABS, 0, 0, 24),  # open(path, flags): args[1]
            (_BPF_JSET_K, "notify", "allow", _O_WRITING),
            "flags_in_2",
            (_BPF_LD_W_ABS, 0, 0, 32),  # openat(dirfd, path, flags): args[2]
            (_BPF_JSET_K, "notify", "allow", _O_WRITING),
            "enosys",
            (_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _ENOSYS),
        ]
    if unix or broker:
        code += ["notify", (_BPF_RET_K, 0, 0, _SECCOMP_RET_USER_NOTIF)]
    code += [
        "allow",
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        "deny",
        (_BPF_RET_K, 0, 0, deny),
    ]
    labels: dict[str, int] = {}
    for item in code:
        if isinstance(item, str):
            labels[item] = sum(1 for c in code[: code.index(item)] if not isinstance(c, str))
    program: list[tuple[int, int, int, int]] = []
    for item in code:
        if isinstance(item, str):
            continue
        op, jt, jf, k = item
        here = len(program)
        offset = [j if isinstance(j, int) else labels[j] - here - 1 for j in (jt, jf)]
        program.append((op, offset[0], offset[1], k))
    return program


def _install_filter(*, no_inet: bool, unix: bool, broker: bool = False) -> int:
    """Install the filter; with `unix` or `broker`, return the listener fd the supervisor reads
    (else -1)."""
    program = _filter_program(no_inet=no_inet, unix=unix, broker=broker)
    filters = (_SockFilter * len(program))(*(_SockFilter(*ins) for ins in program))
    prog = _SockFprog(len(program), filters)
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    if not (unix or broker):
        _check(
            libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
            "prctl(PR_SET_SECCOMP)",
        )
        return -1
    nr = _ARCHES[os.uname().machine][1]["seccomp"]
    return _check(
        libc.syscall(nr, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_NEW_LISTENER,
                     ctypes.byref(prog)),
        "seccomp(SECCOMP_SET_MODE_FILTER)",
    )  # fmt: skip


def _set_rlimits(limits: dict[str, int]) -> None:
    for name, wanted in limits.items():
        which = getattr(resource, f"RLIMIT_{name}")
        _, hard = resource.getrlimit(which)
        value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(which, (value, value))


# The supervisor's side of seccomp user notification (linux/seccomp.h).
_NOTIF_RECV, _NOTIF_SEND, _NOTIF_ID_VALID = 0xC0502100, 0xC0182101, 0x40082102
_NOTIF_FLAG_CONTINUE = 1
_SYS_PIDFD_GETFD = 438
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


class _SeccompData(ctypes.Structure):
    _fields_ = (
        ("nr", ctypes.c_int32),
        ("arch", ctypes.c_uint32),
        ("ip", ctypes.c_uint64),
        ("args", ctypes.c_uint64 * 6),
    )


class _Notif(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("data", _SeccompData),
    )


class _NotifResp(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("val", ctypes.c_int64),
        ("error", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    )


class _Supervisor:
    """Answers the sandboxed processes' connect() calls on Unix-domain sockets.

    The filter cannot read the address, and letting the kernel go on after the supervisor read
    it would race (another thread can rewrite the address in between), so the supervisor never
    lets a Unix connect continue: it reads the address once, decides on its own copy, and if the
    path is allowed it connects the caller's very socket (a duplicate from pidfd_getfd) itself.
    Allowed: a socket listed in `allow`, or one in the sandbox's private temp folder (where the
    command's own servers live: Python multiprocessing's forkserver, test servers). Everything
    else, abstract and unnamed addresses included, is refused with EACCES.
    """

    def __init__(
        self,
        listener: int,
        allow: list[str],
        private: str | None,
        broker: _Broker | None = None,
    ) -> None:
        self.listener = listener
        self.allow = allow
        self.private = private
        self.broker = broker
        self.libc = _libc()
        self.names = {n: name for name, n in _ARCHES[os.uname().machine][1].items()}

    def allowed_inodes(self) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        for path in self.allow:
            try:
                st = os.stat(path)
            except OSError:
                continue
            found.add((st.st_dev, st.st_ino))
        return found

    def valid(self, notif_id: int) -> bool:
        return (
            self.libc.ioctl(self.listener, _NOTIF_ID_VALID, ctypes.byref(ctypes.c_uint64(notif_id)))
            == 0
        )

    def reply(self, notif_id: int, error: int = 0, *, go_on: bool = False) -> None:
        resp = _NotifResp(notif_id, 0, -error if error else 0, _NOTIF_FLAG_CONTINUE if go_on else 0)
        self.libc.ioctl(self.listener, _NOTIF_SEND, ctypes.byref(resp))  # fails if the caller died

    def read_memory(self, pid: int, addr: int, size: int) -> bytes:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(addr)
            return mem.read(size)

    def read_path(self, pid: int, addr: int) -> bytes:
        """A NUL-terminated string of the caller's, read once (the copy is what is judged)."""
        out = b""
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            while len(out) < 4096:
                mem.seek(addr + len(out))
                chunk = mem.read(256 - (addr + len(out)) % 256)
                if not chunk:
                    break
                if b"\0" in chunk:
                    return out + chunk.split(b"\0", 1)[0]
                out += chunk
        raise OSError(errno.ENAMETOOLONG, "path too long")

    def handle_one(self) -> None:
        notif = _Notif()
        if self.libc.ioctl(self.listener, _NOTIF_RECV, ctypes.byref(notif)) != 0:
            return  # the caller died meanwhile
        name = self.names.get(notif.data.nr, "")
        try:
            if name == "connect":
                error, go_on = self.connect(notif)
            elif self.broker is not None:
                error, go_on = self.broker.handle(self, notif, name)
            else:
                error, go_on = _EACCES, False
        except OSError as exc:
            error, go_on = exc.errno or _EACCES, False
        if error is not None:
            self.reply(notif.id, error, go_on=go_on)

    def connect(self, notif: _Notif) -> tuple[int | None, bool]:
        import socket  # only when a command connects: the launcher starts faster without it

        fd, addr, size = (int(a) for a in notif.data.args[:3])
        pidfd = os.pidfd_open(_thread_group(notif.pid))  # the caller may be any thread
        try:
            if not self.valid(notif.id):  # the pid was reused: this is not the caller
                return errno.ESRCH, False
            sockfd = self.libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
            if sockfd < 0:
                return ctypes.get_errno() or errno.EBADF, False
        finally:
            os.close(pidfd)
        try:
            sock = socket.socket(fileno=sockfd)
        except OSError:
            os.close(sockfd)
            return errno.ENOTSOCK, False
        with sock:
            if sock.family != socket.AF_UNIX:
                return 0, True  # its family is fixed: no address can make it reach a Unix socket
            raw = self.read_memory(notif.pid, addr, max(0, min(size, 110)))
            if not self.valid(notif.id):
                return errno.ESRCH, False
            return self.connect_path(sock, raw, notif.pid), False

    def connect_path(self, sock: Any, raw: bytes, pid: int) -> int:
        path = raw[2:].split(b"\0", 1)[0] if len(raw) > 2 and raw[2] != 0 else b""
        if int.from_bytes(raw[:2], sys.byteorder) != _AF_UNIX or not path:
            return _EACCES  # abstract or unnamed: never outside the sandbox
        cwd = os.open(f"/proc/{pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            target = os.open(_as_caller(path, pid), os.O_PATH | os.O_CLOEXEC, dir_fd=cwd)
        finally:
            os.close(cwd)
        try:
            st = os.fstat(target)
            if not stat.S_ISSOCK(st.st_mode):
                return errno.ECONNREFUSED
            where = os.readlink(f"/proc/self/fd/{target}")
            inside = self.private is not None and where.startswith(self.private + "/")
            if inside and self.private is not None:
                inside = os.stat(self.private).st_dev == st.st_dev
            if not inside and (st.st_dev, st.st_ino) not in self.allowed_inodes():
                return _EACCES
            try:
                sock.connect(f"/proc/self/fd/{target}")
            except OSError as exc:
                return exc.errno or errno.ECONNREFUSED
            return 0
        finally:
            os.close(target)

    def serve(self, child: int) -> int:
        """Answer notifications until the command exits; return its exit status.

        Orphans are reaped on the way: inside bwrap this process is the namespace's pid 1.
        """
        pidfd = os.pidfd_open(child)
        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        while True:
            for fd, events in poller.poll(1000):
                if fd == self.listener and events & select.POLLIN:
                    self.handle_one()
                elif fd == self.listener:
                    poller.unregister(self.listener)  # every filtered process has ended
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)  # the child is ours until reaped here
                if pid == child:
                    return status
                if pid == 0:
                    break


_AT_FDCWD, _AT_REMOVEDIR = -100, 0x200
_O_TMPFILE = 0o20000000 | os.O_DIRECTORY
_NOTIF_ADDFD = 0x40182103
_ADDFD_FLAG_SEND = 1 << 1


class _AddFd(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("srcfd", ctypes.c_uint32),
        ("newfd", ctypes.c_uint32),
        ("newfd_flags", ctypes.c_uint32),
    )


class _Broker:
    """Writes for the command where Landlock cannot let it: in the folders on the way to a
    protected path (the top of the workspace, above all). Landlock only grants whole subtrees,
    so those folders get no write right; a write the filter sends here is judged on the path the
    supervisor itself resolved and, if it lands in such a folder and touches no protected path,
    done by the supervisor (an opened file is handed over with SECCOMP_IOCTL_NOTIF_ADDFD).
    Anywhere else the kernel goes on and Landlock decides, so a path rewritten meanwhile by
    another thread gains nothing.
    """

    def __init__(self, roots: list[str], granted: list[str], excluded: list[str]) -> None:
        self.roots = set(roots)
        self.granted = set(granted)
        self.excluded = excluded
        self.inodes: set[tuple[int, int]] = set()
        for path in excluded:
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            self.inodes.add((st.st_dev, st.st_ino))

    def place(self, real: str) -> str:
        """refused (protected), outside (no writable root), granted (Landlock allows), brokered."""
        if any(_under(real, e) for e in self.excluded):
            return "refused"
        path = real
        while True:
            if path in self.granted:
                return "granted"
            if path in self.roots:
                return "brokered"
            parent = os.path.dirname(path)
            if parent == path:
                return "outside"
            path = parent

    def touches_protected(self, target: str) -> bool:
        return any(_under(target, e) or _under(e, target) for e in self.excluded)

    def declined(self, real: str, name: str) -> tuple[int, bool] | None:
        """The answer for a one-path call the broker does not do itself, or None when it does:
        EACCES in a protected place or for a brokered name that touches a protected path; the
        kernel goes on (and Landlock judges) anywhere that is not brokered."""
        place = self.place(real)
        if place == "refused" or (
            place == "brokered" and self.touches_protected(os.path.join(real, name))
        ):
            return _EACCES, False
        if place != "brokered":
            return 0, True
        return None

    def resolve(
        self, sup: _Supervisor, pid: int, dirfd: int, addr: int
    ) -> tuple[int, str, str] | None:
        """(O_PATH fd of the parent folder, last name, the parent's real path), or None when
        the kernel should go on (nothing to broker, or an error it reports best)."""
        path = _as_caller(sup.read_path(pid, addr), pid).rstrip(b"/")
        head, name = os.path.split(path)
        if name in (b"", b".", b".."):
            return None
        dirfd = ctypes.c_int32(dirfd & 0xFFFFFFFF).value
        if path.startswith(b"/"):
            base = "/"
        else:
            base = f"/proc/{pid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
        try:
            basefd = os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                parent = os.open(head or b".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
                                 dir_fd=basefd)  # fmt: skip
            finally:
                os.close(basefd)
        except OSError:
            return None
        return parent, os.fsdecode(name), os.readlink(f"/proc/self/fd/{parent}")

    def handle(self, sup: _Supervisor, notif: _Notif, name: str) -> tuple[int | None, bool]:
        a = [int(x) for x in notif.data.args]
        pid = notif.pid
        if name in ("rename", "renameat", "renameat2"):
            old = (_AT_FDCWD, a[0]) if name == "rename" else (a[0], a[1])
            new = (_AT_FDCWD, a[1]) if name == "rename" else (a[2], a[3])
            return self.rename(sup, notif, old, new, a[4] if name == "renameat2" else 0)
        if name in ("symlink", "symlinkat"):
            target = sup.read_path(pid, a[0])
            where = (_AT_FDCWD, a[1]) if name == "symlink" else (a[1], a[2])
            return self.one(sup, notif, where, lambda fd, n: os.symlink(target, n, dir_fd=fd))
        if name in ("mkdir", "mkdirat"):
            where, mode = ((_AT_FDCWD, a[0]), a[1]) if name == "mkdir" else ((a[0], a[1]), a[2])
            return self.one(sup, notif, where, lambda fd, n: os.mkdir(n, mode & 0o7777, dir_fd=fd))
        if name in ("unlink", "rmdir", "unlinkat"):
            where = (a[0], a[1]) if name == "unlinkat" else (_AT_FDCWD, a[0])
            rmdir = name == "rmdir" or (name == "unlinkat" and a[2] & _AT_REMOVEDIR)
            remove = os.rmdir if rmdir else os.unlink
            return self.one(sup, notif, where, lambda fd, n: remove(n, dir_fd=fd))
        if name == "creat":
            return self.open(
                sup, notif, (_AT_FDCWD, a[0]), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, a[1]
            )
        if name == "open":
            return self.open(sup, notif, (_AT_FDCWD, a[0]), a[1], a[2])
        if name == "openat":
            return self.open(sup, notif, (a[0], a[1]), a[2], a[3])
        return 0, True

    def one(
        self,
        sup: _Supervisor,
        notif: _Notif,
        where: tuple[int, int],
        act: Callable[[int, str], object],
    ) -> tuple[int | None, bool]:
        found = self.resolve(sup, notif.pid, *where)
        if found is None:
            return 0, True
        parent, name, real = found
        try:
            if (declined := self.declined(real, name)) is not None:
                return declined
            if not sup.valid(notif.id):
                return None, False
            with _umask_of(notif.pid):
                act(parent, name)
            return 0, False
        finally:
            os.close(parent)

    def rename(
        self,
        sup: _Supervisor,
        notif: _Notif,
        old: tuple[int, int],
        new: tuple[int, int],
        flags: int,
    ) -> tuple[int | None, bool]:
        src = self.resolve(sup, notif.pid, *old)
        if src is None:
            return 0, True
        dst = self.resolve(sup, notif.pid, *new)
        if dst is None:
            os.close(src[0])
            return 0, True
        try:
            places = {self.place(src[2]), self.place(dst[2])}
            if "refused" in places:
                return _EACCES, False
            if "brokered" not in places or "outside" in places:
                return 0, True
            for _, name, real in (src, dst):
                if self.touches_protected(os.path.join(real, name)):
                    return _EACCES, False
            try:
                st = os.stat(src[1], dir_fd=src[0], follow_symlinks=False)
                if (st.st_dev, st.st_ino) in self.inodes:
                    return _EACCES, False
            except OSError:
                pass
            if not sup.valid(notif.id):
                return None, False
            libc = sup.libc
            done = libc.renameat2(src[0], os.fsencode(src[1]), dst[0], os.fsencode(dst[1]),
                                  ctypes.c_uint(flags))  # fmt: skip
            return (ctypes.get_errno() or _EACCES, False) if done != 0 else (0, False)
        finally:
            os.close(src[0])
            os.close(dst[0])

    def open(
        self, sup: _Supervisor, notif: _Notif, where: tuple[int, int], flags: int, mode: int
    ) -> tuple[int | None, bool]:
        flags &= 0xFFFFFFFF
        if flags & _O_TMPFILE == _O_TMPFILE:
            return 0, True
        found = self.resolve(sup, notif.pid, *where)
        if found is None:
            return 0, True
        parent, name, real = found
        try:
            if (declined := self.declined(real, name)) is not None:
                return declined
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                return 0, True  # a symlink or a device: the kernel follows, Landlock judges
            if st is not None and (st.st_dev, st.st_ino) in self.inodes:
                return _EACCES, False  # checked before opening too: O_TRUNC acts at open
            if not sup.valid(notif.id):
                return None, False  # the call is gone: create or truncate nothing for it
            with _umask_of(notif.pid):
                fd = os.open(
                    name, (flags & ~os.O_CLOEXEC) | os.O_NOFOLLOW, mode & 0o7777, dir_fd=parent
                )
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) in self.inodes:
                    return _EACCES, False
                add = _AddFd(
                    notif.id, _ADDFD_FLAG_SEND, fd, 0, os.O_CLOEXEC if flags & os.O_CLOEXEC else 0
                )
                if sup.libc.ioctl(sup.listener, _NOTIF_ADDFD, ctypes.byref(add)) < 0:
                    return ctypes.get_errno() or errno.EMFILE, False
                return None, False  # answered by the ioctl itself
            finally:
                os.close(fd)
        finally:
            os.close(parent)


def _as_caller(path: bytes, tid: int) -> bytes:
    """The path as the caller means it: its `/proc/self` is not the supervisor's."""
    for alias, who in ((b"/proc/self", _thread_group(tid)), (b"/proc/thread-self", tid)):
        if path == alias or path.startswith(alias + b"/"):
            return f"/proc/{who}".encode() + path[len(alias) :]
    return path


def _thread_group(tid: int) -> int:
    """The process a thread belongs to (pidfd_open wants a process; fds are per process)."""
    with open(f"/proc/{tid}/status") as status:
        for line in status:
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    return tid


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class _umask_of:  # a context manager, named like the function it reads as
    """Create with the caller's umask, as the kernel would have."""

    def __init__(self, pid: int) -> None:
        self.mask = 0o022
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    self.mask = int(line.split()[1], 8)

    def __enter__(self) -> None:
        self.old = os.umask(self.mask)

    def __exit__(self, *_: object) -> None:
        os.umask(self.old)


def _confine(config: dict[str, Any]) -> None:
    _set_rlimits(config.get("rlimits", {}))
    if "abi" in config:
        if os.geteuid() == 0:
            _drop_capabilities()
        _apply_landlock(config)


def supervised(config: dict[str, Any]) -> bool:
    """Whether a command under `config` needs a supervisor (see the module's docstring)."""
    return "unix" in config or "broker" in config


def _marks(config: dict[str, Any]) -> list[tuple[str, int, int]]:
    """The files the Landlock rules grant rights on, as (path, device, inode): Landlock holds
    the inode a rule named when it was added, so a prepared command is stale once a path
    names another (a folder swapped by a deployment)."""
    marks = []
    for path, _ in config.get("rules", ()):
        try:
            info = os.stat(path)
        except OSError:
            marks.append((path, -1, -1))
        else:
            marks.append((path, info.st_dev, info.st_ino))
    return marks


class Supervised:
    """A supervised command's process, confined before the command is known.

    `__init__` forks the child, which confines itself, installs the filter and hands the
    listener over, then waits for `run` to send the command (its arguments, environment,
    folder and standard streams): that set-up, most of the launch's cost, can so be done
    before a resident launcher's request comes (`reaper._await_command`). This process
    stays as the supervisor, unconfined, not dumpable and without capabilities, and `run`
    returns the command's status. A launch by path does both steps at once (`main`).
    """

    def __init__(self, config: dict[str, Any]) -> None:
        import _socket  # the C module: `socket` would cost the launcher's start-up milliseconds

        self.config = config
        self.marks = _marks(config)
        # The child tells its listener's number through one pipe, and waits on the other until
        # this process has taken a copy (pidfd_getfd): the listener is close-on-exec. The
        # command comes through the socket pair.
        number_r, number_w = os.pipe()
        ack_r, ack_w = os.pipe()
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        child = os.fork()
        if child == 0:
            code = 126
            try:
                for fd in (number_r, ack_w):
                    os.close(fd)
                ours.close()
                code = _confined_child(config, number_w, ack_r, theirs)
            finally:
                os._exit(code)
        self.child = child
        self._sock: Any = ours
        theirs.close()
        # Not dumpable: the command (same uid, and inside bwrap not under Landlock's ptrace
        # rule) can neither trace this unfiltered process nor read its memory, before it even
        # starts.
        _check(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
        os.close(number_w)
        os.close(ack_r)
        for sig in _FORWARDED:
            signal.signal(sig, lambda num, _frame: os.kill(child, num))
        self._fds = _take_listener(child, number_r)
        os.close(number_r)
        os.close(ack_w)
        if "abi" in config and os.geteuid() == 0:
            _drop_capabilities()  # as the command did (inside bwrap, it has none already)

    def current(self) -> bool:
        """Whether every path the rules name is still the file they were applied to."""
        return _marks(self.config) == self.marks

    def discard(self) -> None:
        """Let the child go without a command (it exits when its socket closes)."""
        self._sock.close()

    def run(
        self,
        command: list[str],
        env: dict[str, str],
        cwd: str | None = None,
        *,
        tell: Callable[[int], object] | None = None,
    ) -> int:
        """Run `command` in the confined child with this process's standard streams, `env`
        and `cwd` (None: where the child is), supervise it; its exit status.

        `tell` is given, once the command has ended, the status this process is about to end
        with (as `os.waitstatus_to_exitcode` reads it), before it ends: a reaper waiting for
        this process can answer without waiting for its exit (`reaper._Prepared.told`)."""
        import _socket
        import array

        request = json.dumps({"argv": command, "env": env, "cwd": cwd}).encode()
        try:
            self._sock.sendmsg([request], [
                (_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", [0, 1, 2]).tobytes())
            ])  # fmt: skip
        except OSError as exc:  # a standard stream closed, a request too large, no child
            os.kill(self.child, signal.SIGKILL)
            os.waitpid(self.child, 0)
            print(f"toolnexus sandbox: cannot start the command: {exc}", file=sys.stderr)
            return 126
        finally:
            self._sock.close()
        # The supervisor must not hold the command's pipes open after it ended.
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
        os.close(null)
        config = self.config
        if self._fds:
            broker = None
            brokered: dict[str, Any] | None = config.get("broker")
            if brokered:
                # Folders with a write rule: beneath them, Landlock decides.
                made = MAKE_REG | WRITE_FILE
                granted = [path for path, rights in config.get("rules", ()) if rights & made]
                broker = _Broker(brokered["roots"], granted, brokered["excluded"])
            unix: dict[str, Any] = config.get("unix") or {}
            allow = list(unix.get("allow", ()))
            status = _Supervisor(self._fds[0], allow, unix.get("private"), broker).serve(self.child)
        else:
            status = os.waitpid(self.child, 0)[1]
        code = os.waitstatus_to_exitcode(status)
        if tell is not None:
            # pid 1 of bwrap's namespace ignores its own signals: it returns 128 + N below.
            tell(128 - code if code < 0 and os.getpid() == 1 else code)
        if code < 0:  # killed by a signal: die of the same one, as the command did
            if -code not in (signal.SIGKILL, signal.SIGSTOP):  # no handler to reset for those
                signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
            return 128 - code  # still here: pid 1 of bwrap's namespace ignores its own signals
        return code


def _confined_child(config: dict[str, Any], number_w: int, ack_r: int, sock: Any) -> int:
    """`Supervised`'s child: confine, install the filter, hand the listener over, wait for
    the command and exec it. A confinement that failed is reported on the command's stderr
    once it has one, and nothing runs."""
    failure = None
    try:
        # Dumpable, as the command will be after its exec, so that the supervisor may take its
        # listener: a fork of a supervisor that was itself made ahead and not used inherits
        # that one's "not dumpable" (and no capabilities to look past it).
        _check(_libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
        _confine(config)
        listener = _install_filter(
            no_inet=bool(config.get("no_inet")),
            unix="unix" in config,
            broker=bool(config.get("broker")),
        )
        os.write(number_w, f"{listener}\n".encode())
        os.close(number_w)
        os.read(ack_r, 1)
    except (OSError, ValueError) as exc:
        failure = exc
        os.close(number_w)  # no listener: the supervisor only waits
    os.close(ack_r)
    # What the request's handling writes to, written once while waiting (each first write to
    # a page shared with the supervisor is a page fault on the call's path: see
    # `reaper._rehearse`).
    json.loads(json.dumps({"argv": [], "env": dict(os.environ), "cwd": None}))
    data = take_request(sock, 65536)
    sock.close()
    if not data:
        return 0  # discarded: no command comes
    if failure is not None:
        print(f"toolnexus sandbox: cannot confine the command: {failure}", file=sys.stderr)
        return 126
    request = json.loads(data)
    if request["cwd"] is not None:
        os.chdir(request["cwd"])
    return _exec(request["argv"], request["env"])


def take_request(sock: Any, size: int) -> bytes:
    """Receive a request that comes with the command's three standard streams (as
    SCM_RIGHTS) and make them this process's 0, 1 and 2; the request (empty: none came, the
    sender is gone)."""
    import _socket
    import array

    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(size, _socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    for fd, std in zip(fds, (0, 1, 2), strict=False):
        os.dup2(fd, std)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    return data


def _take_listener(child: int, number_r: int) -> list[int]:
    """A copy of the child's listener, or nothing if it failed before installing it."""
    text = os.read(number_r, 32).strip()
    if not text:
        return []
    pidfd = os.pidfd_open(child)
    try:
        fd = _check(_libc().syscall(_SYS_PIDFD_GETFD, pidfd, int(text), 0), "pidfd_getfd")
    finally:
        os.close(pidfd)
    return [fd]


def execvpe(command: list[str], env: Mapping[str, str] | None = None) -> NoReturn:
    """Exec `command`, looked up on the PATH of `env` (None: this process's environment, which
    the command then gets), as `os.execvpe` does: a folder where it is missing or which is not
    a folder is skipped, the first other failure is raised if no folder has it.

    `os.execvpe` imports `warnings` on every call (`os.get_exec_path`), which a fork of the
    launcher has not loaded: a third of a millisecond at best, more in a fresh fork under
    Landlock, on every launch."""
    environ = os.environ if env is None else env
    if "/" in command[0]:
        os.execve(command[0], command, environ)
    search = environ.get("PATH")
    failure: OSError | None = None
    last = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])
    for folder in (os.defpath if search is None else search).split(os.pathsep):
        try:
            os.execve(os.path.join(folder, command[0]), command, environ)
        except (FileNotFoundError, NotADirectoryError) as exc:
            last = exc
        except OSError as exc:
            last = exc
            failure = failure or exc
    raise failure or last


def _exec(command: list[str], env: dict[str, str] | None = None) -> int:
    try:
        execvpe(command, env)
    except FileNotFoundError:
        print(f"toolnexus sandbox: command not found: {command[0]}", file=sys.stderr)
        return 127
    except OSError as exc:
        print(f"toolnexus sandbox: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 126


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: launcher.py '<json>' -- command [args...]", file=sys.stderr)
        return 2
    if argv[1].startswith("@"):  # a configuration too long for one argument
        with open(argv[1][1:]) as file:
            config: dict[str, Any] = json.load(file)
    else:
        config = json.loads(argv[1])
    command = argv[3:]
    for name in config.get("unset", ()):
        os.environ.pop(name, None)
    if supervised(config):
        return Supervised(config).run(command, dict(os.environ))
    try:
        _confine(config)
        if config.get("no_inet"):
            _install_filter(no_inet=True, unix=False)
    except (OSError, ValueError) as exc:
        print(f"toolnexus sandbox: cannot confine the command: {exc}", file=sys.stderr)
        return 126
    return _exec(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
