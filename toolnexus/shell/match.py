"""Command patterns (`git status *`) matched against what a command can run.

Two readings, for the two kinds of rule:

- **Allow** (strict): every simple command must match, looking only past wrappers whose whole
  option grammar is modelled and that do not change what the command does (`timeout 5 ls`,
  `env LANG=C ls`, `bash -lc 'ls'`); an option not understood means no match.
- **Deny and ask** (any reading): a simple command matches when the pattern matches the words
  starting at *any* position where its program appears (`foo git push`, `sudo -u x git push`,
  `/usr/bin/git push`), with git's global options skipped for git patterns (`git -C . push`);
  scripts of `sh -c`, `eval`, `env -S`, `watch`, aliases and here-documents fed to a shell are
  read as commands of their own. Doubt counts as a match: a program known only at run time
  (`$X`, a glob, a shell reading a pipe) matches every deny and ask pattern, and a word known
  only at run time matches any part of a pattern.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import readings
from .evaluators import is_shell, may_be_shell
from .grammar import _Redirect, _Simple, _Word, analyze

# --- option grammars of wrappers ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Options:
    """A program's option grammar as getopt_long reads it, stopping at the first operand."""

    flags: str = ""
    """Short options without a value."""
    values: str = ""
    """Short options that take a value: the rest of the cluster, or else the next word."""
    attached: str = ""
    """Short options whose value is optional and can only be attached (`xargs -i{}`)."""
    long_flags: tuple[str, ...] = ()
    long_values: tuple[str, ...] = ()
    """Long options whose value is `--name=value` or the next word."""
    long_optional: tuple[str, ...] = ()
    """Long options whose value can only be given as `--name=value`."""

    def resolve(self, name: str) -> str | None:
        """The long option `name` stands for (getopt_long takes any unambiguous prefix)."""
        names = (*self.long_flags, *self.long_values, *self.long_optional)
        if name in names:
            return name
        found = {n for n in names if n.startswith(name)} if name else set()
        return found.pop() if len(found) == 1 else None


def _skip_options(
    words: Sequence[_Word], start: int, grammar: _Options, strict: bool
) -> int | None:
    """Index of the first operand after the options from `start`.

    `strict`: None when an option is unknown, ambiguous or known only at run time, since then
    which word is the command cannot be told. Otherwise an unknown option counts as a flag.
    """
    i = start
    while i < len(words):
        word = words[i]
        text = word.text
        if word.expands or word.glob:
            return None if strict else i
        if text == "--":
            return i + 1
        if text == "-" or not text.startswith("-"):
            return i
        if text.startswith("--"):
            name, eq, _ = text[2:].partition("=")
            full = grammar.resolve(name)
            if full is None:
                if strict:
                    return None
                # an unknown or ambiguous long option: it takes a value when any candidate does
                if not eq and any(n.startswith(name) for n in grammar.long_values):
                    i += 1
            elif full in grammar.long_values and not eq:
                i += 1
            elif full in grammar.long_flags and eq and strict:
                return None
            i += 1
            continue
        for j, ch in enumerate(text[1:], start=1):
            if ch in grammar.values:
                if j == len(text) - 1:
                    i += 1  # the value is the next word
                break
            if ch in grammar.attached:
                break
            if ch not in grammar.flags and strict:
                return None
        i += 1
    return i


_TIMEOUT = _Options(
    flags="fpv",
    values="ks",
    long_flags=("foreground", "preserve-status", "verbose"),
    long_values=("kill-after", "signal"),
)
_NICE = _Options(flags="0123456789", values="n", long_values=("adjustment",))
_STDBUF = _Options(values="ioe", long_values=("input", "output", "error"))
_ENV = _Options(
    flags="i0v",
    values="uCS",
    long_flags=("ignore-environment", "null", "debug", "list-signal-handling"),
    long_values=("unset", "chdir", "split-string"),
    long_optional=("block-signal", "default-signal", "ignore-signal"),
)
_ENV_STRICT = _Options(
    flags="i0", values="u", long_flags=("ignore-environment", "null"), long_values=("unset",)
)
"""What an allow rule looks past in `env`: `-C` changes the folder, `-S` splits a script,
`-v` and the signal options are not worth modelling."""
_TIME = _Options(flags="p")
_TIME_ANY = _Options(flags="pqvV", values="fo", long_values=("format", "output"))
_EXEC = _Options(flags="cl", values="a")
_COMMAND = _Options(flags="p")
_COMMAND_ANY = _Options(flags="pvV")
_XARGS = _Options(
    flags="0prtx",
    values="aEIdLnPs",
    attached="eil",
    long_flags=(
        "null", "no-run-if-empty", "interactive", "verbose", "exit", "open-tty", "show-limits",
    ),
    long_values=(
        "arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var",
    ),
    long_optional=("eof", "replace", "max-lines"),
)  # fmt: skip
_SUDO = _Options(
    flags="AbEeHiKklnPSsVv",
    values="CDghpRrTtUu",
    long_values=(
        "chdir", "chroot", "close-from", "group", "host", "other-user", "prompt", "role",
        "type", "command-timeout", "user",
    ),
)  # fmt: skip
_WATCH = _Options(
    flags="bceprtx",
    values="nq",
    long_values=("interval", "equexit"),
    long_optional=("differences",),
)
_GENERIC = _Options()
"""For a program we know nothing of: every option a flag (deny readings only)."""

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

_FIND_RUNNERS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash"})
_DENY_WRAPPERS: dict[str, _Options] = {
    "sudo": _SUDO, "doas": _Options(flags="ns", values="uC"), "watch": _WATCH,
    "ionice": _Options(flags="tV", values="cnp"),
    "chrt": _Options(flags="abdefiomrpRv", values="DPT"),
    "taskset": _Options(flags="acp"), "setsid": _Options(flags="cfw"),
    "unbuffer": _Options(flags="p"), "busybox": _GENERIC, "coproc": _GENERIC,
    "stdbuf": _STDBUF, "nice": _NICE,
}  # fmt: skip
"""Programs that run the command after their options, looked past by deny readings only."""
_SCRIPT_RUNNERS = frozenset({"watch", "ssh", "su", "runuser", "flock", "script"})
"""Programs that hand some of their words to a shell (`watch 'git push'`, `su -c 'cmd'`):
deny readings read every later word as a script too."""


def _name(word: _Word) -> str:
    return word.text.rsplit("/", 1)[-1]


def _wrapper_end(words: Sequence[_Word], deny: bool) -> int | None:
    """Where the command wrapped by `words[0]` starts, or None when `words` do not start with
    a wrapper an allow (`deny=False`) or deny reading looks past.

    Allow readings only look past wrappers that do not change what the command does, and only
    when each of their options is understood; deny readings look past everything that could
    hide a command (any assignment, `sudo`, `xargs`, `find -exec`...).
    """
    if not words:
        return None
    strict = not deny
    if words[0].assignment is not None:
        i = 0
        while i < len(words) and (var := words[i].assignment) is not None:
            if strict and var not in _SAFE_VARS:
                return None
            i += 1
        return i
    first = words[0]
    if first.expands or first.glob:
        return None
    name = _name(first) if deny else first.text
    rest: int | None = None
    if name in ("nohup", "builtin", "noglob"):
        rest = 1
    elif name == "command":
        if len(words) > 1 and words[1].text in ("-v", "-V") and strict:
            return None
        rest = _skip_options(words, 1, _COMMAND_ANY if deny else _COMMAND, strict)
    elif name == "exec":
        rest = _skip_options(words, 1, _EXEC, strict)
    elif name == "timeout":
        end = _skip_options(words, 1, _TIMEOUT, strict)
        rest = None if end is None else end + 1  # the duration
    elif name == "time":
        rest = _skip_options(words, 1, _TIME_ANY if deny else _TIME, strict)
    elif name == "nice":
        rest = _skip_options(words, 1, _NICE, strict)
    elif name == "stdbuf":
        rest = _skip_options(words, 1, _STDBUF, strict)
    elif name == "xargs":
        rest = _skip_options(words, 1, _XARGS, strict)
    elif name == "env":
        i = _skip_options(words, 1, _ENV if deny else _ENV_STRICT, strict)
        if i is None:
            return None
        while i < len(words) and (var := words[i].assignment) is not None:
            if strict and var not in _SAFE_VARS:
                return None
            i += 1
        rest = i
    elif deny and name in _DENY_WRAPPERS:
        rest = _skip_options(words, 1, _DENY_WRAPPERS[name], strict)
    if rest is None or rest >= len(words):
        return None
    return rest


def _split_string(words: Sequence[_Word], end: int) -> list[str]:
    """The scripts of `env -S SCRIPT` / `--split-string=SCRIPT` among `env`'s options."""
    scripts: list[str] = []
    for j in range(1, end):
        text = words[j].text
        if text.startswith("--"):
            name, eq, value = text[2:].partition("=")
            if name and "split-string".startswith(name) and len(name) >= 2:
                scripts.append(value if eq else (words[j + 1].text if j + 1 < len(words) else ""))
        elif text.startswith("-") and not text.startswith("--"):
            k = text.find("S")
            if k > 0 and not any(ch in "uC" for ch in text[1:k]):
                value = text[k + 1 :]
                scripts.append(value or (words[j + 1].text if j + 1 < len(words) else ""))
    return scripts


def _strip_once(words: Sequence[_Word], deny: bool) -> list[_Word] | None:
    """`words` without their outermost wrapper, or None when they do not start with one (see
    `_wrapper_end`)."""
    end = _wrapper_end(words, deny)
    return None if end is None else list(words[end:])


_SHELL_STRICT = _Options(flags="celuvxf", values="o", long_flags=("noprofile", "norc", "posix"))
"""Shell options an allow reading looks past: `-i` and `--rcfile` would run startup files."""
_SHELL_ANY = _Options(
    flags="abcefhiklmnprstuvxBCEHPT", values="oO", long_values=("rcfile", "init-file")
)


def _inline_script(words: Sequence[_Word]) -> str | None:
    """The script of `bash -c SCRIPT` / `sh -lc SCRIPT` / `eval ARGS...`, if that is what runs
    (as an allow rule reads it: every option before the script understood)."""
    if not words:
        return None
    name = words[0].text.rsplit("/", 1)[-1]
    if name == "eval":
        return " ".join(w.text for w in words[1:])
    if name not in _SHELLS:
        return None
    end = _skip_options(words, 1, _SHELL_STRICT, strict=True)
    if end is None or end >= len(words):
        return None
    options = [w.text for w in words[1:end] if w.text.startswith("-") and w.text != "--"]
    if not any("c" in o[1:] for o in options if not o.startswith("--")):
        return None
    return words[end].text


# --- allow readings -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _View:
    text: str
    """The words joined by single spaces."""
    full: str
    """`text` followed by the redirections, for patterns that mention `>` or `<`."""
    writes: bool
    unknown: bool = False
    """The command name is only known at run time (`$CMD`, `{rm,x}`, `r?`)."""


def _views(command: _Simple) -> list[_View]:
    """The simple command as allow rules see it: as written, and past each harmless wrapper."""
    full_suffix = " ".join(r.render() for r in command.redirects)
    writes = any(r.writes for r in command.redirects)
    views: list[_View] = []
    words: list[_Word] | None = list(command.words)
    while words is not None:
        unknown = bool(words) and (words[0].expands or words[0].glob)
        text = " ".join(w.text for w in words)
        full = f"{text} {full_suffix}" if full_suffix else text
        views.append(_View(text, full, writes, unknown))
        words = _strip_once(words, deny=False)
    return views


@dataclass(frozen=True, slots=True)
class _Reading:
    """How an allow rule reads one simple command."""

    views: tuple[_View, ...]
    scripts: tuple[str, ...]
    """Scripts of `bash -c SCRIPT` / `eval` judged as commands of their own."""


@functools.lru_cache(maxsize=512)
def _allow_readings(command: str) -> tuple[_Reading, ...] | None:
    """Every simple command of `command` as allow rules read it; None when the command cannot
    be read statically. Cached: the same line meets several rules, often on the same call."""
    analysis = analyze(command)
    if not analysis.safe_syntax:
        return None
    readings = []
    for simple in analysis.commands:
        scripts: set[str] = set()
        if not any(r.writes for r in simple.redirects):
            words = list(simple.words)
            while (nxt := _strip_once(words, deny=False)) is not None:
                words = nxt
            if (script := _inline_script(words)) is not None:
                scripts.add(script)
        readings.append(_Reading(tuple(_views(simple)), tuple(sorted(scripts))))
    return tuple(readings)


# --- deny and ask readings ------------------------------------------------------------------

_STAR = None
"""A token that stands for any text: a `*` of a pattern, or a word known only at run time."""
_Token = str | None

_INERT = frozenset(
    {
        "echo", "printf", "cd", "pushd", "popd", "pwd", "ls", "cat", "head", "tail", "wc",
        "grep", "egrep", "fgrep", "mkdir", "rmdir", "touch", "rm", "cp", "mv", "ln",
        "chmod", "chown", "stat", "file", "basename", "dirname", "realpath", "readlink",
        "test", "[", "true", "false", ":", "export", "unset", "local", "readonly", "shift",
        "exit", "return", "uniq", "cut", "tr", "diff", "du", "df", "date", "sleep", "wait",
        "tee", "which", "type",
    }
)  # fmt: skip
"""Programs that never run their operands: a word known only at run time among their operands
(`echo $HOME`) is data, not a program that may match a deny rule. (`sort`, `rg`, `less` are
not here: `--compress-program`, `--pre` and `LESSOPEN` run programs.)"""

_GIT_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--attr-source",
     "--super-prefix"}
)  # fmt: skip
"""git's global options (`git help git`) that take the next word as their value."""

_DP_BUDGET = 2_000_000
"""Steps of wildcard matching spent on one simple command and pattern before doubt decides."""
_MAX_DEPTH = 16
"""Scripts inside scripts deeper than this are not read: they match every deny and ask rule
and no allow rule (doubt)."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A way to read part of a simple command as a command: `words[start]` as the program,
    followed by `words[rest:]` (or by anything at all when `rest` is None)."""

    start: int
    rest: int | None
    head: bool
    """`words[start]` is where the shell or a known wrapper runs a program."""
    more: bool = False
    """Words nobody has seen yet follow (`xargs` appends the words it reads)."""


@dataclass(frozen=True, slots=True)
class _DenyReading:
    """How deny and ask rules read one simple command."""

    words: tuple[_Word, ...]
    redirects: tuple[_Redirect, ...]
    candidates: tuple[_Candidate, ...]
    scripts: tuple[str, ...]
    """Scripts this command may run (`sh -c`, `eval`, here-documents fed to a shell...)."""
    unknown: bool
    """Something runs that cannot be seen (a program known only at run time, a shell reading a
    pipe): every deny and ask pattern matches."""
    resolved: bool = False
    """Which file a program name runs was changed on this line (`PATH=`, `hash -p`): every
    program may be a shell."""


def _heads(words: Sequence[_Word]) -> list[int]:
    """Positions where a program runs: the first word after assignments and each wrapper."""
    heads: list[int] = []
    base = 0
    while base < len(words):
        heads.append(base)
        end = _wrapper_end(words[base:], deny=True)
        name = _name(words[base])
        if name == "find":
            for k in range(base + 1, len(words)):
                if words[k].text in _FIND_RUNNERS and k + 1 < len(words):
                    heads.append(k + 1)
        if end is None:
            break
        base += end
    return sorted(set(heads))


def _git_rest(words: Sequence[_Word], start: int, found: readings.Evaluated) -> int | None:
    """Where git's subcommand is, past its global options; None when it cannot be told (an
    alias defined on the command line, `-c alias.x=...`). Records in `found` what the
    configuration given on the command line runs (`-c core.pager=CMD`, `-c alias.x='!CMD'`,
    `--config-env=core.pager=VAR`: a value known only at run time) and what the sub-command
    runs (`rebase --exec CMD`, `config alias.x '!CMD'`, `ext::CMD` URLs)."""
    i = start + 1
    alias = False
    while i < len(words):
        word = words[i]
        text = word.text
        if text == "--" or not text.startswith("-") or word.expands:
            break
        value = None
        if text in _GIT_VALUE:
            word = words[i + 1] if i + 1 < len(words) else word
            value = words[i + 1].text if i + 1 < len(words) else ""
            i += 1
        elif "=" in text and text.startswith("--"):
            value = text.split("=", 1)[1]
        if value is not None and text.startswith(("-c", "--config-env")):
            key, _, setting = value.partition("=")
            if key.lower().startswith("alias."):
                alias = True
            from_env = text.startswith("--config-env")
            readings.git_config(key, setting, word.expands or from_env, found)
        i += 1
    readings.git_operands(words, i, found)
    if alias:
        return None
    return i if i < len(words) else len(words)


def _shell_scripts(
    words: Sequence[_Word], start: int, redirects: Sequence[_Redirect]
) -> tuple[list[str], bool]:
    """The scripts a shell at `words[start]` may run, and whether it reads one we cannot see
    (standard input from a pipe or a file)."""
    end = _skip_options(words, start + 1, _SHELL_ANY, strict=False)
    end = len(words) if end is None else end
    options = [w.text for w in words[start + 1 : end] if w.text.startswith("-")]
    command = any("c" in o[1:] for o in options if not o.startswith("--"))
    if command:
        return ([words[end].text] if end < len(words) else []), False
    stdin = end >= len(words) or any("s" in o[1:] for o in options if not o.startswith("--"))
    if not stdin and words[end].text not in _STDIN:
        return [], False  # a script file: what it holds is not on the command line
    return _stdin_scripts(redirects)


def _stdin_scripts(redirects: Sequence[_Redirect]) -> tuple[list[str], bool]:
    """The here-documents and here-strings a command reads as its script, and whether it
    reads one we cannot see instead (a pipe, a file)."""
    bodies = [r.body for r in redirects if r.body is not None]
    return bodies, not bodies


_STDIN = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


def _deny_reading(simple: _Simple, resolve: bool = False) -> _DenyReading:
    """`resolve`: an earlier command of the line changed which file a program name runs
    (`PATH=...`, `hash -p`), so every program may be a shell."""
    words = simple.words
    heads = _heads(words)
    program = words[heads[-1]] if heads else None
    inert = program is not None and not program.expands and _name(program) in _INERT
    feeders = [h for h in heads if _name(words[h]) == "xargs"]
    fed = feeders[0] if feeders else len(words)
    candidates: list[_Candidate] = []
    runs = readings.evaluated(words, heads)
    scripts = runs.scripts
    unknown = runs.doubt
    resolve |= readings.resolves(words)
    for start, word in enumerate(words):
        head = start in heads
        more = start > fed
        if word.quoted and ("$(" in word.text or "`" in word.text):
            # a quoted substitution may be evaluated later: `x='$(cmd)'; echo ${x@P}`
            scripts.append(word.text)
        if _runtime(word):
            if head:
                unknown = True  # the program is known only at run time
            elif not inert:
                candidates.append(_Candidate(start, start + 1, head, more))
            continue
        candidates.append(_Candidate(start, start + 1, head, more))
        name = _name(word)
        shell = is_shell(word.text)
        if (shell or may_be_shell(word.text) or (resolve and head)) and (
            head or any("c" in w.text for w in words[start + 1 :])
        ):
            # a shell by name or by a path that may resolve to one (`/proc/self/exe`, `./x`
            # linked to bash): its `-c` script and here-documents are read; a pipe it reads
            # only counts as unseen when the word surely is a shell
            inner, blind = _shell_scripts(words, start, simple.redirects if head else ())
            scripts.extend(inner)
            unknown |= blind and head and shell
        if name == "git":
            rest = _git_rest(words, start, runs)
            if rest != start + 1:
                candidates.append(_Candidate(start, rest, head, more))
        elif name == "eval" and head:
            scripts.append(" ".join(w.text for w in words[start + 1 :]))
        elif name == "env":
            scripts.extend(_split_string(words[start:], len(words) - start))
        elif name in ("source", ".") and head:
            if start + 1 < len(words) and words[start + 1].text in _STDIN:
                found, blind = _stdin_scripts(simple.redirects)
                scripts.extend(found)
                unknown |= blind
        elif name == "trap" and head:
            scripts.extend(w.text for w in words[start + 1 :])
        elif name == "alias" and head:
            scripts.extend(w.text.split("=", 1)[1] for w in words[start + 1 :] if "=" in w.text)
        elif name in _SCRIPT_RUNNERS and head:
            scripts.extend(w.text for w in words[start + 1 :])
    return _DenyReading(
        words=words,
        redirects=simple.redirects,
        candidates=tuple(candidates),
        scripts=tuple(dict.fromkeys(scripts)),
        unknown=unknown or runs.doubt,
        resolved=resolve,
    )


@functools.lru_cache(maxsize=512)
def _deny_readings(command: str) -> tuple[_DenyReading, ...]:
    """Every simple command of `command`, including those inside substitutions of a command
    that cannot be read statically, as deny and ask rules read them. Cached like allows'."""
    simples = analyze(command).commands
    resolve = any(readings.resolves(s.words) for s in simples)
    return tuple(_deny_reading(simple, resolve) for simple in simples)


# --- command patterns -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """A compiled command pattern such as `git status *` or `npm run test:*`."""

    source: str
    regex: re.Pattern[str]
    redirects: bool
    """The pattern mentions `>` or `<`, so it is matched against the redirections too."""
    tokens: tuple[_Token, ...] = ()
    """The pattern as characters and `_STAR`s, for matching words known only at run time."""
    tail: bool = False
    """The pattern ends in ` *`: it also matches nothing more, at a word boundary."""
    program: str | None = None
    """The name of the program the pattern starts with (without a folder), if written out."""
    prefix: str = ""
    """What the pattern's first word starts with before its first `*` (when `program` is
    None). A pattern starting with `*` matches a command whenever it matches a part of it, so
    only the whole command needs trying."""

    def matches(self, view: _View, strict: bool) -> bool:
        """Whether an allow reading's view matches (`strict`), or a deny reading's."""
        if view.unknown:
            return not strict
        if self.redirects:
            return self.regex.fullmatch(view.full) is not None
        if strict and view.writes:
            return False
        return self.regex.fullmatch(view.text) is not None

    def matches_tokens(self, tokens: Sequence[_Token]) -> bool:
        """Whether some values of the `_STAR`s in `tokens` make them match this pattern."""
        return _intersects(self.tokens, self.tail, tokens)


def compile_command_pattern(pattern: str) -> CommandPattern:
    """Compile a command pattern: `*` spans anything; a trailing ` *` (or legacy `:*`) also
    matches nothing, at a word boundary, so `ls *` matches `ls` and `ls -la` but not `lsof`."""
    text = " ".join(pattern.split())
    if text.endswith(":*"):
        text = text[:-2].rstrip() + " *"
    tail = text.endswith(" *")
    if tail:
        text = text[:-2]
    body = ".*".join(re.escape(part) for part in text.split("*"))
    regex = re.compile(body + ("(?: .*)?" if tail else ""), re.DOTALL)
    first = text.split(" ", 1)[0]
    tokens = tuple(_STAR if ch == "*" else ch for ch in text)
    return CommandPattern(
        source=pattern,
        regex=regex,
        redirects=bool(set(text) & {">", "<"}),
        tokens=tokens,
        tail=tail,
        program=None if "*" in first else first.rsplit("/", 1)[-1],
        prefix=first.split("*", 1)[0],
    )


def _intersects(pattern: Sequence[_Token], tail: bool, subject: Sequence[_Token]) -> bool:
    """Do two texts with wildcards (`_STAR`: any string) have a common value? `tail`: the
    pattern may also be followed by a space and anything."""
    n, m = len(pattern), len(subject)
    reach = [[False] * (m + 1) for _ in range(n + 1)]
    reach[0][0] = True
    for i in range(n + 1):
        row = reach[i]
        for j in range(m + 1):
            if not row[j]:
                continue
            p = pattern[i] if i < n else ""
            s = subject[j] if j < m else ""
            if p is _STAR:
                reach[i + 1][j] = True
                if j < m:
                    row[j + 1] = True
            if s is _STAR:
                row[j + 1] = True
                if i < n:
                    reach[i + 1][j] = True
            if i < n and j < m and p is not _STAR and s is not _STAR and p == s:
                reach[i + 1][j + 1] = True
    if reach[n][m]:
        return True
    if tail:
        return any(reach[n][j] and subject[j] in (" ", _STAR) for j in range(m))
    return False


def _runtime(word: _Word) -> bool:
    """Whether `word`'s value is decided at run time: an expansion, a glob, or the `{}` that
    `find -exec` and `xargs -I{}` replace with names they find."""
    return word.expands or word.glob or "{}" in word.text


def _word_tokens(word: _Word, text: str | None = None) -> list[_Token]:
    """`word` (or `text`, a spelling of it) as tokens: a word known only at run time is any
    text; a glob keeps its literal characters (a brace expansion is any text)."""
    text = word.text if text is None else text
    if word.expands or (word.glob and "{" in text) or "{}" in text:
        return [_STAR]
    if word.glob:
        return [_STAR if ch in "*?[]" else ch for ch in text]
    return list(text)


def _deny_hits(reading: _DenyReading, pattern: CommandPattern) -> bool:
    words = reading.words
    suffix: list[_Token] = []
    if pattern.redirects:
        for r in reading.redirects:
            suffix += [" ", *r.render().removesuffix(r.target)]
            suffix += [_STAR] if r.expands else list(r.target)
    budget = _DP_BUDGET
    for candidate in reading.candidates:
        first = words[candidate.start]
        names = [first.text]
        name = _name(first)
        if not first.expands:
            if (
                pattern.program is not None
                and name != pattern.program
                and (
                    is_shell(pattern.program)
                    and (
                        is_shell(first.text)
                        or (candidate.head and (reading.resolved or may_be_shell(first.text)))
                    )
                )
            ):
                # `/proc/self/exe -c CMD`, `./x -c CMD` may be `bash -c CMD`
                names.append(pattern.program)
            elif not candidate.head and not first.glob:
                if pattern.program is not None and name != pattern.program:
                    continue
                if pattern.program is None and not (
                    pattern.prefix
                    and (first.text.startswith(pattern.prefix) or name.startswith(pattern.prefix))
                ):
                    continue
            if name != first.text:
                names.append(name)
        rest = words[candidate.rest :] if candidate.rest is not None else ()
        literal = candidate.rest is not None and not candidate.more
        if literal and not any(_runtime(w) for w in (first, *rest)):
            for spelling in names:
                text = " ".join((spelling, *(w.text for w in rest)))
                if pattern.redirects:
                    text = " ".join((text, *(r.render() for r in reading.redirects)))
                if pattern.regex.fullmatch(text) is not None:
                    return True
            continue
        for spelling in names:
            tokens = _word_tokens(first, spelling)
            if candidate.rest is None:
                tokens += [" ", _STAR]
            for w in rest:
                tokens += [" ", *_word_tokens(w)]
            if candidate.more:
                tokens += [" ", _STAR]
            tokens += suffix
            budget -= len(tokens) * (len(pattern.tokens) + 1)
            if budget < 0 or pattern.matches_tokens(tokens):
                return True  # past the budget, doubt: a match
    return False


def command_matches(command: str, patterns: Sequence[CommandPattern], *, strict: bool) -> bool:
    """Do `patterns` cover `command`?

    `strict` (allow rules): the command must parse safely and *every* simple command must match
    some pattern, looking only past harmless wrappers whose options are all understood; a
    simple command that writes a file through a redirection only matches a pattern that
    mentions the redirection.
    Not strict (deny and ask rules): *any* reading of any simple command matching is enough
    (see the module's docstring), including those found inside substitutions of an unparseable
    command.
    """
    if strict:
        return _allowed(command, patterns, 0)
    return _denied(command, patterns, 0)


def _allowed(command: str, patterns: Sequence[CommandPattern], depth: int) -> bool:
    readings = _allow_readings(command) if depth <= _MAX_DEPTH else None
    return bool(readings) and all(_covered(r, patterns, depth) for r in readings or ())


def _covered(reading: _Reading, patterns: Sequence[CommandPattern], depth: int) -> bool:
    if any(p.matches(v, True) for v in reading.views for p in patterns):
        return True
    return any(_allowed(s, patterns, depth + 1) for s in reading.scripts)


def _denied(command: str, patterns: Sequence[CommandPattern], depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return True
    for reading in _deny_readings(command):
        if reading.unknown:
            return True
        if any(_deny_hits(reading, p) for p in patterns):
            return True
        if any(_denied(s, patterns, depth + 1) for s in reading.scripts):
            return True
    return False
