"""The shell grammar's corners where a static reading could disagree with bash: here-documents,
line continuations, `$'...'`, reserved words, compound commands, aliases, operators. Each is
either read the way bash reads it or marked unsafe (no allow rule, no known-safe check, ever
approves an unsafe command; deny rules still see every command found). The differential test
(`test_grammar_differential.py`) checks the same readings against bash itself."""

from __future__ import annotations

import pytest

from toolnexus.shell.grammar import analyze


def programs(command: str) -> list[list[str]]:
    return [[w.text for w in c.words] for c in analyze(command).commands if c.words]


def safe(command: str) -> bool:
    return analyze(command).safe_syntax


# --- here-documents -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "cat <<EOF\nEO\\\nF\ntouch x\nEOF",
        "cat <<EOF\n\\\nEOF\ntouch x\nEOF",  # a lone backslash joins the next line
        "cat <<EOF\nE\\\nO\\\nF\ntouch x\nEOF",
        "cat <<-EOF\n\tEO\\\nF\ntouch x\nEOF",
        "cat <<X1\nX\\\n1\ntouch x\nX1",
    ],
)
def test_a_delimiter_joined_by_backslash_newline_ends_the_body(command: str) -> None:
    assert ["touch", "x"] in programs(command)


@pytest.mark.parametrize(
    "command",
    [
        "cat <<EOF\nEO\\\\\nF\ntouch x\nEOF",  # an escaped backslash does not join
        "cat <<'EOF'\nEO\\\nF\ntouch x\nEOF",  # a quoted delimiter: no joining at all
        "cat <<\\EOF\nEO\\\nF\ntouch x\nEOF",
    ],
)
def test_bodies_that_bash_keeps_as_data(command: str) -> None:
    assert ["touch", "x"] not in programs(command)
    assert safe(command)


def test_a_joined_line_can_make_a_substitution_in_the_body() -> None:
    command = "cat <<EOF\n$\\\n(touch q)\nEOF"
    assert not safe(command)
    assert ["touch", "q"] in programs(command)


def test_here_document_and_here_string_bodies_are_kept_on_the_redirection() -> None:
    (cat, _ls) = analyze("cat <<EOF\na\\\nb\n  c\nEOF\nls").commands
    assert [(r.op, r.target, r.body) for r in cat.redirects] == [("<<", "EOF", "ab\n  c")]
    (dash,) = analyze("cat <<-'EOF'\n\tx \\\n\ty\n\tEOF").commands
    assert dash.redirects[0].body == "x \\\ny"
    (here,) = analyze("bash <<< 'git push'").commands
    assert here.redirects[0].body == "git push"
    (expanding,) = analyze("cat > $OUT").commands
    assert expanding.redirects[0].expands


# --- line continuations inside operators ----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["cat <\\\n<EOF\nls\nEOF", "ls &\\\n& pwd", "ls |\\\n| pwd", "ls >\\\n> out", "echo $\\\n(id)"],
)
def test_an_operator_split_by_a_line_continuation_is_unsafe(command: str) -> None:
    assert not safe(command)


# --- $'...' ---------------------------------------------------------------------------------


def test_ansi_c_strings_decode_like_bash() -> None:
    assert programs("git $'pu\\0sh'y $'\\q' $'a\\c@b' $'\\x67it'") == [
        ["git", "puy", "\\q", "a", "git"]
    ]
    assert programs("x $'\\xe9'") == [["x", "\udce9"]]  # a raw byte, as surrogateescape spells it
    assert safe("x $'\\u0041'")
    assert not safe("x $'\\u00e9'")  # spelt by the locale: `é`, or `\u00E9` under C


# --- reserved words, compound commands, aliases ---------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("{ git push; }", [["git", "push"]]),
        (
            "if ls; then git push; elif cat; then rm x; else touch y; fi",
            [["ls"], ["git", "push"], ["cat"], ["rm", "x"], ["touch", "y"]],
        ),
        ("while ls; do git push; done", [["ls"], ["git", "push"]]),
        ("! git push", [["git", "push"]]),
        ("time -p git push", [["git", "push"]]),
        ("time git push", [["git", "push"]]),
        ("ls && { cat; }", [["ls"], ["cat"]]),
        ("'{' x; \\if y", [["{", "x"], ["if", "y"]]),  # quoted: plain command names
        ("echo { if then }", [["echo", "{", "if", "then", "}"]]),
        ("foo {fd}>/dev/null x", [["foo", "x"]]),
    ],
)
def test_reserved_words_join_simple_commands(command: str, expected: list[list[str]]) -> None:
    assert programs(command) == expected
    assert safe(command)


@pytest.mark.parametrize(
    "command",
    [
        "for x in a b; do git push; done",
        "case $x in a) git push;; esac",
        "select x in a; do ls; done",
        "function f { git push; }",
        "coproc git push",
        "[[ -n x && -f y ]]",
        "alias ls='rm -rf /'\nls",
    ],
)
def test_constructs_this_reader_does_not_model_are_unsafe(command: str) -> None:
    assert not safe(command)
    assert programs(command)  # deny rules still see the commands inside


@pytest.mark.parametrize(
    "command", ["ls &&", "&& ls", "ls ;; pwd", "ls | | wc", "ls\n; pwd", "; ls"]
)
def test_syntax_errors_are_unsafe(command: str) -> None:
    assert not safe(command)


@pytest.mark.parametrize("command", ["ls &&\n pwd", "ls |\n\nwc", "ls;", "ls &", "{ ls; };"])
def test_lists_that_bash_accepts(command: str) -> None:
    assert safe(command)


def test_here_documents_inside_a_substitution_are_read_there() -> None:
    # bash reads the inner body at the newline inside `$(...)` and the outer one after the
    # line, so `then git push` runs: it must not vanish into the outer body
    command = "cat <<EOF && if true $(cat <<E\nx\nE\n); then git push; fi\nouter\nEOF"
    assert ["git", "push"] in programs(command)
    (outer, inner, *_) = analyze(command).commands
    assert (outer.redirects[0].body, inner.redirects[0].body) == ("outer", "x")


@pytest.mark.parametrize(
    "command",
    ["{ git #x; }", "if git\n0; fi", "}", "then ls", "do ls", "ls; fi", "while ls; done", "{ ls"],
)
def test_groups_that_do_not_close_are_unsafe(command: str) -> None:
    assert not safe(command)
