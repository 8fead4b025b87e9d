"""Shipping tool sets: includes from an installed package (`tests/fixtures/acme_tools`, installed
with `pip install -e tests/fixtures/acme_tools`), adjustments, stricter overrides, company denies
that a team cannot lift, duplicates and cycles, and the `configs/team/` example end to end."""

from __future__ import annotations

import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from toolnexus import Decision, create_toolkit
from toolnexus.approval import ApprovalRequest
from toolnexus.cli import main
from toolnexus.errors import DuplicateToolError, IncludeError, ManifestError

ROOT = Path(__file__).resolve().parent.parent
TEAM = ROOT / "configs" / "team"


@pytest.fixture(autouse=True)
def acme_installed() -> None:
    """Fail loudly (not skip) when the example package is missing from the environment."""
    names = {ep.name for ep in entry_points(group="toolnexus.toolsets")}
    assert "acme" in names, "run: pip install -e tests/fixtures/acme_tools"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def yes(request: ApprovalRequest) -> bool:
    return True


ACME = ["deploy", "list_tickets", "purge_cache", "ticket_status"]


# -- from the package ------------------------------------------------------------------------------


@pytest.mark.parametrize("ref", ["package:acme_tools/tools.yaml", "toolset:acme"])
def test_package_tool_set_loads_and_runs(tmp_path: Path, ref: str) -> None:
    path = write(tmp_path, "tools.yaml", f"version: 1\ninclude: ['{ref}']\n")
    with create_toolkit(path, approver=yes) as tk:
        assert tk.names() == ACME
        assert tk.execute("ticket_status", {"ticket": "ACME-1"}).content == "ACME-1: open"
        assert "ACME-2" in tk.execute("list_tickets").text
        assert tk.check("deploy", {"service": "web"}).decision is Decision.ASK
        assert tk.execute("deploy", {"service": "web"}).content.strip() == "deploying web"
        deploy = tk.get("deploy")
        assert deploy is not None and deploy.sandbox is not None
        assert deploy.sandbox.filesystem == "read-only" and deploy.sandbox.network is False
        # Located in the package's own file, wherever it is installed.
        assert deploy.origin is not None and "acme_tools/tools.yaml" in deploy.origin


def test_only_exclude_and_prefix(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        """\
        version: 1
        include:
          - {path: "toolset:acme", prefix: acme_, only: ["*ticket*", deploy], exclude: [list_*]}
        """,
    )
    with create_toolkit(path) as tk:
        assert tk.names() == ["acme_deploy", "acme_ticket_status"]
        assert tk.execute("acme_ticket_status", {"ticket": "ACME-2"}).content == "ACME-2: closed"


def test_unknown_tool_set_or_package_says_what_to_do(tmp_path: Path) -> None:
    path = write(tmp_path, "tools.yaml", "version: 1\ninclude: ['toolset:acm']\n")
    with pytest.raises(IncludeError, match=r"did you mean 'acme'\?") as info:
        create_toolkit(path)
    assert (info.value.file, info.value.line) == (str(path), 2)

    path = write(tmp_path, "other.yaml", "version: 1\ninclude: ['package:acme_toolz/tools.yaml']\n")
    with pytest.raises(IncludeError, match=r"'acme_toolz' is not installed.*pip install"):
        create_toolkit(path)


# -- overrides -------------------------------------------------------------------------------------


def test_overrides_make_tools_stricter(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        """\
        version: 1
        include:
          - path: toolset:acme
            override:
              ticket_status: {approval: ask}
              purge_cache: {approval: deny}
              deploy: {sandbox: {max_processes: 8}}
        """,
    )
    with create_toolkit(path) as tk:
        assert tk.check("ticket_status", {"ticket": "ACME-1"}).decision is Decision.ASK
        refused = tk.execute("ticket_status", {"ticket": "ACME-1"})  # no approver: fail closed
        assert refused.is_error and refused.metadata["error_type"] == "ApprovalDenied"
        assert tk.check("purge_cache", {"path": "x"}).decision is Decision.DENY
        deploy = tk.get("deploy")
        assert deploy is not None and deploy.sandbox is not None
        assert deploy.sandbox.max_processes == 8
        assert deploy.sandbox.network is False  # the package's own setting is kept
        assert tk.check("deploy", {"service": "x"}).decision is Decision.ASK


LOOSER = {
    "approval": "deploy: {approval: allow}",
    "sandbox": "deploy: {sandbox: {network: true}}",
    "unix_sockets": "deploy: {sandbox: {unix_sockets: [/run/docker.sock]}}",
}


@pytest.mark.parametrize("what", sorted(LOOSER))
def test_an_override_may_not_loosen(tmp_path: Path, what: str) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        f"version: 1\ninclude:\n  - path: toolset:acme\n    override:\n      {LOOSER[what]}\n",
    )
    with pytest.raises(ManifestError, match="an include override may only tighten") as info:
        create_toolkit(path)
    assert len(info.value.issues) == 1


@pytest.mark.parametrize("what", sorted(LOOSER))
def test_a_loosening_override_is_located_where_it_is_written(tmp_path: Path, what: str) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        f"version: 1\ninclude:\n  - path: toolset:acme\n    override:\n      {LOOSER[what]}\n",
    )
    with pytest.raises(ManifestError) as info:
        create_toolkit(path)
    assert (info.value.file, info.value.line) == (str(path), 5)


# -- company and team ------------------------------------------------------------------------------


COMPANY = """\
version: 1
permissions:
  deny: [purge_cache, "deploy(service:prod*)"]
"""


def test_a_team_cannot_allow_what_the_company_denies(tmp_path: Path) -> None:
    write(tmp_path, "company.yaml", COMPANY)
    path = write(
        tmp_path,
        "team.yaml",
        """\
        version: 1
        include: [company.yaml, "toolset:acme"]
        defaults: {approval: allow}
        permissions:
          allow: [purge_cache, deploy, "deploy(service:prod*)"]
        """,
    )
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.tool.name)
        return True

    with create_toolkit(path, approver=approver) as tk:
        assert "purge_cache" not in tk.names()  # a bare deny hides the tool
        hidden = tk.execute("purge_cache", {"path": "/"})
        assert hidden.is_error and hidden.metadata["error_type"] == "ApprovalDenied"
        prod = tk.execute("deploy", {"service": "prod-eu"})
        assert prod.is_error and "deny deploy(service:prod*)" in prod.content
        assert f"{tmp_path / 'company.yaml'}:3" in prod.content
        # The team's allow does not lift the package's own `approval: ask` either.
        assert tk.execute("deploy", {"service": "staging"}).content.strip() == "deploying staging"
        assert asked == ["deploy"]


def test_a_prefix_does_not_evade_a_company_deny(tmp_path: Path) -> None:
    write(tmp_path, "company.yaml", COMPANY)
    path = write(
        tmp_path,
        "team.yaml",
        'version: 1\ninclude: [company.yaml, {path: "toolset:acme", prefix: x_}]\n',
    )
    with create_toolkit(path, approver=yes) as tk:
        assert tk.execute("x_purge_cache", {"path": "/"}).is_error
        assert tk.execute("x_deploy", {"service": "prod-eu"}).is_error


# -- duplicates and cycles -------------------------------------------------------------------------


def test_duplicate_names_across_includes_show_both_chains(tmp_path: Path) -> None:
    write(tmp_path, "x/deploy.yaml", "version: 1\ntools:\n  - {name: deploy, command: [echo]}\n")
    write(tmp_path, "y/team.yaml", "version: 1\ninclude: [../x/deploy.yaml]\n")
    path = write(tmp_path, "tools.yaml", "version: 1\ninclude: [y/team.yaml, 'toolset:acme']\n")
    with pytest.raises(DuplicateToolError) as info:
        create_toolkit(path)
    message = str(info.value)
    assert "tool 'deploy' is defined twice" in message
    assert f"included via y/team.yaml at {path}:2" in message
    assert "-> ../x/deploy.yaml at" in message
    assert f"included via toolset:acme at {path}:2" in message
    assert "prefix" in message  # says how to fix it


def test_the_same_tool_set_included_twice_is_one_include(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        "version: 1\ninclude: ['package:acme_tools/tools.yaml', 'toolset:acme']\n",
    )
    with create_toolkit(path) as tk:
        assert tk.names() == ACME


def test_duplicate_of_a_built_name_shows_the_include_chain(tmp_path: Path) -> None:
    spec = (ROOT / "tests" / "fixtures" / "http" / "petstore.yaml").read_text()
    write(tmp_path, "api/petstore.yaml", spec)
    write(
        tmp_path,
        "api/api.yaml",
        "version: 1\ntools:\n  - {openapi: petstore.yaml, base_url: 'http://127.0.0.1:1'}\n",
    )
    path = write(
        tmp_path,
        "tools.yaml",
        "version: 1\ninclude: [api/api.yaml]\ntools:\n  - {name: listPets, command: [echo]}\n",
    )
    with pytest.raises(DuplicateToolError) as info:
        create_toolkit(path)
    assert f"included via api/api.yaml at {path}:2" in str(info.value)
    assert info.value.line is not None


def test_include_cycle_shows_the_chain(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", "version: 1\ninclude: [a.yaml]\n")
    path = write(tmp_path, "a.yaml", "version: 1\ninclude: [b.yaml]\n")
    with pytest.raises(IncludeError, match="include cycle") as info:
        create_toolkit(path)
    assert f"{path} -> {tmp_path / 'b.yaml'} -> {path}" in str(info.value)


# -- configs/team ----------------------------------------------------------------------------------


def test_team_example_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(TEAM / "company.yaml"), str(TEAM / "team.yaml")]) == 0
    assert "2 files checked: 2 ok, 0 invalid" in capsys.readouterr().out


def test_team_example_end_to_end(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SECRET=1\n")
    (tmp_path / ".env.example").write_text("SECRET=\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_init.sql").write_text("create table t (id int);\n")
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.tool.name)
        return True

    with create_toolkit(TEAM / "team.yaml", workspace=tmp_path, approver=approver) as tk:
        assert tk.names() == [
            "git_log",
            "git_status",
            "glob",
            "grep",
            "list_migrations",
            "read",
        ]
        assert "hello" in tk.execute("read", {"path": "notes.txt"}).content
        for secret in (".env", ".env.example"):  # the team's allow does not lift the deny
            denied = tk.execute("read", {"path": secret})
            assert denied.is_error and "deny read(**/.env*)" in denied.content
            assert "company.yaml" in denied.content
        listed = tk.execute("list_migrations")
        assert not listed.is_error and "0001_init.sql" in listed.content
        assert tk.check("git_log", {"count": 3}).decision is Decision.ASK
        assert tk.check("git_status").decision is Decision.ALLOW
        status = tk.get("git_status")
        assert status is not None and status.sandbox is not None
        assert status.sandbox.filesystem == "read-only" and status.sandbox.network is False
    assert asked == []


def test_the_builtin_tool_set_can_be_included_by_name(tmp_path: Path) -> None:
    path = write(tmp_path, "tools.yaml", "version: 1\ninclude: ['toolset:builtin']\n")
    with create_toolkit(path) as tk:
        assert {"read", "grep", "glob"} <= set(tk.names())
