"""`operations: {include, exclude}`: raw operationIds, sanitized tool names, did-you-mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolnexus import create_toolkit
from toolnexus.errors import ConfigError, ManifestError

from .conftest import build, spec, write_spec

OPS = {
    f"/r{i}": {"get": {"operationId": op_id}}
    for i, op_id in enumerate(
        ["repos/get", "repos/list-for-org", "repos/delete", "issues/create", "issues/list"]
        + [f"misc/op-{n}" for n in range(20)]
    )
}


def entry(**operations: list[str]) -> dict[str, object]:
    return {"openapi": "api.json", "base_url": "https://api.example.com", "operations": operations}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_spec(tmp_path, spec(OPS))
    return tmp_path


def test_filters_accept_sanitized_names_as_list_shows_them(folder: Path) -> None:
    tools = build(entry(include=["repos_*"], exclude=["repos_delete"]), folder)
    assert sorted(tools) == ["repos_get", "repos_list-for-org"]


def test_filters_accept_raw_operation_ids(folder: Path) -> None:
    tools = build(entry(include=["repos/*", "issues/create"], exclude=["repos/delete"]), folder)
    assert sorted(tools) == ["issues_create", "repos_get", "repos_list-for-org"]


def test_filters_accept_the_prefixed_tool_name(folder: Path) -> None:
    tools = build({**entry(include=["gh_issues_*"]), "prefix": "gh_"}, folder)
    assert sorted(tools) == ["gh_issues_create", "gh_issues_list"]


@pytest.mark.parametrize(
    ("operations", "field", "hint"),
    [
        ({"include": ["repos_gett"]}, "operations.include[0]", "did you mean 'repos_get'"),
        ({"include": ["*", "repos/gett"]}, "operations.include[1]", "did you mean 'repos/get'"),
        ({"exclude": ["repos_delet"]}, "operations.exclude[0]", "did you mean 'repos_delete'"),
    ],
)
def test_a_name_matching_no_operation_gets_a_did_you_mean(
    folder: Path, operations: dict[str, list[str]], field: str, hint: str
) -> None:
    with pytest.raises(ConfigError, match=hint) as info:
        build(entry(**operations), folder)
    assert info.value.field == field
    assert "is named" in info.value.message


def test_a_filter_selecting_nothing_shows_some_names_and_how_many_more(folder: Path) -> None:
    with pytest.raises(ConfigError) as info:
        build(entry(include=["pulls/*"]), folder)
    message = info.value.message
    assert info.value.field == "operations"
    assert "its operations are: repos_get, repos_list-for-org, repos_delete" in message
    assert message.endswith("and 15 more")
    assert "misc_op-19" not in message


def test_a_glob_close_to_names_suggests_them(folder: Path) -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'issues_list'"):
        build(entry(include=["isues_list*"]), folder)


def test_the_manifest_error_is_located_at_the_bad_name(folder: Path) -> None:
    manifest = folder / "tools.yaml"
    manifest.write_text(
        "version: 1\n"
        "tools:\n"
        "  - openapi: api.json\n"
        "    base_url: https://api.example.com\n"
        "    operations:\n"
        "      include:\n"
        "        - repos_get\n"
        "        - repos_lst-for-org\n"
    )
    with pytest.raises(ManifestError) as info:
        create_toolkit(manifest)
    text = str(info.value)
    assert f"{manifest}:8:" in text
    assert "did you mean 'repos_list-for-org'" in text
