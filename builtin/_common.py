"""Helpers every builtin tool module shares, so that each rule lives in one place.

- options: one parser for the `builtins:` option blocks, so every tool words its errors alike;
- paths: every path goes through the sandbox's `confine_path` and is shown workspace-relative;
- the read-before-write guard of `write`, `edit` and `apply_patch` (stamps in `ctx.state`);
- write locks: one writer at a time per file, across threads, toolkits and processes;
- refusals of read-only files and folders, and of git metadata (`_gitguard.py`);
- atomic writes (a synced unnamed file linked in by a rename, or a named temp file where the
  filesystem has none) that leave nothing behind a crash, and lossless UTF-8 text;
- blocking file work runs in a worker thread.

The builtins import only top-level `toolnexus`, so the "did you mean" here is their own copy of
`toolnexus._suggest.did_you_mean`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from toolnexus import ConfigError, Result, ToolContext, ToolError, confine_path

from ._gitguard import git_refusal

_STAMPS_KEY = "builtin.files.read_stamps"
"""`ctx.state` key: {resolved path: (device, inode, mtime_ns, size)} as seen by the last read or
write. The inode tells a file replaced by an atomic rename (ours, an editor's, another
process's) from the one that was read, even when the clock did not tick between the two."""

LOCK_WAIT_S = 30.0
"""How long a writer waits for another writer of the same file (or folder, across processes)."""

# --- options --------------------------------------------------------------------------------------


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`"; did you mean 'x'?"` naming the choice closest to `name`, or `""` when none is close."""
    import difflib  # only a mistake needs it

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_options(options: Mapping[str, Any], cls: type[Any], where: str) -> Any:
    """Build the options dataclass `cls` from a manifest mapping, refusing unknown keys.

    Shared by every builtin module so all of them word their option errors the same way.
    """
    known = {name: field.default for name, field in cls.__dataclass_fields__.items()}
    values: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known:
            raise ConfigError(
                f"unknown option {key!r} for the {where} tools{did_you_mean(key, known)} "
                f"(known: {', '.join(sorted(known))})",
                field=key,
            )
        default = known[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        if not ok:
            kind = "true or false" if isinstance(default, bool) else "a positive integer"
            raise ConfigError(f"expected {kind}, got {value!r}", field=key)
        values[key] = value
    return cls(**values)


# --- paths ----------------------------------------------------------------------------------------


def confine(ctx: ToolContext, path: str, *, write: bool, protect_git: bool = True) -> Path:
    """`path` resolved and checked against the workspace, roots and sandbox policy.

    A write is also checked against the git guard (unless `protect_git` is off), on both
    readings of the path: as resolved (symlinks followed, as the kernel will) and as written
    with `..` folded, so neither a symlink nor a `..` walks around it.
    """
    if not path.strip():
        raise ToolError("the path is empty; give a file path relative to the workspace")
    resolved = confine_path(
        path, workspace=ctx.workspace, roots=ctx.roots, policy=ctx.sandbox, write=write
    )
    if write and protect_git:
        raw = Path(path).expanduser()
        workspace = Path(os.path.realpath(ctx.workspace))
        lexical = Path(os.path.normpath(raw if raw.is_absolute() else workspace / raw))
        for reading in dict.fromkeys((resolved, lexical)):
            refuse_git_metadata(path, reading)
    return resolved


def refuse_git_metadata(
    given: str, path: Path, creating: frozenset[Path] = frozenset()
) -> None:
    """Raise the git guard's refusal of writing `path` (`given` as the model wrote it), with
    the other paths the same call creates counted as present (`_gitguard.git_refusal`)."""
    why = git_refusal(path, creating)
    if why is not None:
        raise ToolError(
            f"refused to change {given!r}: {why}. Git metadata like this can make git "
            f"run a program or read another repository, so the file tools leave it "
            f"alone. Use git itself for it (e.g. `git config`), or ask the user: they "
            f"can allow it with the option `protect_git: false` (builtins: "
            f"{{write: {{protect_git: false}}}}, and the same for apply_patch)."
        )


def display(ctx: ToolContext, path: Path) -> str:
    """`path` relative to the workspace when inside it (shorter, and what the model wrote)."""
    try:
        return path.relative_to(ctx.workspace.resolve()).as_posix()
    except ValueError:
        return str(path)


# --- the read-before-write guard ------------------------------------------------------------------


Stamp = tuple[int, int, int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    """What identifies one version of a file: device, inode, modification time and size."""
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def version_of(path: Path) -> Stamp | None:
    """`path`'s stamp now, or None when it does not exist."""
    try:
        return stamp_of(os.stat(path))
    except FileNotFoundError:
        return None


def _stamps(ctx: ToolContext) -> dict[str, Stamp]:
    stamps: dict[str, Stamp] = ctx.state.setdefault(_STAMPS_KEY, {})
    return stamps


def record_stamp(ctx: ToolContext, path: Path, st: os.stat_result) -> None:
    _stamps(ctx)[str(path)] = stamp_of(st)


def forget_stamp(ctx: ToolContext, path: Path) -> None:
    _stamps(ctx).pop(str(path), None)


def check_guard(ctx: ToolContext, path: Path, st: os.stat_result, verb: str) -> None:
    """Refuse to change `path` unless this toolkit read it and it has not changed since.

    Callers hold `write_lock(path)` and pass a stat taken under it, so no writer of this
    process or of another toolnexus process can slip in between this check and the rename.
    """
    stamp = _stamps(ctx).get(str(path))
    name = display(ctx, path)
    if stamp is None:
        raise ToolError(
            f"refusing to {verb} {name!r}: it exists and has not been read in this session. "
            f"Call read on it first, then retry."
        )
    if stamp != stamp_of(st):
        raise ToolError(
            f"refusing to {verb} {name!r}: it changed on disk since it was last read "
            f"(someone else may be editing it). Read it again, then retry with its new content."
        )


def check_writable(ctx: ToolContext, path: Path, st: os.stat_result | None, verb: str) -> None:
    """Refuse to replace or delete a read-only file, or to change a read-only folder's entries.

    Read-only means what `cp`, `rm -i` and editors go by: the kernel would refuse us, or the
    mode grants nobody write permission. The second rule holds for root too: a file or folder
    marked 0444/0555 was marked on purpose, even for a user the kernel lets through.
    """
    if st is not None and _read_only(path, st, os.W_OK):
        raise ToolError(
            f"refusing to {verb} {display(ctx, path)!r}: it is read-only (mode "
            f"{stat.S_IMODE(st.st_mode):04o}). Someone marked it so on purpose; ask the user "
            f"whether it may change (they can make it writable with `chmod u+w`)."
        )
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        folder_st = os.stat(folder)
    except OSError:
        return  # the write itself will fail and say why
    if stat.S_ISDIR(folder_st.st_mode) and _read_only(folder, folder_st, os.W_OK | os.X_OK):
        raise ToolError(
            f"refusing to {verb} {display(ctx, path)!r}: its folder {display(ctx, folder)!r} "
            f"is read-only (mode {stat.S_IMODE(folder_st.st_mode):04o}), so files in it cannot "
            f"be created, replaced or deleted. Ask the user whether it may change."
        )


def _read_only(path: Path, st: os.stat_result, mode: int) -> bool:
    return st.st_mode & 0o222 == 0 or not os.access(path, mode)


# --- write locks ----------------------------------------------------------------------------------


@dataclass(kw_only=True)
class _PathLock:
    lock: threading.Lock
    users: int = 0


_locks_guard = threading.Lock()
_locks: dict[str, _PathLock] = {}
"""One lock per resolved path being written, shared by every toolkit in the process; an entry
lives only while someone holds or waits for it."""


@contextlib.contextmanager
def write_lock(ctx: ToolContext, paths: Iterable[Path]) -> Iterator[None]:
    """Hold the write locks of `paths` (resolved): read, check and replace them under it.

    Two locks per file, always taken in one order (every thread lock, then every folder lock,
    each set sorted), so writers of overlapping file sets cannot deadlock:

    - in this process, a lock per resolved path, shared by all toolkits and threads;
    - across processes, an advisory `flock` on the file's folder (the nearest one that exists).
      The folder, not the file: an atomic rename gives the file a new inode, so a lock held on
      the old one would guard nothing, while the folder's inode stays. A lock file beside the
      target would show up in the user's tree. Only toolnexus writers take these locks; other
      programs are caught by the identity check just before the rename (`replace_checked`).

    Raises:
        ToolError: another writer held a lock for `LOCK_WAIT_S` seconds.
    """
    targets = sorted(set(paths), key=str)
    deadline = time.monotonic() + LOCK_WAIT_S
    with contextlib.ExitStack() as stack:
        for path in targets:
            stack.enter_context(_thread_lock(ctx, path, deadline))
        folders = sorted({_lock_folder(p) for p in targets}, key=str)
        for folder in folders:
            stack.enter_context(_folder_lock(ctx, folder, deadline))
        yield


def _busy(ctx: ToolContext, path: Path) -> ToolError:
    return ToolError(
        f"{display(ctx, path)!r} is being changed by another call that has held it for "
        f"{LOCK_WAIT_S:g} s; nothing was changed. Try again later."
    )


@contextlib.contextmanager
def _thread_lock(ctx: ToolContext, path: Path, deadline: float) -> Iterator[None]:
    key = str(path)
    with _locks_guard:
        entry = _locks.setdefault(key, _PathLock(lock=threading.Lock()))
        entry.users += 1
    try:
        if not entry.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise _busy(ctx, path)
        try:
            yield
        finally:
            entry.lock.release()
    finally:
        with _locks_guard:
            entry.users -= 1
            if entry.users == 0:
                del _locks[key]


def _lock_folder(path: Path) -> Path:
    folder = path.parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


@contextlib.contextmanager
def _folder_lock(ctx: ToolContext, folder: Path, deadline: float) -> Iterator[None]:
    """`flock` on `folder`, polled until `deadline` (a blocking flock could not time out).

    Where the folder cannot be opened or locked (no read permission, a filesystem without
    locks), only the in-process lock holds; closing the fd releases the lock.
    """
    delay = 0.001
    while True:
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ToolError(
                        f"another process is writing in the folder {display(ctx, folder)!r} "
                        f"and has held its lock for {LOCK_WAIT_S:g} s; nothing was changed. "
                        f"Try again later."
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
                continue
            except OSError:
                pass  # no locks on this filesystem
            else:
                # The folder may have been renamed away and replaced while we waited.
                with contextlib.suppress(OSError):
                    if os.stat(folder).st_ino != os.fstat(fd).st_ino:
                        continue
            yield
            return
        finally:
            os.close(fd)


# --- atomic writes --------------------------------------------------------------------------------


_O_TMPFILE: int = getattr(os, "O_TMPFILE", 0) if os.path.isdir("/proc/self/fd") else 0
"""`O_TMPFILE` where an unnamed file can be made and linked in (Linux, with /proc to link it
through); 0 elsewhere, and the named temp file is used instead."""

TEMP_GLOB = ".*.toolnexus-????????????.tmp"
"""The tools' own temp files as a glob: `glob` and `grep` never list them."""

_TEMP_NAME = re.compile(r"^\..+\.toolnexus-[0-9a-f]{12}\.tmp$")
"""The same, as the sweep recognises them: nothing of another name is ever removed."""


@dataclass(kw_only=True)
class Staged:
    """New content for `target`, written and synced, not yet in its place.

    The file is unnamed (`O_TMPFILE`) until `install`, so a crash while it is written leaves
    nothing; where the filesystem cannot make one, it is a named temp file beside the target.
    Either way the open `fd` holds an `flock` on it until it is installed or discarded: a
    named temp file whose lock is free was left by a writer that died, and the next write in
    that folder removes it (`sweep_leftovers`).
    """

    target: Path
    fd: int
    name: Path | None = None
    """The temp file's name while it has one (always, on the fallback; for the instant between
    link and rename, on `O_TMPFILE`)."""

    def install(self, dest: Path | None = None) -> None:
        """Put the content in place: rename it over `dest` (default: the target)."""
        if self.name is None:
            self.name = _link_beside(self.fd, self.target)
        os.replace(self.name, dest or self.target)
        self.name = None
        self.close()

    def discard(self) -> None:
        """Drop the content; the target is left as it is. Safe to call twice."""
        if self.name is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.name)
            self.name = None
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.toolnexus-{secrets.token_hex(6)}.tmp")


def _link_beside(fd: int, path: Path) -> Path:
    """Give the unnamed file `fd` a temp name beside `path` (the rename that follows needs a
    name: Linux has no link that replaces)."""
    for _ in range(100):
        name = _temp_name(path)
        try:
            _link_fd(fd, name)
        except FileExistsError:
            continue
        return name
    raise ToolError(f"could not create a temporary file beside {path.name!r}; try again")


def _link_fd(fd: int, name: Path) -> None:
    """Give the open file `fd` the name `name`: linkat through /proc with AT_SYMLINK_FOLLOW
    (which needs no privilege, unlike AT_EMPTY_PATH). Python passes that flag only when a
    `src_dir_fd` is given; a plain `os.link` of the /proc path would link the symlink itself."""
    proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(str(fd), name, src_dir_fd=proc, follow_symlinks=True)
    finally:
        os.close(proc)


def _open_temp(path: Path) -> tuple[int, Path | None]:
    """A new temp file for `path`, locked: unnamed where possible, else named beside it.

    Created with mode 0o666 so the kernel applies the umask, as for any new file.
    """
    if _O_TMPFILE:
        try:
            fd = os.open(path.parent, _O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return fd, None
    for _ in range(100):
        name = _temp_name(path)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        # Without locks on this filesystem the sweep never removes it (doubt keeps it).
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        # A sweep may have taken the name away between the open and the lock: take another.
        try:
            if os.stat(name, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return fd, name
        except FileNotFoundError:
            pass
        os.close(fd)
    raise ToolError(f"could not create a temporary file beside {path.name!r}; try again")


def sweep_leftovers(folder: Path) -> None:
    """Remove the temp files that writers killed mid-write left in `folder`.

    Only a file that is certainly ours and abandoned goes: its name matches the tools' strict
    pattern, it is a regular file of our user with one link, and its `flock` is free (a live
    writer holds it until its temp file is installed or discarded; the kernel frees it when a
    writer dies). Anything in doubt (locked, unreadable, another owner, a filesystem without
    locks) is kept.
    """
    try:
        entries = os.scandir(folder)
    except OSError:
        return
    with entries:
        names = [e.name for e in entries if e.name.startswith(".") and _TEMP_NAME.match(e.name)]
    for name in names:
        _remove_if_abandoned(folder / name)


def _remove_if_abandoned(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # held by a live writer, or no locks here
        now = os.stat(path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            os.unlink(path)
    except OSError:
        return
    finally:
        os.close(fd)


def write_temp(path: Path, data: bytes, like: os.stat_result | None = None) -> Staged:
    """Write `data` to a synced temp file for `path`, with the mode and owner of `like`
    (default: `path`'s, if it exists; the owner where we may set it: as root, or a group we
    belong to). Leftovers of killed writers in the folder are removed first.

    On any failure (a full disk, a size limit) the temp file is removed and `path` untouched.
    """
    sweep_leftovers(path.parent)
    fd, name = _open_temp(path)
    staged = Staged(target=path, fd=fd, name=name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        old = like
        if old is None:
            try:
                old = os.stat(path)
            except FileNotFoundError:
                old = None
        if old is not None:
            mine = os.fstat(fd)
            if (old.st_uid, old.st_gid) != (mine.st_uid, mine.st_gid):
                # Before chmod: chown clears set-id bits.
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, old.st_uid, old.st_gid)
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
    except BaseException:
        staged.discard()
        raise
    return staged


class Changed(ToolError):
    """The target changed under us (another program, not a toolnexus writer) while we wrote."""


def replace_checked(ctx: ToolContext, staged: Staged, path: Path, expected: Stamp | None) -> None:
    """Install `staged` over `path` if `path` is still the version we read (`expected`; None:
    it did not exist); otherwise discard it and raise `Changed`.

    Toolnexus writers are held off by `write_lock`; this catches other programs (an editor, a
    formatter), up to the instant between this check and the rename, which no POSIX call can
    close without the other program's cooperation.
    """
    if version_of(path) != expected:
        staged.discard()
        raise Changed(
            f"{display(ctx, path)!r} changed on disk while this call was writing it (another "
            f"program wrote it); nothing was written. Read it again, then retry."
        )
    try:
        staged.install(path)
    except BaseException:
        staged.discard()
        raise


def fsync_dir(folder: Path) -> None:
    """Make a rename durable: sync the folder entry (POSIX only; a no-op elsewhere)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- text -----------------------------------------------------------------------------------------


def looks_binary(head: bytes) -> bool:
    """NUL bytes in the first block: what git and grep use to call a file binary."""
    return b"\x00" in head


def decode_text(data: bytes) -> str:
    """UTF-8 text that round-trips: invalid bytes survive a later `encode_text` unchanged."""
    return data.decode("utf-8", "surrogateescape")


def encode_text(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def uses_crlf(text: str) -> bool:
    """True when every newline is CRLF (a mixed file is left exactly as it is)."""
    newlines = text.count("\n")
    return newlines > 0 and text.count("\r\n") == newlines


# --- threads --------------------------------------------------------------------------------------


async def in_thread(work: Callable[[], Result]) -> Result:
    """Run blocking file work off the event loop, so other calls keep flowing meanwhile."""
    return await anyio.to_thread.run_sync(work)
