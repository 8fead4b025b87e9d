"""Fresh namespaces per command inside a resident bwrap (`reaper.resident` under bwrap).

A bwrap started per command gives that command its own pid, mount, IPC, UTS (and, with the
network off, network) namespaces, a private /tmp and /dev that vanish with it, and a /proc that
shows only its own processes. A resident bwrap is started once per toolkit and exact policy
(its binds are the policy's), so those per-command parts are made here instead, by the fork
of the resident launcher that runs the command, without a bwrap or an interpreter per call:

- `new_pid_namespace` (in the command's reaper): the reaper's next child is pid 1 of a new pid
  namespace, so the command's processes see nothing of other calls and all die with pid 1;
- `enter` (in that pid 1): new mount, IPC and UTS namespaces (and network, with the loopback
  up, as bwrap does), a fresh tmpfs on a writable /tmp holding exactly the mounts, folders and
  symlinks bwrap put there (the resident's binds, cloned with `open_tree`), a fresh /dev/shm
  and devpts (the resident's /dev is otherwise read-only: nothing else there is written to), a
  new /proc with bwrap's read-only covers, then every capability dropped.

The resident launcher holds CAP_SYS_ADMIN, CAP_NET_ADMIN and CAP_SETPCAP for this (bwrap's
`--cap-add`); nothing the command runs keeps any: `enter` drops them (bounding set, securebits
locked, capset to zero) and fails closed, and the reaper drops them once it forked. The
resident is not dumpable, so a command cannot trace it.

Standard library only: it is imported by the resident launcher inside the sandbox.
"""

from __future__ import annotations

import ctypes
import functools
import os
import socket
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__: list[str] = []

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
# open_tree and move_mount have the same numbers on every architecture (Linux 5.2).
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT = 428, 429
_OPEN_TREE_CLONE, _AT_RECURSIVE, _MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, 4
_PR_SET_DUMPABLE = 4
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 1
# What bwrap's --proc leaves read-only (those that exist here).
_PROC_COVERS = ("sys", "sysrq-trigger", "irq", "bus")
CAPS = ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SETPCAP")
"""What the resident launcher keeps inside bwrap (`--cap-add`), for the namespaces above."""


@functools.cache
def _c() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _unshare(flags: int) -> None:
    _check(_c().unshare(flags), "unshare")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str = "") -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _check(
        _c().mount(enc(source), target.encode(), enc(kind), ctypes.c_ulong(flags),
                   enc(data or None)),
        f"mount {target}",
    )  # fmt: skip


def undumpable() -> None:
    """The resident launcher holds capabilities: no command may trace it or read its memory."""
    _check(_c().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def new_pid_namespace() -> None:
    """Make the caller's next child pid 1 of a new pid namespace."""
    _unshare(_CLONE_NEWPID)


def _clone(path: str) -> int:
    return _check(
        _c().syscall(_SYS_OPEN_TREE, -100, path.encode(),
                     _OPEN_TREE_CLONE | _AT_RECURSIVE | os.O_CLOEXEC),
        f"open_tree {path}",
    )  # fmt: skip


def _plan(folder: str) -> list[tuple[str, str, Any]]:
    """What a bwrap tmpfs holds, to rebuild it: (name, kind, detail), kind one of `mount-dir`,
    `mount-file` (detail: a detached clone), `link` (its target), `dir` (its plan, mode)."""
    out: list[tuple[str, str, Any]] = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if os.path.ismount(entry.path):
            kind = "mount-dir" if entry.is_dir(follow_symlinks=False) else "mount-file"
            out.append((entry.name, kind, _clone(entry.path)))
        elif entry.is_symlink():
            out.append((entry.name, "link", os.readlink(entry.path)))
        elif entry.is_dir(follow_symlinks=False):
            mode = entry.stat(follow_symlinks=False).st_mode & 0o7777
            out.append((entry.name, "dir", (_plan(entry.path), mode)))
        # A plain file on bwrap's tmpfs is none of bwrap's doing: it is not carried over.
    return out


def _build(folder: str, plan: list[tuple[str, str, Any]]) -> None:
    for name, kind, detail in plan:
        path = os.path.join(folder, name)
        if kind == "link":
            os.symlink(detail, path)
        elif kind == "dir":
            os.mkdir(path)
            os.chmod(path, detail[1])
            _build(path, detail[0])
        else:
            if kind == "mount-dir":
                os.mkdir(path, 0o755)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            try:
                _check(
                    _c().syscall(_SYS_MOVE_MOUNT, detail, b"", -100, path.encode(),
                                 _MOVE_MOUNT_F_EMPTY_PATH),
                    f"move_mount {path}",
                )  # fmt: skip
            finally:
                os.close(detail)


def _renew(folder: str) -> None:
    """Mount a fresh tmpfs on `folder` that holds what bwrap put in the old one (nothing the
    earlier commands wrote there)."""
    mode = os.stat(folder).st_mode & 0o7777
    plan = _plan(folder)
    try:
        _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode={mode:o}")
        _build(folder, plan)
    finally:
        _close_plan(plan)


def _close_plan(plan: list[tuple[str, str, Any]]) -> None:
    for _, kind, detail in plan:
        if kind.startswith("mount"):
            try:  # noqa: SIM105
                os.close(detail)
            except OSError:
                pass  # moved and closed already
        elif kind == "dir":
            _close_plan(detail[0])


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        import fcntl

        name = b"lo".ljust(16, b"\0")
        flags = struct.unpack_from("H", fcntl.ioctl(sock, _SIOCGIFFLAGS, name + bytes(24)), 16)[0]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, name + struct.pack("H", flags | _IFF_UP) + bytes(22))


def enter(fresh: dict[str, Any]) -> None:
    """In pid 1 of the command's pid namespace: its own mount, IPC, UTS (and network)
    namespaces, a fresh /tmp, /dev and /proc, then no capability left (see the module)."""
    _unshare(_CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWUTS | (_CLONE_NEWNET if fresh["net"] else 0))
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    if fresh["tmp"] == "rw":  # a read-only /tmp holds nothing a command could leave
        _renew("/tmp")
    # The resident's /dev is read-only (`--remount-ro /dev`): only /dev/shm is written to.
    mode = os.stat("/dev/shm").st_mode & 0o7777
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode={mode:o}")
    _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC,
           "newinstance,ptmxmode=0666,mode=620")  # fmt: skip
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for name in _PROC_COVERS:
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, _MS_BIND | _MS_REC)
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    if fresh["net"]:
        _loopback_up()
    drop_capabilities()  # the caller then goes to its folder, through the new mounts
    # Dumpable again, as a process bwrap starts is: without capabilities it is no target, and
    # the launcher's supervisor must be able to take its child's seccomp listener.
    _check(_c().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def drop_capabilities() -> None:
    """No capability left, for this process and whatever it execs (fails closed)."""
    import launcher  # the resident has it loaded

    launcher._drop_capabilities()
    with open("/proc/self/status") as status:
        left = [line for line in status if line.startswith("Cap") and int(line.split()[1], 16)]
    if left:
        raise OSError(0, f"capabilities are left after dropping them: {left}")
