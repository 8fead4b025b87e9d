"""Ranking and regex mode of the tool search index, and the conversation state object."""

from __future__ import annotations

from typing import Any

import pytest

from toolnexus import Result, SearchState, Tool, UsageError
from toolnexus.base import ToolContext
from toolnexus.errors import ConfigError
from toolnexus.search.index import SearchIndex, check_pattern, stem, words


async def _noop(arguments: dict[str, Any], ctx: ToolContext) -> Result:
    return Result(content="")


def make(name: str, description: str = "", **props: str) -> Tool:
    parameters = {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
    }
    return Tool(name=name, handler=_noop, description=description, parameters=parameters)


TOOLS = [
    make(
        "activity_star-repo-for-authenticated-user",
        "Star a repository for the authenticated user.",
        owner="",
        repo="",
    ),
    make(
        "activity_list-repos-starred-by-user", "Lists repositories a user has starred.", username=""
    ),
    make("repos_delete", "Deleting a repository requires admin access.", owner="", repo=""),
    make(
        "issues_create",
        "Any user with pull access to a repository can create an issue.",
        title="",
        body="",
    ),
    make("getWeatherForecast", "Returns the forecast for a city.", city=""),
    make("send_email", "Send a message to someone.", recipient="", subject=""),
]
INDEX = SearchIndex(tools=TOOLS)


def test_words_split_camel_snake_kebab_and_slash_names() -> None:
    assert words("getWeatherForecast") == ["get", "weather", "forecast"]
    assert words("activity/star-repo_for-authenticatedUser") == [
        "activity",
        "star",
        "repo",
        "authenticated",
        "user",
    ]
    assert words("HTTPServerError") == ["http", "server", "error"]


def test_stems_meet_across_inflections() -> None:
    assert stem("repositories") == stem("repository")
    assert stem("starring") == stem("starred") == stem("stars") == stem("star")
    assert stem("deleting") == stem("deleted") == stem("delete")


def test_purpose_queries_find_the_operation() -> None:
    assert INDEX.search("star a repository")[0].name == "activity_star-repo-for-authenticated-user"
    assert INDEX.search("which repositories has a user starred")[0].name == (
        "activity_list-repos-starred-by-user"
    )
    assert INDEX.search("weather forecast in Paris")[0].name == "getWeatherForecast"
    assert INDEX.search("open a new issue")[0].name == "issues_create"
    assert INDEX.search("remove repository, deleted")[0].name == "repos_delete"


def test_parameter_names_are_searched() -> None:
    assert INDEX.search("recipient")[0].name == "send_email"


def test_a_word_in_the_name_outweighs_the_same_word_in_a_description() -> None:
    tools = [
        make("alpha_tool", "Does many things, among them it can archive data and more."),
        make("archive_tool", "Does many things."),
    ]
    hits = SearchIndex(tools=tools).search("archive")
    assert [h.name for h in hits] == ["archive_tool", "alpha_tool"]
    flat = SearchIndex(tools=tools, weights={"name": 1.0, "description": 1.0, "parameters": 1.0})
    assert flat.search("archive")[0].score < hits[0].score


def test_limit_and_no_match() -> None:
    assert len(INDEX.search("repository", limit=2)) == 2
    assert INDEX.search("zebra quantum") == []
    assert INDEX.search("the of a") == []  # only stop words


def test_regex_mode_matches_names_first_then_descriptions() -> None:
    hits, complete = INDEX.search_regex(r"repo", limit=10)
    assert complete
    names = [h.name for h in hits]
    assert names[:3] == [
        "activity_star-repo-for-authenticated-user",
        "activity_list-repos-starred-by-user",
        "repos_delete",
    ]
    assert "issues_create" in names  # "repository" in its description
    assert [h.name for h in INDEX.search_regex(r"^get.*forecast$")[0]] == ["getWeatherForecast"]
    assert INDEX.search_regex("WEATHER")[0][0].name == "getWeatherForecast"  # any case


@pytest.mark.parametrize(
    "pattern", ["(a+)+$", r"(\w+\s?)*$", "([a-z]*)*x", r"(a)\1", "(a|aa)+b", "a+a+$", ".*.*x"]
)
def test_patterns_that_can_backtrack_exponentially_are_refused(pattern: str) -> None:
    with pytest.raises(ConfigError, match="exponential"):
        check_pattern(pattern)


def test_invalid_and_overlong_patterns_are_refused() -> None:
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        check_pattern("repo(")
    with pytest.raises(ConfigError, match="at most 200"):
        check_pattern("a" * 201)


def test_too_many_open_repeats_are_refused() -> None:
    check_pattern("get.*repo.*star.*user")
    with pytest.raises(ConfigError, match="4 open-ended repeats"):
        check_pattern("a.*b.*c.*d.*e")


def test_a_slow_pattern_is_stopped_by_the_time_budget() -> None:
    """`.*a.*b.*c` is accepted but polynomial; over texts built to be its worst case the
    search answers with what it has once the budget is spent, instead of running on."""
    tools = [make(f"tool_{i}", "a" * 150) for i in range(300)]
    index = SearchIndex(tools=tools)
    hits, complete = index.search_regex(r".*a.*b.*c", budget=0.05)
    assert not complete and hits == []  # the whole search would take many seconds
    _, complete = SearchIndex(tools=tools[:2]).search_regex("tool_1$")
    assert complete


# --- state ----------------------------------------------------------------------------------


def test_state_round_trips_through_json_and_dict() -> None:
    state = SearchState()
    assert state.load(["b", "a", "b"]) == ["b", "a"]
    assert state.load(["a", "c"]) == ["c"]
    text = state.to_json()
    assert text == '{"version":1,"loaded":["a","b","c"]}'
    again = SearchState.from_json(text)
    assert again == state and "c" in again
    assert SearchState.from_dict(state.to_dict()) == state


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "is JSON"),
        ("[1]", "is a mapping"),
        ('{"version": 2, "loaded": []}', "version 2"),
        ('{"version": 1, "loaded": "a"}', "list of tool names"),
        ('{"version": true, "loaded": []}', "version True"),
        ("[" * 100_000, "is JSON"),  # nested too deep for the parser: an error, not a crash
        (b"\xff\xfe", "is JSON"),
    ],
)
def test_a_bad_saved_state_is_a_usage_error(text: str | bytes, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        SearchState.from_json(text)


def test_state_observes_only_successful_search_results() -> None:
    state = SearchState()
    found = Result(content="1 tool", metadata={"tool_search": ["x"]})
    failed = Result(content="bad", is_error=True, metadata={"tool_search": ["y"]})
    other = Result(content="hello", metadata={"exit_code": 0})
    assert state.observe([found, failed, other]) == ["x"]
    assert state.observe(found) == []
    state.prune(["z"])
    assert state.loaded == set()


@pytest.mark.parametrize(
    ("query", "wanted"),
    [
        ("erase it", "repos_delete"),
        ("write one", "issues_create"),
        ("signed in", "activity_star-repo-for-authenticated-user"),
    ],
)
def test_synonyms_that_stem_differently_still_reach_their_verb(query: str, wanted: str) -> None:
    # `erase` stems to `era`, `write` to `writ`: a synonym list kept unstemmed never matched them.
    hits = INDEX.search(query)
    assert hits and hits[0].name == wanted


@pytest.mark.parametrize(
    "pattern",
    [
        "(?:a?){100}a{100}",  # optional inside a counted repeat: 2**100 ways to split
        "a{0,50}" * 6 + "x",  # six adjacent bounded ranges: 50**6 ways to split
        "a{4294967296}",  # a count `re` overflows on
        ".?" * 22 + "qqqq",  # 2**22 ways per start on any text: 31 s over GitHub's tools
        "(?:.|.)" * 20 + "q",  # the same with alternatives
    ],
)
def test_regexes_that_hang_or_overflow_are_refused(pattern: str) -> None:
    with pytest.raises(ConfigError):
        check_pattern(pattern)


@pytest.mark.parametrize(
    "pattern",
    ["colou?r", "repos?_(get|list)", "^a{2}b{1,3}$", "(ab){2}x", "(get|list)_repos?_(for_)?org"],
)
def test_ordinary_regexes_still_pass(pattern: str) -> None:
    assert check_pattern(pattern)
