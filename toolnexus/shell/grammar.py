"""The shell grammar: a static reading of POSIX/bash syntax into simple commands, never an
execution. It errs on the safe side: whatever it cannot analyse (command and process
substitution, subshells, unbalanced quotes, unterminated here-documents) makes the command
*unsafe*, which means no allow rule and no known-safe check will ever approve it, while deny and
ask rules still see every simple command found inside (a deny of `rm *` catches
`echo $(rm -rf /)`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["analyze", "split_command"]


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
    """The word after the operator (for `<<` and `<<-`, the delimiter)."""
    expands: bool = False
    """The target contains an expansion or glob: which file it names is known only at run time."""
    body: str | None = None
    """A here-document's body (continuation lines joined when its delimiter is unquoted), or a
    here-string's text: what a shell reading its standard input would run."""

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
        self.heredocs: list[tuple[_Redirect, bool]] = []
        """Here-documents whose bodies start at the next newline: (redirect, delimiter quoted)."""

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
        closers: list[str] = []  # the reserved words that must close the open `{`, `if`, `while`
        # Inside `$(...)` and `(...)` here-documents are read at the inner newlines; those of the
        # enclosing line wait for a newline of their own level (as bash's parser does).
        outer, self.heredocs = self.heredocs, []
        seen = False  # something since the last separator: `; ls`, `ls && ;` are syntax errors
        pending = False  # after `&&`, `||` or `|` a command must follow (newlines may come first)
        while True:
            while self.i < self.n and src[self.i] in " \t":
                self.i += 1
            if self.i >= self.n:
                if until is not None or self.heredocs or pending or closers:
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
                if self.i and src[self.i - 1] in "&|<>(":
                    # bash joins `&\<newline>&` into `&&`, `<\<newline><` into `<<`...
                    self.unsafe = True
                self.i += 2
                continue
            if c == "\n":
                flush()
                seen = False
                self.i += 1
                self._read_heredocs()
                continue
            if c in ";&|" and not (c == "&" and self._peek(1) == ">"):
                flush()
                double = self._peek(1) in ("&", "|") and c != ";"
                if not seen:
                    self.unsafe = True
                seen, pending = False, double or c == "|"
                self.i += 2 if double else 1
                continue
            seen, pending = True, False
            if c == "&":  # `&>file`
                self._redirect("", words, redirects)
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
                and (word.text.isdigit() or _FD_VARIABLE.fullmatch(word.text))
                and self._peek() in ("<", ">")
                and self._peek(1) != "("
            ):
                self._redirect(word.text, words, redirects)
                continue
            if not words and not word.quoted and not word.expands:
                if word.text == "time":
                    # bash's `time [-p] [--]` times the pipeline that follows
                    while self._skip_blanks() and self._peek() == "-":
                        option = _PLAIN.match(src, self.i)
                        if option is None or option.group() not in ("-p", "--"):
                            break
                        self.i = option.end()
                    continue
                if word.text in _LIST_WORDS:
                    # `{ a; }`, `if a; then b; fi`, `! a`: the simple commands are a and b
                    flush()
                    self._balance(word.text, closers)
                    continue
                if word.text in _COMPOUND_WORDS:
                    self.unsafe = True
                elif word.text == "alias":
                    self.unsafe = True  # a later line may use the alias as a command name
            words.append(word)
        flush()
        self.heredocs = outer + self.heredocs

    def _balance(self, reserved: str, closers: list[str]) -> None:
        """Track `{ }`, `if ... then ... fi`, `while/until ... do ... done`: bash runs nothing
        of a line whose groups do not close (`{ ls #; }`), so such a line is not safe syntax.
        `closers` holds, for each open group, the reserved word it expects next."""
        opener = _OPENERS.get(reserved)
        if opener is not None:
            closers.append(opener)
            return
        if reserved not in _NEXT:
            return  # `!`
        expected, after = _NEXT[reserved]
        if not closers or closers[-1] != expected:
            self.unsafe = True
        elif after is None:
            closers.pop()
        else:
            closers[-1] = after

    def _skip_blanks(self) -> bool:
        """Skip spaces and tabs; True when something follows."""
        while self.i < self.n and self.src[self.i] in " \t":
            self.i += 1
        return self.i < self.n

    def _redirect(self, fd: str, words: list[_Word], redirects: list[_Redirect]) -> None:
        src = self.src
        for op in ("&>>", "&>", "<<<", "<<-", "<<", "<&", "<>", "<", ">>", ">|", ">&", ">"):
            if src.startswith(op, self.i):
                break
        self.i += len(op)
        if src.startswith("\\\n", self.i):
            self.unsafe = True  # the operator may go on past the line continuation
        while self.i < self.n and src[self.i] in " \t":
            self.i += 1
        if self.i >= self.n or (
            src[self.i] in "\n;&|()<>" and not src.startswith(("<(", ">("), self.i)
        ):
            self.unsafe = True
            return
        target = self._word()
        redirect = _Redirect(
            fd,
            op,
            target.text,
            expands=target.expands or target.glob,
            body=target.text if op == "<<<" else None,
        )
        if op in ("<<", "<<-"):
            self.heredocs.append((redirect, target.quoted))
        redirects.append(redirect)

    def _read_heredocs(self) -> None:
        pending, self.heredocs = self.heredocs, []
        for redirect, quoted in pending:
            strip_tabs = redirect.op == "<<-"
            body: list[str] = []
            while True:
                if self.i >= self.n:
                    self.unsafe = True
                    break
                line = self._heredoc_line(joined=not quoted)
                if (line.lstrip("\t") if strip_tabs else line) == redirect.target:
                    break
                body.append(line.lstrip("\t") if strip_tabs else line)
            text = "\n".join(body)
            self._set_body(redirect, text)
            if not quoted and ("$(" in text or "`" in text):
                # An unquoted delimiter lets the body run substitutions.
                self.unsafe = True
                self._nested(text)
            elif not quoted and _risky_expansion(text):
                self.unsafe = True

    def _heredoc_line(self, joined: bool) -> str:
        """The next line of a here-document body. Under an unquoted delimiter bash joins a line
        ending in an unescaped backslash with the next one *before* comparing it with the
        delimiter: `EO\\` then `F` ends a body delimited by `EOF`."""
        parts: list[str] = []
        while True:
            end = self.src.find("\n", self.i)
            line = self.src[self.i : self.n if end < 0 else end]
            self.i = self.n if end < 0 else end + 1
            trailing = len(line) - len(line.rstrip("\\"))
            if joined and trailing % 2 == 1 and end >= 0:
                parts.append(line[:-1])
                continue
            parts.append(line)
            return "".join(parts)

    def _set_body(self, redirect: _Redirect, body: str) -> None:
        """Record a here-document's body on its redirection, already part of a command."""
        for k in range(len(self.commands) - 1, -1, -1):
            simple = self.commands[k]
            for j, r in enumerate(simple.redirects):
                if r is redirect:
                    redirects = (
                        *simple.redirects[:j],
                        replace(r, body=body),
                        *simple.redirects[j + 1 :],
                    )
                    self.commands[k] = replace(simple, redirects=redirects)
                    return

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
        if src.startswith("\\\n", self.i + 1):
            self.unsafe = True  # `$\<newline>(...)` is a substitution
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
                if m is None:  # bash keeps the backslash of an escape it does not know
                    out.append(src[j : j + 2])
                    j += 2
                    continue
                text = _decode_escape(m.group())
                if m.group()[1] in "uU" and ord(text) >= 0x80:
                    self.unsafe = True  # bash spells it by the locale: `é`, or `\u00E9` in C
                out.append(text)
                j = m.end()
                continue
            out.append(src[j])
            j += 1
        if j >= self.n:
            self.unsafe = True
        self.i = min(j + 1, self.n)
        # A NUL (`\0`, `\x00`, `\c@`) ends the string: `$'git\0x'` is `git`.
        return "".join(out).split("\0", 1)[0]


_LIST_WORDS = frozenset(
    {"{", "}", "!", "if", "then", "else", "elif", "fi", "while", "until", "do", "done"}
)
"""Reserved words that only join simple commands into lists: dropped, the commands stay."""
_OPENERS = {"{": "}", "if": "then", "while": "do", "until": "do"}
_NEXT: dict[str, tuple[str, str | None]] = {
    "then": ("then", "fi"), "elif": ("fi", "then"), "else": ("fi", "fi"), "fi": ("fi", None),
    "do": ("do", "done"), "done": ("done", None), "}": ("}", None),
}  # fmt: skip
"""For each reserved word inside a group: the word the group must expect, and what it expects
after it (None: the group is closed)."""
_COMPOUND_WORDS = frozenset({"case", "esac", "for", "select", "function", "coproc", "[["})
"""Reserved words whose grammar this reader does not model (patterns, loop variables, function
definitions that may shadow any program, `[[`'s own operators): not safe syntax."""
_FD_VARIABLE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
"""`{fd}>file` opens a file into a new descriptor named by a variable: a redirection."""
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
    """One escape of `$'...'`. `\\x` and octal escapes make bytes: one past ASCII is spelt as
    Python's `surrogateescape` spells an undecodable byte of an argv."""
    kind = esc[1]
    if kind in "uU":
        return chr(min(int(esc[2:], 16), 0x10FFFF))
    if kind == "c":
        return chr(ord(esc[2]) & 0x1F)
    if kind == "x" or kind.isdigit():
        byte = int(esc[2:], 16) if kind == "x" else int(esc[1:], 8) & 0xFF
        return chr(byte) if byte < 0x80 else chr(0xDC00 + byte)
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
