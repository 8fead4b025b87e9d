"""Deny and ask rules match a command by *any* reading: wherever their program appears as a word,
whatever precedes it; git's global options skipped; scripts of shells, `eval`, `env -S`, here-
documents and here-strings read too; a program known only at run time matches every deny and ask.
Allow rules keep their careful reading and cannot be talked into more.

Issue 10, "deny rules dodged through wrapper options" and "deny and ask by any reading"."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolnexus import Decision, create_toolkit
from toolnexus.approval import compile_permissions, compile_rules
from toolnexus.base import Result, Tool, ToolContext


async def _noop(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result()


SHELL = Tool(
    name="shell",
    handler=_noop,
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)


def rule_matches(pattern: str, command: str, kind: str) -> bool:
    """Whether a `command:` rule of `kind` (allow, ask, deny) matches `command`."""
    default = "deny" if kind == "allow" else "allow"
    when = {"command": {"command": pattern}}
    rules = compile_rules({"default": default, "rules": [{"decision": kind, "when": when}]})
    return rules.decide(SHELL, {"command": command}, Path("/ws")).matched


def permission_matches(pattern: str, command: str, kind: str) -> bool:
    perms = compile_permissions(**{kind: [f"shell({pattern})"]})
    return perms.decide(SHELL, {"command": command}, Path("/ws")).matched


def denied_every_way(pattern: str, command: str) -> bool:
    return all(
        check(pattern, command, kind)
        for check in (rule_matches, permission_matches)
        for kind in ("deny", "ask")
    )


# --- wrappers and their options --------------------------------------------------------------

WRAPPED_PUSHES = [
    "env -iu x git push",
    "env -iux git push origin",
    "env -u x -i git push",
    "env --unset=x git push",
    "env --u x git push",  # getopt_long abbreviation of --unset
    "env -C / git push",
    "env -S 'git push'",
    "env -S'git push'",
    "env --split-string='git push origin'",
    "env -vS 'git push'",
    "sudo -u x git push",
    "sudo -iu root git push",
    "sudo --user=root -- git push",
    "doas -u x git push",
    "nice -n5 timeout 3 git push",
    "nice -n 5 git push",
    "nice --adjustment=5 git push",
    "timeout -k5 3 git push",
    "timeout --signal=KILL 3 git push",
    "timeout -sKILL 3 git push",
    "stdbuf -oL -eL git push",
    "ionice -c3 git push",
    "chrt -f 1 git push",
    "taskset -c 0 git push",
    "flock /tmp/lock git push",
    "setsid -w git push",
    "unbuffer git push",
    "xargs git push",
    "xargs -0 -n1 git push",
    "xargs -I{} git push {}",
    "foo git push",
    "foo --bar=baz -x git push origin main",
    "command -p git push",
    "exec -a x git push",
    "builtin command git push",
    "time -p git push",
    "nohup git push &",
    "watch -n1 git push",
    "X=1 Y=2 git push",
    "GIT_DIR=x git push",
    "! git push",
    "{ git push; }",
    "if true; then git push; fi",
    "while git push; do :; done",
    "find . -exec git push \\;",
    "find . -maxdepth 0 -execdir git push {} +",
    "/usr/bin/git push",
    "./git push",
    "'git' push",
    '"git" push',
    "\\git push",
    "g\\it push",
    "gi''t push",
    "$'git' push",
    "$'\\x67it' push",
    "git 'push'",
    "git p\\ush",
    "git $'push' --force",
]


@pytest.mark.parametrize("command", WRAPPED_PUSHES)
def test_wrapped_push_hits_git_push_deny_and_ask(command: str) -> None:
    assert denied_every_way("git push *", command)


@pytest.mark.parametrize(
    "command",
    [
        "git -C . push",
        "git -C. push",
        "git -c a=b --no-pager push",
        "git -c push.default=current push origin",
        "git --git-dir=.git --work-tree=. push",
        "git --git-dir .git --work-tree . push",
        "git -P push",
        "git --paginate push",
        "git --namespace=x push",
        "git --namespace x push",
        "git --exec-path=/usr/lib/git-core push",
        "git --bare push",
        "git --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs push",
        "git --no-optional-locks --no-replace-objects --no-lazy-fetch --no-advice push",
        "git --config-env=core.x=HOME push",
        "git --config-env core.x=HOME push",
        "git --attr-source=HEAD push",
        "sudo -u x git -C /repo -c a=b push",
        "env -i /usr/bin/git --no-pager push --force",
    ],
)
def test_git_global_options_are_skipped_for_git_patterns(command: str) -> None:
    assert denied_every_way("git push *", command)


@pytest.mark.parametrize(
    "command",
    [
        "git -c alias.p=push p",  # an alias defined on the command line may be any subcommand
        "git -c alias.p='!git push' p",
        "git $SUB origin",
        'git "$SUB" origin',
        "git ${SUB} origin",
        "git $(echo push) origin",
        "git -C . $X",
        "G=git; $G push",
        "$G push",
        "sudo $G push",
        "xargs $G push",
        "nice -n5 $G push",
        "foo $G push",
        "/usr/bin/g?t push",
        "/usr/bin/*it push",
        "{git,x} push",
        "echo push | xargs git",  # xargs appends the words it reads
        "xargs -a list.txt git",
        "find . -name push -exec git {} \\;",  # find puts file names in place of {}
        "xargs -I{} git {} origin",
    ],
)
def test_doubt_always_denies(command: str) -> None:
    assert denied_every_way("git push *", command)


@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'git push'",
        "bash -xc 'git push'",
        "bash -c -- 'git push'",
        "bash -e -c 'git push'",
        "bash -o pipefail -c 'git push'",
        "sh -c 'true; git push origin'",
        "sudo sh -c 'git push'",
        "foo sh -c 'git push'",
        "eval git push",
        "eval 'git push'",
        'eval "git push"',
        "bash <<< 'git push'",
        "bash -s <<< 'git push'",
        "bash <<EOF\ngit push\nEOF",
        "bash <<'EOF'\ngit push\nEOF",
        "sh <<-EOF\n\tgit push\n\tEOF",
        "echo 'git push' | bash",
        "printf 'git push' | sh -s",
        'bash -c "$X"',
        "sh -c 'eval \"git push\"'",
        "alias g='git push'",
        "find . -exec sh -c 'git push' \\;",
        "bash /dev/stdin <<< 'git push'",
        "source /dev/stdin <<< 'git push'",
        ". /dev/stdin <<EOF\ngit push\nEOF",
        "echo 'git push' | source /dev/stdin",
        "trap 'git push' EXIT",
        "x='$(git push)'; echo ${x@P}",  # a prompt expansion runs the value's substitution
        "x='a[$(git push)]'; echo $((x))",  # so does arithmetic on an array subscript
    ],
)
def test_scripts_are_read_too(command: str) -> None:
    assert denied_every_way("git push *", command)


def test_the_heredoc_delimiter_joined_by_a_backslash_newline_ends_the_body() -> None:
    # bash joins `EO\` and `F` into the delimiter `EOF`, so the lines after it run
    command = "cat <<EOF\nEO\\\nF\ngit push\nEOF"
    assert denied_every_way("git push *", command)
    assert rule_matches("cat *", command, "allow") is False


# --- what must not be swept up --------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git log --oneline",
        "git pushy",
        "git commit -m 'git push later'",
        "echo $HOME",
        'cd "$DIR" && ls',
        "cat <<'EOF'\ngit push\nEOF",  # a quoted here-document is data for cat
        "ls *.py",
        "gitk push",
    ],
)
def test_other_commands_do_not_match(command: str) -> None:
    assert rule_matches("git push *", command, "deny") is False
    assert permission_matches("git push *", command, "deny") is False


# --- allow rules stay careful ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "command"),
    [
        ("ls *", "env -iu ls sh -c 'touch x'"),  # env reads `-iu ls`: sh runs
        ("ls *", "env -u ls sh -c 'touch x'"),
        ("ls *", "env --u ls sh -c 'touch x'"),
        ("ls *", "env --unset ls sh -c 'touch x'"),
        ("ls *", "env -C ls sh -c 'touch x'"),
        ("ls *", "env -S 'ls; touch x'"),
        ("ls *", "timeout -k 5 ls sh -c 'touch x'"),  # `-k 5`, then `ls` is the duration
        ("ls *", "timeout --kill 5 ls touch x"),
        ("ls *", "nice -n ls touch x"),
        ("ls *", "stdbuf -o ls touch x"),
        ("ls *", "stdbuf --out ls touch x"),
        ("ls *", "command -v ls"),
        ("ls *", "exec -a ls touch x"),
        ("ls *", "time -o ls touch x"),
        ("ls *", "bash --rcfile=x -ic 'ls'"),
        ("ls *", "bash --init-file x -i -c 'ls'"),
        ("ls *", "bash -c -- 'touch x'"),
        ("ls *", "xargs -a ls touch x"),
        ("ls *", "xargs -E ls touch"),
        ("ls *", "env --chdir ls sh"),
        ("ls *", "nice --adj ls touch x"),
    ],
)
def test_allow_rules_are_not_talked_around_by_wrapper_options(pattern: str, command: str) -> None:
    assert rule_matches(pattern, command, "allow") is False
    assert permission_matches(pattern, command, "allow") is False


@pytest.mark.parametrize(
    "command",
    ["timeout 5 ls -la", "nice -n 5 ls", "env LANG=C ls", "bash -lc 'ls -la'", "bash -c 'ls'"],
)
def test_allow_still_looks_past_harmless_wrappers(command: str) -> None:
    assert rule_matches("ls *", command, "allow") is True


# --- end to end: a toolkit refuses, and nothing runs ----------------------------------------


def _manifest(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(textwrap.dedent(body))
    return path


ATTACKS = [
    "env -iu x git push",
    "sudo -u x git push",
    "nice -n5 timeout 3 git push",
    "git -C . push",
    "git -c a=b --no-pager push",
    "xargs git push </dev/null",
    "bash <<< 'git push'",
    "cat <<EOF\nEO\\\nF\ngit push\nEOF",
]


def _git_shim(tmp_path: Path) -> tuple[Path, Path]:
    """A `git` on PATH that only leaves a marker: if it runs, the guard failed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "git-ran"
    shim = bin_dir / "git"
    shim.write_text(f"#!/bin/sh\ntouch {marker}\n")
    shim.chmod(0o755)
    return bin_dir, marker


def _shell_tool_manifest(tmp_path: Path, bin_dir: Path, permissions: str = "") -> Path:
    """A manifest whose one tool, `shell`, runs bash with `bin_dir` (the git shim) first on
    PATH; `permissions`, when given, is the manifest's `permissions:` mapping."""
    head = f"permissions: {permissions}\n" if permissions else ""
    tools = f"""\
        tools:
          - name: shell
            description: run a bash command
            command: [bash, -c, "{{command}}"]
            env: {{PATH: "{bin_dir}:/usr/bin:/bin"}}
            parameters:
              type: object
              properties: {{command: {{type: string}}}}
              required: [command]
            approval: allow
        """
    return _manifest(tmp_path, "version: 1\n" + head + textwrap.dedent(tools))


@pytest.mark.parametrize("command", ATTACKS)
def test_builtin_shell_with_a_deny_rule_refuses_and_runs_nothing(
    command: str, tmp_path: Path
) -> None:
    bin_dir, marker = _git_shim(tmp_path)
    manifest = _manifest(
        tmp_path,
        """
        version: 1
        builtins:
          shell:
            default_approval: allow
            approval:
              rules:
                - {decision: deny, when: {command: {command: "git push *"}}}
        """,
    )
    with create_toolkit(manifest, workspace=tmp_path) as tk:
        verdict = tk.check("shell", {"command": command})
        assert verdict.decision is Decision.DENY, command
        result = tk.execute("shell", {"command": f"PATH={bin_dir}:$PATH; {command}"})
        assert result.is_error, result.content
    assert not marker.exists()


@pytest.mark.parametrize("command", ATTACKS)
def test_shell_tool_with_a_deny_permission_refuses_and_runs_nothing(
    command: str, tmp_path: Path
) -> None:
    bin_dir, marker = _git_shim(tmp_path)
    manifest = _shell_tool_manifest(tmp_path, bin_dir, permissions='{deny: ["shell(git push *)"]}')
    with create_toolkit(manifest, workspace=tmp_path) as tk:
        verdict = tk.check("shell", {"command": command})
        assert verdict.decision is Decision.DENY, command
        result = tk.execute("shell", {"command": command})
        assert result.is_error, result.content
    assert not marker.exists()


def test_the_shims_do_run_when_nothing_denies(tmp_path: Path) -> None:
    # the end-to-end tests above prove something only if the attack would otherwise run
    bin_dir, marker = _git_shim(tmp_path)
    manifest = _shell_tool_manifest(tmp_path, bin_dir)
    with create_toolkit(manifest, workspace=tmp_path) as tk:
        tk.execute("shell", {"command": "cat <<EOF\nEO\\\nF\ngit push\nEOF"})
    assert marker.exists()


def test_scripts_nested_past_the_depth_limit_deny_and_never_allow() -> None:
    command = "eval " * 400 + "ls"
    assert rule_matches("git push *", command, "deny") is True
    assert rule_matches("ls *", command, "allow") is False
    nested = "bash -c '" + "eval " * 40 + "ls'"
    assert rule_matches("git push *", nested, "deny") is True
    assert rule_matches("ls *", nested, "allow") is False


def test_a_long_command_with_run_time_words_is_still_judged() -> None:
    command = "foo " + " ".join(f"$X{i}" for i in range(3000))
    assert rule_matches("git push *", command, "deny") is True
    assert rule_matches("git push *", "foo " + "w " * 3000, "deny") is False


@pytest.mark.parametrize(
    "command", ["sort --compress-program=$P -S1 big", "rg --pre $P x", "foo $G push"]
)
def test_a_run_time_word_of_a_program_that_may_run_it_is_doubt(command: str) -> None:
    assert rule_matches("git push *", command, "deny") is True
