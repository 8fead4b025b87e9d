"""Known-safe commands: the ones the builtin shell runs without asking."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from .grammar import _Simple, _Word, analyze
from .match import _inline_script, _strip_once

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
