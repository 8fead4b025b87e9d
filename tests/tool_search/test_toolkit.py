"""Deferral through the manifest and `create_toolkit`: its forms, located errors, calls of
deferred tools, and reload."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from toolnexus import ManifestError, Toolkit, UsageError, create_toolkit, tool
from toolnexus.adapters import openai_chat_tools
from toolnexus.search import is_deferred

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
EVERYTHING = (
    f"{{command: {sys.executable}, args: [{SERVERS / 'everything.py'}], defer: true, "
    "connect_timeout: 60s, required: true}"
)
"""The everything MCP server, deferred (a generous start: the machine is shared)."""


def grow(toolkit: Toolkit, name: str) -> None:
    """Have the everything server add a tool `name` at run time (tools/list_changed), and wait
    (20 s at most) until the toolkit has taken in the new list."""
    before = toolkit.generation
    assert toolkit.execute("grow", {"name": name}).is_error is False
    deadline = time.monotonic() + 20
    while toolkit.generation == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert toolkit.generation != before


def shell(name: str, description: str, **extra: str) -> str:
    """One shell tool entry of a manifest (YAML flow mapping)."""
    more = "".join(f", {k}: {v}" for k, v in extra.items())
    return f"  - {{name: {name}, description: {description!r}, command: [echo, {name}]{more}}}\n"


def manifest(tmp_path: Path, body: str, name: str = "tools.yaml") -> Path:
    path = tmp_path / name
    path.write_text("version: 1\n" + textwrap.dedent(body))
    return path


def deferred(toolkit: Any) -> list[str]:
    return [t.name for t in toolkit.tools() if is_deferred(t)]


def sent(toolkit: Any, state: Any) -> list[str]:
    return [d["function"]["name"] for d in openai_chat_tools(toolkit.tools(), state=state)]


def test_defer_on_one_tool(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        "tools:\n"
        + shell("echo_it", "Echo.")
        + shell("star_repo", "Star a repository.", defer="true"),
    )
    with create_toolkit(path) as toolkit:
        assert deferred(toolkit) == ["star_repo"]
        assert toolkit.names() == ["echo_it", "star_repo", "tool_search"]
        state = toolkit.search_state()
        assert sent(toolkit, state) == ["echo_it", "tool_search"]
        found = toolkit.execute("tool_search", {"query": "starring repositories"})
        assert not found.is_error and "star_repo" in found.content
        assert found.metadata["tool_search"] == ["star_repo"]
        assert state.observe(found) == ["star_repo"]
        assert sent(toolkit, state) == ["echo_it", "star_repo", "tool_search"]
        # without a state nothing is deferred: every tool, and no search tool
        assert [d["function"]["name"] for d in openai_chat_tools(toolkit.tools())] == [
            "echo_it",
            "star_repo",
        ]


def test_no_deferral_means_no_search_tool(tmp_path: Path) -> None:
    path = manifest(tmp_path, "tools:\n" + shell("echo_it", "Echo."))
    with create_toolkit(path) as toolkit:
        assert toolkit.names() == ["echo_it"]
        assert sent(toolkit, toolkit.search_state()) == ["echo_it"]


def test_defer_on_an_include_and_an_entry_that_opts_out(tmp_path: Path) -> None:
    manifest(
        tmp_path,
        "tools:\n" + shell("big_one", "Big.") + shell("keep_me", "Kept.", defer="false"),
        name="team.yaml",
    )
    path = manifest(
        tmp_path,
        "include:\n  - {path: team.yaml, prefix: team_, defer: true}\n"
        "tools:\n" + shell("mine", "Mine."),
    )
    with create_toolkit(path) as toolkit:
        assert deferred(toolkit) == ["team_big_one"]


def test_defer_on_an_openapi_entry_defers_every_operation(tmp_path: Path) -> None:
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": {
            "/pets": {
                "get": {"operationId": "listPets", "summary": "List pets"},
                "post": {"operationId": "createPet", "summary": "Add a pet"},
            }
        },
    }
    (tmp_path / "pets.json").write_text(json.dumps(spec))
    path = manifest(
        tmp_path, "tools:\n  - {openapi: pets.json, defer: true}\n" + shell("echo_it", "Echo.")
    )
    with create_toolkit(path) as toolkit:
        assert deferred(toolkit) == ["createPet", "listPets"]
        found = toolkit.execute("tool_search", {"query": "add a new pet"})
        assert found.metadata["tool_search"][0] == "createPet"


def test_defer_on_an_mcp_server(tmp_path: Path) -> None:
    server = EVERYTHING
    path = manifest(
        tmp_path,
        f"mcp_servers:\n  ev: {server}\ntools:\n" + shell("echo_it", "Echo."),
    )
    with create_toolkit(path) as toolkit:
        names = deferred(toolkit)
        assert "echo" in names and "add" in names and "echo_it" not in names
        assert toolkit.execute("add", {"a": 2, "b": 3}).content == "5"  # never searched


def test_a_budget_defers_all_but_always_once_exceeded(tmp_path: Path) -> None:
    tools = "tools:\n" + "".join(shell(f"t{i}", f"Tool {i}.") for i in range(4))
    within = manifest(tmp_path, "tool_search: {max_tools: 4}\n" + tools)
    with create_toolkit(within) as toolkit:
        assert deferred(toolkit) == [] and "tool_search" not in toolkit.names()
    over = manifest(tmp_path, "tool_search: {max_tools: 3, always: [t0]}\n" + tools)
    with create_toolkit(over) as toolkit:
        assert deferred(toolkit) == ["t1", "t2", "t3"]
    by_size = manifest(tmp_path, "tool_search: {max_bytes: 100, always: ['t[01]']}\n" + tools)
    with create_toolkit(by_size) as toolkit:
        assert deferred(toolkit) == ["t2", "t3"]
    roomy = manifest(tmp_path, "tool_search: {max_bytes: 1MB, defer: [t3]}\n" + tools)
    with create_toolkit(roomy) as toolkit:
        assert deferred(toolkit) == ["t3"]  # named in defer: deferred whatever the budget


def test_a_block_without_budget_defers_everything_not_kept(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        "tool_search: {always: [t0], limit: 1}\ntools:\n"
        + shell("t0", "Zero.")
        + shell("t1", "One tool.")
        + shell("t2", "Two tool.", defer="false"),
    )
    with create_toolkit(path) as toolkit:
        assert deferred(toolkit) == ["t1"]
        search = toolkit.get("tool_search")
        assert search is not None and search.read_only
        assert "(default 1)" in search.parameters["properties"]["limit"]["description"]


def test_create_toolkit_tool_search_argument() -> None:
    @tool
    def forecast(city: str) -> str:
        """Weather forecast for a city."""
        return f"sunny in {city}"

    @tool
    def hello() -> str:
        """Say hello."""
        return "hello"

    with create_toolkit(extra_tools=[forecast, hello], tool_search={"always": ["hello"]}) as tk:
        assert deferred(tk) == ["forecast"]
        hit = tk.execute("tool_search", {"query": "weather in Paris", "limit": 3})
        assert hit.structured == {
            "tools": [{"name": "forecast", "description": "Weather forecast for a city."}]
        }
    with pytest.raises(UsageError, match=r"tool_search\.budget: unknown key .budget."):
        create_toolkit(extra_tools=[hello], tool_search={"budget": 3})


@pytest.mark.parametrize(
    ("block", "line", "message"),
    [
        ("tool_search: {max_tools: -1}\n", 2, "max_tools"),
        ("tool_search: {budget: 10}\n", 2, "budget"),
        ("tool_search: {limit: 50}\n", 2, "expected 1 to 20"),
        ("tools:\n  - {name: x, command: [echo], defer: yes please}\n", 3, "defer"),
    ],
)
def test_bad_forms_are_located(tmp_path: Path, block: str, line: int, message: str) -> None:
    path = manifest(tmp_path, block + ("" if "tools" in block else "tools:\n" + shell("a", "A.")))
    with pytest.raises(ManifestError) as caught:
        create_toolkit(path)
    issue = caught.value.issues[0]
    assert issue.file == str(path) and issue.line == line and message in str(caught.value)


def test_tool_search_in_an_included_manifest_is_refused(tmp_path: Path) -> None:
    manifest(tmp_path, "tool_search: {}\ntools:\n" + shell("a", "A."), name="inc.yaml")
    path = manifest(tmp_path, "include: [inc.yaml]\n")
    with pytest.raises(ManifestError, match="tool_search is toolkit-wide") as caught:
        create_toolkit(path)
    assert caught.value.issues[0].file is not None and "inc.yaml" in caught.value.issues[0].file


def test_a_tool_already_called_tool_search_is_a_located_error(tmp_path: Path) -> None:
    path = manifest(tmp_path, "tool_search: {}\ntools:\n" + shell("tool_search", "Mine."))
    with pytest.raises(ManifestError, match="already called 'tool_search'") as caught:
        create_toolkit(path)
    assert caught.value.issues[0].line == 2


def test_a_deferred_tool_never_searched_is_still_run_and_still_denied(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        "permissions:\n  deny: ['say(text:*secret*)']\ntools:\n"
        "  - {name: say, description: Say it., command: [echo, '{text}'], defer: true,\n"
        "     parameters: {properties: {text: {type: string}}, required: [text]}}\n",
    )
    with create_toolkit(path) as toolkit:
        assert deferred(toolkit) == ["say"]
        assert toolkit.execute("say", {"text": "hi"}).content.strip() == "hi"
        denied = toolkit.execute("say", {"text": "the secret"})
        assert denied.is_error and denied.metadata.get("error_type") == "ApprovalDenied"
        assert toolkit.check("say", {"text": "the secret"}).decision.value == "deny"
        invalid = toolkit.execute("say", {})
        assert invalid.is_error and "text" in invalid.content


def test_a_bad_regex_is_an_error_result_naming_the_argument(tmp_path: Path) -> None:
    path = manifest(tmp_path, "tool_search: {}\ntools:\n" + shell("a", "A."))
    with create_toolkit(path) as toolkit:
        bad = toolkit.execute("tool_search", {"query": "a(", "mode": "regex"})
        assert bad.is_error and "argument 'query'" in bad.content
        nested = toolkit.execute("tool_search", {"query": "(a+)+$", "mode": "regex"})
        assert nested.is_error and "exponential" in nested.content
        good = toolkit.execute("tool_search", {"query": "^a$", "mode": "regex"})
        assert good.metadata["tool_search"] == ["a"]
        nothing = toolkit.execute("tool_search", {"query": "zebra"})
        assert not nothing.is_error and nothing.metadata["tool_search"] == []


def test_reload_keeps_the_state_and_drops_vanished_tools(tmp_path: Path) -> None:
    body = "tool_search: {}\ntools:\n" + shell("a", "A.") + shell("b", "B.")
    path = manifest(tmp_path, body)
    with create_toolkit(path) as toolkit:
        state = toolkit.search_state()
        state.observe(toolkit.execute("tool_search", {"query": "^[ab]$", "mode": "regex"}))
        assert state.loaded == {"a", "b"}
        saved = state.to_json()
        path.write_text("version: 1\n" + "tool_search: {}\ntools:\n" + shell("a", "A."))
        event = toolkit.reload()
        assert event.removed == ("b",)
        restored = toolkit.search_state(saved)
        assert sent(toolkit, restored) == ["a", "tool_search"]
        assert restored.loaded == {"a"}  # b vanished: dropped quietly


def test_an_mcp_refresh_keeps_deferral(tmp_path: Path) -> None:
    """The server adds a tool at run time (tools/list_changed): the new tool is deferred too,
    and the search tool finds it."""
    server = EVERYTHING
    path = manifest(tmp_path, f"mcp_servers:\n  ev: {server}\n")
    with create_toolkit(path) as toolkit:
        grow(toolkit, "sprout")
        assert "sprout" in deferred(toolkit)
        found = toolkit.execute("tool_search", {"query": "^sprout$", "mode": "regex"})
        assert found.metadata["tool_search"] == ["sprout"]


def test_tools_the_permissions_hide_are_never_found(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        "permissions:\n  deny: [drop_database]\ntool_search: {}\ntools:\n"
        + shell("drop_database", "Drop the database.")
        + shell("backup_database", "Back up the database."),
    )
    with create_toolkit(path) as toolkit:
        found = toolkit.execute("tool_search", {"query": "database"})
        assert found.metadata["tool_search"] == ["backup_database"]
        assert "drop_database" not in found.content
        search = toolkit.get("tool_search")
        assert search is not None and "Search the 1 more tools" in search.description


def test_a_denied_tool_an_mcp_refresh_adds_is_hidden_and_never_found(tmp_path: Path) -> None:
    """A bare deny hides a tool from the listing and the search; one the server adds at run
    time (tools/list_changed) must be hidden too, not only the ones present at start."""
    path = manifest(
        tmp_path, f"permissions:\n  deny: [forbidden]\nmcp_servers:\n  ev: {EVERYTHING}\n"
    )
    with create_toolkit(path) as toolkit:
        grow(toolkit, "forbidden")
        assert "forbidden" not in toolkit.names()
        found = toolkit.execute("tool_search", {"query": "^forbidden$", "mode": "regex"})
        assert found.metadata["tool_search"] == []
        found = toolkit.execute("tool_search", {"query": "added at runtime"})
        assert "forbidden" not in found.metadata["tool_search"]
        assert toolkit.execute("forbidden", {}).is_error


def test_create_toolkit_takes_sizes_as_the_manifest_does() -> None:
    """README: `create_toolkit(tool_search={...})` takes the manifest block's keys, and the
    manifest writes `max_bytes: 64KB`."""

    @tool
    def forecast(city: str) -> str:
        """Weather forecast for a city."""
        return f"sunny in {city}"

    with create_toolkit(extra_tools=[forecast], tool_search={"max_bytes": "1KB"}) as tk:
        assert deferred(tk) == []  # well within 1 KB
    with create_toolkit(extra_tools=[forecast], tool_search={"max_bytes": "10B"}) as tk:
        assert deferred(tk) == ["forecast"]
    with pytest.raises(UsageError, match=r"tool_search\.max_bytes: expected .*30KB"):
        create_toolkit(extra_tools=[forecast], tool_search={"max_bytes": "lots"})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["keywords", "regex"])
async def test_searching_never_blocks_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The first search builds the index (0.35-0.65 s for GitHub's 1,223 tools) and a regex
    search may take 0.25 s: under `serve` that would stall every other client, so both run on
    a worker thread, not the loop's."""
    import threading

    from toolnexus import acreate_toolkit
    from toolnexus.search import tool as search_tool_module

    from .conftest import forecast, hello, star_repo

    threads: list[threading.Thread] = []

    class Recording(search_tool_module.SearchIndex):
        def __post_init__(self) -> None:
            threads.append(threading.current_thread())
            super().__post_init__()

        def search(self, query: str, limit: int = 5) -> Any:
            threads.append(threading.current_thread())
            return super().search(query, limit)

        def search_regex(self, pattern: str, limit: int = 5, **kw: Any) -> Any:
            threads.append(threading.current_thread())
            return super().search_regex(pattern, limit, **kw)

    monkeypatch.setattr(search_tool_module, "SearchIndex", Recording)
    async with await acreate_toolkit(
        extra_tools=[forecast, star_repo, hello], tool_search={"always": ["hello"]}
    ) as toolkit:
        query = "forecast" if mode == "keywords" else "^forecast$"
        found = await toolkit.aexecute("tool_search", {"query": query, "mode": mode})
        assert found.metadata["tool_search"] == ["forecast"]
    assert len(threads) == 2
    assert threading.main_thread() not in threads
