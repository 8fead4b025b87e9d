"""The known-safe table, as data: each read-only program the builtin shell may run unasked, with
its whole option list (allowed and refused, each with its arity), how its option parser reads
words, and the name of the one special check some programs need (sed scripts, date operands,
find expressions, git sub-commands). `safe.py` holds the reader that applies it; nothing here
runs code.

The option lists come from the programs' own manuals and `--help` on this machine (GNU coreutils
9.1, GNU grep 3.8, GNU sed 4.9, diffutils 3.8, file 5.44, util-linux column and rev, ripgrep 14,
git 2.39); `tests/security/test_known_safe.py` checks every GNU table against the binary.

Option specs are compact strings, one option a word, aliases joined by `/`:
`-n/--lines=` takes a value (joined `-n5`, `--lines=5`, or the next word), `--color[=]` an
optional one (joined only), a leading `!` marks an option that is refused (it writes, runs a
program or reaches another repository); options without `=` take no value.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["GIT", "PROGRAMS", "Arity", "Option", "Parser", "Program"]


class Arity(enum.Enum):
    NONE = "none"
    REQUIRED = "required"
    """Joined (`-kVAL`, `--opt=VAL`) or the next word."""
    OPTIONAL = "optional"
    """Joined only: `--color` alone takes no value, `--color always` has an operand."""


class Parser(enum.Enum):
    """How a program reads its words."""

    GETOPT = "getopt"
    """GNU getopt_long, permuting: options anywhere before `--`, clusters (`-abc`, a letter
    taking a value ends the cluster), long options by unambiguous prefix."""
    EXACT = "exact"
    """As GETOPT, but long options only by their exact name: ripgrep, and git, whose own
    parser takes prefixes against option lists too long to hold here honestly; an abbreviation
    is therefore not understood and not known-safe."""
    BUILTIN = "builtin"
    """A bash builtin (`cd`, `printf`, `type`): clusters, no long options, options end at the
    first operand."""
    ECHO = "echo"
    """bash's echo: leading words made of `-` and `neE` letters are options, the rest is text.
    Whatever it is given, echo only prints."""
    NONE = "none"
    """No options at all: every word is an operand (`true`, `test`, `expr`)."""


@dataclass(frozen=True, slots=True)
class Option:
    names: tuple[str, ...]
    """`-n`, `--lines`: every spelling of this one option."""
    arity: Arity = Arity.NONE
    refused: bool = False
    """Known, and not safe: writes a file, runs a program or leaves the repository."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Program:
    name: str
    options: tuple[Option, ...] = ()
    """The program's full option list: an option not in it is not understood."""
    parser: Parser = Parser.GETOPT
    numbers: bool = False
    """`-NUM` is an option (`head -5`, `git log -3`, `grep -2`)."""
    max_operands: int | None = None
    """More operands than this change what the program does (`uniq IN OUT` writes OUT)."""
    check: str | None = None
    """A special check in `safe.py` (`sed`, `date`, `find`, `command`, `test`, `git-branch`)."""
    plain: bool = False
    """Every word must be written out: no expansion, no glob (the check reads the words)."""
    expansions: bool = False
    """Operands may hold expansions: nothing the program is given can make it act (echo)."""
    subcommands: Mapping[str, Program] = field(default_factory=dict)
    """git: the sub-command named by the first operand, with its own options."""

    def short(self) -> dict[str, Option]:
        return {n[1]: o for o in self.options for n in o.names if len(n) == 2 and n[0] == "-"}

    def long(self) -> dict[str, Option]:
        return {n[2:]: o for o in self.options for n in o.names if n.startswith("--")}


def opts(spec: str) -> tuple[Option, ...]:
    """Parse an option spec string (see the module docstring)."""
    out: list[Option] = []
    for word in spec.split():
        refused = word.startswith("!")
        word = word.removeprefix("!")
        arity = Arity.NONE
        if word.endswith("[=]"):
            arity, word = Arity.OPTIONAL, word[:-3]
        elif word.endswith("="):
            arity, word = Arity.REQUIRED, word[:-1]
        out.append(Option(tuple(word.split("/")), arity, refused))
    return tuple(out)


_HELP = "--help --version"
_SUMS = "-b/--binary -c/--check --tag -t/--text -z/--zero --ignore-missing --quiet --status " \
    "--strict -w/--warn " + _HELP  # fmt: skip


def _p(name: str, spec: str = "", **kw: object) -> Program:
    return Program(name=name, options=opts(spec), **kw)  # type: ignore[arg-type]


_GNU: tuple[Program, ...] = (
    _p("ls", "-a/--all -A/--almost-all --author -b/--escape --block-size= -B/--ignore-backups "
       "-c -C --color[=] -d/--directory -D/--dired -f -F/--classify[=] --file-type --format= "
       "--full-time -g --group-directories-first -G/--no-group -h/--human-readable --si "
       "-H/--dereference-command-line --dereference-command-line-symlink-to-dir --hide= "
       "--hyperlink[=] --indicator-style= -i/--inode -I/--ignore= -k/--kibibytes -l "
       "-L/--dereference -m -n/--numeric-uid-gid -N/--literal -o -p -q/--hide-control-chars "
       "--show-control-chars -Q/--quote-name --quoting-style= -r/--reverse -R/--recursive "
       "-s/--size -S --sort= --time= --time-style= -t -T/--tabsize= -u -U -v -w/--width= -x "
       "-X -Z/--context --zero -1 " + _HELP),
    _p("cat", "-A/--show-all -b/--number-nonblank -e -E/--show-ends -n/--number "
       "-s/--squeeze-blank -t -T/--show-tabs -u -v/--show-nonprinting " + _HELP),
    _p("head", "-c/--bytes= -n/--lines= -q/--quiet/--silent -v/--verbose "
       "-z/--zero-terminated " + _HELP, numbers=True),
    _p("tail", "-c/--bytes= -f/--follow[=] -F -n/--lines= --max-unchanged-stats= --pid= "
       "-q/--quiet/--silent --retry -s/--sleep-interval= -v/--verbose -z/--zero-terminated "
       + _HELP, numbers=True),
    _p("wc", "-c/--bytes -m/--chars -l/--lines --files0-from= -L/--max-line-length -w/--words "
       "--debug " + _HELP),
    _p("sort", "-b/--ignore-leading-blanks -d/--dictionary-order -f/--ignore-case "
       "-g/--general-numeric-sort -i/--ignore-nonprinting -M/--month-sort "
       "-h/--human-numeric-sort -n/--numeric-sort -R/--random-sort --random-source= "
       "-r/--reverse --sort= -V/--version-sort --batch-size= -c/--check[=] -C "
       "!--compress-program= --debug --files0-from= -k/--key= -m/--merge !-o/--output= "
       "-s/--stable -S/--buffer-size= -t/--field-separator= -T/--temporary-directory= "
       "--parallel= -u/--unique -z/--zero-terminated " + _HELP),
    _p("uniq", "-c/--count -d/--repeated -D --all-repeated[=] -f/--skip-fields= --group[=] "
       "-i/--ignore-case -s/--skip-chars= -u/--unique -z/--zero-terminated -w/--check-chars= "
       + _HELP, max_operands=1, plain=True),
    _p("cut", "-b/--bytes= -c/--characters= -d/--delimiter= -f/--fields= -n --complement "
       "-s/--only-delimited --output-delimiter= -z/--zero-terminated " + _HELP),
    _p("tr", "-c/-C/--complement -d/--delete -s/--squeeze-repeats -t/--truncate-set1 " + _HELP),
    _p("nl", "-b/--body-numbering= -d/--section-delimiter= -f/--footer-numbering= "
       "-h/--header-numbering= -i/--line-increment= -l/--join-blank-lines= "
       "-n/--number-format= -p/--no-renumber -s/--number-separator= "
       "-v/--starting-line-number= -w/--number-width= " + _HELP),
    _p("tac", "-b/--before -r/--regex -s/--separator= " + _HELP),
    _p("paste", "-d/--delimiters= -s/--serial -z/--zero-terminated " + _HELP),
    _p("fold", "-b/--bytes -s/--spaces -w/--width= " + _HELP),
    _p("expand", "-i/--initial -t/--tabs= " + _HELP),
    _p("unexpand", "-a/--all --first-only -t/--tabs= " + _HELP),
    _p("basename", "-a/--multiple -s/--suffix= -z/--zero " + _HELP),
    _p("dirname", "-z/--zero " + _HELP),
    _p("realpath", "-e/--canonicalize-existing -m/--canonicalize-missing -L/--logical "
       "-P/--physical -q/--quiet --relative-to= --relative-base= -s/--strip/--no-symlinks "
       "-z/--zero " + _HELP),
    _p("readlink", "-f/--canonicalize -e/--canonicalize-existing -m/--canonicalize-missing "
       "-n/--no-newline -q/--quiet -s/--silent -v/--verbose -z/--zero " + _HELP),
    _p("stat", "-L/--dereference -f/--file-system --cached= -c/--format= --printf= -t/--terse "
       + _HELP),
    _p("du", "-0/--null -a/--all --apparent-size -B/--block-size= -b/--bytes -c/--total "
       "-D/--dereference-args -d/--max-depth= --files0-from= -H -h/--human-readable --inodes "
       "-k -L/--dereference -l/--count-links -m -P/--no-dereference -S/--separate-dirs --si "
       "-s/--summarize -t/--threshold= --time[=] --time-style= -X/--exclude-from= --exclude= "
       "-x/--one-file-system " + _HELP),
    _p("df", "-a/--all -B/--block-size= -h/--human-readable -H/--si -i/--inodes -k -l/--local "
       "--no-sync --output[=] -P/--portability --sync --total -t/--type= -T/--print-type "
       "-x/--exclude-type= -v " + _HELP),
    _p("md5sum", _SUMS),
    _p("sha1sum", _SUMS),
    _p("sha224sum", _SUMS),
    _p("sha256sum", _SUMS),
    _p("sha384sum", _SUMS),
    _p("sha512sum", _SUMS),
    _p("b2sum", "-l/--length= " + _SUMS),
    _p("cksum", "-a/--algorithm= -c/--check -l/--length= --tag --untagged -z/--zero "
       "--ignore-missing --quiet --status --strict -w/--warn --debug " + _HELP),
    _p("od", "-A/--address-radix= --endian= -j/--skip-bytes= -N/--read-bytes= "
       "-S/--strings[=] -t/--format= -v/--output-duplicates -w/--width[=] --traditional "
       "-a -b -c -d -D -e -f -F -H -i -I -l -L -o -O -s -x -X " + _HELP),
    _p("seq", "-f/--format= -s/--separator= -w/--equal-width " + _HELP),
    _p("numfmt", "--debug -d/--delimiter= --field= --format= --from= --from-unit= --grouping "
       "--header[=] --invalid= --padding= --round= --suffix= --to= --to-unit= "
       "-z/--zero-terminated " + _HELP),
    _p("base64", "-d/--decode -i/--ignore-garbage -w/--wrap= " + _HELP),
    _p("printenv", "-0/--null " + _HELP),
    _p("whoami", _HELP),
    _p("groups", _HELP),
    _p("arch", _HELP),
    _p("tty", "-s/--silent/--quiet " + _HELP),
    _p("nproc", "--all --ignore= " + _HELP),
    _p("id", "-a -Z/--context -g/--group -G/--groups -n/--name -r/--real -u/--user -z/--zero "
       + _HELP),
    _p("uname", "-a/--all -s/--kernel-name/--sysname -n/--nodename -r/--kernel-release/--release "
       "-v/--kernel-version -m/--machine -p/--processor -i/--hardware-platform "
       "-o/--operating-system " + _HELP),
    _p("date", "-d/--date= --debug -f/--file= -I/--iso-8601[=] --resolution "
       "-R/--rfc-email/--rfc-2822/--rfc-822 --rfc-3339= -r/--reference= !-s/--set= "
       "-u/--utc/--universal/--uct " + _HELP, check="date", plain=True),
    _p("sleep", _HELP),
    _p("cmp", "-b/--print-bytes/--print-chars -i/--ignore-initial= -l/--verbose -n/--bytes= "
       "-s/--quiet/--silent --help -v/--version"),
    _p("diff", "--normal -q/--brief -s/--report-identical-files -c -C= --context[=] -u -U= "
       "--unified[=] -e/--ed -n/--rcs -y/--side-by-side -W/--width= --left-column "
       "-f/--forward-ed --inhibit-hunk-merge !--sdiff-merge-assist "
       "--suppress-common-lines -p/--show-c-function -F/--show-function-line= --label= "
       "-t/--expand-tabs -T/--initial-tab --tabsize= --suppress-blank-empty !-l/--paginate "
       "-r/--recursive --no-dereference -N/--new-file --unidirectional-new-file "
       "--ignore-file-name-case --no-ignore-file-name-case -x/--exclude= -X/--exclude-from= "
       "-S/--starting-file= --from-file= --to-file= -i/--ignore-case "
       "-E/--ignore-tab-expansion -Z/--ignore-trailing-space -b/--ignore-space-change "
       "-w/--ignore-all-space -B/--ignore-blank-lines -I/--ignore-matching-lines= -a/--text "
       "--strip-trailing-cr -D/--ifdef= --old-group-format= --new-group-format= "
       "--changed-group-format= --unchanged-group-format= --line-format= "
       "--old-line-format= --new-line-format= --unchanged-line-format= -d/--minimal "
       "--horizon-lines= --speed-large-files --color[=] --palette= --binary --help -v/--version",
       numbers=True),
    _p("grep", "-E/--extended-regexp -F/--fixed-strings/--fixed-regexp -G/--basic-regexp "
       "-P/--perl-regexp "
       "-e/--regexp= -f/--file= -i/-y/--ignore-case --no-ignore-case -w/--word-regexp "
       "-x/--line-regexp -z/--null-data -s/--no-messages -v/--invert-match -V/--version "
       "--help -m/--max-count= -b/--byte-offset -n/--line-number --line-buffered "
       "-H/--with-filename -h/--no-filename --label= -o/--only-matching -q/--quiet/--silent "
       "--binary-files= -a/--text -I -d/--directories= -D/--devices= -r/--recursive "
       "-R/--dereference-recursive --include= --exclude= --exclude-from= --exclude-dir= "
       "-L/--files-without-match -l/--files-with-matches -c/--count -T/--initial-tab "
       "-Z/--null -B/--before-context= -A/--after-context= -C/--context= "
       "--group-separator= --no-group-separator --color/--colour[=] -U/--binary "
       "-u/--unix-byte-offsets",
       numbers=True),
    _p("sed", "-n/--quiet/--silent --debug -e/--expression= !-f/--file= --follow-symlinks "
       "!-i/--in-place[=] -l/--line-length= --posix -E/-r/--regexp-extended -s/--separate "
       "--sandbox -u/--unbuffered -z/--null-data/--zero-terminated !-b/--binary " + _HELP,
       check="sed", plain=True),
    _p("file", "--help -v/--version -m/--magic-file= !-z/--uncompress "
       "!-Z/--uncompress-noreport -b/--brief -c/--checking-printout -e/--exclude= "
       "--exclude-quiet= -f/--files-from= -F/--separator= -i/--mime --apple --extension "
       "--mime-type --mime-encoding -k/--keep-going -l/--list -L/--dereference "
       "-h/--no-dereference -n/--no-buffer -N/--no-pad -0/--print0 !-p/--preserve-date "
       "-P/--parameter= -r/--raw -s/--special-files !-S/--no-sandbox !-C/--compile "
       "-d/--debug"),
    _p("column", "-t/--table -n/--table-name= -O/--table-order= -N/--table-columns= "
       "-l/--table-columns-limit= -E/--table-noextreme= -d/--table-noheadings "
       "-e/--table-header-repeat -H/--table-hide= -R/--table-right= -T/--table-truncate= "
       "-W/--table-wrap= -L/--keep-empty-lines/--table-empty-lines -J/--json -r/--tree= "
       "-i/--tree-id= "
       "-p/--tree-parent= -c/--output-width/--columns= -o/--output-separator= -s/--separator= "
       "-x/--fillrows -h/--help -V/--version"),
    _p("rev", "-h/--help -V/--version"),
)  # fmt: skip

_RG = _p(
    "rg",
    "-A/--after-context= --auto-hybrid-regex -B/--before-context= --binary --block-buffered "
    "-b/--byte-offset -s/--case-sensitive --color= --colors= --column -C/--context= "
    "--context-separator= --no-context-separator -c/--count --count-matches --crlf --debug "
    "--dfa-size-limit= -E/--encoding= --engine= --field-context-separator= "
    "--field-match-separator= -f/--file= --files -l/--files-with-matches "
    "--files-without-match -F/--fixed-strings -L/--follow !--generate= -g/--glob= "
    "--glob-case-insensitive -h/--help --heading --no-heading !--hostname-bin= "
    "--hyperlink-format= --iglob= -i/--ignore-case --ignore-file= "
    "--ignore-file-case-insensitive --include-zero -v/--invert-match --json --line-buffered "
    "-n/--line-number -x/--line-regexp -M/--max-columns= --max-columns-preview "
    "-m/--max-count= -d/--max-depth= --max-filesize= --mmap --no-mmap -U/--multiline "
    "--multiline-dotall --no-config -I/--no-filename --no-ignore --no-ignore-dot "
    "--no-ignore-exclude --no-ignore-files --no-ignore-global --no-ignore-messages "
    "--no-ignore-parent --no-ignore-vcs -N/--no-line-number --no-messages "
    "--no-pcre2-unicode --no-require-git --no-unicode -0/--null --null-data "
    "--one-file-system -o/--only-matching --passthru --path-separator= -P/--pcre2 "
    "--pcre2-version !--pre= !--pre-glob= -p/--pretty -q/--quiet --regex-size-limit= "
    "-e/--regexp= -r/--replace= !-z/--search-zip -S/--smart-case --sort= --sortr= "
    "--sort-files --stats --stop-on-nonmatch -a/--text -j/--threads= --trace --trim "
    "-t/--type= --type-add= --type-clear= --type-list -T/--type-not= -u/--unrestricted "
    "-V/--version --vimgrep -H/--with-filename -w/--word-regexp",
    parser=Parser.EXACT,
)
"""ripgrep 14: `--pre` and `--hostname-bin` run programs, `-z` runs decompressors, `--generate`
writes nothing but is not reading either. ripgrep takes no abbreviations."""

_FIND = Program(name="find", check="find", plain=True, parser=Parser.NONE)
"""find reads an expression, not options: `safe.py` checks it against `FIND_PRIMARIES`."""

FIND_GLOBAL = frozenset({"-H", "-L", "-P"})
_FIND_FLAGS = (
    "-a -and -o -or -not ! ( ) , -depth -d -follow -mount -xdev -noleaf -daystart -empty "
    "-ignore_readdir_race -noignore_readdir_race -executable -readable -writable -nouser "
    "-nogroup -true -false -print -print0 -prune -quit -ls"
)
_FIND_TESTS = (
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname "
    "-type -xtype -size -mtime -mmin -atime -amin -ctime -cmin -used -newer -anewer "
    "-cnewer -user -group -uid -gid -perm -links -inum -samefile -maxdepth -mindepth "
    "-regextype -fstype -printf -context -newermm -newerma -newermc -newermt -neweram "
    "-neweraa -newerac -newerat -newercm -newerca -newercc -newerct -newerBt"
)
FIND_PRIMARIES: Mapping[str, int] = {
    **dict.fromkeys(_FIND_FLAGS.split(" "), 0),
    **dict.fromkeys(_FIND_TESTS.split(" "), 1),
}
"""find's primaries with how many words each takes. Not listed, so not known-safe: `-exec`,
`-execdir`, `-ok`, `-okdir` (run programs), `-delete`, `-fls`, `-fprint`, `-fprint0`,
`-fprintf` (delete or write files), `-files0-from`, `-D`, `-O`."""

_BUILTINS: tuple[Program, ...] = (
    _p("echo", parser=Parser.ECHO, expansions=True),
    _p("printf", "!-v=", parser=Parser.BUILTIN, plain=True),
    _p("pwd", "-L -P", parser=Parser.BUILTIN),
    _p("cd", "-L -P -e -@", parser=Parser.BUILTIN, max_operands=1),
    _p("type", "-a -f -t -p -P", parser=Parser.BUILTIN),
    _p("command", "-v -V !-p", parser=Parser.BUILTIN, check="command"),
    _p("true", parser=Parser.NONE),
    _p("false", parser=Parser.NONE),
    _p("test", parser=Parser.NONE, check="test", plain=True),
    _p("[", parser=Parser.NONE, check="test", plain=True),
    _p("expr", parser=Parser.NONE, plain=True),
    _p("which", "-a -s", parser=Parser.BUILTIN),
    _p("env", "!-i/--ignore-environment !-0/--null !-u/--unset= !-C/--chdir= "
       "!-S/--split-string= !--block-signal[=] !--default-signal[=] !--ignore-signal[=] "
       "!--list-signal-handling !-v/--debug " + _HELP, max_operands=0),
    _p("locale", "-a/--all-locales -m/--charmaps -c/--category-name -k/--keyword-name "
       "-v/--verbose -?/--help --usage -V/--version --program-name= --HANG[=]"),
)  # fmt: skip
"""bash builtins and trivial programs. `printf -v NAME` assigns any variable (PATH, or an array
element whose subscript runs code); `test -v`/`-R` evaluate a subscript (the `test` check);
`command` only as `command -v`/`-V` (a lookup; `command NAME` runs NAME); `env` only bare
(with arguments it is a wrapper)."""


# --- git --------------------------------------------------------------------------------------

GIT_GLOBAL = opts(
    "-P/--no-pager --no-optional-locks --literal-pathspecs --glob-pathspecs --noglob-pathspecs "
    "--icase-pathspecs --no-replace-objects --version !-C= !-c= !--config-env= !--git-dir= "
    "!--work-tree= !--namespace= !--exec-path[=] !--bare !-p/--paginate !--help "
    "!--super-prefix= !--list-cmds= !--html-path !--man-path !--info-path"
)
"""git's options before the sub-command (read exactly, one a word). Refused: anything that
picks another repository or config (`-C`, `-c`, `--git-dir`, `--work-tree`, `--bare`...),
runs a program (`--exec-path`, `-p` pager, `--help` opens man) or is not plainly reading."""

_DIFF = (
    "-p/-u/--patch -s/--no-patch -U/--unified= --raw --patch-with-raw --patch-with-stat "
    "--stat[=] --stat-width= --stat-name-width= --stat-count= --stat-graph-width= --numstat "
    "--shortstat --dirstat[=] --cumulative --compact-summary --summary --name-only "
    "--name-status --submodule[=] --color[=] --no-color --color-moved[=] --no-color-moved "
    "--word-diff[=] --word-diff-regex= --color-words[=] --no-renames --check --full-index "
    "--binary --abbrev[=] --no-abbrev -B/--break-rewrites[=] -M/--find-renames[=] "
    "-C/--find-copies[=] --find-copies-harder -D/--irreversible-delete -l= -S= -G= "
    "--pickaxe-all --pickaxe-regex --find-object= -O= -R --relative[=] --no-relative "
    "-a/--text --ignore-cr-at-eol --ignore-space-at-eol -b/--ignore-space-change "
    "-w/--ignore-all-space --ignore-blank-lines -I/--ignore-matching-lines= "
    "--inter-hunk-context= -W/--function-context --exit-code --quiet !--ext-diff "
    "--no-ext-diff !--textconv --no-textconv --ignore-submodules[=] --src-prefix= "
    "--dst-prefix= --no-prefix --default-prefix --line-prefix= --minimal --patience "
    "--histogram --diff-algorithm= --anchored= --indent-heuristic --no-indent-heuristic -z "
    "--diff-filter= --output-indicator-new= --output-indicator-old= "
    "--output-indicator-context= !--output= -1 -2 -3 --base --ours --theirs -0"
)
"""Diff options shared by diff, log, show, stash show. `--output` writes a file; `--ext-diff`
and `--textconv` start programs named in config (also refused by the shell's config check)."""

_LOG = (
    "-n/--max-count= --skip= --since= --after= --until= --before= --author= --committer= "
    "--grep= --all-match --invert-grep -i/--regexp-ignore-case -E/--extended-regexp "
    "-F/--fixed-strings -P/--perl-regexp --merges --no-merges --min-parents= --max-parents= "
    "--first-parent --all --branches[=] --tags[=] --remotes[=] --exclude= --oneline "
    "--pretty[=] --format= --abbrev-commit --no-abbrev-commit --decorate[=] --no-decorate "
    "--graph --reverse --date= --relative-date --follow --topo-order --date-order "
    "--author-date-order --left-right --cherry-pick --cherry-mark --boundary --source "
    "--full-history --simplify-by-decoration --ancestry-path --no-walk[=] --do-walk "
    "--mailmap --use-mailmap --no-mailmap --notes[=] --no-notes --encoding= "
    "--expand-tabs[=] --no-expand-tabs --parents --children -c --cc -m --diff-merges= "
    "--no-diff-merges -g/--walk-reflogs -L= -t -r --full-diff --log-size "
    "!--show-signature !--remerge-diff"
)
"""Log options. `--show-signature` runs gpg; `--remerge-diff` writes objects."""


def _git(name: str, spec: str, **kw: object) -> Program:
    """A git sub-command; `-h` (usage) unless the sub-command gives `-h` a meaning of its own."""
    if "-h" not in spec.replace("/", " ").split():
        spec += " -h"
    return Program(name=name, options=opts(spec), parser=Parser.EXACT, **kw)  # type: ignore[arg-type]


GIT_SUBCOMMANDS: Mapping[str, Program] = {
    p.name: p
    for p in (
        _git("status", "-s/--short -b/--branch --show-stash --porcelain[=] --long -v/--verbose "
             "-u/--untracked-files[=] --ignore-submodules[=] --ignored[=] -z --column[=] "
             "--no-column --ahead-behind --no-ahead-behind --renames --no-renames "
             "--find-renames[=]"),
        _git("diff", _DIFF + " --cached --staged --merge-base !--no-index"),
        _git("log", _DIFF + " " + _LOG, numbers=True),
        _git("show", _DIFF + " " + _LOG, numbers=True),
        _git("shortlog", _LOG + " -s/--summary -e/--email -w[=] --group=",
             numbers=True),
        _git("branch", "-a/--all -r/--remotes -v/--verbose -l/--list --show-current "
             "--color[=] --no-color -i/--ignore-case --no-abbrev --abbrev= --column[=] "
             "--no-column --omit-empty --contains= --no-contains= --merged= --no-merged= "
             "--points-at= --sort= --format= -q/--quiet !-d/--delete !-D !-m/--move !-M "
             "!-c/--copy !-C !-f/--force !-u/--set-upstream-to= !--unset-upstream "
             "!--edit-description !-t/--track[=] !--no-track !--create-reflog "
             "!--recurse-submodules", check="git-branch", plain=True),
        _git("rev-parse", "--show-toplevel --abbrev-ref[=] --short[=] --verify -q/--quiet "
             "--git-dir --git-common-dir --absolute-git-dir --is-inside-work-tree "
             "--is-inside-git-dir --is-bare-repository --is-shallow-repository --show-prefix "
             "--show-cdup --symbolic --symbolic-full-name --all --branches[=] --tags[=] "
             "--remotes[=] --show-object-format[=] --show-superproject-working-tree "
             "--local-env-vars --default= --revs-only --no-revs --flags --no-flags"),
        _git("ls-files", "-c/--cached -d/--deleted -m/--modified -o/--others -i/--ignored "
             "-s/--stage -u/--unmerged -k/--killed --directory --no-empty-directory --eol -z "
             "-x/--exclude= -X/--exclude-from= --exclude-per-directory= --exclude-standard "
             "--error-unmatch --full-name --abbrev[=] --debug --deduplicate -t -v -f "
             "--format= --sparse !--recurse-submodules --with-tree="),
        _git("ls-tree", "-d -r -t -l/--long -z --name-only/--name-status --object-only "
             "--full-name --full-tree --abbrev[=] --format="),
        _git("blame", "-b --root --show-stats -L= -l -t -S= --reverse --first-parent "
             "-p/--porcelain --line-porcelain --incremental --encoding= --contents= --date= "
             "--progress --no-progress -M[=] -C[=] --ignore-rev= --ignore-revs-file= "
             "--color-lines --color-by-age -c -f/--show-name -n/--show-number -s "
             "-e/--show-email -w --abbrev[=] --score-debug"),
        _git("describe", "--all --tags --contains --abbrev= --candidates= --exact-match "
             "--debug --long --match= --exclude= --always --first-parent --dirty[=] "
             "--broken[=]"),
        _git("merge-base", "-a/--all --octopus --independent --is-ancestor --fork-point"),
        _git("show-ref", "--head --heads --tags -d/--dereference -s/--hash[=] --verify "
             "--abbrev[=] -q/--quiet"),
        _git("for-each-ref", "--count= --shell --perl --python --tcl --sort= --format= "
             "--color[=] --points-at= --merged[=] --no-merged[=] --contains[=] "
             "--no-contains[=] --ignore-case"),
        _git("count-objects", "-v/--verbose -H/--human-readable"),
        _git("grep", "--cached --untracked --no-exclude-standard --exclude-standard "
             "-a/--text --no-textconv -i/--ignore-case -I --max-depth= -r/--recursive "
             "--no-recursive -w/--word-regexp -v/--invert-match -h -H --full-name "
             "-E/--extended-regexp -G/--basic-regexp -F/--fixed-strings -P/--perl-regexp "
             "-n/--line-number --column -l/--files-with-matches/--name-only "
             "-L/--files-without-match -z/--null -o/--only-matching -c/--count --color[=] "
             "--no-color --break --heading -p/--show-function -C/--context= "
             "-A/--after-context= -B/--before-context= -W/--function-context "
             "-m/--max-count= --threads= -f= -e= --and --or --not -q/--quiet --all-match "
             "!-O/--open-files-in-pager[=] !--textconv !--recurse-submodules !--no-index "
             "!--ext-grep", numbers=True),
        _git("cat-file", "-t -s -e -p --batch[=] --batch-check[=] --batch-all-objects "
             "--buffer --follow-symlinks --unordered --allow-unknown-type -Z --use-mailmap "
             "--no-use-mailmap --path= !--textconv !--filters !--batch-command[=]"),
        _git("remote", "-v/--verbose", max_operands=0),
        Program(name="stash", parser=Parser.EXACT, subcommands={
            "list": _git("list", _DIFF + " " + _LOG, numbers=True),
            "show": _git("show", _DIFF + " --include-untracked --only-untracked -u"),
        }),
    )
}  # fmt: skip
"""Read-only sub-commands. `branch` lists only (a bare name creates one: the `git-branch`
check); `stash` only `list` and `show`; `remote` only lists (its sub-commands touch the
network); `--recurse-submodules` and `--no-index` read other repositories or files."""

GIT = Program(name="git", options=GIT_GLOBAL, parser=Parser.EXACT, subcommands=GIT_SUBCOMMANDS)

PROGRAMS: Mapping[str, Program] = {p.name: p for p in (*_GNU, _RG, _FIND, *_BUILTINS, GIT)}
"""Every program a known-safe command may run, by the name it is called by."""
