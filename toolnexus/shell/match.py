"""Command patterns (`git status *`) matched against a command's readings: wrappers stripped,
scripts of `bash -c` read as commands of their own."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .grammar import _Simple, _Word, analyze

# --- wrappers -------------------------------------------------------------------------------

_SAFE_VARS = frozenset(
    {
        "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_NUMERIC",
        "LC_TIME", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM",
        "COLUMNS", "LINES", "CI", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
        "RUST_BACKTRACE", "RUST_LOG", "NODE_ENV", "GIT_TERMINAL_PROMPT",
    }
)  # fmt: skip
"""Variables an allow rule may look past (`LANG=C ls` is `ls`); `PATH=`, `LD_PRELOAD=`, `PAGER=`
and the like change what runs, so a command setting them only matches a pattern that says so."""

_DENY_ONLY_PREFIXES = frozenset(
    {"!", "{", "if", "then", "else", "elif", "while", "until", "do", "coproc", "busybox", "setsid"}
)
_FIND_RUNNERS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})


def _options(
    words: Sequence[_Word], start: int, with_value: str, long_with_value: Sequence[str] = ()
) -> int:
    """Index of the first non-option word, skipping options (and their values) from `start`."""
    i = start
    while i < len(words):
        text = words[i].text
        if text == "--":
            return i + 1
        if not text.startswith("-") or text == "-":
            return i
        if text.startswith("--"):
            if text in long_with_value:
                i += 1
        elif text[1] in with_value and len(text) == 2:
            i += 1
        i += 1
    return i


def _strip_once(words: Sequence[_Word], deny: bool) -> list[_Word] | None:
    """`words` without their outermost wrapper, or None when they do not start with one.

    `deny` views look past everything that could hide a command (any assignment, `sudo`,
    `if`/`then`...); allow views only past wrappers that do not change what the command does.
    """
    if not words:
        return None
    if words[0].assignment is not None:
        i = 0
        while i < len(words) and (name := words[i].assignment) is not None:
            if not deny and name not in _SAFE_VARS:
                return None
            i += 1
        return list(words[i:])
    name = words[0].text
    if deny:
        name = name.rsplit("/", 1)[-1]
    rest: int | None = None
    if name in ("nohup", "builtin", "noglob"):
        rest = 1
    elif name == "command":
        if len(words) > 1 and words[1].text in ("-v", "-V"):
            return None
        rest = 2 if len(words) > 1 and words[1].text == "-p" else 1
    elif name == "exec":
        rest = _options(words, 1, "a")
    elif name == "timeout":
        rest = _options(words, 1, "ks", ("--kill-after", "--signal")) + 1
    elif name == "time":
        i = _options(words, 1, "fo", ("--format", "--output"))
        if not deny and any(w.text.startswith(("-o", "--o", "-a", "--a")) for w in words[1:i]):
            return None  # `time -o FILE` writes FILE
        rest = i
    elif name == "nice":
        rest = _options(words, 1, "n", ("--adjustment",))
    elif name == "stdbuf":
        rest = _options(words, 1, "ioe", ("--input", "--output", "--error"))
    elif name == "xargs":
        rest = _options(
            words, 1, "adEILnPs", ("--arg-file", "--delimiter", "--max-args", "--max-procs")
        )
    elif name == "env":
        i = _options(words, 1, "uC", ("--unset", "--chdir"))
        for j in range(1, i):
            flag = words[j].text
            if flag.startswith(("-S", "--split-string")):
                # `env -S 'cmd args'` runs a command written inside one string.
                if not deny:
                    return None
                if flag in ("-S", "--split-string"):
                    script, after = (words[j + 1].text if j + 1 < len(words) else ""), j + 2
                else:
                    script, after = flag.split("=", 1)[-1].removeprefix("-S"), j + 1
                return [_Word(t) for t in script.split()] + list(words[after:]) or None
        while i < len(words) and (var := words[i].assignment) is not None:
            if not deny and var not in _SAFE_VARS:
                return None
            i += 1
        rest = i
    elif deny and name in ("sudo", "doas"):
        rest = _options(words, 1, "ugCDhprtTU", ("--user", "--group", "--chdir"))
    elif deny and name in _DENY_ONLY_PREFIXES:
        rest = 1
    elif deny and name == "function":
        rest = 2
    elif deny and name == "watch":
        rest = _options(words, 1, "nq", ("--interval", "--equexit"))
    elif deny and name == "find":
        # `find ... -exec rm {} +` runs the words after the action
        starts = [i + 1 for i, w in enumerate(words) if w.text in _FIND_RUNNERS]
        rest = starts[0] if starts else None
    if rest is None or rest >= len(words):
        return None
    return list(words[rest:])


def _inline_script(words: Sequence[_Word]) -> str | None:
    """The script of `bash -c SCRIPT` / `sh -lc SCRIPT` / `eval ARGS...`, if that is what runs."""
    if not words:
        return None
    name = words[0].text.rsplit("/", 1)[-1]
    if name == "eval":
        return " ".join(w.text for w in words[1:])
    if name not in _SHELLS:
        return None
    for i in range(1, len(words)):
        text = words[i].text
        if text.startswith("--"):
            continue
        if text.startswith(("-", "+")) and len(text) > 1:
            if text[0] == "-" and "c" in text[1:]:
                return words[i + 1].text if i + 1 < len(words) else None
            continue
        return None
    return None


@dataclass(frozen=True, slots=True)
class _View:
    text: str
    """The words joined by single spaces."""
    full: str
    """`text` followed by the redirections, for patterns that mention `>` or `<`."""
    writes: bool
    unknown: bool = False
    """The command name is only known at run time (`$CMD`, `{rm,x}`, `r?`): it may be any
    program, so every deny and ask pattern matches and no allow pattern does."""


def _views(command: _Simple, deny: bool) -> list[_View]:
    full_suffix = " ".join(r.render() for r in command.redirects)
    writes = any(r.writes for r in command.redirects)
    views: list[_View] = []
    words: list[_Word] | None = list(command.words)
    while words is not None:
        unknown = bool(words) and (words[0].expands or words[0].glob)
        spellings = [words]
        if deny and words and "/" in words[0].text:
            # `/bin/rm` runs rm: deny views also see the program's bare name
            spellings.append([_Word(words[0].text.rsplit("/", 1)[-1]), *words[1:]])
        for spelling in spellings:
            text = " ".join(w.text for w in spelling)
            full = f"{text} {full_suffix}" if full_suffix else text
            views.append(_View(text, full, writes, unknown))
        words = _strip_once(words, deny)
    return views


def _stripped(command: _Simple, deny: bool) -> list[_Word]:
    words: list[_Word] = list(command.words)
    while (nxt := _strip_once(words, deny)) is not None:
        words = nxt
    return words


@dataclass(frozen=True, slots=True)
class _Reading:
    """How a rule of one kind (allow, or deny/ask) reads one simple command."""

    views: tuple[_View, ...]
    scripts: tuple[str, ...]
    """Scripts of `bash -c SCRIPT` / `eval` judged as commands of their own."""


@functools.lru_cache(maxsize=512)
def _readings(command: str, deny: bool) -> tuple[_Reading, ...] | None:
    """Every simple command of `command` as rules of one kind read it; None when an allow rule
    cannot read it. Cached: the same line meets several rules, often on the same call."""
    analysis = analyze(command)
    if not deny and not analysis.safe_syntax:
        return None
    readings = []
    for simple in analysis.commands:
        if deny:
            scripts = {
                script
                for words in (list(simple.words), _stripped(simple, deny=True))
                if (script := _inline_script(words)) is not None
            }
        elif any(r.writes for r in simple.redirects):
            scripts = set()
        else:
            script = _inline_script(_stripped(simple, deny=False))
            scripts = set() if script is None else {script}
        readings.append(_Reading(tuple(_views(simple, deny)), tuple(sorted(scripts))))
    return tuple(readings)


# --- command patterns -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """A compiled command pattern such as `git status *` or `npm run test:*`."""

    source: str
    regex: re.Pattern[str]
    redirects: bool
    """The pattern mentions `>` or `<`, so it is matched against the redirections too."""

    def matches(self, view: _View, strict: bool) -> bool:
        if view.unknown:
            return not strict
        if self.redirects:
            return self.regex.fullmatch(view.full) is not None
        if strict and view.writes:
            return False
        return self.regex.fullmatch(view.text) is not None


def compile_command_pattern(pattern: str) -> CommandPattern:
    """Compile a command pattern: `*` spans anything; a trailing ` *` (or legacy `:*`) also
    matches nothing, at a word boundary, so `ls *` matches `ls` and `ls -la` but not `lsof`."""
    text = " ".join(pattern.split())
    if text.endswith(":*"):
        text = text[:-2].rstrip() + " *"
    tail = ""
    if text.endswith(" *"):
        text = text[:-2]
        tail = "(?: .*)?"
    body = ".*".join(re.escape(part) for part in text.split("*"))
    regex = re.compile(body + tail, re.DOTALL)
    return CommandPattern(source=pattern, regex=regex, redirects=bool(set(text) & {">", "<"}))


def command_matches(command: str, patterns: Sequence[CommandPattern], *, strict: bool) -> bool:
    """Do `patterns` cover `command`?

    `strict` (allow rules): the command must parse safely and *every* simple command must match
    some pattern, looking only past harmless wrappers; a simple command that writes a file
    through a redirection only matches a pattern that mentions the redirection.
    Not strict (deny and ask rules): *any* simple command matching is enough, including those
    found inside substitutions of an unparseable command, looking past every wrapper.
    """
    readings = _readings(command, not strict)
    if strict:
        return bool(readings) and all(_covered(r, patterns, True) for r in readings or ())
    return any(_covered(r, patterns, False) for r in readings or ())


def _covered(reading: _Reading, patterns: Sequence[CommandPattern], strict: bool) -> bool:
    if any(p.matches(v, strict) for v in reading.views for p in patterns):
        return True
    return any(command_matches(s, patterns, strict=strict) for s in reading.scripts)

