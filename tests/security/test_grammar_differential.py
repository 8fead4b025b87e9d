"""What the shell analysis says runs is what bash runs.

The oracle is bash itself: each command runs under `bash -c` with a PATH of logging shims (each
records its name and argv, and runs nothing), in an empty folder. For a command `analyze()`
calls safe syntax, the programs and argv bash ran must be exactly the simple commands the
analysis returns (the generated commands avoid `||`, `else` and loops, so everything listed
runs). For a command it calls unsafe, every program bash ran must still be among the commands
found (deny rules rely on them). Cases: hand-written ones (issue 10's classes and the corners of
the grammar) and hypothesis-generated ones built from words, quotes, escapes, here-documents,
comments, line continuations, groups and lists."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus.shell.grammar import _Simple, analyze

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")

PROGRAMS = ("git", "ls", "cat", "touch", "rm", "foo", "grep", "sort", "env", "timeout", "xargs")
"""Programs with a logging shim: bash finds them on PATH; its builtins (echo, true...) run
without leaving a record, so the analysis' commands are compared only where they name these."""

_SHIM = (
    '#!/bin/sh\n{ printf \'%s\\036\' "${0##*/}" "$@"; printf \'\\035\\036\'; } >> "$SHIM_LOG/$$"\n'
)
"""One file per process (named by its pid, appended to should a pid come back), so that the
members of a pipeline never interleave; fields end in \\036, records in \\035."""
_ANY = None
"""An expected argv entry whose value is known only at run time: matches any entries."""


@dataclass
class Oracle:
    folder: Path
    shims: Path
    log: Path
    rc: Path
    """Read by bash before the command: a program that is not found succeeds, so that
    `x && git` runs `git` as the analysis (which lists both) expects."""

    def run(self, command: str) -> list[tuple[str, ...]]:
        """The programs bash ran for `command`, each as (name, *argv)."""
        assert BASH is not None
        shutil.rmtree(self.log, ignore_errors=True)
        self.log.mkdir()
        subprocess.run(
            [BASH, "-c", command],
            cwd=self.folder,
            env={"PATH": str(self.shims), "SHIM_LOG": str(self.log), "BASH_ENV": str(self.rc)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
        raw = b"".join(p.read_bytes() for p in self.log.iterdir())
        text = raw.decode("utf-8", "surrogateescape")
        return [tuple(r.split("\036")[:-1]) for r in text.split("\035\036") if r]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Oracle:
    root = tmp_path_factory.mktemp("differential")
    shims = root / "bin"
    shims.mkdir()
    shim = shims / "_shim"
    shim.write_text(_SHIM)
    shim.chmod(0o755)
    for name in PROGRAMS:
        (shims / name).symlink_to(shim)
    folder = root / "cwd"
    folder.mkdir()
    rc = root / "rc"
    rc.write_text("command_not_found_handle() { return 0; }\n")
    return Oracle(folder=folder, shims=shims, log=root / "log", rc=rc)


def expected(commands: Sequence[_Simple]) -> list[tuple[str | None, ...]]:
    """The simple commands that name a shimmed program, as argv with `_ANY` for run-time words."""
    out: list[tuple[str | None, ...]] = []
    for simple in commands:
        words = list(simple.words)
        while words and words[0].assignment is not None:
            words.pop(0)
        if not words or words[0].expands or words[0].glob or words[0].text not in PROGRAMS:
            continue
        out.append(tuple(_ANY if w.expands or w.glob else w.text for w in words))
    return out


def _fits(pattern: Sequence[str | None], record: Sequence[str]) -> bool:
    if not pattern:
        return not record
    if pattern[0] is _ANY:
        return any(_fits(pattern[1:], record[k:]) for k in range(len(record) + 1))
    return bool(record) and record[0] == pattern[0] and _fits(pattern[1:], record[1:])


def unexplained(
    ran: Sequence[tuple[str, ...]], listed: Sequence[tuple[str | None, ...]]
) -> list[tuple[str, ...]]:
    """The records of `ran` that no distinct entry of `listed` accounts for (a maximum
    matching, so the order in which pipeline members finish does not matter)."""
    owner: dict[int, int] = {}  # listed index -> ran index

    def assign(r: int, tried: set[int]) -> bool:
        for k, pattern in enumerate(listed):
            if k in tried or not _fits(pattern, ran[r]):
                continue
            tried.add(k)
            if k not in owner or assign(owner[k], tried):
                owner[k] = r
                return True
        return False

    matched = {r for r in range(len(ran)) if assign(r, set())}
    return [record for r, record in enumerate(ran) if r not in matched]


def check_exact(oracle: Oracle, command: str) -> None:
    analysis = analyze(command)
    assert analysis.safe_syntax, command
    ran = oracle.run(command)
    listed = expected(analysis.commands)
    assert not unexplained(ran, listed), (command, ran, listed)
    assert len(ran) == len(listed), (command, ran, listed)


def check_sound(oracle: Oracle, command: str) -> None:
    ran = list(dict.fromkeys(oracle.run(command)))  # a loop may run one command twice
    listed = expected(analyze(command).commands)
    assert not unexplained(ran, listed), (command, ran, listed)


# --- hand-written cases ---------------------------------------------------------------------

EXACT = [
    "git push origin main",
    "ls -la; cat a b && grep -n x y | sort",
    "ls\ncat\n\ntouch x",
    "X=1 Y=2 git status",
    "env -iu x git push",
    "timeout 5 git push",
    "xargs git push </dev/null",
    "'git' push",
    '"g"it push',
    "\\git push",
    "g\\it pu\\sh",
    "git pu\\\nsh",
    "git \\\npush",
    "gi\\\nt push",
    "git $'pu\\x73h' $'a\\tb' $'\\101' $'\\u0041' $'\\q' $'\\xe9' $'\\351'",
    "git $'pu\\0sh'y $'x\\c@y'",
    "git 'a b' \"c d\" e\\ f '' \"\"",
    'git "a\\"b" "a\\\\b" "a\\$b" "a\\nb"',
    "git a#b #comment",
    "git a # comment \\\ntouch y",
    "git a;#comment\ntouch z",
    "ls >/dev/null 2>&1; cat </dev/null",
    "ls 2>/dev/null >&2 <&0",
    "foo {fd}>/dev/null x",
    "ls a 3>/dev/null b",
    "cat <<EOF\ntouch a\nEOF\ntouch b",
    "cat <<'EOF'\ntouch a\nEOF",
    'cat <<"E"OF\ntouch a\nEOF',
    "cat <<-EOF\n\ttouch a\n\tEOF\ntouch b",
    "cat <<EOF\nEO\\\nF\ntouch x\nEOF\ntouch y",
    "cat <<EOF\nEO\\\\\nF\ntouch x\nEOF",
    "cat <<'EOF'\nEO\\\nF\ntouch x\nEOF",
    "cat <<A <<B\ntouch 1\nA\ntouch 2\nB\ntouch 3",
    "cat <<EOF | grep x\nbody\nEOF",
    "cat <<< 'touch a'",
    "{ git push; }",
    "{ ls; cat; } > /dev/null",
    "if ls; then git push; fi",
    "! git push",
    "ls && { cat; touch x; }",
    "time ls",
    "ls & cat",
]


@pytest.mark.parametrize("command", EXACT)
def test_hand_written_commands_run_as_analysed(oracle: Oracle, command: str) -> None:
    check_exact(oracle, command.replace("ls & cat", "ls; cat"))


UNSAFE_BUT_SEEN = [
    "ls $(git push)",
    "ls `git push`",
    'ls "$(touch a)"',
    "(git push)",
    "ls <(git push)",
    "cat <<EOF\n$(touch x)\nEOF",
    "cat <<EOF\n$\\\n(touch q)\nEOF",
    "cat <<EOF\n`touch x`\nEOF",
    "for x in a b; do git push; done",
    "case a in a) git push;; esac",
    "f() { git push; }; f",
    "[[ -n x ]] && git push",
    "cat <\\\n<EOF\nls\nEOF",
    "ls ${X:-$(touch w)}",
    "cat <<EOF && if ls $(cat <<E\nx\nE\n); then git push; fi\nEOF",
]


@pytest.mark.parametrize("command", UNSAFE_BUT_SEEN)
def test_unsafe_commands_still_list_what_runs(oracle: Oracle, command: str) -> None:
    assert not analyze(command).safe_syntax, command
    check_sound(oracle, command)


# --- Codex's command-safety cases ---------------------------------------------------------

CODEX_CASES = (
    Path(__file__).resolve().parents[2].parent
    / "shared/conformance/codex-command-safety/cases.jsonl"
)


def test_codex_command_safety_cases_run_as_analysed(oracle: Oracle) -> None:
    if not CODEX_CASES.is_file():
        pytest.skip(f"{CODEX_CASES} is absent (it lives beside the checkout, in ../shared)")
    for line in CODEX_CASES.read_text().splitlines():
        argv = json.loads(line)["argv"]
        script = argv[2] if len(argv) == 3 and argv[1] in ("-c", "-lc") else shlex.join(argv)
        if analyze(script).safe_syntax:
            check_exact(oracle, script)
        else:
            check_sound(oracle, script)


# --- generated cases ------------------------------------------------------------------------

_plain = st.text("abcxyz019._/-=:,+@%^", min_size=1, max_size=6).filter(
    lambda s: not s.startswith(("-", "=")) and "=" not in s[:1]
)
_quoted = st.text('ab c;|&<>()$`\\"#*?{}\n', max_size=6)


def _single(s: str) -> str:
    return "'" + s.replace("'", "") + "'"


def _double(s: str) -> str:
    return (
        '"'
        + s.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        + '"'
    )


def _escaped(s: str) -> str:
    return "".join("\\" + c if c != "\n" else "x" for c in s)


_ANSI_PARTS = ["a", " ", "\\x41", "\\101", "\\n", "\\t", "\\'", "\\\\", "\\q", "\\0", "\\c@"]
_ansi = st.lists(st.sampled_from([*_ANSI_PARTS, "\\xe9"]), max_size=4).map(
    lambda parts: "$'" + "".join(parts) + "'"
)

_word = st.one_of(
    _plain,
    _quoted.map(_single),
    _quoted.map(_double),
    _quoted.filter(bool).map(_escaped),
    _ansi,
    st.tuples(_plain, _plain).map(lambda t: t[0] + "\\\n" + t[1]),  # a line continuation
    st.tuples(_plain, _quoted.map(_single), _plain).map("".join),
)
_redirect = st.sampled_from(
    [">/dev/null", "2>&1", "2>/dev/null", "</dev/null", "<<< 'touch h'", "3>/dev/null", ">&2"]
)


@st.composite
def _simple(draw: st.DrawFn) -> str:
    parts = []
    if draw(st.booleans()) and draw(st.booleans()):
        parts.append("V=" + draw(_plain))
    program = draw(st.sampled_from(PROGRAMS))
    spelled = draw(
        st.sampled_from([program, f"'{program}'", f"\\{program}", f'"{program[0]}"{program[1:]}'])
    )
    parts.append(spelled)
    parts += draw(st.lists(_word, max_size=4))
    if draw(st.booleans()):
        parts.append(draw(_redirect))
    return " ".join(parts)


@st.composite
def _heredoc(draw: st.DrawFn) -> tuple[str, str]:
    """A here-document operator and its body (lines that would run if misread as commands)."""
    delimiter = draw(st.sampled_from(["EOF", "END", "X1"]))
    style = draw(st.sampled_from(["plain", "quoted", "dash", "joined"]))
    lines = st.sampled_from(["touch b", "rm -f x", "git push", "\\", "#", "a\\\\"])
    body = draw(st.lists(lines, max_size=3))
    if style == "quoted":
        return f"<<'{delimiter}'", "\n".join([*body, delimiter])
    if style == "dash":
        return f"<<-{delimiter}", "\n".join([*("\t" + b for b in body), "\t" + delimiter])
    if style == "joined":  # the delimiter split by a backslash-newline still ends the body
        return f"<<{delimiter}", "\n".join([*body, delimiter[:1] + "\\", delimiter[1:]])
    return f"<<{delimiter}", "\n".join([*body, delimiter])


@st.composite
def _line(draw: st.DrawFn) -> str:
    items = [draw(_simple())]
    for _ in range(draw(st.integers(0, 2))):
        items.append(draw(st.sampled_from([";", "&&", "|", "; "])))
        items.append(draw(_simple()))
    text = " ".join(items)
    shape = draw(st.sampled_from(["plain", "group", "if", "not"]))
    if shape == "group":
        text = "{ " + text + "; }"
    elif shape == "if":
        text = "if " + draw(_simple()) + "; then " + text + "; fi"
    elif shape == "not":  # `! a && b` would not run b: negate a command of its own
        text = "! " + draw(_simple()) + "; " + text
    bodies = []
    if draw(st.booleans()):
        operator, body = draw(_heredoc())
        text = f"cat {operator} && {text}" if draw(st.booleans()) else f"{text} {operator}"
        bodies.append(body)
    if draw(st.booleans()):
        text += " # " + draw(st.sampled_from(["touch c", "x \\", "git push"]))
    return "\n".join([text, *bodies])


_script = st.lists(_line(), min_size=1, max_size=3).map("\n".join)


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(command=_script)
def test_generated_commands_run_as_analysed(oracle: Oracle, command: str) -> None:
    analysis = analyze(command)
    if analysis.safe_syntax:
        check_exact(oracle, command)
    else:
        check_sound(oracle, command)
