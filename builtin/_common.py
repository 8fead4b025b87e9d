"""Helpers every builtin tool module shares, so that each rule lives in one place.

- options: one parser for the `builtins:` option blocks, so every tool words its errors alike;
- paths: every path goes through the sandbox's `confine_path` and is shown workspace-relative;
- the read-before-write guard of `write`, `edit` and `apply_patch` (stamps in `ctx.state`);
- atomic writes (synced temp file beside the target, then rename) and lossless UTF-8 text;
- blocking file work runs in a worker thread.

The builtins import only top-level `toolnexus`, so the "did you mean" here is their own copy of
`toolnexus._suggest.did_you_mean`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread

from toolnexus import ConfigError, Result, ToolContext, ToolError, confine_path

_STAMPS_KEY = "builtin.files.read_stamps"
"""`ctx.state` key: {resolved path: (mtime_ns, size)} as seen by the last read or write."""

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


def confine(ctx: ToolContext, path: str, *, write: bool) -> Path:
    """`path` resolved and checked against the workspace, roots and sandbox policy."""
    if not path.strip():
        raise ToolError("the path is empty; give a file path relative to the workspace")
    return confine_path(
        path, workspace=ctx.workspace, roots=ctx.roots, policy=ctx.sandbox, write=write
    )


def display(ctx: ToolContext, path: Path) -> str:
    """`path` relative to the workspace when inside it (shorter, and what the model wrote)."""
    try:
        return path.relative_to(ctx.workspace.resolve()).as_posix()
    except ValueError:
        return str(path)


# --- the read-before-write guard ------------------------------------------------------------------


def _stamps(ctx: ToolContext) -> dict[str, tuple[int, int]]:
    stamps: dict[str, tuple[int, int]] = ctx.state.setdefault(_STAMPS_KEY, {})
    return stamps


def record_stamp(ctx: ToolContext, path: Path, st: os.stat_result) -> None:
    _stamps(ctx)[str(path)] = (st.st_mtime_ns, st.st_size)


def forget_stamp(ctx: ToolContext, path: Path) -> None:
    _stamps(ctx).pop(str(path), None)


def check_guard(ctx: ToolContext, path: Path, st: os.stat_result, verb: str) -> None:
    """Refuse to change `path` unless this toolkit read it and it has not changed since."""
    stamp = _stamps(ctx).get(str(path))
    name = display(ctx, path)
    if stamp is None:
        raise ToolError(
            f"refusing to {verb} {name!r}: it exists and has not been read in this session. "
            f"Call read on it first, then retry."
        )
    if stamp != (st.st_mtime_ns, st.st_size):
        raise ToolError(
            f"refusing to {verb} {name!r}: it changed on disk since it was last read "
            f"(someone else may be editing it). Read it again, then retry with its new content."
        )


# --- atomic writes --------------------------------------------------------------------------------


def _temp_beside(path: Path) -> tuple[Path, int]:
    """A new temp file next to `path` (same filesystem, so the final rename is atomic).

    Created with mode 0o666 so the kernel applies the umask, as for any new file.
    """
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return tmp, fd
    raise ToolError(f"could not create a temporary file beside {path.name!r}; try again")


def write_temp(path: Path, data: bytes) -> Path:
    """Write `data` to a synced temp file beside `path`, with `path`'s mode if it exists."""
    tmp, fd = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


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
