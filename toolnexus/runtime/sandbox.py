"""Sandbox policies and how they are enforced: one policy object for processes and file tools.

A `SandboxPolicy` says what a tool may touch. The same object drives two enforcement paths, so
one manifest line means the same thing for the builtin `read` tool and for `cat` in a shell:

- **In-process file tools** call `confine_path`, which resolves a path the way the kernel would
  (`..`, symlinks, `/proc/self/root`) and refuses what lies outside the workspace roots, what
  `deny_read` covers, and writes the policy does not allow.
- **Processes** (shell tools, stdio MCP servers) are started through `wrap_command`, a pure
  argv + environment transformation: bubblewrap when it works here, Landlock (applied by a small
  launcher in the child, never in the toolkit's process) otherwise. Resource limits are set by the
  same launcher through rlimits in both chains. With the network off the launcher (inside bwrap
  too) also forks a small supervisor that answers, through seccomp user notification, the
  command's `connect()` calls on Unix-domain sockets and, under Landlock, the writes Landlock
  cannot grant in the folders on the way to a protected path (see `launcher`).

A policy that cannot be enforced is never silently ignored: with `required=True` the call fails
with `SandboxUnavailable` saying how to fix it; with `required=False` the process runs and
`WrappedCommand.unconfined` (or `.unenforced`) says what was not enforced.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import functools
import glob
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from .._suggest import did_you_mean
from ..errors import ConfigError, PathRefused, SandboxUnavailable
from . import freshns as _fresh
from . import launcher as _lx

_REFUSALS = (
    "eacces",
    "erofs",
    "eperm",
    "permission denied",
    "read-only file system",
    "operation not permitted",
)
"""How programs say the kernel refused a file operation (errno names, strerror texts)."""
_WHICH = "the `sandbox:` that applies (the entry's own, else `defaults.sandbox`)"
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])(/[^\s'\"`,;()\[\]{}<>|]+)")

__all__ = [
    "DEFAULT_ENV_ALLOW",
    "Mechanism",
    "MechanismStatus",
    "ResidentBwrap",
    "SandboxPolicy",
    "SandboxSupport",
    "WrappedCommand",
    "confine_path",
    "detect",
    "protected_git_paths",
    "wrap_command",
]

FilesystemMode = Literal["read-only", "workspace-write", "full"]
Mechanism = Literal["bwrap", "landlock", "none"]

DEFAULT_ENV_ALLOW: tuple[str, ...] = (
    "PATH", "HOME", "LANG", "LC_*", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL", "TZ",
)  # fmt: skip
"""Variables a sandboxed process inherits unless the policy says otherwise: enough for tools to
find programs and speak the user's locale, nothing that usually carries a secret."""

_FS_RANK: dict[FilesystemMode, int] = {"read-only": 0, "workspace-write": 1, "full": 2}
_KEYS = (
    "filesystem", "writable", "deny_read", "network", "env", "timeout", "max_output",
    "max_memory", "max_processes", "max_file_size", "required", "unix_sockets",
)  # fmt: skip
_ENV_KEYS = ("allow", "set")
# Variables some spawners add on their own (the MCP SDK's stdio client merges these into the
# environment it is given); the bwrap and Landlock chains remove the ones the policy did not keep.
_SPAWNER_DEFAULT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
_GLOB_CHARS = frozenset("*?[")


def _empty_env() -> Mapping[str, str]:
    return {}


@dataclass(frozen=True, kw_only=True)
class SandboxPolicy:
    """What a sandboxed tool may touch. Immutable; combine with `tighten`, derive with `replace`.

    Paths are absolute (`from_mapping` resolves relative entries against the manifest's folder),
    except `protected` entries, which may be relative to each writable root.
    """

    filesystem: FilesystemMode = "workspace-write"
    """`read-only`: nothing is writable. `workspace-write`: the workspace and `writable` are.
    `full`: no filesystem confinement beyond `deny_read` and `protected`."""
    writable: tuple[str, ...] = ()
    """Extra writable folders (absolute), on top of the workspace under `workspace-write`."""
    deny_read: tuple[str, ...] = ()
    """Absolute glob patterns (`**` spans folders) of paths that cannot be read or written at all;
    a pattern that matches a folder covers everything beneath it. `/**/name` matches at any
    depth."""
    network: bool | tuple[str, ...] = False
    """False: no network. True: unrestricted. A tuple of host names (or `*.domain` globs): only
    meaningful for HTTP tools, which check it in-process; process sandboxes reject it (see
    `check_process`) because no mechanism here can filter a process's traffic by host."""
    unix_sockets: tuple[str, ...] = ()
    """With `network: false`, the Unix-domain sockets outside the sandbox a process may still
    connect to (absolute paths, exactly). Every other one is refused, whatever its permissions:
    `/var/run/docker.sock` is root on the host. Sockets the process creates in its own temp
    folder stay reachable; `socketpair()` always works."""
    env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW
    """Names (or `fnmatch` globs such as `LC_*`) of inherited variables that pass through."""
    env_set: Mapping[str, str] = field(default_factory=_empty_env)
    """Variables set in the sandbox, whatever `env_allow` says."""
    timeout: float | None = None
    """Seconds before the process group is killed."""
    max_output: int | None = None
    """Bytes of output kept (head and tail)."""
    max_memory: int | None = None
    """Bytes of address space per process (RLIMIT_AS)."""
    max_processes: int | None = None
    """Processes of the user (RLIMIT_NPROC; Linux does not apply it to root)."""
    max_file_size: int | None = None
    """Largest file a process may write, in bytes (RLIMIT_FSIZE)."""
    required: bool = True
    """True: refuse to run when the policy cannot be enforced. False: run unconfined, marked."""
    protected: tuple[str, ...] = ()
    """Paths that stay read-only even inside writable roots (`.git/hooks`, `.git/config`, the
    manifest files). Relative entries are taken relative to every writable root. The toolkit
    fills this; manifests do not set it."""

    @classmethod
    def from_mapping(
        cls,
        mapping: Mapping[str, Any],
        *,
        base: SandboxPolicy | None = None,
        base_dir: Path,
        field_prefix: str = "sandbox",
    ) -> SandboxPolicy:
        """Build a policy from a manifest's `sandbox:` block, merged over `base`.

        Keys given in `mapping` replace those of `base` (the `defaults` policy); `env.allow` and
        `env.set` replace and extend respectively. Durations and sizes may be numbers or strings
        (`30s`, `512MB`).

        Raises:
            ConfigError: an unknown key or a bad value; `field` is `field_prefix.key`.
        """
        policy = base or cls()
        if not isinstance(mapping, Mapping):
            raise ConfigError(
                f"expected a mapping of sandbox settings, got {type(mapping).__name__}",
                field=field_prefix,
            )
        changes: dict[str, Any] = {}
        for key, value in mapping.items():
            where = f"{field_prefix}.{key}" if field_prefix else str(key)
            if key not in _KEYS:
                raise ConfigError(_unknown(str(key), _KEYS, "sandbox setting"), field=where)
            if key == "filesystem":
                if value not in _FS_RANK:
                    raise ConfigError(
                        f"expected one of read-only, workspace-write, full; got {value!r}"
                        + did_you_mean(str(value), _FS_RANK),
                        field=where,
                    )
                changes["filesystem"] = value
            elif key == "writable":
                changes["writable"] = tuple(_abspath(p, base_dir) for p in _str_list(value, where))
            elif key == "deny_read":
                changes["deny_read"] = tuple(
                    _deny_pattern(p, base_dir) for p in _str_list(value, where)
                )
            elif key == "network":
                changes["network"] = _network(value, where)
            elif key == "unix_sockets":
                changes["unix_sockets"] = _socket_paths(value, where, base_dir)
            elif key == "env":
                changes.update(_env_block(value, where, policy))
            elif key == "timeout":
                changes["timeout"] = _duration(value, where)
            elif key == "required":
                if not isinstance(value, bool):
                    raise ConfigError(f"expected true or false, got {value!r}", field=where)
                changes["required"] = value
            else:
                changes[key] = _size(value, where, allow_units=key != "max_processes")
        return replace(policy, **changes)

    def check_process(self, *, field_prefix: str = "sandbox") -> None:
        """Check that the policy can be enforced on a process, as shell and stdio MCP sources must
        at load time.

        Raises:
            ConfigError: `network` is a host list: no mechanism here filters a process's traffic
                by host, and pretending would be worse than refusing.
        """
        if isinstance(self.network, tuple):
            raise ConfigError(
                "a list of hosts cannot be enforced for a process (only HTTP tools filter by "
                "host); use network: false to cut the network or network: true to allow it",
                field=f"{field_prefix}.network" if field_prefix else "network",
            )

    def tighten(self, other: SandboxPolicy) -> SandboxPolicy:
        """The combination that is at least as strict as both policies on every aspect."""
        fs = min(self.filesystem, other.filesystem, key=_FS_RANK.__getitem__)
        return SandboxPolicy(
            filesystem=fs,
            writable=tuple(w for w in self.writable if _covered(w, other.writable))
            + tuple(
                w for w in other.writable if _covered(w, self.writable) and w not in self.writable
            ),
            deny_read=_union(self.deny_read, other.deny_read),
            network=_tighter_network(self.network, other.network),
            unix_sockets=_tighter_sockets(self, other),
            env_allow=tuple(n for n in self.env_allow if n in other.env_allow),
            env_set={**self.env_set, **other.env_set},
            timeout=_min_limit(self.timeout, other.timeout),
            max_output=_min_limit(self.max_output, other.max_output),
            max_memory=_min_limit(self.max_memory, other.max_memory),
            max_processes=_min_limit(self.max_processes, other.max_processes),
            max_file_size=_min_limit(self.max_file_size, other.max_file_size),
            required=self.required or other.required,
            protected=_union(self.protected, other.protected),
        )

    def loosens(self, other: SandboxPolicy) -> list[str]:
        """The aspects on which this policy is looser than `other`, each described in words.

        Used to refuse an include override that would loosen the rules it overrides.
        """
        out: list[str] = []
        if _FS_RANK[self.filesystem] > _FS_RANK[other.filesystem]:
            out.append(f"filesystem {self.filesystem} is looser than {other.filesystem}")
        if self.filesystem != "full":
            extra = [w for w in self.writable if not _covered(w, other.writable)]
            if extra and other.filesystem != "full":
                out.append(f"writable adds {', '.join(extra)}")
        missing = [p for p in other.deny_read if p not in self.deny_read]
        if missing:
            out.append(f"deny_read drops {', '.join(missing)}")
        dropped = [p for p in other.protected if p not in self.protected]
        if dropped:
            out.append(f"protected drops {', '.join(dropped)}")
        if _tighter_network(self.network, other.network) != self.network:
            out.append(f"network {self.network!r} is looser than {other.network!r}")
        elif self.network is False and other.network is False:
            extra_sockets = [u for u in self.unix_sockets if u not in other.unix_sockets]
            if extra_sockets:
                out.append(f"unix_sockets adds {', '.join(extra_sockets)}")
        extra_env = [n for n in self.env_allow if n not in other.env_allow]
        if extra_env:
            out.append(f"env.allow adds {', '.join(extra_env)}")
        for name in ("timeout", "max_output", "max_memory", "max_processes", "max_file_size"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is not None and (mine is None or mine > theirs):
                out.append(f"{name} {mine} is looser than {theirs}")
        if other.required and not self.required:
            out.append("required false is looser than required true")
        return out

    @property
    def confines_filesystem(self) -> bool:
        return self.filesystem != "full" or bool(self.deny_read or self.protected)

    @property
    def rlimits(self) -> dict[str, int]:
        """The rlimits the launcher sets, by `resource.RLIMIT_*` suffix."""
        limits = {"AS": self.max_memory, "NPROC": self.max_processes, "FSIZE": self.max_file_size}
        return {k: v for k, v in limits.items() if v is not None}

    def writable_roots(self, workspace: Path) -> list[Path]:
        """Resolved folders a process may write to (empty under `read-only`)."""
        if self.filesystem == "read-only":
            return []
        if self.filesystem == "full":
            return [Path("/")]
        return _dedupe([_real(workspace), *(_real(Path(w)) for w in self.writable)])

    def protected_paths(self, workspace: Path) -> list[Path]:
        """Resolved protected paths: absolute entries, and relative ones under each writable root
        (the workspace too, whatever the mode, since file tools write there)."""
        roots = _dedupe([_real(workspace), *(_real(Path(w)) for w in self.writable)])
        out: list[Path] = []
        for entry in self.protected:
            p = Path(entry).expanduser()
            out.extend([_real(p)] if p.is_absolute() else [_real(r / p) for r in roots])
        return _dedupe(out)

    def explain_refusal(self, output: str, workspace: Path) -> str | None:
        """Why a confined process's own error is likely the sandbox's doing, in words, with the
        manifest key that would allow it; None when its output names no path the policy keeps
        from it.

        A server that fails with its own `EACCES ... memory.jsonl` says nothing of the sandbox:
        this reads the output for a refusal (`EACCES`, `EROFS`, `EPERM`, "permission denied",
        "read-only file system", or `ENOENT` on a `deny_read` path) naming an absolute path
        that the policy does not let it write (or read), and says so.
        """
        roots = self.writable_roots(workspace)
        protected = self.protected_paths(workspace)
        for line in output.splitlines():
            lowered = line.lower()
            missing = "enoent" in lowered or "no such file" in lowered
            if not missing and not any(word in lowered for word in _REFUSALS):
                continue
            for found in _ABSOLUTE_PATH.findall(line):
                path = Path(found.rstrip(".:"))
                pattern = self.denied(path)
                if pattern is not None:
                    return (
                        f"the sandbox hides {path} from it: `deny_read` has {pattern!r}; remove "
                        f"that pattern from {_WHICH}, if it may read it"
                    )
                if missing:
                    continue
                real = _real(path)
                if any(real == p or real.is_relative_to(p) for p in protected):
                    return (
                        f"the sandbox keeps {path} read-only: it is protected (.git, the "
                        "manifest files), whatever `writable` says"
                    )
                if any(real.is_relative_to(r) for r in roots):
                    continue
                folder = real.parent
                if self.filesystem == "read-only":
                    allow = (
                        f"set `filesystem: workspace-write` in {_WHICH} (the "
                        f"workspace {_real(workspace)} becomes writable), and add "
                        f"`writable: [{folder}]` for a folder outside it"
                    )
                else:
                    allow = f"add `writable: [{folder}]` to {_WHICH}"
                return (
                    f"the sandbox (filesystem: {self.filesystem}) does not let it write {path}, "
                    f"which is outside the folders it may write ("
                    + (", ".join(str(r) for r in roots) or "none")
                    + f"); {allow}, or point the program at a file in the workspace"
                )
        return None

    def denied(self, path: Path) -> str | None:
        """The `deny_read` pattern that covers `path` (absolute), if any."""
        text = str(path)
        for pattern in self.deny_read:
            if _pattern_regex(pattern).match(text):
                return pattern
        return None

    def environment(
        self, base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The environment a sandboxed process gets: allowed names from `base` (default
        `os.environ`), then `env_set`, then `extra` (what the tool itself sets)."""
        source = os.environ if base is None else base
        allowed = _names_regex(self.env_allow).match
        env = {k: v for k, v in source.items() if allowed(k)}
        env.update(self.env_set)
        env.update(extra or {})
        return env


# --- policy parsing helpers ------------------------------------------------------------------


def _unknown(name: str, choices: Iterable[str], what: str) -> str:
    return f"unknown {what} {name!r}; expected one of {', '.join(choices)}" + did_you_mean(
        name, choices
    )


def _str_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"expected a list of strings, got {value!r}", field=where)
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise ConfigError(f"expected a non-empty string, got {item!r}", field=f"{where}[{i}]")
    return list(value)


def _abspath(entry: str, base_dir: Path) -> str:
    p = Path(entry).expanduser()
    return os.path.normpath(p if p.is_absolute() else base_dir / p)


def _deny_pattern(entry: str, base_dir: Path) -> str:
    """Normalise a deny_read entry to an absolute pattern: a bare name or a `**/`-pattern matches
    at any depth (as in .gitignore), `~` is the home folder, other relative entries are relative
    to the manifest's folder."""
    if entry.startswith("**") or "/" not in entry.rstrip("/"):
        return "/" + entry.lstrip("/") if entry.startswith("**") else "/**/" + entry.rstrip("/")
    return _abspath(entry, base_dir)


def _network(value: Any, where: str) -> bool | tuple[str, ...]:
    if isinstance(value, bool):
        return value
    hosts = _str_list(value, where)
    for i, host in enumerate(hosts):
        if not re.fullmatch(r"(\*\.)?[A-Za-z0-9._-]+(:\d+)?", host):
            raise ConfigError(
                f"expected a host name such as api.example.com or *.example.com, got {host!r}",
                field=f"{where}[{i}]",
            )
    return tuple(h.lower() for h in hosts) if hosts else False


def _socket_paths(value: Any, where: str, base_dir: Path) -> tuple[str, ...]:
    entries = _str_list(value, where)
    for i, entry in enumerate(entries):
        if _GLOB_CHARS.intersection(entry):
            raise ConfigError(
                f"expected the exact path of a socket (no globs), got {entry!r}",
                field=f"{where}[{i}]",
            )
    return tuple(_abspath(e, base_dir) for e in entries)


def _tighter_sockets(a: SandboxPolicy, b: SandboxPolicy) -> tuple[str, ...]:
    """Sockets reachable under both: a side with the network on restricts nothing."""
    if a.network is not False:
        return b.unix_sockets
    if b.network is not False:
        return a.unix_sockets
    return tuple(u for u in a.unix_sockets if u in b.unix_sockets)


def _env_block(value: Any, where: str, base: SandboxPolicy) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected a mapping with allow and/or set, got {value!r}", field=where)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in _ENV_KEYS:
            raise ConfigError(_unknown(str(key), _ENV_KEYS, "env setting"), field=f"{where}.{key}")
        if key == "allow":
            out["env_allow"] = tuple(_str_list(item, f"{where}.allow"))
        else:
            if not isinstance(item, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str | int | float) for k, v in item.items()
            ):
                raise ConfigError(
                    f"expected a mapping of names to strings, got {item!r}", field=f"{where}.set"
                )
            out["env_set"] = {**base.env_set, **{k: str(v) for k, v in item.items()}}
    return out


def _duration(value: Any, where: str) -> float | None:
    """Seconds in a `timeout` as the manifest writes it (`30`, `500ms`, `2m`): it must be > 0."""
    if value is None:
        return None
    from ..manifest.units import parse_duration  # the manifest's reading of units, loaded late

    with contextlib.suppress(ValueError):  # worded below, with the value and the field
        if (seconds := parse_duration(value)) > 0:
            return seconds
    raise ConfigError(
        f"expected a positive duration such as 30, 500ms, 30s or 2m, got {value!r}", field=where
    )


def _size(value: Any, where: str, *, allow_units: bool) -> int | None:
    """Bytes in a limit (`512MB`, `1MiB`; only a plain count without `allow_units`), > 0."""
    if value is None:
        return None
    if allow_units:
        from ..manifest.units import parse_size  # the manifest's reading of units, loaded late

        with contextlib.suppress(ValueError):  # worded below, with the value and the field
            if (size := parse_size(value)) > 0:
                return size
    elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    expected = "a positive size such as 512MB or 1MiB" if allow_units else "a positive integer"
    raise ConfigError(f"expected {expected}, got {value!r}", field=where)


def _covered(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return a + tuple(x for x in b if x not in a)


_Limit = TypeVar("_Limit", int, float)


def _min_limit(a: _Limit | None, b: _Limit | None) -> _Limit | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _tighter_network(
    a: bool | tuple[str, ...], b: bool | tuple[str, ...]
) -> bool | tuple[str, ...]:
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    both = tuple(h for h in a if h in b)
    return both or False


@functools.lru_cache(maxsize=256)
def _names_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for `env_allow`'s glob patterns (case-sensitive, as `fnmatchcase`): the
    environment is filtered on every sandboxed call, a pattern at a time cost it 100 µs."""
    if not patterns:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{fnmatch.translate(pattern)})" for pattern in patterns))


@functools.lru_cache(maxsize=256)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regex for an absolute glob: `**` spans any number of folders, `*` and `?` stay within
    one name, and a match also covers everything beneath the matched path."""
    out = []
    for segment in pattern.strip("/").split("/"):
        if segment == "**":
            out.append("(?:/[^/]+)*")
        elif segment:
            out.append("/" + _segment_regex(segment))
    return re.compile("".join(out) + "(?:/.*)?", re.DOTALL)


def _segment_regex(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1 : end]
            neg = body[:1] in ("!", "^")
            out.append("[" + ("^" if neg else "") + re.escape(body[1:] if neg else body) + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


# --- workspace confinement for in-process file tools -----------------------------------------


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _dedupe(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def confine_path(
    path: str | os.PathLike[str],
    *,
    workspace: Path,
    roots: Sequence[Path] = (),
    policy: SandboxPolicy | None = None,
    write: bool = False,
) -> Path:
    """Resolve a path a file tool was given, or refuse it with a message the model can act on.

    Relative paths are taken from the workspace; `~` is the home folder; `..`, symlinks (also
    one planted inside the workspace that points out) and `/proc/self/root`-style links are
    followed the way the kernel would, up to the deepest part that exists, so a write target
    that does not exist yet is checked too. The result lies inside the workspace or one of
    `roots` (or of the policy's `writable` folders), is not covered by `deny_read`, and, for a
    write, is allowed by the policy's filesystem mode and not `protected`.

    Returns:
        The resolved absolute path.

    Raises:
        PathRefused: the path is outside the roots, denied, or not writable; the message says
            which and why.
    """
    given = os.fspath(path)
    if "\x00" in given:
        raise PathRefused(f"refused path {given!r}: it contains a NUL character")
    ws = _real(Path(workspace))
    raw = Path(given).expanduser()
    lexical = Path(os.path.normpath(raw if raw.is_absolute() else ws / raw))
    resolved = _real(lexical)
    allowed = _dedupe([ws, *(_real(Path(r)) for r in roots)])
    if policy is not None:
        allowed += [r for r in (_real(Path(w)) for w in policy.writable) if r not in allowed]
    if not any(_within(resolved, root) for root in allowed):
        via = f" (it resolves to {resolved})" if resolved != lexical else ""
        raise PathRefused(
            f"refused {given!r}: it is outside the workspace {ws}{via}; allowed folders: "
            f"{', '.join(map(str, allowed))}. Use a path inside one of them."
        )
    if policy is None:
        return resolved
    for candidate in _dedupe([lexical, resolved]):
        pattern = policy.denied(candidate)
        if pattern is not None:
            raise PathRefused(
                f"refused {given!r}: {candidate} is not readable under the sandbox policy "
                f"(deny_read {pattern!r}). Do not try to read or change it."
            )
    if write:
        _check_write(given, resolved, ws, policy)
    return resolved


def _check_write(given: str, resolved: Path, ws: Path, policy: SandboxPolicy) -> None:
    if policy.filesystem == "read-only":
        raise PathRefused(
            f"refused to write {given!r}: the sandbox policy is read-only; nothing can be "
            "created or changed."
        )
    writable = policy.writable_roots(ws)
    if policy.filesystem == "workspace-write" and not any(
        _within(resolved, root) for root in writable
    ):
        raise PathRefused(
            f"refused to write {given!r} ({resolved}): only the workspace and the writable "
            f"folders can be written ({', '.join(map(str, writable))})."
        )
    for protected in policy.protected_paths(ws):
        if _within(resolved, protected):
            raise PathRefused(
                f"refused to write {given!r}: {protected} is protected and stays read-only "
                "(git internals and the manifest files cannot be changed by tools)."
            )


# --- git metadata --------------------------------------------------------------------------

_GIT_SCAN_TTL = 5.0
_git_scans: dict[tuple[Path, tuple[Path, ...]], tuple[float, list[Path]]] = {}
"""Scans by (base, all bases): which gitfile targets count depends on every base, not only on
the one walked."""


def protected_git_paths(workspace: Path, roots: Sequence[Path] = ()) -> list[Path]:
    """The git metadata a sandboxed command may not change: every repository's `.git` (folder or
    gitfile) found in the workspace and in `roots`, at any depth, and the git folders those
    gitfiles (and their `commondir`) point to inside them; and every folder git takes for a git
    directory though no `.git` names it (`_git_directory`: bare repositories, a `HEAD` plus
    `commondir`, a linked worktree's git directory), with the common directory it names.

    Whole `.git` folders, not only `config`, `hooks/`, `commondir` and `objects/info/alternates`:
    git reads `commondir` (and `config.worktree`) whenever the file *exists*, and neither a bind
    mount nor Landlock can forbid creating one name in a folder git must write to (`index.lock`
    sits beside them). So, as in Codex, git commands that write (add, commit) fail inside the
    sandbox; reading ones work. Repositories created after the scan are not covered: whoever
    runs git outside the sandbox must still check for redirects. The scan walks the trees (it
    does not follow symlinks nor enter `.git`) and is reused for a few seconds.
    """
    bases = _dedupe([_real(Path(workspace)), *(_real(Path(r)) for r in roots)])
    out: list[Path] = []
    for base in bases:
        out += _git_entries(base, bases)
    return _dedupe(out)


def _git_entries(base: Path, bases: Sequence[Path]) -> list[Path]:
    now = time.monotonic()
    key = (base, tuple(bases))
    cached = _git_scans.get(key)
    if cached is not None and now - cached[0] < _GIT_SCAN_TTL:
        return cached[1]
    found: list[Path] = []
    stack = [base]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        names = {entry.name for entry in entries}
        if "HEAD" in names and folder.name != ".git":
            found += _git_directory(folder, bases)
        for entry in entries:
            if entry.name == ".git":
                found += _git_metadata(Path(entry.path), bases)
            elif entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    if len(_git_scans) >= 64:  # workspaces come and go (tests, temp folders): keep it small
        _git_scans.clear()
    _git_scans[key] = (now, found)
    return found


_GITDIR_ENTRIES = (
    "HEAD", "commondir", "config", "config.worktree", "gitdir", "hooks", "objects", "refs",
    "info", "worktrees", "modules", "packed-refs",
)  # fmt: skip
"""What a git directory that is also a writable root keeps read-only: what makes git take it
for one (HEAD, commondir, objects, refs) and what names programs or other repositories."""


def _git_directory(folder: Path, bases: Sequence[Path]) -> list[Path]:
    """A folder git takes for a git directory though no `.git` names it (a bare repository, a
    linked worktree's `worktrees/<id>`, a `HEAD` plus `commondir`: `is_git_directory` in git's
    setup.c, HEAD's content not checked): protected whole like a `.git` folder, with the
    common directory its `commondir` names when that lies inside `bases`. A writable root that
    is one keeps only its git entries read-only (the rest stays the workspace)."""
    pointer = folder / "commondir"
    common = folder
    if pointer.exists():
        try:
            common = _real(folder / pointer.read_text("utf-8").strip())
        except (OSError, UnicodeDecodeError):
            common = folder  # git would fail to read it too; protect what is here
    if not all((common / name).exists() for name in ("objects", "refs")):
        return []
    out = [folder / n for n in _GITDIR_ENTRIES] if folder in bases else [folder]
    if common != folder and any(_within(common, b) for b in bases):
        out += [common / n for n in _GITDIR_ENTRIES] if common in bases else [common]
    return out


def _git_metadata(dot_git: Path, bases: Sequence[Path]) -> list[Path]:
    """`.git` itself and, for a gitfile, the folders it redirects to that lie inside `bases`."""
    out = [dot_git]
    if dot_git.is_symlink() or not dot_git.is_file():
        return out
    with contextlib.suppress(OSError, UnicodeDecodeError):
        first = dot_git.read_text("utf-8").splitlines()[0]
        if first.startswith("gitdir:"):
            target = _real(dot_git.parent / first[len("gitdir:") :].strip())
            common = target / "commondir"
            linked = [target]
            if common.is_file():
                linked.append(_real(target / common.read_text("utf-8").strip()))
            out += [t for t in linked if t.is_dir() and any(_within(t, b) for b in bases)]
    return out


# --- detection -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MechanismStatus:
    """Whether one enforcement mechanism works on this machine, and why not."""

    available: bool
    reason: str
    """Why it is available (version, ABI) or what is missing and how to fix it."""
    detail: str | None = None
    """The bwrap path, or the Landlock ABI version as text."""


@dataclass(frozen=True, kw_only=True)
class SandboxSupport:
    """What `detect()` found: one status per mechanism, bubblewrap preferred."""

    bwrap: MechanismStatus
    landlock: MechanismStatus
    landlock_abi: int = 0
    """The kernel's Landlock ABI version (0 when unavailable or disabled)."""
    euid: int = 0
    """The toolkit's effective uid: RLIMIT_NPROC does not bind root."""

    @property
    def best(self) -> Mechanism:
        if self.bwrap.available:
            return "bwrap"
        return "landlock" if self.landlock.available else "none"


_DISABLE_ENV = "TOOLNEXUS_SANDBOX_DISABLE"
_INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)


@functools.cache
def detect() -> SandboxSupport:
    """Find out once which mechanisms work here (clear with `detect.cache_clear()`).

    `TOOLNEXUS_SANDBOX_DISABLE=bwrap,landlock` (read here) turns mechanisms off, for tests and
    for machines where one misbehaves.
    """
    disabled = {p.strip() for p in os.environ.get(_DISABLE_ENV, "").split(",") if p.strip()}
    abi = 0 if "landlock" in disabled else _lx.landlock_abi()
    return SandboxSupport(
        bwrap=_detect_bwrap(disabled),
        landlock=_landlock_status(disabled, abi),
        landlock_abi=abi,
        euid=os.geteuid() if hasattr(os, "geteuid") else -1,
    )


def _detect_bwrap(disabled: set[str]) -> MechanismStatus:
    if "bwrap" in disabled:
        return MechanismStatus(available=False, reason=f"disabled by {_DISABLE_ENV}")
    if not sys.platform.startswith("linux"):
        return MechanismStatus(available=False, reason=f"bubblewrap is Linux-only ({sys.platform})")
    exe = shutil.which("bwrap")
    if exe is None:
        return MechanismStatus(available=False, reason=f"bwrap is not on PATH: {_INSTALL_HINT}")
    probe = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--unshare-net", "--die-with-parent", "--cap-drop", "ALL", "--", "true"]  # fmt: skip
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return MechanismStatus(available=False, reason=f"{exe} does not run: {exc}", detail=exe)
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip()
        return MechanismStatus(
            available=False,
            reason=f"{exe} cannot create namespaces here ({err or done.returncode}); allow "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run "
            "where they are allowed",
            detail=exe,
        )
    return MechanismStatus(available=True, reason=f"{exe} works", detail=exe)


def _landlock_status(disabled: set[str], abi: int) -> MechanismStatus:
    if "landlock" in disabled:
        return MechanismStatus(available=False, reason=f"disabled by {_DISABLE_ENV}")
    if abi <= 0:
        return MechanismStatus(
            available=False,
            reason="the kernel offers no Landlock (Linux >= 5.13 with landlock in the lsm= list)",
        )
    return MechanismStatus(available=True, reason=f"Landlock ABI {abi}", detail=str(abi))


# --- enforcement -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WrappedCommand:
    """A command rewritten to run under a policy: spawn `argv` with exactly `env`."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(repr=False)
    """The complete environment to start `argv` with (values may be secrets: not in repr)."""
    mechanism: Mechanism
    unconfined: bool = False
    """True when the policy asked for confinement and the command runs without any."""
    unenforced: tuple[str, ...] = ()
    """Aspects of the policy not enforced (with `required=False`), e.g. `max_processes`."""
    cleanup: tuple[Path, ...] = ()
    """Folders created for this command (a private temp dir): remove them once it has ended."""
    resident: ResidentBwrap | None = None
    """Under bwrap: how a resident bwrap for this exact set of binds runs the command instead
    of a bwrap per call (`resident.py`, `freshns.py`)."""


@dataclass(frozen=True)
class ResidentBwrap:
    """A bwrap command split for a resident bwrap: `wrapper` starts the resident launcher
    inside the policy's binds and namespaces; per command, its fork runs `inner` in `cwd` with
    the per-command parts in `fresh` (`freshns.enter`). `identity` is every bind source's
    (device, inode): a path removed and made again needs a new resident, whose binds see it."""

    wrapper: tuple[str, ...]
    inner: tuple[str, ...]
    cwd: str
    fresh: Mapping[str, str | bool | None]
    identity: tuple[tuple[int, int] | None, ...]

    @property
    def key(self) -> str:
        """Everything that goes into the resident's bwrap command line, and what it binds."""
        return f"{self.wrapper!r} {self.identity!r} {dict(self.fresh)!r}"


def wrap_command(
    argv: Sequence[str],
    policy: SandboxPolicy,
    *,
    workspace: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> WrappedCommand:
    """Rewrite `argv` so that it runs under `policy`, as argv + environment only (so spawners
    that cannot run code in the child, such as the MCP SDK's stdio client, can use it too).

    Args:
        argv: The command.
        policy: What it may touch.
        workspace: The toolkit's workspace (writable under `workspace-write`).
        cwd: The folder the command starts in.
        env: Variables the tool itself sets (they pass whatever `env_allow` says).
        base_env: Where allowed variables are inherited from (default `os.environ`).

    Raises:
        ConfigError: the policy has a network host list (see `SandboxPolicy.check_process`).
        SandboxUnavailable: `required` and no mechanism here can enforce the policy.
    """
    if not argv:
        raise ConfigError("the command is empty", field="command")
    policy.check_process()
    support = detect()
    child_env = policy.environment(base_env, env)
    unenforced: tuple[str, ...] = ()
    if policy.max_processes is not None and support.euid == 0:
        unenforced = (
            "max_processes (enforced with RLIMIT_NPROC, which Linux does not apply to root: run "
            "the toolkit as an ordinary user or drop max_processes)",
        )
    mechanism: Mechanism = "none"
    problems: dict[str, str] = {}
    lacking = _seccomp_lacks(policy)
    if support.bwrap.available and not lacking:
        mechanism = "bwrap"
    else:
        problems["bwrap"] = lacking or support.bwrap.reason
        if support.landlock.available and not lacking:
            mechanism = "landlock"
        else:
            problems["landlock"] = lacking or support.landlock.reason
    if policy.required and (unenforced or mechanism == "none"):
        why = unenforced[0] if unenforced else "; ".join(f"{k}: {v}" for k, v in problems.items())
        fix = "" if unenforced else f"{_INSTALL_HINT}, or "
        raise SandboxUnavailable(
            f"cannot enforce the sandbox policy here: {why}. Fix: {fix}set `required: false` in "
            "the sandbox block to run anyway (the result is then marked)."
        )
    if mechanism == "bwrap" and support.bwrap.detail:
        wrapped = _bwrap(
            argv,
            policy=policy,
            workspace=workspace,
            cwd=cwd,
            env=child_env,
            exe=support.bwrap.detail,
        )
    elif mechanism == "landlock":
        wrapped = _landlock(argv, policy, workspace, child_env, support.landlock_abi)
    else:
        return WrappedCommand(
            argv=tuple(argv),
            env=child_env,
            mechanism="none",
            unconfined=True,
            unenforced=("everything but the environment allow-list and time/output limits",),
        )
    return replace(wrapped, unenforced=unenforced) if unenforced else wrapped


def _launcher(config: Mapping[str, Any]) -> list[str]:
    """`python -I -S <launcher> <json> --`: isolated mode keeps the child's environment and the
    user's site-packages out of the launcher, and running the file by path works inside bwrap."""
    return [sys.executable, "-I", "-S", _lx.__file__, json.dumps(config, separators=(",", ":")),
            "--"]  # fmt: skip


def _program_paths(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Where the program and the Python it may be start from: the program's file, this
    interpreter's prefixes and import path, and toolnexus itself (isolated python tools)."""
    paths = [sys.prefix, sys.base_prefix, _TOOLNEXUS_ROOT, *(p for p in sys.path if p)]
    if argv:
        found = shutil.which(argv[0], path=env.get("PATH", os.defpath))
        if found is not None:
            paths.append(found)
    return paths


_TOOLNEXUS_ROOT = str(Path(__file__).resolve().parents[2])


def _host_tmp_entries(needed: Iterable[str | Path]) -> list[str]:
    """The top-level entries of the host's /tmp that hold a needed path (a handful, however
    busy /tmp is: each bind costs bwrap time). Plain strings: this runs on every bwrap call."""
    entries = set()
    for path in needed:
        absolute = os.path.abspath(path)
        if absolute.startswith("/tmp/"):
            entries.add("/tmp/" + absolute[5:].partition("/")[0])
    return sorted(entry for entry in entries if entry != "/tmp/" and os.path.exists(entry))


def _bwrap(
    argv: Sequence[str],
    *,
    policy: SandboxPolicy,
    workspace: Path,
    cwd: Path,
    env: dict[str, str],
    exe: str,
) -> WrappedCommand:
    ws = _real(workspace)
    args = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--cap-drop", "ALL"]  # fmt: skip
    if policy.network is False:
        # The launcher's supervisor is pid 1: no unfiltered bwrap init the command could trace.
        args += ["--unshare-net", "--as-pid-1"]
    if policy.filesystem == "full":
        args += ["--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    else:
        # A private /tmp: nothing a command writes there survives it or leaks to the host.
        # What the command needs from the host's /tmp comes back read-only: a workspace, a
        # clone and its virtualenv, this interpreter and toolnexus itself may live there.
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        env["TMPDIR"] = "/tmp"
        for entry in _host_tmp_entries([ws, _real(cwd), *_program_paths(argv, env)]):
            args += ["--ro-bind", entry, entry]
        for root in policy.writable_roots(ws):
            if root.exists():
                args += ["--bind", str(root), str(root)]
        if policy.filesystem == "read-only":
            args += ["--remount-ro", "/tmp"]
    for path in _protected(policy, ws):
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for path in _expand_denied(policy, ws):
        blank = _blank_dir() if path.is_dir() else _blank_file()
        args += ["--ro-bind", str(blank), str(path)]
    for name in _SPAWNER_DEFAULT_ENV:
        if name not in env:
            args += ["--unsetenv", name]
    if policy.network is False and policy.filesystem != "full":
        # Listed sockets under the host's /tmp must show through the private one.
        for sock in _host_tmp_entries(Path(u) for u in policy.unix_sockets):
            args += ["--ro-bind", sock, sock]
    prefix = list(args)
    args += ["--chdir", str(_real(cwd))]
    args.append("--")
    inner_at = len(args)
    if policy.network is False:
        # Abstract sockets are already the sandbox's own (a network namespace has its own);
        # pathname ones are checked by the launcher's supervisor.
        private = "/tmp" if policy.filesystem == "workspace-write" else None
        args += _launcher({"rlimits": policy.rlimits, "unix": _unix_config(policy, private)})
    elif policy.rlimits:
        # util-linux prlimit is a small C program; the Python launcher costs ~20 ms more.
        prlimit = shutil.which("prlimit")
        if prlimit is None:
            args += _launcher({"rlimits": policy.rlimits})
        else:
            args += [prlimit, *(f"--{k.lower()}={v}" for k, v in policy.rlimits.items()), "--"]
    tmp = {"full": None, "read-only": "ro"}.get(policy.filesystem, "rw")
    caps = [arg for cap in _fresh.CAPS for arg in ("--cap-add", cap)]
    resident = ResidentBwrap(
        wrapper=(*prefix, "--remount-ro", "/dev", *caps, "--chdir", "/", "--"),
        inner=(*args[inner_at:], *argv),
        cwd=str(_real(cwd)),
        fresh={"tmp": tmp, "net": policy.network is False, "init": policy.network is not False},
        identity=_bind_identity(prefix),
    )
    return WrappedCommand(argv=(*args, *argv), env=env, mechanism="bwrap", resident=resident)


def _bind_identity(args: Sequence[str]) -> tuple[tuple[int, int] | None, ...]:
    out: list[tuple[int, int] | None] = []
    for i, arg in enumerate(args[:-1]):
        if arg in ("--bind", "--ro-bind"):
            try:
                st = os.stat(args[i + 1])
            except OSError:
                out.append(None)
            else:
                out.append((st.st_dev, st.st_ino))
    return tuple(out)


def _unix_config(policy: SandboxPolicy, private: str | None) -> dict[str, Any]:
    """What the launcher's supervisor needs: the listed sockets and the private temp folder."""
    return {"allow": list(policy.unix_sockets), "private": private}


def _seccomp_lacks(policy: SandboxPolicy) -> str:
    """Both chains need the seccomp filter with the network off (Unix sockets; inet too under
    Landlock): without it the policy cannot be enforced."""
    if policy.network is False and os.uname().machine not in _lx.SECCOMP_MACHINES:
        return f"no seccomp filter for Unix-domain sockets on {os.uname().machine}"
    return ""


def _landlock(
    argv: Sequence[str],
    policy: SandboxPolicy,
    workspace: Path,
    env: dict[str, str],
    abi: int,
) -> WrappedCommand:
    ws = _real(workspace)
    config: dict[str, Any] = {"rlimits": policy.rlimits, "abi": abi}
    config["unset"] = [n for n in _SPAWNER_DEFAULT_ENV if n not in env]
    cleanup: list[Path] = []
    if policy.confines_filesystem:
        read, write = _lx.read_rights(abi), _lx.write_rights(abi)
        denied = _expand_denied(policy, ws)
        rules = _carve(Path("/"), denied, read, ancestor=_lx.READ_DIR)
        roots = policy.writable_roots(ws)
        if policy.filesystem == "workspace-write":
            # A private temp folder instead of the host's shared /tmp (removed by the spawner).
            tmp = Path(tempfile.mkdtemp(prefix="toolnexus-sbx-"))
            cleanup.append(tmp)
            env["TMPDIR"] = str(tmp)
            roots.append(tmp)
        excluded = _dedupe([*_protected(policy, ws), *denied])
        granted: list[tuple[str, int]] = []
        for root in roots:
            granted += _carve(root, excluded, write, ancestor=0)
        rules += [*granted, *((dev, _lx.WRITE_FILE) for dev in _WRITABLE_DEVICES)]
        config["fs"] = _lx.handled_fs(abi)
        config["rules"] = rules
        carved = any(_within(e, r) for e in excluded for r in roots)
        if carved and os.uname().machine in _lx.SECCOMP_MACHINES:
            # Landlock cannot grant the folders on the way to a protected path without granting
            # the path; the launcher's supervisor writes there for the command (see the broker).
            config["broker"] = {
                "roots": [str(r) for r in roots],
                "excluded": [str(e) for e in excluded],
            }
    if policy.network is False:
        config["net"] = _lx.NET_BIND_TCP | _lx.NET_CONNECT_TCP
        config["no_inet"] = True
        config["unix"] = _unix_config(policy, str(cleanup[0]) if cleanup else None)
    if abi >= 6:
        # Signals and abstract Unix sockets stay inside the sandbox's own domain.
        config["scope"] = _lx.SCOPE_SIGNAL | (
            _lx.SCOPE_ABSTRACT_UNIX_SOCKET if policy.network is False else 0
        )
    launcher = _launcher(config)
    if len(launcher[-2]) > _ARG_MAX:
        # One argument may not exceed 128 KiB (a folder with thousands of siblings on the way
        # to a denied path makes that many rules): the launcher reads a file instead.
        folder = cleanup[0] if cleanup else Path(tempfile.mkdtemp(prefix="toolnexus-sbx-"))
        if not cleanup:
            cleanup.append(folder)
        (folder / "launcher.json").write_text(launcher[-2])
        launcher[-2] = "@" + str(folder / "launcher.json")
    return WrappedCommand(
        argv=(*launcher, *argv),
        env=env,
        mechanism="landlock",
        cleanup=tuple(cleanup),
    )


_ARG_MAX = 100_000


def _protected(policy: SandboxPolicy, ws: Path) -> list[Path]:
    """The policy's protected paths and the git metadata of the workspace and writable folders
    (nothing to protect where nothing is writable)."""
    if policy.filesystem == "read-only":
        return policy.protected_paths(ws)
    writable = [Path(w) for w in policy.writable]
    return _dedupe([*policy.protected_paths(ws), *protected_git_paths(ws, writable)])


_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")


def _carve(
    root: Path, excluded: Sequence[Path], rights: int, *, ancestor: int
) -> list[tuple[str, int]]:
    """Landlock rules granting `rights` on `root` except beneath `excluded` paths.

    Landlock only grants (a right on a folder covers everything beneath it), so a hole is made
    by granting each sibling along the way instead of the folder that contains an excluded path;
    such folders get only `ancestor` rights (listing, for reads).
    """
    inside = [e for e in excluded if _within(e, root)]
    if not inside:
        if not root.exists():
            return []
        return [(str(root), rights if root.is_dir() else rights & _lx.FILE_RIGHTS)]
    if root in inside or not root.is_dir() or root.is_symlink():
        return []
    rules: list[tuple[str, int]] = [(str(root), ancestor)] if ancestor else []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return rules
    for entry in entries:
        if not entry.is_symlink():
            rules += _carve(Path(entry.path), inside, rights, ancestor=ancestor)
    return rules


def _expand_denied(policy: SandboxPolicy, ws: Path) -> list[Path]:
    """The existing paths `deny_read` covers, for mechanisms that work on concrete paths.

    Patterns that start at any depth (`/**/.env`) are looked for inside the workspace and the
    writable folders only (walking the whole filesystem for every command is not an option).
    """
    found: list[Path] = []
    bases = _dedupe([ws, *(_real(Path(w)) for w in policy.writable)])
    for pattern in policy.deny_read:
        if not _GLOB_CHARS.intersection(pattern):
            candidates = [pattern]
        elif pattern.startswith("/**/"):
            candidates = [
                hit
                for base in bases
                for hit in glob.glob(
                    glob.escape(str(base)) + pattern, recursive=True, include_hidden=True
                )
            ]
        else:
            candidates = glob.glob(pattern, recursive=True, include_hidden=True)
        for c in candidates:
            p = Path(c)
            if p.exists() or p.is_symlink():
                found.append(_real(p))
    # Only the outermost path matters when one denied path lies inside another.
    found = _dedupe(found)
    return [p for p in found if not any(q != p and _within(p, q) for q in found)]


@functools.cache
def _blanks() -> Path:
    """A private folder holding an unreadable empty file and folder, bound over denied paths."""
    folder = Path(tempfile.mkdtemp(prefix="toolnexus-deny-"))
    (folder / "file").touch(mode=0)
    (folder / "dir").mkdir(mode=0)
    os.chmod(folder / "file", 0)
    os.chmod(folder / "dir", 0)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _blank_file() -> Path:
    path = _blanks() / "file"
    if not path.exists() or stat.S_IMODE(path.stat().st_mode):
        raise SandboxUnavailable(f"the blank file {path} used to hide denied paths was changed")
    return path


def _blank_dir() -> Path:
    return _blanks() / "dir"
