"""OpenAPI tools: one tool per operation, against a real server on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from toolnexus.base import Result, Tool, ToolContext
from toolnexus.errors import ConfigError, SourceError, ToolError
from toolnexus.sources import BuildContext
from toolnexus.sources.openapi import build_openapi_tools

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parents[1] / "fixtures" / "http"
PETSTORE = FIXTURES / "petstore.yaml"


def _load_server_module() -> Any:
    name = "toolnexus_test_http_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FIXTURES / "server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


server_module = _load_server_module()


@pytest.fixture
def server() -> Iterator[Any]:
    with server_module.serve() as running:
        yield running


def build(entry: dict[str, Any], base_dir: Path = FIXTURES) -> dict[str, Tool]:
    ctx = BuildContext(workspace=base_dir, base_dir=base_dir, origin="tools.yaml:3")
    return {tool.name: tool for tool in build_openapi_tools(entry, ctx)}


def petstore(server: Any, **entry: Any) -> dict[str, Tool]:
    return build({"openapi": "petstore.yaml", "base_url": f"{server.url}/echo", **entry})


async def call(tool: Tool, **args: Any) -> Result:
    return await tool.run(args, ToolContext(call_id="c1", tool_name=tool.name, workspace=Path()))


async def echoed(tool: Tool, **args: Any) -> dict[str, Any]:
    result = await call(tool, **args)
    assert not result.is_error, result.content
    assert isinstance(result.structured, dict)
    return result.structured


def test_one_tool_per_operation_with_valid_schemas(server: Any) -> None:
    tools = petstore(server)
    assert sorted(tools) == [
        "createPet",
        "deletePet",
        "getPet",
        "listPets",
        "login",
        "plant_tree",
        "put_pets_petId_photo",
        "searchPets",
        "updatePet",
    ]
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
        assert tool.source == "http" and tool.origin == "tools.yaml:3"
        assert tool.meta["files"] == [str(PETSTORE)]
    assert tools["listPets"].description == "List pets\n\nPets, newest first."
    assert tools["deletePet"].description == "(Deprecated) Delete a pet"
    assert tools["plant_tree"].description == "POST /trees"
    assert tools["getPet"].read_only and not tools["getPet"].destructive
    assert tools["deletePet"].destructive and tools["deletePet"].idempotent
    assert not tools["createPet"].read_only


def test_filters_and_prefix(server: Any) -> None:
    tools = petstore(
        server, prefix="pets_", operations={"include": ["*Pet*", "put_*"], "exclude": ["delete*"]}
    )
    assert sorted(tools) == [
        "pets_createPet",
        "pets_getPet",
        "pets_listPets",
        "pets_put_pets_petId_photo",
        "pets_searchPets",
        "pets_updatePet",
    ]


def test_a_filter_matching_nothing_lists_the_operations(server: Any) -> None:
    with pytest.raises(ConfigError, match="operations are: listPets, createPet, getPet") as info:
        petstore(server, operations={"include": ["nothing*"]})
    assert info.value.field == "operations"


async def test_query_and_header_parameters(server: Any) -> None:
    tool = petstore(server, headers={"Authorization": "Bearer tok{en}"})["listPets"]
    assert tool.parameters["properties"] == {
        "limit": {
            "type": "integer",
            "exclusiveMinimum": 0,
            "maximum": 100,
            "description": "How many pets to return.",
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "X-Request-Id": {"type": "string"},
    }
    assert "required" not in tool.parameters
    got = await echoed(tool, limit=5, tags=["a b", "c&d"], **{"X-Request-Id": "r-1"})
    assert got["path"] == "/echo/pets"
    assert got["args"] == {"limit": ["5"], "tags": ["a b", "c&d"]}
    assert got["headers"]["x-request-id"] == "r-1"
    assert got["headers"]["authorization"] == "Bearer tok{en}"
    assert (await echoed(tool))["query"] == ""


async def test_path_parameters_are_encoded(server: Any) -> None:
    tool = petstore(server)["getPet"]
    assert tool.parameters["required"] == ["petId"]
    assert tool.parameters["properties"]["petId"]["description"] == "The pet's id."
    got = await echoed(tool, petId="a/b c?d")
    assert got["path"] == "/echo/pets/a%2Fb%20c%3Fd"
    assert got["method"] == "GET"
    # `..` between encoded slashes is refused: many servers decode `%2F` before resolving it
    with pytest.raises(ToolError, match=r"'\.\.' segment"):
        await call(tool, petId="a/../b c")


async def test_an_object_body_is_merged_into_the_arguments(server: Any) -> None:
    tool = petstore(server)["createPet"]
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tag": {"type": ["string", "null"]},
            "owner": {
                "type": "object",
                "properties": {"email": {"type": "string", "format": "email"}},
            },
        },
        "required": ["name"],
    }
    got = await echoed(tool, name="Rex", tag=None, owner={"email": "a@b.c"})
    assert json.loads(got["body"]) == {"name": "Rex", "tag": None, "owner": {"email": "a@b.c"}}
    assert got["headers"]["content-type"] == "application/json"
    assert json.loads((await echoed(tool, name="Rex"))["body"]) == {"name": "Rex"}


async def test_a_composed_body_is_one_body_argument(server: Any) -> None:
    tool = petstore(server)["updatePet"]
    props = tool.parameters["properties"]
    assert sorted(props) == ["body", "petId"] and tool.parameters["required"] == ["petId", "body"]
    assert props["body"]["allOf"][0]["properties"]["name"] == {"type": "string"}
    got = await echoed(tool, petId="7", body={"name": "Rex", "petId": "7"})
    assert (got["method"], got["path"]) == ("PUT", "/echo/pets/7")
    assert json.loads(got["body"]) == {"name": "Rex", "petId": "7"}


async def test_recursive_references_are_cut(server: Any) -> None:
    tool = petstore(server)["plant_tree"]
    children = tool.parameters["properties"]["children"]
    assert children == {"type": "array", "items": {"description": "a Node (recursive: see above)"}}
    tree = [{"value": "leaf", "children": []}]
    got = await echoed(tool, value="root", children=tree)
    assert json.loads(got["body"]) == {"value": "root", "children": tree}


async def test_form_and_raw_bodies(server: Any) -> None:
    tools = petstore(server)
    login = tools["login"]
    assert login.parameters["required"] == ["user"]
    got = await echoed(login, user="u&1", password="p w")
    assert got["body"] == "user=u%261&password=p+w"
    assert got["headers"]["content-type"] == "application/x-www-form-urlencoded"
    photo = tools["put_pets_petId_photo"]
    assert photo.parameters["properties"]["petId"] == {"type": "integer"}
    got = await echoed(photo, petId=3, body="a caption")
    assert (got["path"], got["body"]) == ("/echo/pets/3/photo", "a caption")
    assert got["headers"]["content-type"] == "text/plain"


async def test_clashing_parameter_names_get_their_location(server: Any) -> None:
    tool = petstore(server)["searchPets"]
    assert sorted(tool.parameters["properties"]) == ["header_id", "id"]
    got = await echoed(tool, id="q", header_id="h")
    assert (got["args"], got["headers"]["id"]) == ({"id": ["q"]}, "h")


def test_base_url_defaults_to_the_first_server() -> None:
    tools = build({"openapi": str(PETSTORE)})
    assert tools["getPet"].meta["url"] == "https://eu.pets.example/v1/pets/{petId}"


async def test_a_json_31_document_and_a_relative_server(tmp_path: Path, server: Any) -> None:
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "/echo"}],
        "paths": {
            "/notes/{id}": {
                "get": {
                    "operationId": "getNote",
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {"name": "q", "in": "query", "schema": {"type": ["string", "null"]}},
                    ],
                }
            }
        },
    }
    (tmp_path / "api.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="must be absolute") as info:
        build({"openapi": "api.json"}, tmp_path)
    assert info.value.field == "base_url"

    served = server_module.serve(spec=json.dumps(doc))
    with served as spec_server:
        tools = build({"openapi": f"{spec_server.url}/spec.yaml"}, tmp_path)
        assert tools["getNote"].meta["files"] == []
        got = await echoed(tools["getNote"], id="1", q="x")
    assert (got["path"], got["query"]) == ("/echo/notes/1", "q=x")


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("swagger: '2.0'\npaths: {}\n", SourceError, "found swagger 2.0"),
        ("openapi: 3.0.0\npaths: [\n", SourceError, "not valid YAML"),
        ("{bad json", SourceError, "not valid JSON"),
        ("- a list\n", SourceError, "a mapping at its top level"),
        (
            "openapi: 3.0.0\nservers: [{url: 'http://h'}]\npaths:\n  /a:\n    get:\n"
            "      requestBody: {$ref: 'other.yaml#/x'}\n",
            ConfigError,
            r"GET /a refers to 'other.yaml#/x', but .*other.yaml does not exist",
        ),
        (
            "openapi: 3.0.0\nservers: [{url: 'http://h'}]\npaths:\n  /a:\n    get:\n"
            "      parameters: [{$ref: '#/components/parameters/Nope'}]\n",
            SourceError,
            "which does not exist",
        ),
        ("openapi: 3.0.0\npaths: {}\n", ConfigError, "lists no servers; set base_url"),
    ],
)
def test_bad_documents(tmp_path: Path, text: str, error: type[Exception], message: str) -> None:
    (tmp_path / "spec.yaml").write_text(text)
    with pytest.raises(error, match=message):
        build({"openapi": "spec.yaml"}, tmp_path)


def test_a_missing_document_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"does not exist .*relative to the manifest") as info:
        build({"openapi": "nope.yaml"}, tmp_path)
    assert info.value.field == "openapi"
