"""Approval rules: the `approval:` matcher language, permission strings, shell commands."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from toolnexus.approval import (
    ApprovalRules,
    Decision,
    Verdict,
    combine_verdicts,
    compile_permissions,
    compile_rules,
    is_known_safe_command,
    split_command,
)
from toolnexus.base import Result, Tool, ToolContext
from toolnexus.errors import ConfigError

ALLOW, ASK, DENY = Decision.ALLOW, Decision.ASK, Decision.DENY


async def _noop(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result()


def make_tool(name: str = "t", meta: Mapping[str, Any] | None = None, **props: str) -> Tool:
    return Tool(
        name=name,
        handler=_noop,
        parameters={"type": "object", "properties": {k: {"type": v} for k, v in props.items()}},
        meta=dict(meta or {}),
    )


TOOL = make_tool()
SHELL = make_tool("shell", command="string", run_in_background="boolean", timeout_ms="integer")
READ = make_tool("read", path="string")
FETCH = make_tool("fetch", url="string")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def rule(decision: str, when: Mapping[str, Any], default: str = "ask") -> ApprovalRules:
    return compile_rules({"default": default, "rules": [{"decision": decision, "when": when}]})


def decide(rules: ApprovalRules, args: Mapping[str, Any], ws: Path = Path("/ws")) -> Decision:
    return rules.decide(TOOL, args, ws).decision


def matches(when: Mapping[str, Any], args: Mapping[str, Any], *, as_: str = "deny") -> bool:
    """Whether a rule of kind `as_` with this `when` matches (the default is the other way)."""
    default = "allow" if as_ != "allow" else "deny"
    verdict = rule(as_, when, default=default).decide(TOOL, args, Path("/ws"))
    return verdict.matched


# --- matchers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "args", "expected"),
    [
        ({"mode": "fast"}, {"mode": "fast"}, True),
        ({"mode": "fast"}, {"mode": "slow"}, False),
        ({"n": 1}, {"n": 1}, True),
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": 1}, {"n": True}, False),  # JSON equality: true is not 1
        ({"flag": True}, {"flag": 1}, False),
        ({"flag": True}, {"flag": True}, True),
        ({"v": None}, {"v": None}, True),
        ({"v": {"eq": [1, "a"]}}, {"v": [1, "a"]}, True),
        ({"v": {"eq": {"k": [True]}}}, {"v": {"k": [1]}}, False),
        ({"v": {"in": ["a", "b"]}}, {"v": "b"}, True),
        ({"v": {"in": ["a", "b"]}}, {"v": "c"}, False),
        ({"v": {"in": [0]}}, {"v": False}, False),
        ({"v": {"glob": "*.py"}}, {"v": "src/a.py"}, True),  # `*` spans `/` in plain globs
        ({"v": {"glob": "a?c"}}, {"v": "abc"}, True),
        ({"v": {"glob": "[!x]bc"}}, {"v": "abc"}, True),
        ({"v": {"glob": "[!a]bc"}}, {"v": "abc"}, False),
        ({"v": {"glob": "*.{py,md}"}}, {"v": "x.md"}, True),
        ({"v": {"glob": ["*.txt", "*.md"]}}, {"v": "x.md"}, True),
        ({"v": {"glob": "*.py"}}, {"v": "a.pyc"}, False),
        ({"v": {"glob": "*"}}, {"v": 3}, False),  # string matchers never match other types
        ({"v": {"regex": "rm -rf"}}, {"v": "sudo rm -rf /"}, True),  # searched, not anchored
        ({"v": {"regex": "^[a-z]+$"}}, {"v": "abc; rm"}, False),
        ({"v": {"regex": ["^a", "z$"]}}, {"v": "xyz"}, True),
        ({"v": {"prefix": "https://"}}, {"v": "https://x"}, True),
        ({"v": {"prefix": ["a", "b"]}}, {"v": "cab"}, False),
        ({"v": {"gt": 10}}, {"v": 11}, True),
        ({"v": {"gt": 10}}, {"v": 10}, False),
        ({"v": {"gte": 10}}, {"v": 10}, True),
        ({"v": {"lt": 0.5}}, {"v": 0.25}, True),
        ({"v": {"lte": 3}}, {"v": 4}, False),
        ({"v": {"gt": 0}}, {"v": True}, False),  # booleans are not numbers
        ({"v": {"gt": 0}}, {"v": "5"}, False),
        ({"v": {"gte": 1, "lte": 5}}, {"v": 3}, True),  # several matchers: all must hold
        ({"v": {"gte": 1, "lte": 5}}, {"v": 6}, False),
        ({"v": {"any": [{"lt": 0}, {"gt": 10}]}}, {"v": 11}, True),
        ({"v": {"any": [{"lt": 0}, "x"]}}, {"v": "x"}, True),
        ({"v": {"not": {"prefix": "/tmp/"}}}, {"v": "/etc/x"}, True),
        ({"v": {"not": {"prefix": "/tmp/"}}}, {"v": "/tmp/x"}, False),
        ({"a": 1, "b": 2}, {"a": 1, "b": 2}, True),  # several arguments: all must hold
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, False),
        ({"any": [{"a": 1}, {"b": 2}]}, {"b": 2}, True),
        ({"any": [{"a": 1}, {"b": 2}]}, {"a": 2, "b": 1}, False),
        ({"not": {"a": 1}}, {"a": 2}, True),
        ({"options.mode": "fast"}, {"options": {"mode": "fast"}}, True),
        ({"options.mode": "fast"}, {"options": {"mode": "slow"}}, False),
        ({"options.mode": "fast"}, {"options": "fast"}, False),
        ({"items.1": "b"}, {"items": ["a", "b"]}, True),
        ({"items.5": "b"}, {"items": ["a", "b"]}, False),
        ({"a.b": 1}, {"a.b": 1}, True),  # a literal dotted key wins
    ],
)
def test_matchers(when: dict[str, Any], args: dict[str, Any], expected: bool) -> None:
    assert matches(when, args) is expected


@pytest.mark.parametrize(
    "when",
    [
        {"v": "x"},
        {"v": {"not": {"eq": "y"}}},
        {"v": {"regex": ".*"}},
        {"v": {"exists": True}},
        {"v.w": {"glob": "*"}},
    ],
)
def test_missing_argument_never_matches(when: dict[str, Any]) -> None:
    assert matches(when, {"other": "x"}) is False
    assert matches(when, {"v": {"z": 1}} if "v.w" in when else {"other": 1}) is False


def test_exists() -> None:
    assert matches({"v": {"exists": True}}, {"v": None}) is True
    assert matches({"v": {"exists": False}}, {}) is True
    assert matches({"v": {"exists": False}}, {"v": 1}) is False
    assert matches({"v": {"exists": True, "gt": 1}}, {"v": 2}) is True
    assert matches({"v": {"exists": True, "gt": 1}}, {"v": 0}) is False
    assert matches({"v": {"exists": False, "gt": 1}}, {"v": 2}) is False


def test_rule_without_when_always_matches() -> None:
    rules = compile_rules({"default": "allow", "rules": [{"decision": "ask"}]})
    verdict = rules.decide(TOOL, {}, Path("/ws"))
    assert (verdict.decision, verdict.matched, verdict.rule) == (ASK, True, "ask always")


# --- precedence -----------------------------------------------------------------------------


def test_deny_beats_a_more_specific_allow_written_first() -> None:
    rules = compile_rules(
        {
            "default": "ask",
            "rules": [
                {"decision": "allow", "when": {"cmd": {"command": "aws s3 ls"}}},
                {"decision": "deny", "when": {"cmd": {"command": "aws *"}}},
            ],
        }
    )
    verdict = rules.decide(TOOL, {"cmd": "aws s3 ls"}, Path("/ws"))
    assert verdict.decision is DENY
    assert verdict.rule == 'deny when {"cmd": {"command": "aws *"}}'


def test_ask_beats_a_narrower_allow() -> None:
    rules = compile_rules(
        {
            "rules": [
                {"decision": "allow", "when": {"path": {"path": "src/main.py"}}},
                {"decision": "ask", "when": {"path": {"path": "src/**"}}},
            ],
        }
    )
    assert decide(rules, {"path": "src/main.py"}) is ASK


def test_first_match_of_the_strongest_kind_wins() -> None:
    rules = compile_rules(
        {
            "default": "allow",
            "rules": [
                {"decision": "ask", "when": {"n": {"gt": 0}}, "reason": "ask-1"},
                {"decision": "deny", "when": {"n": {"gt": 5}}, "reason": "deny-1"},
                {"decision": "deny", "when": {"n": {"gt": 1}}, "reason": "deny-2"},
                {"decision": "allow", "when": {"n": {"gt": 0}}, "reason": "allow-1"},
            ],
        }
    )
    ws = Path("/ws")
    assert rules.decide(TOOL, {"n": 10}, ws).reason == "deny-1"
    assert rules.decide(TOOL, {"n": 3}, ws).reason == "deny-2"
    assert rules.decide(TOOL, {"n": 1}, ws).reason == "ask-1"
    none = rules.decide(TOOL, {"n": 0}, ws)
    assert (none.decision, none.matched, none.rule) == (ALLOW, False, None)


@pytest.mark.parametrize("spec", ["allow", "ask", "deny"])
def test_string_spec_is_the_default(spec: str) -> None:
    rules = compile_rules(spec, locate=lambda field: f"tools.yaml:7 {field!r}")
    verdict = rules.decide(TOOL, {"x": 1}, Path("/ws"))
    assert verdict.decision is Decision(spec)
    assert verdict.matched is False
    assert verdict.origin == "tools.yaml:7 ''"
    assert rules.summary() == spec


def test_default_comes_from_the_caller_when_the_block_has_none() -> None:
    rules = compile_rules({"rules": []}, default="deny")
    assert decide(rules, {}) is DENY
    assert compile_rules({"rules": []}).decide(TOOL, {}, Path("/")).decision is ALLOW


def test_verdicts_carry_rule_origin_and_reason() -> None:
    lines = {"rules[0]": "tools.yaml:12", "rules[1]": "tools.yaml:14", "default": "tools.yaml:9"}
    rules = compile_rules(
        {
            "default": "ask",
            "rules": [
                {"decision": "allow", "when": {"path": {"glob": "*.md"}}},
                {"decision": "deny", "when": {"path": {"glob": "/etc/**"}}, "reason": "system"},
            ],
        },
        locate=lines.get,
    )
    denied = rules.decide(TOOL, {"path": "/etc/passwd"}, Path("/ws"))
    assert denied == Verdict(
        decision=DENY,
        rule='deny when {"path": {"glob": "/etc/**"}}',
        origin="tools.yaml:14",
        reason="system",
    )
    assert "tools.yaml:14" in denied.describe()
    allowed = rules.decide(TOOL, {"path": "README.md"}, Path("/ws"))
    assert (allowed.decision, allowed.origin, allowed.reason) == (ALLOW, "tools.yaml:12", "")
    default = rules.decide(TOOL, {"path": "x"}, Path("/ws"))
    assert (default.decision, default.origin, default.matched) == (ASK, "tools.yaml:9", False)
    assert rules.summary() == "ask, 2 rules"


def test_tool_rules_and_permissions_combine_strongest_matched() -> None:
    perms = compile_permissions(allow=["shell(git *)"], default="ask")
    rules = compile_rules(
        {
            "default": "allow",
            "rules": [{"decision": "deny", "when": {"command": {"command": "git push *"}}}],
        }
    )
    ws = Path("/ws")
    push = {"command": "git push origin main"}
    verdict = combine_verdicts([perms.decide(SHELL, push, ws), rules.decide(SHELL, push, ws)])
    assert verdict.decision is DENY
    log = {"command": "git log"}
    verdict = combine_verdicts([perms.decide(SHELL, log, ws), rules.decide(SHELL, log, ws)])
    assert (verdict.decision, verdict.rule) == (ALLOW, "allow shell(git *)")


# --- path -----------------------------------------------------------------------------------


def test_path_relative_patterns_are_relative_to_the_workspace(ws: Path) -> None:
    rules = rule("allow", {"p": {"path": "src/**"}}, default="deny")
    for ok in ("src/a.py", "src/deep/er/b.py", "./src/x", "src", str(ws / "src/a")):
        assert decide(rules, {"p": ok}, ws) is ALLOW, ok
    for no in ("srcx/a.py", "lib/src/a.py", "src/../lib/a.py", "/src/a.py", "../ws/../x"):
        assert decide(rules, {"p": no}, ws) is DENY, no


def test_path_double_star_and_single_star(ws: Path) -> None:
    assert matches({"p": {"path": "**/*.env"}}, {"p": "a/b/.x.env"}) is True
    assert matches({"p": {"path": "*.env"}}, {"p": "a/prod.env"}) is False  # `*` stays in a segment
    assert matches({"p": {"path": "*.env"}}, {"p": "prod.env"}) is True
    assert matches({"p": {"path": "a/**/z"}}, {"p": "a/z"}) is True
    assert matches({"p": {"path": "a/**/z"}}, {"p": "a/b/c/z"}) is True
    assert matches({"p": {"path": "/etc/**"}}, {"p": "/etc/passwd"}) is True
    assert matches({"p": {"path": "/etc/**"}}, {"p": "//etc//passwd"}) is True
    assert matches({"p": {"path": "/etc/**"}}, {"p": "/tmp/../etc/passwd"}) is True
    assert matches({"p": {"path": "~/.ssh/**"}}, {"p": os.path.expanduser("~/.ssh/id")}) is True
    assert matches({"p": {"path": "~/.ssh/**"}}, {"p": "~/.ssh/id"}) is True  # deny: either reading


def test_dotdot_cannot_escape_an_allow_or_dodge_a_deny(ws: Path) -> None:
    outside = ws.parent / "secret"
    rules = compile_rules(
        {
            "default": "ask",
            "rules": [
                {"decision": "allow", "when": {"p": {"path": "**"}}},
                {"decision": "deny", "when": {"p": {"path": f"{outside}/**"}}},
            ],
        }
    )
    assert decide(rules, {"p": "notes.txt"}, ws) is ALLOW
    assert decide(rules, {"p": "../secret/key"}, ws) is DENY
    assert decide(rules, {"p": "sub/../../secret/key"}, ws) is DENY
    assert decide(rules, {"p": "../elsewhere"}, ws) is ASK  # outside: `**` does not allow it


def test_symlink_out_of_an_allowed_folder_is_not_allowed(ws: Path) -> None:
    outside = ws.parent / "outside"
    outside.mkdir()
    (outside / "passwords").write_text("x")
    (ws / "src").mkdir()
    (ws / "src" / "link").symlink_to(outside / "passwords")
    (ws / "src" / "dirlink").symlink_to(outside, target_is_directory=True)
    (ws / "src" / "ok.py").write_text("x")
    rules = rule("allow", {"p": {"path": "src/**"}}, default="ask")
    assert decide(rules, {"p": "src/ok.py"}, ws) is ALLOW
    assert decide(rules, {"p": "src/link"}, ws) is ASK
    assert decide(rules, {"p": "src/dirlink/passwords"}, ws) is ASK
    assert decide(rules, {"p": "src/dirlink/new-file"}, ws) is ASK


def test_symlink_into_a_denied_folder_is_denied(ws: Path) -> None:
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key").write_text("k")
    (ws / "docs").mkdir()
    (ws / "docs" / "innocent.txt").symlink_to(ws / "secrets" / "key")
    rules = rule("deny", {"p": {"path": "secrets/**"}}, default="allow")
    assert decide(rules, {"p": "docs/innocent.txt"}, ws) is DENY
    assert decide(rules, {"p": "secrets/key"}, ws) is DENY
    assert decide(rules, {"p": "docs/other.txt"}, ws) is ALLOW


def test_symlinked_workspace_still_matches_relative_patterns(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "src").mkdir(parents=True)
    (real / "src" / "a.py").write_text("")
    link = tmp_path / "ws-link"
    link.symlink_to(real, target_is_directory=True)
    rules = rule("allow", {"p": {"path": "src/**"}}, default="deny")
    assert decide(rules, {"p": "src/a.py"}, link) is ALLOW
    assert decide(rules, {"p": str(real / "src" / "a.py")}, link) is DENY  # not the path as given


def test_nul_in_a_path_matches_deny_never_allow(ws: Path) -> None:
    assert matches({"p": {"path": "/etc/**"}}, {"p": "a\0b"}, as_="deny") is True
    assert matches({"p": {"path": "**"}}, {"p": "a\0b"}, as_="allow") is False


# --- host -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "url", "expected"),
    [
        ("example.com", "https://example.com/x", True),
        ("example.com", "https://EXAMPLE.com./x", True),
        ("example.com", "https://api.example.com/x", False),
        ("*.example.com", "https://api.example.com/x", True),
        ("*.example.com", "https://a.b.example.com:8443/x", True),
        ("*.example.com", "https://example.com/x", False),  # subdomains, not the apex
        ("*.example.com", "https://badexample.com/", False),
        ("*.example.com", "https://example.com.evil.net/", False),
        ("api-*.example.com", "https://api-eu.example.com/", True),
        ("api-*.example.com", "https://api.eu.example.com/", False),
        ("*", "https://anything.org/", True),
        ("example.com", "https://user:pw@example.com/", True),
        ("example.com", "https://example.com@evil.net/", False),  # userinfo is not the host
        ("bücher.example", "https://xn--bcher-kva.example/", True),  # IDNA both ways
        ("xn--bcher-kva.example", "https://BÜCHER.example/", True),
        ("example.com", "example.com/path", True),  # no scheme
        ("127.0.0.1", "http://127.0.0.1:8080/", True),
    ],
)
def test_host(pattern: str, url: str, expected: bool) -> None:
    assert matches({"url": {"host": pattern}}, {"url": url}) is expected
    assert matches({"url": {"host": pattern}}, {"url": url}, as_="allow") is expected


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.com\\@good.com/",
        "http://go od.com/",
        "",
        "http://",
        "http://%65vil.com/",  # WHATWG decodes it to evil.com, httpx looks up `%65vil.com`
    ],
)
def test_unreadable_host_matches_deny_never_allow(url: str) -> None:
    assert matches({"url": {"host": "good.com"}}, {"url": url}, as_="deny") is True
    assert matches({"url": {"host": "*"}}, {"url": url}, as_="allow") is False


# --- command --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "command", "expected"),
    [
        ("ls *", "ls", True),
        ("ls *", "ls -la", True),
        ("ls *", "lsof", False),  # trailing ` *` needs a word boundary
        ("ls*", "lsof", True),
        ("git status", "git status", True),
        ("git status", "git status -s", False),
        ("git * --force", "git push origin --force", True),
        ("npm run test:*", "npm run test", True),  # legacy `:*`
        ("npm run test:*", "npm run test -- -k x", True),
        ("npm run test:*", "npm run testing", False),
        ("echo *", "echo   'a  b'", True),
        ("*", "anything at all", True),
    ],
)
def test_command_pattern(pattern: str, command: str, expected: bool) -> None:
    assert matches({"c": {"command": pattern}}, {"c": command}, as_="allow") is expected


@pytest.mark.parametrize(
    "command",
    [
        "timeout 5 ls -la",
        "timeout -s KILL --preserve-status 5 ls",
        "time ls",
        "time -p ls",
        "nice ls",
        "nice -n 5 ls",
        "nice -10 ls",
        "nohup ls",
        "stdbuf -oL ls",
        "stdbuf -o L -e 0 ls",
        "command ls",
        "env LANG=C ls",
        "LANG=C LC_ALL=C ls",
        "timeout 5 nice -n 2 env TZ=UTC ls -la",
        "exec ls",
    ],
)
def test_wrappers_are_stripped(command: str) -> None:
    assert matches({"c": {"command": "ls *"}}, {"c": command}, as_="allow") is True
    assert matches({"c": {"command": "ls *"}}, {"c": command}, as_="deny") is True


@pytest.mark.parametrize(
    "command",
    ["LD_PRELOAD=/tmp/evil.so ls", "PATH=/tmp/bin ls", "env PAGER=sh ls", "sudo ls", "ls > out"],
)
def test_allow_does_not_look_past_what_changes_the_command(command: str) -> None:
    assert matches({"c": {"command": "ls *"}}, {"c": command}, as_="allow") is False


@pytest.mark.parametrize(
    "command",
    [
        "LD_PRELOAD=x rm -rf /",
        "sudo rm -rf /",
        "sudo -u root rm -rf /",
        "env -i FOO=1 rm x",
        "env -S 'rm -rf /'",
        "find . -name x | xargs rm",
        "xargs -I{} -n 1 rm {}",
        "if true; then rm x; fi",
        "! rm x",
        "time -o /tmp/t rm x",
        "/bin/rm -rf x",
        "/usr/bin/env rm x",
        "find . -name '*.tmp' -exec rm {} +",
        "find . -execdir rm {} \\;",
        "busybox rm x",
        "coproc rm x",
        "setsid rm x",
        "watch -n 1 rm x",
        "function f { rm x; }",
    ],
)
def test_deny_looks_past_every_wrapper(command: str) -> None:
    assert matches({"c": {"command": "rm *"}}, {"c": command}, as_="deny") is True


@pytest.mark.parametrize(
    "command", ["{rm,-rf,x}", "r$@m x", '"$(echo rm)" x', "${CMD} x", "/bin/r? x"]
)
def test_a_command_name_known_only_at_run_time_matches_deny_and_ask(command: str) -> None:
    # brace expansion, parameters and globs decide at run time which program runs: doubt
    # never allows, so every deny and ask rule counts such a command as a match
    assert matches({"c": {"command": "rm *"}}, {"c": command}, as_="deny") is True
    assert matches({"c": {"command": "git push *"}}, {"c": command}, as_="ask") is True
    assert matches({"c": {"command": "*"}}, {"c": command}, as_="allow") is False


def test_allow_with_redirect_needs_a_pattern_that_says_so() -> None:
    assert matches({"c": {"command": "echo *"}}, {"c": "echo hi > ~/.bashrc"}, as_="allow") is False
    assert matches({"c": {"command": "echo *"}}, {"c": "echo hi 2>&1 >/dev/null"}, as_="allow")
    assert matches({"c": {"command": "echo * > /tmp/*"}}, {"c": "echo hi > /tmp/x"}, as_="allow")
    assert matches({"c": {"command": "* > /etc/*"}}, {"c": "echo x > /etc/passwd"}, as_="deny")
    assert matches({"c": {"command": "* >> /etc/*"}}, {"c": "echo x >>/etc/passwd"}, as_="deny")


@pytest.mark.parametrize("sep", ["&&", "||", ";", "|", "|&", "&", "\n"])
def test_compound_commands(sep: str) -> None:
    command = f"ls {sep} rm -rf /"
    assert matches({"c": {"command": "ls *"}}, {"c": command}, as_="allow") is False
    assert matches({"c": {"command": ["ls *", "rm *"]}}, {"c": command}, as_="allow") is True
    assert matches({"c": {"command": "rm *"}}, {"c": command}, as_="deny") is True
    assert matches({"c": {"command": "rm *"}}, {"c": command}, as_="ask") is True


def test_ls_and_rm_against_allow_ls_and_deny_rm() -> None:
    rules = compile_rules(
        {
            "default": "ask",
            "rules": [
                {"decision": "allow", "when": {"command": {"command": "ls *"}}},
                {"decision": "deny", "when": {"command": {"command": "rm *"}}},
            ],
        }
    )
    assert decide(rules, {"command": "ls -la && ls /tmp"}) is ALLOW
    assert decide(rules, {"command": "ls && rm -rf /"}) is DENY
    assert decide(rules, {"command": "ls && cat x"}) is ASK


@pytest.mark.parametrize(
    "command",
    [
        "ls $(rm -rf /)",
        "ls `rm -rf /`",
        'ls "$(rm -rf /)"',
        "ls <(rm -rf /)",
        "ls >(rm -rf /)",
        "(rm -rf /)",
        "ls; rm -rf /",
        "ls\nrm -rf /",
        'ls "$(echo `rm -rf /`)"',
        "ls ${X:-$(rm -rf /)}",
        "bash -c 'rm -rf /'",
        'sh -lc "ls && rm -rf /"',
        "eval 'rm -rf /'",
        "ls && $'\\x72m' -rf /",
        "ls && r\\m -rf /",
        "ls && 'rm' -rf /",
        "cat <<EOF\n$(rm -rf /)\nEOF",
    ],
)
def test_hostile_commands(command: str) -> None:
    assert matches({"c": {"command": "ls *"}}, {"c": command}, as_="allow") is False
    assert matches({"c": {"command": "rm *"}}, {"c": command}, as_="deny") is True


@pytest.mark.parametrize(
    "command",
    [
        "echo $(date)",
        "echo `date`",
        "echo 'open",
        "ls 'unbalanced; rm -rf /",
        "diff <(ls a) <(ls b)",
        "(ls)",
        "echo \\",
    ],
)
def test_unparseable_commands_are_never_auto_allowed(command: str) -> None:
    assert matches({"c": {"command": "*"}}, {"c": command}, as_="allow") is False
    # not even through a double negation in a deny rule
    assert matches({"c": {"not": {"command": "*"}}}, {"c": command}, as_="deny") is True


def test_comments_and_quoted_operators_are_not_commands() -> None:
    assert matches({"c": {"command": "ls *"}}, {"c": "ls # && rm -rf /"}, as_="allow") is True
    assert matches({"c": {"command": "echo *"}}, {"c": "echo 'a && rm -rf /'"}, as_="allow")
    assert matches(
        {"c": {"command": "git commit *"}}, {"c": 'git commit -m "a; b | c"'}, as_="allow"
    )


def test_quoted_heredoc_body_is_data() -> None:
    command = "cat <<'EOF'\nrm -rf /\nEOF\n"
    assert matches({"c": {"command": "cat *"}}, {"c": command}, as_="allow") is True
    assert matches({"c": {"command": "rm *"}}, {"c": command}, as_="deny") is False


def test_inline_shell_scripts_are_judged_by_their_content() -> None:
    assert matches({"c": {"command": "ls *"}}, {"c": "bash -c 'ls -la'"}, as_="allow") is True
    assert matches({"c": {"command": "ls *"}}, {"c": "bash -c 'ls; rm x'"}, as_="allow") is False


def test_not_command_in_an_allow_rule() -> None:
    when = {"c": {"not": {"command": "rm *"}}}
    assert matches(when, {"c": "ls && cat x"}, as_="allow") is True
    assert matches(when, {"c": "ls && rm x"}, as_="allow") is False
    assert matches(when, {"c": "ls $(rm x)"}, as_="allow") is False


# --- permission strings ---------------------------------------------------------------------


def perm_decide(
    tool: Tool, args: Mapping[str, Any], ws: Path = Path("/ws"), **lists: Any
) -> Verdict:
    return compile_permissions(**lists).decide(tool, args, ws)


def test_permission_command_forms() -> None:
    lists = {"allow": ["shell(git status *)", "shell(npm run test:*)", "shell(pwd)"]}
    for ok in ("git status", "git status -s", "npm run test", "pwd", "timeout 5 git status"):
        assert perm_decide(SHELL, {"command": ok}, **lists).matched is True, ok
    for no in ("git statusx", "git push", "pwd -P", "git status && rm -rf /", "git status $(x)"):
        assert perm_decide(SHELL, {"command": no}, **lists).matched is False, no


def test_permission_deny_command_catches_compounds() -> None:
    v = perm_decide(
        SHELL, {"command": "ls && rm -rf /"}, allow=["shell(ls *)"], deny=["shell(rm *)"]
    )
    assert (v.decision, v.rule) == (DENY, "deny shell(rm *)")


@pytest.mark.parametrize(
    ("spec", "path", "expected"),
    [
        ("**/.env*", ".env", True),
        ("**/.env*", "deep/er/.env.local", True),
        ("**/.env*", "/elsewhere/.env", True),  # deny: at any depth, anywhere
        (".env", "a/b/.env", True),  # a bare name: at any depth
        (".env", "a/b/.envrc", False),
        ("src/**", "src/a/b.py", True),
        ("src/**", "lib/src/a.py", False),
        ("src", "src/a/b.py", True),  # a match covers everything beneath
        ("src/", "src/a", True),
        ("/src/*.py", "src/a.py", True),  # `/x`: relative to the workspace
        ("/src/*", "src/sub/a.py", True),  # ... and beneath a match
        ("/src/*.py", "lib/src/a.py", False),
        ("./docs/**", "docs/x.md", True),
        ("a/b", "x/a/b", False),  # a slash in the middle anchors it
        ("//etc/**", "/etc/passwd", True),  # `//`: absolute
        ("//etc/**", "etc/passwd", False),
        ("/etc/**", "/etc/passwd", False),  # `/etc` is the workspace's etc
        ("*.py", "a/b/c.py", True),
    ],
)
def test_permission_path_forms(spec: str, path: str, expected: bool, ws: Path) -> None:
    assert perm_decide(READ, {"path": path}, ws, deny=[f"read({spec})"]).matched is expected


def test_permission_home_path(ws: Path) -> None:
    spec = "read(~/.ssh/**)"
    assert perm_decide(READ, {"path": os.path.expanduser("~/.ssh/id_rsa")}, ws, deny=[spec]).matched
    assert perm_decide(READ, {"path": "~/.ssh/id_rsa"}, ws, deny=[spec]).matched


def test_permission_bare_name_allow_stays_in_the_workspace(ws: Path) -> None:
    assert perm_decide(READ, {"path": "a/x.py"}, ws, allow=["read(*.py)"]).matched is True
    assert perm_decide(READ, {"path": "/etc/x.py"}, ws, allow=["read(*.py)"]).matched is False
    assert perm_decide(READ, {"path": "/etc/x.py"}, ws, deny=["read(*.py)"]).matched is True


def test_permission_path_symlink(ws: Path) -> None:
    (ws / "secrets").mkdir()
    (ws / "secrets" / "k").write_text("")
    (ws / "src").mkdir()
    (ws / "src" / "k").symlink_to(ws / "secrets" / "k")
    perms = compile_permissions(allow=["read(src/**)"], deny=["read(secrets)"], default="ask")
    assert perms.decide(READ, {"path": "src/k"}, ws).decision is DENY
    perms = compile_permissions(allow=["read(src/**)"], default="ask")
    assert perms.decide(READ, {"path": "src/k"}, ws).decision is ASK


@pytest.mark.parametrize(
    ("spec", "url", "expected"),
    [
        ("domain:*.internal", "https://db.internal/x", True),
        ("domain:*.internal", "https://internal/x", False),
        ("domain:example.com", "https://EXAMPLE.COM/x", True),
        ("domain:example.com", "https://example.com@evil.net/", False),
        ("https://example.com/docs/*", "https://example.com/docs/a/b", True),
        ("https://example.com/docs/*", "https://example.com/api", False),
    ],
)
def test_permission_url_forms(spec: str, url: str, expected: bool) -> None:
    assert perm_decide(FETCH, {"url": url}, allow=[f"fetch({spec})"]).matched is expected


def test_permission_param_form_is_deny_and_ask_only() -> None:
    args = {"command": "ls", "run_in_background": True}
    v = perm_decide(SHELL, args, deny=["shell(run_in_background:true)"])
    assert (v.decision, v.matched) == (DENY, True)
    assert (
        perm_decide(SHELL, {"command": "ls"}, deny=["shell(run_in_background:true)"]).matched
        is False
    )
    assert perm_decide(
        SHELL, {"command": "ls", "timeout_ms": 600000}, ask=["shell(timeout_ms:6*)"]
    ).matched
    # In allow, `name:value` is a command pattern (legacy `ls:*`), never a parameter rule.
    assert perm_decide(SHELL, args, allow=["shell(run_in_background:true)"]).matched is False
    assert perm_decide(SHELL, {"command": "ls -la"}, allow=["shell(ls:*)"]).matched is True
    # A name that is not a parameter of the tool falls back to the primary argument.
    assert perm_decide(SHELL, {"command": "ls -la"}, deny=["shell(ls:*)"]).matched is True


def test_permission_tool_name_globs() -> None:
    time_tool = make_tool("mcp_time_get_time")
    perms = compile_permissions(allow=["mcp_time_*"], deny=["*_delete"])
    ws = Path("/ws")
    assert perms.decide(time_tool, {}, ws).decision is ALLOW
    assert perms.decide(make_tool("files_delete"), {}, ws).decision is DENY
    assert perms.decide(make_tool("other"), {}, ws).matched is False
    assert perm_decide(READ, {"path": "x"}, allow=["Read"]).matched is True  # case-insensitive
    assert perm_decide(make_tool("anything"), {}, deny=["*"]).decision is DENY


def test_permission_primary_argument() -> None:
    tool = make_tool("query", meta={"primary_argument": "sql"}, sql="string", path="string")
    args = {"sql": "DROP TABLE users", "path": "x"}
    assert perm_decide(tool, args, deny=["query(DROP *)"]).matched is True
    typed = make_tool(
        "run", meta={"primary_argument": "line", "primary_kind": "command"}, line="string"
    )
    assert perm_decide(typed, {"line": "ls && rm x"}, deny=["run(rm *)"]).matched is True
    grep = make_tool("grep", pattern="string", path="string")  # `path` comes before `pattern`
    assert perm_decide(grep, {"pattern": "x", "path": "a/.env"}, deny=["grep(.env)"]).matched
    search = make_tool("search", pattern="string")
    assert perm_decide(search, {"pattern": "TODO*"}, ask=["search(TODO*)"]).matched is True
    assert perm_decide(search, {"pattern": "FIXME"}, ask=["search(TODO*)"]).matched is False
    by_file = make_tool("open", file_path="string")
    assert perm_decide(by_file, {"file_path": "a/.env"}, deny=["open(.env)"]).matched is True


def test_permission_spec_on_a_tool_without_primary_argument_never_applies() -> None:
    assert perm_decide(make_tool("add", a="number"), {"a": 1}, deny=["add(1)"]).matched is False
    assert perm_decide(READ, {}, deny=["read(x)"]).matched is False  # argument missing


def test_permission_precedence_and_origins() -> None:
    perms = compile_permissions(
        allow=["shell(aws s3 ls)"],
        ask=["shell(aws s3 *)"],
        deny=["shell(aws iam *)"],
        locate=lambda field: f"tools.yaml:{field}",
        default="allow",
    )
    ws = Path("/ws")
    ask = perms.decide(SHELL, {"command": "aws s3 ls"}, ws)
    assert (ask.decision, ask.rule, ask.origin) == (ASK, "ask shell(aws s3 *)", "tools.yaml:ask[0]")
    deny = perms.decide(SHELL, {"command": "aws iam list-users"}, ws)
    assert (deny.decision, deny.origin) == (DENY, "tools.yaml:deny[0]")
    other = perms.decide(SHELL, {"command": "aws ec2 x"}, ws)
    assert (other.decision, other.matched) == (ALLOW, False)
    assert perms.rules == ("deny shell(aws iam *)", "ask shell(aws s3 *)", "allow shell(aws s3 ls)")


def test_permission_hidden() -> None:
    perms = compile_permissions(deny=["shell", "fetch(*)", "read(**/.env)"], ask=["write"])
    assert perms.hidden(SHELL) is True
    assert perms.hidden(FETCH) is True
    assert perms.hidden(READ) is False  # a scoped deny blocks calls, not the tool
    assert perms.hidden(make_tool("write")) is False


def test_permission_unmatched_names_suggest_the_closest_tool() -> None:
    perms = compile_permissions(allow=["reed(src/**)", "shell"], deny=["mcp_x_*"])
    problems = perms.unmatched(["read", "shell", "write"])
    assert [(p.field, p.message) for p in problems] == [
        ("deny[0]", "'mcp_x_*' names no tool"),
        ("allow[0]", "'reed(src/**)' names no tool; did you mean 'read'?"),
    ]


def test_permission_plan_follows_a_replaced_tool() -> None:
    perms = compile_permissions(deny=["t(x)"])
    first = make_tool("t", command="string")
    assert perms.decide(first, {"command": "x"}, Path("/")).matched is True
    second = make_tool("t", path="string")
    assert perms.decide(second, {"path": "x"}, Path("/ws")).matched is True
    assert perms.decide(second, {"command": "x"}, Path("/ws")).matched is False


# --- split_command and known-safe commands --------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "git status && ls -la 'my dir' | wc -l",
            [["git", "status"], ["ls", "-la", "my dir"], ["wc", "-l"]],
        ),
        ("a; b\nc & d |& e || f", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]),
        ('echo "a \\"b\\" $HOME" x\\ y', [["echo", 'a "b" $HOME', "x y"]]),
        ("ls 2>/dev/null >out.txt", [["ls"]]),
        ("FOO=1 ls # comment; rm", [["FOO=1", "ls"]]),
        ("find . -exec rm {} \\;", [["find", ".", "-exec", "rm", "{}", ";"]]),
        ("echo $'a\\tb'", [["echo", "a\tb"]]),
        ("ls \\\n -la", [["ls", "-la"]]),
        ("", []),
    ],
)
def test_split_command(command: str, expected: list[list[str]]) -> None:
    assert split_command(command) == expected


@pytest.mark.parametrize(
    "command",
    ["echo $(x)", "echo `x`", "echo 'x", 'echo "x', "diff <(a) b", "(ls)", "ls )", "cat <<EOF\nx"],
)
def test_split_command_refuses_what_it_cannot_read(command: str) -> None:
    assert split_command(command) is None


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "cat a.txt | grep foo | wc -l",
        "head -n 5 x && tail -n 5 x",
        "pwd; echo hi; which python; stat x; du -sh .; df -h; file x",
        "diff a b; sort x | uniq -c; cut -d, -f1 x; tr a b </dev/null; nl x; tac x; rev x",
        "seq 10; date; date +%s; uname -a; whoami; id; true; false; test -f x; [ -d x ]",
        "basename a/b; dirname a/b; realpath x; readlink -f x; env; printenv HOME",
        "find . -name '*.py' -type f",
        "rg -n TODO src",
        "rg -e foo -g '*.py'",
        "sed -n 10,20p file",
        "sed -n -e '/start/,/end/p' file",
        "sort -r x",
        "git status",
        "git diff HEAD~1 -- src",
        "git log --oneline -n 5",
        "git show HEAD:README.md",
        "git branch",
        "git branch -a -v",
        "git branch --list 'feat/*'",
        "git branch --contains HEAD",
        "git rev-parse --show-toplevel",
        "git ls-files",
        "git blame x.py",
        "git grep -n TODO",
        "git --no-pager log",
        "git remote -v",
        "ls 2>/dev/null",
        "ls > /dev/null 2>&1",
        "ls &>/dev/null",
        "grep -r foo . 2>&1 | head",
        "cat <<'EOF'\nanything $(here)\nEOF",
        "command -v rg",
        "cd sub && ls",
        "echo a && echo b || echo c",
    ],
)
def test_known_safe_commands(command: str) -> None:
    assert is_known_safe_command(command) is True


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf x",
        "ls && rm x",
        "find . -exec rm {} \\;",
        "find . -execdir ls \\;",
        "find . -ok rm {} \\;",
        "find . -delete",
        "find . -fprint out",
        "find . -fprintf out %p",
        "find . -fls out",
        "find . -name *.py",  # an unquoted glob could expand to `-delete`
        "find . $ARGS",
        "rg --pre cat foo",
        "rg --pre=cat foo",
        "rg --search-zip foo",
        "rg -z foo",
        "rg -iz foo",
        "rg --hostname-bin x foo",
        "sort -o out x",
        "sort -ro out",
        "sort --output=out x",
        "sort --compress-program=sh x",
        "uniq in out",
        "git diff --output=patch.txt",
        "git log --output x",
        "git diff --ext-diff",
        "git branch -d old",
        "git branch -D old",
        "git branch -m a b",
        "git branch newbranch",
        "git grep -O foo",
        "git grep --open-files-in-pager=vim foo",
        "git -c core.pager=evil log",
        "git --exec-path=/tmp log",
        "git push",
        "git commit -m x",
        "git stash",
        "git remote add x y",
        "sed -i s/a/b/ x",
        "sed s/a/b/ x",
        "sed -n '1w out' x",
        "sed -n '1e rm x' x",
        "sed -n -f script x",
        "date -s 2020-01-01",
        "date --set=2020",
        "date 010112002020",
        "base64 -o out x",
        "file -C -m magic",
        "tree -o out",
        "tree -R -H x",
        "env FOO=1 ls",
        # wrappers, input from files and expansions in operands are not modelled (issue 10)
        "git -C sub status --short",
        "timeout 5 ls",
        "LANG=C sort x",
        "env LC_ALL=C ls",
        "bash -lc 'ls && pwd'",
        "find . -name '*.py' | xargs wc -l",
        "cat $HOME/x",
        "tr a b < x",
        "env LD_PRELOAD=evil.so ls",
        "PATH=/tmp ls",
        "FOO=bar",
        "cat x | tee y",
        "echo hi > file",
        "echo hi >> file",
        "ls &> file",
        "ls 2> errors.txt",
        "cat <> file",
        "ls >& file",
        "ls $(rm x)",
        "ls `rm x`",
        "diff <(ls) <(ls b)",
        "(ls)",
        "echo 'unbalanced",
        "cat <<EOF\n$(rm x)\nEOF",
        "sudo ls",
        "bash -c 'rm x'",
        "bash script.sh",
        "eval ls",
        "find . | xargs rm",
        "find . | xargs sort -o x",
        "$CMD",
        "l* -la",
        "./ls",
        "awk '{print}' x",
        "python -c 'print(1)'",
        "",
        "ls " + "x " * 6000,  # longer than 10,000 characters
    ],
)
def test_not_known_safe_commands(command: str) -> None:
    assert is_known_safe_command(command) is False


@pytest.mark.parametrize(
    "command",
    [
        # bash's printf -v assigns any variable (PATH, or an array element whose subscript is
        # evaluated, running a command substitution written inside single quotes)
        "printf -v PATH /tmp/bin",
        "printf -vPATH /tmp/bin",
        "printf -v 'a[$(rm x)]' y",
        "printf ${F:--v} PATH /tmp/bin",
        # test -v / -R evaluate an array subscript the same way
        "test -v 'a[$(rm x)]'",
        "[ -v 'a[$(rm x)]' ]",
        "[ -R ref ]",
        # expansions that assign, evaluate arithmetic or re-expand a value as a prompt
        "echo $[PATH=0]",
        "echo ${x@P}",
        "echo ${PATH:=/tmp/bin}",
        "echo ${x=1}",
        "echo ${!x}",
        "echo ${a[$'\\x24(rm x)']}",
        "echo ${x:off}",
        'echo "${x@P}"',
        "cat <<EOF\n${x@P}\nEOF",
        "cat <<EOF\n$[PATH=0]\nEOF",
        "cat <<< ${x@P}",
    ],
)
def test_bash_expansions_that_run_or_assign_are_not_known_safe(command: str) -> None:
    assert is_known_safe_command(command) is False


@pytest.mark.parametrize(
    "command",
    [
        # getopt_long (and git's option parser) accept any unambiguous prefix of a long option
        "sort --o=out x",
        "sort --outp out x",
        "sort --compress-prog=sh x",
        "git grep --open=vim foo",
        "git grep --open-files=sh foo",
        "git cat-file --text HEAD:x",
        "git cat-file --filt HEAD:x",
        "file --comp -m magic",
        "date --se=2020-01-01",
        "git diff --ext",
        "rg --pr=cat foo",
        "base64 --out=x y",
    ],
)
def test_abbreviated_long_options_are_refused_like_the_full_ones(command: str) -> None:
    assert is_known_safe_command(command) is False


@pytest.mark.parametrize(
    "command",
    [
        "echo ${HOME} ${#HOME} ${X:-default} ${X%.py} ${1}",
        'echo "${HOME}/x"',
        "printf '%s\\n' a b",
        "test -f x && [ -d y ]",
        "git diff --output-indicator-new=+",
        "sort --reverse x",
        "date --utc",
        "cat <<EOF\n${HOME}\nEOF",
    ],
)
def test_harmless_expansions_and_options_stay_known_safe(command: str) -> None:
    assert is_known_safe_command(command) is True


# --- configuration errors -------------------------------------------------------------------


def config_error(spec: Any, **kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_rules(spec, **kwargs)
    return info.value


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ("alow", "", "did you mean 'allow'"),
        (3, "", "expected allow, ask, deny or a mapping"),
        ({"defualt": "ask"}, "defualt", "did you mean 'default'"),
        ({"default": "never"}, "default", "expected one of allow, ask, deny"),
        ({"rules": {"decision": "deny"}}, "rules", "expected a list of rules"),
        ({"rules": ["deny"]}, "rules[0]", "expected a rule"),
        ({"rules": [{"decision": "deny", "whne": {}}]}, "rules[0].whne", "did you mean 'when'"),
        ({"rules": [{"when": {"a": 1}}]}, "rules[0]", "missing `decision`"),
        (
            {"rules": [{"decision": "denied", "when": {"a": 1}}]},
            "rules[0].decision",
            "did you mean 'deny'",
        ),
        (
            {"rules": [{"decision": "deny", "when": {"a": 1}, "reason": 3}]},
            "rules[0].reason",
            "expected a sentence",
        ),
    ],
)
def test_config_errors(spec: Any, field: str, fragment: str) -> None:
    error = config_error(spec)
    assert error.field == field
    assert fragment in error.message


@pytest.mark.parametrize(
    ("when", "field", "fragment"),
    [
        ([], "", "expected a non-empty mapping"),
        ({}, "", "expected a non-empty mapping"),
        ({"any": {"a": 1}}, ".any", "non-empty list"),
        ({"any": [{"a": {"glb": "x"}}]}, ".any[0].a.glb", "did you mean 'glob'"),
        ({"not": "x"}, ".not", "expected a non-empty mapping"),
        ({"path": {"glb": "x"}}, ".path.glb", "did you mean 'glob'"),
        ({"options": {"mode": "x"}}, ".options.mode", "name it `options.mode`"),
        ({"a": ["x", "y"]}, ".a", "write {in: [...]}"),
        ({"a": {}}, ".a", "expected a value or a mapping"),
        ({"a": {"regex": "(unclosed"}}, ".a.regex", "missing ), unterminated subpattern"),
        ({"a": {"regex": ["ok", "[z-a]"]}}, ".a.regex[1]", "bad character range"),
        ({"a": {"in": "x"}}, ".a.in", "non-empty list of values"),
        ({"a": {"gt": "5"}}, ".a.gt", "expected a number"),
        ({"a": {"lte": True}}, ".a.lte", "expected a number"),
        ({"a": {"glob": 5}}, ".a.glob", "expected a glob"),
        ({"a": {"prefix": []}}, ".a.prefix", "non-empty list"),
        ({"a": {"path": ""}}, ".a.path", "expected a path glob"),
        ({"a": {"path": "./"}}, ".a.path", "empty path pattern"),
        ({"a": {"host": "https://x.com/"}}, ".a.host", "expected a host name"),
        ({"a": {"host": "a..b"}}, ".a.host", "invalid host pattern"),
        ({"a": {"command": [""]}}, ".a.command", "expected a command pattern"),
        ({"a": {"exists": "yes"}}, ".a.exists", "expected true or false"),
        ({"a": {"not": {"exists": True}}}, ".a.not.exists", "directly under the argument"),
        ({"a": {"any": []}}, ".a.any", "non-empty list"),
        ({3: 1}, "", "expected an argument name"),
    ],
)
def test_when_config_errors(when: Any, field: str, fragment: str) -> None:
    error = config_error({"rules": [{"decision": "deny", "when": when}]})
    assert error.field == "rules[0].when" + field
    assert fragment in error.message


def test_unknown_argument_name_is_an_error_when_the_schema_is_known() -> None:
    params = {"type": "object", "properties": {"path": {"type": "string"}, "mode": {}}}
    spec = {"rules": [{"decision": "deny", "when": {"pth": {"glob": "x"}}}]}
    error = config_error(spec, parameters=params)
    assert error.field == "rules[0].when.pth"
    assert "did you mean 'path'" in error.message and "mode, path" in error.message
    ok = {"rules": [{"decision": "deny", "when": {"path": "x", "mode.deep": 1}}]}
    assert isinstance(compile_rules(ok, parameters=params), ApprovalRules)


@pytest.mark.parametrize(
    ("lists", "field", "fragment"),
    [
        ({"deny": "read"}, "deny", "expected a list of rule strings"),
        ({"allow": ["read", 3]}, "allow[1]", "expected a rule string"),
        ({"ask": ["read(x", "ok"]}, "ask[0]", "expected `Name` or `Name(spec)`"),
        ({"deny": ["re ad"]}, "deny[0]", "expected `Name` or `Name(spec)`"),
        ({"deny": ["read()"]}, "deny[0]", "empty specifier"),
        ({"deny": ["fetch(domain:)"]}, "deny[0]", "expected a host name"),
        ({"deny": ["fetch(domain:a/b)"]}, "deny[0]", "expected a host name"),
        ({"default": "sometimes"}, "default", "expected one of allow, ask, deny"),
    ],
)
def test_permission_config_errors(lists: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        compile_permissions(**lists)
    assert info.value.field == field
    assert fragment in info.value.message
