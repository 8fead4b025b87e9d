"""Per-caller policy in the core: `access:` entries (who sees and calls which tools), the
`caller:` condition of approval rules and permissions, and rate limits per caller. The caller
is set the way `serve` sets it for each request (`acting_as`); end to end through `serve` with a
real OpenID provider: `tests/serve/test_access_oidc.py`."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import pytest

from toolnexus import Decision, ManifestError, create_toolkit
from toolnexus.base import Caller, acting_as
from toolnexus.cli import main

pytestmark = pytest.mark.anyio

ALICE = Caller(subject="alice", issuer="https://id.example", groups=("ops",), roles=("admin",))
BOB = Caller(subject="bob", issuer="https://id.example", groups=("dev",))
CAROL = Caller(subject="carol", issuer="https://id.example", scopes=frozenset({"tools"}))

TOOLS = """
tools:
  - {name: deploy_app, command: [echo, deployed]}
  - {name: deploy_db, command: [echo, migrated]}
  - {name: status, command: [echo, fine]}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def manifest(folder: Path, body: str) -> Path:
    return write(folder, "tools.yaml", "version: 1\n" + textwrap.dedent(body).lstrip() + TOOLS)


async def test_a_tool_named_by_an_entry_is_only_for_the_callers_it_admits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = manifest(tmp_path, "access:\n  - {tools: [deploy*], groups: [ops]}\n")
    with create_toolkit(path) as toolkit:
        with acting_as(ALICE):
            assert toolkit.names() == ["deploy_app", "deploy_db", "status"]
            ran = await toolkit.aexecute("deploy_app")
        with acting_as(BOB):
            assert toolkit.names() == ["status"]  # named by no entry: open to every caller
            assert toolkit.get("deploy_app") is None
            assert "deploy_app" not in toolkit
            with caplog.at_level(logging.WARNING, logger="toolnexus"):
                refused = await toolkit.aexecute("deploy_app")
            unknown = await toolkit.aexecute("deploy_ap")
            verdict = toolkit.check("deploy_app")
    assert not ran.is_error and ran.content.strip() == "deployed"
    # Told exactly what an unknown name is told, with no suggestion of a hidden tool.
    assert refused.is_error and refused.metadata["error_type"] == "ToolNotFound"
    assert refused.content == "unknown tool 'deploy_app'; available tools: status"
    assert unknown.content == "unknown tool 'deploy_ap'; available tools: status"
    assert verdict.decision is Decision.DENY
    # The operator's log says why.
    logged = [r.getMessage() for r in caplog.records if "refused a call" in r.getMessage()]
    assert logged and "caller 'bob' (groups dev)" in logged[0]
    assert "tools.yaml:3:5 admits groups ops" in logged[0]


async def test_a_local_toolkit_without_a_caller_is_unaffected(tmp_path: Path) -> None:
    path = manifest(tmp_path, "access:\n  - {tools: [deploy*], subjects: [alice]}\n")
    with create_toolkit(path) as toolkit:
        assert toolkit.names() == ["deploy_app", "deploy_db", "status"]
        assert not (await toolkit.aexecute("deploy_db")).is_error


async def test_every_given_key_must_hold_and_one_name_of_each_is_enough(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        """
        access:
          - {tools: deploy_app, groups: [ops, sre], roles: admin}
          - {tools: deploy_app, scopes: [tools]}
        """,
    )
    with create_toolkit(path) as toolkit:
        seen = {}
        for caller in (ALICE, BOB, CAROL, Caller(subject="dan", issuer="", groups=("ops",))):
            with acting_as(caller):
                seen[caller.subject] = "deploy_app" in toolkit.names()
    # alice: ops and admin; carol: the second entry (entries of one file are alternatives);
    # dan: ops without the role admin.
    assert seen == {"alice": True, "bob": False, "carol": True, "dan": False}


async def test_an_included_files_entries_cannot_be_widened_by_the_file_including_it(
    tmp_path: Path,
) -> None:
    write(tmp_path, "company.yaml", "version: 1\naccess:\n  - {tools: [deploy*], groups: [ops]}\n")
    path = manifest(
        tmp_path,
        """
        include: [company.yaml]
        access:
          - {tools: [deploy*], groups: [dev]}
          - {tools: [deploy*], groups: [ops]}
        """,
    )
    with create_toolkit(path) as toolkit:
        with acting_as(BOB):
            bob = toolkit.names()
        with acting_as(ALICE):
            alice = toolkit.names()
    assert bob == ["status"]  # the company's entries do not admit dev: deny anywhere wins
    assert alice == ["deploy_app", "deploy_db", "status"]


async def test_an_included_files_entries_still_hold_under_its_prefix(tmp_path: Path) -> None:
    write(
        tmp_path,
        "ops.yaml",
        """
        version: 1
        access:
          - {tools: [restart], groups: [ops]}
        tools:
          - {name: restart, command: [echo, restarted]}
        """,
    )
    path = manifest(tmp_path, "include:\n  - {path: ops.yaml, prefix: ops_}\n")
    with create_toolkit(path) as toolkit:
        with acting_as(BOB):
            bob = toolkit.names()
        with acting_as(ALICE):
            alice = toolkit.names()
    assert bob == ["deploy_app", "deploy_db", "status"]
    assert alice == ["deploy_app", "deploy_db", "ops_restart", "status"]


async def test_a_caller_rule_asks_one_group_and_allows_another(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        """
        defaults: {approval: deny}
        permissions:
          ask:
            - {rule: status, caller: {groups: [dev]}}
          allow:
            - {rule: status, caller: {groups: [ops]}}
          deny:
            - {rule: deploy_db, caller: {subjects: [alice]}}
        """,
    )
    with create_toolkit(path) as toolkit:
        with acting_as(ALICE):
            assert toolkit.check("status").decision is Decision.ALLOW
            assert toolkit.check("deploy_db").decision is Decision.DENY
        with acting_as(BOB):
            asked = toolkit.check("status")
        # A rule with `caller:` never matches without a caller: the default (deny) decides, and
        # a deny with `caller:` hides nothing from everyone else.
        assert toolkit.check("status").decision is Decision.DENY
        assert "deploy_db" in toolkit.names()
    assert asked.decision is Decision.ASK
    assert asked.rule == "ask status for callers with groups dev"
    assert asked.origin is not None and asked.origin.endswith("tools.yaml:5:7")


async def test_a_tools_own_rule_can_name_the_caller(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - name: status
            command: [echo, fine]
            approval:
              default: ask
              rules:
                - {decision: allow, caller: {roles: [admin]}}
                - {decision: deny, caller: {groups: [dev]}, reason: not for dev}
        """,
    )
    with create_toolkit(path) as toolkit:
        with acting_as(ALICE):
            assert toolkit.check("status").decision is Decision.ALLOW
        with acting_as(BOB):
            denied = toolkit.check("status")
        assert toolkit.check("status").decision is Decision.ASK
    assert denied.decision is Decision.DENY and denied.reason == "not for dev"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "access:\n  - {tools: [deploy*], grops: [ops]}\n",
            r"tools.yaml:3:\d+: access\[0\]\.grops: unknown key 'grops'.*did you mean 'groups'",
        ),
        (
            "access:\n  - {tools: [deploy*]}\n",
            r"tools.yaml:3:\d+: access\[0\]: name who may use these tools",
        ),
        (
            "access:\n  - {tools: [deplyo_app], groups: [ops]}\n",
            r"tools.yaml:3:\d+: access\[0\]\.tools\[0\]: access entry names no tool with "
            r"'deplyo_app'; did you mean 'deploy_app'",
        ),
        (
            "access:\n  - {tools: [status, 'dep*x'], groups: [ops]}\n",
            r"tools.yaml:3:\d+: access\[0\]\.tools\[1\]: access entry names no tool "
            r"with 'dep\*x'",
        ),
        (
            "permissions:\n  ask:\n    - {rule: status, caller: {group: [dev]}}\n",
            r"tools.yaml:4:\d+: permissions\.ask\[0\]\.caller\.group: unknown key 'group'.*"
            r"did you mean 'groups'",
        ),
        (
            "permissions:\n  ask:\n    - {rul: status, caller: {groups: [dev]}}\n",
            r"tools.yaml:4:\d+: permissions\.ask\[0\]\.rul: unknown key 'rul'.*did you mean 'rule'",
        ),
    ],
)
def test_bad_access_and_caller_keys_fail_validate_where_they_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, expected: str
) -> None:
    path = manifest(tmp_path, body)
    with pytest.raises(ManifestError, match=expected):
        create_toolkit(path)
    assert main(["validate", str(path)]) != 0
    assert "tools.yaml:" in capsys.readouterr().err


def test_a_bad_caller_key_in_a_tools_rule_is_located(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        """
        version: 1
        tools:
          - name: status
            command: [echo, fine]
            approval:
              rules:
                - {decision: allow, caller: {rols: [admin]}}
        """,
    )
    with pytest.raises(ManifestError, match=r"tools.yaml:7:\d+: .*rols.*did you mean 'roles'"):
        create_toolkit(path)


async def test_rate_limit_per_caller_counts_each_caller_and_tool_apart(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        "middleware:\n  - rate_limit: {calls: 1, per: 1h, max_wait: 0, per_caller: true}\n",
    )
    with create_toolkit(path) as toolkit:
        outcomes = []
        for caller, tool in [
            (ALICE, "status"),
            (ALICE, "status"),
            (BOB, "status"),
            (ALICE, "deploy_app"),
            (None, "status"),
            (None, "status"),
        ]:
            with acting_as(caller):
                result = await toolkit.aexecute(tool)
            outcomes.append(result.metadata.get("error_type"))
    assert outcomes == [None, "RateLimited", None, None, None, "RateLimited"]


async def test_the_audit_record_names_the_caller(tmp_path: Path) -> None:
    path = manifest(tmp_path, "middleware:\n  - audit: audit.jsonl\n")
    with create_toolkit(path) as toolkit:
        with acting_as(ALICE):
            await toolkit.aexecute("status")
        await toolkit.aexecute("status")
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert records[0]["caller"] == {
        "subject": "alice",
        "issuer": "https://id.example",
        "client_id": None,
        "groups": ["ops"],
        "roles": ["admin"],
    }
    assert records[1]["caller"] is None


async def test_tool_search_does_not_reveal_tools_the_caller_may_not_see(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        """
        tool_search: {defer: ["*"]}
        access:
          - {tools: [deploy_db], groups: [ops]}
        """,
    )
    with create_toolkit(path) as toolkit:
        with acting_as(BOB):
            bob = await toolkit.aexecute("tool_search", {"query": "deploy migrate", "limit": 5})
        with acting_as(ALICE):
            alice = await toolkit.aexecute("tool_search", {"query": "deploy migrate", "limit": 5})
    assert "deploy_db" not in bob.content
    assert "deploy_db" in alice.content
