"""Multi-file descriptions: external `$ref`s followed inside the folder, network only if asked."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from toolnexus.errors import ConfigError, SourceError
from toolnexus.openapi import refs as _openapi_refs

from .conftest import Api, build, call

pytestmark = pytest.mark.anyio

MAIN = """\
openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /users/{id}:
    $ref: ./paths/users.yaml
"""
USERS = """\
get:
  operationId: getUser
  parameters:
    - $ref: '../parameters.yaml#/Id'
    - {name: view, in: query, schema: {$ref: '#/View'}}
put:
  operationId: putUser
  parameters: [{$ref: '../parameters.yaml#/Id'}]
  requestBody:
    required: true
    content:
      application/json:
        schema: {$ref: '../schemas/user.yaml#/User'}
View: {type: string, enum: [short, full]}
"""
PARAMETERS = """\
Id: {name: id, in: path, required: true, schema: {type: integer}}
"""
USER = """\
User:
  type: object
  required: [name]
  properties:
    name: {type: string}
    address: {$ref: './address.json'}
    friends: {type: array, items: {$ref: '#/User'}}
    boss: {$ref: '../schemas/user.yaml#/User'}
"""
ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}}}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def described(tmp_path: Path) -> Path:
    folder = tmp_path / "spec"
    write_tree(
        folder,
        {
            "api.yaml": MAIN,
            "paths/users.yaml": USERS,
            "parameters.yaml": PARAMETERS,
            "schemas/user.yaml": USER,
            "schemas/address.json": json.dumps(ADDRESS),
        },
    )
    return folder


async def test_external_references_are_followed(described: Path, api: Api) -> None:
    tools = build({"openapi": "api.yaml", "base_url": api.url}, described)
    get, put = tools["getUser"], tools["putUser"]
    assert get.parameters["properties"] == {
        "id": {"type": "integer"},
        "view": {"type": "string", "enum": ["short", "full"]},
    }
    props = put.parameters["properties"]
    assert props["address"] == ADDRESS
    assert props["friends"]["items"] == {"description": "a User (recursive: see above)"}
    assert props["boss"] == {"description": "a User (recursive: see above)"}
    assert put.parameters["required"] == ["id", "name"]
    files = {str(Path(f).relative_to(described)) for f in get.meta["files"]}
    assert files == {
        "api.yaml", "paths/users.yaml", "parameters.yaml", "schemas/user.yaml",
        "schemas/address.json",
    }  # fmt: skip
    result = await call(put, id=7, name="Ada", address={"city": "Paris"})
    assert not result.is_error, result.content
    assert api.seen[-1]["path"] == "/users/7"
    assert json.loads(api.seen[-1]["body"]) == {"name": "Ada", "address": {"city": "Paris"}}


def _entry_with_ref(folder: Path, ref: str, **entry: Any) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "api.yaml").write_text(
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n"
        "      operationId: a\n      requestBody:\n        content:\n          application/json:\n"
        f"            schema: {{$ref: '{ref}'}}\n"
    )
    return {"openapi": "api.yaml", "base_url": "https://api.example.com", **entry}


@pytest.mark.parametrize("ref", ["../outside.yaml#/X", "sub/../../outside.yaml#/X"])
def test_a_reference_may_not_leave_the_folder(tmp_path: Path, ref: str) -> None:
    (tmp_path / "outside.yaml").write_text("X: {type: object, properties: {secret: {}}}\n")
    folder = tmp_path / "spec"
    with pytest.raises(ConfigError, match="outside the description's folder") as info:
        build(_entry_with_ref(folder, ref), folder)
    assert info.value.field == "openapi"


def test_an_absolute_path_outside_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.yaml").write_text("X: {type: string}\n")
    folder = tmp_path / "spec"
    with pytest.raises(ConfigError, match="outside the description's folder"):
        build(_entry_with_ref(folder, f"{tmp_path / 'outside.yaml'}#/X"), folder)


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.yaml").write_text("X: {type: string}\n")
    folder = tmp_path / "spec"
    folder.mkdir()
    os.symlink(tmp_path / "outside.yaml", folder / "inside.yaml")
    with pytest.raises(ConfigError, match="after following symlinks"):
        build(_entry_with_ref(folder, "./inside.yaml#/X"), folder)


def test_other_schemes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="only files of the description and http"):
        build(_entry_with_ref(tmp_path, "file:///etc/passwd"), tmp_path)


def test_a_missing_file_or_fragment_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'nope.yaml#/X', but .*nope.yaml does not exist"):
        build(_entry_with_ref(tmp_path, "nope.yaml#/X"), tmp_path)
    (tmp_path / "there.yaml").write_text("Y: {type: string}\n")
    with pytest.raises(SourceError, match=r"'there.yaml#/X', which does not exist"):
        build(_entry_with_ref(tmp_path, "there.yaml#/X"), tmp_path)


def test_a_cycle_across_files_is_cut(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "a.yaml": "A: {type: object, properties: {b: {$ref: 'b.yaml#/B'}}}\n",
            "b.yaml": "B: {type: object, properties: {a: {$ref: 'a.yaml#/A'}}}\n",
        },
    )
    tools = build(_entry_with_ref(tmp_path, "a.yaml#/A"), tmp_path)
    b = tools["a"].parameters["properties"]["b"]
    assert b["properties"]["a"] == {"description": "a A (recursive: see above)"}


def test_a_reference_chain_that_loops_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("P: {$ref: 'q.yaml#/Q'}\n")
    (tmp_path / "q.yaml").write_text("Q: {$ref: 'p.yaml#/P'}\n")
    (tmp_path / "api.yaml").write_text(
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n"
        "      operationId: a\n      parameters: [{$ref: 'p.yaml#/P'}]\n"
    )
    with pytest.raises(SourceError, match=r"\$ref cycle"):
        build({"openapi": "api.yaml", "base_url": "https://api.example.com"}, tmp_path)


def test_the_referenced_files_are_size_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "big.yaml").write_text("X: {type: string, description: '" + "x" * 5000 + "'}\n")
    entry = _entry_with_ref(tmp_path, "big.yaml#/X")
    monkeypatch.setattr(_openapi_refs, "MAX_DOCUMENT_BYTES", 4000)
    with pytest.raises(SourceError, match="more than 4,000 bytes"):
        build(entry, tmp_path)


def test_the_network_is_not_used_unless_allowed(tmp_path: Path, api: Api) -> None:
    api.files["schemas.yaml"] = b"X: {type: object, properties: {n: {type: integer}}}\n"
    ref = f"{api.url}/files/schemas.yaml#/X"
    with pytest.raises(ConfigError, match=r"on the network.*remote_refs: true") as info:
        build(_entry_with_ref(tmp_path, ref), tmp_path)
    assert info.value.field == "remote_refs"
    assert api.seen == []
    tools = build(_entry_with_ref(tmp_path, ref, remote_refs=True), tmp_path)
    assert tools["a"].parameters["properties"] == {"n": {"type": "integer"}}
    assert [s["path"] for s in api.seen] == ["/files/schemas.yaml"]


@pytest.mark.parametrize(
    ("ref", "fetched"),
    [("./common.yaml#/X", True), ("../common.yaml#/X", False), ("%2e%2e/common.yaml#/X", False)],
)
def test_a_downloaded_description_may_reach_only_its_own_folder(
    tmp_path: Path, api: Api, ref: str, fetched: bool
) -> None:
    api.files["v1/api.yaml"] = (
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n"
        "      operationId: a\n      requestBody:\n        content:\n          application/json:\n"
        f"            schema: {{$ref: '{ref}'}}\n"
    ).encode()
    api.files["v1/common.yaml"] = api.files["common.yaml"] = b"X: {type: object, properties: {}}\n"
    api.files["v1/%2e%2e/common.yaml"] = api.files["common.yaml"]
    entry = {"openapi": f"{api.url}/files/v1/api.yaml", "base_url": api.url, "remote_refs": True}
    if fetched:
        assert "a" in build(entry, tmp_path)
        assert [s["path"] for s in api.seen] == ["/files/v1/api.yaml", "/files/v1/common.yaml"]
    else:
        with pytest.raises(ConfigError, match="outside the folder the description was down"):
            build(entry, tmp_path)
        assert [s["path"] for s in api.seen] == ["/files/v1/api.yaml"]
