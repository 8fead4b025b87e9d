"""The file tools: `read`, `write` and `edit`.

They share one discipline, kept in `_common.py` so that `apply_patch` (`patch.py`) reuses it:

- every path goes through the sandbox's `confine_path` (workspace, extra roots, `deny_read`,
  read-only areas), so a manifest line means the same for `read` as for `cat` in the shell;
- reads stream: memory stays bounded whatever the file's size or line lengths;
- writes are atomic (an unnamed temp file in the same folder, fsync, rename; nothing is left
  behind a crash, see `Staged` in `_common.py`) and keep the file's mode
  and owner; a read-only file or folder is refused, as `cp` or an editor would;
- one writer at a time per file (`write_lock`): `edit` reads, checks and replaces the file
  under the lock, so concurrent edits each apply to the result of the one before, and none is
  lost; the rename itself checks that no other program changed the file meanwhile;
- the read-before-write guard: `write` and `edit` refuse to change a file this toolkit never
  read, or one that changed on disk since it was read (inode, mtime and size). It protects the
  user's concurrent edits from a model working from a stale view. Stamps live in `ctx.state`;
- git metadata that can make git run a program is refused (`_gitguard.py`, `protect_git`).
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from toolnexus import ImagePart, Result, Tool, ToolContext, ToolError

# builtin/search.py imports confine, display and parse_options from here under these names.
from ._common import (
    Stamp,
    check_guard,
    check_writable,
    confine,
    decode_text,
    display,
    encode_text,
    fsync_dir,
    in_thread,
    looks_binary,
    parse_options,
    record_stamp,
    replace_checked,
    stamp_of,
    uses_crlf,
    write_lock,
    write_temp,
)

__all__ = ["files_tools"]

_SNIFF_BYTES = 8192
_SKIP_CHUNK = 1 << 20
_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_LINE_NUMBER_PREFIX = re.compile(r"^ *\d+\t", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class _FileOptions:
    """The options of the file tools (`builtins: {read: {...}, edit: {...}}`), one flat set."""

    max_lines: int = 2000
    """Default and largest `limit` of `read`."""
    max_line_chars: int = 2000
    """Characters kept of each line by `read`; the rest is cut with a marker."""
    max_output_chars: int = 100_000
    """Bound on the text `read` returns; it stops early and says which offset to use next."""
    max_image_bytes: int = 10 * 1024 * 1024
    """Largest image `read` returns as an image part."""
    max_edit_bytes: int = 16 * 1024 * 1024
    """Largest file `edit` (and `apply_patch`) will load to rewrite."""
    require_read: bool = True
    """The read-before-write guard of `write` and `edit`."""
    protect_git: bool = True
    """Refuse to change git metadata that can make git run a program (`_gitguard.py`)."""


# --- paths ----------------------------------------------------------------------------------


def _not_found(ctx: ToolContext, path: Path) -> ToolError:
    """A 'no such file' error naming the closest sibling, when one looks like a typo."""
    hint = ""
    try:
        siblings = [p.name for p in path.parent.iterdir()]
    except OSError:
        siblings = []
    close = difflib.get_close_matches(path.name, siblings, n=1)
    if close:
        hint = f" Did you mean {display(ctx, path.parent / close[0])!r}?"
    elif not path.parent.exists():
        hint = f" Its folder {display(ctx, path.parent)!r} does not exist either."
    return ToolError(
        f"{display(ctx, path)!r} does not exist.{hint} Use glob to find files by name."
    )


# --- atomic writes --------------------------------------------------------------------------


def _atomic_write(
    ctx: ToolContext, path: Path, data: bytes, expected: Stamp | None, *, blind: bool = False
) -> os.stat_result:
    """Replace `path` with `data` atomically; returns the new stat. Call under `write_lock`.

    `expected` is the version read under the lock (None: absent), checked once more just
    before the rename, unless `blind` (a write without the read guard replaces what is there).

    Raises:
        ToolError: the write failed (full disk, permissions, a folder put in its place...),
            naming the file; the old file is left as it was and no temp file remains.
    """
    try:
        staged = write_temp(path, data)
        if blind:
            try:
                staged.install()
            except BaseException:
                staged.discard()
                raise
        else:
            replace_checked(ctx, staged, path, expected)
    except OSError as exc:
        kept = "the file was left as it was" if path.exists() else "nothing was written"
        raise _os_error(ctx, path, "write", exc, kept) from exc
    fsync_dir(path.parent)
    return os.stat(path)


def _os_error(ctx: ToolContext, path: Path, verb: str, exc: OSError, kept: str = "") -> ToolError:
    """An OS failure worded for the model (the errno text, not a traceback)."""
    reason = exc.strerror or str(exc)
    tail = f"; {kept}" if kept else ""
    return ToolError(f"could not {verb} {display(ctx, path)!r}: {reason}{tail}")


# --- text helpers ---------------------------------------------------------------------------


def _image_type(head: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _skip_lines(f: BinaryIO, count: int) -> int:
    """Advance `f` past `count` newlines reading 1 MiB at a time; returns how many it passed.

    This is what lets `read` reach line 20,000,000 of a huge file without holding it.
    """
    passed = 0
    while passed < count:
        start = f.tell()
        chunk = f.read(_SKIP_CHUNK)
        if not chunk:
            return passed
        found = chunk.count(b"\n")
        if passed + found < count:
            passed += found
            continue
        index = -1
        for _ in range(count - passed):
            index = chunk.index(b"\n", index + 1)
        f.seek(start + index + 1)
        return count
    return passed


def _read_line(f: BinaryIO, keep: int) -> tuple[bytes, bool] | None:
    """The next line's first `keep` bytes (without its newline) and whether it was cut.

    The rest of a long line is read and dropped in bounded pieces, so a 1 GB line costs no
    more memory than a short one. None at the end of the file.
    """
    head = f.readline(keep)
    if not head:
        return None
    if head.endswith(b"\n"):
        return head[:-1], False
    cut = False
    while True:
        rest = f.readline(_SKIP_CHUNK)
        if not rest:
            return head, cut
        cut = True
        if rest.endswith(b"\n"):
            return head, cut


def _line_text(raw: bytes, max_chars: int, cut: bool) -> str:
    text = raw.decode("utf-8", "replace")
    if text.endswith("\r"):
        text = text[:-1]
    if len(text) > max_chars or cut:
        return text[:max_chars] + f" [… line cut at {max_chars} characters]"
    return text


def _count_remaining_lines(f: BinaryIO, limit_bytes: int) -> int | None:
    """Lines left from the current position, or None if more than `limit_bytes` remain."""
    here = f.tell()
    size = os.fstat(f.fileno()).st_size
    if size - here > limit_bytes:
        return None
    count = 0
    last = b""
    while chunk := f.read(_SKIP_CHUNK):
        count += chunk.count(b"\n")
        last = chunk
    if last and not last.endswith(b"\n"):
        count += 1
    return count


# --- read -----------------------------------------------------------------------------------


def _read_sync(
    ctx: ToolContext, opts: _FileOptions, path_arg: str, offset: int, limit: int
) -> Result:
    path = confine(ctx, path_arg, write=False)
    name = display(ctx, path)
    try:
        f = _open_for_reading(path)
    except IsADirectoryError:
        raise ToolError(
            f"{name!r} is a directory, not a file. Use glob (e.g. pattern '{name}/*') to "
            f"list its files, then read one of them."
        ) from None
    except FileNotFoundError:
        raise _not_found(ctx, path) from None
    except OSError as exc:
        raise _os_error(ctx, path, "read", exc) from exc
    with f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(
                f"{name!r} is not a regular file (a device, socket or pipe); read only "
                f"reads regular files."
            )
        if st.st_size == 0:
            record_stamp(ctx, path, st)
            return Result(content=f"[notice] {name!r} exists but is empty (0 bytes).")
        head = f.read(_SNIFF_BYTES)
        mime = _image_type(head)
        if mime is not None:
            return _read_image(ctx=ctx, opts=opts, f=f, path=path, st=st, head=head, mime=mime)
        if looks_binary(head):
            raise ToolError(
                f"{name!r} looks like a binary file ({st.st_size} bytes, contains NUL bytes); "
                f"read only shows text and images (png, jpeg, gif, webp). Use the shell "
                f"(e.g. `file` or `xxd | head`) if you need to inspect it."
            )
        f.seek(0)
        passed = _skip_lines(f, offset - 1)
        if passed < offset - 1:
            total = passed + (1 if _ends_without_newline(f, st.st_size) else 0)
            record_stamp(ctx, path, st)
            return Result(
                content=f"[notice] offset {offset} is past the end of {name!r}, which has "
                f"{total} line{'s' if total != 1 else ''}. Use an offset between 1 and "
                f"{max(total, 1)}.",
                metadata={"total_lines": total},
            )
        return _read_lines(ctx=ctx, opts=opts, f=f, path=path, st=st, offset=offset, limit=limit)


def _open_for_reading(path: Path) -> BinaryIO:
    """Open without blocking: a FIFO with no writer would otherwise hang the call forever.

    The caller checks `fstat` on the open file (not the path, which could change in between)
    and refuses anything but a regular file.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return os.fdopen(fd, "rb")


def _ends_without_newline(f: BinaryIO, size: int) -> bool:
    """Whether the file's last line lacks a newline (it still counts as a line)."""
    f.seek(size - 1)
    return f.read(1) != b"\n"


def _read_lines(
    *,
    ctx: ToolContext,
    opts: _FileOptions,
    f: BinaryIO,
    path: Path,
    st: os.stat_result,
    offset: int,
    limit: int,
) -> Result:
    name = display(ctx, path)
    out: list[str] = []
    size = 0
    number = offset
    stopped_for_size = False
    keep_bytes = opts.max_line_chars * 4 + 1
    if (first := _read_line(f, keep_bytes)) is None:
        # offset lands exactly after the final newline: the line does not exist.
        total = offset - 1
        record_stamp(ctx, path, st)
        return Result(
            content=f"[notice] offset {offset} is past the end of {name!r}, which has {total} "
            f"lines. Use an offset between 1 and {max(total, 1)}.",
            metadata={"total_lines": total},
        )
    line: tuple[bytes, bool] | None = first
    while line is not None and len(out) < limit:
        text = f"{number:>6}\t{_line_text(line[0], opts.max_line_chars, line[1])}"
        if out and size + len(text) + 1 > opts.max_output_chars:
            stopped_for_size = True
            break
        out.append(text)
        size += len(text) + 1
        number += 1
        line = _read_line(f, keep_bytes)
    last = number - 1
    record_stamp(ctx, path, st)
    metadata: dict[str, Any] = {"first_line": offset, "last_line": last}
    if line is None:
        metadata["total_lines"] = last
        return Result(content="\n".join(out), metadata=metadata)
    # More lines follow: `line` was read but not shown, so it counts among the remaining.
    remaining = _count_remaining_lines(f, 64 * 1024 * 1024)
    why = "output size limit reached" if stopped_for_size else f"limit of {limit} lines"
    if remaining is not None:
        total = last + 1 + remaining
        metadata["total_lines"] = total
        more = f"the file has {total} lines"
    else:
        more = f"the file continues ({st.st_size - f.tell()} more bytes)"
    metadata["truncated"] = True
    notice = (
        f"\n[showing lines {offset}-{last} ({why}); {more}. "
        f"Call read with offset={last + 1} to continue.]"
    )
    return Result(content="\n".join(out) + notice, metadata=metadata)


def _read_image(
    *,
    ctx: ToolContext,
    opts: _FileOptions,
    f: BinaryIO,
    path: Path,
    st: os.stat_result,
    head: bytes,
    mime: str,
) -> Result:
    name = display(ctx, path)
    if st.st_size > opts.max_image_bytes:
        raise ToolError(
            f"{name!r} is a {mime} image of {st.st_size} bytes, over the {opts.max_image_bytes}"
            f"-byte limit for images; resize it with the shell first."
        )
    data = head + f.read(opts.max_image_bytes - len(head) + 1)
    record_stamp(ctx, path, st)
    return Result(
        content=f"Image {name!r} ({mime}, {len(data)} bytes).",
        parts=(ImagePart(data=data, mime_type=mime),),
        metadata={"mime_type": mime},
    )


# --- write ----------------------------------------------------------------------------------


def _write_sync(ctx: ToolContext, opts: _FileOptions, path_arg: str, content: str) -> Result:
    path = confine(ctx, path_arg, write=True, protect_git=opts.protect_git)
    name = display(ctx, path)
    check_writable(ctx, path, None, "write")
    try:
        # Before the lock: the cross-process lock is the folder's, so it must exist (two
        # writers creating one new file then lock the same folder).
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _os_error(ctx, path, "write", exc, "nothing was written") from exc
    data = encode_text(content)
    with write_lock(ctx, [path]):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise _os_error(ctx, path, "write", exc) from exc
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{name!r} is a directory; give the path of a file inside it.")
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{name!r} is not a regular file; write only writes regular files.")
            if opts.require_read:
                check_guard(ctx, path, st, "overwrite")
        check_writable(ctx, path, st, "overwrite" if st is not None else "write")
        expected = stamp_of(st) if st is not None else None
        new_st = _atomic_write(ctx, path, data, expected, blind=not opts.require_read)
        record_stamp(ctx, path, new_st)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "Overwrote" if st is not None else "Created"
    return Result(
        content=f"{verb} {name} ({lines} lines, {len(data)} bytes).",
        metadata={"path": str(path), "bytes": len(data), "created": st is None},
    )


# --- edit -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Edit:
    old: str
    new: str
    replace_all: bool


def _edits_from(args: Mapping[str, Any]) -> list[_Edit]:
    """The edits of a call: `old_string`/`new_string`, or the `edits` list; never both."""
    single = "old_string" in args or "new_string" in args
    many = args.get("edits")
    if single and many is not None:
        raise ToolError(
            "give either old_string/new_string or edits, not both; put every change in edits."
        )
    if many is not None:
        if not many:
            raise ToolError("edits is empty; give at least one {old_string, new_string}.")
        return [
            _Edit(old=e["old_string"], new=e["new_string"], replace_all=e.get("replace_all", False))
            for e in many
        ]
    if "old_string" not in args or "new_string" not in args:
        raise ToolError("give old_string and new_string (or an edits list).")
    return [
        _Edit(
            old=args["old_string"],
            new=args["new_string"],
            replace_all=args.get("replace_all", False),
        )
    ]


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _near_miss(text: str, old: str) -> str:
    """Where `old` almost occurs: the closest window of lines and a short diff against it.

    The model's usual mistakes are indentation, trailing spaces, a stale line or the `read`
    line-number prefix pasted along; showing the real lines lets it correct itself.
    """
    if _LINE_NUMBER_PREFIX.search(old):
        stripped = _LINE_NUMBER_PREFIX.sub("", old)
        if stripped and stripped in text:
            return (
                " old_string includes the line-number prefix that read adds (spaces, number, "
                "tab); remove it and keep only the file's text."
            )
    lines = text.split("\n")
    want = old.split("\n")
    if len(lines) > 50_000 or len(want) > 500:
        return " Read the file again to see its current content."
    k = len(want)
    best_ratio, best_at = 0.0, -1
    target = "\n".join(w.strip() for w in want)
    for i in range(max(1, len(lines) - k + 1)):
        window = lines[i : i + k]
        matcher = difflib.SequenceMatcher(None, "\n".join(w.strip() for w in window), target)
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best_ratio, best_at = ratio, i
    if best_at < 0 or best_ratio < 0.5:
        return " Nothing similar was found; read the file again to see its current content."
    window = lines[best_at : best_at + k]
    diff = list(
        difflib.unified_diff(
            want, window, "old_string", f"file, line {best_at + 1}", n=1, lineterm=""
        )
    )
    shown = diff[:24]
    if len(diff) > len(shown):
        shown.append(f"... ({len(diff) - len(shown)} more diff lines)")
    return (
        f" The closest text starts at line {best_at + 1} ({best_ratio:.0%} similar); "
        f"differences (- yours, + the file):\n" + "\n".join(shown)
    )


def _apply_edits(text: str, edits: list[_Edit], name: str) -> tuple[str, int, int]:
    """Apply the edits in order; returns the text, the replacement count and a changed offset.

    Raises before anything is written, naming the edit that failed, so all or none apply.
    """
    replacements = 0
    changed_at = 0
    for number, edit in enumerate(edits, start=1):
        which = f"edit {number} of {len(edits)}: " if len(edits) > 1 else ""
        if not edit.old:
            raise ToolError(
                f"{which}old_string is empty; give the exact text to replace (use write to "
                f"create or fully rewrite a file)."
            )
        if edit.old == edit.new:
            raise ToolError(f"{which}old_string and new_string are identical; nothing to do.")
        count = text.count(edit.old)
        if count == 0:
            raise ToolError(
                f"{which}old_string was not found in {name!r} (exact match, whitespace "
                f"included); no edit was applied.{_near_miss(text, edit.old)}"
            )
        if count > 1 and not edit.replace_all:
            starts = _occurrence_lines(text, edit.old, 5)
            raise ToolError(
                f"{which}old_string occurs {count} times in {name!r} (lines "
                f"{', '.join(map(str, starts))}{', ...' if count > len(starts) else ''}); "
                f"no edit was applied. Add surrounding lines to make it unique, or set "
                f"replace_all to change every occurrence."
            )
        changed_at = text.index(edit.old)
        text = (
            text.replace(edit.old, edit.new)
            if edit.replace_all
            else text.replace(edit.old, edit.new, 1)
        )
        replacements += count if edit.replace_all else 1
    return text, replacements, changed_at


def _occurrence_lines(text: str, needle: str, most: int) -> list[int]:
    found: list[int] = []
    at = text.find(needle)
    while at >= 0 and len(found) < most:
        found.append(_line_of(text, at))
        at = text.find(needle, at + 1)
    return found


def _snippet(text: str, at: int, span: str) -> str:
    """A few numbered lines around an edit, so the model sees the result without a re-read."""
    first = _line_of(text, at)
    lines = text.removesuffix("\n").split("\n")
    start = max(1, first - 2)
    end = min(len(lines), first + span.count("\n") + 2, start + 19)
    return "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(start, end + 1))


def _edit_sync(ctx: ToolContext, opts: _FileOptions, args: Mapping[str, Any]) -> Result:
    edits = _edits_from(args)
    path = confine(ctx, args["path"], write=True, protect_git=opts.protect_git)
    # Read, check and replace under the lock: a concurrent edit applies to this one's result.
    with write_lock(ctx, [path]):
        return _edit_locked(ctx, opts, path, edits)


def _edit_locked(ctx: ToolContext, opts: _FileOptions, path: Path, edits: list[_Edit]) -> Result:
    name = display(ctx, path)
    try:
        with _open_for_reading(path) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{name!r} is not a regular file; edit only changes text files.")
            if st.st_size > opts.max_edit_bytes:
                raise ToolError(
                    f"{name!r} is {st.st_size} bytes, over the {opts.max_edit_bytes}-byte "
                    f"limit of edit; change it with the shell (e.g. sed) instead."
                )
            data = f.read()
    except IsADirectoryError:
        raise ToolError(f"{name!r} is a directory; give the path of a file inside it.") from None
    except FileNotFoundError:
        raise _not_found(ctx, path) from None
    except OSError as exc:
        raise _os_error(ctx, path, "read", exc) from exc
    if looks_binary(data[:_SNIFF_BYTES]):
        raise ToolError(
            f"{name!r} looks like a binary file (it contains NUL bytes); "
            f"edit only changes text files."
        )
    if opts.require_read:
        check_guard(ctx, path, st, "edit")
    check_writable(ctx, path, st, "edit")
    original = decode_text(data)
    crlf = uses_crlf(original)
    text = original.replace("\r\n", "\n") if crlf else original
    if crlf:
        edits = [
            _Edit(
                old=e.old.replace("\r\n", "\n"),
                new=e.new.replace("\r\n", "\n"),
                replace_all=e.replace_all,
            )
            for e in edits
        ]
    result, count, changed_at = _apply_edits(text, edits, name)
    # Keep the file's final newline as it was, whatever the edit did at the very end.
    if text.endswith("\n") and result and not result.endswith("\n"):
        result += "\n"
    elif not text.endswith("\n") and result.endswith("\n"):
        result = result[:-1]
    snippet = _snippet(result, changed_at, edits[-1].new)
    if crlf:
        result = result.replace("\n", "\r\n")
    new_st = _atomic_write(ctx, path, encode_text(result), stamp_of(st))
    record_stamp(ctx, path, new_st)
    what = f"{len(edits)} edits" if len(edits) > 1 else "1 edit"
    return Result(
        content=f"Applied {what} to {name} ({count} replacement{'s' if count != 1 else ''}). "
        f"Around the {'last ' if len(edits) > 1 else ''}change:\n{snippet}",
        metadata={"path": str(path), "replacements": count},
    )


# --- the tools ------------------------------------------------------------------------------

_READ_DESCRIPTION = """\
Read a file from the workspace. Returns its lines numbered like `cat -n` (right-aligned line \
number, a tab, then the line), starting at `offset` (1-based) and showing at most `limit` lines \
(default and maximum {max_lines}). Lines longer than {max_line_chars} characters are cut with \
a marker. When more lines follow, the result ends with a note giving the next offset: call \
read again with it. Reading near the end of a huge file is fast; prefer a narrow range.
Images (png, jpeg, gif, webp) come back as images. Other binary files are refused. Invalid \
UTF-8 is shown as U+FFFD. A directory is an error: use glob to list files.
The number and tab are not part of the file: never copy them into edit's old_string.
Reading a file is required before write or edit may change it."""

_WRITE_DESCRIPTION = """\
Write a file: create it (with any missing folders) or replace its whole content. The write is \
atomic and keeps the file's permissions. To change part of a file prefer edit, which sends \
only the change.
An existing file must have been read first (with read) and must not have changed since; \
otherwise the call is refused: read the file again, then retry."""

_EDIT_DESCRIPTION = """\
Replace exact text in a file. `old_string` must match the file exactly (indentation and \
whitespace included, without read's line-number prefix) and occur once, unless `replace_all` \
is true. For several changes to one file pass `edits`, a list of {old_string, new_string, \
replace_all?} applied in order, each on the result of the previous: all apply or none do.
The file's line endings (LF or CRLF) and final newline are kept. The file must have been read \
first and not changed since.
Errors: when old_string is not found the message shows the closest text and its line: copy the \
real lines from there. When it occurs several times, add surrounding lines to make it unique \
or set replace_all."""


def files_tools(options: Mapping[str, Any]) -> list[Tool]:
    """The `read`, `write` and `edit` tools, configured by one flat options mapping.

    Args:
        options: any of `max_lines`, `max_line_chars`, `max_output_chars`, `max_image_bytes`,
            `max_edit_bytes` (positive integers), `require_read` and `protect_git` (bools).

    Raises:
        ConfigError: an unknown option or a value of the wrong kind.
    """
    opts: _FileOptions = parse_options(options, _FileOptions, "file")

    async def read(args: dict[str, Any], ctx: ToolContext) -> Result:
        offset = args.get("offset", 1)
        limit = min(args.get("limit", opts.max_lines), opts.max_lines)
        return await in_thread(lambda: _read_sync(ctx, opts, args["path"], offset, limit))

    async def write(args: dict[str, Any], ctx: ToolContext) -> Result:
        return await in_thread(lambda: _write_sync(ctx, opts, args["path"], args["content"]))

    async def edit(args: dict[str, Any], ctx: ToolContext) -> Result:
        return await in_thread(lambda: _edit_sync(ctx, opts, args))

    path_schema = {
        "type": "string",
        "description": "File path, relative to the workspace (absolute paths must lie inside "
        "the workspace or an allowed root).",
    }
    edit_properties: dict[str, Any] = {
        "old_string": {"type": "string", "description": "Exact text to replace."},
        "new_string": {"type": "string", "description": "Replacement text."},
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence instead of requiring exactly one.",
            "default": False,
        },
    }
    edit_item = {
        "type": "object",
        "properties": edit_properties,
        "required": ["old_string", "new_string"],
        "additionalProperties": False,
    }
    return [
        Tool(
            name="read",
            description=_READ_DESCRIPTION.format(
                max_lines=opts.max_lines, max_line_chars=opts.max_line_chars
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": path_schema,
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 1,
                        "description": "First line to show (1-based).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": opts.max_lines,
                        "default": opts.max_lines,
                        "description": "How many lines to show at most.",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            handler=read,
            source="builtin",
            read_only=True,
            destructive=False,
            idempotent=True,
            open_world=False,
        ),
        Tool(
            name="write",
            description=_WRITE_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "path": path_schema,
                    "content": {"type": "string", "description": "The file's entire content."},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            handler=write,
            source="builtin",
            read_only=False,
            destructive=True,
            idempotent=True,
            open_world=False,
        ),
        Tool(
            name="edit",
            description=_EDIT_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "path": path_schema,
                    **edit_properties,
                    "edits": {
                        "type": "array",
                        "items": edit_item,
                        "minItems": 1,
                        "description": "Several edits applied in order, all or none. Use "
                        "instead of old_string/new_string.",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            handler=edit,
            source="builtin",
            read_only=False,
            destructive=True,
            idempotent=False,
            open_world=False,
        ),
    ]
