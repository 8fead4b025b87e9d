"""Known-safe commands: the ones the builtin shell runs without asking.

An allow-list by construction. A command is known-safe only when every token of it is
understood: each simple command's program is in the table (`table.py`), every option is in that
program's own list with its arity and is not refused, clusters and long options are read the way
that program's parser reads them, operands are words whose run-time value is known, and the only
redirections are to /dev/null, descriptor duplications and here-documents. Anything else is not
known-safe; it is not denied either, it falls through to the rules (the shell's default: ask).

Wrappers (`env`, `timeout`, `nice`, `xargs`, `sudo`, `bash -c`, `eval`, `exec`, `time`...)
are not in the table: each changes how, where or as whom its command runs (`env -C DIR -S STR
-u NAME`, xargs appends words nobody has seen, `bash -c` reads a string as a second command
line), so a wrapped command is not known-safe and gets asked.

Operands: a word with an expansion (`$X`, `${X}`) is not known-safe (its value is not known
now), except for echo, which only prints whatever it gets. A glob or brace word is fine when it
cannot expand into an option (it does not start with a pattern character: `src/*.py`, not
`*.py`, which a file named `--output=x.py` would match; or it follows `--`), or when the program
has no refused option and no check, so that whatever it expands to is an allowed option
(`ls *`, `wc -l *.py`). Programs whose check reads their words (sed, date, find, uniq, git
branch...) take written-out words only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .evaluators import option_entries
from .grammar import _Redirect, _Simple, _Word, analyze
from .table import (
    FIND_GLOBAL,
    FIND_PRIMARIES,
    GIT,
    PROGRAMS,
    Arity,
    Option,
    Parser,
    Program,
)

__all__ = ["is_known_safe_command"]


@functools.lru_cache(maxsize=512)
def is_known_safe_command(command: str) -> bool:
    """True when `command` only reads: every simple command in it is a program of the
    known-safe table with only its allowed options (`ls -la`, `git log -n 5`, `rg -n TODO`;
    not `find -exec`, `rg --pre`, `sort -o`, `git branch -D`, nor any wrapper), and nothing is
    redirected but to /dev/null, a descriptor, or from a here-document.

    The shell tool runs such commands without asking. Anything not fully understood
    (substitutions, subshells, unknown options or programs, abbreviations of refused or
    ambiguous options, expansions in operands) is not known-safe.
    """
    if len(command) > 10_000:
        return False
    analysis = analyze(command)
    if not analysis.safe_syntax or not analysis.commands:
        return False
    if "<<" in command and "\\\n" in command:
        # A here-document delimiter or body line joined by backslash-newline can end the body
        # earlier than a line-by-line reading sees; doubt (the grammar owns the exact reading).
        return False
    return all(_simple_is_safe(c) for c in analysis.commands)


_FD_VARIABLE = re.compile(r"\{[^}]+\}")
"""`{NAME}>file` makes bash assign a new descriptor number to NAME (`{PATH}>/dev/null` sets
PATH to 10, and the next command is looked up in the folder `10`)."""
_PLAIN_DELIMITER = re.compile(r"[A-Za-z0-9_.+-]+")


def _redirect_is_safe(r: _Redirect) -> bool:
    if not (r.fd == "" or r.fd.isdigit()):
        return False
    if r.op in (">", ">>", ">|", "&>", "&>>", "<"):
        return r.target == "/dev/null"
    if r.op in (">&", "<&"):
        return r.target.isdigit() or r.target in ("-", "/dev/null")
    if r.op in ("<<", "<<-"):
        return _PLAIN_DELIMITER.fullmatch(r.target) is not None
    return r.op == "<<<"  # a here-string is data: the grammar vetted its expansions


def _plain(word: _Word) -> bool:
    return not (word.expands or word.glob)


def _simple_is_safe(command: _Simple) -> bool:
    if not all(_redirect_is_safe(r) for r in command.redirects):
        return False
    words = command.words
    if not words:
        return False
    head = words[0]
    if not _plain(head) or head.assignment is not None:
        return False  # `FOO=1 ls`, `$CMD`, `l*`: what runs is not the word written
    if any(_FD_VARIABLE.fullmatch(w.text) for w in words):
        return False
    if head.text == "git":
        return _git_is_safe(words[1:])
    program = PROGRAMS.get(head.text)
    return program is not None and _args_are_safe(program, words[1:])


_GIT_GLOBALS = {name: o for o in GIT.options for name in o.names}


def _git_is_safe(words: Sequence[_Word]) -> bool:
    """git: global options read exactly, then a read-only sub-command with its own options."""
    i = 0
    while i < len(words) and words[i].text.startswith("-"):
        option = _GIT_GLOBALS.get(words[i].text)
        if option is None or option.refused or not _plain(words[i]):
            return False  # also `-C sub`, `-ccore.pager=x`, `--git-dir=...`
        i += 1
    if i >= len(words) or not _plain(words[i]):
        return False
    program = GIT.subcommands.get(words[i].text)
    listed = f"git {words[i].text}"
    i += 1
    if program is not None and program.subcommands:
        if i >= len(words) or not _plain(words[i]):
            return False
        program = program.subcommands.get(words[i].text)
        i += 1
    return program is not None and _args_are_safe(program, words[i:], listed)


@dataclass(slots=True)
class _Parsed:
    options: list[tuple[Option, str | None]]
    operands: list[_Word]
    loose: bool = False
    """Some operand before `--` may expand into options (`_may_become_options`)."""


@functools.cache
def _evaluating(listed: str) -> frozenset[str]:
    """The spellings of `listed`'s options that run a string (`evaluators.py`): refused here
    whatever the table says, so the table cannot drift from the list."""
    return frozenset(n for e in option_entries(listed) for o in e.options for n in o.names)


def _args_are_safe(program: Program, words: Sequence[_Word], listed: str | None = None) -> bool:
    if program.plain and not all(_plain(w) for w in words):
        return False
    if program.check == "find":
        return _find_is_safe(words)
    parsed = _parse(program, words)
    if parsed is None:
        return False
    evaluating = _evaluating(listed or program.name)
    if any(option.refused or set(option.names) & evaluating for option, _ in parsed.options):
        return False
    if program.max_operands is not None and (
        len(parsed.operands) > program.max_operands or any(w.glob for w in parsed.operands)
    ):
        return False
    if not program.expansions and any(w.expands for w in parsed.operands):
        return False
    if parsed.loose and not _harmless_options(program):
        return False
    check = _CHECKS.get(program.check or "")
    return check is None or check(parsed)


def _parse(program: Program, words: Sequence[_Word]) -> _Parsed | None:
    """Read `words` the way `program`'s option parser does; None when some word is not
    understood (an unknown or ambiguous option, a missing value, a value that looks like an
    option, an option word that expands)."""
    parsed = _Parsed([], [])
    if program.parser is Parser.NONE:
        parsed.operands = list(words)
        return parsed
    if program.parser is Parser.ECHO:
        parsed.operands = list(words)
        return parsed
    short, long_ = _index(program)
    i = 0
    options_end = False
    while i < len(words):
        word = words[i]
        text = word.text
        i += 1
        if options_end or text == "-" or not text.startswith("-"):
            parsed.loose |= not options_end and _may_become_options(word)
            parsed.operands.append(word)
            if program.parser is Parser.BUILTIN:
                options_end = True  # bash builtins stop reading options at the first operand
            continue
        if not _plain(word):
            return None  # an option word must be written out: `-g*.py` may become other words
        if text == "--":
            options_end = True
            continue
        if program.numbers and text[1:].isdigit():
            continue  # `head -5`, `git log -3`
        if text.startswith("--"):
            if program.parser is Parser.BUILTIN:
                return None
            name, eq, value = text[2:].partition("=")
            option = _long_option(program, long_, name)
            if option is None:
                return None
            if eq:
                if option.arity is Arity.NONE:
                    return None  # getopt refuses `--flag=x`; not understood either way
                parsed.options.append((option, value))
            else:
                i = _separate_value(option, words, i, parsed)
                if i is None:
                    return None
            continue
        k = 1
        while k < len(text):
            option = short.get(text[k])
            if option is None:
                return None
            k += 1
            if option.arity is Arity.NONE:
                parsed.options.append((option, None))
                continue
            if k < len(text):
                parsed.options.append((option, text[k:]))  # the rest of the cluster: `-kVAL`
            else:
                i = _separate_value(option, words, i, parsed)
                if i is None:
                    return None
            break
    return parsed


def _separate_value(option: Option, words: Sequence[_Word], i: int, parsed: _Parsed) -> int | None:
    """Record an option written without its value: a required value is the next word, `i`
    (the index after it is returned); None when that word is missing or looks like an option.
    An optional value is never taken from the next word, as getopt does."""
    if option.arity is Arity.REQUIRED:
        if i >= len(words) or not _value_ok(words[i]):
            return None
        parsed.options.append((option, words[i].text))
        return i + 1
    parsed.options.append((option, None))
    return i


@functools.cache
def _index(program: Program) -> tuple[dict[str, Option], dict[str, Option]]:
    return program.short(), program.long()


def _long_option(program: Program, long_: dict[str, Option], name: str) -> Option | None:
    """The option `--name` means: an exact name, or (getopt_long) an unambiguous prefix of the
    names in the program's full list, refused ones included."""
    option = long_.get(name)
    if option is not None or program.parser is not Parser.GETOPT or not name:
        return option
    matches = {id(o): o for n, o in long_.items() if n.startswith(name)}
    return next(iter(matches.values())) if len(matches) == 1 else None


def _value_ok(word: _Word) -> bool:
    """A separate option value: written out, and not something that looks like an option
    (`sort -T -- -o x`: was `--` the value, or the end of options? Doubt refuses)."""
    return _plain(word) and not word.text.startswith("-")


def _may_become_options(word: _Word) -> bool:
    """A glob or brace word before `--` that starts with a pattern character: `*.py` matches
    a file named `--output=x.py`, and `{-o,x}` is two words, the first an option."""
    return word.glob and (not word.text or word.text[0] in "*?[{")


@functools.cache
def _harmless_options(program: Program) -> bool:
    """True when no option of `program` is refused and no check reads its words: whatever a
    glob expands to can then only be an allowed option (`ls *`, `wc -l *.py`)."""
    return program.check is None and not any(o.refused for o in program.options)


# --- per-program checks -----------------------------------------------------------------------


_SED_ADDR = r"(?:\d+|\$|/(?:[^/\\\n]|\\.)*/I?)"
_SED_SAFE = re.compile(rf"\s*(?:{_SED_ADDR}(?:\s*,\s*{_SED_ADDR})?)?\s*[pq=]\s*")
"""A sed script that only prints: `10,20p`, `/start/,/end/p`, `$=`, `5q`."""


def _sed(parsed: _Parsed) -> bool:
    """Only `sed -n` with print-only scripts (`sed -n 10,20p`): `w`, `e`, `s///w` write or run."""
    quiet = any("-n" in o.names for o, _ in parsed.options)
    scripts = [v or "" for o, v in parsed.options if "-e" in o.names]
    if not scripts:
        if not parsed.operands:
            return False
        scripts = [parsed.operands[0].text]
    return quiet and all(
        _SED_SAFE.fullmatch(part) for s in scripts for part in re.split(r"[;\n]", s) if part.strip()
    )


def _date(parsed: _Parsed) -> bool:
    """`date MMDDhhmm` sets the clock: the only operand date may have is `+FORMAT`."""
    return len(parsed.operands) <= 1 and all(w.text.startswith("+") for w in parsed.operands)


def _command(parsed: _Parsed) -> bool:
    """`command -v NAME` looks NAME up; `command NAME` would run it."""
    return any(set(o.names) & {"-v", "-V"} for o, _ in parsed.options)


def _test(parsed: _Parsed) -> bool:
    """bash's `test -v NAME` / `-R NAME` evaluate an array subscript in NAME, which runs any
    `$(...)` written in it."""
    return not any(w.text in ("-v", "-R") for w in parsed.operands)


def _git_branch(parsed: _Parsed) -> bool:
    """Listing only: a bare name creates a branch, unless `--list` makes it a pattern."""
    listing = any("--list" in o.names for o, _ in parsed.options)
    return listing or not parsed.operands


_CHECKS = {
    "sed": _sed,
    "date": _date,
    "command": _command,
    "test": _test,
    "git-branch": _git_branch,
}


def _find_is_safe(words: Sequence[_Word]) -> bool:
    """find: `-H`/`-L`/`-P`, paths, then an expression of primaries from `FIND_PRIMARIES`,
    each with its fixed number of arguments. `-exec`, `-delete`, `-fprint`... are not listed."""
    i = 0
    while i < len(words) and words[i].text in FIND_GLOBAL:
        i += 1
    while i < len(words) and not words[i].text.startswith(("-", "(", ")", "!", ",")):
        i += 1  # the starting points
    while i < len(words):
        arity = FIND_PRIMARIES.get(words[i].text)
        if arity is None or i + arity >= len(words):
            return False
        i += 1 + arity
    return True
