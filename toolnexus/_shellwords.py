"""Shell command analysis for approval: split a command line into simple commands, strip
wrappers, match command patterns, and recognise known read-only commands.

This is a static reading of POSIX/bash syntax, never an execution. It errs on the safe side:
whatever it cannot analyse (command and process substitution, subshells, unbalanced quotes,
unterminated here-documents) makes the command *unsafe*, which means no allow rule and no
known-safe check will ever approve it, while deny and ask rules still see every simple command
found inside (a deny of `rm *` catches `echo $(rm -rf /)`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["is_known_safe_command", "split_command"]


@dataclass(frozen=True, slots=True)
class _Word:
    text: str
    """The word after quote removal; substitutions are left as `$(...)` placeholders."""
    expands: bool = False
    """Contains a parameter expansion or substitution: its run-time value is unknown."""
    glob: bool = False
    """Contains unquoted glob or brace characters: it may expand to other words (file names)."""
    quoted: bool = False
    """Some part of it was quoted or escaped (a quoted here-document delimiter is literal)."""
    literal_prefix: int = 0
    """How many leading characters of `text` were unquoted (a `NAME=` assignment must be)."""

    @property
    def assignment(self) -> str | None:
        """The variable name when this word is a `NAME=value` assignment."""
        m = _ASSIGNMENT.match(self.text)
        if m is not None and m.end() <= self.literal_prefix:
            return m.group(1)
        return None


_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")


@dataclass(frozen=True, slots=True)
class _Redirect:
    fd: str
    op: str
    target: str

    @property
    def writes(self) -> bool:
        """True when this redirection opens a file for writing (other than /dev/null)."""
        if self.op in (">&", "<&"):
            # `2>&1`, `>&-` duplicate descriptors; `>&file` (bash) writes to a file.
            return self.op == ">&" and not (self.target.isdigit() or self.target == "-")
        return self.op in _WRITE_OPS and self.target != "/dev/null"

    def render(self) -> str:
        if self.op in (">&", "<&"):
            return f"{self.fd}{self.op}{self.target}"
        return f"{self.fd}{self.op} {self.target}"


_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})


@dataclass(frozen=True, slots=True)
class _Simple:
    """One simple command: its words and redirections."""

    words: tuple[_Word, ...]
    redirects: tuple[_Redirect, ...]


@dataclass(frozen=True, slots=True)
class _Analysis:
    commands: tuple[_Simple, ...]
    """Every simple command found, including those inside substitutions and subshells."""
    safe_syntax: bool
    """False when the command uses a construct a static reading cannot vouch for."""


class _Parser:
    """A hand-written reader of the shell grammar subset that matters for approval."""

    _STOP = frozenset(" \t\n;&|()<>")

    def __init__(self, src: str) -> None:
        self.src = src
        self.i = 0
        self.n = len(src)
        self.unsafe = False
        self.commands: list[_Simple] = []
        self.heredocs: list[tuple[str, bool, bool]] = []

    def _peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.src[j] if j < self.n else ""

    def parse(self, until: str | None = None) -> None:
        """Read commands up to the end, or up to an unquoted `until` (`)` of `$(` or `(`)."""
        words: list[_Word] = []
        redirects: list[_Redirect] = []

        def flush() -> None:
            if words or redirects:
                self.commands.append(_Simple(tuple(words), tuple(redirects)))
            words.clear()
            redirects.clear()

        src = self.src
        while True:
            while self.i < self.n and src[self.i] in " \t":
                self.i += 1
            if self.i >= self.n:
                if until is not None or self.heredocs:
                    self.unsafe = True
                break
            c = src[self.i]
            if until is not None and c == until:
                self.i += 1
                break
            if c == "#":  # the loop only stops here at the start of a word
                end = src.find("\n", self.i)
                self.i = self.n if end < 0 else end
                continue
            if c == "\\" and self._peek(1) == "\n":
                self.i += 2
                continue
            if c == "\n":
                flush()
                self.i += 1
                self._read_heredocs()
                continue
            if c == "&" and self._peek(1) == ">":
                self._redirect("", words, redirects)
                continue
            if c in ";&|":
                flush()
                self.i += 2 if self._peek(1) in ("&", "|") and c != ";" else 1
                continue
            if c == "(":
                self.unsafe = True
                flush()
                self.i += 1
                self.parse(until=")")
                continue
            if c == ")":
                self.unsafe = True
                flush()
                self.i += 1
                continue
            if c in "<>" and self._peek(1) != "(":
                self._redirect("", words, redirects)
                continue
            word = self._word()
            if (
                not word.quoted
                and word.text.isdigit()
                and self._peek() in ("<", ">")
                and self._peek(1) != "("
            ):
                self._redirect(word.text, words, redirects)
                continue
            words.append(word)
        flush()

    def _redirect(self, fd: str, words: list[_Word], redirects: list[_Redirect]) -> None:
        src = self.src
        for op in ("&>>", "&>", "<<<", "<<-", "<<", "<&", "<>", "<", ">>", ">|", ">&", ">"):
            if src.startswith(op, self.i):
                break
        self.i += len(op)
        while self.i < self.n and src[self.i] in " \t":
            self.i += 1
        if self.i >= self.n or (
            src[self.i] in "\n;&|()<>" and not src.startswith(("<(", ">("), self.i)
        ):
            self.unsafe = True
            return
        target = self._word()
        if op in ("<<", "<<-"):
            self.heredocs.append((target.text, target.quoted, op == "<<-"))
        redirects.append(_Redirect(fd, op, target.text))

    def _read_heredocs(self) -> None:
        pending, self.heredocs = self.heredocs, []
        for delimiter, quoted, strip_tabs in pending:
            body: list[str] = []
            while True:
                if self.i >= self.n:
                    self.unsafe = True
                    break
                end = self.src.find("\n", self.i)
                line = self.src[self.i : self.n if end < 0 else end]
                self.i = self.n if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body.append(line)
            text = "\n".join(body)
            if not quoted and ("$(" in text or "`" in text):
                # An unquoted delimiter lets the body run substitutions.
                self.unsafe = True
                self._nested(text)
            elif not quoted and _risky_expansion(text):
                self.unsafe = True

    def _nested(self, script: str) -> None:
        inner = _Parser(script)
        inner.parse()
        self.commands.extend(inner.commands)

    def _word(self) -> _Word:
        src = self.src
        buf: list[str] = []
        size = 0
        expands = glob = quoted = False
        literal_prefix = -1
        open_at: dict[str, int] = {}

        def add(text: str) -> None:
            nonlocal size
            buf.append(text)
            size += len(text)

        def mark_quoted() -> None:
            nonlocal quoted, literal_prefix
            quoted = True
            if literal_prefix < 0:
                literal_prefix = size

        if src[self.i] in "<>":  # process substitution `<(...)` / `>(...)`
            self.unsafe = True
            self.i += 2
            self.parse(until=")")
            return _Word("<(...)", expands=True)
        plain = _PLAIN.match(src, self.i)
        if plain is not None:
            self.i = plain.end()
            if self.i >= self.n or src[self.i] in self._STOP:  # the common case: a plain word
                text = plain.group()
                return _Word(text, literal_prefix=len(text))
            add(plain.group())
        while self.i < self.n:
            c = src[self.i]
            if c in self._STOP:
                break
            if c not in _SPECIAL:
                plain = _PLAIN.match(src, self.i)
                assert plain is not None
                add(plain.group())
                self.i = plain.end()
                continue
            if c == "\\":
                nxt = self._peek(1)
                if nxt == "\n":
                    self.i += 2
                    continue
                if not nxt:
                    self.unsafe = True
                    self.i += 1
                    continue
                mark_quoted()
                add(nxt)
                self.i += 2
            elif c == "'":
                mark_quoted()
                end = src.find("'", self.i + 1)
                if end < 0:
                    self.unsafe = True
                    end = self.n
                add(src[self.i + 1 : end])
                self.i = min(end + 1, self.n)
            elif c == '"':
                mark_quoted()
                self.i += 1
                expands |= self._dquoted(add)
            elif c == "$":
                nxt = self._peek(1)
                if nxt == "'":
                    mark_quoted()
                    add(self._ansi_c())
                elif nxt == '"':
                    mark_quoted()
                    self.i += 2
                    expands |= self._dquoted(add)
                else:
                    text, exp = self._dollar()
                    add(text)
                    expands |= exp
            elif c == "`":
                add(self._backticks())
                expands = True
            else:
                if c in "*?":
                    glob = True
                elif c in "[{":
                    open_at[c] = size
                elif c in "]}" and (start := open_at.get("[" if c == "]" else "{")) is not None:
                    # `[ -d x ]` and find's `{}` are plain words; `[ab]`, `{a,b}` expand.
                    inner = "".join(buf)[start + 1 :]
                    glob |= (c == "]" and bool(inner)) or "," in inner or ".." in inner
                add(c)
                self.i += 1
        return _Word(
            "".join(buf),
            expands=expands,
            glob=glob,
            quoted=quoted,
            literal_prefix=size if literal_prefix < 0 else literal_prefix,
        )

    def _dquoted(self, add: Callable[[str], None]) -> bool:
        """Read a double-quoted part (after the opening quote); True if it expands anything."""
        src = self.src
        expands = False
        while self.i < self.n:
            c = src[self.i]
            if c == '"':
                self.i += 1
                return expands
            if c == "\\" and self._peek(1) in ('"', "\\", "$", "`", "\n"):
                if self._peek(1) != "\n":
                    add(self._peek(1))
                self.i += 2
            elif c == "$":
                text, exp = self._dollar()
                add(text)
                expands |= exp
            elif c == "`":
                add(self._backticks())
                expands = True
            else:
                add(c)
                self.i += 1
        self.unsafe = True
        return expands

    def _dollar(self) -> tuple[str, bool]:
        """Read `$...` at the cursor: (text to keep, whether it expands)."""
        src = self.src
        nxt = self._peek(1)
        if nxt == "(":
            self.unsafe = True
            self.i += 2
            self.parse(until=")")
            return "$(...)", True
        if nxt == "{":
            end = src.find("}", self.i + 2)
            end = self.n - 1 if end < 0 else end
            inner = src[self.i : end + 1]
            if end == self.n - 1 and not inner.endswith("}"):
                self.unsafe = True
            if "$(" in inner or "`" in inner:
                self.unsafe = True
                self._nested(inner[2:-1])
            elif not _PLAIN_BRACE.fullmatch(inner):
                self.unsafe = True
            self.i = end + 1
            return inner, True
        if nxt == "[":  # `$[...]`: bash's old arithmetic, which may assign (`$[PATH=0]`)
            self.unsafe = True
        m = _PARAM.match(src, self.i + 1)
        if m is not None:
            self.i = m.end()
            return "$" + m.group(), True
        self.i += 1
        return "$", False

    def _backticks(self) -> str:
        self.unsafe = True
        src = self.src
        j = self.i + 1
        body: list[str] = []
        while j < self.n and src[j] != "`":
            if src[j] == "\\" and j + 1 < self.n:
                body.append(src[j + 1])
                j += 2
                continue
            body.append(src[j])
            j += 1
        if j >= self.n:
            self.unsafe = True
        self.i = min(j + 1, self.n)
        self._nested("".join(body))
        return "`...`"

    def _ansi_c(self) -> str:
        """Decode `$'...'` (the cursor is on `$`), so `$'\\x72m'` is seen as `rm`."""
        src = self.src
        j = self.i + 2
        out: list[str] = []
        while j < self.n and src[j] != "'":
            if src[j] == "\\" and j + 1 < self.n:
                m = _ANSI_ESCAPE.match(src, j)
                if m is None:
                    out.append(src[j + 1])
                    j += 2
                    continue
                out.append(_decode_escape(m.group()))
                j = m.end()
                continue
            out.append(src[j])
            j += 1
        if j >= self.n:
            self.unsafe = True
        self.i = min(j + 1, self.n)
        return "".join(out)


_SPECIAL = frozenset("\\'\"$`*?[]{}")
_PLAIN = re.compile(r"[^ \t\n;&|()<>\\'\"$`*?\[\]{}]+")
"""A run of characters that mean nothing special inside a word."""
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_PLAIN_BRACE = re.compile(
    r"\$\{#?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)"
    r"(?:(?::?[-+?]|##?|%%?|//?|\^\^?|,,?)[^\[\]$`]*)?\}"
)
"""`${...}` forms that only read one variable. Anything else may run code or change what later
commands do: `${x:=v}` assigns, `${a[i]}` and `${x:off}` evaluate arithmetic (whose array
subscripts run command substitutions), `${!x}` indirects, `${x@P}` expands a prompt."""
_ANSI_ESCAPE = re.compile(
    r"\\(?:x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|[abeEfnrtv\\'\"?])"
)
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


def _risky_expansion(text: str) -> bool:
    """True when `text` (an unquoted here-document body) holds a `$[...]` or a `${...}` that
    is not a plain read of one variable (see `_PLAIN_BRACE`)."""
    if "$[" in text:
        return True
    start = text.find("${")
    while start >= 0:
        end = text.find("}", start)
        if end < 0 or not _PLAIN_BRACE.fullmatch(text, start, end + 1):
            return True
        start = text.find("${", end)
    return False


def _decode_escape(esc: str) -> str:
    kind = esc[1]
    if kind in "xuU":
        return chr(min(int(esc[2:], 16), 0x10FFFF))
    if kind == "c":
        return chr(ord(esc[2]) & 0x1F)
    if kind.isdigit():
        return chr(int(esc[1:], 8))
    return _SIMPLE_ESCAPES[kind]


@functools.lru_cache(maxsize=512)
def analyze(command: str) -> _Analysis:
    """Parse `command` once (cached: several rules often look at the same command)."""
    parser = _Parser(command)
    parser.parse()
    return _Analysis(commands=tuple(parser.commands), safe_syntax=not parser.unsafe)


def split_command(command: str) -> list[list[str]] | None:
    """`toolnexus.approval.split_command`, documented there (that one loads this module late)."""
    analysis = analyze(command)
    if not analysis.safe_syntax:
        return None
    return [[w.text for w in c.words] for c in analysis.commands if c.words]


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


# --- known-safe commands --------------------------------------------------------------------

_Check = Callable[[list[str]], bool]


def _any_args(args: list[str]) -> bool:
    return True


def _flags_check(
    forbidden_long: Sequence[str] = (),
    forbidden_short: str = "",
    short_with_value: str = "",
    forbidden_words: Sequence[str] = (),
) -> _Check:
    """A checker refusing some options: long ones (also as `--opt=value`, and abbreviated:
    getopt_long and git take any unambiguous prefix, so `sort --o=FILE` is `--output`), short
    ones (also inside clusters such as `-iz`, up to the first option that takes a value), exact
    words."""

    def check(args: list[str]) -> bool:
        for arg in args:
            if arg == "--":
                return True
            if arg in forbidden_words:
                return False
            if arg.startswith("--"):
                if _abbreviates(arg, forbidden_long):
                    return False
            elif arg.startswith("-") and len(arg) > 1:
                for ch in arg[1:]:
                    if ch in forbidden_short:
                        return False
                    if ch in short_with_value:
                        break
        return True

    return check


def _abbreviates(arg: str, options: Sequence[str]) -> bool:
    """True when `arg` (`--name` or `--name=value`) names one of `options` or a prefix of one."""
    name = arg.split("=", 1)[0]
    return len(name) > 2 and any(option.startswith(name) for option in options)


def _positional_count(args: list[str], short_with_value: str) -> int:
    count = 0
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return count + len(args) - i - 1
        if arg.startswith("-") and len(arg) > 1:
            if len(arg) == 2 and arg[1] in short_with_value:
                i += 1
        else:
            count += 1
        i += 1
    return count


def _uniq(args: list[str]) -> bool:
    return _positional_count(args, "fsw") <= 1  # a second file name is written to


def _date(args: list[str]) -> bool:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            if _abbreviates(arg, ("--set",)):
                return False
        elif arg.startswith("-") and len(arg) > 1:
            for ch in arg[1:]:
                if ch == "s":
                    return False
                if ch in "dfr":
                    if ch == arg[-1]:
                        i += 1
                    break
        elif not arg.startswith("+"):
            return False  # `date MMDDhhmm` sets the clock
        i += 1
    return True


_SED_ADDR = r"(?:\d+|\$|/(?:[^/\\\n]|\\.)*/I?)"
_SED_SAFE = re.compile(rf"\s*(?:{_SED_ADDR}(?:\s*,\s*{_SED_ADDR})?)?\s*[pq=]\s*")


def _sed(args: list[str]) -> bool:
    """Only `sed -n` with print-only scripts (`sed -n 10,20p`): `w`, `e`, `-i` write or run."""
    quiet = False
    scripts: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--quiet", "--silent"):
            quiet = True
        elif arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
        elif arg == "--expression" and i + 1 < len(args):
            i += 1
            scripts.append(args[i])
        elif arg in ("--regexp-extended", "--posix", "--separate", "--unbuffered", "--null-data"):
            pass
        elif arg.startswith("-") and len(arg) > 1 and not arg.startswith("--"):
            for k, ch in enumerate(arg[1:], start=1):
                if ch == "n":
                    quiet = True
                elif ch == "e":
                    if k + 1 < len(arg):
                        scripts.append(arg[k + 1 :])
                    elif i + 1 < len(args):
                        i += 1
                        scripts.append(args[i])
                    break
                elif ch not in "Erzsu":
                    return False
        elif arg.startswith("-") and len(arg) > 1:
            return False
        else:
            positional.append(arg)
        i += 1
    if not scripts and positional:
        scripts.append(positional[0])
    if not quiet or not scripts:
        return False
    return all(
        _SED_SAFE.fullmatch(part) for s in scripts for part in re.split(r"[;\n]", s) if part.strip()
    )


_GIT_DIFF_OPTIONS = _flags_check(forbidden_long=("--output", "--ext-diff"))
_BRANCH_LISTING = frozenset(
    {
        "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "-l",
        "--show-current", "--no-color", "--color", "-i", "--ignore-case", "--no-abbrev",
        "--omit-empty", "--no-column", "--column",
    }
)  # fmt: skip
_BRANCH_WITH_VALUE = frozenset(
    {"--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"}
)


def _git_branch(args: list[str]) -> bool:
    """Listing only: a bare name would create a branch; -d/-D/-m/-c change them."""
    listing = False
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        if arg in ("--list", "-l"):
            listing = True
        elif name in _BRANCH_WITH_VALUE:
            if "=" not in arg:
                i += 1
        elif arg in _BRANCH_LISTING or arg.startswith(("--color=", "--column=", "--abbrev=")):
            pass
        elif arg.startswith("-") or not listing:
            return False
        i += 1
    return True


_GIT_SUBCOMMANDS: dict[str, _Check] = {
    "status": _any_args,
    "diff": _GIT_DIFF_OPTIONS,
    "log": _GIT_DIFF_OPTIONS,
    "show": _GIT_DIFF_OPTIONS,
    "branch": _git_branch,
    "rev-parse": _any_args,
    "ls-files": _any_args,
    "ls-tree": _any_args,
    "blame": _any_args,
    "describe": _any_args,
    "shortlog": _any_args,
    "merge-base": _any_args,
    "show-ref": _any_args,
    "for-each-ref": _any_args,
    "count-objects": _any_args,
    "grep": _flags_check(
        forbidden_long=("--open-files-in-pager", "--ext-grep"),
        forbidden_short="O",
        short_with_value="efABCm",
    ),
    "cat-file": _flags_check(forbidden_long=("--textconv", "--filters")),
    "remote": lambda args: all(a in ("-v", "--verbose") for a in args),
    "stash": lambda args: bool(args) and args[0] in ("list", "show") and _GIT_DIFF_OPTIONS(args),
}


def _git(args: list[str]) -> bool:
    """Read-only git sub-commands; `-c` and `--exec-path` (run arbitrary programs) refused."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-C":
            i += 2
            continue
        if arg in ("--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--bare"):
            i += 1
            continue
        if arg.startswith(("--git-dir=", "--work-tree=")):
            i += 1
            continue
        if arg.startswith("-"):
            return False
        check = _GIT_SUBCOMMANDS.get(arg)
        return check is not None and check(args[i + 1 :])
    return False


_PLAIN_SAFE = (
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo",
    "which", "type", "stat", "du", "df", "diff", "cmp", "cut", "tr", "nl", "tac", "rev", "seq",
    "paste", "fold", "expand", "unexpand", "column", "true", "false", "basename",
    "dirname", "realpath", "readlink", "expr", "numfmt", "printenv", "md5sum", "sha1sum",
    "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "od", "sleep", "cd",
    "whoami", "id", "uname", "groups", "nproc", "arch", "tty", "locale", "jq",
)  # fmt: skip
"""Commands that only read whatever their arguments."""


def _printf(args: list[str]) -> bool:
    """bash's `printf -v NAME` assigns NAME: PATH, or an array element whose subscript is
    evaluated as arithmetic and so runs any `$(...)` written in it."""
    return not (args and args[0].startswith("-v"))


def _test(args: list[str]) -> bool:
    """bash's `test -v NAME` / `-R NAME` evaluate an array subscript in NAME, as printf -v."""
    return not any(a in ("-v", "-R") for a in args)


_FIND_ACTIONS = (
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf",
)  # fmt: skip
"""find's actions that run programs, delete files or write files."""

_KNOWN_SAFE: dict[str, _Check] = {
    **dict.fromkeys(
        _PLAIN_SAFE,
        _any_args,
    ),
    "printf": _printf,
    "test": _test,
    "[": _test,
    "find": _flags_check(forbidden_words=_FIND_ACTIONS),
    "rg": _flags_check(
        forbidden_long=("--pre", "--pre-glob", "--hostname-bin", "--search-zip"),
        forbidden_short="z",
        short_with_value="ABCEMTdefgjmrt",
    ),
    "sort": _flags_check(
        forbidden_long=("--output", "--compress-program"),
        forbidden_short="o",
        short_with_value="kStT",
    ),
    "uniq": _uniq,
    "sed": _sed,
    "git": _git,
    "date": _date,
    "base64": _flags_check(forbidden_long=("--output",), forbidden_short="o"),
    "file": _flags_check(
        forbidden_long=("--compile",), forbidden_short="C", short_with_value="fmPe"
    ),
    "tree": _flags_check(
        forbidden_long=("--output",), forbidden_short="oR", short_with_value="LPIH"
    ),
    "env": lambda args: not args,
    "command": lambda args: bool(args) and args[0] in ("-v", "-V"),
}
"""Read-only commands, each with a check of its arguments (dangerous flags refused)."""


@functools.lru_cache(maxsize=512)
def is_known_safe_command(command: str) -> bool:
    """True when `command` only reads: every simple command is on the built-in read-only list
    (with its dangerous flags excluded, e.g. `find -exec`, `rg --pre`, `sort -o`, `git branch -D`)
    and nothing is redirected into a file other than /dev/null.

    The shell tool runs such commands without asking. Anything it cannot read statically
    (substitutions, subshells, unbalanced quotes) is not known-safe.
    """
    if len(command) > 10_000:
        return False
    analysis = analyze(command)
    if not analysis.safe_syntax or not analysis.commands:
        return False
    return all(_simple_is_safe(c) for c in analysis.commands)


def _simple_is_safe(command: _Simple) -> bool:
    for r in command.redirects:
        if r.writes or r.op == "<>":
            return False
    words: list[_Word] = list(command.words)
    via_xargs = False
    while (nxt := _strip_once(words, deny=False)) is not None:
        via_xargs |= words[0].text == "xargs"
        words = nxt
    if not words or words[0].expands or words[0].glob or words[0].assignment is not None:
        return False
    script = _inline_script(words)
    if script is not None and words[0].text != "eval":
        return not via_xargs and is_known_safe_command(script)
    check = _KNOWN_SAFE.get(words[0].text)
    if check is None:
        return False
    # When arguments decide safety they must be known now: `find . $X`, or an unquoted `*`
    # matching a file named `-delete`, could smuggle in a refused flag; and xargs appends
    # arguments nobody has seen yet.
    if check is not _any_args and (via_xargs or any(w.expands or w.glob for w in words[1:])):
        return False
    return check([w.text for w in words[1:]])
