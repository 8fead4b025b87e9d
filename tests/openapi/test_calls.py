"""What OpenAPI tools send: real requests to a server on 127.0.0.1, read back from its log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolnexus.errors import ConfigError

from .conftest import Api, build, call, spec, write_spec

pytestmark = pytest.mark.anyio

OWNER = {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}}
PATH_PARAM = {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
LISTING = {
    "/repos/{owner}/issues": {
        "get": {
            "operationId": "issues/list-for-repo",
            "parameters": [
                OWNER,
                {"name": "sort", "in": "query", "schema": {"type": "string", "default": "created"}},
                {"name": "direction", "in": "query", "schema": {"enum": ["asc", "desc"],
                                                                  "default": "desc"}},
                {"name": "page", "in": "query", "schema": {"type": "integer", "default": 1}},
                {"name": "X-Trace", "in": "header", "schema": {"type": "string", "default": "t"}},
            ],
        },
        "post": {
            "operationId": "issues/create",
            "parameters": [OWNER],
            "requestBody": {
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "title": {"type": "string"},
                                "state": {"type": "string", "default": "open"},
                            },
                            "required": ["title"],
                        }
                    }
                },
                "required": True,
            },
        },
    },
    "/repos/{owner}/contents/{path}": {
        "get": {
            "operationId": "repos/get-content",
            "parameters": [OWNER, {**PATH_PARAM, "x-multi-segment": True}],
        }
    },
    "/repos/{owner}/raw/{path}": {
        "get": {
            "operationId": "repos/get-raw",
            "parameters": [OWNER, {**PATH_PARAM, "allowReserved": True}],
        }
    },
    "/repos/{owner}/blobs/{path}": {
        "get": {"operationId": "repos/get-blob", "parameters": [OWNER, PATH_PARAM]}
    },
}  # fmt: skip


def tools_for(tmp_path: Path, api: Api, **entry: Any) -> dict[str, Any]:
    write_spec(tmp_path, spec(LISTING))
    return build({"openapi": "api.json", "base_url": api.url, **entry}, tmp_path)


async def test_defaults_stay_in_the_schema_but_are_not_sent(tmp_path: Path, api: Api) -> None:
    tool = tools_for(tmp_path, api)["issues_list-for-repo"]
    assert tool.parameters["properties"]["sort"]["default"] == "created"
    result = await call(tool, owner="o")
    assert not result.is_error, result.content
    assert api.seen[-1]["query"] == ""
    assert "x-trace" not in api.headers[-1]
    await call(tool, owner="o", page=2, sort="updated")
    assert api.seen[-1]["query"] == "sort=updated&page=2"


async def test_body_defaults_are_not_sent(tmp_path: Path, api: Api) -> None:
    tool = tools_for(tmp_path, api)["issues_create"]
    assert tool.parameters["properties"]["state"] == {"type": "string", "default": "open"}
    await call(tool, owner="o", title="Bug")
    assert api.seen[-1]["method"] == "POST" and api.seen[-1]["body"] == '{"title":"Bug"}'


async def test_a_multi_segment_path_keeps_its_slashes(tmp_path: Path, api: Api) -> None:
    tools = tools_for(tmp_path, api)
    for name, route in (("repos_get-content", "contents"), ("repos_get-raw", "raw")):
        result = await call(tools[name], owner="o", path="docs/guide/a b.md")
        assert not result.is_error, result.content
        assert api.seen[-1]["path"] == f"/repos/o/{route}/docs/guide/a%20b.md"
    # `?` and `#` stay data inside a segment, never a query or a fragment
    await call(tools["repos_get-content"], owner="o", path="dir/x?y#z")
    assert api.seen[-1] == {
        "method": "GET", "path": "/repos/o/contents/dir/x%3Fy%23z", "query": "", "body": ""
    }  # fmt: skip


async def test_a_plain_path_parameter_is_one_segment(tmp_path: Path, api: Api) -> None:
    tool = tools_for(tmp_path, api)["repos_get-blob"]
    await call(tool, owner="o/p", path="docs/a.md")
    assert api.seen[-1]["path"] == "/repos/o%2Fp/blobs/docs%2Fa.md"


async def test_keep_slashes_names_more_parameters(tmp_path: Path, api: Api) -> None:
    tool = tools_for(tmp_path, api, keep_slashes=["path"])["repos_get-blob"]
    await call(tool, owner="o/p", path="docs/a.md")
    assert api.seen[-1]["path"] == "/repos/o%2Fp/blobs/docs/a.md"


@pytest.mark.parametrize(
    "value",
    [
        "../secrets",
        "docs/../../admin",
        "./x",
        "a/./b",
        "..",
        "a/%2e%2e/b",
        "%2E%2E/x",
        "a/%252e%252e/b",
        "a%2F..%2Fb",
        "a/..\\b",
        "..\\..\\x",
    ],
)
async def test_dot_segments_are_refused_naming_the_argument(
    tmp_path: Path, api: Api, value: str
) -> None:
    tool = tools_for(tmp_path, api)["repos_get-content"]
    before = len(api.seen)
    result = await call(tool, owner="o", path=value)
    assert result.is_error
    assert "argument 'path'" in result.content and repr(value) in result.content
    assert len(api.seen) == before  # nothing was sent


@pytest.mark.parametrize("value", ["..", ".", "%2e%2e", "%2E", "%252e%252e"])
async def test_a_single_segment_may_not_be_a_dot_segment(
    tmp_path: Path, api: Api, value: str
) -> None:
    tool = tools_for(tmp_path, api)["repos_get-blob"]
    result = await call(tool, owner="o", path=value)
    assert result.is_error and "may not be" in result.content
    assert api.seen == []


async def test_dots_inside_names_are_fine(tmp_path: Path, api: Api) -> None:
    tool = tools_for(tmp_path, api)["repos_get-content"]
    result = await call(tool, owner="o", path="a..b/.github/x...y")
    assert not result.is_error, result.content
    assert api.seen[-1]["path"] == "/repos/o/contents/a..b/.github/x...y"


def test_keep_slashes_must_be_a_list(tmp_path: Path, api: Api) -> None:
    with pytest.raises(ConfigError, match="list of parameter names") as info:
        tools_for(tmp_path, api, keep_slashes="path")
    assert info.value.field == "keep_slashes"
