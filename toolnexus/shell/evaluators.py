"""Every way a command line hands a string to something that runs it, as data: the program
options, shell builtins, git configuration keys and environment variables that evaluate a string
as a command, and the program names that may be a shell. Beside the known-safe table
(`table.py`); nothing here runs code.

Deny and ask rules read a command by *any* reading (`match.py`): each entry here is one more
reading. What a value is read as is its `Reading`: a shell command line (read as a script of its
own), code in another language or a file whose content names programs (doubt: every deny and ask
rule matches), a re-run of history (doubt). The known-safe check (`safe.py`) refuses every
option listed here for a program of its table, whatever the table says.

Each entry cites where the program's own documentation says so (the manual pages installed
here: git 2.39, GNU bash 5.2, GNU sed 4.9, GNU tar 1.34, OpenSSH 9.2, less 590, vim 9.0, mawk
1.3.4, man-db 2.11; `man git-config` lists every key that runs a command).
`tests/security/test_evaluators.py` runs one example of every entry, with a marker program that
leaves a file, and checks the analysis reads it.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .table import Option, opts

__all__ = [
    "ENTRIES",
    "Evaluator",
    "Reading",
    "Source",
    "config_reading",
    "env_reading",
    "is_shell",
    "may_be_shell",
    "option_entries",
]


class Source(enum.Enum):
    """Where the string is given."""

    OPTION = "option"
    """An option's value (`tar --to-command=CMD`), or `program sub` for a sub-command's."""
    OPERAND = "operand"
    """A program's operand in its own language (awk's program text, sed's script)."""
    BUILTIN = "builtin"
    """A bash builtin, or a shell option that changes what the shell runs."""
    CONFIG = "config"
    """A git configuration key, given with `-c`, `--config-env`, `GIT_CONFIG_KEY_n` or
    `git config KEY VALUE`. Sections and keys are case-insensitive; `*` stands for a subsection."""
    ENV = "env"
    """An environment variable, set on the command line (`X=v cmd`, `export X=v`, `env X=v`)."""
    NAME = "name"
    """A spelling of a program that may be a shell."""


class Reading(enum.Enum):
    """What the string is read as."""

    SCRIPT = "script"
    """A shell command line, or a program with its arguments: read as a script of its own."""
    EXPANDED = "expanded"
    """Expanded by the shell before use (`BASH_ENV`, `PS4`): the substitutions in it run."""
    CODE = "code"
    """Code of another language that can start any program (`python -c`): doubt."""
    FILE = "file"
    """A file or folder whose content names programs to run (`include.path`, `core.hooksPath`,
    `ssh -F`): doubt, since what the file holds is not on the command line."""
    HISTORY = "history"
    """Runs an earlier command again, possibly edited (`fc`, `!!` history expansion): doubt."""
    SHELL = "shell"
    """The program may be a shell: its `-c` script and the here-documents it reads are read."""
    RESOLVE = "resolve"
    """Changes which file a program name runs (`PATH=`, `hash -p`): every program named after
    it may be a shell."""
    KEY = "key"
    """Names a git configuration key: read as `config_reading` says."""
    SED = "sed"
    """A sed script: `e COMMAND` runs COMMAND, `e` alone and `s///e` run text from the input
    (doubt)."""
    AWK = "awk"
    """An awk program: `system()`, `print | cmd` and `cmd | getline` run commands (doubt)."""


@dataclass(frozen=True, kw_only=True)
class Evaluator:
    """One way a string given on a command line is run."""

    program: str
    """The program (`tar`), `program sub` for a sub-command (`git rebase`), `git` for config
    keys, `bash` for builtins and shell settings, `*` for environment variables any program may
    read."""
    source: Source
    names: tuple[str, ...]
    """Option spellings (as the table writes them: `-I/--use-compress-program=`), builtin names
    with the option that runs (`fc`, `history -s`), config keys or variable names."""
    reading: Reading
    doc: str
    """Where the program's own documentation says it: `manual(section) SECTION: item`."""
    prefix: str = ""
    """A regular expression for what comes before the command in the value (`exec=` of tar's
    `--checkpoint-action`, `ProxyCommand=` of ssh's `-o`)."""

    @property
    def options(self) -> tuple[Option, ...]:
        """The options of an OPTION entry, parsed like the table's option specs."""
        return opts(" ".join(self.names)) if self.source is Source.OPTION else ()


def _e(
    program: str, source: Source, names: str, reading: Reading, doc: str, *, prefix: str = ""
) -> Evaluator:
    return Evaluator(
        program=program,
        source=source,
        names=tuple(names.split()),
        reading=reading,
        doc=doc,
        prefix=prefix,
    )


_O, _P, _B, _C, _V, _N = (
    Source.OPTION, Source.OPERAND, Source.BUILTIN, Source.CONFIG, Source.ENV, Source.NAME,
)  # fmt: skip
_S, _X, _K, _F, _H = Reading.SCRIPT, Reading.EXPANDED, Reading.CODE, Reading.FILE, Reading.HISTORY

_SHELL_NAMES = "sh bash rbash dash zsh ksh ksh93 mksh pdksh ash yash posh busybox sh.distrib"
"""Shells by name, `/etc/shells` and the shells Debian packages; a version suffix (`bash5.2`,
`zsh-5.9`) is the same shell."""

ENTRIES: tuple[Evaluator, ...] = (
    # --- what may be a shell ------------------------------------------------------------------
    _e("*", _N, _SHELL_NAMES, Reading.SHELL, "shells(5); bash(1) INVOCATION: -c"),
    _e("*", _N, "/proc/*/exe /proc/*/task/*/exe /proc/*/fd/* /dev/fd/* /dev/stdin /proc/*/root/*",
       Reading.SHELL, "proc(5) /proc/pid/exe: a link to the executable of the process (bash "
       "itself, for the shell that runs it); /proc/pid/fd/*, /proc/pid/root"),
    _e("*", _N, "./* ../* /tmp/* ~/*", Reading.SHELL,
       "symlink(7): a path outside the system's program folders may be a link to a shell "
       "(`ln -s /bin/bash x; ./x -c CMD`); any word with a `/` outside /usr/bin, /bin, "
       "/usr/local/bin, /usr/sbin, /sbin, /usr/libexec, /usr/lib/git-core"),
    _e("*", _V, "PATH", Reading.RESOLVE, "bash(1) COMMAND EXECUTION: PATH is searched"),
    _e("bash", _B, "hash -p", Reading.RESOLVE,
       "bash(1) SHELL BUILTIN COMMANDS: hash -p filename name (name runs filename)"),
    _e("bash", _B, "enable -f", _F, "bash(1) SHELL BUILTIN COMMANDS: enable -f loads a builtin "
       "from a shared object"),
    # --- bash builtins and settings -------------------------------------------------------------
    _e("bash", _B, "fc", _H, "bash(1) SHELL BUILTIN COMMANDS: fc [-e ename] ...; fc -s "
       "[pat=rep] [cmd] re-executes history entries (only `fc -l` lists)"),
    _e("bash", _B, "history -s", _S, "bash(1) SHELL BUILTIN COMMANDS: history -s args stores "
       "args as one history entry (fc then runs it)"),
    _e("bash", _B, "set -H set -o histexpand", _H,
       "bash(1) HISTORY EXPANSION: `!!`, `!n`, `!string` re-run earlier lines"),
    _e("bash", _B, "eval", _S, "bash(1) SHELL BUILTIN COMMANDS: eval"),
    _e("bash", _B, "trap", _S, "bash(1) SHELL BUILTIN COMMANDS: trap arg sigspec"),
    _e("bash", _B, "source .", _S,
       "bash(1) SHELL BUILTIN COMMANDS: source filename (read from standard input when it is "
       "/dev/stdin; another file's content is not on the command line)"),
    _e("bash", _B, "compgen -C complete -C", _S, "bash(1) SHELL BUILTIN COMMANDS: complete -C "
       "command (command is executed in a subshell)"),
    _e("bash", _B, "mapfile -C readarray -C", _S, "bash(1) SHELL BUILTIN COMMANDS: mapfile -C "
       "callback (evaluated each quantum lines)"),
    _e("bash", _B, "bind -x", _K, "bash(1) SHELL BUILTIN COMMANDS: bind -x keyseq:shell-command"),
    _e("bash", _B, "alias", _S, "bash(1) ALIASES"),
    _e("bash", _B, "command builtin exec coproc time nohup", _S,
       "bash(1) SHELL BUILTIN COMMANDS and SHELL GRAMMAR: each runs the command after it"),
    _e("*", _V, "PROMPT_COMMAND", _S, "bash(1) Shell Variables: PROMPT_COMMAND"),
    _e("*", _V, "BASH_ENV ENV PS0 PS1 PS2 PS3 PS4", _X,
       "bash(1) INVOCATION: the value of BASH_ENV (ENV in posix mode) is expanded; PROMPTING: "
       "PS0, PS1, PS2, PS4 undergo command substitution"),
    # --- programs that run the command after their options (match.py models their grammars) -----
    _e("env timeout nice nohup stdbuf xargs sudo doas ionice chrt taskset setsid unbuffer "
       "flock watch script su runuser ssh", _P, "COMMAND", _S,
       "env(1), timeout(1), nice(1), nohup(1), stdbuf(1), xargs(1), sudo(8), watch(1), "
       "script(1) -c, su(1) -c, flock(1) -c, ssh(1) [command]: the words after the options run"),
    _e("env", _O, "-S/--split-string=", _S, "env(1) -S: process and split S into arguments"),
    _e("find", _O, "-exec -execdir -ok -okdir", _S, "find(1) ACTIONS: -exec command ;"),
    # --- program options whose value is a command --------------------------------------------
    _e("sort", _O, "--compress-program=", _S, "sort(1) --compress-program=PROG"),
    _e("rg", _O, "--pre= --hostname-bin=", _S, "rg(1) --pre=COMMAND, --hostname-bin=COMMAND"),
    _e("rg", _O, "-z/--search-zip", _F, "rg(1) -z: runs decompression programs found on PATH"),
    _e("tar", _O, "--to-command= -I/--use-compress-program= -F/--info-script/--new-volume-script= "
       "--rsh-command= --rmt-command=", _S,
       "tar(1) --to-command=COMMAND, -I COMMAND, -F COMMAND, --rsh-command, --rmt-command"),
    _e("tar", _O, "--checkpoint-action=", _S, "tar(1) --checkpoint-action=exec=COMMAND",
       prefix="exec="),
    _e("rsync", _O, "-e/--rsh= --rsync-path=", _S, "rsync(1) -e COMMAND, --rsync-path=PROGRAM"),
    _e("ssh", _O, "-o=", _S, "ssh_config(5) ProxyCommand, LocalCommand, KnownHostsCommand, "
       "RemoteCommand, given with -o KEY=VALUE", prefix=r"[A-Za-z]+\s*[=\s]\s*"),
    _e("ssh", _O, "-F=", _F, "ssh(1) -F configfile (may name ProxyCommand...)"),
    _e("scp", _O, "-S=", _S, "scp(1) -S program"),
    _e("scp", _O, "-o=", _S, "scp(1) -o ssh_option (ssh_config(5) ProxyCommand...)",
       prefix=r"[A-Za-z]+\s*[=\s]\s*"),
    _e("scp", _O, "-F=", _F, "scp(1) -F ssh_config"),
    _e("man", _O, "-P/--pager= -H/--html[=]", _S, "man(1) -P pager, -H[browser]"),
    _e("less", _O, "+=", _K, "less(1) +cmd: an initial command (`+!cmd` is a shell escape in "
       "builds that allow it)"),
    _e("*", _V, "LESSOPEN LESSCLOSE", _S, "less(1) INPUT PREPROCESSOR: LESSOPEN='|cmd %s'"),
    _e("*", _V, "PAGER MANPAGER GIT_PAGER EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR BROWSER "
       "GIT_SSH GIT_SSH_COMMAND GIT_ASKPASS SSH_ASKPASS GIT_EXTERNAL_DIFF GIT_PROXY_COMMAND "
       "SYSTEMD_PAGER", _S,
       "git(1) ENVIRONMENT VARIABLES: GIT_PAGER, GIT_EDITOR, GIT_SEQUENCE_EDITOR, GIT_SSH, "
       "GIT_SSH_COMMAND, GIT_ASKPASS, GIT_EXTERNAL_DIFF; man(1) MANPAGER, PAGER; ssh(1) "
       "SSH_ASKPASS; environ(7) EDITOR, VISUAL, BROWSER"),
    _e("*", _V, "GIT_CONFIG_VALUE_*", _S,
       "git-config(1) ENVIRONMENT: GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n> "
       "(a value is run when its key names a program)"),
    _e("*", _V, "GIT_CONFIG_KEY_*", Reading.KEY,
       "git-config(1) ENVIRONMENT: GIT_CONFIG_KEY_<n> names the key GIT_CONFIG_VALUE_<n> sets"),
    _e("*", _V, "GIT_CONFIG_PARAMETERS", _F, "git(1): GIT_CONFIG_PARAMETERS carries `-c` "
       "settings to sub-processes (quoted key=value pairs)"),
    _e("*", _V, "GIT_CONFIG GIT_CONFIG_GLOBAL GIT_CONFIG_SYSTEM GIT_EXEC_PATH GIT_TEMPLATE_DIR "
       "LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT", _F,
       "git(1) ENVIRONMENT: GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM, GIT_EXEC_PATH; "
       "git-init(1) TEMPLATE DIRECTORY; ld.so(8) LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT"),
    _e("vim", _O, "-c= --cmd= +[=] -S=", _K, "vim(1) -c command, --cmd command, +command, "
       "-S file (ex commands: `:!cmd` runs a shell)"),
    _e("vi", _O, "-c= --cmd= +[=] -S=", _K, "vim(1), as vi"),
    _e("ex", _O, "-c= --cmd= +[=] -S=", _K, "vim(1), as ex"),
    _e("python", _O, "-c=", _K, "python3(1) -c command"),
    _e("perl", _O, "-e= -E=", _K, "perlrun(1) -e commandline"),
    _e("ruby", _O, "-e=", _K, "ruby(1) -e command"),
    _e("node", _O, "-e/--eval= -p/--print=", _K, "node(1) -e, --eval, -p, --print"),
    _e("php", _O, "-r=", _K, "php(1) -r code"),
    _e("lua", _O, "-e=", _K, "lua(1) -e stat"),
    _e("gdb", _O, "-ex/--eval-command= -x/--command=", _K,
       "gdb(1) -ex command (`shell cmd` runs a shell)"),
    _e("make", _O, "--eval=", _K, "make(1) --eval=string (a makefile's recipes run)"),
    _e("awk mawk gawk nawk", _P, "PROGRAM -f/--file=", Reading.AWK,
       "awk(1) system(expr), print | expr, expr | getline"),
    _e("sed", _P, "SCRIPT -e/--expression=", Reading.SED,
       "sed(1) / info sed 'Extended Commands': e command, s///e; w /dev/stdout"),
    # --- git sub-commands ---------------------------------------------------------------------
    _e("git rebase", _O, "-x/--exec=", _S, "git-rebase(1) --exec <cmd>"),
    _e("git submodule", _P, "foreach", _S, "git-submodule(1) foreach <command>"),
    _e("git bisect", _P, "run", _S, "git-bisect(1) bisect run <cmd>"),
    _e("git difftool", _O, "-x/--extcmd= -t/--tool=", _S, "git-difftool(1) --extcmd=<command>"),
    _e("git mergetool", _O, "-t/--tool=", _S, "git-mergetool(1) --tool=<tool>"),
    _e("git grep", _O, "-O/--open-files-in-pager[=]", _S, "git-grep(1) -O[<pager>]"),
    _e("git filter-branch", _O, "--env-filter= --tree-filter= --index-filter= --parent-filter= "
       "--msg-filter= --commit-filter= --tag-name-filter=", _S,
       "git-filter-branch(1) FILTERS: each is evaluated in the shell"),
    _e("git fetch git pull git clone git push git ls-remote git archive", _O,
       "--upload-pack= -u= --receive-pack= --exec=", _S,
       "git-fetch(1) --upload-pack <upload-pack>, git-push(1) --receive-pack, git-archive(1) "
       "--exec"),
    _e("git", _P, "ext::*", _S, "git-remote-ext(1): a URL `ext::<command> [<args>...]` runs "
       "the command (% escapes)"),
    _e("git", _O, "--exec-path[=]", _F, "git(1) --exec-path: where git finds its sub-commands"),
    # --- git configuration keys whose value names a program (git-config(1) VARIABLES) ---------
    _e("git", _C, "core.pager core.editor core.sshCommand core.askPass core.gitProxy "
       "core.alternateRefsCommand core.fsmonitor sequence.editor diff.external "
       "diff.*.command diff.*.textconv filter.*.clean filter.*.smudge filter.*.process "
       "merge.*.driver credential.helper credential.*.helper gpg.program gpg.*.program "
       "gpg.ssh.defaultKeyCommand interactive.diffFilter pager.* uploadpack.packObjectsHook "
       "browser.*.cmd browser.*.path difftool.*.cmd difftool.*.path mergetool.*.cmd "
       "mergetool.*.path man.*.cmd man.*.path guitool.*.cmd help.browser web.browser "
       "instaweb.browser remote.*.uploadpack remote.*.receivepack remote.*.vcs "
       "submodule.*.update trailer.*.command trailer.*.cmd sendemail.sendmailcmd "
       "sendemail.smtpserver sendemail.tocmd sendemail.cccmd diff.tool merge.tool "
       "man.viewer", _S,
       "git-config(1) VARIABLES: each key's text says it names a program or a shell "
       "command (core.pager: 'Text viewer for use by Git commands', core.fsmonitor: 'the "
       "pathname of the fsmonitor hook command', credential.helper: '! shell commands', ...); "
       "and git-interpret-trailers(1) trailer.<token>.command"),
    _e("git", _C, "alias.*", _S, "git-config(1) alias.*: 'If the alias expansion is prefixed "
       "with an exclamation point, it will be treated as a shell command'"),
    _e("git", _C, "core.hooksPath include.path includeIf.*.path init.templateDir core.worktree "
       "core.attributesFile protocol.allow protocol.*.allow url.*.insteadOf "
       "url.*.pushInsteadOf", _F,
       "git-config(1) core.hooksPath (hooks run from there), include.path, includeIf.*.path "
       "(another config file), init.templateDir (hooks copied from there); gitattributes(5) "
       "(a driver named by attributes); protocol.*.allow and url.*.insteadOf can open "
       "`ext::` URLs (git-remote-ext(1))"),
)  # fmt: skip
"""Every reading, in one list. Entries of kind NAME, BUILTIN and the wrappers restate what
`match.py` reads with dedicated code (option grammars, here-documents); the rest are applied
from here."""


# --- lookups built from the list ----------------------------------------------------------------

_SYSTEM_BIN = ("/usr/bin/", "/bin/", "/usr/local/bin/", "/usr/sbin/", "/sbin/", "/usr/libexec/",
               "/usr/lib/git-core/")  # fmt: skip
_SHELL_NAME = re.compile(
    "(?:" + "|".join(re.escape(n) for n in _SHELL_NAMES.split()) + r")(?:[-.]?[0-9][0-9.]*)?"
)


_RESOLVING = tuple(
    name
    for e in ENTRIES
    if e.source is Source.NAME and e.program == "*"
    for name in e.names
    if name.startswith(("/proc/", "/dev/"))
)


def is_shell(program: str) -> bool:
    """Whether a program word runs a shell by any reading: a shell's name (`/bin/sh`, `rbash`,
    `bash5.2`), or a path the kernel resolves to an executable not named on the command line
    (`/proc/self/exe` is the shell that runs it, `/proc/<pid>/exe`, `/dev/fd/3`)."""
    if _SHELL_NAME.fullmatch(program.rsplit("/", 1)[-1]):
        return True
    return any(fnmatch.fnmatchcase(program, pattern) for pattern in _RESOLVING)


def may_be_shell(program: str) -> bool:
    """`is_shell`, or a path outside the system's program folders (`./x`, `/tmp/x`, `../bin/x`),
    which may be a link to a shell made a moment before (`ln -s /bin/bash x; ./x -c CMD`)."""
    if is_shell(program):
        return True
    if "/" not in program:
        return False
    return program[: program.rfind("/") + 1] not in _SYSTEM_BIN


def _by_program() -> Mapping[str, tuple[Evaluator, ...]]:
    out: dict[str, list[Evaluator]] = {}
    for entry in ENTRIES:
        if entry.source is not Source.OPTION or entry.program == "*":
            continue
        # "git fetch git pull" lists several sub-commands of one program
        words = entry.program.split()
        names = (
            [" ".join(words[i : i + 2]) for i in range(0, len(words), 2)]
            if (words[0] == "git" and len(words) > 1)
            else words
        )
        for name in names:
            out.setdefault(name, []).append(entry)
    return {k: tuple(v) for k, v in out.items()}


_OPTIONS = _by_program()


def option_entries(program: str) -> tuple[Evaluator, ...]:
    """The OPTION entries of `program` (`tar`, `git rebase`)."""
    return _OPTIONS.get(program, ())


def _env_table() -> dict[str, Reading]:
    out: dict[str, Reading] = {}
    for entry in ENTRIES:
        if entry.source is Source.ENV:
            for name in entry.names:
                out[name] = entry.reading
    return out


_ENV = _env_table()


def env_reading(name: str) -> Reading | None:
    """How a variable's value is read, if it is one of the list's (`GIT_CONFIG_VALUE_3`)."""
    found = _ENV.get(name)
    if found is not None:
        return found
    globs = ((p, r) for p, r in _ENV.items() if "*" in p)
    return next((r for p, r in globs if fnmatch.fnmatchcase(name, p)), None)


_CONFIG = tuple(
    (re.compile(fnmatch.translate(key.lower())), entry.reading)
    for entry in ENTRIES
    if entry.source is Source.CONFIG
    for key in entry.names
)

_INERT_CONFIG = re.compile(
    r"""(?x)
    (user|author|committer)\.(name|email) | init\.defaultbranch | safe\.directory
    | core\.(quotepath|autocrlf|eol|safecrlf|filemode|ignorecase|abbrev|commentchar
        |whitespace|precomposeunicode|symlinks|longpaths|checkstat|trustctime)
    | color\.[a-z0-9.-]+ | advice\.[a-z0-9-]+ | column\.ui
    | (push\.(default|autosetupremote|followtags) | pull\.(rebase|ff) | fetch\.prune
        | merge\.(ff|conflictstyle|log) | rebase\.(autosquash|autostash|updaterefs)
        | commit\.(verbose|cleanup) | status\.(short|branch|showuntrackedfiles|relativepaths)
        | diff\.(renames|algorithm|colormoved|context|noprefix|mnemonicprefix|relative)
        | log\.(decorate|abbrevcommit|date|follow|mailmap) | format\.pretty | grep\.[a-z]+
        | blame\.(date|coloring) | tag\.sort | branch\.sort | help\.autocorrect)
    """
)
"""Keys that run nothing and point git nowhere else, as git spells them lower-cased: a key given
on a command line that is neither here nor in the list is doubt."""


def config_reading(key: str) -> Reading | None:
    """How git reads the value of configuration `key` given on a command line: SCRIPT (a
    command), FILE (doubt), None (inert). A key that is in neither list is doubt (FILE)."""
    low = key.lower()
    for pattern, reading in _CONFIG:
        if pattern.fullmatch(low):
            return reading
    if _INERT_CONFIG.fullmatch(low):
        return None
    return Reading.FILE
