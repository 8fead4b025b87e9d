"""Curated arguments: renamed, hidden behind a fixed value, defaulted and narrowed, for every
kind of tool (a Python function, a shell command, an HTTP endpoint on 127.0.0.1, an OpenAPI
operation, a real MCP server over stdio), in the manifest and in an include's override, and
what `serve` publishes. Rules see the final arguments under the upstream names."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

from toolnexus import (
    ConfigError,
    Executor,
    Registry,
    create_toolkit,
    curate,
    get_adapter,
    load_manifest,
    tool,
)
from toolnexus.cli import main
from toolnexus.errors import ManifestError

from .conftest import QuietHandler, start_http_server, stop_http_server

REPO = Path(__file__).resolve().parents[1]

ISSUES = '''
def list_issues(owner: str, repo: str, state: str = "open", per_page: int = 30,
                label: str | None = None) -> str:
    """List a repository's issues.

    Args:
        owner: The account that owns the repository.
        repo: The repository.
        state: open, closed or all.
        per_page: Issues per page (at most 100).
        label: Only issues with this label.
    """
    return f"{owner}/{repo} state={state} per_page={per_page} label={label}"
'''

CURATED = """
    arguments:
      repo: {rename: repository}
      owner: {value: acme}
      per_page: {default: 20, maximum: 50}
      state: {enum: [open, closed]}
"""


def manifest(folder: Path, body: str, name: str = "tools.yaml") -> Path:
    path = folder / name
    path.write_text("version: 1\n" + textwrap.dedent(body).lstrip())
    return path


def python_manifest(folder: Path, extra: str = CURATED, approval: str = "") -> Path:
    (folder / "issues.py").write_text(ISSUES)
    return manifest(
        folder,
        "tools:\n  - name: list_issues\n    python: issues:list_issues\n"
        + textwrap.indent(textwrap.dedent(approval).strip("\n"), "    ")
        + ("\n" if approval else "")
        + textwrap.indent(textwrap.dedent(extra).strip("\n"), "    ")
        + "\n",
    )


def load_error(path: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        create_toolkit(path).close()
    return str(caught.value)


# -- the published schema and the call -------------------------------------------------------


def test_the_published_schema_is_the_curated_one(tmp_path: Path) -> None:
    with create_toolkit(python_manifest(tmp_path)) as toolkit:
        t = toolkit.get("list_issues")
        assert t is not None
        props = t.parameters["properties"]
        assert list(props) == ["repository", "state", "per_page", "label"]  # owner is gone
        assert t.parameters["required"] == ["repository"]
        assert props["per_page"]["default"] == 20 and props["per_page"]["maximum"] == 50
        assert props["state"]["enum"] == ["open", "closed"]
        assert "(at most 100)" in props["per_page"]["description"]  # upstream's text kept
        for provider in ("openai-chat", "anthropic", "gemini"):
            text = json.dumps(get_adapter(provider).tools(toolkit.tools()), default=str)
            assert "repository" in text and '"owner"' not in text, provider


def test_calls_are_mapped_back_with_fixed_values_and_defaults(tmp_path: Path) -> None:
    with create_toolkit(python_manifest(tmp_path)) as toolkit:
        done = toolkit.execute("list_issues", {"repository": "web"})
        assert done.content == "acme/web state=open per_page=20 label=None"
        done = toolkit.execute("list_issues", {"repository": "web", "per_page": 5})
        assert done.content == "acme/web state=open per_page=5 label=None"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"repository": "web", "owner": "evil"}, "argument 'owner' is fixed by the toolkit"),
        ({"repo": "web"}, "argument 'repo' is called 'repository' here"),
        ({"repository": "web", "per_page": 51}, "51 is greater than the maximum of 50"),
        ({"repository": "web", "state": "all"}, "'all' is not one of ['open', 'closed']"),
    ],
)
def test_what_the_curation_refuses_is_an_invalid_arguments_result(
    tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    with create_toolkit(python_manifest(tmp_path)) as toolkit:
        result = toolkit.execute("list_issues", arguments)
        assert result.is_error and result.metadata["error_type"] == "InvalidArguments"
        assert expected in result.content
        assert "acme" not in result.content and "evil/" not in result.content


def test_rules_see_the_final_arguments_under_the_upstream_names(tmp_path: Path) -> None:
    """A rule on `repo` holds whatever the argument is called now, and a rule on a defaulted
    argument sees the default the model left out."""
    path = python_manifest(
        tmp_path,
        extra="""
        arguments:
          repo: {rename: repository}
          owner: {default: evil}
        """,
        approval="""
        approval:
          rules:
            - {decision: deny, when: {repo: secret}, reason: secret repository}
            - {decision: deny, when: {owner: evil}, reason: not that account}
        """,
    )
    with create_toolkit(path) as toolkit:
        denied = toolkit.execute("list_issues", {"repository": "secret", "owner": "acme"})
        assert denied.is_error and "secret repository" in denied.content
        defaulted = toolkit.execute("list_issues", {"repository": "web"})
        assert defaulted.is_error and "not that account" in defaulted.content
        assert toolkit.check("list_issues", {"repository": "web"}).decision.value == "deny"
        fine = toolkit.execute("list_issues", {"repository": "web", "owner": "acme"})
        assert fine.content.startswith("acme/web")


def test_a_rule_naming_the_curated_name_is_told_which_name_rules_read(tmp_path: Path) -> None:
    path = python_manifest(
        tmp_path,
        extra="arguments: {repo: {rename: repository}}",
        approval="""
        approval:
          rules:
            - {decision: deny, when: {repository: secret}}
        """,
    )
    text = load_error(path)
    assert "tools[0].approval.rules[0].when.repository" in text
    assert "'repository' is the curated name of 'repo': write 'repo'" in text


def test_a_permission_on_a_hidden_argument_still_holds(tmp_path: Path) -> None:
    """`owner` is hidden behind a fixed value: the toolkit-wide deny on it still applies to
    every call, since rules read the final arguments and the tool's upstream schema."""
    (tmp_path / "issues.py").write_text(ISSUES)
    path = manifest(
        tmp_path,
        """
        permissions:
          deny: ["list_issues(owner:evil)"]
        tools:
          - name: list_issues
            python: issues:list_issues
            arguments: {owner: {value: evil}}
        """,
    )
    with create_toolkit(path) as toolkit:
        assert "owner" not in toolkit.get("list_issues").parameters["properties"]  # type: ignore[union-attr]
        denied = toolkit.execute("list_issues", {"repo": "web"})
        assert denied.is_error and "denied" in denied.content


def test_the_approver_is_asked_about_the_final_arguments(tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []

    def approver(request: Any) -> bool:
        asked.append(dict(request.arguments))
        return True

    path = python_manifest(tmp_path, approval="approval: ask")
    with create_toolkit(path, approver=approver) as toolkit:
        assert not toolkit.execute("list_issues", {"repository": "web"}).is_error
    assert asked == [{"repo": "web", "owner": "acme", "per_page": 20}]


# -- in code --------------------------------------------------------------------------------


@tool
def search(query: str, limit: int = 10, scope: str = "all") -> str:
    """Search.

    Args:
        query: What to look for.
        limit: How many results.
        scope: Where to look.
    """
    return f"{query}:{limit}:{scope}"


def test_curating_twice_narrows_what_the_first_published() -> None:
    first = curate(search, {"query": {"rename": "q"}, "limit": {"maximum": 20}})
    second = curate(first, {"q": {"rename": "text"}, "limit": {"maximum": 5}})
    assert list(second.parameters["properties"]) == ["text", "limit", "scope"]
    assert second.curation is not None
    assert second.curation.upstream({"text": "x"}) == {"query": "x"}
    assert second.curation.refusals({"q": "x"}) == [
        ("$.q", "argument 'q' is called 'text' here; send 'text' instead")
    ]
    with pytest.raises(ConfigError) as widened:
        curate(first, {"limit": {"maximum": 50}})
    assert widened.value.field == "limit.maximum"
    assert "the tool's own maximum is 20" in widened.value.message
    with pytest.raises(ConfigError) as gone:
        curate(curate(search, {"scope": {"value": "all"}}), {"scope": {"enum": ["all"]}})
    assert gone.value.field == "scope" and "no argument 'scope'" in gone.value.message


def test_a_hidden_optional_argument_is_left_out_and_refused() -> None:
    curated = curate(search, {"scope": {"hide": True}})
    assert list(curated.parameters["properties"]) == ["query", "limit"]
    assert curated.curation is not None
    assert curated.curation.upstream({"query": "x"}) == {"query": "x"}  # the tool's default
    assert curated.curation.refusals({"query": "x", "scope": "docs"}) == [
        ("$.scope", "argument 'scope' is not offered by the toolkit; leave it out")
    ]


@tool
def find(name: str) -> str:
    """Find by name.

    Args:
        name: Lower-case letters.
    """
    return name


def test_a_pattern_holds_beside_the_tools_own() -> None:
    own = curate(find, {"name": {"pattern": "^[a-z]+$"}})
    both = curate(own, {"name": {"pattern": "^ab"}})
    prop = both.parameters["properties"]["name"]
    assert prop["pattern"] == "^ab" and prop["allOf"] == [{"pattern": "^[a-z]+$"}]
    executor = Executor(Registry([both]))
    assert asyncio.run(executor.execute("find", {"name": "abc"})).content == "abc"
    assert asyncio.run(executor.execute("find", {"name": "ab1"})).is_error  # the tool's own
    assert asyncio.run(executor.execute("find", {"name": "cab"})).is_error  # the curated one


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"querry": {"rename": "q"}}, "querry", "did you mean 'query'?"),
        ({"query": {"renme": "q"}}, "query.renme", "did you mean 'rename'?"),
        ({"query": {"rename": "limit"}}, "query.rename", "two arguments would be called 'limit'"),
        ({"query": {"hide": True}}, "query.hide", "required by the tool: give it a fixed `value`"),
        ({"limit": {"value": "ten"}}, "limit.value", "'ten' is not of type 'integer'"),
        ({"limit": {"default": 30, "maximum": 20}}, "limit.default", "greater than the maximum"),
        ({"limit": {"minimum": 5, "maximum": 2}}, "limit.minimum", "no value would be accepted"),
        ({"query": {"maximum": 3}}, "query.maximum", "maximum narrows numbers, and 'query' is"),
        ({"limit": {"pattern": "^1"}}, "limit.pattern", "pattern narrows strings"),
        ({"query": {"pattern": "("}}, "query.pattern", "not a valid regular expression"),
        ({"scope": {"value": "all", "default": "all"}}, "scope.default", "has no effect"),
        ({"limit": {"enum": [1, "x"]}}, "limit.enum", "'x' is not a value 'limit' accepts"),
    ],
)
def test_bad_curations_name_the_argument_and_key(
    arguments: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        curate(search, arguments)
    assert caught.value.field == field
    assert message in caught.value.message


def test_an_enum_must_stay_within_the_upstream_enum() -> None:
    narrowed = curate(search, {"scope": {"enum": ["all", "docs"]}})
    with pytest.raises(ConfigError) as caught:
        curate(narrowed, {"scope": {"enum": ["docs", "code"]}})
    assert caught.value.field == "scope.enum"
    assert "'code' is not a value 'scope' accepts" in caught.value.message


# -- manifest errors -------------------------------------------------------------------------


def test_manifest_errors_are_located_with_the_field(tmp_path: Path) -> None:
    path = python_manifest(
        tmp_path,
        extra="""
        arguments:
          ownr: {value: acme}
        """,
    )
    text = load_error(path)
    assert "tools.yaml:6:" in text
    assert "tools[0].arguments.ownr" in text and "did you mean 'owner'?" in text


def test_a_typo_in_a_curation_key_fails_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = python_manifest(tmp_path, extra="arguments: {owner: {valeu: acme}}")
    assert main(["validate", str(path)]) != 0
    err = capsys.readouterr().err
    assert "tools.yaml:5:" in err and "valeu" in err and "did you mean 'value'?" in err


def test_a_fixed_value_must_be_valid_upstream(tmp_path: Path) -> None:
    path = python_manifest(tmp_path, extra="arguments: {per_page: {value: many}}")
    text = load_error(path)
    assert "tools[0].arguments.per_page.value" in text and "'many' is not of type" in text


def test_curated_names_reach_the_model_so_env_values_are_refused(tmp_path: Path) -> None:
    path = python_manifest(tmp_path, extra="arguments: {repo: {rename: '${NAME}'}}")
    text = load_error(path)
    assert "a curated argument" in text


def test_only_curation_fields_count_as_model_text(tmp_path: Path) -> None:
    """An environment variable that happens to be called `arguments` is not a curation."""
    path = manifest(tmp_path, "mcp_servers:\n  s: {command: echo, env: {arguments: '${X}'}}\n")
    assert load_manifest(path, env={"X": "secret-value"}).mcp_servers[0].name == "s"


def test_a_fixed_value_may_come_from_the_environment(tmp_path: Path) -> None:
    path = python_manifest(tmp_path, extra="arguments: {owner: {value: '${ORG}'}}")
    with create_toolkit(path, env={"ORG": "acme-corp"}) as toolkit:
        done = toolkit.execute("list_issues", {"repo": "web"})
        assert done.content.startswith("acme-corp/web")


# -- shell and HTTP --------------------------------------------------------------------------


def test_a_shell_tool(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        """
        tools:
          - name: greet
            command: [echo, "{greeting}", "{name}"]
            parameters:
              type: object
              properties:
                greeting: {type: string}
                name: {type: string, maxLength: 20}
              required: [greeting, name]
            arguments:
              greeting: {value: hello}
              name: {rename: who, maxLength: 8, pattern: "^[a-z]+$"}
            sandbox: {filesystem: read-only, network: false}
        """,
    )
    with create_toolkit(path) as toolkit:
        assert toolkit.execute("greet", {"who": "ada"}).content.strip() == "hello ada"
        refused = toolkit.execute("greet", {"who": "ada", "greeting": "rm"})
        assert refused.is_error and "argument 'greeting' is fixed" in refused.content
        assert toolkit.execute("greet", {"who": "Ada"}).is_error  # the curated pattern


class _Echo(QuietHandler):
    """Answers every GET with the path and query it received, as JSON."""

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        body = json.dumps({"path": parts.path, "query": query}).encode()
        self.send(200, "application/json", body)


@pytest.fixture
def echo_server() -> Iterator[str]:
    httpd: ThreadingHTTPServer = start_http_server(_Echo)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        stop_http_server(httpd)


def test_an_http_tool(tmp_path: Path, echo_server: str) -> None:
    path = manifest(
        tmp_path,
        f"""
        tools:
          - name: issues
            http:
              url: "{echo_server}/repos/{{owner}}/{{repo}}/issues"
              query: {{per_page: "{{per_page}}"}}
              response: {{format: text}}
            parameters:
              type: object
              properties:
                owner: {{type: string}}
                repo: {{type: string}}
                per_page: {{type: integer, maximum: 100}}
              required: [owner, repo, per_page]
            arguments:
              owner: {{value: acme}}
              per_page: {{default: 20, maximum: 50}}
        """,
    )
    with create_toolkit(path) as toolkit:
        answer = json.loads(toolkit.execute("issues", {"repo": "web"}).content)
        assert answer == {"path": "/repos/acme/web/issues", "query": {"per_page": "20"}}


OPENAPI = """
openapi: 3.0.3
info: {title: Issues, version: "1"}
paths:
  /repos/{owner}/{repo}/issues:
    get:
      operationId: listIssues
      parameters:
        - {name: owner, in: path, required: true, schema: {type: string}}
        - {name: repo, in: path, required: true, schema: {type: string}}
        - {name: state, in: query, schema: {type: string, enum: [open, closed, all]}}
      responses: {"200": {description: ok}}
  /repos/{owner}/{repo}/pulls:
    get:
      operationId: listPulls
      parameters:
        - {name: owner, in: path, required: true, schema: {type: string}}
        - {name: repo, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
"""


def test_an_openapi_source(tmp_path: Path, echo_server: str) -> None:
    (tmp_path / "issues.yaml").write_text(OPENAPI)
    path = manifest(
        tmp_path,
        f"""
        tools:
          - openapi: issues.yaml
            base_url: "{echo_server}"
            prefix: gh_
            arguments:
              "*": {{owner: {{value: acme}}}}
              listIssues: {{state: {{enum: [open, closed], default: open}}}}
        """,
    )
    with create_toolkit(path) as toolkit:
        for name in ("gh_listIssues", "gh_listPulls"):
            assert "owner" not in toolkit.get(name).parameters["properties"]  # type: ignore[union-attr]
        answer = json.loads(toolkit.execute("gh_listIssues", {"repo": "web"}).content)
        assert answer == {"path": "/repos/acme/web/issues", "query": {"state": "open"}}
        answer = json.loads(toolkit.execute("gh_listPulls", {"repo": "web"}).content)
        assert answer["path"] == "/repos/acme/web/pulls"
        wide = toolkit.execute("gh_listIssues", {"repo": "web", "state": "all"})
        assert wide.is_error


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            "listIssue: {owner: {value: acme}}",
            [
                "tools.yaml:6:",
                "tools[0].arguments.listIssue:",
                "did you mean 'listIssues'?",
            ],
        ),
        (
            '"list*": {ownr: {value: acme}}',
            [
                "tools[0].arguments['list*'].ownr",
                "no tool 'list*' names has an argument 'ownr'; did you mean 'owner'?",
            ],
        ),
    ],
    ids=["a glob that names no tool", "a glob curating an argument no tool has"],
)
def test_an_openapi_glob_that_misses_is_an_error(
    tmp_path: Path, arguments: str, expected: list[str]
) -> None:
    (tmp_path / "issues.yaml").write_text(OPENAPI)
    path = manifest(
        tmp_path,
        f"""
        tools:
          - openapi: issues.yaml
            base_url: http://127.0.0.1:9
            arguments:
              {arguments}
        """,
    )
    text = load_error(path)
    for fragment in expected:
        assert fragment in text, text


# -- includes --------------------------------------------------------------------------------

TEAM = """
tools:
  - name: list_issues
    python: issues:list_issues
    arguments:
      owner: {value: acme}
      per_page: {maximum: 50}
      state: {enum: [open, closed]}
"""


def team_and_consumer(folder: Path, override: str) -> Path:
    (folder / "team").mkdir()
    (folder / "team" / "issues.py").write_text(ISSUES)
    manifest(folder / "team", TEAM)
    return manifest(
        folder,
        f"""
        include:
          - path: team/tools.yaml
            prefix: t_
            override:
              list_issues: {{arguments: {override}}}
        """,
        name="app.yaml",
    )


def test_an_override_narrows_what_the_included_manifest_published(tmp_path: Path) -> None:
    path = team_and_consumer(tmp_path, "{repo: {value: web}, per_page: {maximum: 10, default: 10}}")
    with create_toolkit(path) as toolkit:
        t = toolkit.get("t_list_issues")
        assert t is not None and list(t.parameters["properties"]) == ["state", "per_page", "label"]
        done = toolkit.execute("t_list_issues", {})
        assert done.content.startswith("acme/web state=open per_page=10")
        assert toolkit.execute("t_list_issues", {"per_page": 11}).is_error


@pytest.mark.parametrize(
    ("override", "field", "message"),
    [
        ("{per_page: {maximum: 100}}", "per_page.maximum", "the tool's own maximum is 50"),
        ("{state: {enum: [all]}}", "state.enum", "'all' is not a value 'state' accepts"),
        ("{owner: {value: evil}}", "owner", "an override curates what the included manifest"),
    ],
)
def test_an_override_may_not_widen_nor_unhide(
    tmp_path: Path, override: str, field: str, message: str
) -> None:
    text = load_error(team_and_consumer(tmp_path, override))
    assert "app.yaml:6:" in text  # located at the override, in the consumer's file
    assert f"arguments.{field}" in text and message in text


def test_an_override_glob_curating_an_argument_no_tool_has_is_an_error(tmp_path: Path) -> None:
    path = team_and_consumer(tmp_path, "{}")
    path.write_text(
        path.read_text().replace(
            "list_issues: {arguments: {}}", '"list_*": {arguments: {per_pag: {maximum: 5}}}'
        )
    )
    text = load_error(path)
    assert "app.yaml:6:" in text and "override['list_*'].arguments.per_pag" in text
    assert "did you mean 'per_page'?" in text


# -- MCP and serve ---------------------------------------------------------------------------

MCP_SERVER = '''
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("issues", version="1.0")


@server.tool()
def list_issues(owner: str, repo: str, per_page: int = 30) -> str:
    """List issues."""
    return f"{owner}/{repo} per_page={per_page}"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool that also takes an owner."""

    def added(owner: str, topic: str = "") -> str:
        return f"{name} for {owner} {topic}"

    server.add_tool(added, name=name, description=f"added as {name}")
    if ctx.protocol_version in ("2026-07-28",):
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


if __name__ == "__main__":
    server.run()
'''


def mcp_manifest(folder: Path) -> Path:
    (folder / "issues_server.py").write_text(MCP_SERVER)
    return manifest(
        folder,
        f"""
        name: curated
        mcp_servers:
          gh:
            command: {sys.executable}
            args: [issues_server.py]
            arguments:
              "*": {{owner: {{value: acme}}}}
              list_issues:
                repo: {{rename: repository}}
                per_page: {{default: 10, maximum: 20}}
        """,
    )


def test_an_mcp_servers_misspelt_curation_fails_the_build(tmp_path: Path) -> None:
    path = mcp_manifest(tmp_path)
    path.write_text(path.read_text().replace("{owner: {value: acme}}", "{ownr: {value: acme}}"))
    text = load_error(path)
    assert "mcp_servers.gh.arguments['*'].ownr" in text and "did you mean 'owner'?" in text


def test_an_mcp_server_and_the_tools_it_adds_later(tmp_path: Path) -> None:
    with create_toolkit(mcp_manifest(tmp_path)) as toolkit:
        t = toolkit.get("list_issues")
        assert t is not None and list(t.parameters["properties"]) == ["repository", "per_page"]
        done = toolkit.execute("list_issues", {"repository": "web"})
        assert done.content == "acme/web per_page=10"
        refused = toolkit.execute("list_issues", {"repository": "web", "owner": "evil"})
        assert refused.is_error and "argument 'owner' is fixed" in refused.content

        before = toolkit.generation
        assert not toolkit.execute("grow", {"name": "sprout"}).is_error
        deadline = time.monotonic() + 20
        while toolkit.get("sprout") is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the refresh lands on the toolkit's own thread
        assert toolkit.generation != before
        sprout = toolkit.get("sprout")
        assert sprout is not None and list(sprout.parameters["properties"]) == ["topic"]
        assert toolkit.execute("sprout", {"topic": "x"}).content == "sprout for acme x"
        assert toolkit.execute("sprout", {"owner": "evil"}).is_error


@pytest.mark.anyio
async def test_serve_lists_and_runs_the_curated_tool(tmp_path: Path) -> None:
    import mcp
    from mcp.client.stdio import StdioServerParameters

    (tmp_path / "issues.py").write_text(ISSUES)
    path = python_manifest(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolnexus", "serve", str(path)], env=env, cwd=tmp_path
    )
    with anyio.fail_after(60):
        async with mcp.Client(params, read_timeout_seconds=30) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            schema = listed["list_issues"].input_schema
            assert list(schema["properties"]) == ["repository", "state", "per_page", "label"]
            assert schema["required"] == ["repository"]
            assert schema["properties"]["per_page"]["default"] == 20
            done = await client.call_tool("list_issues", {"repository": "web"})
            assert done.content[0].text == "acme/web state=open per_page=20 label=None"  # type: ignore[union-attr]
            refused = await client.call_tool("list_issues", {"repository": "w", "owner": "x"})
            assert refused.is_error
            assert "argument 'owner' is fixed" in refused.content[0].text  # type: ignore[union-attr]


def test_tool_search_finds_the_curated_names(tmp_path: Path) -> None:
    (tmp_path / "issues.py").write_text(ISSUES)
    path = python_manifest(tmp_path)
    path.write_text(path.read_text() + "tool_search: {always: []}\n")
    with create_toolkit(path) as toolkit:
        found = toolkit.execute("tool_search", {"query": "repository"})
        assert found.metadata["tool_search"] == ["list_issues"]
        # Only the hidden `owner`'s description speaks of an account: it is not indexed.
        hidden = toolkit.execute("tool_search", {"query": "account"})
        assert hidden.metadata["tool_search"] == []
