"""The docs' "Large tool sets" page (docs/tool-search.md, once the README's section), checked
against the code."""

from __future__ import annotations

import re
from pathlib import Path

from toolnexus import load_manifest
from toolnexus.search.provider import ANTHROPIC_SEARCH_TOOLS
from toolnexus.search.tool import SEARCH_TOOL

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "tool-search.md").read_text("utf-8")


def section() -> str:
    return PAGE


def test_the_manifest_example_loads(tmp_path: Path) -> None:
    block, semantic = re.findall(r"```yaml\n(.*?)```", section(), re.S)
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "ops.yaml").write_text("version: 1\n")
    (tmp_path / "github.json").write_text("{}")
    (tmp_path / "tools.yaml").write_text(block)
    loaded = load_manifest(tmp_path / "tools.yaml")
    assert loaded.tool_search == {
        "max_tools": 40,
        "max_bytes": 64000,
        "always": ["read", "grep", "git_*"],
        "defer": ["legacy_*"],
        "limit": 5,
    }
    assert loaded.includes[0].defer is True
    assert [d.spec.get("defer") for d in loaded.tools] == [True, False]
    assert loaded.mcp_servers[0].spec["defer"] is True
    (tmp_path / "semantic.yaml").write_text(semantic)
    loaded = load_manifest(tmp_path / "semantic.yaml")
    assert loaded.tool_search == {"embedder": "minilm", "embedding_cache": False}


def test_the_provider_table_names_what_the_adapters_send() -> None:
    text = section()
    for tool in ANTHROPIC_SEARCH_TOOLS.values():
        assert tool["type"] in text and tool["name"] in text
    assert '{"type": "tool_search"}' in text and f"`{SEARCH_TOOL}`" in text
