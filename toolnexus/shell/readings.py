"""The readings of `evaluators.py` applied to one simple command: the strings it hands to
something that runs them (read as scripts of their own by deny and ask rules), and whether it
hands over something that cannot be read (doubt: every deny and ask rule matches).

Read by any reading: an option is recognised wherever it stands and by any getopt abbreviation,
an unknown letter in a cluster counts as a flag, and a value known only at run time is doubt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from .evaluators import (
    Evaluator,
    Reading,
    config_reading,
    env_reading,
    option_entries,
)
from .grammar import _Word
from .table import Arity, Option

__all__ = ["Evaluated", "evaluated", "git_config", "resolves"]


@dataclass(slots=True)
class Evaluated:
    scripts: list[str] = field(default_factory=list)
    """Strings that run as shell command lines."""
    doubt: bool = False
    """Something runs that the command line does not show."""

    def add(self, reading: Reading | None, value: str, expands: bool = False) -> None:
        """Record a value read as `reading` (None: inert)."""
        if reading is None:
            return
        if reading in (Reading.SCRIPT, Reading.EXPANDED):
            if expands:
                self.doubt = True  # `bash -c "$X"`: the script is known only at run time
            else:
                # `!CMD` is how git spells a shell command (aliases, credential helpers, also
                # through GIT_CONFIG_VALUE_n); elsewhere the `!` is bash's negation
                self.scripts.append(value.removeprefix("!"))
        elif reading is Reading.KEY:
            # its value is read through GIT_CONFIG_VALUE_n; a key that names a file, or one not
            # understood, is doubt
            self.doubt |= expands or config_reading(value) is Reading.FILE
        elif reading is Reading.FILE:
            if expands or value not in ("", "/dev/null"):
                self.doubt = True
        else:
            self.doubt = True


_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)", re.DOTALL)
"""`NAME=value` as `export`, `declare`, `env` and a command's prefix take it, quoted or not."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HOLDERS = frozenset({"read", "printf", "declare", "typeset", "local", "export", "readonly",
                      "mapfile", "readarray", "unset", "let"})  # fmt: skip
"""Builtins that may give a variable named by a word its value (`read GIT_PAGER`, `printf -v`)."""


def resolves(words: Sequence[_Word]) -> bool:
    """Whether this simple command changes which file a program name runs: it assigns `PATH`
    (a prefix, `export PATH=...`) or is `hash -p`."""
    for w in words:
        m = _ASSIGN.match(w.text)
        if m is not None and env_reading(m.group(1)) is Reading.RESOLVE:
            return True
    return len(words) > 1 and words[0].text == "hash" and _has_letter(words[1:], "p")


def _name(word: _Word) -> str:
    return word.text.rsplit("/", 1)[-1]


def _program(name: str) -> str:
    """`python3.11` -> `python`: the list names a program once, whatever its version."""
    return name.rstrip("0123456789.") or name


def evaluated(words: Sequence[_Word], heads: Sequence[int]) -> Evaluated:
    """What `words` (one simple command, programs running at `heads`) evaluate, by the list."""
    out = Evaluated()
    _variables(words, out)
    for h in heads:
        name = _name(words[h])
        program = _program(name)
        _options(words, h + 1, option_entries(name) or option_entries(program), out)
        if program in ("sed",):
            _sed(words, h + 1, out)
        elif program in ("awk", "mawk", "gawk", "nawk"):
            _awk(words, h + 1, out)
        elif name in _BUILTINS:
            _BUILTINS[name](words[h + 1 :], out)
    return out


def _variables(words: Sequence[_Word], out: Evaluated) -> None:
    """Listed variables set anywhere in the command (`GIT_PAGER=x git log`, `export EDITOR=x`,
    `env LESSOPEN=...`), and listed names a builtin may assign (`read GIT_PAGER`)."""
    holder = bool(words) and words[0].text in _HOLDERS
    for w in words:
        m = _ASSIGN.match(w.text)
        if m is not None:
            out.add(env_reading(m.group(1)), m.group(2), w.expands)
        elif holder and _NAME.fullmatch(w.text) and env_reading(w.text) is not None:
            out.doubt = True


# --- options ---------------------------------------------------------------------------------


def _option_values(
    words: Sequence[_Word], start: int, options: Sequence[Option]
) -> Iterator[tuple[Option, _Word | None, str]]:
    """Each use of one of `options` in `words[start:]` with its value: long options by any
    prefix, single-dash long names (`-ex`) and `+cmd` exactly, short ones anywhere in a cluster.
    Every word is looked at up to `--`, operands included: which words are the values of
    options we do not know cannot be told, so any word may be an option (`python x.py -c 1`
    counts, by this reading)."""
    exact = {n: o for o in options for n in o.names if n == "+" or (n[:2] != "--" and len(n) > 2)}
    long_ = {n[2:]: o for o in options for n in o.names if n.startswith("--")}
    short = {n[1]: o for o in options for n in o.names if len(n) == 2 and n[0] == "-"}
    i = start
    while i < len(words):
        word = words[i]
        text = word.text
        i += 1
        if text == "--":
            return
        if "+" in exact and text.startswith("+"):
            yield exact["+"], word, text[1:]
            continue
        if not text.startswith("-") or text == "-":
            continue
        head, eq, value = text.partition("=")
        if head in exact:
            option = exact[head]
            if eq:
                yield option, word, value
            elif option.arity is Arity.REQUIRED:
                nxt = words[i] if i < len(words) else None
                yield option, nxt, nxt.text if nxt is not None else ""
                i += 1
            continue
        if text.startswith("--"):
            name = head[2:]
            found = [o for n, o in long_.items() if name and n.startswith(name)]
            if not found:
                continue
            option = found[0]
            if eq:
                yield option, word, value
            elif option.arity is Arity.REQUIRED:
                nxt = words[i] if i < len(words) else None
                yield option, nxt, nxt.text if nxt is not None else ""
                i += 1
            elif option.arity is Arity.NONE:
                yield option, None, ""
            continue
        for k in range(1, len(text)):
            option = short.get(text[k])
            if option is None:
                continue  # a letter we do not know: a flag, by any reading
            if option.arity is Arity.NONE:
                yield option, None, ""
                continue
            if k + 1 < len(text):
                yield option, word, text[k + 1 :]
            elif option.arity is Arity.REQUIRED:
                nxt = words[i] if i < len(words) else None
                yield option, nxt, nxt.text if nxt is not None else ""
                i += 1
            else:
                yield option, None, ""
            break


def _options(
    words: Sequence[_Word], start: int, entries: Sequence[Evaluator], out: Evaluated
) -> None:
    for entry in entries:
        for _, word, value in _option_values(words, start, entry.options):
            if entry.prefix:
                value = re.sub("^(?:" + entry.prefix + ")", "", value, count=1)
            out.add(entry.reading, value, word is not None and (word.expands or word.glob))


# --- git -------------------------------------------------------------------------------------


def git_config(key: str, value: str, expands: bool, out: Evaluated) -> None:
    """A configuration `key=value` given to git on its command line or in its environment."""
    reading = config_reading(key)
    if reading is Reading.SCRIPT and key.lower().startswith("alias.") and not value.startswith("!"):
        return  # an alias of git sub-commands: the caller reads it as any sub-command
    out.add(reading, value, expands)


def git_operands(words: Sequence[_Word], sub: int, out: Evaluated) -> None:
    """The sub-command at `words[sub]` and what follows: its own options from the list,
    `git config KEY VALUE`, `submodule foreach CMD`, `bisect run CMD`, and `ext::` URLs."""
    name = words[sub].text if sub < len(words) else ""
    _options(words, sub + 1, option_entries(f"git {name}"), out)
    rest = words[sub + 1 :]
    for k, w in enumerate(rest):
        if w.text.startswith("ext::"):
            command = re.sub("%(.)", lambda m: " " if m.group(1) == " " else m.group(1), w.text[5:])
            out.add(Reading.SCRIPT, command, w.expands)
        if (name, w.text) in (("submodule", "foreach"), ("bisect", "run")):
            tail = rest[k + 1 :]
            out.add(Reading.SCRIPT, " ".join(t.text for t in tail), any(t.expands for t in tail))
    if name == "config":
        operands = [w for w in rest if not w.text.startswith("-")]
        if len(operands) >= 2:
            key, value = operands[0], operands[1]
            if key.expands:
                out.doubt = True
            else:
                git_config(key.text, value.text, value.expands, out)


# --- bash builtins ---------------------------------------------------------------------------


def _has_letter(words: Sequence[_Word], letter: str) -> bool:
    return any(
        w.text.startswith("-") and not w.text.startswith("--") and letter in w.text[1:]
        for w in words
    )


def _letter_value(words: Sequence[_Word], letter: str) -> Iterator[_Word | str]:
    """The values of a builtin's `-X VALUE` / `-XVALUE` (in a cluster: `-c1 -C cmd`)."""
    for i, w in enumerate(words):
        text = w.text
        if not text.startswith("-") or text.startswith("--"):
            continue
        k = text.find(letter, 1)
        if k < 0:
            continue
        if k + 1 < len(text):
            yield text[k + 1 :] if not w.expands else w
        elif i + 1 < len(words):
            yield words[i + 1]


def _fc(args: Sequence[_Word], out: Evaluated) -> None:
    """`fc -l` lists; any other `fc` runs history entries again, possibly edited."""
    if not (_has_letter(args, "l") and not _has_letter(args, "s") and not _has_letter(args, "e")):
        out.doubt = True


def _history(args: Sequence[_Word], out: Evaluated) -> None:
    if _has_letter(args, "s"):
        words = [w for w in args if not w.text.startswith("-")]
        out.add(Reading.SCRIPT, " ".join(w.text for w in words), any(w.expands for w in words))


def _set(args: Sequence[_Word], out: Evaluated) -> None:
    """`set -H` / `set -o histexpand` turn history expansion on: `!!` runs an earlier line."""
    if _has_letter(args, "H") or any(w.text == "histexpand" or w.expands for w in args):
        out.doubt = True


_Check = Callable[[Sequence[_Word], Evaluated], None]


def _value_runs(letter: str, reading: Reading) -> _Check:
    """A builtin whose `-LETTER VALUE` runs VALUE (`complete -C`, `mapfile -C`)."""

    def check(args: Sequence[_Word], out: Evaluated) -> None:
        for value in _letter_value(args, letter):
            if isinstance(value, str):
                out.add(reading, value)
            else:
                out.add(reading, value.text, value.expands)

    return check


def _flag_doubts(letter: str) -> _Check:
    """A builtin whose `-LETTER` runs what cannot be read (`bind -x`, `enable -f`)."""

    def check(args: Sequence[_Word], out: Evaluated) -> None:
        if _has_letter(args, letter):
            out.doubt = True

    return check


_BUILTINS: dict[str, _Check] = {
    "fc": _fc,
    "history": _history,
    "set": _set,
    "compgen": _value_runs("C", Reading.SCRIPT),
    "complete": _value_runs("C", Reading.SCRIPT),
    "mapfile": _value_runs("C", Reading.SCRIPT),
    "readarray": _value_runs("C", Reading.SCRIPT),
    "bind": _flag_doubts("x"),
    "enable": _flag_doubts("f"),
}
"""The builtins of the list that `match.py` does not read itself (eval, trap, source, alias,
command, exec... are read there)."""


# --- other languages -------------------------------------------------------------------------

_AWK_VALUES = "FvfW"


def _awk(words: Sequence[_Word], start: int, out: Evaluated) -> None:
    """An awk program that may run a command (`system`, `|`, `getline`, gawk's `@load`) is
    doubt: what it runs is an awk expression. A program from a file (`-f`) is not read, as a
    shell script file is not."""
    i = start
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        if text.startswith("--"):
            if text.startswith(("--file", "--source", "--exec")):
                return
            i += 1
            continue
        if "f" in text[1:2] or text[1:2] == "e":
            return
        i += 2 if len(text) == 2 and text[1] in _AWK_VALUES else 1
    if i >= len(words):
        return
    program = words[i]
    if program.expands or re.search(r"system|getline|@load|\|", program.text.replace("||", "")):
        out.doubt = True


def _sed(words: Sequence[_Word], start: int, out: Evaluated) -> None:
    """sed's scripts (`-e`, `--expression`, or the first operand): each `e COMMAND` is a
    script; `e` alone and the `s///e` flag run text from the input (doubt)."""
    scripts: list[_Word | str] = []
    script_given = False
    i = start
    while i < len(words):
        w = words[i]
        text = w.text
        i += 1
        if text == "--":
            break
        if text.startswith("--"):
            name, eq, value = text[2:].partition("=")
            if name and "expression".startswith(name):
                script_given = True
                scripts.append(value if eq else (words[i] if i < len(words) else ""))
                i += 0 if eq else 1
            elif name and "file".startswith(name):
                script_given = True
                i += 0 if eq else 1
            elif name and ("line-length".startswith(name)):
                i += 0 if eq else 1
            continue
        if text.startswith("-") and text != "-":
            for k in range(1, len(text)):
                if text[k] in "ef":
                    script_given = True
                    value: _Word | str = (
                        text[k + 1 :] if k + 1 < len(text) else (words[i] if i < len(words) else "")
                    )
                    if k + 1 >= len(text):
                        i += 1
                    if text[k] == "e":
                        scripts.append(value)
                    break
                if text[k] == "l":
                    i += 0 if k + 1 < len(text) else 1
                    break
            continue
        if not script_given:
            scripts.append(w)
            script_given = True
    for script in scripts:
        if isinstance(script, _Word):
            if script.expands:
                out.doubt = True
                continue
            script = script.text
        found, doubt = sed_commands(script)
        out.scripts.extend(found)
        out.doubt |= doubt


_SED_PLAIN = frozenset("=dDgGhHnNpPxzF")


def sed_commands(script: str) -> tuple[list[str], bool]:
    """The commands a GNU sed script runs (`e COMMAND`), and whether it runs text it reads
    (`e` alone, `s///e`) or cannot be read at all (doubt)."""
    found: list[str] = []
    i, n = 0, len(script)

    def to_eol() -> str:
        nonlocal i
        end = script.find("\n", i)
        end = n if end < 0 else end
        text = script[i:end]
        i = end
        return text

    def delimited(delim: str) -> bool:
        """Skip to past the next unescaped `delim`; False when there is none."""
        nonlocal i
        while i < n:
            c = script[i]
            if c == "\\":
                i += 2
                continue
            i += 1
            if c == delim:
                return True
        return False

    def address() -> bool:
        nonlocal i
        if i < n and script[i] in "/\\":
            if script[i] == "\\":
                i += 1
            if i >= n:
                return False
            delim = script[i]
            i += 1
            if not delimited(delim):
                return False
            while i < n and script[i] in "IM":
                i += 1
        else:
            while i < n and (script[i].isdigit() or script[i] in "$~+"):
                i += 1
        return True

    while i < n:
        c = script[i]
        if c in " \t\n;{}!":
            i += 1
            continue
        if c == "#":
            to_eol()
            continue
        if not address():
            return found, True
        while i < n and script[i] in " \t":
            i += 1
        if i < n and script[i] == ",":
            i += 1
            while i < n and script[i] in " \t":
                i += 1
            if not address():
                return found, True
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            break
        c = script[i]
        i += 1
        if c in "{};\n":
            continue
        if c in "aic":
            if i < n and script[i] == "\\":
                i += 1
            while True:  # text up to an unescaped newline
                line = to_eol()
                if line.endswith("\\") and i < n:
                    i += 1
                    continue
                break
        elif c in "rRwW":
            to_eol()
        elif c == "e":
            command = to_eol().strip()
            if command:
                found.append(command)
            else:
                return found, True  # runs the pattern space: text from the input
        elif c in "btT:":
            while i < n and script[i] not in ";\n":
                i += 1
        elif c in "qQlLv":
            while i < n and (script[i].isdigit() or script[i] in " \t."):
                i += 1
        elif c in "sy":
            if i >= n:
                return found, True
            delim = script[i]
            i += 1
            if not (delimited(delim) and delimited(delim)):
                return found, True
            if c == "s":
                while i < n and script[i] not in ";\n}":
                    if script[i] == "e":
                        return found, True  # runs the pattern space after the substitution
                    if script[i] == "w":
                        to_eol()
                        break
                    i += 1
        elif c not in _SED_PLAIN:
            return found, True  # not understood
    return found, False
