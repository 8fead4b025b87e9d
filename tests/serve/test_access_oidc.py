"""Per-caller policy end to end: `toolnexus serve --http` checks OAuth tokens from a real OpenID
provider, and what each user sees and may run depends on their groups. alice is in `ops`, bob
in `dev` (`tests/fixtures/oidc/provider.mjs`); both clients (the Python SDK's OAuth provider
and the TypeScript SDK's) log in by discovery alone."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from ..conftest import free_port
from ..test_serve import TOKEN, http_client, serving
from .oidc import FOLDER, Team, node_or_skip, serving_team
from .test_identity_oidc import REDIRECT, WAIT, connected, user_login, whoami

pytestmark = pytest.mark.anyio

TOOLS = '''
from toolnexus.serve import current_caller


def whoami() -> str:
    """Who the server says is calling."""
    caller = current_caller()
    return "nobody" if caller is None else f"{caller.subject} groups={','.join(caller.groups)}"


def deploy_app() -> str:
    """Deploy the application."""
    return "deployed"


def status() -> str:
    """Say how the application is."""
    return "all fine"
'''

MANIFEST = """
version: 1
name: team-tools
serve:
  auth:
    issuer: {issuer}
    audience: {audience}
    required_scopes: [mcp]
middleware:
  - audit: audit.jsonl
access:
  - tools: ["deploy*"]
    groups: [ops]
permissions:
  ask:
    - rule: status
      caller: {{groups: [dev]}}
  allow:
    - rule: status
      caller: {{groups: [ops]}}
tools:
  - {{name: whoami, python: "team:whoami", read_only: true}}
  - {{name: deploy_app, python: "team:deploy_app"}}
  - {{name: status, python: "team:status", read_only: true}}
"""


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    with serving_team(tmp_path_factory.mktemp("access"), {"team.py": TOOLS}, MANIFEST) as team:
        yield team


def audit(team: Team) -> list[dict[str, object]]:
    lines = (team.folder / "audit.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def test_each_group_lists_only_its_tools(team: Team) -> None:
    with anyio.fail_after(WAIT * 2):
        async with connected(team.url, auth=user_login(team.url, "alice")) as client:
            alice = sorted(t.name for t in (await client.list_tools()).tools)
        async with connected(team.url, auth=user_login(team.url, "bob")) as client:
            bob = sorted(t.name for t in (await client.list_tools()).tools)
    assert alice == ["deploy_app", "status", "whoami"]
    assert bob == ["status", "whoami"]


async def test_a_hidden_tool_is_refused_as_if_unknown(team: Team) -> None:
    with anyio.fail_after(WAIT * 2):
        async with connected(team.url, auth=user_login(team.url, "bob")) as client:
            refused = await client.call_tool("deploy_app", {})
            unknown = await client.call_tool("no_such_tool", {})
        async with connected(team.url, auth=user_login(team.url, "alice")) as client:
            ran = await client.call_tool("deploy_app", {})
    assert refused.is_error and unknown.is_error
    text = refused.content[0]
    assert text.type == "text"
    # Nothing tells bob that deploy_app exists: the unknown tool's words, and no suggestion of it.
    assert text.text.startswith("unknown tool 'deploy_app'")
    assert "deploy_app" not in text.text.removeprefix("unknown tool 'deploy_app'")
    assert not ran.is_error
    assert ran.content[0].type == "text" and ran.content[0].text == "deployed"


async def test_a_rule_asks_one_group_and_allows_another(team: Team) -> None:
    with anyio.fail_after(WAIT * 2):
        async with connected(team.url, auth=user_login(team.url, "alice")) as client:
            allowed = await client.call_tool("status", {})
        async with connected(team.url, auth=user_login(team.url, "bob")) as client:
            asked = await client.call_tool("status", {})
    assert not allowed.is_error
    assert allowed.content[0].type == "text" and allowed.content[0].text == "all fine"
    # bob's client declared no elicitation: the question cannot reach him, so the call is
    # refused saying it needs his approval (the rule that asked is named).
    assert asked.is_error
    text = asked.content[0]
    assert text.type == "text"
    assert "needs the user's approval" in text.text
    assert "callers with groups dev" in text.text


async def test_the_audit_record_names_the_caller(team: Team) -> None:
    with anyio.fail_after(WAIT * 2):
        async with connected(team.url, auth=user_login(team.url, "alice")) as client:
            assert (await whoami(client)) == "alice groups=ops"
    record = [r for r in audit(team) if r["tool"] == "whoami"][-1]
    caller = record["caller"]
    assert isinstance(caller, dict)
    assert caller["subject"] == "alice"
    assert caller["groups"] == ["ops"]
    assert caller["issuer"] == team.provider.issuer


def run_ts_client(team: Team, user: str, hidden: str) -> dict[str, object]:
    node = node_or_skip()
    done = subprocess.run(
        [node, str(FOLDER / "ts_client.mjs"), team.url, REDIRECT, user, hidden],
        cwd=FOLDER,
        check=False,
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_typescript_client_gets_only_its_groups_tools(team: Team) -> None:
    bob = run_ts_client(team, "bob", "deploy_app")
    assert sorted(bob["tools"]) == ["status", "whoami"]  # type: ignore[arg-type]
    assert bob["whoami"] == "bob groups=dev"
    hidden = bob["hidden"]
    assert isinstance(hidden, dict)
    assert hidden["isError"] is True
    assert str(hidden["text"]).startswith("unknown tool 'deploy_app'")
    alice = run_ts_client(team, "alice", "deploy_app")
    assert sorted(alice["tools"]) == ["deploy_app", "status", "whoami"]  # type: ignore[arg-type]
    assert alice["hidden"] == {"isError": False, "text": "deployed"}


STATIC = """
version: 1
access:
  - {tools: ["deploy*"], groups: [ops]}
  - {tools: [status], subjects: [token]}
tools:
  - {name: whoami, python: "team:whoami", read_only: true}
  - {name: deploy_app, python: "team:deploy_app"}
  - {name: status, python: "team:status", read_only: true}
"""


async def test_a_static_token_is_one_caller_named_token(tmp_path: Path) -> None:
    (tmp_path / "team.py").write_text(textwrap.dedent(TOOLS).lstrip())
    (tmp_path / "tools.yaml").write_text(STATIC)
    port = free_port()
    args = [str(tmp_path / "tools.yaml"), "--http", f"127.0.0.1:{port}", "--token", TOKEN]
    with serving(args, cwd=tmp_path, ready="Application startup complete"):
        with anyio.fail_after(WAIT):
            async with http_client(f"http://127.0.0.1:{port}/mcp") as client:
                tools = sorted(t.name for t in (await client.list_tools()).tools)
                said = await whoami(client)
                refused = await client.call_tool("deploy_app", {})
    # The token's holder is known by no claim: access entries apply as to anyone.
    assert said == "token groups="
    assert tools == ["status", "whoami"]
    assert refused.is_error


async def test_without_any_authentication_serve_warns_that_access_holds_nobody(
    tmp_path: Path,
) -> None:
    (tmp_path / "team.py").write_text(textwrap.dedent(TOOLS).lstrip())
    (tmp_path / "tools.yaml").write_text(STATIC)
    port = free_port()
    args = [str(tmp_path / "tools.yaml"), "--http", f"127.0.0.1:{port}"]  # no token
    started: list[str] = []
    with serving(args, cwd=tmp_path, ready="startup complete", lines=started):
        with anyio.fail_after(WAIT):
            async with http_client(f"http://127.0.0.1:{port}/mcp", token=None) as client:
                tools = sorted(t.name for t in (await client.list_tools()).tools)
    warnings = [line for line in started if "warning" in line]
    assert warnings, started
    warned = warnings[0]
    assert "access: entries apply to identified callers" in warned
    assert "every client sees and may call every tool" in warned
    assert tools == ["deploy_app", "status", "whoami"]
