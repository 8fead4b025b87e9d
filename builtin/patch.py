"""`apply_patch`: the Codex patch format, applied atomically.

The format, the lenient parser and the four matching passes follow OpenAI Codex's
`apply-patch` crate (its reference scenarios run in our tests), with three deliberate
differences, each because a model's tree should never be left half-changed or silently altered:

- **Atomic.** Every hunk is parsed, located and checked against an in-memory view of the tree
  before anything is written; then every new file is written to a synced temp file, and only then
  renamed into place. A failure anywhere leaves the tree untouched (upstream keeps the hunks
  applied before the failure: its scenario 015).
- A file that ends with blank lines keeps them (upstream drops one when it re-adds the final
  newline); CRLF files stay CRLF on every system (upstream converts back only on Windows).
- Errors name the hunk, the file and the first line of the chunk that did not match, with the
  file's line there, so the model can fix the patch instead of re-reading the whole file.

Like `write` and `edit` (`files.py`), a patch holds the write lock of every file it touches
(taken in one sorted order, so two patches never deadlock) from reading them to the last
rename: concurrent patches and edits each apply to the result of the one before. Read-only
files and folders, and git metadata (`protect_git`), are refused.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolnexus import Result, Tool, ToolContext, ToolError

from ._common import (
    Changed,
    Staged,
    Stamp,
    check_writable,
    confine,
    decode_text,
    display,
    encode_text,
    forget_stamp,
    fsync_dir,
    in_thread,
    looks_binary,
    parse_options,
    record_stamp,
    refuse_git_metadata,
    stamp_of,
    uses_crlf,
    version_of,
    write_lock,
    write_temp,
)

__all__ = ["patch_tools"]

_BEGIN = "*** Begin Patch"
_END = "*** End Patch"
_ADD = "*** Add File: "
_DELETE = "*** Delete File: "
_UPDATE = "*** Update File: "
_MOVE = "*** Move to: "
_EOF = "*** End of File"
_HEREDOC_START = re.compile(r"""^(?:apply_patch\s+)?<<\s*(['"]?)EOF\1$""")

_PUNCTUATION = str.maketrans(
    {
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys(
            "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "
        ),
    }
)


@dataclass(frozen=True, kw_only=True)
class _PatchOptions:
    """Options of `apply_patch`."""

    max_file_bytes: int = 16 * 1024 * 1024
    """Largest file an Update hunk will load."""
    protect_git: bool = True
    """Refuse to change git metadata that can make git run a program (`_gitguard.py`)."""


# --- parsing --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Chunk:
    context: str | None
    """The `@@ text` line that narrows where the chunk applies, if any."""
    old: tuple[str, ...]
    new: tuple[str, ...]
    at_eof: bool
    line: int
    """Line of the patch where the chunk starts, for messages."""


@dataclass(frozen=True, kw_only=True)
class _Hunk:
    kind: Literal["add", "delete", "update"]
    path: str
    line: int
    """Line of the patch holding the hunk's header."""
    contents: str = ""
    """The new file's text (Add)."""
    move_to: str | None = None
    chunks: tuple[_Chunk, ...] = ()

    def describe(self, number: int) -> str:
        verb = {"add": "Add File", "delete": "Delete File", "update": "Update File"}[self.kind]
        return f"hunk {number} ({verb}: {self.path}, patch line {self.line})"


class _ParseError(ToolError):
    """The patch text is not in the apply_patch format."""

    def __init__(self, message: str, line: int | None = None) -> None:
        where = f"line {line} of the patch: " if line is not None else ""
        super().__init__(f"invalid patch: {where}{message}. Nothing was changed.")


def _parse(text: str) -> list[_Hunk]:
    lines = [line.removesuffix("\r") for line in text.strip().split("\n")]
    first_line = 1
    if not _is_bounded(lines):
        if (
            len(lines) >= 4
            and _HEREDOC_START.match(lines[0].strip())
            and lines[-1].strip().endswith("EOF")
        ):
            lines = lines[1:-1]
            first_line = 2
        if not _is_bounded(lines):
            if not lines or lines[0].strip() != _BEGIN:
                raise _ParseError(
                    f"the first line must be '{_BEGIN}' (and the last '{_END}')", first_line
                )
            raise _ParseError(f"the last line must be '{_END}'", first_line + len(lines) - 1)
    body = lines[1:-1]
    hunks: list[_Hunk] = []
    index = 0
    while index < len(body):
        hunk, used = _parse_hunk(body, index, first_line + 1)
        hunks.append(hunk)
        index += used
    return hunks


def _is_bounded(lines: Sequence[str]) -> bool:
    return len(lines) >= 2 and lines[0].strip() == _BEGIN and lines[-1].strip() == _END


def _parse_hunk(body: list[str], start: int, offset: int) -> tuple[_Hunk, int]:
    """One hunk from `body[start:]`; `offset` turns body indices into patch line numbers."""
    header = body[start].strip()
    line_no = start + offset
    if header.startswith(_ADD):
        contents: list[str] = []
        i = start + 1
        while i < len(body) and body[i].startswith("+"):
            contents.append(body[i][1:] + "\n")
            i += 1
        path = header.removeprefix(_ADD).strip()
        return _Hunk(kind="add", path=path, line=line_no, contents="".join(contents)), i - start
    if header.startswith(_DELETE):
        return _Hunk(kind="delete", path=header.removeprefix(_DELETE).strip(), line=line_no), 1
    if header.startswith(_UPDATE):
        path = header.removeprefix(_UPDATE).strip()
        i = start + 1
        move_to = None
        if i < len(body) and body[i].strip().startswith(_MOVE):
            move_to = body[i].strip().removeprefix(_MOVE).strip()
            i += 1
        chunks: list[_Chunk] = []
        while i < len(body):
            if not body[i].strip():
                i += 1
                continue
            if body[i].startswith("*"):
                break
            chunk, used = _parse_chunk(body, i, offset, first=not chunks)
            chunks.append(chunk)
            i += used
        if not chunks:
            raise _ParseError(f"the Update File hunk for {path!r} is empty", line_no)
        return (
            _Hunk(kind="update", path=path, line=line_no, move_to=move_to, chunks=tuple(chunks)),
            i - start,
        )
    raise _ParseError(
        f"{header!r} is not a valid hunk header; expected '{_ADD}<path>', "
        f"'{_DELETE}<path>' or '{_UPDATE}<path>'",
        line_no,
    )


def _parse_chunk(body: list[str], start: int, offset: int, *, first: bool) -> tuple[_Chunk, int]:
    line_no = start + offset
    head = body[start]
    context: str | None = None
    i = start
    if head == "@@" or head.rstrip() == "@@":
        i += 1
    elif head.startswith("@@ "):
        context = head[3:]
        i += 1
    elif not first:
        raise _ParseError(f"expected a '@@' line to start the next change, got {head!r}", line_no)
    old: list[str] = []
    new: list[str] = []
    at_eof = False
    parsed = 0
    while i < len(body):
        line = body[i]
        if line.strip() == _EOF:
            if parsed == 0:
                break
            at_eof = True
            i += 1
            break
        if line == "":
            old.append("")
            new.append("")
        elif line[0] == " ":
            old.append(line[1:])
            new.append(line[1:])
        elif line[0] == "+":
            new.append(line[1:])
        elif line[0] == "-":
            old.append(line[1:])
        elif parsed == 0:
            raise _ParseError(
                f"unexpected line {line!r} in an Update File hunk: every line of a change "
                f"starts with ' ' (context), '-' (removed) or '+' (added)",
                i + offset,
            )
        else:
            break
        parsed += 1
        i += 1
    if parsed == 0:
        raise _ParseError("a change ('@@' section) holds no lines", line_no)
    return _Chunk(context=context, old=tuple(old), new=tuple(new), at_eof=at_eof, line=line_no), (
        i - start
    )


# --- matching -------------------------------------------------------------------------------

_PASSES: tuple[Callable[[str], str], ...] = (
    lambda s: s,  # exact
    str.rstrip,  # ignoring trailing whitespace
    str.strip,  # ignoring surrounding whitespace
    lambda s: s.strip().translate(_PUNCTUATION),  # typographic punctuation normalised
)
"""The four matching passes, strictest first: each line is compared after the pass's mapping."""


def _seek(lines: Sequence[str], pattern: Sequence[str], start: int, at_eof: bool) -> int | None:
    """Index where `pattern` occurs in `lines` from `start`, trying each pass in turn."""
    if not pattern:
        return start
    if len(pattern) > len(lines):
        return None
    begin = len(lines) - len(pattern) if at_eof else start
    last = len(lines) - len(pattern)
    for norm in _PASSES:
        want = [norm(p) for p in pattern]
        for i in range(begin, last + 1):
            if all(norm(lines[i + j]) == want[j] for j in range(len(want))):
                return i
    return None


def _loose(a: str, b: str) -> bool:
    """The loosest pass's equality, used to explain a miss."""
    return a.strip().translate(_PUNCTUATION) == b.strip().translate(_PUNCTUATION)


def _explain_miss(lines: Sequence[str], pattern: Sequence[str], start: int) -> str:
    """Which chunk line did not match, and what the file has there, for the error message."""
    best_len, best_at = 0, -1
    for i in range(start, len(lines)):
        n = 0
        while n < len(pattern) and i + n < len(lines) and _loose(lines[i + n], pattern[n]):
            n += 1
        if n > best_len:
            best_len, best_at = n, i
    if best_len == len(pattern):
        return (
            f"they occur at line {best_at + 1}, but not at the end of the file as '{_EOF}' requires"
        )
    if best_len > 0:
        pos = best_at + best_len
        got = (
            f"line {pos + 1} of the file is {lines[pos]!r}"
            if pos < len(lines)
            else ("the file ends there")
        )
        return (
            f"the chunk's first {best_len} line(s) match at line {best_at + 1}, but its line "
            f"{best_len + 1}, {pattern[best_len]!r}, does not: {got}"
        )
    earlier = next((i for i in range(start) if _loose(lines[i], pattern[0])), None)
    if earlier is not None:
        return (
            f"its first line {pattern[0]!r} occurs only at line {earlier + 1}, before where "
            f"this chunk may start (line {start + 1}, after the previous chunk or '@@' line); "
            f"chunks must follow the file's order"
        )
    hint = ""
    if len(lines) <= 20_000:
        close = difflib.get_close_matches(pattern[0], list(lines), n=1, cutoff=0.6)
        if close:
            hint = f"; the closest line is line {lines.index(close[0]) + 1}: {close[0]!r}"
    return f"its first line {pattern[0]!r} is not in the file{hint}"


def _apply_chunks(text: str, chunks: Sequence[_Chunk], where: str) -> str:
    """`text` with every chunk applied (or a ToolError naming the chunk that did not match)."""
    crlf = uses_crlf(text)
    lines = (text.replace("\r\n", "\n") if crlf else text).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    replacements: list[tuple[int, int, Sequence[str]]] = []
    index = 0
    for number, chunk in enumerate(chunks, start=1):
        label = f"{where}, change {number} (patch line {chunk.line})"
        if chunk.context is not None:
            found = _seek(lines, [chunk.context], index, at_eof=False)
            if found is None:
                raise ToolError(
                    f"{label}: the '@@ {chunk.context}' line was not found after line "
                    f"{index}; {_explain_miss(lines, [chunk.context], index)}"
                )
            index = found + 1
        if not chunk.old:
            at = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
            replacements.append((at, 0, chunk.new))
            continue
        old: Sequence[str] = chunk.old
        new: Sequence[str] = chunk.new
        found = _seek(lines, old, index, chunk.at_eof)
        if found is None and old[-1] == "":
            # A trailing empty line often stands for the file's final newline.
            old = old[:-1]
            if new and new[-1] == "":
                new = new[:-1]
            found = _seek(lines, old, index, chunk.at_eof)
        if found is None:
            eof = " at the end of the file (*** End of File)" if chunk.at_eof else ""
            raise ToolError(
                f"{label}: the lines to replace were not found{eof}; "
                f"{_explain_miss(lines, chunk.old, index)}"
            )
        replacements.append((found, len(old), new))
        index = found + len(old)
    for at, length, new_lines in sorted(replacements, key=lambda r: r[0], reverse=True):
        lines[at : at + length] = new_lines
    eol = "\r\n" if crlf else "\n"
    return eol.join(lines) + eol


# --- planning and committing ----------------------------------------------------------------


@dataclass(kw_only=True)
class _Plan:
    """The tree as the patch leaves it, in memory: what to write and what to delete."""

    final: dict[Path, bytes | None] = field(default_factory=dict)
    """Path -> new bytes, or None to delete. Later hunks see earlier hunks' results."""
    seen: dict[Path, Stamp | None] = field(default_factory=dict)
    """Path -> the version on disk when planned (None: absent), checked again before renaming."""
    summary: list[str] = field(default_factory=list)

    def look(self, path: Path) -> os.stat_result | None:
        """`path`'s stat the first time the plan meets it (None: absent), remembered."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        self.seen.setdefault(path, stamp_of(st) if st is not None else None)
        return st

    def current(self, path: Path, read_limit: int) -> tuple[bytes | None, os.stat_result | None]:
        """The file's content as the earlier hunks left it (None: absent or deleted), and its
        stat on disk when it has not been planned yet."""
        if path in self.final:
            return self.final[path], None
        st = self.look(path)
        if st is None:
            return None, None
        if stat.S_ISDIR(st.st_mode):
            raise _Unusable("is a directory; apply_patch adds, updates and deletes files only")
        if not stat.S_ISREG(st.st_mode):
            raise _Unusable("is not a regular file (a device, socket or pipe)")
        if st.st_size > read_limit:
            raise _Unusable(
                f"is {st.st_size} bytes, over the {read_limit}-byte limit; change it with the "
                f"shell instead"
            )
        return path.read_bytes(), st


class _Unusable(Exception):
    """Internal signal: a path exists but apply_patch cannot use it (the caller adds the hunk)."""


def _plan(ctx: ToolContext, hunks: Sequence[_Hunk], opts: _PatchOptions) -> _Plan:
    """Every hunk checked against the tree as earlier hunks leave it. Call under the locks."""
    plan = _Plan()
    for number, hunk in enumerate(hunks, start=1):
        where = hunk.describe(number)
        path = confine(ctx, hunk.path, write=True, protect_git=opts.protect_git)
        try:
            current, st = plan.current(path, opts.max_file_bytes)
        except _Unusable as why:
            raise ToolError(f"{where}: {hunk.path!r} {why}. Nothing was changed.") from None
        except OSError as exc:
            raise ToolError(
                f"{where}: cannot read {hunk.path!r}: {exc.strerror or exc}. Nothing was changed."
            ) from exc
        if hunk.kind == "add":
            verb = "overwrite" if current is not None else "create"
        elif hunk.kind == "update" and hunk.move_to is not None:
            verb = "move"
        else:
            verb = hunk.kind
        _check_writable(ctx, where, path, st, verb)
        if hunk.kind == "add":
            plan.final[path] = encode_text(hunk.contents)
            plan.summary.append(f"A {hunk.path}")
        elif hunk.kind == "delete":
            if current is None:
                raise ToolError(
                    f"{where}: {hunk.path!r} does not exist, so it cannot be "
                    f"deleted. Nothing was changed."
                )
            plan.final[path] = None
            plan.summary.append(f"D {hunk.path}")
        else:
            if current is None:
                raise ToolError(
                    f"{where}: {hunk.path!r} does not exist; use '*** Add File:' to create a "
                    f"file. Nothing was changed."
                )
            if looks_binary(current[:8192]):
                raise ToolError(
                    f"{where}: {hunk.path!r} is a binary file; apply_patch changes "
                    f"text files only. Nothing was changed."
                )
            try:
                text = _apply_chunks(decode_text(current), hunk.chunks, where)
            except ToolError as exc:
                raise ToolError(
                    f"{exc.message}. Nothing was changed; fix this chunk (read the file around "
                    f"that line) and send the whole patch again."
                ) from None
            data = encode_text(text)
            if hunk.move_to is not None:
                dest = confine(ctx, hunk.move_to, write=True, protect_git=opts.protect_git)
                # The destination is replaced, never read: any size will do, but not a folder.
                if dest.is_dir():
                    raise ToolError(
                        f"{where}: the move destination {hunk.move_to!r} is a directory. "
                        f"Nothing was changed."
                    )
                if dest not in plan.final:
                    dest_st = plan.look(dest)
                    _check_writable(ctx, where, dest, dest_st, "overwrite" if dest_st else "create")
                plan.final[dest] = data
                if dest != path:
                    plan.final[path] = None
                plan.summary.append(f"M {hunk.move_to}")
            else:
                plan.final[path] = data
                plan.summary.append(f"M {hunk.path}")
    if opts.protect_git:
        # Each path passed alone; together they may still lay out a repository.
        created = frozenset(p for p, data in plan.final.items() if data is not None)
        for path in created:
            try:
                refuse_git_metadata(display(ctx, path), path, created)
            except ToolError as exc:
                raise ToolError(f"{exc.message} Nothing was changed.") from None
    return plan


def _check_writable(
    ctx: ToolContext, where: str, path: Path, st: os.stat_result | None, verb: str
) -> None:
    try:
        check_writable(ctx, path, st, verb)
    except ToolError as exc:
        raise ToolError(f"{where}: {exc.message} Nothing was changed.") from None


def _targets(
    ctx: ToolContext, hunks: Sequence[_Hunk], opts: _PatchOptions
) -> list[tuple[Path, bool]]:
    """Every path the patch may write or delete, resolved (refused early if confined), and
    whether it may receive content (an Add path or a move destination)."""
    paths: list[tuple[Path, bool]] = []
    for hunk in hunks:
        path = confine(ctx, hunk.path, write=True, protect_git=opts.protect_git)
        paths.append((path, hunk.kind == "add"))
        if hunk.move_to is not None:
            dest = confine(ctx, hunk.move_to, write=True, protect_git=opts.protect_git)
            paths.append((dest, True))
    return paths


def _commit(ctx: ToolContext, plan: _Plan) -> None:
    """Make the plan real: stage everything, then rename and delete; roll back on failure.

    Staging (folders, synced temp files, an open descriptor of every file about to be replaced
    or deleted) is where nearly every failure happens (permissions, a full disk), and it changes
    nothing visible. Then every file is checked to be the version planned from (another
    program may have written it: toolnexus writers are held off by the locks). The renames
    that follow rarely fail; if one does, the old contents, still readable through those
    descriptors, are written back. Nothing staged has a name a crash could leave behind for
    long (see `Staged`): no backup file is made.
    """
    created_dirs: list[Path] = []
    staged: list[Staged] = []
    olds: dict[Path, int] = {}
    at: Path | None = None
    try:
        try:
            for path, data in plan.final.items():
                at = path
                if path.exists():
                    olds[path] = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                if data is not None:
                    created_dirs += _make_parents(path.parent)
                    staged.append(write_temp(path, data))
            for path in plan.final:
                at = path
                if version_of(path) != plan.seen.get(path):
                    raise Changed(
                        f"{display(ctx, path)!r} changed on disk while the patch was being "
                        f"applied (another program wrote it). Nothing was changed; read it "
                        f"again and send the patch again."
                    )
        except (OSError, Changed) as exc:
            _discard(staged, created_dirs)
            if isinstance(exc, Changed):
                raise
            raise ToolError(
                f"could not write {display(ctx, Path(exc.filename or at or '?'))!r}: "
                f"{exc.strerror or exc}. Nothing was changed."
            ) from exc
        done: list[Path] = []
        try:
            for item in staged:
                at = item.target
                item.install()
                done.append(item.target)
            for path, data in plan.final.items():
                if data is None:
                    at = path
                    path.unlink(missing_ok=True)
                    done.append(path)
        except OSError as exc:
            _discard(staged, [])
            for path in reversed(done):
                if path in olds:
                    _restore(olds[path], path)
                else:
                    path.unlink(missing_ok=True)
            _discard([], created_dirs)
            raise ToolError(
                f"could not apply the patch to {display(ctx, Path(exc.filename or at or '?'))!r}: "
                f"{exc.strerror or exc}. The files already changed were restored."
            ) from exc
    finally:
        for fd in olds.values():
            os.close(fd)
    for folder in {path.parent for path in plan.final}:
        fsync_dir(folder)


def _restore(fd: int, path: Path) -> None:
    """Put back the old content of `path`, read through `fd` (open since before the change),
    with its mode and owner."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    write_temp(path, b"".join(chunks), like=os.fstat(fd)).install()


def _make_parents(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; returns those created, outermost first."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for f in reversed(missing):
        f.mkdir()
    return list(reversed(missing))


def _discard(staged: Sequence[Staged], created_dirs: Sequence[Path]) -> None:
    """Remove staging leftovers: temp files, then folders made for this patch."""
    for item in staged:
        item.discard()
    for folder in reversed(created_dirs):
        # A folder that is not empty any more is used by something else now: keep it.
        with contextlib.suppress(OSError):
            folder.rmdir()


def _apply_patch_sync(ctx: ToolContext, opts: _PatchOptions, patch: str) -> Result:
    hunks = _parse(patch)
    if not hunks:
        raise ToolError(
            "the patch holds no hunks, so no files were modified. Put at least one "
            f"'{_ADD}', '{_DELETE}' or '{_UPDATE}' section between the Begin and End lines."
        )
    targets = _targets(ctx, hunks, opts)
    # New files' folders exist before the locks are taken: the cross-process lock is the
    # folder's. They go again if the patch fails.
    made: list[Path] = []
    for path in [path for path, receives in targets if receives]:
        # A refusal or an error here is met again by _plan or _commit, which report it.
        with contextlib.suppress(OSError, ToolError):
            check_writable(ctx, path, None, "create")
            made += _make_parents(path.parent)
    try:
        with write_lock(ctx, [path for path, _ in targets]):
            plan = _plan(ctx, hunks, opts)
            _commit(ctx, plan)
            for path, data in plan.final.items():
                if data is None:
                    forget_stamp(ctx, path)
                else:
                    record_stamp(ctx, path, os.stat(path))
    except BaseException:
        _discard([], made)
        raise
    return Result(
        content="Success. Updated the following files:\n" + "\n".join(plan.summary),
        metadata={"changes": list(plan.summary)},
    )


_DESCRIPTION = """\
Apply a patch that adds, deletes, updates or moves text files. The patch format:

*** Begin Patch
*** Add File: path/new.py
+line of the new file
*** Delete File: path/old.py
*** Update File: path/app.py
*** Move to: path/renamed.py      (optional)
@@ def handler():                 (optional: a line above the change, to place it)
 context line (space prefix)
-removed line
+added line
*** End of File                   (optional: the change ends at the end of the file)
*** End Patch

Paths are relative to the workspace. In an Update, give about 3 lines of unchanged context \
above and below each change, and start each further change with '@@' (optionally '@@ <a line \
above it>' to tell repeated code apart). Changes to one file must follow the file's order. \
Lines are matched exactly first, then ignoring trailing and then surrounding whitespace, then \
with typographic quotes and dashes normalised. Files always end with a newline.
All or nothing: every hunk is checked before any file changes; on error nothing is changed and \
the message names the hunk, the file and the first line that did not match, with what the file \
has there: fix that part (read the file if needed) and send the whole patch again.
Returns one line per file: A (added), M (modified or moved: the new path), D (deleted)."""


def patch_tools(options: Mapping[str, Any]) -> list[Tool]:
    """The `apply_patch` tool.

    Args:
        options: `max_file_bytes` (positive integer): the largest file an update will load;
            `protect_git` (bool): refuse git metadata that can make git run a program.

    Raises:
        ConfigError: an unknown option or a value of the wrong kind.
    """
    opts: _PatchOptions = parse_options(options, _PatchOptions, "apply_patch")

    async def apply_patch(args: dict[str, Any], ctx: ToolContext) -> Result:
        return await in_thread(lambda: _apply_patch_sync(ctx, opts, args["patch"]))

    return [
        Tool(
            name="apply_patch",
            description=_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "patch": {
                        "type": "string",
                        "description": "The whole patch, from '*** Begin Patch' to "
                        "'*** End Patch'.",
                    }
                },
                "required": ["patch"],
                "additionalProperties": False,
            },
            handler=apply_patch,
            source="builtin",
            read_only=False,
            destructive=True,
            idempotent=False,
            open_world=False,
            # Path rules (`Edit(src/**)`, `edit(**/.env)`) see every file the patch touches,
            # read by the same parser that applies it.
            meta={"primary_argument": "patch", "primary_kind": "paths", "paths_of": _touched},
        )
    ]


def _touched(patch: object) -> list[str] | None:
    """Every path a patch adds, deletes, updates or moves to; None when it does not parse
    (permission rules then treat it as touching anything)."""
    if not isinstance(patch, str):
        return None
    try:
        hunks = _parse(patch)
    except _ParseError:
        return None
    paths = [h.path for h in hunks]
    paths += [h.move_to for h in hunks if h.move_to is not None]
    return paths
