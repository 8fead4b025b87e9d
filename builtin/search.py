"""`glob` and `grep`: find files by name and by content, with ripgrep's semantics.

Both run the real `rg` binary when one runs here (the `ripgrep` wheel's binary next to the
interpreter first, because its version is pinned, then `rg` on PATH) and fall back to a pure
Python engine that gives the same results: the same file set (the same walker rules, with
`pathspec` for ignore files) and, for grep, the same matching lines through Python's `re`.

The rules both engines follow, which are ripgrep's with these flags:
`--hidden --no-require-git --no-ignore-global -g '!.git'`:

- hidden files are searched; `.git` folders are never entered;
- `.gitignore`, `.ignore` and `.rgignore` are honoured in every folder and in the search root's
  parent folders, also outside a git repository, plus `.git/info/exclude` of a repository;
  ignored folders are never entered; the user's global git excludes are not read (they differ
  from machine to machine, and results must not);
- grep's `glob` filter is an rg override (`rg -g`): a file it matches is searched even if an
  ignore file names it (an ignored *folder* is still skipped), as in Claude Code's Grep; glob's
  pattern only narrows the listing, so glob never lists an ignored file;
- symbolic links are not followed and not listed; only regular files are searched, so a FIFO or
  a device in the tree cannot hang a search; files over `max_file_size` are skipped;
- a file with a NUL byte in its first 64 KiB is binary and skipped.

Results are sorted by the tools, never in rg's (thread-dependent) order: glob and grep's
`files_with_matches` newest first, grep's `content` and `count` by path. Every result is bounded:
the raw output an engine may produce is capped, and the text returned is paged with
`head_limit`/`offset` (grep) or capped (glob), with a note saying how to get the rest.

Where the Python fallback differs (documented, not tested against rg): the regex dialect is
Python's `re`, not Rust's `regex` (rg rejects look-around and back-references that `re` accepts;
`re` rejects `\\p{...}` classes and `\\z`; `{` must be escaped for rg but not for `re`); braces in
ignore *files* are literal for pathspec but alternations for rg; a file whose first NUL byte lies
past the first 64 KiB keeps the matches before it in both, but rg may drop a few of them (it
decides per read buffer); rg transcodes UTF-16 files with a BOM, the fallback does not; on
invalid UTF-8, rg's `.` and classes match no invalid byte, while the fallback sees U+FFFD (the
text shown is the same: invalid bytes become U+FFFD in both).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import heapq
import os
import queue
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread

from toolnexus import ConfigError, Result, Tool, ToolContext, ToolError

from ._common import TEMP_GLOB, confine, display, parse_options

__all__ = ["search_tools"]

Mode = Literal["files_with_matches", "content", "count"]

_ENGINES = ("auto", "rg", "python")
_SNIFF = 65536
"""Bytes looked at for a NUL byte to call a file binary (rg's first read buffer)."""
_STDERR_KEEP = 8192
_READ_CHUNK = 1 << 20
_MAGIC = re.compile(r"[*?\[{\\]")
_OVERRIDES = ("!.git", "!" + TEMP_GLOB)
"""Never searched or listed: `.git` folders, and the file tools' own temp files (a write in
progress, or one a crash left until the next write in its folder removes it)."""
_IGNORE_FILES = (".rgignore", ".ignore", ".gitignore")
"""Per-folder ignore files, strongest first (ripgrep's precedence)."""

# The types `type` accepts, as ripgrep 14.1 defines them (`rg --type-list`). They are passed to
# rg with `--type-add` rather than `-t NAME`, so that both engines and every rg version agree.
_TYPES: dict[str, tuple[str, ...]] = {
    "asm": ("*.S", "*.asm", "*.s"),
    "c": ("*.[chH]", "*.[chH].in", "*.cats"),
    "cmake": ("*.cmake", "CMakeLists.txt"),
    "cpp": (
        "*.[ChH]", "*.[ChH].in", "*.[ch]pp", "*.[ch]pp.in", "*.[ch]xx", "*.[ch]xx.in", "*.cc",
        "*.cc.in", "*.hh", "*.hh.in", "*.inl",
    ),
    "cs": ("*.cs",),
    "css": ("*.css", "*.scss"),
    "csv": ("*.csv",),
    "dart": ("*.dart",),
    "docker": ("*Dockerfile*",),
    "elixir": ("*.eex", "*.ex", "*.exs", "*.heex", "*.leex", "*.livemd"),
    "erlang": ("*.erl", "*.hrl"),
    "go": ("*.go",),
    "h": ("*.h", "*.hh", "*.hpp"),
    "haskell": ("*.c2hs", "*.cpphs", "*.hs", "*.hsc", "*.lhs"),
    "html": ("*.ejs", "*.htm", "*.html"),
    "java": ("*.java", "*.jsp", "*.jspx", "*.properties"),
    "js": ("*.cjs", "*.js", "*.jsx", "*.mjs", "*.vue"),
    "json": ("*.json", "*.sarif", "composer.lock"),
    "jsonl": ("*.jsonl",),
    "julia": ("*.jl",),
    "kotlin": ("*.kt", "*.kts"),
    "lua": ("*.lua",),
    "make": (
        "*.mak", "*.mk", "[Gg][Nn][Uu]makefile", "[Gg][Nn][Uu]makefile.am",
        "[Gg][Nn][Uu]makefile.in", "[Mm]akefile", "[Mm]akefile.am", "[Mm]akefile.in",
    ),
    "markdown": ("*.markdown", "*.md", "*.mdown", "*.mdwn", "*.mdx", "*.mkd", "*.mkdn"),
    "md": ("*.markdown", "*.md", "*.mdown", "*.mdwn", "*.mdx", "*.mkd", "*.mkdn"),
    "nim": ("*.nim", "*.nimble", "*.nimf", "*.nims"),
    "ocaml": ("*.ml", "*.mli", "*.mll", "*.mly"),
    "perl": ("*.PL", "*.perl", "*.pl", "*.plh", "*.plx", "*.pm", "*.t"),
    "php": ("*.php", "*.php3", "*.php4", "*.php5", "*.php7", "*.php8", "*.pht", "*.phtml"),
    "protobuf": ("*.proto",),
    "py": ("*.py", "*.pyi"),
    "python": ("*.py", "*.pyi"),
    "r": ("*.R", "*.Rmd", "*.Rnw", "*.r"),
    "rst": ("*.rst",),
    "ruby": ("*.gemspec", "*.rb", "*.rbw", ".irbrc", "Gemfile", "Rakefile", "config.ru"),
    "rust": ("*.rs",),
    "scala": ("*.sbt", "*.scala"),
    "sh": (
        "*.bash", "*.bashrc", "*.csh", "*.cshrc", "*.ksh", "*.kshrc", "*.sh", "*.tcsh", "*.zsh",
        ".bash_login", ".bash_logout", ".bash_profile", ".bashrc", ".cshrc", ".kshrc", ".login",
        ".logout", ".profile", ".tcshrc", ".zlogin", ".zlogout", ".zprofile", ".zshenv",
        ".zshrc", "bash_login", "bash_logout", "bash_profile", "bashrc", "profile", "zlogin",
        "zlogout", "zprofile", "zshenv", "zshrc",
    ),
    "sql": ("*.psql", "*.sql"),
    "svelte": ("*.svelte",),
    "swift": ("*.swift",),
    "tex": ("*.bib", "*.cls", "*.dtx", "*.ins", "*.ltx", "*.sty", "*.tex"),
    "toml": ("*.toml", "Cargo.lock"),
    "ts": ("*.cts", "*.mts", "*.ts", "*.tsx"),
    "txt": ("*.txt",),
    "typescript": ("*.cts", "*.mts", "*.ts", "*.tsx"),
    "vue": ("*.vue",),
    "xml": (
        "*.dtd", "*.rng", "*.sch", "*.xhtml", "*.xjb", "*.xml", "*.xml.dist", "*.xsd", "*.xsl",
        "*.xslt",
    ),
    "yaml": ("*.yaml", "*.yml"),
    "zig": ("*.zig",),
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class _SearchOptions:
    """Options of `glob` and `grep` (`builtins: {grep: {...}}`), one flat set."""

    max_results: int = 100
    """Files glob lists at most (the newest)."""
    max_entries: int = 250
    """Entries (lines, files or counts) grep returns when the call gives no `head_limit`."""
    max_output_chars: int = 30_000
    """Characters grep and glob return at most; past it the result says which offset is next."""
    max_line_chars: int = 500
    """Characters kept of each matching or context line grep shows."""
    max_file_size: int = 100 * 1024 * 1024
    """Larger files are skipped (rg `--max-filesize`): searching them takes too long."""
    max_capture_bytes: int = 16 * 1024 * 1024
    """Raw engine output kept per search; beyond it the search stops and says it was cut."""
    timeout_ms: int = 60_000
    """Longest a search may run before it is stopped."""
    engine: str = "auto"
    """`auto` (rg when one runs, else Python), `rg` (required) or `python` (the fallback)."""
    rg_path: str = ""
    """The rg binary to use instead of looking for one."""


def _options(options: Mapping[str, Any]) -> _SearchOptions:
    strings = {k: options[k] for k in ("engine", "rg_path") if k in options}
    opts: _SearchOptions = parse_options(
        {k: v for k, v in options.items() if k not in strings}, _SearchOptions, "search"
    )
    engine = strings.get("engine", "auto")
    if engine not in _ENGINES:
        close = difflib.get_close_matches(str(engine), _ENGINES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"expected one of auto, rg, python, got {engine!r}{hint}", field="engine")
    rg_path = strings.get("rg_path", "")
    if not isinstance(rg_path, str):
        raise ConfigError(f"expected a path to an rg binary, got {rg_path!r}", field="rg_path")
    return replace(opts, engine=engine, rg_path=rg_path)


# --- finding rg -----------------------------------------------------------------------------


@functools.cache
def _runs(path: str) -> bool:
    """True when `path --version` runs and says it is ripgrep (checked once per path)."""
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, timeout=10, check=False, text=True
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.startswith("ripgrep")


def _find_rg(opts: _SearchOptions) -> str | None:
    """The rg binary to run, or None for the Python engine.

    Raises:
        ConfigError: `engine: rg` or `rg_path` was given and no such binary runs.
    """
    if opts.engine == "python":
        return None
    if opts.rg_path:
        candidates = [opts.rg_path]
    else:
        beside = Path(sys.executable).parent / "rg"
        candidates = [str(beside), shutil.which("rg") or ""]
    for candidate in candidates:
        if candidate and _runs(candidate):
            return candidate
    if opts.engine == "rg" or opts.rg_path:
        raise ConfigError(
            f"no runnable ripgrep binary (tried {', '.join(c for c in candidates if c)}); "
            "install it with `pip install ripgrep==14.1.0`, set rg_path, or use engine: python",
            field="rg_path" if opts.rg_path else "engine",
        )
    return None


# --- the query --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Query:
    """What to search, resolved and checked, in the terms both engines understand."""

    root: Path
    """A folder (searched recursively) or one file."""
    globs: tuple[str, ...] = ()
    """rg override globs, in order (`!` negates); `!.git` is added by the engines."""
    types: tuple[str, ...] = ()
    """Basename globs of the selected file type; empty selects every type."""
    top_only: bool = False
    """Only the root's own files, not its sub-folders' (rg `--max-depth 1`)."""
    max_file_size: int
    deadline: float
    max_capture: int
    sink: Callable[[bytes], None] | None = None
    """Takes rg's output chunk by chunk as it arrives, instead of it being kept: glob stats
    the files listed so far while rg is still walking."""


@dataclass(frozen=True, kw_only=True)
class _Pattern:
    regex: str
    mode: Mode
    case_insensitive: bool
    multiline: bool
    before: int
    after: int


@dataclass(kw_only=True)
class _Found:
    """What an engine found, before sorting, filtering and paging."""

    files: list[str]
    """Paths relative to the query root ("" when the root is a file), files mode."""
    counts: dict[str, int]
    lines: dict[str, list[tuple[int, bool, str]]]
    """Per file: (line number, is a match, text) in order, content mode."""
    cut: bool = False
    """True when the engine stopped early because its output grew past the capture limit."""


# --- the pure Python engine -----------------------------------------------------------------


def _expand_braces(glob: str) -> list[str]:
    """`a{b,c{d,e}}` -> `ab`, `acd`, `ace`: globset alternations, which pathspec lacks."""
    depth, start = 0, -1
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                options, level, last = [], 0, start + 1
                for j in range(start + 1, i):
                    if glob[j] == "{":
                        level += 1
                    elif glob[j] == "}":
                        level -= 1
                    elif glob[j] == "," and level == 0 and glob[j - 1] != "\\":
                        options.append(glob[last:j])
                        last = j + 1
                options.append(glob[last:i])
                head, tail = glob[:start], glob[i + 1 :]
                return [x for o in options for x in _expand_braces(head + o + tail)]
        i += 1
    return [glob]


def _spec(lines: Sequence[str]) -> Any:
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(lines)


def _match(spec: Any, path: str) -> bool | None:
    """ripgrep's reading of gitignore lines: True (matched), False (matched by a `!` line) or
    None, the last matching line winning. A line matches the path itself, never because it
    matches one of the path's parent folders (which pathspec's own `check_file` also counts):
    ripgrep prunes ignored folders while walking, so a parent only matters above the search
    root, where ripgrep does not apply it."""
    for pattern in reversed(spec.patterns):
        if pattern.include is None or pattern.regex is None:
            continue
        m = pattern.regex.match(path)
        if m is None:
            continue
        parent_only = m.groupdict().get("ps_d") is not None and m.end() < len(path)
        if not parent_only:
            return bool(pattern.include)
    return None


def _read_ignore(path: str) -> Any:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    return _spec(lines) if lines else None


@dataclass(frozen=True, slots=True)
class _Frame:
    """One folder's ignore rules: the specs of `.rgignore`, `.ignore`, `.gitignore` and the
    repository's `.git/info/exclude`, matched against paths relative to `folder`."""

    folder: str
    specs: tuple[Any, Any, Any, Any]

    @classmethod
    def load(cls, folder: str) -> _Frame | None:
        specs = [_read_ignore(os.path.join(folder, name)) for name in _IGNORE_FILES]
        specs.append(_read_ignore(os.path.join(folder, ".git", "info", "exclude")))
        if not any(specs):
            return None
        return cls(folder=folder, specs=(specs[0], specs[1], specs[2], specs[3]))


def _ignored(chain: Sequence[_Frame], path: str, is_dir: bool) -> bool | None:
    """True (ignored), False (whitelisted by a `!` line) or None, by ripgrep's precedence: each
    kind of ignore file across every level (deepest first) before the next kind."""
    for kind in range(4):
        for frame in reversed(chain):
            spec = frame.specs[kind]
            if spec is None:
                continue
            rel = path[len(frame.folder) + 1 :] if frame.folder != "/" else path[1:]
            verdict = _match(spec, rel + "/" if is_dir else rel)
            if verdict is not None:
                return verdict
    return None


class _Walker:
    """The files ripgrep would search under a folder, by ripgrep's rules (see the module)."""

    def __init__(self, query: _Query) -> None:
        self.root = str(query.root)
        globs = [*query.globs, *_OVERRIDES]
        self.overrides = _spec([g for glob in globs for g in _expand_braces(glob)])
        self.has_whitelist = any(not g.startswith("!") for g in query.globs)
        self.types = query.types
        self.top_only = query.top_only
        self.max_size = query.max_file_size
        self.deadline = query.deadline

    def _override(self, rel: str, is_dir: bool) -> bool | None:
        """True: include, False: skip, None: undecided (the ignore files decide)."""
        verdict = _match(self.overrides, rel + "/" if is_dir else rel)
        if verdict is not None:
            return verdict
        if self.has_whitelist and not is_dir:
            return False
        return None

    def _wanted(self, chain: Sequence[_Frame], path: str, rel: str, is_dir: bool) -> bool:
        override = self._override(rel, is_dir)
        if override is not None:
            return override
        if _ignored(chain, path, is_dir):
            return False
        if self.types and not is_dir:
            name = rel.rsplit("/", 1)[-1]
            return any(_fnmatch(name, t) for t in self.types)
        return True

    def _ancestors(self) -> list[_Frame]:
        chain: list[_Frame] = []
        parents = list(Path(self.root).parents)
        for folder in reversed(parents):
            frame = _Frame.load(str(folder))
            if frame is not None:
                chain.append(frame)
        return chain

    def files(self) -> Iterator[str]:
        """Paths relative to the root of every file to search (regular, small enough)."""
        stack: list[tuple[str, str, list[_Frame]]] = [("", self.root, self._ancestors())]
        while stack:
            if time.monotonic() > self.deadline:
                raise _Timeout
            rel_dir, folder, chain = stack.pop()
            frame = _Frame.load(folder)
            if frame is not None:
                chain = [*chain, frame]
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue  # unreadable folder: rg skips it too (--no-messages)
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if not self.top_only and self._wanted(chain, entry.path, rel, True):
                        stack.append((rel, entry.path, chain))
                elif (
                    stat.S_ISREG(st.st_mode)
                    and st.st_size <= self.max_size
                    and self._wanted(chain, entry.path, rel, False)
                ):
                    yield rel


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    import fnmatch

    return re.compile(fnmatch.translate(pattern))


def _fnmatch(name: str, pattern: str) -> bool:
    return _glob_regex(pattern).match(name) is not None


class _Timeout(Exception):
    """The search ran past its deadline (turned into a ToolError by the tool)."""


def _python_files(query: _Query) -> list[str]:
    if query.root.is_file():
        return [""]
    return list(_Walker(query).files())


def _search_lines(
    path: Path, regex: re.Pattern[str], pattern: _Pattern, deadline: float
) -> tuple[list[tuple[int, bool, str]], int, bool]:
    """(lines to show, matching line count, binary-stopped) for a line-by-line search."""
    mode = pattern.mode
    shown: list[tuple[int, bool, str]] = []
    count = 0
    before: deque[tuple[int, str]] = deque(maxlen=max(pattern.before, 1))
    after_left = 0
    last_shown = 0
    with open(path, "rb") as f:
        if b"\0" in f.read(_SNIFF):
            return [], 0, True
        f.seek(0)
        for number, raw in enumerate(f, start=1):
            if b"\0" in raw:
                return shown, count, True
            if number % 4096 == 0 and time.monotonic() > deadline:
                raise _Timeout
            text = raw.decode("utf-8", "replace")
            text = text[:-1] if text.endswith("\n") else text
            if regex.search(text):
                count += 1
                if mode == "files_with_matches":
                    return shown, count, False
                if mode == "content":
                    for n, t in before:
                        if n > last_shown:
                            shown.append((n, False, t))
                    before.clear()
                    shown.append((number, True, text))
                    last_shown = number
                    after_left = pattern.after
                continue
            if mode != "content":
                continue
            if after_left:
                shown.append((number, False, text))
                last_shown = number
                after_left -= 1
            elif pattern.before:
                before.append((number, text))
    return shown, count, False


def _search_whole(
    path: Path, regex: re.Pattern[str], pattern: _Pattern
) -> tuple[list[tuple[int, bool, str]], int, bool]:
    """Multiline search: the pattern runs over the whole file (`.` matches newlines)."""
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:_SNIFF]:
        return [], 0, True
    cut = data.find(b"\0")
    stopped = cut >= 0
    text = data[: cut if stopped else len(data)].decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    import bisect

    matched: set[int] = set()
    matches = 0
    for m in regex.finditer(text):
        if m.start() >= len(text) and text.endswith("\n"):
            continue  # an empty match after the final newline is on no line
        first = bisect.bisect_right(starts, m.start())
        last = bisect.bisect_right(starts, max(m.start(), m.end() - 1))
        matches += 1
        matched.update(range(first, last + 1))
        if pattern.mode == "files_with_matches":
            break
    # rg searches line by line unless the pattern can match a newline; only then does
    # `--count` count matches instead of matching lines.
    count = matches if _can_match_newline(regex) else len(matched)
    if pattern.mode != "content":
        return [], count, stopped
    shown_numbers: set[int] = set()
    for n in matched:
        shown_numbers.update(
            range(max(1, n - pattern.before), min(len(lines), n + pattern.after) + 1)
        )
    shown = [(n, n in matched, lines[n - 1]) for n in sorted(shown_numbers)]
    return shown, count, stopped


_NEWLINE = ord("\n")
"""The code point a `LITERAL` node of the parse tree holds for a newline."""


_NEWLINE_CATEGORIES = frozenset({"CATEGORY_SPACE", "CATEGORY_NOT_DIGIT", "CATEGORY_NOT_WORD"})


def _set_has_newline(items: Any) -> bool:
    negate = bool(items) and str(items[0][0]) == "NEGATE"
    hit = any(
        (str(op) == "LITERAL" and arg == _NEWLINE)
        or (str(op) == "RANGE" and arg[0] <= _NEWLINE <= arg[1])
        or (str(op) == "CATEGORY" and str(arg).replace("_UNI_", "_") in _NEWLINE_CATEGORIES)
        for op, arg in items
    )
    return hit != negate


def _tree_has_newline(tree: Any) -> bool:
    for op, arg in tree:
        name = str(op)
        if name == "ANY" or (name == "LITERAL" and arg == _NEWLINE):
            return True
        if name == "NOT_LITERAL" and arg != _NEWLINE:
            return True
        if name == "IN" and _set_has_newline(arg):
            return True
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and _tree_has_newline(arg[2]):
            return True
        if name == "SUBPATTERN" and _tree_has_newline(arg[-1]):
            return True
        if name == "ATOMIC_GROUP" and _tree_has_newline(arg):
            return True
        if name == "BRANCH" and any(_tree_has_newline(b) for b in arg[1]):
            return True
        if name == "GROUPREF_EXISTS" and any(
            b is not None and _tree_has_newline(b) for b in arg[1:]
        ):
            return True
    return False


@functools.lru_cache(maxsize=64)
def _can_match_newline(regex: re.Pattern[str]) -> bool:
    """Whether any atom of `regex` (compiled with DOTALL) could match a newline, read from
    its parse tree (the stdlib's parser: there is no public API for it)."""
    # typeshed ships `re` as a single-file stub without its private `_parser` submodule; the
    # public alias `sre_parse` warns (deprecated since 3.11).
    from re import _parser  # type: ignore[attr-defined]

    return _tree_has_newline(_parser.parse(regex.pattern, regex.flags))


def _python_search(query: _Query, pattern: _Pattern) -> _Found:
    flags = re.IGNORECASE if pattern.case_insensitive else 0
    if pattern.multiline:
        flags |= re.MULTILINE | re.DOTALL
    try:
        regex = re.compile(pattern.regex, flags)
    except re.error as exc:
        raise ToolError(
            f"invalid regex {pattern.regex!r}: {exc}. Fix the pattern (escape literal "
            f"characters such as ( [ {{ . * with a backslash) and retry."
        ) from exc
    found = _Found(files=[], counts={}, lines={})
    kept = 0
    for rel in _python_files(query):
        if time.monotonic() > query.deadline:
            raise _Timeout
        path = query.root / rel if rel else query.root
        try:
            if pattern.multiline:
                shown, count, stopped = _search_whole(path, regex, pattern)
            else:
                shown, count, stopped = _search_lines(path, regex, pattern, query.deadline)
        except OSError:
            continue
        if pattern.mode == "files_with_matches":
            if count:
                found.files.append(rel)
        elif pattern.mode == "count":
            if count and not stopped:
                found.counts[rel] = count
        elif shown:
            found.lines[rel] = shown
            kept += sum(len(t) + 16 for _, _, t in shown)
            if kept > query.max_capture:
                found.cut = True
                break
    return found


# --- the rg engine ----------------------------------------------------------------------------


_RG_BASE = (
    "--no-config",
    "--no-require-git",
    "--no-ignore-global",
    "--hidden",
    "--no-messages",
    "--color=never",
    "--null",
    "--with-filename",
)


def _rg_filters(query: _Query) -> list[str]:
    # No size limit (glob's) is left out rather than passed as a huge number: with the option,
    # rg stats every file it lists, which costs glob about a tenth of its time on a large tree.
    args = [] if query.max_file_size >= sys.maxsize else [f"--max-filesize={query.max_file_size}"]
    if query.top_only:
        args.append("--max-depth=1")
    for glob in (*query.globs, *_OVERRIDES):
        args.append(f"--glob={glob}")
    if query.types:
        args += [f"--type-add=tnxsel:{t}" for t in query.types]
        args.append("--type=tnxsel")
    return args


def _rg_target(query: _Query) -> tuple[Path, str]:
    """(cwd, path argument): run inside the root so that globs and output are relative to it."""
    if query.root.is_dir():
        return query.root, "."
    return query.root.parent, query.root.name


async def _run_rg(argv: list[str], cwd: Path, query: _Query) -> tuple[int, bytes, str, bool]:
    """Run rg with bounded time and memory: (exit code, stdout, stderr, cut short).

    stdout is empty when the query has a sink, which took the output instead. rg's output is
    read as it comes and the process group is killed once it passes the capture
    limit or the deadline, so a search matching gigabytes costs only the limit.
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=_READ_CHUNK,
    )
    out = bytearray()
    err = bytearray()
    cut = False

    async def read_out() -> None:
        nonlocal cut
        assert proc.stdout is not None
        size = 0
        while chunk := await proc.stdout.read(_READ_CHUNK):
            size += len(chunk)
            if query.sink is None:
                out.extend(chunk)
            else:
                query.sink(chunk)
            if size > query.max_capture:
                cut = True
                _killpg(proc.pid)
                return

    async def read_err() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            if len(err) < _STDERR_KEEP:
                err.extend(chunk[: _STDERR_KEEP - len(err)])

    try:
        await asyncio.wait_for(
            asyncio.gather(read_out(), read_err(), proc.wait()),
            max(0.0, query.deadline - time.monotonic()),
        )
    except TimeoutError:
        _killpg(proc.pid)
        await proc.wait()
        raise _Timeout from None
    except BaseException:
        _killpg(proc.pid)
        raise
    if cut:
        await proc.wait()
    _killpg(proc.pid)  # nothing of rg's may outlive the search
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return code, bytes(out), err.decode("utf-8", "replace"), cut


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _rg_error(code: int, stderr: str, what: str) -> None:
    if code == 2 and stderr.strip():
        message = stderr.strip()
        message = message.removeprefix("rg: ")
        if "regex" in message:
            raise ToolError(
                f"invalid regex: {message}\nFix the pattern (escape literal characters such as "
                "( [ { . * with a backslash) and retry."
            )
        raise ToolError(f"{what} failed: {message}")


def _strip_dot(path: str) -> str:
    return path[2:] if path.startswith("./") else path


async def _rg_files(rg: str, query: _Query) -> bool:
    """List the files under the query's root into its sink (NUL-terminated names, relative to
    the root, starting with `./`); True when the listing was cut short."""
    cwd, target = _rg_target(query)
    argv = [rg, *_RG_BASE, "--files", *_rg_filters(query), "--", target]
    code, _, err, cut = await _run_rg(argv, cwd, query)
    _rg_error(code, err, "listing files")
    return cut


_RG_LINE = re.compile(rb"(\d+)([:-])(.*)", re.DOTALL)


async def _rg_search(rg: str, query: _Query, pattern: _Pattern) -> _Found:
    cwd, target = _rg_target(query)
    argv = [rg, *_RG_BASE, *_rg_filters(query)]
    if pattern.case_insensitive:
        argv.append("--ignore-case")
    else:
        argv.append("--case-sensitive")
    if pattern.multiline:
        argv += ["--multiline", "--multiline-dotall"]
    if pattern.mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif pattern.mode == "count":
        argv.append("--count")
    else:
        argv += ["--line-number", f"--before-context={pattern.before}"]
        argv.append(f"--after-context={pattern.after}")
    argv += ["--regexp", pattern.regex, "--", target]
    code, out, err, cut = await _run_rg(argv, cwd, query)
    _rg_error(code, err, "the search")
    single = not query.root.is_dir()
    found = _Found(files=[], counts={}, lines={}, cut=cut)

    def rel(name: bytes) -> str:
        return "" if single else _strip_dot(name.decode("utf-8", "surrogateescape"))

    if pattern.mode == "files_with_matches":
        names = out.split(b"\0")
        if cut:
            names.pop()
        found.files = [rel(n) for n in names if n]
        return found
    records = out.split(b"\n")
    if cut or records[-1] == b"":
        records.pop()  # the empty string after the last newline, or a half-read record
    for record in records:
        name, sep, rest = record.partition(b"\0")
        if not sep:
            continue  # the "--" between context groups: the formatter draws its own
        if pattern.mode == "count":
            found.counts[rel(name)] = int(rest)
            continue
        m = _RG_LINE.fullmatch(rest)
        if m is None:
            continue
        text = m.group(3).decode("utf-8", "replace")
        found.lines.setdefault(rel(name), []).append((int(m.group(1)), m.group(2) == b":", text))
    return found


# --- shared post-processing -------------------------------------------------------------------


class _Stamps:
    """The files glob lists, each with its modification time, stat'ed as the names come in.

    rg prints names while it walks; a worker thread stats them meanwhile (the GIL is released
    during the system call), so that most of the statting overlaps rg's walk instead of
    following it. Names are stat'ed relative to the root's descriptor, which spares the kernel
    looking up the root's own folders for every file. `keep` filters the names first (None
    keeps them all).
    """

    def __init__(self, folder: str, keep: Callable[[str], bool] | None) -> None:
        self._dir = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        self._keep = keep
        self._chunks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._rest = b""
        self.stamped: list[tuple[int, str]] = []
        """(minus the mtime in ns, name relative to the root), in no order: the smallest are
        the newest."""

    def feed(self, chunk: bytes) -> None:
        """Queue a chunk of rg's `--null` output for `drain` (called on the event loop)."""
        self._chunks.put(chunk)

    def end(self) -> None:
        self._chunks.put(None)

    def drain(self) -> None:
        """Stat the names of the queued chunks until `end` (run on a worker thread). A name cut
        in half by a chunk's end waits for the rest; one never finished (rg was stopped) is
        dropped."""
        while (chunk := self._chunks.get()) is not None:
            head, sep, self._rest = (self._rest + chunk).rpartition(b"\0")
            if sep:
                # rg lists a folder given as `.` with every name starting with `./`: split on
                # NUL and that prefix at once rather than stripping name by name.
                text = head.decode("utf-8", "surrogateescape").removeprefix("./")
                self.add(text.split("\0./"))

    def add(self, names: Sequence[str]) -> None:
        """Stat the names `keep` accepts; files that vanished meanwhile are dropped."""
        stat_, fd, keep, stamped = os.stat, self._dir, self._keep, self.stamped
        for name in names:
            if keep is not None and not keep(name):
                continue
            try:
                st = stat_(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            stamped.append((-st.st_mtime_ns, name))

    def close(self) -> None:
        os.close(self._dir)


def _mtime_order(paths: Sequence[str]) -> list[str]:
    """Newest first; ties by path; files that vanished meanwhile are dropped. Plain strings:
    building a `Path` per file costs more than the stat on large trees."""
    keyed: list[tuple[int, str]] = []
    for p in paths:
        try:
            keyed.append((-os.stat(p, follow_symlinks=False).st_mtime_ns, p))
        except OSError:
            continue
    keyed.sort()
    return [p for _, p in keyed]


def _allowed(ctx: ToolContext, path: str) -> bool:
    """False for files the sandbox policy's `deny_read` covers: the model never sees them.

    Most policies deny nothing: checked first, that spares a `Path` per listed file (a third of
    glob's own time on ten thousand files)."""
    sandbox = ctx.sandbox
    return sandbox is None or not sandbox.deny_read or sandbox.denied(Path(path)) is None


def _cut_line(text: str, limit: int) -> str:
    text = text.removesuffix("\r")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def _page(
    entries: list[str], offset: int, limit: int, max_chars: int
) -> tuple[list[str], int | None]:
    """Entries from `offset`, at most `limit` and `max_chars`; and the next offset, if any."""
    page: list[str] = []
    size = 0
    for i in range(offset, min(len(entries), offset + limit)):
        size += len(entries[i]) + 1
        if page and size > max_chars:
            return page, i
        page.append(entries[i])
    end = offset + len(page)
    return page, end if end < len(entries) else None


# --- the tools --------------------------------------------------------------------------------


class _Search:
    """The state both tools share: options and the engine to use."""

    def __init__(self, opts: _SearchOptions) -> None:
        self.opts = opts
        self.rg = _find_rg(opts)

    @property
    def engine(self) -> str:
        return "rg" if self.rg else "python"

    def _deadline(self, ctx: ToolContext) -> float:
        limit = self.opts.timeout_ms / 1000
        remaining = ctx.remaining()
        if remaining is not None:
            limit = min(limit, remaining)
        return time.monotonic() + limit

    def _root(self, ctx: ToolContext, path: str | None, *, folder: bool) -> Path:
        root = confine(ctx, path or ".", write=False)
        if not root.exists():
            raise ToolError(
                f"{path!r} does not exist; give a folder inside the workspace (or omit path "
                "to search the whole workspace)."
            )
        if root.is_dir():
            return root
        if folder or not root.is_file():
            kind = "a file" if root.is_file() else "not a regular file"
            raise ToolError(f"{path!r} is {kind}; give a folder to search in.")
        return root

    def _timeout_error(self, what: str) -> ToolError:
        return ToolError(
            f"{what} took longer than {self.opts.timeout_ms / 1000:g} s and was stopped. Narrow "
            "it: give a deeper path, a glob or a type."
        )

    async def glob(self, args: dict[str, Any], ctx: ToolContext) -> Result:
        pattern: str = args["pattern"].strip()
        if not pattern or pattern.startswith("!"):
            raise ToolError(
                f"glob pattern {pattern!r} selects nothing; give a pattern such as "
                "'**/*.py' or 'src/**/*.{ts,tsx}'."
            )
        prefix, rest = _split_glob(pattern)
        base = args.get("path") or "."
        root = self._root(ctx, os.path.join(base, prefix) if prefix else base, folder=True)
        # Every file the search would see, then the pattern as a filter: unlike `rg -g`, the
        # pattern narrows and never brings back a file an ignore file leaves out. A pattern on
        # file names alone is also handed to the engine as a file type, which narrows the same
        # way (types never override ignore files) and spares listing every file.
        names_only = [g.removeprefix("**/") for g in _expand_braces(rest)]
        anchored = {g.startswith("/") for g in names_only}
        types: tuple[str, ...] = ()
        if len(anchored) == 1 and not any("/" in g.lstrip("/") for g in names_only):
            types = tuple(g.lstrip("/") for g in names_only)
        query = _Query(
            root=root,
            types=types,
            top_only=bool(types) and anchored == {True},
            max_file_size=sys.maxsize,
            deadline=self._deadline(ctx),
            max_capture=self.opts.max_capture_bytes,
        )
        base_dir = str(root)
        matcher = None if types else _spec(_expand_braces(rest))

        def keep(name: str) -> bool:
            if matcher is not None and not _match(matcher, name):
                return False
            return _allowed(ctx, os.path.join(base_dir, name))

        # Most calls list by file type under a policy that denies nothing: every name is kept.
        denies = ctx.sandbox is not None and bool(ctx.sandbox.deny_read)
        stamps = _Stamps(base_dir, keep if matcher is not None or denies else None)
        try:
            if self.rg:
                drained = asyncio.get_running_loop().run_in_executor(None, stamps.drain)
                try:
                    cut = await _rg_files(self.rg, replace(query, sink=stamps.feed))
                finally:
                    stamps.end()
                    await drained
            else:
                await anyio.to_thread.run_sync(lambda: stamps.add(_python_files(query)))
                cut = False
        except _Timeout:
            raise self._timeout_error("the file listing") from None
        finally:
            stamps.close()
        total = len(stamps.stamped)
        # Only the newest are shown: picking them costs less than sorting every file. The names
        # are unique, so ties in mtime fall to the name in both engines, as a full sort would.
        newest = heapq.nsmallest(self.opts.max_results, stamps.stamped)
        shown_base = display(ctx, root)
        shown = [n if shown_base == "." else os.path.join(shown_base, n) for _, n in newest]
        page, _ = _page(shown, 0, len(shown), self.opts.max_output_chars)
        lines = page or ["No files found."]
        notes = []
        if len(page) < total:
            notes.append(
                f"[Showing the {len(page)} most recently modified of {total} files. "
                "Narrow the pattern or the path to see the others.]"
            )
        if cut:
            notes.append(
                "[The listing stopped early: far too many files match. Narrow the pattern.]"
            )
        return Result(
            content="\n".join(lines + notes),
            metadata={
                "engine": self.engine,
                "total": total,
                "truncated": len(page) < total or cut,
            },
        )

    def _grep_query(self, ctx: ToolContext, args: dict[str, Any]) -> _Query:
        root = self._root(ctx, args.get("path"), folder=False)
        globs = (args["glob"],) if args.get("glob") else ()
        types: tuple[str, ...] = ()
        if args.get("type"):
            name = args["type"]
            if name not in _TYPES:
                close = difflib.get_close_matches(name, _TYPES, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ToolError(
                    f"unknown file type {name!r}.{hint} Known types: {', '.join(_TYPES)}. "
                    "Or filter with glob (e.g. '*.ext') instead."
                )
            types = _TYPES[name]
        if root.is_file():
            with open(root, "rb") as f:
                if b"\0" in f.read(_SNIFF):
                    raise ToolError(
                        f"{display(ctx, root)!r} is a binary file; grep searches text files."
                    )
        return _Query(
            root=root,
            globs=globs,
            types=types,
            max_file_size=self.opts.max_file_size,
            deadline=self._deadline(ctx),
            max_capture=self.opts.max_capture_bytes,
        )

    async def grep(self, args: dict[str, Any], ctx: ToolContext) -> Result:
        regex: str = args["pattern"]
        multiline = bool(args.get("multiline", False))
        if not multiline and ("\n" in regex or "\\n" in regex):
            raise ToolError(
                "the pattern can match a line break, but lines are searched one by one; set "
                "multiline: true to search across lines."
            )
        mode: Mode = args.get("output_mode", "files_with_matches")
        context = args.get("context")
        before = args.get("before", context) or 0
        after = args.get("after", context) or 0
        pattern = _Pattern(
            regex=regex,
            mode=mode,
            case_insensitive=bool(args.get("case_insensitive", False)),
            multiline=multiline,
            before=before if mode == "content" else 0,
            after=after if mode == "content" else 0,
        )
        query = self._grep_query(ctx, args)
        try:
            if self.rg:
                found = await _rg_search(self.rg, query, pattern)
            else:
                found = await anyio.to_thread.run_sync(lambda: _python_search(query, pattern))
        except _Timeout:
            raise self._timeout_error("the search") from None
        entries, summary = await anyio.to_thread.run_sync(
            lambda: self._entries(ctx, query.root, found, pattern, args)
        )
        offset = args.get("offset", 0)
        limit = args.get("head_limit") or self.opts.max_entries
        page, next_offset = _page(entries, offset, limit, self.opts.max_output_chars)
        lines = page or ["No files found." if mode == "files_with_matches" else "No matches found."]
        if offset and not page:
            lines = [f"No entries past offset {offset}: there are {len(entries)} in all."]
        if summary and page:
            lines = [summary, *lines]
        if next_offset is not None:
            lines.append(
                f"[Showing entries {offset + 1}-{offset + len(page)} of {len(entries)}. Call "
                f"again with offset={next_offset} to see more, or narrow the search with path, "
                "glob or type.]"
            )
        if found.cut:
            lines.append(
                "[The search stopped early: it matched far too much. Results are incomplete; "
                "narrow the pattern, path, glob or type.]"
            )
        return Result(
            content="\n".join(lines),
            metadata={
                "engine": self.engine,
                "total": len(entries),
                "truncated": next_offset is not None or found.cut,
            },
        )

    def _entries(
        self,
        ctx: ToolContext,
        root: Path,
        found: _Found,
        pattern: _Pattern,
        args: Mapping[str, Any],
    ) -> tuple[list[str], str]:
        """The result lines, in order, and a summary line; for every engine alike."""
        base = str(root)
        shown_base = display(ctx, root)

        def path_of(rel: str) -> str:
            return os.path.join(base, rel) if rel else base

        def shown_rel(rel: str) -> str:
            if not rel:
                return shown_base
            return rel if shown_base == "." else f"{shown_base}/{rel}"

        if pattern.mode == "files_with_matches":
            by_path = {path_of(r): r for r in found.files}
            paths = [p for p in by_path if _allowed(ctx, p)]
            entries = [shown_rel(by_path[p]) for p in _mtime_order(paths)]
            return entries, f"Found {len(entries)} files (newest first)"
        if pattern.mode == "count":
            counts = sorted(
                (path_of(r), shown_rel(r), n)
                for r, n in found.counts.items()
                if _allowed(ctx, path_of(r))
            )
            total = sum(n for _, _, n in counts)
            entries = [f"{shown}:{n}" for _, shown, n in counts]
            return entries, f"Found {total} matching lines in {len(counts)} files"
        numbers = args.get("line_numbers", True)
        limit = self.opts.max_line_chars
        context = pattern.before or pattern.after
        entries = []
        groups = sorted((path_of(r), r) for r in found.lines if _allowed(ctx, path_of(r)))
        for _, rel in groups:
            shown = shown_rel(rel)
            previous: int | None = None
            for number, is_match, text in found.lines[rel]:
                # rg's separator: between groups of lines that do not touch, and between files
                gap = (previous is None and bool(entries)) or (
                    previous is not None and number != previous + 1
                )
                if context and gap:
                    entries.append("--")
                previous = number
                sep = ":" if is_match else "-"
                where = f"{shown}{sep}{number}{sep}" if numbers else f"{shown}{sep}"
                entries.append(where + _cut_line(text, limit))
        return entries, ""


def _split_glob(pattern: str) -> tuple[str, str]:
    """`src/app/**/*.ts` -> (`src/app`, `**/*.ts`): the literal folders to search from, and
    the rest, kept anchored to them when it was anchored to the start."""
    parts = pattern.split("/")
    static: list[str] = []
    while len(parts) > 1 and not _MAGIC.search(parts[0]):
        static.append(parts.pop(0))
    rest = "/".join(parts)
    prefix = "/".join(static)
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    if static and "/" not in rest and not rest.startswith("**"):
        rest = "/" + rest
    return prefix, rest


_GLOB_DESCRIPTION = """\
Find files by name pattern. Returns paths (relative to the workspace), newest first (by \
modification time), at most {max_results}; a note says when more matched.
Patterns: `*` and `?` match within one path segment, `**` across folders, `{{a,b}}` either \
alternative, `[abc]` one character. A pattern without a slash matches file names at any depth \
(`*.py` finds every Python file); one with a slash is taken from the search folder \
(`src/**/*.ts`); a folder name alone matches no file (use `src/**`). `path` is the folder \
to search in (default: the workspace).
Files and folders ignored by .gitignore (also outside a git repository), .ignore or .rgignore \
are left out; `.git` is skipped; hidden files are included; symbolic links are not followed.
Too many results: give a deeper path or a more specific pattern. To search file contents, use \
grep."""

_GREP_DESCRIPTION = """\
Search file contents with a regular expression (ripgrep syntax: escape literal braces and \
parentheses, e.g. `interface\\{{\\}}`, `foo\\(`). Searches the workspace, or `path` (a folder \
or one file).
Filters: `glob` (e.g. `*.js`, `**/*.{{ts,tsx}}`; also matches files .gitignore would leave \
out) and `type` (py, js, ts, rust, go, java, c, cpp, md, json, yaml, ...).
output_mode: `files_with_matches` (default; paths, newest first), `content` (matching lines \
as `path:line:text`, with context lines as `path-line-text` and `--` between groups when \
context, before or after is set; line_numbers: false drops the numbers), `count` (matching \
lines per file). case_insensitive ignores case; multiline lets `.` and the pattern span lines.
Results are paged: at most head_limit entries (default {max_entries}) from offset (default 0); \
a note gives the offset of the next page. Lines longer than {max_line_chars} characters are \
cut. Respects .gitignore (also outside a git repository), skips `.git`, binary files, files \
over {max_size} MB and symbolic links.
An invalid pattern returns the regex engine's message: fix the pattern and retry."""


def search_tools(options: Mapping[str, Any]) -> list[Tool]:
    """The `glob` and `grep` tools.

    Args:
        options: `max_results`, `max_entries`, `max_output_chars`, `max_line_chars`,
            `max_file_size`, `max_capture_bytes`, `timeout_ms` (positive integers), `engine`
            (`auto`, `rg` or `python`) and `rg_path`.

    Raises:
        ConfigError: an unknown option, a bad value, or `engine: rg` with no runnable rg.
    """
    opts = _options(options)
    search = _Search(opts)
    count = {"type": "integer", "minimum": 0}
    return [
        Tool(
            name="glob",
            description=_GLOB_DESCRIPTION.format(max_results=opts.max_results),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "Glob pattern, e.g. '**/*.py' or 'src/**/*.{ts,tsx}'.",
                    },
                    "path": {
                        "type": "string",
                        "description": "Folder to search in (default: the workspace).",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
            handler=search.glob,
            source="builtin",
            read_only=True,
            destructive=False,
            idempotent=True,
            open_world=False,
            meta={"engine": search.engine},
        ),
        Tool(
            name="grep",
            description=_GREP_DESCRIPTION.format(
                max_entries=opts.max_entries,
                max_line_chars=opts.max_line_chars,
                max_size=opts.max_file_size // (1024 * 1024),
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {
                        "type": "string",
                        "description": "File or folder to search (default: the workspace).",
                    },
                    "glob": {
                        "type": "string",
                        "description": "Only files matching this glob, e.g. '*.py'.",
                    },
                    "type": {
                        "type": "string",
                        "description": "Only files of this type, e.g. 'py', 'js', 'rust'.",
                    },
                    "output_mode": {
                        "type": "string",
                        "enum": ["files_with_matches", "content", "count"],
                        "default": "files_with_matches",
                    },
                    "case_insensitive": {"type": "boolean", "default": False},
                    "line_numbers": {
                        "type": "boolean",
                        "default": True,
                        "description": "Show line numbers (content mode).",
                    },
                    "context": {**count, "description": "Lines of context around each match."},
                    "before": {**count, "description": "Lines of context before each match."},
                    "after": {**count, "description": "Lines of context after each match."},
                    "multiline": {
                        "type": "boolean",
                        "default": False,
                        "description": "Let the pattern span lines; `.` matches newlines.",
                    },
                    "head_limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": f"Entries to return at most (default {opts.max_entries}).",
                    },
                    "offset": {**count, "default": 0, "description": "Entries to skip first."},
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
            handler=search.grep,
            source="builtin",
            read_only=True,
            destructive=False,
            idempotent=True,
            open_world=False,
            meta={"engine": search.engine},
        ),
    ]
