"""Semantic tool search: fusion, the embedding cache by content hash, incremental updates from a
real MCP server's list change, browse mode and namespaces, the embedder forms and their
configuration errors."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from toolnexus import ManifestError, create_toolkit, tool
from toolnexus.search.semantic import (
    Embedder,
    EmbeddingCache,
    SemanticIndex,
    detail_texts,
    fuse,
    tool_text,
    wordllama_embedder,
)

from .conftest import forecast, hello, star_repo
from .test_toolkit import EVERYTHING, grow

CONCEPTS = ("weather", "star", "hello", "account", "runtime")
"""The toy embedder's dimensions: a text's vector counts the words of each concept."""
SYNONYMS = {
    "weather": ("weather", "forecast", "rain", "sunny"),
    "star": ("star", "bookmark", "favourite"),
    "hello": ("hello", "greet", "hi"),
    "account": ("authenticated", "credentials", "whoami"),
    "runtime": ("runtime", "added"),
}


class Recording:
    """A user-supplied embedder (texts -> vectors) that records every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [
            [float(sum(text.lower().count(w) for w in SYNONYMS[c])) + 0.01 for c in CONCEPTS]
            for text in texts
        ]

    @property
    def embedded(self) -> list[str]:
        return [t for batch in self.batches for t in batch]


def test_fusion_puts_what_both_rankings_agree_on_first() -> None:
    fused = fuse([([1, 2, 3], 1.0), ([3, 4, 1], 1.0)], k=10)
    assert [i for i, _ in fused][:2] == [1, 3]  # in both lists
    assert {i for i, _ in fused} == {1, 2, 3, 4}
    heavier = fuse([([1, 2], 1.0), ([2, 1], 3.0)], k=10)
    assert heavier[0][0] == 2  # the heavier ranking decides a tie of ranks


def test_a_second_build_reads_the_cache_and_a_changed_tool_re_embeds_only_itself(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache" / "embeddings.sqlite3"
    embed = Recording()
    embedder = Embedder(embed=embed, model="toy-1")
    tools = [forecast, star_repo, hello]
    first = SemanticIndex(tools=tools, embedder=embedder, cache=EmbeddingCache(path=path))
    assert first.embedded == 3 and path.exists()
    embed.batches.clear()
    # A fresh cache object on the same file: what the next process (or generation) sees.
    second = SemanticIndex(tools=tools, embedder=embedder, cache=EmbeddingCache(path=path))
    assert second.embedded == 0 and embed.batches == []
    changed = dataclasses.replace(star_repo, description="Bookmark a repository with a star.")
    third = SemanticIndex(
        tools=[forecast, changed, hello], embedder=embedder, cache=EmbeddingCache(path=path)
    )
    assert third.embedded == 1 and embed.embedded == [tool_text(changed)]
    other_model = Embedder(embed=embed, model="toy-2")
    assert (
        SemanticIndex(tools=tools, embedder=other_model, cache=EmbeddingCache(path=path)).embedded
        == 3
    )


def test_a_tool_is_found_by_its_own_later_sentence_and_never_by_shared_boilerplate() -> None:
    boilerplate = "Tokens need the repo scope to use this endpoint."
    fork = dataclasses.replace(
        hello,
        name="fork_repo",
        description=f"Create a fork.\n\nBookmark the repository.  {boilerplate}",
    )
    others = [
        dataclasses.replace(forecast, description=f"Get the weather.\n\n{boilerplate}"),
        dataclasses.replace(star_repo, name="get_user", description=f"Get a user. {boilerplate}"),
    ]
    details = detail_texts([fork, *others])
    # The boilerplate is in all three tools (SHARED): nobody's detail, never embedded.
    assert details == [f"{tool_text(fork)} Bookmark the repository.", None, None]
    embed = Recording()
    index = SemanticIndex(
        tools=[fork, *others], embedder=Embedder(embed=embed, model="toy"), cache=EmbeddingCache()
    )
    assert index.embedded == 4 and not any("Tokens" in text for text in embed.embedded)
    (best, score), *_ = index.ranked("add it to my favourites")
    assert best == 0 and score > 0.9  # through its detail vector ("Bookmark")
    title_only = dataclasses.replace(fork, description="Create a fork.")
    plain = SemanticIndex(tools=[title_only, *others], embedder=Embedder(embed=embed, model="toy"))
    assert dict(plain.ranked("add it to my favourites"))[0] < 0.6  # its title alone is far
    off = Embedder(embed=embed, model="toy", details=False)  # as wordllama_embedder() is
    assert SemanticIndex(tools=[fork, *others], embedder=off).embedded == 3
    assert dict(SemanticIndex(tools=[fork, *others], embedder=off).ranked("favourites"))[0] < 0.6


def test_a_user_supplied_embedder_finds_what_words_alone_miss() -> None:
    @tool
    def get_authenticated_user() -> str:
        """Get the authenticated user."""
        return "octocat"

    embed = Recording()
    settings = {"always": ["hello"], "embedding_cache": False}
    with create_toolkit(
        extra_tools=[forecast, get_authenticated_user, hello], tool_search={}
    ) as tk:
        lexical = tk.execute("tool_search", {"query": "whose credentials are these"})
        assert "get_authenticated_user" not in lexical.metadata["tool_search"]
    with create_toolkit(
        extra_tools=[forecast, get_authenticated_user, hello],
        tool_search={**settings, "embedder": embed},
    ) as tk:
        found = tk.execute("tool_search", {"query": "whose credentials are these"})
        assert found.metadata["tool_search"][0] == "get_authenticated_user"
        assert "whose credentials are these" in embed.embedded


def test_an_mcp_list_change_embeds_only_the_new_tool(tmp_path: Path) -> None:
    """The server adds a tool at run time (tools/list_changed): the next search's index embeds
    that tool's text and the query, nothing it had embedded before."""
    path = tmp_path / "tools.yaml"
    path.write_text(f"version: 1\nmcp_servers:\n  ev: {EVERYTHING}\n")
    embed = Recording()
    settings = {"embedder": embed, "embedding_cache": str(tmp_path / "vectors.sqlite3")}
    with create_toolkit(path, tool_search=settings) as toolkit:
        first = toolkit.execute("tool_search", {"query": "say hello back"})
        assert not first.is_error
        before_texts = set(embed.embedded)
        grow(toolkit, "sprout")
        embed.batches.clear()
        found = toolkit.execute("tool_search", {"query": "the tool added at runtime"})
        assert "sprout" in found.metadata["tool_search"]
        new = [t for t in embed.embedded if t != "the tool added at runtime"]
        assert new == ["sprout: added at runtime as sprout"]
        assert not set(new) & before_texts


def test_browse_lists_namespaces_and_a_search_narrows_to_one(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(
        textwrap.dedent(
            """\
            version: 1
            tools:
              - {name: deploy_site, description: Deploy the site., command: [echo, deploy]}
            """
        )
    )
    path = tmp_path / "tools.yaml"
    path.write_text(
        f"version: 1\ntool_search: {{}}\ninclude: [team.yaml]\nmcp_servers:\n  ev: {EVERYTHING}\n"
    )
    with create_toolkit(path) as toolkit:
        browsed = toolkit.execute("tool_search", {"mode": "browse"})
        spaces = {e["namespace"]: e["tools"] for e in browsed.structured["namespaces"]}
        ev_tools = sum(1 for t in toolkit.tools() if t.meta.get("server") == "ev")
        assert spaces == {"ev": ev_tools, "team.yaml": 1}
        assert browsed.metadata["tool_search"] == []  # browsing loads nothing
        narrowed = toolkit.execute("tool_search", {"query": "deploy echo", "namespace": "ev"})
        assert narrowed.metadata["tool_search"]
        assert "deploy_site" not in narrowed.metadata["tool_search"]
        assert toolkit.execute(
            "tool_search", {"query": "deploy", "namespace": "team.yaml"}
        ).metadata["tool_search"] == ["deploy_site"]
        wrong = toolkit.execute("tool_search", {"query": "deploy", "namespace": "evv"})
        assert wrong.is_error and "did you mean 'ev'?" in wrong.content
        missing = toolkit.execute("tool_search", {"mode": "keywords"})
        assert missing.is_error and "'query' is required" in missing.content
        description = toolkit.get("tool_search")
        assert description is not None and "plain words" in description.description


def test_an_embedder_typo_fails_with_its_location(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text("version: 1\ntool_search:\n  embeder: wordllama\n")
    with pytest.raises(ManifestError) as caught:
        create_toolkit(path)
    assert "tools.yaml:3:3" in str(caught.value) and "did you mean 'embedder'" in str(caught.value)
    path.write_text("version: 1\ntool_search:\n  embedder: no_such_module_xyz:embed\n")
    with pytest.raises(ManifestError) as caught:
        create_toolkit(path)
    assert "tools.yaml:" in str(caught.value) and "no_such_module_xyz" in str(caught.value)


@pytest.mark.skipif(
    importlib.util.find_spec("wordllama") is None,
    reason="wordllama is not installed (pip install 'toolnexus[semantic]'; the test extra has it)",
)
def test_the_wordllama_embedder_runs_offline_from_its_wheel(tmp_path: Path) -> None:
    embedder = wordllama_embedder()
    assert not embedder.details  # a second, longer text blurred its averaged word vectors
    index = SemanticIndex(
        tools=[forecast, star_repo, hello],
        embedder=embedder,
        cache=EmbeddingCache(path=tmp_path / "v.sqlite3"),
    )
    assert index.embedded == 3
    ranked = index.ranked("will it rain tomorrow in Paris", 3)
    assert index.tools[ranked[0][0]].name == "forecast"


def test_openapi_operations_are_browsed_by_their_first_tag(tmp_path: Path) -> None:
    def operation(op_id: str, tag: str) -> dict[str, object]:
        return {
            "operationId": op_id,
            "summary": op_id.replace("-", " "),
            "tags": [tag, "extra"],
            "responses": {"200": {"description": "OK"}},
        }

    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": {
            "/a": {"get": operation("list-issues", "issues")},
            "/b": {
                "get": operation("get-repo", "repos"),
                "delete": operation("delete-repo", "repos"),
            },
        },
    }
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(doc))
    manifest = {"version": 1, "tools": [{"openapi": str(spec)}], "tool_search": {}}
    with create_toolkit(manifest) as toolkit:
        browsed = toolkit.execute("tool_search", {"mode": "browse"})
        assert browsed.structured["namespaces"] == [
            {"namespace": "issues", "tools": 1},
            {"namespace": "repos", "tools": 2},
        ]
        found = toolkit.execute(
            "tool_search", {"query": "^", "mode": "regex", "namespace": "repos"}
        )
        assert sorted(found.metadata["tool_search"]) == ["delete-repo", "get-repo"]


def test_the_embedders_lexical_weight_decides_between_the_rankings() -> None:
    """Words find only `forecast`; the vectors put `star_repo` first. The embedder's own
    `lexical_weight` (0.75 for BERT models, 1 by default) says which ranking counts more."""
    query = "weather forecast"

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[float("star" in t.lower() or t == query), 0.1] for t in texts]

    found = {}
    for weight in (100.0, 0.01):
        embedder = Embedder(embed=embed, model=f"toy-{weight}", lexical_weight=weight)
        settings = {"embedder": embedder, "embedding_cache": False, "limit": 1}
        with create_toolkit(extra_tools=[forecast, star_repo, hello], tool_search=settings) as tk:
            found[weight] = tk.execute("tool_search", {"query": query}).metadata["tool_search"]
    assert found == {100.0: ["forecast"], 0.01: ["star_repo"]}


def test_a_repeated_query_is_embedded_once() -> None:
    embed = Recording()
    index = SemanticIndex(
        tools=[forecast, star_repo, hello], embedder=Embedder(embed=embed, model="toy")
    )
    embed.batches.clear()
    first = index.ranked("will it rain", 3)
    assert index.ranked("will it rain", 3) == first
    index.ranked("say hi", 3)
    assert embed.batches == [["will it rain"], ["say hi"]]
