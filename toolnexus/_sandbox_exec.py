"""The sandbox launcher: `python -I -S _sandbox_exec.py '<json>' -- argv...`.

It runs in the child, between the spawner and the real command: it removes environment
variables a spawner may have added, sets rlimits, applies Landlock (filesystem rights, TCP
bind/connect, scoping) and `execvp`s the command. Landlock restrictions cannot be undone, which is
why they are never applied in the toolkit's own process (nor in a `preexec_fn`, which is not
thread-safe). It fails closed: if anything cannot be applied, the command does not run.

This file is run by path with `python -I -S`, so it imports only the standard library. The
toolkit also imports it for the Landlock constants and the ABI probe.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
from typing import Any

__all__: list[str] = []

# Syscall numbers are the same on every architecture that has Landlock (asm-generic table).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
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


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


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
    _check(libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capset")


# seccomp: refuse socket(AF_INET/AF_INET6, ...) (UDP too, which Landlock's TCP rules miss) and
# io_uring (which can open sockets without the socket syscall); everything else is allowed.
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_EACCES = 13
_ARCHES = {  # machine -> (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup)
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}
SECCOMP_MACHINES = frozenset(_ARCHES)
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter)))


def _deny_inet_sockets() -> None:
    machine = os.uname().machine
    if machine not in _ARCHES:
        raise OSError(0, f"no seccomp network filter for {machine}")
    arch, nr_socket, nr_uring = _ARCHES[machine]
    deny = _SECCOMP_RET_ERRNO | _EACCES
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, arch),
        (_BPF_RET_K, 0, 0, deny),  # another ABI (32-bit compat): refuse the call
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_BPF_JGE_K, 0, 1, 0x40000000),
        (_BPF_RET_K, 0, 0, deny),  # x32 syscalls
        (_BPF_JEQ_K, 0, 1, nr_uring),
        (_BPF_RET_K, 0, 0, deny),
        (_BPF_JEQ_K, 0, 4, nr_socket),
        (_BPF_LD_W_ABS, 0, 0, 16),  # seccomp_data.args[0] (the address family), low half
        (_BPF_JEQ_K, 1, 0, 2),  # AF_INET
        (_BPF_JEQ_K, 0, 1, 10),  # AF_INET6
        (_BPF_RET_K, 0, 0, deny),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    ]
    filters = (_SockFilter * len(program))(*(_SockFilter(*ins) for ins in program))
    prog = _SockFprog(len(program), filters)
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(
        libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
        "prctl(PR_SET_SECCOMP)",
    )


def _set_rlimits(limits: dict[str, int]) -> None:
    for name, wanted in limits.items():
        which = getattr(resource, f"RLIMIT_{name}")
        _, hard = resource.getrlimit(which)
        value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(which, (value, value))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: _sandbox_exec.py '<json>' -- command [args...]", file=sys.stderr)
        return 2
    config: dict[str, Any] = json.loads(argv[1])
    command = argv[3:]
    for name in config.get("unset", ()):
        os.environ.pop(name, None)
    try:
        _set_rlimits(config.get("rlimits", {}))
        if "abi" in config:
            if os.geteuid() == 0:
                _drop_capabilities()
            _apply_landlock(config)
        if config.get("no_inet"):
            _deny_inet_sockets()
    except (OSError, ValueError) as exc:
        print(f"toolnexus sandbox: cannot confine the command: {exc}", file=sys.stderr)
        return 126
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        print(f"toolnexus sandbox: command not found: {command[0]}", file=sys.stderr)
        return 127
    except OSError as exc:
        print(f"toolnexus sandbox: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv))
